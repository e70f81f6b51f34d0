"""store.live_frames: after every kind of write, a refresh re-reads only what it must (or reads
everything when it must) and its frames equal a fresh ``read_frames``: the same columns, column
types, values, object values' types and row order."""

from __future__ import annotations

import json
import random
import shutil
import threading
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select, text

from portalreview.demo import build_demo
from portalreview.store import live_frames
from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.importers import import_files
from portalreview.store.live_frames import FrameChange, LiveFrames
from portalreview.store.merge import make_copy, merge_copy, open_conflicts, resolve_conflict
from portalreview.store.models import KINDS, Annotator, Answer, Assignment, Unit, UnitSet
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.templates import TemplateService
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

FRAMES = [f.name for f in fields(StudyFrames) if f.init]
ALL_KINDS = frozenset(KINDS)


# --- comparing frames -----------------------------------------------------------------------------


def _objects(series: pd.Series) -> list:
    """An object column's values with their types (NaN spelled out: it equals nothing)."""
    return [
        ("NaN",) if isinstance(v, float) and v != v else (type(v).__name__, v)
        for v in series.tolist()
    ]


def assert_same_frames(live: StudyFrames, fresh: StudyFrames) -> None:
    """``live`` holds what ``fresh`` holds: columns, dtypes, values, order, index."""
    for name in FRAMES:
        got, want = getattr(live, name), getattr(fresh, name)
        assert isinstance(got.index, pd.RangeIndex), name
        pd.testing.assert_frame_equal(
            got, want, check_dtype=True, check_exact=True, check_index_type=True, obj=name
        )
        for column in got.columns:
            if got[column].dtype == object:
                assert _objects(got[column]) == _objects(want[column]), (name, column)


def check(
    live: LiveFrames,
    project: Project,
    *,
    full: bool,
    kinds: set[str] | frozenset[str] | None = None,
    reread: int | None = None,
) -> FrameChange:
    """Refresh ``live`` and check what it reports and that it equals ``read_frames``."""
    change = live.refresh(project)
    assert change.full is full
    if full:
        assert change.changed_kinds == ALL_KINDS and change.n_answers_reread == 0
    if kinds is not None:
        assert change.changed_kinds == frozenset(kinds)
    if reread is not None:
        assert change.n_answers_reread == reread
    assert change.seconds >= 0
    assert_same_frames(change.frames, read_frames(project, include_drafts=live.include_drafts))
    return change


def unchanged(live: LiveFrames, project: Project, before: FrameChange) -> FrameChange:
    """A refresh that finds nothing to change in the frames: the same object comes back."""
    change = check(live, project, full=False, kinds=set())
    assert change.frames is before.frames
    return change


# --- studies and answers --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> Path:
    return build_demo(tmp_path_factory.mktemp("live-demo") / "demo.prproj")


@pytest.fixture
def demo(fresh_demo):
    """A fresh copy of the demo study (every kind answered, a queue left to do); a file, and
    a server study."""
    return fresh_demo, StudyService(fresh_demo)


@pytest.fixture
def small(new_project):
    """conftest's small study: one unit of each kind, assigned to ava and ben."""
    project = new_project("Small")
    return project, build_small_study(project)


