"""A server study's password asked at the terminal: every command that opens an address asks
(``info``, ``new``, ``copy --to``, ``upgrade``), and giving none ends in one line, status 2.

Runs against the real server of the ``postgres_server`` fixture (tests/conftest.py); the
terminal is faked (stdin says it is one, getpass answers).
"""

from __future__ import annotations

import getpass
import io

import pytest

from portalreview.cli import main
from portalreview.store import backends
from portalreview.store.backends import ServerProject


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def at_a_terminal(monkeypatch):
    """stdin a terminal, no password in the environment or a password file; the prompt as it
    was after the test (main sets it)."""
    monkeypatch.setattr("sys.stdin", FakeTerminal())
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")
    monkeypatch.setattr(backends, "password_prompt", backends.password_prompt)


def typed(monkeypatch, answer: str | type[BaseException]) -> list[str]:
    """getpass gives ``answer`` (or raises it); the prompts shown, in a list."""
    prompts: list[str] = []

    def fake_getpass(prompt: str = "Password: ", stream=None) -> str:
        prompts.append(prompt)
        if isinstance(answer, str):
            return answer
        raise answer

    monkeypatch.setattr(getpass, "getpass", fake_getpass)
    return prompts


def bare(server, database: str) -> str:
    """The address as a person types it: no password in it."""
    return server.dsn(database).replace(":" + server.admin_password, "")


@pytest.mark.parametrize(
    "key", [EOFError, KeyboardInterrupt, ""], ids=["ctrl-d", "ctrl-c", "empty"]
)
def test_no_password_at_the_prompt_is_one_line_and_status_2(
    postgres_server, at_a_terminal, monkeypatch, capsys, key
):
    """Ctrl-D (end of input) or Ctrl-C at the prompt used to end in a traceback."""
    database = postgres_server.new_database()
    ServerProject.create(postgres_server.url(database)).close()
    address = bare(postgres_server, database)
    prompts = typed(monkeypatch, key)
    assert main(["info", address]) == 2
    err = capsys.readouterr().err
    assert prompts == [f"Password for {address}: "]
    assert f"portalreview info: no password was given for {address}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_new_copy_and_upgrade_ask_for_the_password_as_info_does(
    postgres_server, at_a_terminal, monkeypatch, capsys, tmp_path
):
    """They never asked: at a terminal, with no password file, they failed on the server's
    "no password supplied" while info asked."""
    made, copied = postgres_server.new_database(), postgres_server.new_database()
    prompts = typed(monkeypatch, postgres_server.admin_password)
    assert main(["new", bare(postgres_server, made), "--name", "Ward 5", "--pi", "pat"]) == 0
    assert main(["upgrade", bare(postgres_server, made)]) == 0
    study_file = tmp_path / "s.prproj"
    assert main(["new", str(study_file), "--pi", "pat"]) == 0
    assert main(["copy", str(study_file), "--to", bare(postgres_server, copied)]) == 0
    assert main(["info", bare(postgres_server, copied)]) == 0
    out = capsys.readouterr().out
    assert "is already in format" in out and "Copied the whole study to" in out
    assert prompts == [
        f"Password for {bare(postgres_server, database)}: "
        for database in (made, made, copied, copied)
    ]
