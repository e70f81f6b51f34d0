"""Offline copies merged back into the master: answers added, conflicts kept for the PI,
nothing overwritten, recorded in the audit log, idempotent; foreign copies refused."""

from __future__ import annotations

import csv
import json
import sqlite3
from dataclasses import replace

import pytest
from sqlalchemy import func, select

from portalreview.cli import main
from portalreview.store.errors import StoreError
from portalreview.store.merge import (
    MergeRefused,
    make_copy,
    merge_copies,
    merge_copy,
    open_conflicts,
    resolve_conflict,
    write_conflicts,
)
from portalreview.store.models import Answer, AuditEntry, Response
from portalreview.store.project import Project, backup_dir
from portalreview.store.service import StudyService
from portalreview.store.study_setup import Cancelled, EventRecorder
from tests.conftest import build_small_study


def _urgent(case_id: int) -> dict:
    return {"more_urgent_case_id": case_id}


def _snapshot(project: Project) -> tuple:
    """Every answer's state and the audit log's length: what a merge could change."""
    svc = StudyService(project)
    with project.read() as s:
        units = sorted(set(s.scalars(select(Answer.unit_id))))
        n_audit = s.scalar(select(func.count()).select_from(AuditEntry))
    answers = sorted(
        (a.unit_id, a.annotator_id, a.is_gold, a.status, json.dumps(a.payload, sort_keys=True))
        for u in units
        for a in svc.answers_for_unit(u)
    )
    return tuple(answers), n_audit


def _edit(path, annotator: str, unit: int, payload: dict, status: str = "submitted") -> None:
    with Project.open(path) as copy:
        StudyService(copy).as_viewer(annotator).save_answer(unit, payload, status=status)


@pytest.fixture
def master(new_project):
    """The master study: a file, or (tests marked both_backends) a server study too."""
    with new_project("Master") as p:
        study = build_small_study(p)
        ava = study.service.as_viewer("ava")
        ava.save_answer(study.units["urgency"], _urgent(study.case1), status="submitted")
        ben = study.service.as_viewer("ben")
        ben.save_answer(study.units["empathy"], {"equal": True}, status="submitted")
        yield p, study


def test_open_conflicts_reads_only_the_answers_a_conflict_names(master, tmp_path, monkeypatch):
    """Listing the open conflicts reads no answer when no merge found a conflict, and only the
    conflicted answers after one did: reading every answer froze the Offline copies window
    for a minute on a 1,000-case study that had never merged a copy."""
    project, study = master
    units = study.units
    viewed: list[tuple[int, int]] = []  # (unit, annotator) of each answer read
    real_view = EventRecorder._answer_view

    def counted_view(s, answer):
        viewed.append((answer.unit_id, answer.annotator_id))
        return real_view(s, answer)

    monkeypatch.setattr(EventRecorder, "_answer_view", staticmethod(counted_view))
    assert open_conflicts(project) == [] and viewed == []  # nothing merged yet

    first = make_copy(project, tmp_path / "ava-1.prproj", annotator="ava").path
    second = make_copy(project, tmp_path / "ava-2.prproj", annotator="ava").path
    _edit(first, "ava", units["urgency"], _urgent(study.case2))
    _edit(first, "ava", units["empathy"], {"more_empathetic_response_id": study.edited})
    _edit(second, "ava", units["urgency"], _urgent(study.case1), status="draft")
    assert merge_copy(project, first).recorded
    viewed.clear()
    assert open_conflicts(project) == [] and viewed == []  # merged, without a conflict

    (conflict,) = merge_copy(project, second).conflicts
    viewed.clear()
    assert [c.key for c in open_conflicts(project)] == [conflict.key]
    assert viewed == [(units["urgency"], study.ava)]


