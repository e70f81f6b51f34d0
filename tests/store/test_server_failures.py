"""A server study when things go wrong: a dropped connection, the server stopping in the middle
of a save, and a study restored from IT's pg_dump."""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import func, select, text

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import ServerProject
from portalreview.store.backends.postgres import ServerUnavailable
from portalreview.store.models import Answer
from portalreview.store.service import StoreError, StudyService, not_saved_message
from tests.store.test_transfer import _same_export


def _answers(project) -> int:
    with project.read() as s:
        return s.scalar(select(func.count()).select_from(Answer))


def test_a_dropped_connection_is_replaced_without_a_word(server_study):
    server, database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    server.admin_sql(  # the network, or IT, cuts every connection of the study
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{database}' AND pid != pg_backend_pid()"
    )
    ava.save_answer(study.units["empathy"], {"equal": True})
    assert _answers(project) == 2


def test_the_server_stopping_mid_save_keeps_nothing_of_it(server_study, monkeypatch):
    server, _database, project, study = server_study
    service = StudyService(project)
    ava = service.as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    server.checkpoint()  # the restart below replays only this test's transaction
    real_audit = type(ava)._audit

    def stop_then_audit(self, s, *args):
        s.flush()  # the answer's rows are written, in the open transaction
        server.stop("immediate")
        return real_audit(self, s, *args)

    monkeypatch.setattr(type(ava), "_audit", stop_then_audit)
    try:
        with pytest.raises(ServerUnavailable, match=r"did not answer.*Nothing was saved"):
            ava.save_answer(study.units["rank"], {"entries": []})
    finally:
        monkeypatch.setattr(type(ava), "_audit", real_audit)
        server.restart()
    assert _answers(project) == 1  # the rank answer's rows went with the transaction
    ava.save_answer(study.units["rank"], {"entries": []})  # and it saves once it is back
    assert _answers(project) == 2
    assert verify_project(project).ok


def test_a_value_the_server_cannot_store_is_said_as_such(server_study):
    """A value PostgreSQL refuses (psycopg's DataError: a NUL in a text, a number out of range)
    was shown as "an unexpected error (DataError)... Try again": trying again never helps."""
    _server, _database, project, _study = server_study
    for value, reason in (("a\x00b", "NUL"), (70000, "out of range")):
        cast = "text" if isinstance(value, str) else "smallint"
        with pytest.raises(StoreError) as refused, project.write(quick=True) as s:
            s.execute(text(f"SELECT CAST(:v AS {cast})"), {"v": value})
        words = not_saved_message(refused.value)
        assert words.startswith("Not saved: The study server")
        assert "cannot store a value in this save (" in words and reason in words
        assert "Nothing was saved, and saving the same again will not help" in words
    assert _answers(project) == 0


def test_a_study_restored_from_pg_dump_is_the_same_study(server_study, tmp_path):
    server, database, project, study = server_study
    StudyService(project).as_viewer("ava").save_answer(
        study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
    )
    dump = tmp_path / "study.dump"
    env = {**os.environ, "PGPASSWORD": server.admin_password}
    connect = ["-h", "127.0.0.1", "-p", str(server.port), "-U", "portalreview_admin"]
    subprocess.run(
        [str(server.bin / "pg_dump"), *connect, "--format=custom", f"--file={dump}", database],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    restored = server.new_database("restored")
    subprocess.run(
        [str(server.bin / "pg_restore"), *connect, "--no-owner", f"--dbname={restored}",
         str(dump)],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    with ServerProject.open(server.url(restored)) as again:
        _same_export(project, again, tmp_path, "restored")
        assert verify_project(again).ok
        StudyService(again).as_viewer("ben").save_answer(study.units["empathy"], {"equal": True})
