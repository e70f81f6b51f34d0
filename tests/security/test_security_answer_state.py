"""An answer changed outside PortalReview (its rows edited with the sqlite3 tool, or with psql
and a clinician's own server login) is reported by verification, naming the answer: every
answer's audited state is compared with the newest audit entry naming it
(``portalreview.store.audit_verify.check_answers``). An honest study, with every legitimate
way of changing answers, verifies clean."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import text

from portalreview.cli import main
from portalreview.store.audit_verify import verify_project
from portalreview.store.exporters import export_project
from portalreview.store.importers import import_files
from portalreview.store.merge import (
    make_copy,
    merge_copies,
    open_conflicts,
    resolve_conflict,
)
from portalreview.store.project import Project
from portalreview.store.service import StoreError, StudyService
from tests.io.io_support import full_study, payloads

DATA = Path(__file__).parents[1] / "store" / "data"


@pytest.fixture
def answered(tmp_path) -> tuple[Path, dict]:
    """A closed project file with answers of every kind, a flagged draft and a gold answer;
    the ids of ava's and ben's urgency answers and ava's eppc answer."""
    path = tmp_path / "study.prproj"
    with Project.create(path) as project:
        study = full_study(project)
        svc = study.service
        ids = {
            "urgency": svc.get_answer(study.units["urgency"], annotator_id=study.ava).answer_id,
            "ben": svc.get_answer(study.units["urgency"], annotator_id=study.ben).answer_id,
            "eppc": svc.get_answer(study.units["eppc"], annotator_id=study.ava).answer_id,
            "gold": svc.get_answer(study.units["eppc"], gold=True).answer_id,
            "case2": study.case2,
            "unit": study.units["urgency"],
        }
        assert verify_project(project).ok
    return path, ids