def payload(svc: StudyService, unit_id: int, rng: random.Random, complete: bool = True) -> dict:
    """A random valid answer to the unit (``complete=False``: one that cannot be submitted)."""
    view = svc.read_unit(unit_id)
    catalogs = svc.catalogs
    kind = view.kind
    if kind == "respond":
        if view.responses:
            return {
                "mode": "edit_draft",
                "base_response_id": view.responses[0].id,
                "final_text": f"Edited {rng.random():.6f}" if complete else " ",
                "notes": rng.choice(["", "a note"]),
            }
        themes = [t.id for t in catalogs.themes]
        chosen = rng.sample(themes, rng.randint(1, 4)) if complete else []
        return {"mode": "theme_guided", "parts": {t: f"{t} {rng.random():.6f}" for t in chosen}}
    if kind == "rank":
        members = sorted(r.id for r in view.responses)
        entries = []
        for i, member in enumerate(members):
            correct = rng.choice([True, False]) if complete or i else None
            criteria = rng.sample([c.id for c in catalogs.criteria], rng.randint(1, 2))
            entries.append(
                {
                    "response_id": member,
                    "rank": rng.randint(1, len(members)),
                    "correct": correct,
                    "criteria": criteria if correct is False else [],
                }
            )
        return {"entries": entries}
    if kind == "match":
        reference, draft = view.responses
        decisions = [
            {"sentence_id": x.id, "spans": rng.choice([[], [[0, min(4, len(draft.text))]]])}
            for x in reference.sentences
        ]
        themes = [t.id for t in catalogs.themes]
        labels = [
            {"sentence_id": x.id, "theme": rng.choice(themes)}
            for x in (*reference.sentences, *draft.sentences)
        ]
        return {"decisions": decisions if complete else decisions[1:], "themes": labels}
    if kind == "urgency":
        pair = sorted(c.id for c in view.cases)
        levels = {str(c): rng.randint(1, 6) for c in pair if rng.random() < 0.3}
        return {
            "more_urgent_case_id": rng.choice(pair) if complete else None,
            "ask_second": rng.random() < 0.3,
            "levels": levels,
        }
    if kind == "eppc":
        codes = rng.sample(catalogs.eppc_codes, rng.randint(0, 3))
        end = min(3, len(view.sentence.text))
        return {
            "labels": [
                {
                    "code": code.id,
                    "subcode": rng.choice(code.subcodes).id if complete or i else None,
                    "spans": [[0, end]],
                }
                for i, code in enumerate(codes)
            ]
        }
    if kind == "empathy":
        if not complete:
            return {}
        choice = rng.choice([r.id for r in view.responses] + [None])
        return {"equal": True} if choice is None else {"more_empathetic_response_id": choice}
    categories = [c.id for c in catalogs.error_categories]
    facts = []
    for i in range(rng.randint(1, 4)):
        entailed = rng.choice([True, False]) if complete or i else None
        category = rng.choice(categories) if entailed is False and rng.random() < 0.6 else None
        facts.append(
            {
                "side": rng.choice(["original", "edited"]),
                "text": f"fact {rng.random():.6f}",
                "entailed": entailed,
                "error_category": category,
            }
        )
    return {"facts": facts}


def stored(project: Project, kind: str | None = None, status: str | None = None) -> list:
    """Answers as (answer_id, unit_id, annotator_id, is_gold, kind, status), in id order."""
    query = select(
        Answer.id, Answer.unit_id, Answer.annotator_id, Answer.is_gold, Answer.kind, Answer.status
    ).order_by(Answer.id)
    if kind is not None:
        query = query.where(Answer.kind == kind)
    if status is not None:
        query = query.where(Answer.status == status)
    with project.read() as s:
        return [tuple(r) for r in s.execute(query)]


def todo(project: Project, kind: str) -> tuple[int, int]:
    """(unit, annotator) of an assignment of ``kind`` without an answer."""
    with project.read() as s:
        answered = set(s.execute(select(Answer.unit_id, Answer.annotator_id)).all())
        rows = s.execute(
            select(Assignment.unit_id, Assignment.annotator_id)
            .join(Unit, Unit.id == Assignment.unit_id)
            .where(Unit.kind == kind)
            .order_by(Assignment.unit_id, Assignment.annotator_id)
        ).all()
    return next((u, a) for u, a in rows if (u, a) not in answered)


def flip_ask_second(svc: StudyService, answer: tuple) -> None:
    """Save an urgency answer again with its "ask a second opinion" the other way."""
    view = next(v for v in svc.answers_for_unit(answer[1]) if v.answer_id == answer[0])
    resave(svc, answer, {**view.payload, "ask_second": not view.payload["ask_second"]})


def resave(svc: StudyService, answer: tuple, new_payload: dict | None = None, **fields) -> None:
    """Save a stored answer again (its own payload unless one is given)."""
    answer_id, unit_id, annotator_id, is_gold, _, status = answer
    view = next(v for v in svc.answers_for_unit(unit_id) if v.answer_id == answer_id)
    svc.save_answer(
        unit_id,
        view.payload if new_payload is None else new_payload,
        status=fields.pop("status", status),
        annotator_id=annotator_id,
        gold=is_gold,
        **fields,
    )


# --- the first refresh, and no change -------------------------------------------------------------


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_first_refresh_is_full_and_a_second_finds_nothing(demo, include_drafts):
    project, _ = demo
    live = LiveFrames(include_drafts=include_drafts)
    assert live.frames is None
    first = check(live, project, full=True)
    assert live.frames is first.frames
    second = unchanged(live, project, first)
    assert second.n_answers_reread == 0