@pytest.mark.both_backends
def test_two_edited_copies_add_conflict_and_merge_idempotently(master, tmp_path):
    project, study = master
    units = study.units
    copy_a = make_copy(project, tmp_path / "ava-1.prproj", annotator="ava").path
    copy_b = make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True).path
    copy_a2 = make_copy(project, tmp_path / "ava-2.prproj", annotator="ava").path

    # Back from the ward: ava changed her urgency answer differently in her two copies and
    # answered empathy in the first; ben answered urgency and changed his empathy answer.
    _edit(copy_a, "ava", units["urgency"], _urgent(study.case2))
    _edit(copy_a, "ava", units["empathy"], {"more_empathetic_response_id": study.edited})
    _edit(copy_a2, "ava", units["urgency"], _urgent(study.case1), status="draft")
    _edit(copy_b, "ben", units["urgency"], _urgent(study.case1))
    (original_in_b,) = _ids(study, copy_b, study.original)  # (ben's copy is blinded)
    _edit(copy_b, "ben", units["empathy"], {"more_empathetic_response_id": original_in_b})

    svc = study.service
    reports = merge_copies(project, [copy_a, copy_b, copy_a2])
    a, b, a2 = reports
    assert (len(a.added), len(a.updated), len(a.conflicts)) == (1, 1, 0)
    assert (len(b.added), len(b.updated), len(b.conflicts)) == (1, 1, 0)
    assert (len(a2.added), len(a2.updated), len(a2.conflicts)) == (0, 0, 1)
    assert all(r.recorded for r in reports)

    # Added and updated answers are in the master, with the clinician's time of answering.
    assert svc.get_answer(units["empathy"], study.ava).payload["more_empathetic_response_id"] == (
        study.edited
    )
    assert svc.get_answer(units["urgency"], study.ben).payload["more_urgent_case_id"] == (
        study.case1
    )
    assert svc.get_answer(units["empathy"], study.ben).payload["more_empathetic_response_id"] == (
        study.original
    )
    # The conflict: the master keeps the first copy's answer, both versions are reported.
    kept = svc.get_answer(units["urgency"], study.ava)
    assert kept.payload["more_urgent_case_id"] == study.case2 and kept.status == "submitted"
    (conflict,) = a2.conflicts
    assert conflict.annotator == "ava" and conflict.unit_id == units["urgency"]
    assert conflict.master["payload"]["more_urgent_case_id"] == study.case2
    assert conflict.copy["payload"]["more_urgent_case_id"] == study.case1
    assert conflict.copy["status"] == "draft"
    assert conflict.base["payload"]["more_urgent_case_id"] == study.case1
    assert "ava-2.prproj" in a2.summary() and "master's is kept" in a2.summary()

    # Recorded in the audit log.
    with project.read() as s:
        merges = [
            json.loads(e.new_json)
            for e in s.scalars(select(AuditEntry).where(AuditEntry.action == "merge"))
        ]
    assert [m["copy_file"] for m in merges] == ["ava-1.prproj", "ben.prproj", "ava-2.prproj"]
    assert merges[0]["added"] == 1 and merges[0]["updated"] == 1
    assert merges[2]["conflicts"][0]["copy"]["payload"]["more_urgent_case_id"] == study.case1

    # Merging the same copies again changes nothing, records nothing.
    before = _snapshot(project)
    again = merge_copies(project, [copy_a, copy_b, copy_a2])
    assert _snapshot(project) == before
    assert all(not r.added and not r.updated and not r.recorded for r in again)
    assert len(again[2].conflicts) == 1 and again[2].new_conflicts == 0
    assert "nothing new" in again[0].summary()

    # The PI resolves the conflict by taking the copy's version.
    (open_one,) = open_conflicts(project)
    assert open_one.key == conflict.key
    out = write_conflicts([open_one], tmp_path / "conflicts.csv")
    with out.open(encoding="utf-8-sig", newline="") as written:
        (row,) = csv.DictReader(written)
    assert row["copy_file"] == "ava-2.prproj"
    assert row["number"] == str(open_one.number) == "1"  # what `conflicts --resolve` takes
    resolve_conflict(project, open_one, "copy")
    taken = svc.get_answer(units["urgency"], study.ava)
    assert taken.payload["more_urgent_case_id"] == study.case1 and taken.status == "draft"
    assert open_conflicts(project) == []
    before = _snapshot(project)
    merge_copy(project, copy_a2)
    assert _snapshot(project) == before


def _work_on(path, annotator: str, unit: int, seconds: float) -> None:
    """Open an answer in a copy again and save it unchanged after more time on task (what
    the desktop program does: the stored time plus the clock)."""
    with Project.open(path) as copy:
        svc = StudyService(copy).as_viewer(annotator)
        answer = svc.get_answer(unit)
        svc.save_answer(unit, answer.payload, status=answer.status, active_seconds=seconds)


