"""The audit log cannot be edited through the program, and a log edited by other means (in
the project file or in an export) is detected by its hash chain
(``portalreview.store.audit_verify``)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from sqlalchemy.exc import DBAPIError

from portalreview.cli import main
from portalreview.store.audit_verify import (
    read_exported_log,
    verify_export,
    verify_project,
    verify_rows,
)
from portalreview.store.exporters import export_project
from portalreview.store.project import Project
from portalreview.store.service import StudyService


@pytest.fixture
def logged(tmp_path):
    """A closed project with a history: answers created, changed, submitted."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava")
        unit_set = svc.create_unit_set("r", "respond")
        units = []
        for i in range(3):
            unit = svc.add_unit(unit_set, svc.add_case(f"c{i}", f"Message {i}."))
            svc.assign(unit, ava)
            units.append(unit)
        me = svc.as_viewer("ava")
        for round_ in range(4):
            for unit in units:
                me.save_answer(unit, {"parts": {"empathy": f"round {round_} unit {unit}"}})
        me.save_answer(units[0], {"parts": {"empathy": "final"}}, status="submitted")
    return path


def _count(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    finally:
        conn.close()


def test_an_intact_log_verifies(logged):
    with Project.open(logged, read_only=True) as project:
        result = verify_project(project)
    assert result.ok, result.describe()
    assert result.entries == _count(logged) >= 13
    assert len(result.last_hash) == 64
    assert "intact" in result.describe()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET new_json = '{}' WHERE id = 3",
        "UPDATE audit_log SET at = '2000-01-01T00:00:00Z'",
        "DELETE FROM audit_log WHERE id = 3",
        "DELETE FROM audit_log",
    ],
)
def test_the_program_cannot_change_the_log(logged, statement):
    before = _count(logged)
    with Project.open(logged) as project:
        with (
            pytest.raises(DBAPIError, match="the audit log cannot be changed"),
            project.write() as session,
        ):
            session.connection().exec_driver_sql(statement)
        assert verify_project(project).ok
    # Nor can another SQLite program that leaves the file's triggers in place.
    conn = sqlite3.connect(logged)
    with pytest.raises(sqlite3.DatabaseError, match="the audit log cannot be changed"):
        conn.execute(statement)
    conn.close()
    assert _count(logged) == before


