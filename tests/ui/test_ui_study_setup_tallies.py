"""The Study set-up window's Progress and Hard pairs tabs (and ``portalreview progress`` /
``hard-pairs``) kept the PI waiting 2.7 to 4.2 seconds at 10,000 cases
(``benchmarks/bench_setup.py``): every assignment and every answer of the study was read into
Python to be counted, and every answer scanned for the few asking for a second annotator.
The faster read must give exactly what the slow one gave: the same rows, in the same order,
with the same values of the same types."""

from __future__ import annotations

import contextlib
import importlib.util
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select
from test_ui_adjudication_fast_read import add_everything

from portalreview.store.adaptive import adaptive_settings
from portalreview.store.models import (
    Assignment,
    Case,
    UnitSet,
)
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import ProgressRow, hard_pairs, study_progress
from portalreview.ui.study_setup_dialog import read_tallies
from tests.store.test_store_live_frames import payload as random_payload

# --- the slow reference: the code before 2026-11-28, row by row -------------------------------

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_setup.py"


def _old_code() -> Any:
    """``benchmarks/bench_setup.py``, which keeps the code before 2026-11-28 as the reference
    it times (every assignment and answer read, then counted here; every answer scanned for
    those asking, the units read as ORM objects)."""
    spec = importlib.util.spec_from_file_location("portalreview_bench_setup", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


OLD = _old_code()
slow_study_progress = OLD.old_study_progress
slow_hard_pairs = OLD.old_hard_pairs


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