def _seconds(study, unit: int, annotator_id: int) -> float:
    return study.service.get_answer(unit, annotator_id).active_seconds


@pytest.mark.both_backends
@pytest.mark.parametrize("only_assigned", [False, True])
def test_time_on_task_added_in_a_copy_without_a_change_is_merged(master, tmp_path, only_assigned):
    """A clinician who opens a submitted answer again in her copy and works on without
    changing it adds time on task and no audit entry: the merge once reported "nothing new"
    and dropped that time. The longer time is kept, in either direction, once."""
    project, study = master
    units, svc = study.units, study.service
    svc.save_answer(
        units["urgency"],
        _urgent(study.case1),
        status="submitted",
        annotator_id=study.ava,
        active_seconds=30.0,
    )
    svc.save_answer(
        units["empathy"],
        {"equal": True},
        status="submitted",
        annotator_id=study.ben,
        active_seconds=50.0,
    )
    ava_copy = make_copy(
        project, tmp_path / "ava.prproj", annotator="ava", only_assigned=only_assigned
    ).path
    ben_copy = make_copy(
        project, tmp_path / "ben.prproj", annotator="ben", only_assigned=only_assigned
    ).path
    _work_on(ava_copy, "ava", units["urgency"], 95.5)
    _work_on(ben_copy, "ben", units["empathy"], 10.0)  # shorter than the master's: kept there
    before = _snapshot(project)

    preview = merge_copy(project, ava_copy, dry_run=True)
    assert _seconds(study, units["urgency"], study.ava) == 30.0
    assert preview.timed == [f"{units['urgency']}:ava:answer"] and not preview.recorded
    assert "would take the longer time on task of 1 answer" in preview.summary()

    report = merge_copy(project, ava_copy)
    assert _seconds(study, units["urgency"], study.ava) == 95.5
    assert report.timed == [f"{units['urgency']}:ava:answer"] and report.recorded
    assert not report.changed and "nothing new" not in report.summary()
    assert _snapshot(project)[0] == before[0]  # the answers themselves are as they were
    with project.read() as s:
        entry = s.scalars(select(AuditEntry).where(AuditEntry.action == "merge")).one()
    assert json.loads(entry.new_json)["time_on_task"] == {f"{units['urgency']}:ava:answer": 95.5}

    again = merge_copy(project, ava_copy)
    assert not again.timed and not again.recorded and "nothing new" in again.summary()
    shorter = merge_copy(project, ben_copy)
    assert not shorter.timed and shorter.recorded  # (recorded: ben's copy came back)
    assert merge_copy(project, ben_copy).recorded is False
    assert _seconds(study, units["empathy"], study.ben) == 50.0


def test_a_conflict_keeps_the_masters_answer_with_the_longer_time_once(master, tmp_path):
    """The time spent in the copy on a conflicted answer is taken with the first merge, so a
    merge after the PI settles the conflict does not take it then, recording a merge again."""
    project, study = master
    units, svc = study.units, study.service
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    with Project.open(copy) as opened:
        StudyService(opened).as_viewer("ava").save_answer(
            units["urgency"], _urgent(study.case2), status="submitted", active_seconds=80.0
        )
    svc.save_answer(units["urgency"], _urgent(study.case1), status="draft",
                    annotator_id=study.ava, active_seconds=20.0)  # fmt: skip
    first = merge_copy(project, copy)
    assert len(first.conflicts) == 1 and first.timed == [f"{units['urgency']}:ava:answer"]
    kept = svc.get_answer(units["urgency"], study.ava)
    assert kept.payload["more_urgent_case_id"] == study.case1 and kept.active_seconds == 80.0
    (conflict,) = open_conflicts(project)
    resolve_conflict(project, conflict, "master")
    again = merge_copy(project, copy)
    assert not again.timed and not again.recorded


def test_an_answer_changed_in_a_copy_keeps_the_longer_time_on_task(master, tmp_path):
    """An answer the copy changed replaces the master's, but time on task spent on it in the
    master since the copy was made is not taken away."""
    project, study = master
    units, svc = study.units, study.service
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    with Project.open(copy) as opened:
        StudyService(opened).as_viewer("ava").save_answer(
            units["urgency"], _urgent(study.case2), status="submitted", active_seconds=40.0
        )
    svc.save_answer(
        units["urgency"],
        _urgent(study.case1),
        status="submitted",
        annotator_id=study.ava,
        active_seconds=60.0,
    )  # read again, unchanged
    assert len(merge_copy(project, copy).updated) == 1
    kept = svc.get_answer(units["urgency"], study.ava)
    assert kept.payload["more_urgent_case_id"] == study.case2 and kept.active_seconds == 60.0