def test_live_frames_reset_reads_in_full_again(demo):
    project, _ = demo
    live = LiveFrames()
    first = check(live, project, full=True)
    live.reset()
    again = check(live, project, full=True)
    assert again.frames is not first.frames


# --- saving answers -------------------------------------------------------------------------------


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_a_new_draft_then_its_submission(demo, include_drafts):
    project, svc = demo
    rng = random.Random(1)
    live = LiveFrames(include_drafts=include_drafts)
    first = check(live, project, full=True)
    unit, person = todo(project, "match")
    answer = payload(svc, unit, rng)
    svc.save_answer(unit, answer, status="draft", annotator_id=person)
    if include_drafts:
        check(live, project, full=False, kinds={"match"}, reread=1)
    else:  # a draft is not in the frames: nothing changes
        change = check(live, project, full=False, kinds=set(), reread=1)
        assert change.frames is first.frames
    svc.save_answer(unit, answer, status="submitted", annotator_id=person)
    check(live, project, full=False, kinds={"match"}, reread=1)


FEWER = {"facts": ("facts", "facts"), "eppc": ("eppc_labels", "labels"),
         "respond": ("respond_parts", "parts")}  # fmt: skip


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_a_submitted_answer_saved_again_with_fewer_rows(demo, include_drafts):
    project, svc = demo
    live = LiveFrames(include_drafts=include_drafts)
    check(live, project, full=True)
    for kind, (table, key) in FEWER.items():
        before = live.frames
        rows = getattr(before, table).answer_id.value_counts()
        answer_id = int(rows.index[0])
        assert rows.iloc[0] > 1
        answer = next(a for a in stored(project, kind) if a[0] == answer_id)
        view = next(v for v in svc.answers_for_unit(answer[1]) if v.answer_id == answer_id)
        smaller = dict(view.payload)
        items = view.payload[key]
        smaller[key] = dict(list(items.items())[:1]) if isinstance(items, dict) else items[:1]
        resave(svc, answer, smaller)
        change = check(live, project, full=False, kinds={kind}, reread=1)
        after = getattr(change.frames, table)
        assert (after.answer_id == answer_id).sum() == 1
        assert len(after) == len(getattr(before, table)) - rows.iloc[0] + 1
        assert change.frames.urgency is before.urgency  # other kinds' frames are kept
    # match: the same rows, other spans
    matched = live.frames.match_decisions
    answer_id = int(matched[matched.spans.map(len) > 0].answer_id.iloc[0])
    answer = next(a for a in stored(project, "match") if a[0] == answer_id)
    view = next(v for v in svc.answers_for_unit(answer[1]) if v.answer_id == answer_id)
    decisions = [{**d, "spans": []} for d in view.payload["decisions"]]
    resave(svc, answer, {**view.payload, "decisions": decisions})
    check(live, project, full=False, kinds={"match"}, reread=1)


@pytest.mark.parametrize("kind", KINDS)
def test_live_frames_every_kind_saved_new_and_again(demo, kind):
    project, svc = demo
    rng = random.Random(kind)
    live = LiveFrames()
    check(live, project, full=True)
    unit, person = todo(project, kind)
    svc.save_answer(unit, payload(svc, unit, rng), status="submitted", annotator_id=person)
    check(live, project, full=False, kinds={kind}, reread=1)
    answer = stored(project, kind, "submitted")[3]
    resave(svc, answer, payload(svc, answer[1], rng), flagged=True, comment="look again")
    check(live, project, full=False, kinds={kind}, reread=1)


def test_live_frames_several_saves_between_two_refreshes(demo):
    project, svc = demo
    rng = random.Random(5)
    live = LiveFrames()
    check(live, project, full=True)
    kinds = ("rank", "urgency", "facts")
    for kind in kinds:
        for answer in stored(project, kind, "submitted")[:2]:
            resave(svc, answer, payload(svc, answer[1], rng))
    check(live, project, full=False, kinds=set(kinds), reread=6)


