"""Schema versions of a server study, with Alembic (store/backends/server_migrations): a
format-1 study upgraded by ``portalreview upgrade`` has exactly a new study's schema, rules and
security, and the same content as the format-1 file upgraded by the file's own runner."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from portalreview.cli import main
from portalreview.store.backends import Project, ServerProject, open_project, server_migrations
from portalreview.store.backends.postgres import ServerError
from portalreview.store.migrations import SCHEMA_VERSION
from portalreview.store.models import Base
from tests.store.test_transfer import _same_export

V1_FILE = Path(__file__).parent / "data" / "v1-small.prproj"

# What a study's schema is made of, read from PostgreSQL's catalogs (order-free).
CATALOG = {
    "columns": "SELECT table_schema, table_name, column_name, data_type, is_nullable, "
    "column_default, is_generated, generation_expression FROM information_schema.columns "
    "WHERE table_schema IN ('public', 'blinded')",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
    "FROM pg_constraint WHERE connamespace = 'public'::regnamespace",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "triggers": "SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger "
    "WHERE NOT tgisinternal",
    "functions": "SELECT proname, pg_get_functiondef(oid) FROM pg_proc "
    "WHERE pronamespace = 'public'::regnamespace",
    "policies": "SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies",
    "row_security": "SELECT relname, relrowsecurity FROM pg_class "
    "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = 'blinded'",
    "view_options": "SELECT relname, array_to_string(reloptions, ',') FROM pg_class "
    "WHERE relnamespace = 'blinded'::regnamespace",
}


def _catalog(address: str) -> dict[str, set]:
    engine = create_engine(address)
    try:
        with engine.connect() as conn:
            return {name: set(map(tuple, conn.execute(text(sql)))) for name, sql in CATALOG.items()}
    finally:
        engine.dispose()


def _fill_from_file(conn, path: Path) -> None:
    """The rows of an old project file, into the server study of the same format."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    columns_there = inspect(conn)
    try:
        tables = source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        present = {row[0] for row in tables}
        for table in Base.metadata.sorted_tables:
            if table.name not in present:
                continue
            names = [row[1] for row in source.execute(f"PRAGMA table_info({table.name})")]
            flags = {
                c["name"] for c in columns_there.get_columns(table.name)
                if str(c["type"]) == "BOOLEAN"
            }  # fmt: skip
            rows = source.execute(
                f"SELECT {', '.join(chr(34) + n + chr(34) for n in names)} FROM {table.name} "
                "ORDER BY rowid"
            ).fetchall()
            if not rows:
                continue
            quoted = ", ".join(f'"{n}"' for n in names)
            marks = ", ".join(f":p{i}" for i in range(len(names)))
            values = [
                {f"p{i}": bool(v) if n in flags and v is not None else v
                 for i, (n, v) in enumerate(zip(names, row, strict=True))}
                for row in rows
            ]  # fmt: skip
            conn.execute(text(f"INSERT INTO {table.name} ({quoted}) VALUES ({marks})"), values)
            key = list(table.primary_key.columns)
            if len(key) == 1 and key[0].autoincrement is not False and names[0] == key[0].name:
                sequence = conn.execute(
                    text("SELECT pg_get_serial_sequence(:t, :c)"),
                    {"t": table.name, "c": key[0].name},
                ).scalar()
                if sequence:
                    conn.execute(
                        text(f"SELECT setval(:s, (SELECT max({key[0].name}) FROM {table.name}))"),
                        {"s": sequence},
                    )
    finally:
        source.close()


@pytest.fixture
def v1_server_study(postgres_server) -> str:
    """A server study in format 1 holding the format-1 test file's rows: a new study taken
    down to revision v1 by the steps' downgrades, then filled."""
    address = postgres_server.url(postgres_server.new_database())
    ServerProject.create_empty(address).close()
    engine = create_engine(address)
    try:
        with engine.begin() as conn:
            server_migrations.downgrade(conn, "v1")
            _fill_from_file(conn, V1_FILE)
    finally:
        engine.dispose()
    return address


def test_a_new_study_is_at_the_newest_revision(postgres_server):
    address = postgres_server.url(postgres_server.new_database())
    ServerProject.create(address).close()
    engine = create_engine(address)
    with engine.connect() as conn:
        assert server_migrations.revision(conn) == server_migrations.HEAD == "v10"
    engine.dispose()


def test_an_older_server_study_is_refused_until_it_is_upgraded(v1_server_study, capsys):
    with pytest.raises(ServerError, match=r"older study format \(1\).*portalreview upgrade"):
        open_project(v1_server_study)
    address = v1_server_study.replace("postgresql+psycopg://", "postgresql://")
    assert main(["upgrade", address]) == 0
    assert "from format 1 to 10" in capsys.readouterr().out
    assert main(["upgrade", address]) == 0
    assert "already in format 10" in capsys.readouterr().out
    with open_project(address) as study:
        assert study.meta("schema_version") == str(SCHEMA_VERSION) == "10"


def test_an_upgraded_study_has_a_new_studys_schema_and_the_files_content(
    v1_server_study, postgres_server, tmp_path
):
    fresh = postgres_server.url(postgres_server.new_database())
    ServerProject.create_empty(fresh).close()
    before = _catalog(v1_server_study)
    ServerProject.upgrade(v1_server_study)
    upgraded, new = _catalog(v1_server_study), _catalog(fresh)
    assert before != new  # the format-1 study really was different
    for part in CATALOG:
        assert upgraded[part] == new[part], (part, upgraded[part] ^ new[part])
    file_copy = tmp_path / "v1.prproj"
    shutil.copy(V1_FILE, file_copy)
    with Project.open(file_copy) as upgraded_file, ServerProject.open(v1_server_study) as study:
        _same_export(upgraded_file, study, tmp_path, "upgraded")


def test_a_failed_step_changes_nothing(v1_server_study, monkeypatch):
    from portalreview.store.backends.server_migrations import steps

    def broken(version: int) -> None:
        if version == 3:
            raise RuntimeError("step 3 failed")

    before = _catalog(v1_server_study)
    monkeypatch.setattr(steps, "set_format", broken)
    with pytest.raises(RuntimeError, match="step 3 failed"):
        ServerProject.upgrade(v1_server_study)
    assert _catalog(v1_server_study) == before
