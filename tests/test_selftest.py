"""``portalreview selftest``: it checks an installation and a project without changing either
(docs/deployment.md, "Check an installation")."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest

from portalreview import selftest
from tests.ui.ui_support import make_gui_study


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (backups are made in a folder beside a project)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _temporary_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob(".portalreview-*")}


def _run(capsys, *args: str, qt: bool = False) -> tuple[int, str]:
    status = selftest.main([*args] if qt else [*args, "--no-qt"])
    return status, capsys.readouterr().out


@pytest.fixture
def study(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    return make_gui_study(folder)


def _make_older(path: Path, version: int = 7) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


def _assert_unchanged(folder: Path, before: dict[str, bytes]) -> None:
    after = _files(folder)
    # SQLite's readers of a file in WAL mode may leave an empty -wal and its index
    extra = set(after) - set(before)
    assert extra <= {"gui.prproj-wal", "gui.prproj-shm"}, extra
    assert after.get("gui.prproj-wal", b"") == b""
    assert {name: after[name] for name in before} == before


@pytest.mark.parametrize("older", [False, True], ids=["this format", "older format"])
def test_the_audit_step_checks_a_project_without_changing_it(study, capsys, older):
    if older:
        _make_older(study.path)
    before, folders = _files(study.path.parent), _temporary_folders()
    status, out = _run(capsys, "--project", str(study.path))
    assert "selftest: audit: ok (audit log intact" in out, out
    if older:
        assert "older format 7: verified in a temporary copy" in out
    assert status == selftest.EXIT_OK, out
    _assert_unchanged(study.path.parent, before)
    assert _temporary_folders() == folders


def test_the_audit_step_fails_on_a_changed_answer(study, capsys):
    conn = sqlite3.connect(study.path)  # what anyone with the file and sqlite3 can do
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("UPDATE audit_log SET new_json = replace(new_json, 'ben', 'bob') WHERE id = 2")
    conn.commit()
    conn.close()
    status, out = _run(capsys, "--project", str(study.path))
    assert "selftest: audit: FAILED" in out
    assert status == selftest.EXIT_FAILED


@pytest.mark.parametrize("older", [False, True], ids=["this format", "older format"])
def test_the_window_opens_a_project_without_changing_it(qapp, study, capsys, older):
    if older:
        _make_older(study.path)
    before, folders = _files(study.path.parent), _temporary_folders()
    status, out = _run(capsys, "--project", str(study.path), "--as", "ava", qt=True)
    assert "selftest: qt: ok" in out, out
    assert "opened gui.prproj read-only, editors shown: respond, rank" in out, out
    assert status == selftest.EXIT_OK, out
    _assert_unchanged(study.path.parent, before)
    assert _temporary_folders() == folders


def test_the_window_signs_in_as_someone_with_work_when_no_name_is_given(qapp, study, capsys):
    """Without --as the window asked who was signing in, and the self-test waited for ever."""
    status, out = _run(capsys, "--project", str(study.path), qt=True)
    assert "editors shown: respond, rank" in out and "(signed in as ava)" in out, out
    assert status == selftest.EXIT_OK, out


def test_the_pi_with_no_units_of_their_own_passes(qapp, study, capsys):
    """docs/deployment.md's ``--as`` the PI failed ("pat has no work"), though the app opens
    the study for them."""
    status, out = _run(capsys, "--project", str(study.path), "--as", "pat", qt=True)
    assert "selftest: qt: ok" in out and "no units of their own (signed in as pat" in out, out
    assert status == selftest.EXIT_OK, out


@pytest.mark.parametrize("command", ["portalreview", "python -m portalreview.selftest"])
def test_the_help_is_plain_text(capsys, command):
    """`portalreview selftest --help` showed the reST markup of the module's first line."""
    from portalreview.cli import main

    with pytest.raises(SystemExit):
        main(["selftest", "--help"]) if command == "portalreview" else selftest.main(["--help"])
    out = capsys.readouterr().out
    assert "portalreview selftest: check an installed program" in out and "``" not in out


def test_a_dialog_instead_of_the_window_fails_the_step_in_its_words(qapp, study, capsys):
    status, out = _run(capsys, "--project", str(study.path), "--as", "zed", qt=True)
    assert "selftest: qt: FAILED: RuntimeError: the window asked instead of opening" in out, out
    assert "there is no annotator called 'zed'" in out, out
    assert status == selftest.EXIT_FAILED


def test_the_audit_step_checks_a_server_study(postgres_server, capsys, monkeypatch):
    """Given a postgresql:// address, --project read it as a file path ("There is no file
    .../postgresql:/..."). The PI's login, whose password is asked at the terminal as every
    command asks it, checks the whole log; a clinician's login reaches the study and says
    the log was not checked."""
    from portalreview.store import backends
    from portalreview.store.backends import ServerProject
    from tests.conftest import build_small_study
    from tests.test_cli_password import FakeTerminal, typed

    server, database = postgres_server, postgres_server.new_database()
    with ServerProject.create(server.url(database)) as project:
        build_small_study(project)
        pi, pi_password = server.member_login(project, "pat")
        clinician, clinician_password = server.member_login(project, "ava")
    monkeypatch.setattr("sys.stdin", FakeTerminal())
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")
    monkeypatch.setattr(backends, "password_prompt", None)
    prompts = typed(monkeypatch, pi_password)
    status, out = _run(capsys, "--project", server.dsn(database, pi))
    assert prompts == [f"Password for {server.dsn(database, pi)}: "]
    assert "selftest: server: ok (psycopg " in out, out
    assert f"selftest: audit: ok (connected to {server.dsn(database, pi)}; audit log intact" in out
    assert status == selftest.EXIT_OK, out
    status, out = _run(capsys, "--project", server.dsn(database, clinician, clinician_password))
    assert "read the study; its audit log NOT checked: this login is a clinician's" in out, out
    assert status == selftest.EXIT_OK, out


def test_the_portalreview_command_has_selftest_without_being_frozen(capsys):
    """docs/deployment.md's check of an installation answered "selftest does not exist (and is
    not a verb…)" in an install from the source: only the frozen program's entry script added
    the verb."""
    from portalreview.cli import main

    assert main(["selftest", "--no-qt"]) == 0
    out = capsys.readouterr().out
    assert "selftest: imports: ok" in out and "selftest: all steps passed" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "selftest" not in capsys.readouterr().out  # a hidden verb: no help line