def test_live_frames_time_on_task_saved_without_an_audit_entry(demo):
    project, svc = demo
    live_submitted, live_all = LiveFrames(), LiveFrames(include_drafts=True)
    for live in (live_submitted, live_all):
        check(live, project, full=True)
    answer = stored(project, "eppc", "submitted")[7]
    resave(svc, answer, active_seconds=1234.5)  # the same answer: only the time changes
    for live in (live_submitted, live_all):
        check(live, project, full=False, kinds={"eppc"}, reread=1)
    unit, person = todo(project, "urgency")
    svc.save_answer(unit, payload(svc, unit, random.Random(3)), annotator_id=person)
    for live in (live_submitted, live_all):
        live.refresh(project)
    draft = stored(project, "urgency", "draft")[-1]
    resave(svc, draft, active_seconds=77.0)
    first = live_submitted.frames
    change = check(live_submitted, project, full=False, kinds=set(), reread=0)
    assert change.frames is first  # a draft's time is not in these frames
    check(live_all, project, full=False, kinds={"urgency"}, reread=1)


def test_live_frames_time_compared_answer_by_answer_or_all_at_once(demo, monkeypatch):
    project, svc = demo
    live = LiveFrames()
    check(live, project, full=True)
    monkeypatch.setattr(live_frames, "MAX_BLOCKS_ONE_BY_ONE", 0)
    answers = stored(project, "rank", "submitted")
    resave(svc, answers[0], active_seconds=1.0)
    resave(svc, answers[-1], active_seconds=2.0)
    check(live, project, full=False, kinds={"rank"}, reread=2)


def test_live_frames_a_gold_answer_and_its_first_assignment(demo):
    project, svc = demo
    rng = random.Random(7)
    live = LiveFrames()
    first = check(live, project, full=True)
    pi = next(a.id for a in svc.annotators() if a.role == "pi")
    with project.read() as s:
        gold_units = set(s.scalars(select(Answer.unit_id).where(Answer.is_gold.is_(True))))
    unit = next(a[1] for a in stored(project, "empathy") if a[1] not in gold_units)
    # The PI's first gold answer to the unit also assigns it to them.
    svc.save_answer(unit, payload(svc, unit, rng), status="submitted", annotator_id=pi, gold=True)
    change = check(live, project, full=False, kinds={"empathy"}, reread=1)
    assert change.frames.answers.is_gold.sum() == first.frames.answers.is_gold.sum() + 1
    gold = next(a for a in stored(project, "empathy") if a[1] == unit and a[3])
    resave(svc, gold, payload(svc, unit, rng))
    check(live, project, full=False, kinds={"empathy"}, reread=1)


def test_live_frames_an_unchanged_save_and_a_comment_change_nothing(demo):
    project, svc = demo
    live = LiveFrames()
    first = check(live, project, full=True)
    answer = stored(project, "urgency", "submitted")[0]
    resave(svc, answer)  # nothing new: no audit entry, the same rows written again
    after = unchanged(live, project, first)
    resave(svc, answer, comment="seen", flag_note="note")  # audited, but not in the frames
    change = check(live, project, full=False, kinds=set(), reread=1)
    assert change.frames is after.frames


def test_live_frames_an_assignment_alone_changes_nothing(demo):
    project, svc = demo
    live = LiveFrames()
    with project.read() as s:
        unit_set, case_id = s.execute(
            select(Unit.unit_set_id, Unit.case_id).where(Unit.kind == "respond")
        ).first()
    unit = svc.add_unit(unit_set, case_id)
    first = check(live, project, full=True)
    ben = next(a.id for a in svc.annotators() if a.name == "dr_ben")
    svc.assign(unit, ben)
    unchanged(live, project, first)
    answer = payload(svc, unit, random.Random(2))
    svc.save_answer(unit, answer, status="submitted", annotator_id=ben)
    check(live, project, full=False, kinds={"respond"}, reread=1)


def test_live_frames_a_suggestion_used(small):
    project, study = small
    svc = study.service
    live = LiveFrames()
    first = check(live, project, full=True)
    assert first.frames.answers.suggestion_use.dtype == object  # no answer yet
    unit = study.units["urgency"]
    suggestion = svc.add_suggestion(
        unit,
        {"more_urgent_case_id": study.case1},
        model_file="m.gguf",
        model_sha256="b" * 64,
        template_id="urgency-v1",
    )
    unchanged(live, project, first)  # a suggestion alone is not in the frames
    svc.save_answer(
        unit,
        {"more_urgent_case_id": study.case1},
        status="submitted",
        annotator_id=study.ava,
        suggestion_id=suggestion,
        suggestion_use="accepted",
    )
    svc.save_answer(
        unit, {"more_urgent_case_id": study.case2}, status="submitted", annotator_id=study.ben
    )
    change = check(live, project, full=False, kinds={"urgency"}, reread=2)
    assert pd.api.types.is_string_dtype(change.frames.answers.suggestion_use)