@pytest.mark.both_backends
def test_a_copy_that_keeps_only_one_clinicians_work(master, tmp_path):
    project, study = master
    info = make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True)
    assert not (tmp_path / "ben.prproj-wal").exists()
    conn = sqlite3.connect(info.path)
    try:
        people = dict(conn.execute("SELECT id, name FROM annotators"))
        answer_people = {people[a] for (a,) in conn.execute("SELECT annotator_id FROM answers")}
        assigned = {people[a] for (a,) in conn.execute("SELECT annotator_id FROM assignments")}
        actions = [a for (a,) in conn.execute("SELECT action FROM audit_log")]
        sources = {s for (s,) in conn.execute("SELECT source FROM responses")}
        levels = {x for (x,) in conn.execute("SELECT urgency_level FROM cases")}
        meta = dict(conn.execute("SELECT key, value FROM project_meta"))
    finally:
        conn.close()
    assert answer_people == {"ben"} and assigned == {"ben"}
    assert actions == ["copy"]  # the others' answers are not in its history either
    assert sources == {""} and levels == {None}
    assert meta["copy_for"] == "ben" and meta["copy_only_assigned"] == "1"
    _edit(info.path, "ben", study.units["rank"], _rank(study, info.path))
    (report,) = merge_copies(project, [info.path])
    assert len(report.added) == 1 and report.unchanged == 1
    assert study.service.get_answer(study.units["rank"], study.ben).status == "submitted"


def _case_sentences(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            'SELECT case_id, start, "end", text FROM sentences WHERE response_id IS NULL '
            "ORDER BY case_id, start"
        ).fetchall()
    finally:
        conn.close()


def test_a_copy_for_a_clinician_whose_units_name_no_response_keeps_the_messages(master, tmp_path):
    """A triage nurse given urgency pairs only: nothing she holds names a response, and the
    copy's "responses nothing uses" then took every patient message's sentences with them
    ("NOT IN" an empty list is true even of NULL): a traceback where an EPPC unit still named
    one, else a copy whose messages had lost their sentences."""
    project, study = master
    nurse = study.service.add_annotator("nurse", "Triage nurse")
    study.service.assign(study.units["urgency"], nurse)
    info = make_copy(project, tmp_path / "nurse.prproj", annotator="nurse", only_assigned=True)
    assert _case_sentences(info.path) == _case_sentences(project.path)
    assert _case_sentences(info.path)  # (the study's messages have sentences)


def test_a_copy_for_a_clinician_with_no_unit_is_refused(master, tmp_path):
    project, study = master
    study.service.add_annotator("newbie", "New colleague")
    with pytest.raises(StoreError, match="newbie has no unit to work on"):
        make_copy(project, tmp_path / "newbie.prproj", annotator="newbie", only_assigned=True)
    assert not (tmp_path / "newbie.prproj").exists()


def _conflicted(project, study, tmp_path) -> tuple:
    """A copy for ava whose urgency answer was changed differently in the copy (case 2,
    submitted) and in the master (case 2, a draft), merged: (the copy's path, the conflict)."""
    unit = study.units["urgency"]
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    _edit(copy, "ava", unit, _urgent(study.case2))
    study.service.as_viewer("ava").save_answer(unit, _urgent(study.case2), status="draft")
    (first,) = merge_copies(project, [copy])
    (conflict,) = first.conflicts
    assert open_conflicts(project) == [conflict]
    return copy, conflict


@pytest.mark.both_backends
def test_a_copy_merged_again_replaces_its_own_older_conflicts(master, tmp_path):
    """The clinician changed an answer again in the same copy after a merge found it in
    conflict: the PI is offered the copy's latest version only (taking the older one would put
    back what she changed since), and once the copy agrees with the master nothing is left to
    settle."""
    project, study = master
    copy, conflict = _conflicted(project, study, tmp_path)
    unit = conflict.unit_id

    _edit(copy, "ava", unit, _urgent(study.case1), status="draft")  # changed again in the copy
    (second,) = merge_copies(project, [copy])
    assert len(second.conflicts) == 1 and second.recorded
    (latest,) = open_conflicts(project)
    assert latest.copy["payload"]["more_urgent_case_id"] == study.case1
    assert latest.copy["status"] == "draft"

    _edit(copy, "ava", unit, _urgent(study.case2), status="draft")  # now as in the master
    (third,) = merge_copies(project, [copy])
    assert not third.conflicts and third.recorded  # recorded: it settles a conflict
    assert open_conflicts(project) == []
    before = _snapshot(project)
    (again,) = merge_copies(project, [copy])
    assert not again.recorded and _snapshot(project) == before