def _sql(path: Path, statement: str, *params) -> None:
    """What anyone with the file and the sqlite3 tool can do."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(statement, params).rowcount >= 1
        conn.commit()
    finally:
        conn.close()


def _verified(path: Path):
    with Project.open(path, read_only=True) as project:
        return verify_project(project)


@pytest.mark.parametrize(
    ("statement", "which", "fields"),
    [
        ("UPDATE urgency_answers SET more_urgent_case_id = ? WHERE answer_id = ?", "urgency",
         "payload"),
        ("DELETE FROM eppc_spans WHERE answer_id = ?", "eppc", "payload"),
        ("UPDATE answers SET comment = 'changed after submission' WHERE id = ?", "urgency",
         "comment"),
        ("UPDATE answers SET status = 'submitted' WHERE id = ?", "ben", "status"),
        ("UPDATE answers SET flagged = 0, flag_note = '' WHERE id = ?", "ben",
         "flag_note, flagged"),
        ("DELETE FROM eppc_labels WHERE answer_id = ?", "gold", "payload"),
    ],
)  # fmt: skip
def test_an_answer_changed_in_the_file_is_reported_by_name(answered, statement, which, fields):
    path, ids = answered
    params = (ids["case2"], ids[which]) if "more_urgent" in statement else (ids[which],)
    _sql(path, statement, *params)
    result = _verified(path)
    assert not result.ok
    assert not result.problems  # the log itself is intact: the answer is what changed
    (line,) = result.answer_problems
    assert line.startswith(f"answer {ids[which]} (unit ")
    assert "annotator ava" in line or "annotator ben" in line or "gold by pat" in line
    assert "differs from its last audit entry (#" in line
    assert f"changed outside PortalReview ({fields})" in line
    assert "answers CHANGED outside PortalReview: 1 of 9" in result.describe()


def test_an_answer_the_log_never_recorded_and_one_it_lost_are_reported(answered):
    path, ids = answered
    conn = sqlite3.connect(path)
    try:  # (as the sqlite3 tool does, foreign keys unchecked: the log's entries still name
        # the deleted answer) an answer inserted, ava's eppc answer removed with its rows
        conn.execute(
            "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
            " flagged, flag_note, comment, created_at, updated_at) SELECT unit_id, kind, "
            "annotator_id, 0, 'submitted', 0, 0, '', '', created_at, updated_at FROM answers "
            "WHERE unit_id = (SELECT unit_id FROM answers WHERE id = ?) AND is_gold",
            (ids["gold"],),
        )
        conn.execute("DELETE FROM eppc_spans WHERE answer_id = ?", (ids["eppc"],))
        conn.execute("DELETE FROM eppc_labels WHERE answer_id = ?", (ids["eppc"],))
        conn.execute("DELETE FROM answers WHERE id = ?", (ids["eppc"],))
        conn.commit()
    finally:
        conn.close()
    result = _verified(path)
    made, deleted = result.answer_problems
    assert made.endswith("annotator pat) has no audit entry: made outside PortalReview")
    assert deleted.startswith(f"answer {ids['eppc']} (unit ")
    assert deleted.endswith("but not in the project: deleted outside PortalReview")


def test_the_command_line_reports_a_changed_answer(answered, capsys):
    path, ids = answered
    assert main(["verify", str(path)]) == 0
    assert "9 answers match their last audit entry" in capsys.readouterr().out
    _sql(path, "UPDATE answers SET comment = 'x' WHERE id = ?", ids["urgency"])
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"answer {ids['urgency']} (unit {ids['unit']}, annotator ava) differs" in out


def test_an_honest_study_with_every_way_of_changing_answers_verifies_clean(tmp_path):
    """Saves of every kind (drafts, submits, flags, comments, suggestions, time only), gold,
    a codebook change, offline copies (one clinician's and a whole study's) changed and merged
    with a conflict resolved and a suggestion made offline, an export imported into a new
    project: every answer is what the log last recorded."""
    path = tmp_path / "master.prproj"
    with Project.create(path) as project:
        study = full_study(project)
        svc = study.service
        ava, ben = svc.as_viewer("ava"), svc.as_viewer("ben")
        own = payloads(study)
        units = study.units
        ava.save_answer(units["rank"], own["rank"], status="submitted", active_seconds=99.0)
        ben.save_answer(units["respond"], own["respond"])  # a draft, then flagged
        ben.save_answer(units["respond"], own["respond"], flagged=True, flag_note="unsure")
        ben.save_answer(units["urgency"], {"more_urgent_case_id": study.case1},
                        status="submitted", comment="", flagged=False, flag_note="")  # fmt: skip
        svc.save_answer(units["respond"], own["respond"], annotator_id=study.pi, gold=True)
        svc.extend_catalogs({"themes": [{"id": "extra", "name": "Extra", "short": "X",
                                         "definition": "d", "question": "q?"}]})  # fmt: skip
        assert verify_project(project).ok

        whole = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
        mine = make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True)
        with Project.open(mine.path, read_only=True) as copy:  # its log starts at the copy
            in_copy = verify_project(copy)
            assert in_copy.ok and in_copy.before_copy > 0, in_copy.describe()
        with Project.open(whole) as copy:
            offline = StudyService(copy)
            made = offline.add_suggestion(
                units["urgency"], {"more_urgent_case_id": study.case2}, model_file="m.gguf",
                model_sha256="0" * 64, template_id="urgency-v1",
            )  # fmt: skip
            me = offline.as_viewer("ava")
            me.save_answer(units["urgency"], {"more_urgent_case_id": study.case2},
                           status="submitted", suggestion_id=made,
                           suggestion_use="accepted")  # fmt: skip
            me.save_answer(units["match"], own["match"], status="draft", comment="offline")
            assert verify_project(copy).ok
        with Project.open(mine.path) as copy:
            offline = StudyService(copy).as_viewer("ben")
            ranked = _in_blinded_copy(svc, copy, own["rank"])  # its drafts have new ids
            offline.save_answer(units["rank"], ranked, status="submitted")
            offline.save_answer(units["respond"], own["respond"], status="submitted")
            assert verify_project(copy).ok
        svc.add_suggestion(  # takes the id of the copy's suggestion: the merge renumbers it
            units["urgency"], {"more_urgent_case_id": study.case1}, model_file="m.gguf",
            model_sha256="1" * 64, template_id="urgency-v1",
        )  # fmt: skip
        ava.save_answer(units["match"], own["match"], status="submitted", comment="master")
        reports = merge_copies(project, [whole, mine.path])
        assert sum(len(r.added) + len(r.updated) for r in reports) >= 3
        (conflict,) = open_conflicts(project)
        resolve_conflict(project, conflict, "copy")
        result = verify_project(project)
        assert result.ok, result.describe()
        assert result.answers >= 11

        exported = export_project(project, "jsonl", tmp_path / "export")
        assert exported
    with Project.create(tmp_path / "imported.prproj") as again:
        import_files(again, [tmp_path / "export"])
        result = verify_project(again)
        assert result.ok and result.answers >= 11, result.describe()


def _in_blinded_copy(master: StudyService, copy: Project, rank: dict) -> dict:
    """A rank payload in the ids a copy for one clinician gives the master's drafts (found by
    their texts, which the study keeps apart)."""
    with master.project.read() as s:
        texts = dict(s.execute(text("SELECT id, text FROM responses")).all())
    with copy.read() as s:
        ids = {t: i for i, t in s.execute(text("SELECT id, text FROM responses")).all()}
    entries = [{**e, "response_id": ids[texts[e["response_id"]]]} for e in rank["entries"]]
    return {**rank, "entries": entries}


@pytest.mark.parametrize("name", ["v1-small", "v2-small", "v6-gold"])
def test_a_file_of_an_older_format_verifies_clean_after_its_upgrade(tmp_path, name):
    path = tmp_path / f"{name}.prproj"
    shutil.copy(DATA / f"{name}.prproj", path)
    with Project.open(path, automatic_backup=False) as project:
        result = verify_project(project)
    assert result.ok and result.answers >= 1, result.describe()


@pytest.fixture
def team(postgres_server):
    """A server study answered by ava (every kind), ben (a draft) and the PI (gold), with a
    database login role for ava."""
    from portalreview.store.backends import ServerProject

    server = postgres_server
    database = server.new_database()
    project = ServerProject.create(server.url(database))
    study = full_study(project)
    role, password = server.member_login(project, "ava")
    yield project, study, server.dsn(database, role, password), (server, database, role, password)
    project.close()


def test_a_clinicians_raw_sql_change_on_the_server_is_reported(team):
    """The clinician's own login may change their answer's rows (the program rewrites them on
    each save); the change is not prevented but detected."""
    import psycopg

    project, study, dsn, _ = team
    svc = StudyService(project)
    urgency = svc.get_answer(study.units["urgency"], annotator_id=study.ava)
    eppc = svc.get_answer(study.units["eppc"], annotator_id=study.ava)
    assert verify_project(project).ok
    with psycopg.connect(dsn, autocommit=True) as conn:  # ava at psql
        conn.execute("UPDATE urgency_answers SET more_urgent_case_id = %s", (study.case2,))
        conn.execute("DELETE FROM eppc_spans")
        conn.execute("UPDATE answers SET comment = 'changed after submission' "
                     "WHERE id = %s", (urgency.answer_id,))  # fmt: skip
    result = verify_project(project)
    assert not result.ok and not result.problems
    assert len(result.answer_problems) == 2, result.describe()
    first, second = result.answer_problems
    assert first.startswith(f"answer {urgency.answer_id} (unit {study.units['urgency']}, "
                            "annotator ava) differs from its last audit entry (#")  # fmt: skip
    assert "(comment, payload)" in first
    assert second.startswith(f"answer {eppc.answer_id} (unit {study.units['eppc']}, annotator ava)")
    logged = svc.history(study.units["urgency"], study.ava)[-1].new
    assert logged["comment"] == ""  # the log still holds the answer as it was saved


def test_a_clinicians_login_may_not_verify_what_it_cannot_see(team, capsys):
    """Row-level security shows a clinician only their own entries and answers: a check with
    their login would find a short log and others' answers without entries. It is refused;
    the PI's login and the owner's verify the whole study."""
    from portalreview.store.backends import ServerProject

    project, _study, _dsn, (server, database, role, password) = team
    ava = server.url(database, role, password)
    refused = pytest.raises(StoreError, match="only the PI or the study's owner can verify")
    with ServerProject.open(ava) as clinician, refused:
        verify_project(clinician)
    assert main(["verify", ava]) == 2
    captured = capsys.readouterr()
    assert "only the PI or the study's owner can verify" in captured.err
    assert "intact" not in captured.out and "no audit entry" not in captured.out
    pat = server.url(database, *server.member_login(project, "pat"))
    assert main(["verify", pat]) == 0
    assert "answers match their last audit entry" in capsys.readouterr().out
    assert verify_project(project).ok  # the owner's


def _verify_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob(".portalreview-verify-*")}


@pytest.mark.parametrize("format_7", [False, True])
def test_a_file_of_an_older_format_is_verified_in_an_upgraded_copy_left_unchanged(
    tmp_path, capsys, format_7
):
    """An auditor checks a file without changing it: one of an older format (opening it for
    writing would upgrade it) is checked in an upgraded temporary copy, removed afterwards."""
    path = tmp_path / "old.prproj"
    if format_7:  # a file of the format before this one (its upgrade step is idempotent)
        with Project.create(path) as project:
            full_study(project)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 7")
        conn.commit()
        conn.close()
    else:
        shutil.copy(DATA / "v6-gold.prproj", path)
    before, files, folders = path.read_bytes(), list(tmp_path.iterdir()), _verify_folders()
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "audit log intact" in out and "answers match their last audit entry" in out
    assert f"older format {7 if format_7 else 6}: verified in a temporary copy" in out
    assert "the file itself was not changed" in out
    assert path.read_bytes() == before  # byte for byte
    # no backup or upgraded file beside it (SQLite's read-only readers of a file in WAL mode
    # leave an empty -wal and its index, as any read-only open of it does)
    extra = {p.name for p in tmp_path.iterdir()} - {p.name for p in files}
    assert extra <= {"old.prproj-wal", "old.prproj-shm"}, extra
    assert not extra or (tmp_path / "old.prproj-wal").stat().st_size == 0
    # the temporary copy is gone (and any that a killed verify left, see test_leftovers.py)
    assert _verify_folders() <= folders

    conn = sqlite3.connect(path)  # and a change outside PortalReview is still found there
    conn.execute("UPDATE answers SET comment = 'x' WHERE id = (SELECT min(id) FROM answers)")
    conn.commit()
    conn.close()
    changed = path.read_bytes()
    assert main(["verify", str(path)]) == 1
    assert "differs from its last audit entry" in capsys.readouterr().out
    assert path.read_bytes() == changed


def test_an_answer_inserted_into_a_copy_for_one_clinician_after_it_was_made_is_reported(
    tmp_path,
):
    """A copy for one clinician has no entries of the answers it was made with; only those
    (ids up to the copy's highest when it was made) are excused, not one added later with the
    sqlite3 tool."""
    master = tmp_path / "master.prproj"
    with Project.create(master) as project:
        full_study(project)
        made = make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True)
    clean = _verified(made.path)
    assert clean.ok and clean.before_copy > 0, clean.describe()
    conn = sqlite3.connect(made.path)
    try:  # a gold answer beside one of ben's, as the sqlite3 tool inserts it
        conn.execute(
            "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
            " flagged, flag_note, comment, created_at, updated_at) SELECT unit_id, kind, "
            "annotator_id, 1, 'submitted', 0, 0, '', '', created_at, updated_at FROM answers "
            "ORDER BY id LIMIT 1"
        )
        conn.commit()
    finally:
        conn.close()
    result = _verified(made.path)
    assert not result.ok
    assert result.before_copy == clean.before_copy  # the copy's own answers still excused
    (line,) = result.answer_problems
    assert line.endswith("has no audit entry: made outside PortalReview"), line


def test_a_clinicians_login_may_not_report_or_export_the_study(team, capsys, tmp_path):
    """With a clinician's login the report counted everyone else's answers as none (the PI's
    gold answers too), and a full export looked whole while holding her entries only, which
    verify then called tampered (found by an explorer). Both are refused, as verify is; her
    own preferences export stays hers."""
    project, _study, _dsn, (server, database, role, password) = team
    ava = server.url(database, role, password)
    for command in (
        ["report", ava, "-o", str(tmp_path / "r.json"), "--resamples", "0"],
        ["report", ava, "--format", "xlsx", "-o", str(tmp_path / "r.xlsx"), "--resamples", "0"],
        ["export", ava, "--format", "jsonl", "-o", str(tmp_path / "study")],
        ["export", ava, "--format", "labelstudio", "-o", str(tmp_path / "ls")],
    ):
        assert main(command) == 2, command
        assert "only the PI or the study's owner can" in capsys.readouterr().err
    for others in ([], ["--as", "ben"]):  # her pairs alone, or none, looking complete
        command = ["export", ava, "--format", "preferences", "-o", str(tmp_path / "p"), *others]
        assert main(command) == 2, command
        assert "exports only its own preferences" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    own = ["export", ava, "--format", "preferences", "--as", "ava", "-o", str(tmp_path / "p")]
    assert main(own) == 0
    typed = ["export", ava, "--format", "preferences", "--as", " ava ", "-o", str(tmp_path / "q")]
    assert main(typed) == 0  # her own name with spaces typed around it is still hers
    capsys.readouterr()
    for command in (["info", ava], ["progress", ava]):  # her own counts, said to be so
        assert main(command) == 0
        assert "Your own work only" in capsys.readouterr().out
    assert main(["info", ava, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["own_work_only"] is True
    pat = server.url(database, *server.member_login(project, "pat"))
    assert main(["info", pat]) == 0
    assert "Your own work only" not in capsys.readouterr().out
    assert main(["report", pat, "-o", str(tmp_path / "r.json"), "--resamples", "0"]) == 0
    assert main(["export", pat, "--format", "jsonl", "-o", str(tmp_path / "study")]) == 0
    assert main(["verify", str(tmp_path / "study")]) == 0


def test_a_draft_the_pi_made_is_not_taken_for_her_slip_on_her_own_login(team):
    """Her login reads her own audit entries only: after her slip, put right, a draft the PI
    (or an import, a merge) then made of the answer looked like her slip, and her next change,
    a flag even, submitted it (found by an explorer). Her newest entry must describe the answer
    as it is, or the last change was not hers."""
    from portalreview.store.backends import ServerProject

    project, study, _dsn, (server, database, role, password) = team
    unit = study.units["rank"]
    with ServerProject.open(server.url(database, role, password)) as own:
        ava = StudyService(own).as_viewer("ava")
        answer = ava.get_answer(unit)
        ava.save_answer(unit, answer.payload, status="submitted")
        ava.save_answer(unit, {"entries": []}, status="draft")  # her slip
        assert ava.unsubmitted_by_own_save(unit)
        ava.save_answer(unit, answer.payload, status="submitted")  # put right
        StudyService(project).save_answer(unit, answer.payload, annotator_id=study.ava)
        assert ava.get_answer(unit).status == "draft"  # the PI's, or an import's, draft
        assert not ava.unsubmitted_by_own_save(unit)
        assert not StudyService(project).as_viewer("ava").unsubmitted_by_own_save(unit)