# --- column types that follow every stored row ----------------------------------------------------


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_a_draft_makes_a_column_nullable_and_back(small, include_drafts):
    project, study = small
    svc = study.service
    units = study.units
    live = LiveFrames(include_drafts=include_drafts)
    check(live, project, full=True)
    complete = {
        "entries": [
            {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
            {"response_id": study.draft2, "rank": 2, "correct": False, "criteria": ["C2"]},
        ]
    }
    svc.save_answer(units["rank"], complete, status="submitted", annotator_id=study.ava)
    change = check(live, project, full=False, kinds={"rank"}, reread=1)
    assert change.frames.rank_entries.correct.dtype == bool
    assert change.frames.rank_entries.criteria.dtype == object
    # ben's draft leaves one response unjudged: a NULL, so every frame's column is nullable.
    unjudged = json.loads(json.dumps(complete))
    unjudged["entries"][1]["correct"] = None
    unjudged["entries"][1]["criteria"] = []
    unjudged["entries"][0]["rank"] = None
    svc.save_answer(units["rank"], unjudged, status="draft", annotator_id=study.ben)
    change = check(live, project, full=False, kinds={"rank"}, reread=1)
    assert change.frames.rank_entries.correct.dtype == object
    assert change.frames.rank_entries["rank"].dtype == float
    svc.save_answer(units["rank"], complete, status="submitted", annotator_id=study.ben)
    change = check(live, project, full=False, kinds={"rank"}, reread=1)
    assert change.frames.rank_entries.correct.dtype == bool
    assert change.frames.rank_entries["rank"].dtype == np.int64


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_a_table_that_empties_and_fills(small, include_drafts):
    project, study = small
    svc = study.service
    unit = study.units["facts"]
    live = LiveFrames(include_drafts=include_drafts)
    first = check(live, project, full=True)
    assert first.frames.facts.empty
    fact = {"side": "edited", "text": "Go now.", "entailed": True, "error_category": None}
    svc.save_answer(unit, {"facts": [fact]}, status="submitted", annotator_id=study.ava)
    check(live, project, full=False, kinds={"facts"}, reread=1)
    # A draft now: its row stays stored, so the frame keeps its types with no row (or one).
    svc.save_answer(unit, {"facts": [fact]}, status="draft", annotator_id=study.ava)
    check(live, project, full=False, kinds={"facts"}, reread=1)
    # No fact at all: no row stored, the frame is the empty frame of a table without rows.
    svc.save_answer(unit, {"facts": []}, status="draft", annotator_id=study.ava)
    change = check(live, project, full=False, reread=1)
    assert change.frames.facts.empty
    svc.save_answer(
        study.units["respond"],
        {"mode": "edit_draft", "base_response_id": study.draft1, "final_text": "Go now."},
        status="submitted",
        annotator_id=study.ben,
    )
    change = check(live, project, full=False, kinds={"respond"}, reread=1)
    assert pd.api.types.is_string_dtype(change.frames.respond_answers.final_text)


# --- merging offline copies -----------------------------------------------------------------------


@pytest.mark.parametrize("include_drafts", [False, True])
def test_live_frames_merging_a_copy_and_settling_its_conflicts(small, tmp_path, include_drafts):
    project, study = small
    svc, units = study.service, study.units
    svc.save_answer(
        units["urgency"],
        {"more_urgent_case_id": study.case1},
        status="submitted",
        annotator_id=study.ava,
    )
    svc.save_answer(units["empathy"], {"equal": True}, status="submitted", annotator_id=study.ava)
    live = LiveFrames(include_drafts=include_drafts)
    first = check(live, project, full=True)
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    unchanged(live, project, first)  # the "copy" entry changes nothing
    with Project.open(copy) as theirs:
        ava = StudyService(theirs).as_viewer("ava")
        ava.save_answer(units["urgency"], {"more_urgent_case_id": study.case2}, status="submitted")
        ava.save_answer(units["empathy"], {"more_empathetic_response_id": study.edited})
        ava.save_answer(units["rank"], {"entries": []})  # added: new in the copy
    # Meanwhile the master changes the same two answers otherwise: two conflicts.
    svc.save_answer(units["urgency"], {"more_urgent_case_id": study.case1, "ask_second": True},
                    status="submitted", annotator_id=study.ava)  # fmt: skip
    svc.save_answer(units["empathy"], {"more_empathetic_response_id": study.original},
                    status="submitted", annotator_id=study.ava)  # fmt: skip
    check(live, project, full=False, kinds={"urgency", "empathy"}, reread=2)
    before = live.frames
    report = merge_copy(project, copy)
    assert len(report.added) == 1 and len(report.conflicts) == 2
    change = check(live, project, full=False, reread=1)  # the rank answer, added as a draft
    assert change.changed_kinds == ({"rank"} if include_drafts else set())
    assert (change.frames is before) is not include_drafts
    keep, take = sorted(open_conflicts(project), key=lambda c: c.kind)
    resolve_conflict(project, keep, "master")  # a "resolve" entry only
    before = live.frames
    change = check(live, project, full=False, kinds=set(), reread=0)
    assert change.frames is before
    resolve_conflict(project, take, "copy")
    check(live, project, full=False, kinds={take.kind}, reread=1)


# --- writes that are not answers: read in full ----------------------------------------------------


def _write_of(name: str, project: Project, svc: StudyService, tmp_path: Path) -> None:
    """One write of the set-up or the study material (each must make the next refresh full)."""
    if name == "case":
        svc.add_case("new-case", "A new message. With two sentences.", urgency_level=3)
    elif name == "response":
        svc.add_response(1, "new-response", "A new reply.", author_kind="clinician")
    elif name == "unit":
        with project.read() as s:
            unit_set, case_id = s.execute(
                select(Unit.unit_set_id, Unit.case_id).where(Unit.kind == "respond")
            ).first()
        svc.add_unit(unit_set, case_id)
    elif name == "unit_set":
        svc.create_unit_set("another set", "urgency")
    elif name == "annotator":
        svc.add_annotator("newcomer")
    elif name == "catalogs":
        svc.extend_catalogs({"criteria": [{"id": "C4", "name": "C4", "definition": "More."}]})
    elif name == "import":  # an answer, from the portable format
        unit_id, person = todo(project, "empathy")
        with project.read() as s:
            unit = s.get(Unit, unit_id)
            unit_set = s.get(UnitSet, unit.unit_set_id).name
            name_of = s.get(Annotator, person).name
        row = {"kind": "empathy", "unit": {"set": unit_set, "position": unit.position},
               "annotator": name_of, "status": "submitted", "answer": {"equal": True}}  # fmt: skip
        path = tmp_path / "answers.jsonl"
        path.write_text(json.dumps(row) + "\n", encoding="utf-8")
        import_files(project, [path])
    elif name == "gold_holder_to_work":  # the PI's gold answer, now shown in a new order
        pi = next(a.id for a in svc.annotators() if a.role == "pi")
        with project.read() as s:
            gold_units = set(s.scalars(select(Answer.unit_id).where(Answer.is_gold.is_(True))))
            taken = set(s.scalars(select(Assignment.unit_id).where(Assignment.annotator_id == pi)))
        unit = next(a[1] for a in stored(project, "empathy") if a[1] not in gold_units | taken)
        answer = payload(svc, unit, random.Random(3))
        svc.save_answer(unit, answer, status="submitted", annotator_id=pi, gold=True)
        svc.assign(unit, pi)  # (the gold answer's sides: shown as they now are to the PI)
    else:  # rows changed in place, as no code of ours does: the fingerprint sees them
        statement = {
            "urgency_level": "UPDATE cases SET urgency_level = 7 - urgency_level "
            "WHERE id = (SELECT min(id) FROM cases WHERE urgency_level IN (1, 2))",
            "annotator_name": "UPDATE annotators SET name = 'renamed' WHERE id = 1",
            "model_flag": "UPDATE annotators SET is_model = true WHERE id = 1",
            "unit_set_name": "UPDATE unit_sets SET name = 'renamed' WHERE id = 1",
            "assignment_gone": "DELETE FROM assignments WHERE rowid = (SELECT max(rowid) "
            "FROM assignments WHERE (unit_id, annotator_id) NOT IN "
            "(SELECT unit_id, annotator_id FROM answers))",
        }[name]
        with project.write() as s:
            s.execute(text(statement))


NOT_ANSWERS = [
    "case",
    "response",
    "unit",
    "unit_set",
    "annotator",
    "catalogs",
    "import",
    "gold_holder_to_work",
    "urgency_level",
    "annotator_name",
    "model_flag",
    "unit_set_name",
    "assignment_gone",
]


@pytest.mark.parametrize("include_drafts", [False, True])
@pytest.mark.parametrize("write", NOT_ANSWERS)
def test_live_frames_writes_other_than_answers_read_in_full(demo, tmp_path, write, include_drafts):
    project, svc = demo
    live = LiveFrames(include_drafts=include_drafts)
    check(live, project, full=True)
    answer = stored(project, "rank", "submitted")[0]
    resave(svc, answer, payload(svc, answer[1], random.Random(9)))  # with an answer, too
    _write_of(write, project, svc, tmp_path)
    check(live, project, full=True)
    resave(svc, answer, active_seconds=5.0)
    check(live, project, full=False, kinds={"rank"}, reread=1)  # and incremental again


def test_live_frames_safe_audit_entries_change_nothing(demo, tmp_path):
    project, svc = demo
    live = LiveFrames()
    first = check(live, project, full=True)
    TemplateService(svc).save("my-template", "urgency", "Who first?")
    make_copy(project, tmp_path / "copy.prproj", annotator="dr_ben")
    change = unchanged(live, project, first)
    assert change.n_answers_reread == 0


@pytest.mark.file_only  # backups and other files are a file's matters
def test_live_frames_a_restored_or_other_file_is_read_in_full(demo, demo_file, tmp_path):
    project, svc = demo
    older = project.backup()  # the state now, in the backups folder
    live = LiveFrames()
    check(live, project, full=True)
    for answer in stored(project, "urgency", "submitted")[:3]:
        flip_ask_second(svc, answer)
    check(live, project, full=False, kinds={"urgency"}, reread=3)
    with Project.open(older, read_only=True) as restored:
        check(live, restored, full=True)  # the audit log went back
    check(live, project, full=True)
    # Another copy of the same file where other answers were saved: as many audit entries,
    # other ones.
    other_path = tmp_path / "other.prproj"
    shutil.copy(demo_file, other_path)
    with Project.open(other_path, automatic_backup=False) as other:
        for answer in stored(other, "urgency", "submitted")[3:6]:
            flip_ask_second(StudyService(other), answer)
        with other.read() as s, project.read() as t:
            last = "SELECT max(id) FROM audit_log"
            assert s.execute(text(last)).scalar() == t.execute(text(last)).scalar()
        check(live, other, full=True)


def test_live_frames_many_answers_are_read_in_full(demo, monkeypatch):
    project, svc = demo
    live = LiveFrames()
    check(live, project, full=True)
    monkeypatch.setattr(live_frames, "FULL_READ_SHARE", 0.001)
    for answer in stored(project, "eppc", "submitted")[:3]:
        resave(svc, answer, active_seconds=9.0)
    check(live, project, full=True)


def test_live_frames_refresh_on_a_worker_thread(demo):
    project, svc = demo
    live = LiveFrames()
    results: list[FrameChange] = []
    worker = threading.Thread(target=lambda: results.append(live.refresh(project)))
    worker.start()
    worker.join()
    answer = stored(project, "facts", "submitted")[0]
    resave(svc, answer, payload(svc, answer[1], random.Random(4)))
    worker = threading.Thread(target=lambda: results.append(live.refresh(project)))
    worker.start()
    worker.join()
    assert [r.full for r in results] == [True, False]
    assert_same_frames(results[-1].frames, read_frames(project))


# --- many random saves ----------------------------------------------------------------------------


class RandomSaves:
    """Random saves of every kind on a study: new answers, drafts, submissions, answers saved
    over, gold answers, flags, and the time on task alone."""

    def __init__(self, project: Project, svc: StudyService) -> None:
        self.project, self.svc = project, svc
        self.pi = next(a.id for a in svc.annotators() if a.role == "pi")
        with project.read() as s:
            assignments = s.execute(
                select(Assignment.unit_id, Assignment.annotator_id, Unit.kind).join(
                    Unit, Unit.id == Assignment.unit_id
                )
            ).all()
        self.by_kind: dict[str, list] = {}
        for unit, person, kind in assignments:
            self.by_kind.setdefault(kind, []).append((unit, person))

    def one(self, rng: random.Random) -> None:
        """One random save."""
        kind = rng.choice(KINDS)
        unit, person = rng.choice(self.by_kind[kind])
        gold = rng.random() < 0.1
        if rng.random() < 0.2:  # the time on task alone, of an answer of this kind
            answer = rng.choice(stored(self.project, kind))
            resave(self.svc, answer, active_seconds=round(rng.uniform(1, 500), 1))
            return
        complete = rng.random() < 0.75
        self.svc.save_answer(
            unit,
            payload(self.svc, unit, rng, complete=complete),
            status="submitted" if complete and rng.random() < 0.8 else "draft",
            annotator_id=self.pi if gold else person,
            gold=gold,
            flagged=rng.random() < 0.1,
            active_seconds=round(rng.uniform(1, 300), 1),
        )


def random_saves(project: Project, svc: StudyService, seed: int, steps: int) -> set[str]:
    """Random saves (:class:`RandomSaves`), checked after most saves by two live frames (with
    and without drafts); the kinds they saw change."""
    rng = random.Random(seed)
    saves = RandomSaves(project, svc)
    lives = [LiveFrames(), LiveFrames(include_drafts=True)]
    for live in lives:
        check(live, project, full=True)
    seen = set()
    for _ in range(steps):
        saves.one(rng)
        if rng.random() < 0.7:  # else two saves between refreshes
            for live in lives:
                seen |= check(live, project, full=False).changed_kinds
    return seen


def test_live_frames_random_saves_equal_read_frames_after_every_refresh(demo):
    project, svc = demo
    assert len(random_saves(project, svc, 20261122, 36)) >= 5


@pytest.mark.parametrize("path", ["sorted", "joined"])
def test_live_frames_random_saves_through_each_way_of_splicing(demo, monkeypatch, path):
    project, svc = demo
    monkeypatch.setattr(live_frames, "_overwritten", lambda *args: None)  # no short cut
    if path == "sorted":  # many answers' way: a mask and a stable sort
        monkeypatch.setattr(live_frames, "_MAX_SLICES", 0)
    assert len(random_saves(project, svc, 7, 24)) >= 4


# --- the comparison itself ------------------------------------------------------------------------


def test_live_frames_a_splice_that_skips_a_table_is_caught(demo, monkeypatch):
    project, svc = demo
    live = LiveFrames()
    check(live, project, full=True)
    monkeypatch.setattr(
        live_frames, "DETAIL_TABLES", tuple(n for n in live_frames.DETAIL_TABLES if n != "facts")
    )
    answer = stored(project, "facts", "submitted")[0]
    resave(svc, answer, payload(svc, answer[1], random.Random(8)))
    with pytest.raises(AssertionError):
        check(live, project, full=False)


def test_live_frames_the_comparison_sees_none_against_nan():
    frame = pd.DataFrame({"answer_id": [1], "subcode": np.array([None], dtype=object)})
    other = pd.DataFrame({"answer_id": [1], "subcode": np.array([np.nan], dtype=object)})
    frames = StudyFrames(**{name: frame for name in FRAMES})
    others = StudyFrames(**{name: other for name in FRAMES})
    with pytest.raises(AssertionError):
        assert_same_frames(frames, others)


@pytest.mark.parametrize(
    "ids",
    [[], [1], [0, 1, 2], list(range(3, 700)), [*range(1, 600), 900], [5, 7, 256, 1000]],
)
def test_live_frames_block_counts_from_the_id_range_equal_the_counted(ids):
    # Without gaps the blocks' counts follow from the ids' range; with gaps they are counted:
    # either way each block's count of ids, as counting every block in SQL gives it.
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    with Session(create_engine("sqlite://")) as s:
        s.execute(text("CREATE TABLE answers (id INTEGER PRIMARY KEY, active_seconds REAL)"))
        for answer_id in ids:
            s.execute(text("INSERT INTO answers VALUES (:id, 1.0)"), {"id": answer_id})
        sums = live_frames.sql_rows(s, live_frames._BLOCK_SUMS["sqlite"])
        counted = [row[0] for row in live_frames.sql_rows(s, live_frames._BLOCK_COUNTS_SQL)]
        found = live_frames.block_counts(s, len(sums))
    expected = np.bincount(np.array(ids, dtype=np.int64) >> live_frames.BLOCK_BITS)
    expected = np.pad(expected, (0, len(sums) - len(expected)))
    assert found.tolist() == counted == expected.tolist()
    assert found.dtype == np.int64 and [row[0] for row in sums] == expected.tolist()