@pytest.mark.both_backends
def test_after_a_conflict_is_settled_the_copys_next_change_is_merged(master, tmp_path):
    """The PI took the copy's answer; the clinician went on changing it in her copy: the next
    merge updates the master, with no conflict (the master holds what the copy last gave)."""
    project, study = master
    copy, conflict = _conflicted(project, study, tmp_path)
    unit = conflict.unit_id
    resolve_conflict(project, conflict, "copy")
    _edit(copy, "ava", unit, _urgent(study.case1), status="draft")
    (report,) = merge_copies(project, [copy])
    assert not report.conflicts and len(report.updated) == 1
    now = study.service.get_answer(unit, study.ava)
    assert now.payload["more_urgent_case_id"] == study.case1 and now.status == "draft"


@pytest.mark.both_backends
def test_after_a_conflict_kept_the_masters_the_copys_next_change_is_a_conflict(master, tmp_path):
    """The PI kept the master's answer: merged again unchanged, the copy raises nothing; changed
    again in the copy, it is a conflict again (the clinician never saw the master's)."""
    project, study = master
    copy, conflict = _conflicted(project, study, tmp_path)
    unit = conflict.unit_id
    resolve_conflict(project, conflict, "master")
    (again,) = merge_copies(project, [copy])
    assert not again.conflicts and not again.recorded and open_conflicts(project) == []
    _edit(copy, "ava", unit, _urgent(study.case1), status="draft")
    (report,) = merge_copies(project, [copy])
    assert len(report.conflicts) == 1 and not report.updated
    assert study.service.get_answer(unit, study.ava).status == "draft"  # the master's, kept
    assert open_conflicts(project)[0].copy["payload"]["more_urgent_case_id"] == study.case1


@pytest.mark.both_backends
def test_an_answer_changed_alike_in_both_then_in_the_master_keeps_the_masters(master, tmp_path):
    """The copy and the master came to the same answer; then it changed in the master alone:
    merging the unchanged copy again keeps the master's, with no conflict."""
    project, study = master
    unit, ava = study.units["urgency"], study.service.as_viewer("ava")
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    _edit(copy, "ava", unit, _urgent(study.case2))
    ava.save_answer(unit, _urgent(study.case2), status="submitted")
    (alike,) = merge_copies(project, [copy])
    assert not alike.conflicts and not alike.changed
    ava.save_answer(unit, _urgent(study.case1), status="draft")
    (report,) = merge_copies(project, [copy])
    assert not report.conflicts and not report.changed
    now = study.service.get_answer(unit, study.ava)
    assert now.payload["more_urgent_case_id"] == study.case1 and now.status == "draft"


@pytest.mark.both_backends
def test_an_answer_changed_back_in_the_copy_after_a_merge_is_merged(master, tmp_path):
    """Merged once, then changed back in the copy to what it was when the copy was made: the
    change back is the clinician's latest answer and reaches the master (it was taken for no
    change, and the master kept the answer she had replaced)."""
    project, study = master
    unit = study.units["urgency"]
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    _edit(copy, "ava", unit, _urgent(study.case2))
    (first,) = merge_copies(project, [copy])
    assert len(first.updated) == 1
    _edit(copy, "ava", unit, _urgent(study.case1))  # as it was in the master at the copy
    (back,) = merge_copies(project, [copy])
    assert len(back.updated) == 1 and not back.conflicts
    assert study.service.get_answer(unit, study.ava).payload["more_urgent_case_id"] == study.case1
    study.service.as_viewer("ava").save_answer(unit, _urgent(study.case2), status="draft")
    _edit(copy, "ava", unit, _urgent(study.case2))  # then both changed, differently
    (both,) = merge_copies(project, [copy])
    assert len(both.conflicts) == 1 and not both.changed


