"""Adjudication's read of one kind at 10,000 units kept the PI waiting 2 to 4 seconds a kind
(``benchmarks/bench_adjudication.py``): one queue read per annotator, ORM objects for every
answer and unit, every answer dumped to JSON to compare, a query per urgency pair for the
project's seed, and garbage collections walking the growing heap. The faster read must
show exactly what the slow one showed: the same units in the same order, the same answers
(payload, status, whose, gold), the same disagreements and the same list labels."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import random
from collections.abc import Iterator

import pytest
from sqlalchemy import event, select
from test_ui_adjudication_queries import counted_statements

from portalreview.store.adaptive import AdaptiveSetting, meta_key
from portalreview.store.kinds import CODECS
from portalreview.store.models import KINDS, Answer, Assignment, ProjectMeta, Unit, UnitSet
from portalreview.store.service import AnswerView, StudyService
from portalreview.ui import adjudication
from portalreview.ui.adjudication import (
    canonical,
    kinds_to_adjudicate,
    list_label,
    read_kind,
    same_canonical,
    unit_brief,
    units_of_kind,
)
from tests.store.test_store_live_frames import payload as random_payload

# --- the slow reference: the way the window read a kind before -----------------------------


def slow_units(service: StudyService, kind: str) -> list[int]:
    """Every unit of ``kind`` in anyone's queue: annotator by annotator, first met."""
    seen: dict[int, None] = {}
    for person in service.annotators():
        for item in service.queue(kind, annotator_id=person.id):
            seen.setdefault(item.unit_id, None)
    return list(seen)


def slow_answers(service: StudyService, unit_id: int) -> list[AnswerView]:
    """A unit's answers in id order, as ORM objects, each payload read on its own."""
    with service.project.read() as s:
        rows = s.scalars(select(Answer).where(Answer.unit_id == unit_id).order_by(Answer.id))
        return [
            AnswerView(
                answer_id=a.id,
                unit_id=a.unit_id,
                kind=a.kind,
                annotator_id=a.annotator_id,
                is_gold=a.is_gold,
                status=a.status,
                payload=CODECS[a.kind].read(s, a),
                active_seconds=a.active_seconds,
                flagged=a.flagged,
                flag_note=a.flag_note,
                comment=a.comment,
                suggestion_id=a.suggestion_id,
                suggestion_use=a.suggestion_use,
                updated_at=a.updated_at,
            )
            for a in rows.all()
        ]


def slow_read(service: StudyService, kind: str, include_drafts: bool) -> list[tuple]:
    """(unit, its people's answers, its gold, whether they differ), unit by unit."""
    models = {a.id for a in service.annotators() if a.is_model}
    out = []
    for unit_id in slow_units(service, kind):
        every = slow_answers(service, unit_id)
        answers = [
            a
            for a in every
            if not a.is_gold
            and a.annotator_id not in models
            and (include_drafts or a.status == "submitted")
        ]
        gold = next((a for a in every if a.is_gold), None)
        differs = len(answers) >= 2 and len({canonical(a.payload) for a in answers}) > 1
        out.append((unit_id, answers, gold, differs))
    return out


def slow_label(service: StudyService, unit_id: int) -> str:
    unit = service.read_unit(unit_id)
    return f"Unit {unit.position + 1} · {unit.unit_set}\n{unit_brief(unit)}"


# --- a study with everything the read must tell apart --------------------------------------


def with_ties(payload: dict) -> dict:
    """A rank answer with every response ranked first (a tie)."""
    return {"entries": [{**e, "rank": 1} for e in payload["entries"]]}