def _tamper(path, *statements: str) -> None:
    """Edit the log as someone with another tool would: drop the triggers first."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("DROP TRIGGER audit_no_delete")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("statements", "found"),
    [
        (
            [
                "UPDATE audit_log SET new_json = replace(new_json, 'round 1', 'round 9') "
                "WHERE id = (SELECT min(id) FROM audit_log WHERE new_json LIKE '%round 1%')"
            ],
            "edited",
        ),
        (["UPDATE audit_log SET actor_id = NULL WHERE id = 5"], "edited"),
        (["DELETE FROM audit_log WHERE id = 6"], "does not follow"),
        (
            [
                "INSERT INTO audit_log (at, action, prev_hash, hash) "
                "SELECT at, 'forged', hash, lower(hex(randomblob(32))) FROM audit_log "
                "WHERE id = 4"
            ],
            "out of order|does not follow|edited",
        ),
    ],
    ids=["answer-text-changed", "actor-removed", "row-deleted", "row-forged"],
)
def test_a_log_edited_in_the_file_is_detected(logged, statements, found):
    _tamper(logged, *statements)
    with Project.open(logged, read_only=True) as project:
        result = verify_project(project)
    assert not result.ok
    assert "TAMPERED" in result.describe()
    assert any(re.search(found, p) for p in result.problems), result.problems


def test_rows_cut_off_the_end_are_detected_against_the_recorded_last_hash(logged):
    with Project.open(logged, read_only=True) as project:
        recorded = verify_project(project).last_hash
    _tamper(logged, "DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)")
    with Project.open(logged, read_only=True) as project:
        chain = verify_project(project)
        assert not chain.problems  # a shorter chain is still a chain (the answer whose last
        assert len(chain.answer_problems) == 1  # save was cut off now differs from the log)
        result = verify_project(project, expected_last=recorded)  # ...but not the recorded one
    assert not result.ok and "recorded last hash" in result.problems[-1]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx"])
def test_an_export_records_the_chain_and_a_tampered_export_is_detected(logged, tmp_path, fmt):
    out = tmp_path / ("export.xlsx" if fmt == "xlsx" else "export")
    with Project.open(logged, read_only=True) as project:
        export_project(project, fmt, out)
        in_file = verify_project(project)
    exported = verify_export(out)
    assert exported.ok, exported.describe()
    assert exported.entries == in_file.entries
    assert exported.last_hash == in_file.last_hash
    rows = read_exported_log(out)
    assert all(len(r["hash"]) == 64 and len(r["prev_hash"]) == 64 for r in rows)

    # Change one answer's recorded text, as someone editing the export would.
    victim = next(i for i, r in enumerate(rows) if "round 2" in (r["new_json"] or ""))
    rows[victim] = {**rows[victim], "new_json": rows[victim]["new_json"].replace("2", "3")}
    result = verify_rows(rows)
    assert not result.ok
    assert result.problems == (
        f"entry {rows[victim]['id']}: its content does not match its hash (edited)",
    )
    if fmt == "jsonl":  # and on disk
        lines = (out / "audit.jsonl").read_text(encoding="utf-8").splitlines()
        lines[victim] = json.dumps(rows[victim])
        (out / "audit.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert not verify_export(out).ok


def test_the_log_s_protection_dropped_is_reported_though_the_log_is_whole(logged, capsys):
    """A file whose audit log the database no longer protects is not intact: the next
    change to the log would go unrefused."""
    _tamper(logged)
    with Project.open(logged, read_only=True) as project:
        result = verify_project(project)
    assert not result.ok and result.problems == () and result.answer_problems == ()
    assert result.schema_problems == (
        "PortalReview's trigger audit_no_delete is missing (the audit log's protection against "
        "changes)",
        "PortalReview's trigger audit_no_update is missing (the audit log's protection against "
        "changes)",
    )
    assert main(["verify", str(logged)]) == 1
    out = capsys.readouterr().out
    assert "audit log intact" not in out and "schema is NOT PortalReview's" in out


def test_a_table_view_and_triggers_not_the_program_s_are_reported(logged):
    """Whatever a database tool or someone else added or removed is named: a trigger of it
    runs whenever PortalReview writes its table (here, one keeps every answer removed, and one
    stands in for the program's own guard of the log's rows)."""
    conn = sqlite3.connect(logged)
    with conn:
        conn.execute("CREATE TABLE stash (who, what)")
        conn.execute("CREATE VIEW everyone AS SELECT * FROM answers")
        conn.execute("CREATE INDEX answers_by_status ON answers (status)")
        conn.execute("DROP INDEX ix_answers_annotator")
        conn.execute(
            "CREATE TRIGGER keep_answers BEFORE DELETE ON answers BEGIN "
            "INSERT INTO stash VALUES (OLD.annotator_id, OLD.status); END"
        )
        conn.execute("DROP TRIGGER audit_no_delete")
        conn.execute(
            "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit_log WHEN 0 BEGIN SELECT 1; END"
        )
    conn.close()
    with Project.open(logged, read_only=True) as project:
        result = verify_project(project)
    assert not result.ok and result.problems == ()
    assert sorted(result.schema_problems) == [
        "PortalReview's index ix_answers_annotator is missing",
        "PortalReview's trigger audit_no_delete is changed (the audit log's protection against "
        "changes)",
        "a table that is not PortalReview's: stash",
        "a trigger that is not PortalReview's: keep_answers on answers",
        "a view that is not PortalReview's: everyone",
        "an index that is not PortalReview's: answers_by_status on answers",
    ]