def test_a_settled_conflict_about_an_answer_from_an_offline_suggestion_stays_settled(
    master, tmp_path
):
    """The answer took up a model suggestion made in the copy (a suggestion id the master does
    not have): once the PI kept the master's answer, merging the unchanged copy again finds
    no conflict."""
    project, study = master
    unit = study.units["urgency"]
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    with Project.open(copy) as offline:
        service = StudyService(offline)
        made = service.add_suggestion(
            unit, _urgent(study.case2), model_file="m.gguf", model_sha256="0" * 64,
            template_id="urgency-v1",
        )  # fmt: skip
        service.as_viewer("ava").save_answer(
            unit, _urgent(study.case2), status="submitted", suggestion_id=made,
            suggestion_use="accepted",
        )  # fmt: skip
    study.service.as_viewer("ava").save_answer(unit, _urgent(study.case2), status="draft")
    (first,) = merge_copies(project, [copy])
    assert len(first.conflicts) == 1
    resolve_conflict(project, open_conflicts(project)[0], "master")
    (again,) = merge_copies(project, [copy])
    assert not again.conflicts and not again.recorded and open_conflicts(project) == []


def _rank(study, copy=None) -> dict:
    """A ranking of the two drafts; ``copy``: in the ids that blinded copy gives them."""
    one, two = study.draft1, study.draft2
    if copy is not None:
        one, two = _ids(study, copy, one, two)
    return {
        "entries": [
            {"response_id": one, "rank": 1, "correct": True, "criteria": []},
            {"response_id": two, "rank": 2, "correct": False, "criteria": ["C1"]},
        ]
    }


def _ids(study, copy, *master_ids: int) -> tuple[int, ...]:
    """The ids a blinded copy gives the master's responses (found by their texts, which the
    small study keeps apart)."""
    with study.service.project.read() as s:
        texts = {m: s.get(Response, m).text for m in master_ids}
    conn = sqlite3.connect(copy)
    try:
        ids = dict(conn.execute("SELECT text, id FROM responses"))
    finally:
        conn.close()
    return tuple(ids[texts[m]] for m in master_ids)


def test_a_copy_that_comes_back_unchanged_is_recorded_once(master, tmp_path):
    """A clinician who hands back a copy without a change: its first merge is recorded, so the
    PI's list of copies shows it came back (it stayed "not yet" for good); a second records
    nothing."""
    project, _study = master
    copy = make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True)
    first = merge_copy(project, copy.path)
    assert first.recorded and not first.brought_anything and "nothing new" in first.summary()
    assert merge_copy(project, copy.path, dry_run=True).recorded is False
    assert merge_copy(project, copy.path).recorded is False
    with project.read() as s:
        entries = [
            json.loads(e.new_json)
            for e in s.scalars(select(AuditEntry).where(AuditEntry.action == "merge"))
        ]
    assert [(e["copy_id"], e["added"], e["updated"]) for e in entries] == [(copy.copy_id, 0, 0)]


def test_a_plain_file_copy_merges_from_the_common_history(master, tmp_path):
    project, study = master
    plain = tmp_path / "plain.prproj"
    project.backup("x")  # a consistent copy, as a file manager would make of a closed project
    (backup,) = sorted(backup_dir(project.path).glob("*.prproj"))
    backup.rename(plain)
    _edit(plain, "ava", study.units["rank"], _rank(study))
    study.service.as_viewer("ben").save_answer(
        study.units["urgency"], _urgent(study.case2), status="submitted"
    )
    (report,) = merge_copies(project, [plain])
    assert report.added == [f"{study.units['rank']}:ava:answer"] and not report.conflicts


@pytest.mark.both_backends
def test_a_foreign_copy_is_refused_and_changes_nothing(master, tmp_path, capsys):
    project, _ = master
    with Project.create(tmp_path / "other.prproj", name="Other study") as other:
        build_small_study(other)
        foreign = make_copy(other, tmp_path / "foreign.prproj", annotator="ava").path
    _edit(foreign, "ava", 1, {"parts": {"empathy": "Sorry to hear that."}})
    before = _snapshot(project)
    with pytest.raises(MergeRefused, match="not a copy of this project") as refused:
        merge_copy(project, foreign)
    assert "Other study" in str(refused.value) and "Nothing was merged" in str(refused.value)
    assert _snapshot(project) == before
    if project.path is not None:  # a file master
        with pytest.raises(MergeRefused, match="this project itself"):
            merge_copy(project, project.path)


