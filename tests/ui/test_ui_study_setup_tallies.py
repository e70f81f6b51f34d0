"""The Study set-up window's Progress and Hard pairs tabs (and ``portalreview progress`` /
``hard-pairs``) kept the PI waiting 2.7 to 4.2 seconds at 10,000 cases
(``benchmarks/bench_setup.py``): every assignment and every answer of the study was read into
Python to be counted, and every answer scanned for the few asking for a second annotator.
The faster read must give exactly what the slow one gave: the same rows, in the same order,
with the same values of the same types."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import event, select
from test_ui_adjudication_fast_read import add_everything

from portalreview.store.adaptive import adaptive_settings
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    Case,
    Unit,
    UnitSet,
    UrgencyAnswer,
)
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import HardPair, ProgressRow, hard_pairs, study_progress
from portalreview.ui.study_setup_dialog import read_tallies
from tests.store.test_store_live_frames import payload as random_payload

# --- the slow reference: the code before 2026-11-28, row by row -------------------------------


def slow_study_progress(project: Project) -> list[ProgressRow]:
    """Every assignment and answer read, then counted here."""
    with project.read() as s:
        gold = set(
            s.execute(
                select(Assignment.unit_id, Assignment.annotator_id).where(
                    Assignment.is_gold_holder.is_(True)
                )
            )
        )
        settings = adaptive_settings(s)
        adaptive = {
            name: settings[set_id].judgements
            for set_id, name in s.execute(select(UnitSet.id, UnitSet.name))
            if set_id in settings
        }
        rows = [
            (u, a, name, set_name, kind)
            for u, a, name, set_name, kind in s.execute(
                select(
                    Assignment.unit_id,
                    Assignment.annotator_id,
                    Annotator.name,
                    UnitSet.name,
                    UnitSet.kind,
                )
                .join(Annotator, Annotator.id == Assignment.annotator_id)
                .join(Unit, Unit.id == Assignment.unit_id)
                .join(UnitSet, UnitSet.id == Unit.unit_set_id)
            )
            if (u, a) not in gold
        ]
        status = {
            (u, a): st
            for u, a, st in s.execute(
                select(Answer.unit_id, Answer.annotator_id, Answer.status).where(
                    Answer.is_gold.is_(False)
                )
            )
        }
        set_order = {
            n: i for i, n in enumerate(s.scalars(select(UnitSet.name).order_by(UnitSet.id)))
        }
    raters: dict[int, int] = {}
    for u, a, _name, set_name, _kind in rows:
        if set_name not in adaptive or (u, a) in status:
            raters[u] = raters.get(u, 0) + 1
    table: dict[tuple[str, str, str], list[int]] = {}
    for u, a, name, set_name, kind in rows:
        counts = table.setdefault((set_name, kind, name), [0, 0, 0, 0])
        st = status.get((u, a))
        if set_name in adaptive and st is None:
            continue
        counts[0] += 1
        counts[1] += raters.get(u, 0) > 1
        counts[2] += st == "draft"
        counts[3] += st == "submitted"
    for (set_name, _kind, _name), counts in table.items():
        if set_name in adaptive:
            counts[0] = max(counts[0], adaptive[set_name])
    return [
        ProgressRow(set_name, kind, name, *counts)
        for (set_name, kind, name), counts in sorted(
            table.items(), key=lambda item: (set_order[item[0][0]], item[0][2])
        )
    ]


def slow_hard_pairs(project: Project) -> list[HardPair]:
    """Every answer scanned for those asking, the units read as ORM objects."""
    with project.read() as s:
        asking: dict[int, set[str]] = {}
        for unit_id, name in s.execute(
            select(Answer.unit_id, Annotator.name)
            .join(UrgencyAnswer, UrgencyAnswer.answer_id == Answer.id)
            .join(Annotator, Annotator.id == Answer.annotator_id)
            .where(
                UrgencyAnswer.ask_second.is_(True),
                Answer.is_gold.is_(False),
                Answer.status == "submitted",
                Annotator.is_model.is_(False),
            )
        ):
            asking.setdefault(unit_id, set()).add(name)
        workers: dict[int, set[int]] = {}
        for unit_id, annotator_id in s.execute(
            select(Assignment.unit_id, Assignment.annotator_id)
            .join(Annotator, Annotator.id == Assignment.annotator_id)
            .where(
                Assignment.unit_id.in_(list(asking)),
                Assignment.is_gold_holder.is_(False),
                Annotator.is_model.is_(False),
            )
        ):
            workers.setdefault(unit_id, set()).add(annotator_id)
        adaptive = set(adaptive_settings(s))
        names = dict(s.execute(select(Case.id, Case.external_id)).all())
        sets = dict(s.execute(select(UnitSet.id, UnitSet.name)).all())
        units = s.scalars(
            select(Unit)
            .where(Unit.id.in_(list(asking)), Unit.kind == "urgency")
            .order_by(Unit.unit_set_id, Unit.position, Unit.id)
        )
        return [
            HardPair(
                unit_id=u.id,
                unit_set=sets[u.unit_set_id],
                cases=(names[u.case_id], names.get(u.case_b_id, "?")),
                asked_by=", ".join(sorted(asking[u.id])),
            )
            for u in units
            if u.unit_set_id not in adaptive and len(workers.get(u.id, ())) == 1
        ]


# --- a study with everything the counts must tell apart ---------------------------------------


def add_hard_pairs(service: StudyService) -> None:
    """Two more inboxes of urgency pairs over the demo's cases, handed to one clinician each
    (and to a model): she asks for a second annotator on some (hard pairs), in a draft on one
    (not yet), the model on others (not a person), and on one a colleague shares (not waiting);
    the PI holds a gold answer asking on another. Plus a clinician with nothing assigned, and
    one of the units the PI holds a gold answer of given to her as work."""
    rng = random.Random(2811)
    people = {a.name: a.id for a in service.annotators()}
    model = people["model-m"]
    with service.project.read() as s:
        cases = list(s.scalars(select(Case.id).order_by(Case.id)))[:8]
    for box, (person, colleague) in enumerate((("nurse_ava", "dr_ben"), ("dr_ben", "np_chloe"))):
        set_id = service.create_unit_set(f"Hard inbox {box}", "urgency")
        for i in range(10):
            a, b = rng.sample(cases, 2)
            unit = service.add_unit(set_id, a, case_b_id=b)
            service.assign(unit, people[person])
            service.assign(unit, model)
            choice = {"more_urgent_case_id": a}
            ask = {**choice, "ask_second": True}
            status = "draft" if i == 3 else "submitted"
            answer = ask if i % 2 == 0 or i == 3 else choice
            service.save_answer(unit, answer, status=status, annotator_id=people[person])
            service.save_answer(unit, ask, status="submitted", annotator_id=model)
            if i == 4:
                service.assign(unit, people[colleague])
                service.save_answer(unit, ask, status="submitted", annotator_id=people[colleague])
            if i == 6:
                service.save_answer(
                    unit, ask, status="submitted", annotator_id=people["dr_pi"], gold=True
                )
        # a pair of random answers too, whatever they ask
        unit = service.add_unit(set_id, cases[0], case_b_id=cases[1])
        service.assign(unit, people[person])
        payload = random_payload(service, unit, rng)
        service.save_answer(unit, payload, status="submitted", annotator_id=people[person])
    service.add_annotator("ivy")
    with service.project.read() as s:  # one unit the PI holds a gold answer of: now her work
        held = s.scalar(
            select(Assignment.unit_id)
            .where(Assignment.annotator_id == people["dr_pi"], Assignment.is_gold_holder)
            .order_by(Assignment.unit_id)
        )
    service.assign(held, people["dr_pi"])


@pytest.fixture
def rich_study(fresh_demo, request) -> Project:
    service = StudyService(fresh_demo)
    add_everything(service, adaptive=request.param)
    add_hard_pairs(service)
    return fresh_demo


@pytest.mark.both_backends
@pytest.mark.parametrize("rich_study", [False, True], ids=["", "adaptive"], indirect=True)
def test_the_fast_tallies_are_the_slow_ones(rich_study):
    progress, hard = study_progress(rich_study), hard_pairs(rich_study)
    # repr: True and 1 are equal to ==, not in the table
    assert repr(progress) == repr(slow_study_progress(rich_study))
    assert repr(hard) == repr(slow_hard_pairs(rich_study))
    tallies = read_tallies(rich_study)
    assert repr((tallies.progress, tallies.hard)) == repr((progress, hard))
    # the study had each case the counts must tell apart
    assert {r.annotator for r in progress} >= {"model-m", "dora"}
    assert "ivy" not in {r.annotator for r in progress}
    assert [(r.assigned, r.submitted) for r in progress if r.annotator == "dr_pi"] == [(1, 0)]
    assert all(sum((r.shared, r.drafts, r.submitted)) for r in progress if r.kind != "urgency")
    assert any(r.drafts for r in progress) and any(r.todo for r in progress)
    assert len({r.kind for r in progress}) == 7 and len({r.unit_set for r in progress}) >= 9
    assert [p.unit_set for p in hard].count("Hard inbox 0") == 4
    assert {p.asked_by for p in hard} >= {"nurse_ava", "dr_ben"}


@pytest.mark.both_backends
@pytest.mark.parametrize("rich_study", [True], ids=["adaptive"], indirect=True)
def test_an_adaptive_set_counts_the_judgements_asked(rich_study):
    """In an adaptive set a person is assigned the judgements asked of them (here 2) or the
    pairs they answered, if more; a pair is shared once someone else answered it too."""
    with rich_study.read() as s:
        set_id = next(iter(adaptive_settings(s)))
        name = s.get(UnitSet, set_id).name
    rows = [r for r in study_progress(rich_study) if r.unit_set == name]
    assert rows and all(r.assigned >= 2 for r in rows)
    assert repr(rows) == repr([r for r in slow_study_progress(rich_study) if r.unit_set == name])


# --- how it reads: rows counted by the database ------------------------------------------------


@contextlib.contextmanager
def rows_fetched(project: Project) -> Iterator[list[int]]:
    """How many rows each query run inside the block returned (each run again afterwards,
    on the same study, to count them)."""
    statements: list[tuple[str, Any]] = []

    def note(_conn, _cursor, statement, parameters, *_args) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            statements.append((statement, parameters))

    engine = project._engine
    event.listen(engine, "before_cursor_execute", note)
    counts: list[int] = []
    try:
        yield counts
    finally:
        event.remove(engine, "before_cursor_execute", note)
    with engine.connect() as connection:
        for statement, parameters in statements:
            counts.append(len(connection.exec_driver_sql(statement, parameters).all()))


def fetched(project: Project, read: Callable[[Project], Any]) -> int:
    with rows_fetched(project) as counts:
        read(project)
    return sum(counts)


def more_of_everything(service: StudyService) -> None:
    """40 more cases, and 40 more respond units of the demo's respond set for two clinicians,
    answered (agreement material): the same sets and people, more work."""
    people = {a.name: a.id for a in service.annotators()}
    with service.project.read() as s:
        set_id = s.scalar(select(UnitSet.id).where(UnitSet.kind == "respond"))
    payload = {"mode": "theme_guided", "parts": {"planning": "Call the clinic."}}
    for i in range(40):
        case = service.add_case(f"more-{i}", f"Message {i}.")
        unit = service.add_unit(set_id, case)
        for name in ("nurse_ava", "dr_ben"):
            service.assign(unit, people[name])
            service.save_answer(unit, payload, status="submitted", annotator_id=people[name])


@pytest.mark.both_backends
def test_the_tallies_read_as_many_rows_for_a_bigger_study(fresh_demo):
    """The rows read grow with the sets and people, not with the units, answers and cases
    (before: a row per assignment and answer, and every case's name)."""
    service = StudyService(fresh_demo)
    add_everything(service, adaptive=False)  # the model and the people the pairs need
    add_hard_pairs(service)
    before = {read.__name__: fetched(fresh_demo, read) for read in (study_progress, hard_pairs)}
    progress, hard = study_progress(fresh_demo), hard_pairs(fresh_demo)
    more_of_everything(service)
    after = {read.__name__: fetched(fresh_demo, read) for read in (study_progress, hard_pairs)}
    assert after == before
    assert hard_pairs(fresh_demo) == hard

    def respond_of_ava(rows: list[ProgressRow]) -> int:
        return sum(r.assigned for r in rows if r.kind == "respond" and r.annotator == "nurse_ava")

    assert respond_of_ava(study_progress(fresh_demo)) == respond_of_ava(progress) + 40
