"""No one judges a response they wrote (seed 001 Sec. 5: "Clinicians did not evaluate their own
responses"): a hand-out keeps rank sets, empathy and facts pairs from the people who wrote one
of their responses, says so in its plan, and says which units get fewer people than asked;
match units, where a clinician matches a draft against their own reply, are handed out as
before. A hand-made plan giving someone their own reply is refused, an imported assignment of
one is named in the import's notes."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest
from sqlalchemy import select

from portalreview.cli import main
from portalreview.store.importers import import_files
from portalreview.store.models import AuditEntry
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    ResponseFilter,
    SetupError,
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)

pytestmark = pytest.mark.both_backends

REPLIES_AND_DRAFTS = ResponseFilter(author_kinds=("clinician", "model"))


def replies_study(
    project: Project,
    n_cases: int = 6,
    writers: Callable[[int], Sequence[str]] = lambda i: ("ava", "ben"),
) -> StudyService:
    """Cases each answered by two model drafts and a reply by each of ``writers(i)``, i the
    case's number; ava, ben and cy are annotators."""
    svc = StudyService(project)
    for name in ("ava", "ben", "cy"):
        svc.add_annotator(name)
    for i in range(n_cases):
        case = svc.add_case(f"c{i}", f"Message {i}: my cough is worse.")
        for name in writers(i):
            svc.add_response(
                case, f"c{i}-{name}", f"Reply by {name} to case {i}.",
                author_kind="clinician", author=name, production="real_time",
            )  # fmt: skip
        for model in ("m1", "m2"):
            svc.add_response(
                case, f"c{i}-{model}", f"Draft by {model} for case {i}.",
                author_kind="model", author=model, source=model, production="zero_shot",
            )  # fmt: skip
    return svc


def own_replies_seen(svc: StudyService, kinds=("rank", "empathy", "facts")) -> dict[str, int]:
    """Per annotator, the units in their queues showing them a reply they wrote."""
    seen = {}
    for person in svc.annotators():
        me = svc.as_viewer(person.name)
        seen[person.name] = sum(
            any(f"by {person.name} " in r.text for r in me.read_unit(item.unit_id).responses)
            for kind in kinds
            for item in me.queue(kind)
        )
    return seen


def rank_set(project: Project) -> str:
    return create_unit_set(project, plan_units(project, "rank", first=REPLIES_AND_DRAFTS)).name


def test_rank_sets_are_kept_from_the_authors_of_their_replies(new_project):
    project = new_project()
    svc = replies_study(project)
    name = rank_set(project)
    plan = plan_assignment(project, name, ["ava", "ben", "cy"], overlap=2, seed=3)
    assert {n: len(u) for n, u in plan.kept_from.items()} == {"ava": 6, "ben": 6}
    assert plan.counts() == {"ava": 0, "ben": 0, "cy": 6}  # the shared units and the rest
    assert "Kept from their authors (seed 001 Sec. 5" in plan.summary()
    assert "ava 6, ben 6 unit(s)" in plan.summary()
    assign_units(project, plan)
    assert own_replies_seen(svc) == {"ava": 0, "ben": 0, "cy": 0}
    assert len(svc.as_viewer("cy").queue("rank")) == 6
    with project.read() as s:
        details = json.loads(s.scalars(select(AuditEntry.new_json)).all()[-1])
    assert details["kept_from_authors"] == {"ava": 6, "ben": 6}


def test_loads_stay_even_where_some_units_are_kept_from_someone(new_project):
    """Only half the cases hold ava's reply: the others go to her, the split stays even."""
    project = new_project()
    svc = replies_study(project, n_cases=12, writers=lambda i: ("ava",) if i % 2 else ())
    plan = plan_assignment(project, rank_set(project), ["ava", "ben", "cy"], overlap=3, seed=5)
    assert len(plan.kept_from["ava"]) == 6
    assert not set(plan.kept_from["ava"]) & set(plan.shared_units)  # the overlap is complete
    assert sorted(plan.counts().values()) == [6, 6, 6] and plan.short_units == {}
    assign_units(project, plan)
    assert own_replies_seen(svc)["ava"] == 0