def test_a_copy_made_after_the_masters_backup_is_refused_by_the_backup(master, tmp_path):
    project, study = master
    old = project.backup("before-copy")
    study.service.as_viewer("ben").save_answer(study.units["rank"], _rank(study))
    late = make_copy(project, tmp_path / "late.prproj", annotator="ava").path
    with Project.open(old) as restored:
        before = _snapshot(restored)
        with pytest.raises(MergeRefused, match="restored from an older backup"):
            merge_copy(restored, late)
        assert _snapshot(restored) == before


@pytest.mark.both_backends
def test_dry_run_and_cancel_change_nothing(master, tmp_path):
    project, study = master
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    _edit(copy, "ava", study.units["rank"], _rank(study))
    before = _snapshot(project)
    report = merge_copy(project, copy, dry_run=True)
    assert report.dry_run and len(report.added) == 1 and "would add 1" in report.summary()
    assert _snapshot(project) == before
    seen = []
    with pytest.raises(Cancelled):
        merge_copy(project, copy, progress=lambda d, t: seen.append((d, t)), cancel=lambda: True)
    assert _snapshot(project) == before
    with pytest.raises(Cancelled):
        make_copy(project, tmp_path / "never.prproj", cancel=lambda: True)
    assert not (tmp_path / "never.prproj").exists()


def test_copy_and_merge_from_the_command_line(master, tmp_path, capsys):
    project, study = master
    path = project.path
    project.close()
    copy = tmp_path / "ava-cli.prproj"
    assert main(["copy", str(path), "-o", str(copy), "--for", "ava"]) == 0
    with Project.open(path, read_only=True) as master_again:  # (a closed project stays closed)
        ranking = _rank(replace(study, service=StudyService(master_again)), copy)
    _edit(copy, "ava", study.units["rank"], ranking)  # (a blinded copy)
    assert main(["merge", str(path), str(copy), "--dry-run"]) == 0
    assert "would add 1" in capsys.readouterr().out
    # a conflicts file that cannot be written, or would be the master or the copy: refused
    # before the merge (the master was written over with the CSV; a missing folder failed
    # after the merge was saved, with the status that says nothing changed)
    with Project.open(path, read_only=True) as before:
        unmerged = _snapshot(before)
    for bad, said in [
        (path, "would write over the project file"),
        (copy, "would write over the project file"),
        (tmp_path / "no-folder" / "c.csv", "does not exist"),
        (tmp_path, "that is a folder"),
    ]:
        assert main(["merge", str(path), str(copy), "--conflicts", str(bad)]) == 2, bad
        assert said in capsys.readouterr().err, bad
        with Project.open(path, read_only=True) as after:
            assert _snapshot(after) == unmerged, bad
    conflicts = tmp_path / "conflicts.json"
    assert main(["merge", str(path), str(copy), "--conflicts", str(conflicts)]) == 0
    assert "added 1 answer" in capsys.readouterr().out
    assert json.loads(conflicts.read_text()) == []
    assert main(["merge", str(path), str(tmp_path / "missing.prproj")]) == 2
    assert "there is no file" in capsys.readouterr().err


def test_a_merge_of_several_copies_that_stops_says_what_it_merged(master, tmp_path, capsys):
    """The second copy is damaged: the first, merged in its own transaction, stays merged, and
    the command said only what was wrong with the second (the PI could not tell that the
    master had changed)."""
    project, study = master
    path = project.path
    project.close()
    good, damaged = tmp_path / "ava.prproj", tmp_path / "cut.prproj"
    assert main(["copy", str(path), "-o", str(good), "--for", "ava"]) == 0
    with Project.open(path, read_only=True) as master_again:
        ranking = _rank(replace(study, service=StudyService(master_again)), good)
    _edit(good, "ava", study.units["rank"], ranking)
    damaged.write_bytes(good.read_bytes()[:10_000])  # a copy cut short
    capsys.readouterr()
    assert main(["merge", str(path), str(good), str(damaged)]) == 2
    said = capsys.readouterr()
    assert "ava.prproj (copy for ava): added 1 answer" in said.out
    assert "cut.prproj" in said.err and "The merge stopped there: ava.prproj merged" in said.err
    assert main(["merge", str(path), str(damaged), str(good)]) == 2  # the first: nothing else
    assert "stopped there" not in capsys.readouterr().err