def add_everything(service: StudyService, adaptive: bool) -> None:
    """To the demo study (three clinicians and the PI, every kind, EPPC gold, units left
    to do): a model pseudo annotator's answers, a fourth clinician's drafts, copies of
    others' answers (agreement) and units given to her but not answered, gold answers of
    the PI on units not given to her, rank ties; ``adaptive``: an adaptive urgency set."""
    rng = random.Random(2611)
    pi = next(a.id for a in service.annotators() if a.role == "pi")
    model = service.add_annotator("model-m", is_model=True)
    dora = service.add_annotator("dora")
    for kind in KINDS:
        for i, unit in enumerate(slow_units(service, kind)[:9]):
            for person in (model, dora):
                service.assign(unit, person)
            existing = [a for a in slow_answers(service, unit) if not a.is_gold]
            save = service.save_answer
            save(unit, random_payload(service, unit, rng), status="submitted", annotator_id=model)
            if i % 3 == 0:
                draft = random_payload(service, unit, rng, complete=i % 2 == 0)
                save(unit, draft, annotator_id=dora)
            elif i % 3 == 1 and existing:
                copied = existing[0].payload
                if kind == "rank" and i % 2:
                    copied = with_ties(copied)
                save(unit, copied, status="submitted", annotator_id=dora)
            if i % 2 == 0 and not any(a.is_gold for a in slow_answers(service, unit)):
                gold = random_payload(service, unit, rng)
                save(unit, gold, status="submitted", annotator_id=pi, gold=True)
    if adaptive:
        with service.project.write() as s:
            set_id = s.scalar(select(UnitSet.id).where(UnitSet.kind == "urgency"))
            s.add(ProjectMeta(key=meta_key(set_id), value=AdaptiveSetting(2).to_json()))


@pytest.fixture
def rich_demo(fresh_demo, request):
    service = StudyService(fresh_demo)
    add_everything(service, adaptive=request.param)
    pi_name = next(a.name for a in service.annotators() if a.role == "pi")
    return service.as_viewer(pi_name)


@pytest.mark.both_backends
@pytest.mark.parametrize("rich_demo", [False, True], ids=["", "adaptive"], indirect=True)
def test_the_fast_read_shows_what_the_slow_read_showed(rich_demo):
    pi = rich_demo
    assigned = pi.assigned_kinds()
    expected_kinds = [k for k in KINDS if k in assigned and (k != "urgency" or slow_units(pi, k))]
    assert kinds_to_adjudicate(pi) == expected_kinds == list(KINDS)
    seen = {"differ": 0, "agree": 0, "gold": 0, "drafts": 0, "model": 0}
    models = {a.id for a in pi.annotators() if a.is_model}
    for kind in KINDS:
        for include_drafts in (False, True):
            loaded = read_kind(pi, kind, include_drafts, with_kinds=True)
            expected = slow_read(pi, kind, include_drafts)
            assert loaded.kinds == expected_kinds and loaded.kind == kind
            assert [r.unit_id for r in loaded.reports] == [e[0] for e in expected]
            for report, (unit_id, answers, gold, differs) in zip(
                loaded.reports, expected, strict=True
            ):
                # repr: True and 1, or 1 and 1.0, are equal to ==, not to the PI
                assert repr(report.answers) == repr(answers), (kind, unit_id)
                assert repr(report.gold) == repr(gold), (kind, unit_id)
                assert report.differs == differs, (kind, unit_id)
                seen["differ" if differs else "agree"] += len(answers) >= 2
                seen["gold"] += gold is not None
                seen["drafts"] += sum(a.status == "draft" for a in answers)
            differing = [e[0] for e in expected if e[3]]
            assert list(loaded.briefs) == differing
            for unit_id in differing:
                assert list_label(loaded.briefs[unit_id]) == slow_label(pi, unit_id)
        seen["model"] += sum(
            a.annotator_id in models for u in slow_units(pi, kind) for a in slow_answers(pi, u)
        )
    assert all(seen.values()), seen  # the study had each case the read must tell apart


# --- how it reads: the reasons it was slow, gone ---------------------------------------------


@pytest.mark.both_backends
def test_a_kinds_units_are_read_in_one_query_however_many_annotators(study):
    pi = study.service.as_viewer("pat")
    unit = study.units["respond"]
    with counted_statements(pi) as few:
        assert units_of_kind(pi, "respond") == [unit]
    for name in ("cid", "dee", "eve", "fay"):
        study.service.assign(unit, study.service.add_annotator(name))
    with counted_statements(pi) as many:
        assert units_of_kind(pi, "respond") == [unit]
    assert len(many) == len(few), "a query per annotator"


@contextlib.contextmanager
def orm_loads() -> Iterator[list[str]]:
    """The ORM objects of answers, units and assignments made inside the block."""
    made: list[str] = []
    listeners = [
        (model, lambda target, _ctx: made.append(type(target).__name__))
        for model in (Answer, Unit, Assignment)
    ]
    for model, listener in listeners:
        event.listen(model, "load", listener)
    try:
        yield made
    finally:
        for model, listener in listeners:
            event.remove(model, "load", listener)


