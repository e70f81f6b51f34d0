"""Moving a whole study between a file and a server (store/transfer.py), either way."""

from __future__ import annotations

import filecmp
from pathlib import Path

import psycopg
import pytest

from portalreview.demo import build_demo
from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import Project, ServerProject
from portalreview.store.exporters import export_project
from portalreview.store.service import StudyService
from portalreview.store.transfer import copy_study


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("transfer") / "demo.prproj")


def _same_export(a, b, tmp_path, name) -> None:
    export_project(a, "jsonl", tmp_path / f"{name}-a")
    export_project(b, "jsonl", tmp_path / f"{name}-b")
    compared = filecmp.dircmp(tmp_path / f"{name}-a", tmp_path / f"{name}-b")
    assert compared.left_list and not compared.diff_files and not compared.left_only
    assert not compared.right_only
    _match, mismatch, errors = filecmp.cmpfiles(
        tmp_path / f"{name}-a", tmp_path / f"{name}-b", compared.common_files, shallow=False
    )
    assert not mismatch and not errors


def test_a_file_to_a_server_and_back_is_the_same_study(demo_file, postgres_server, tmp_path):
    address = postgres_server.url(postgres_server.new_database())
    with Project.open(demo_file, read_only=True) as original:
        with copy_study(original, address) as on_server:
            _same_export(original, on_server, tmp_path, "there")
            assert verify_project(on_server).ok
            assert on_server.meta("project_id") == original.meta("project_id")
            back = copy_study(on_server, tmp_path / "back.prproj")
        with back:
            _same_export(original, back, tmp_path, "back")
            assert back.meta("application") is None  # the server's marks stay on the server
            assert back.integrity_check() == "ok"


def test_the_server_copy_goes_on_with_new_ids_and_saves(demo_file, postgres_server):
    address = postgres_server.url(postgres_server.new_database())
    with Project.open(demo_file, read_only=True) as original, copy_study(original, address):
        pass
    with ServerProject.open(address) as study:
        service = StudyService(study)
        before = service.info()["audit_entries"]
        service.add_annotator("zoe")  # a new id after the copied ones
        assert service.info()["audit_entries"] == before + 1
        assert verify_project(study).ok


def test_the_server_copy_has_its_statistics_at_once(demo_file, postgres_server):
    """Without them the planner guesses (nested loops over whole tables) until autovacuum
    comes by, a minute or more after the copy."""
    database = postgres_server.new_database()
    with Project.open(demo_file, read_only=True) as original:
        copy_study(original, postgres_server.url(database)).close()
    with psycopg.connect(postgres_server.dsn(database)) as conn:
        counted = dict(
            conn.execute(
                "SELECT relname, reltuples FROM pg_class WHERE relname IN "
                "('answers', 'units', 'sentences', 'audit_log')"
            ).fetchall()
        )
        rows = conn.execute("SELECT count(*) FROM answers").fetchone()[0]
    assert len(counted) == 4
    assert all(tuples > 0 for tuples in counted.values())  # -1: never analysed
    assert counted["answers"] == rows


def test_a_failed_copy_leaves_nothing(demo_file, postgres_server, tmp_path, monkeypatch):
    from portalreview.store import transfer

    database = postgres_server.new_database()
    calls = []

    def failing(reading, writing, table):
        calls.append(table.name)
        if len(calls) == 12:
            raise RuntimeError("the disk is full")
        return real(reading, writing, table)

    real = transfer._copy_table
    monkeypatch.setattr(transfer, "_copy_table", failing)
    with Project.open(demo_file, read_only=True) as original:
        with pytest.raises(RuntimeError, match="disk is full"):
            copy_study(original, postgres_server.url(database))
        calls.clear()
        with pytest.raises(RuntimeError, match="disk is full"):
            copy_study(original, tmp_path / "half.prproj")
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("half.prproj")]
    with psycopg.connect(postgres_server.dsn(database)) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)


def test_copy_to_and_back_from_the_command_line(demo_file, postgres_server, tmp_path, capsys):
    from portalreview.cli import main

    address = postgres_server.dsn(postgres_server.new_database())
    assert main(["copy", str(demo_file), "--to", address]) == 0
    said = capsys.readouterr().out
    assert "Copied the whole study to postgresql://" in said
    assert postgres_server.admin_password not in said
    assert main(["copy", address, "--to", str(tmp_path / "back")]) == 0
    with Project.open(demo_file, read_only=True) as a, Project.open(tmp_path / "back.prproj") as b:
        _same_export(a, b, tmp_path, "cli")
    assert main(["copy", str(demo_file), "--to", address]) == 2  # not empty any more
    assert "already holds tables" in capsys.readouterr().err
    assert main(["copy", str(demo_file), "--to", address, "--for", "ava"]) == 2


def test_a_copy_into_a_file_killed_part_way_leaves_no_study_under_its_name(demo_file, tmp_path):
    """Killed (here: the process ends itself half-way, as a kill -9 or a power cut would end
    it), a copy left an empty study under the name asked for, which ``verify`` called intact
    and a second copy refused to write over. Now it is made under a hidden name, and the next
    copy into that folder removes what the killed one left."""
    import os
    import subprocess
    import sys
    import textwrap

    target = tmp_path / "archive.prproj"
    script = textwrap.dedent(
        f"""
        import os
        from portalreview.store import transfer
        from portalreview.store.backends import Project

        real, done = transfer._copy_table, []

        def dying(reading, writing, table):
            done.append(table)
            if len(done) == 12:
                os._exit(9)
            return real(reading, writing, table)

        transfer._copy_table = dying
        with Project.open({str(demo_file)!r}, read_only=True) as original:
            transfer.copy_study(original, {str(target)!r})
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", script], env=env, timeout=120)
    assert killed.returncode == 9
    assert not target.exists() and any(tmp_path.iterdir())  # only the hidden build is left
    with Project.open(demo_file, read_only=True) as original:
        copy_study(original, target).close()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    with Project.open(target, read_only=True) as copy:
        assert verify_project(copy).ok


def test_a_copy_into_a_file_that_fails_names_the_file_asked_for(demo_file, tmp_path, monkeypatch):
    """The copy is made under a hidden name: a failure (here the disk full as the file is
    created) names the file asked for, and leaves nothing."""
    from portalreview.store.project import ProjectError

    def full(path):
        raise ProjectError(f"{Path(path).name} could not be created (No space left on device).")

    monkeypatch.setattr(Project, "create_empty", full)
    with (
        Project.open(demo_file, read_only=True) as original,
        pytest.raises(ProjectError) as refused,
    ):
        copy_study(original, tmp_path / "archive.prproj")
    said = str(refused.value)
    assert "archive.prproj could not be created" in said and "left behind" in said
    assert ".portalreview" not in said and list(tmp_path.iterdir()) == []