def test_too_few_annotators_left_is_said_not_hidden(new_project):
    """Every rank set holds a reply by ava and one by ben: handed to the two of them, no unit
    can go anywhere; the plan says so, and the units stay free for someone else."""
    project = new_project()
    svc = replies_study(project, n_cases=4)
    name = rank_set(project)
    plan = plan_assignment(project, name, ["ava", "ben"], overlap=4)
    assert plan.counts() == {"ava": 0, "ben": 0}
    assert plan.short_units == dict.fromkeys(plan.shared_units, 0) and len(plan.short_units) == 4
    summary = plan.summary()
    assert "Too few annotators: 4 unit(s) go to no one" in summary
    assert "stay unassigned: hand them out to others" in summary

    plan = plan_assignment(project, name, ["ava", "ben", "cy"], raters_per_unit=2)
    assert plan.counts() == {"ava": 0, "ben": 0, "cy": 4}
    assert plan.short_units == dict.fromkeys(plan.by_annotator["cy"], 1)
    assert "Too few annotators: 4 unit(s) go to fewer than 2" in plan.summary()
    assign_units(project, plan)
    assert own_replies_seen(svc) == {"ava": 0, "ben": 0, "cy": 0}


def test_empathy_and_facts_pairs_are_kept_from_the_original_replys_author(new_project):
    project = new_project()
    svc = replies_study(project, n_cases=3, writers=lambda i: ("ben",))
    pairs = {"first": ResponseFilter(authors=("ben",)), "second": ResponseFilter(sources=("m1",))}
    for recipe in ("empathy", "facts"):
        made = create_unit_set(project, plan_units(project, recipe, **pairs))
        plan = plan_assignment(project, made.name, ["ava", "ben"], overlap=3)
        assert plan.counts() == {"ava": 3, "ben": 0} and len(plan.kept_from["ben"]) == 3
        assert "Too few annotators: 3 shared unit(s) go to everyone but" in plan.summary()
        assign_units(project, plan)
    assert own_replies_seen(svc) == {"ava": 0, "ben": 0, "cy": 0}


def test_match_units_still_go_to_the_reference_author(new_project):
    """Matching a draft against one's own reply is the match task itself (seed 000)."""
    project = new_project()
    svc = replies_study(project, n_cases=2)
    made = create_unit_set(project, plan_units(project, "match"))
    plan = plan_assignment(project, made.name, ["ava", "ben"], overlap=made.n_units)
    assert plan.kept_from == {} and plan.counts() == {"ava": 8, "ben": 8}
    assert "Kept from" not in plan.summary()
    assign_units(project, plan)
    assert own_replies_seen(svc, kinds=("match",))["ava"] == 4


def test_a_plan_giving_someone_their_own_reply_is_refused(new_project):
    project = new_project()
    svc = replies_study(project, n_cases=2)
    name = rank_set(project)
    plan = plan_assignment(project, name, ["cy"])
    mine = replace(plan, by_annotator={"ava": plan.by_annotator["cy"]}, annotators=("ava",))
    with pytest.raises(SetupError, match="holds a response ava wrote: no one judges their own"):
        assign_units(project, mine)
    assert own_replies_seen(svc)["ava"] == 0


def test_an_imported_assignment_of_ones_own_reply_is_named(new_project, tmp_path):
    project = new_project()
    replies_study(project, n_cases=1)
    rank_set(project)
    rows = [
        {"unit": {"set": "rank units (every case)", "position": 0}, "annotator": name,
         "position": 0}
        for name in ("ava", "cy")
    ]  # fmt: skip
    path = tmp_path / "assignments.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = import_files(project, [path], dry_run=True)
    notes = [n for n in report.notes if "response they wrote" in n]
    assert len(notes) == 1
    assert "1 assignment(s) give a person a unit holding a response they wrote" in notes[0]
    assert "(ava: 'rank units (every case)' position 0)" in notes[0]


def test_the_command_line_plan_names_what_was_kept(tmp_path, capsys):
    path = tmp_path / "study.prproj"
    with Project.create(path, name="t") as project:
        replies_study(project, n_cases=4)
        name = rank_set(project)
    code = main(["assign", str(path), name, "--annotator", "ava", "--annotator", "ben",
                 "--overlap", "4", "--dry-run"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "Kept from their authors (seed 001 Sec. 5: no one judges a response they wrote): " \
        "ava 4, ben 4 unit(s)" in out  # fmt: skip
    assert "Too few annotators: 4 unit(s) go to no one" in out