def answered_study(study) -> StudyService:
    """The small study with ava and ben answering every unit differently."""
    rng = random.Random(5)
    svc = study.service
    for unit in study.units.values():
        for person in (study.ava, study.ben):
            payload = random_payload(svc, unit, rng)
            svc.save_answer(unit, payload, status="submitted", annotator_id=person)
    return svc.as_viewer("pat")


def test_the_read_makes_no_orm_objects_and_dumps_no_json(study, monkeypatch):
    pi = answered_study(study)
    dumps = []

    def counted_canonical(payload):
        dumps.append(payload)
        return canonical(payload)

    monkeypatch.setattr(adjudication, "canonical", counted_canonical)
    for kind in KINDS:
        with orm_loads() as made:
            loaded = read_kind(pi, kind, include_drafts=False, with_kinds=True)
        assert made == [], f"{kind}: ORM objects made"
        assert loaded.reports and loaded.briefs
    assert dumps == [], "answers dumped to JSON to compare them"


def test_the_read_runs_with_the_garbage_collector_paused(study, monkeypatch):
    pi = answered_study(study)
    collecting = []
    collect = adjudication.collect

    def watched(*args, **kwargs):
        collecting.append(gc.isenabled())
        return collect(*args, **kwargs)

    monkeypatch.setattr(adjudication, "collect", watched)
    assert gc.isenabled()
    read_kind(pi, "respond", include_drafts=False, with_kinds=False)
    assert collecting == [False] and gc.isenabled()


@pytest.mark.both_backends
def test_urgency_labels_read_as_many_statements_for_many_pairs_as_for_few(study):
    pi = study.service.as_viewer("pat")  # given none of them: each is drawn for the PI

    def pairs(n: int) -> list[int]:
        set_id = study.service.create_unit_set(f"pairs x{n}", "urgency")
        units = [
            study.service.add_unit(set_id, study.case1, case_b_id=study.case2) for _ in range(n)
        ]
        with counted_statements(pi) as statements:
            briefs = pi.unit_briefs(units)
        assert [list_label(briefs[u]) for u in units] == [slow_label(pi, u) for u in units]
        return statements

    assert len(pairs(8)) == len(pairs(2)), "a query per pair"


# --- comparing answers without dumping them ---------------------------------------------------

NAN = float("nan")
EDGE_PAIRS = [
    (1, 1.0),
    (True, 1),
    (False, 0),
    (0.0, -0.0),
    (NAN, NAN),
    (math.inf, math.inf),
    ([1, 2], (1, 2)),
    ([1, 2], [2, 1]),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ({1: "x"}, {"1": "x"}),
    ({"a": [1]}, {"a": (1,)}),
    ({"a": None}, {}),
    ({"a": None}, {"a": False}),
    ("é", "é"),
    ("1", 1),
    ({"a": [1, (2,)]}, {"a": [2, [2]]}),  # one pair differs, another is left open
]


@pytest.mark.parametrize(("a", "b"), EDGE_PAIRS)
def test_same_canonical_is_whether_the_json_dumps_are_equal(a, b):
    assert same_canonical(a, b) == (canonical(a) == canonical(b))
    assert same_canonical(b, a) == (canonical(a) == canonical(b))


def random_value(rng: random.Random, depth: int = 0):
    leaves = [0, 1, 1.0, -0.0, True, False, None, NAN, "a", "1", "é"]
    if depth > 2 or rng.random() < 0.4:
        return rng.choice(leaves)
    size = rng.randint(0, 3)
    shape = rng.choice(["list", "tuple", "text keys", "number keys"])
    if shape in ("list", "tuple"):
        items = [random_value(rng, depth + 1) for _ in range(size)]
        return items if shape == "list" else tuple(items)
    keys = rng.sample(["a", "b", "c"] if shape == "text keys" else [1, 2, 3], size)
    return {k: random_value(rng, depth + 1) for k in keys}


def test_same_canonical_agrees_with_the_dumps_on_random_values():
    rng = random.Random(11)
    values = [random_value(rng) for _ in range(300)]
    # a value and a copy made again from its dump, with its keys reordered
    again = [json.loads(canonical(v)) for v in values]
    for a, b in [*zip(values, again, strict=True), *zip(values, reversed(values), strict=True)]:
        assert same_canonical(a, b) == (canonical(a) == canonical(b)), (a, b)