@pytest.mark.both_backends
def test_the_pis_adjudication_in_a_copy_merges_as_work_or_holder(master, tmp_path):
    """The PI given a unit answers and adjudicates it in their copy, and adjudicates a unit
    not given to them: merged, the first stays their work, the second holds only the gold."""
    from portalreview.store.study_setup import study_progress

    project, study = master
    urgency, empathy = study.units["urgency"], study.units["empathy"]
    study.service.assign(urgency, study.pi)
    path = make_copy(project, tmp_path / "pat.prproj", annotator="pat").path
    with Project.open(path) as copy:
        pat = StudyService(copy).as_viewer("pat")
        pat.save_answer(urgency, _urgent(study.case1), status="submitted")
        pat.save_answer(urgency, _urgent(study.case1), status="submitted", gold=True)
        pat.save_answer(empathy, {"equal": True}, status="submitted", gold=True)
    merge_copy(project, path)
    pat = study.service.as_viewer("pat")
    assert [q.unit_id for q in pat.queue("urgency")] == [urgency]
    assert pat.queue("empathy") == [] and pat.get_answer(empathy, gold=True) is not None
    rows = study_progress(project)
    assert {(r.kind, r.assigned, r.submitted) for r in rows if r.annotator == "pat"} == {
        ("urgency", 1, 1)
    }


def test_the_pis_work_in_a_copy_turns_a_masters_gold_holder_into_work(master, tmp_path):
    """The PI gives a unit to themself in their copy and answers it, while in the master they
    saved only gold on it (a holder): merged, the unit is their work, answer and gold both."""
    project, study = master
    empathy = study.units["empathy"]
    path = make_copy(project, tmp_path / "pat.prproj", annotator="pat").path
    study.service.as_viewer("pat").save_answer(empathy, {"equal": False}, gold=True)
    with Project.open(path) as copy:
        svc = StudyService(copy)
        svc.assign(empathy, study.pi)
        svc.as_viewer("pat").save_answer(empathy, {"equal": True}, status="submitted")
    report = merge_copy(project, path)
    assert len(report.added) == 1
    pat = study.service.as_viewer("pat")
    assert [q.unit_id for q in pat.queue("empathy")] == [empathy]
    assert pat.get_answer(empathy).status == "submitted"
    assert pat.get_answer(empathy, gold=True).status == "draft"


@pytest.mark.parametrize("folder", ["Station #5", "Study 100%25", "Q?", "Ärzte é 日本"])
def test_a_copy_is_made_and_merged_in_a_folder_whose_name_is_uri_syntax(tmp_path, folder):
    """An SQLite URI of the project's path quotes it: "#" cut the path short (no copy, and a
    stray empty file "Station " beside the folder), "%25" named another file."""
    where = tmp_path / folder
    where.mkdir()
    with Project.create(where / "master.prproj") as project:
        study = build_small_study(project)
        copy = make_copy(project, where / "ava.prproj", annotator="ava").path
        _edit(copy, "ava", study.units["urgency"], _urgent(study.case2))
        merged = merge_copy(project, copy)
        assert len(merged.added) == 1
        ava = StudyService(project).as_viewer("ava")
        assert ava.get_answer(study.units["urgency"]).payload["more_urgent_case_id"] == study.case2
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]  # nothing beside it


def test_a_file_made_at_the_copys_name_meanwhile_is_never_written_over(
    master, tmp_path, monkeypatch
):
    """The name is checked when the copy starts; a file another program makes there before
    the copy is delivered was replaced by it."""
    from portalreview.store import merge as merge_module

    project, _study = master
    out = tmp_path / "ava.prproj"
    real_copy_file = merge_module._copy_file

    def copy_then_someone_else(source, target) -> None:
        real_copy_file(source, target)
        out.write_bytes(b"someone else's file")

    monkeypatch.setattr(merge_module, "_copy_file", copy_then_someone_else)
    with pytest.raises(StoreError, match="appeared while the copy was being made"):
        make_copy(project, out, annotator="ava", only_assigned=True)
    assert out.read_bytes() == b"someone else's file"
    assert sorted(p.name for p in tmp_path.iterdir() if "ava" in p.name) == ["ava.prproj"]
