"""Adaptive urgency pairs (issue 19, ``store/adaptive.py``): the ``adaptive-inbox`` recipe
makes every pair of an inbox, each clinician's queue shows one chosen pair at a time until
they made the set's judgements, never a pair twice, and an offline copy chooses as the master
does and merges back with every answer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sqlalchemy import select

from portalreview.cli import main
from portalreview.metrics.bradley_terry import bradley_terry
from portalreview.store.adaptive import AdaptiveSetting, default_judgements, meta_key
from portalreview.store.merge import make_copy, merge_copy
from portalreview.store.models import ProjectMeta, Unit
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    SetupError,
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)

pytestmark = pytest.mark.both_backends

PEOPLE = ("ava", "ben")
N = 12  # messages; 66 pairs, ceil(12 log2 12) = 44 judgements by default


def fill_inbox(project):
    svc = StudyService(project)
    for name in PEOPLE:
        svc.add_annotator(name)
    for i in range(N):
        svc.add_case(
            f"m{i:02d}", f"Message {i}.", urgency_level=1 + i % 6, tags={"inbox": "ward-3"}
        )
    return project


@pytest.fixture
def study(new_project):
    return fill_inbox(new_project("Adaptive"))


def make_adaptive(project, judgements: int = 0) -> int:
    plan = plan_units(project, "adaptive-inbox", inbox="ward-3", judgements=judgements)
    made = create_unit_set(project, plan)
    assign_units(project, plan_assignment(project, made.name, list(PEOPLE)))
    return made.unit_set_id


def pair_of(project, unit_id: int) -> tuple[int, int]:
    with project.read() as s:
        unit = s.get(Unit, unit_id)
        return unit.case_id, unit.case_b_id


def judge(person: StudyService, project, unit_id: int, truth: dict[int, int]) -> None:
    """Answer as a clinician who knows the reference levels (1 = most urgent)."""
    a, b = pair_of(project, unit_id)
    chosen = a if truth[a] <= truth[b] else b
    person.save_answer(unit_id, {"more_urgent_case_id": chosen}, status="submitted")


def levels_of(project) -> dict[int, int]:
    from portalreview.store.models import Case

    with project.read() as s:
        return {c.id: c.urgency_level for c in s.scalars(select(Case))}


def todo(person: StudyService) -> list[int]:
    return [q.unit_id for q in person.queue("urgency") if q.status == "todo"]


def test_the_plan_holds_every_pair_and_the_default_judgements(study):
    plan = plan_units(study, "adaptive-inbox", inbox="ward-3")
    assert len(plan.units) == 66 and plan.kind == "urgency"
    assert plan.options["judgements"] == 44 == default_judgements(N) == math.ceil(N * math.log2(N))
    assert "each clinician judges 44 of the 66 pairs (67%)" in plan.summary()
    made = create_unit_set(study, plan)
    with study.read() as s:
        stored = s.get(ProjectMeta, meta_key(made.unit_set_id)).value
    assert AdaptiveSetting.from_json(stored) == AdaptiveSetting(44)
    assert default_judgements(30) == 148 and default_judgements(100) == 665
    assert default_judgements(3) == 3  # never more than every pair


def test_bad_plans_are_refused(study):
    with pytest.raises(SetupError, match="more than the 66 pairs"):
        plan_units(study, "adaptive-inbox", inbox="ward-3", judgements=67)
    with pytest.raises(SetupError, match="chooses its own pairs"):
        plan_units(study, "adaptive-inbox", inbox="ward-3", comparisons_per_message=3)
    with pytest.raises(SetupError, match="for the adaptive-inbox recipe"):
        plan_units(study, "urgency", inbox="ward-3", judgements=10)
    with pytest.raises(SetupError, match="name the inbox"):
        plan_units(study, "adaptive-inbox")


def test_each_clinician_gets_the_whole_set_once(study):
    made = create_unit_set(study, plan_units(study, "adaptive-inbox", inbox="ward-3"))
    plan = plan_assignment(study, made.name, list(PEOPLE))
    assert plan.counts() == {"ava": 66, "ben": 66}
    assert "who judge 44 of them" in plan.summary()
    assign_units(study, plan)
    with pytest.raises(SetupError, match="ava already has the adaptive set"):
        plan_assignment(study, made.name, ["ava"])


def test_one_pair_at_a_time_until_the_judgements_are_made(study):
    make_adaptive(study, judgements=30)
    svc = StudyService(study)
    ava = svc.as_viewer("ava")
    truth = levels_of(study)
    assert svc.progress_by_kind(annotator_id=ava.viewer.annotator_id)["urgency"].total == 30
    seen = []
    for number in range(30):
        (unit_id,) = todo(ava)  # exactly one pair offered
        assert unit_id not in seen
        seen.append(unit_id)
        judge(ava, study, unit_id, truth)
        progress = ava.progress("urgency")
        assert (progress.done, progress.total) == (number + 1, 30)
    assert todo(ava) == [] and [q.unit_id for q in ava.queue("urgency")] == seen
    met = {c for u in seen[: N - 1] for c in pair_of(study, u)}
    assert len(met) == N  # the first n - 1 pairs met every message
    # ben's queue is his own: his first pair comes from his own chain
    assert len(todo(svc.as_viewer("ben"))) == 1


def test_a_draft_holds_the_next_pair_back(study):
    make_adaptive(study)
    ava = StudyService(study).as_viewer("ava")
    (first,) = todo(ava)
    a, _ = pair_of(study, first)
    ava.save_answer(first, {"levels": {str(a): 2}})  # a draft: levels only
    assert todo(ava) == [] and [q.status for q in ava.queue("urgency")] == ["draft"]
    ava.save_answer(first, {"more_urgent_case_id": a}, status="submitted")
    assert len(todo(ava)) == 1


def test_a_careful_clinician_sorts_the_inbox_with_the_judgements(study):
    make_adaptive(study)
    ava = StudyService(study).as_viewer("ava")
    truth = levels_of(study)
    while todo(ava):
        judge(ava, study, todo(ava)[0], truth)
    answered = [q.unit_id for q in ava.queue("urgency")]
    assert len(answered) == 44
    items = sorted({c for u in answered for c in pair_of(study, u)})
    index = {c: i for i, c in enumerate(items)}
    first, second, won = [], [], []
    for unit_id in answered:
        a, b = pair_of(study, unit_id)
        first.append(index[a])
        second.append(index[b])
        won.append(int(truth[a] <= truth[b]))
    theta = bradley_terry(len(items), np.array(first), np.array(second), np.array(won))
    order = [items[i] for i in np.argsort(-theta, kind="stable")]
    levels = [truth[c] for c in order]
    # 12 messages on 6 levels: sorted exactly up to the order within each level
    assert levels == sorted(levels)


def test_an_offline_copy_chooses_as_the_master_and_merges_back(tmp_path):
    project = fill_inbox(Project.create(tmp_path / "master.prproj", name="Adaptive"))
    make_adaptive(project)
    truth = levels_of(project)
    ava = StudyService(project).as_viewer("ava")
    for _ in range(5):
        judge(ava, project, todo(ava)[0], truth)
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    with Project.open(copy.path) as away:
        ava_away = StudyService(away).as_viewer("ava")
        assert todo(ava_away) == todo(ava)  # the same choice from the same answers
        for _ in range(10):
            judge(ava_away, away, todo(ava_away)[0], truth)
        answered_away = [q.unit_id for q in ava_away.queue("urgency") if q.status != "todo"]
        next_away = todo(ava_away)
    report = merge_copy(project, copy.path)
    assert len(report.added) == 10 and not report.conflicts and not report.skipped
    assert [q.unit_id for q in ava.queue("urgency") if q.status == "submitted"] == answered_away
    assert todo(ava) == next_away
    project.close()


def test_the_command_line_makes_and_hands_out_an_adaptive_inbox(tmp_path, capsys):
    path = tmp_path / "a.prproj"
    fill_inbox(Project.create(path, name="Adaptive")).close()
    argv = ["setup", str(path), "adaptive-inbox", "--inbox", "ward-3", "--judgements", "20"]
    assert main([*argv, "--name", "Ward 3 adaptive"]) == 0
    out = capsys.readouterr().out
    assert "66 urgency unit(s) (adaptive-inbox)" in out and "judges 20 of the 66 pairs" in out
    assert (
        main(["assign", str(path), "Ward 3 adaptive", "--annotator", "ava", "--annotator", "ben"])
        == 0
    )
    assert "who judge 20 of them" in capsys.readouterr().out
    assert main(["progress", str(path), "--by-kind", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)  # the judgements asked, not the 66 pairs
    assert {(r["annotator"], r["assigned"], r["submitted"]) for r in rows} == {
        ("ava", 20, 0),
        ("ben", 20, 0),
    }
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        assert len(todo(ava)) == 1 and ava.progress("urgency").total == 20


def test_a_clinician_on_a_server_works_through_an_adaptive_inbox(postgres_server):
    """As their own database role (row-level security on): the choice reads only what the
    clinician may read, and the blinded cases carry no reference level."""
    from portalreview.store.backends import ServerProject

    database = postgres_server.new_database()
    project = fill_inbox(ServerProject.create(postgres_server.url(database)))
    make_adaptive(project, judgements=15)
    truth = levels_of(project)
    postgres_server.admin_sql("CREATE ROLE ava_adaptive LOGIN PASSWORD 'secret-ava'")
    project.add_member("ava_adaptive", "ava")
    with ServerProject.open(postgres_server.url(database, "ava_adaptive", "secret-ava")) as own:
        ava = StudyService(own).as_viewer("ava")
        assert ava.progress("urgency").total == 15
        while todo(ava):
            (unit_id,) = todo(ava)
            judge(ava, project, unit_id, truth)  # (the levels: read by the PI's connection)
        assert ava.progress("urgency").done == 15
    project.close()


def test_the_study_progress_counts_the_judgements_asked(study):
    from portalreview.store.study_setup import study_progress

    make_adaptive(study, judgements=10)
    truth = levels_of(study)
    svc = StudyService(study)
    for who, count in (("ava", 4), ("ben", 2)):
        person = svc.as_viewer(who)
        for _ in range(count):
            judge(person, study, todo(person)[0], truth)
    rows = {r.annotator: r for r in study_progress(study)}
    assert (rows["ava"].assigned, rows["ava"].submitted, rows["ava"].todo) == (10, 4, 6)
    assert (rows["ben"].assigned, rows["ben"].submitted) == (10, 2)
    answered = {}
    for who in ("ava", "ben"):
        items = svc.as_viewer(who).queue("urgency")
        answered[who] = {q.unit_id for q in items if q.status == "submitted"}
    both = len(answered["ava"] & answered["ben"])
    assert rows["ava"].shared == rows["ben"].shared == both


def test_a_pi_who_takes_part_and_adjudicates_is_not_stuck(study):
    """The PI judges an adaptive inbox too: adjudicating the pair offered to them leaves it
    offered (gold is not their judgement), and a PI who adjudicated a pair before taking part
    is given the set all the same."""
    from portalreview.store.study_setup import study_progress

    svc = StudyService(study)
    svc.add_annotator("pat", role="pi")
    pat = svc.as_viewer("pat")
    plan = plan_units(study, "adaptive-inbox", inbox="ward-3", judgements=10)
    made = create_unit_set(study, plan)
    first = min(u.id for u in _units_of_set(study, made.unit_set_id))
    pat.save_answer(first, {"more_urgent_case_id": pair_of(study, first)[0]}, gold=True)
    assign_units(study, plan_assignment(study, made.name, ["ava", "pat"]))
    offered = todo(pat)
    assert len(offered) == 1 and str(pat.progress("urgency")) == "0 of 10 done"
    chosen = pair_of(study, offered[0])[0]
    pat.save_answer(offered[0], {"more_urgent_case_id": chosen}, status="submitted", gold=True)
    assert todo(pat) == offered and str(pat.progress("urgency")) == "0 of 10 done"
    judge(pat, study, offered[0], levels_of(study))
    assert len(todo(pat)) == 1 and str(pat.progress("urgency")) == "1 of 10 done"
    rows = {r.annotator: r for r in study_progress(study)}
    assert (rows["pat"].assigned, rows["pat"].submitted) == (10, 1)


def _units_of_set(project, set_id: int) -> list[Unit]:
    with project.read() as s:
        return list(s.scalars(select(Unit).where(Unit.unit_set_id == set_id)))


def test_info_counts_the_judgements_asked_as_progress_does(study):
    """``portalreview info`` counts an adaptive set by its judgements, not its pairs: a
    clinician's 10/66 there could never be finished."""
    from portalreview.store.study_setup import progress_by_kind, study_progress

    make_adaptive(study, judgements=10)
    svc = StudyService(study)
    judge(svc.as_viewer("ava"), study, todo(svc.as_viewer("ava"))[0], levels_of(study))
    people = svc.info()["kinds"]["urgency"]["annotators"]
    assert people["ava"] == {"assigned": 10, "answered": 1, "submitted": 1}
    assert people["ben"] == {"assigned": 10, "answered": 0, "submitted": 0}
    summed = {r.annotator: r.assigned for r in progress_by_kind(study_progress(study))}
    assert summed == {name: d["assigned"] for name, d in people.items()}
