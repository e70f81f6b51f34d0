"""A project file whose stored catalogs cannot be read (damaged), or that has none (its making
was cut short): every command says so in words, exit 2, and writes nothing into it first."""

from __future__ import annotations

import sqlite3

import pytest

from portalreview.cli import main


def _damage(path, value: str | None) -> None:
    conn = sqlite3.connect(path)
    with conn:
        if value is None:
            conn.execute("DELETE FROM project_meta WHERE key = 'catalogs'")
        else:
            conn.execute("UPDATE project_meta SET value = ? WHERE key = 'catalogs'", (value,))
    conn.close()


def _rows(path) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("prompt_templates", "audit_log")
        )
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "catalogs (themes, urgency scale, EPPC codebook, criteria) cannot be read"),
        ('{"themes": 3}', "cannot be read"),
        (None, "making it was cut short"),
    ],
    ids=["not JSON", "not catalogs", "none"],
)
@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["verify"],
        ["suggest", "--model", "no-such-model.gguf", "--kind", "empathy"],
    ],
    ids=["info", "verify", "suggest"],
)
def test_damaged_catalogs_are_named_and_nothing_is_written(
    study_file, capsys, value, words, command
):
    path, _units = study_file
    _damage(path, value)
    before = _rows(path)
    code = main([command[0], str(path), *command[1:]])
    assert code == 2
    assert words in capsys.readouterr().err
    assert _rows(path) == before
