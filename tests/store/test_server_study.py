"""A study on a PostgreSQL server, opened by address: the commands, and what is refused.

Runs against the real server of the ``postgres_server`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
import secrets

import psycopg
import pytest
from sqlalchemy import text

from portalreview.applog import log_path
from portalreview.cli import main
from portalreview.store import backends
from portalreview.store.backends import ServerProject, open_project
from portalreview.store.backends.postgres import PasswordNeeded, ServerError
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


@pytest.fixture
def server(postgres_server):
    return postgres_server


@pytest.fixture
def address(server) -> str:
    """An empty database, as a person types its address (with the password)."""
    return server.dsn(server.new_database())


def test_new_info_and_report_by_address_never_show_the_password(server, address, capsys, tmp_path):
    password = server.admin_password
    assert main(["new", address, "--name", "Ward 5", "--annotator", "ava", "--pi", "pat"]) == 0
    assert main(["info", address, "--json"]) == 0
    out = capsys.readouterr().out
    assert "***" in out
    info = json.loads(out[out.index("{") :])
    assert info["name"] == "Ward 5" and [a["name"] for a in info["annotators"]] == ["ava", "pat"]
    database = address.rsplit("/", 1)[1]
    assert info["path"].endswith(f"@127.0.0.1:{server.port}/{database}")
    assert main(["report", address, "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["project"]["name"] == "Ward 5"
    said = capsys.readouterr()
    assert password not in out + said.out + said.err + (tmp_path / "r.json").read_text()
    assert password not in log_path().read_text()


def test_a_study_made_by_address_holds_what_the_service_saved(server, address):
    with ServerProject.create(address.replace("postgresql://", "postgresql+psycopg://")) as p:
        study = build_small_study(p)
        study.service.as_viewer("ava").save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
    with open_project(address, read_only=True) as p:
        assert StudyService(p).info()["kinds"]["urgency"]["annotators"]["ava"]["submitted"] == 1
        assert p.integrity_check() == "ok"


def test_a_read_only_server_study_refuses_writes(server, address):
    ServerProject.create(address).close()
    with open_project(address, read_only=True) as p, pytest.raises(Exception, match="read-only"):
        StudyService(p).add_annotator("zoe")


def test_a_database_of_another_program_is_refused_and_left_alone(server, address, capsys):
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    assert main(["info", address]) == 2
    assert "is a database, but not a PortalReview study" in capsys.readouterr().err
    assert main(["new", address]) == 2
    assert "already holds tables" in capsys.readouterr().err
    with psycopg.connect(address) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    assert tables == [("invoices",)]


def test_a_study_of_a_newer_version_is_refused(server, address, capsys):
    ServerProject.create(address).close()
    with psycopg.connect(address) as conn:
        conn.execute("UPDATE project_meta SET value = '99' WHERE key = 'schema_version'")
    assert main(["info", address]) == 2
    assert "written by a newer PortalReview (study format 99" in capsys.readouterr().err


def test_a_server_too_old_is_refused_in_words(server, address, capsys, monkeypatch):
    """Every save asks the server for its transaction's id (PostgreSQL 13's functions): an
    older server is refused when a study is made or opened, not at the first save."""
    from portalreview.store.backends import postgres

    with psycopg.connect(address) as conn:
        major, minor = divmod(int(conn.execute("SHOW server_version_num").fetchone()[0]), 10000)
    ServerProject.create(address).close()
    monkeypatch.setattr(postgres, "MIN_SERVER_VERSION", (major + 1,))
    assert main(["info", address]) == 2
    words = capsys.readouterr().err
    assert f"runs PostgreSQL {major}.{minor};" in words
    assert f"PortalReview needs PostgreSQL {major + 1} or newer" in words
    with pytest.raises(ServerError, match="Ask IT to upgrade the server"):
        ServerProject.create(server.dsn(server.new_database()))
    monkeypatch.setattr(postgres, "MIN_SERVER_VERSION", (major,))  # this very server: opens
    assert main(["info", address]) == 0


def test_a_wrong_or_missing_password(server, address, capsys, monkeypatch):
    ServerProject.create(address).close()
    wrong = address.replace(server.admin_password, "not-the-password")
    assert main(["info", wrong]) == 2
    err = capsys.readouterr().err
    assert "refused the password of portalreview_admin" in err and "not-the-password" not in err
    bare = address.replace(":" + server.admin_password, "")
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")  # nothing to find it in
    with pytest.raises(PasswordNeeded, match="asks for portalreview_admin's password"):
        open_project(bare)
    asked = []
    monkeypatch.setattr(
        backends, "password_prompt", lambda where: asked.append(where) or server.admin_password
    )
    with open_project(bare, read_only=True) as p:
        assert p.meta("application") == "PortalReview"
    assert asked == [bare]


def test_a_password_file_is_read_by_libpq(server, address, tmp_path, monkeypatch):
    ServerProject.create(address).close()
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{server.port}:*:portalreview_admin:{server.admin_password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    with open_project(address.replace(":" + server.admin_password, ""), read_only=True) as p:
        assert p.meta("application") == "PortalReview"


def test_no_server_at_the_address(capsys):
    assert main(["info", "postgresql://ava:secret@127.0.0.1:1/study"]) == 2
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "secret" not in err


def test_an_address_without_a_database_is_explained():
    with pytest.raises(ServerError, match="names no database"):
        open_project("postgresql://127.0.0.1:5432")
    with pytest.raises(ServerError, match="its port is not a number") as caught:
        open_project("postgresql://lee:secret@127.0.0.1:notaport/ward5")  # (Python's int())
    assert "secret" not in str(caught.value)


def test_member_lets_a_database_role_work_as_an_annotator(server, address, capsys, tmp_path):
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    server.admin_sql("CREATE ROLE ava_member LOGIN PASSWORD 'ava-pw'")
    assert main(["member", address, "ava_member", "--as", "ava"]) == 0
    assert "now works as ava (a clinician" in capsys.readouterr().out
    as_ava = server.dsn(address.rsplit("/", 1)[1], "ava_member", "ava-pw")
    with open_project(as_ava) as p:
        assert p.member() == "ava"
    assert main(["member", address, "nobody_here", "--as", "ava"]) == 2
    assert "there is no database role 'nobody_here'" in capsys.readouterr().err
    assert main(["member", address, "ava_member", "--as", "zoe"]) == 2
    assert "there is no annotator 'zoe'" in capsys.readouterr().err
    assert main(["member", str(tmp_path / "x.prproj"), "r", "--as", "ava"]) == 2
    assert "members are for server studies" in capsys.readouterr().err


def test_a_pi_role_made_a_clinicians_keeps_none_of_the_pis_rights(server, address, capsys):
    """IT moved the PI's database role to a clinician: the role kept every right of the PI
    (grants were only ever added), writing study_members among them, and one UPDATE made it
    the PI again."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    assert main(["setup", address, "--add-annotator", "cy"]) == 0
    lee = f"lee_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {lee} LOGIN PASSWORD 'lee-pw'")
    assert main(["member", address, lee, "--as", "pat"]) == 0
    assert main(["member", address, lee, "--as", "cy"]) == 0
    assert "now works as cy (a clinician" in capsys.readouterr().out
    as_lee = server.dsn(address.rsplit("/", 1)[1], lee, "lee-pw")
    with open_project(as_lee) as p:
        assert p.member() == "cy"
    with psycopg.connect(as_lee) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE study_members SET annotator_id = annotator_id")
    capsys.readouterr()


def test_a_pis_command_run_by_a_clinicians_role_is_refused_in_words(
    server, address, capsys, tmp_path
):
    """The server refuses a clinician's role the PI's commands; the refusal came as a Python
    traceback (permission denied for table annotators...)."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    ava = f"ava_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {ava} LOGIN PASSWORD 'ava-pw'")
    assert main(["member", address, ava, "--as", "ava"]) == 0
    assert main(["setup", address, "--add-annotator", "ben"]) == 0
    capsys.readouterr()
    as_ava = server.dsn(address.rsplit("/", 1)[1], ava, "ava-pw")
    for command in (
        ["setup", as_ava, "--add-annotator", "zed"],
        ["own-examples", as_ava, "--examples", "3"],
        ["copy", as_ava, "--to", str(tmp_path / "mine.prproj")],
    ):
        assert main(command) == 2, command
        said = capsys.readouterr().err
        assert "the study server refused this to your database account" in said, command
        assert "Traceback" not in said
    for who in ("ava", "ben"):  # (for ben it said he had no unit: she cannot see his)
        assert main(["copy", as_ava, "-o", str(tmp_path / "mine.prproj"), "--for", who]) == 2
        said = capsys.readouterr().err
        assert "works as the clinician ava, who sees only their own work" in said, who
        assert "made by the study's PI" in said and "Traceback" not in said
    with open_project(address, read_only=True) as p, p.read() as s:
        assert "zed" not in s.execute(text("SELECT name FROM annotators")).scalars().all()
    assert not (tmp_path / "mine.prproj").exists()


def test_member_is_run_by_the_databases_owner(server, address, capsys):
    """Run with the PI's account it told the owner to get CREATEROLE, which it had."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    pat, ava = (f"{who}_{secrets.token_hex(4)}" for who in ("pat", "ava"))
    server.admin_sql(f"CREATE ROLE {pat} LOGIN PASSWORD 'p'", f"CREATE ROLE {ava} LOGIN")
    assert main(["member", address, pat, "--as", "pat"]) == 0
    capsys.readouterr()
    as_pat = server.dsn(address.rsplit("/", 1)[1], pat, "p")
    assert main(["member", as_pat, ava, "--as", "ava"]) == 2
    said = capsys.readouterr().err
    assert "is run with the account that owns the study's database" in said
    assert "CREATEROLE" not in said
    with open_project(address, read_only=True) as p, p.read() as s:
        assert s.execute(text("SELECT role_name FROM study_members")).scalars().all() == [pat]


def test_a_clinicians_role_uses_the_bundled_prompt_templates(server, address, capsys):
    """A clinician's first suggest on a team study stopped with a traceback: it tried to
    store the default templates, which the server lets only the PI write."""
    from portalreview.llm.templates import PromptLibrary

    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    ava = f"ava_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {ava} LOGIN PASSWORD 'ava-pw'")
    assert main(["member", address, ava, "--as", "ava"]) == 0
    with open_project(server.dsn(address.rsplit("/", 1)[1], ava, "ava-pw")) as project:
        library = PromptLibrary(StudyService(project))
        assert library.install_defaults() == []
        assert library.template("urgency_pair").key == "urgency_pair@default"
    with open_project(address, read_only=True) as p, p.read() as s:
        assert s.execute(text("SELECT count(*) FROM prompt_templates")).scalar() == 0


def test_a_person_has_one_database_role(server, address, capsys):
    """A second role for the same annotator stopped with a UniqueViolation traceback."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    one, two = (f"ava_{secrets.token_hex(4)}" for _ in range(2))
    server.admin_sql(
        f"CREATE ROLE {one} LOGIN PASSWORD 'a'", f"CREATE ROLE {two} LOGIN PASSWORD 'b'"
    )
    assert main(["member", address, one, "--as", "ava"]) == 0
    capsys.readouterr()
    assert main(["member", address, two, "--as", "ava"]) == 2
    assert f"ava already works through the database role '{one}'" in capsys.readouterr().err
    with open_project(address, read_only=True) as p, p.read() as s:
        assert s.execute(text("SELECT role_name FROM study_members")).scalars().all() == [one]


def test_the_documented_set_up_with_an_owner_who_is_no_superuser(server, capsys, tmp_path):
    """docs/deployment.md's set-up, step by step: an owner without CREATEROLE is told what to
    grant (nothing changed), then the clinician's role works as her (and, as a clinician,
    is refused the report, which would count only her own answers)."""
    database = f"ward_{secrets.token_hex(4)}"
    owner, ava = f"owner_{database}", f"ava_{database}"
    server.admin_sql(
        f"CREATE ROLE {owner} LOGIN PASSWORD 'owner-pw'",
        f"CREATE DATABASE {database} OWNER {owner}",
        f"REVOKE ALL ON DATABASE {database} FROM PUBLIC",
        f"CREATE ROLE {ava} LOGIN PASSWORD 'ava-pw'",
    )
    as_owner = server.dsn(database, owner, "owner-pw")
    assert main(["new", as_owner, "--annotator", "ava", "--pi", "pat"]) == 0
    capsys.readouterr()
    assert main(["member", as_owner, ava, "--as", "ava"]) == 2
    assert "CREATEROLE" in capsys.readouterr().err
    with open_project(as_owner, read_only=True) as p, p.read() as s:
        assert s.execute(text("SELECT count(*) FROM study_members")).scalar() == 0
    server.admin_sql(f"ALTER ROLE {owner} CREATEROLE")
    assert main(["member", as_owner, ava, "--as", "ava"]) == 0
    out = tmp_path / "ava.json"
    as_ava = server.dsn(database, ava, "ava-pw")
    assert main(["report", as_ava, "-o", str(out), "--resamples", "0"]) == 2
    assert "only the PI or the study's owner can write" in capsys.readouterr().err
    with open_project(as_ava, read_only=True) as p:
        assert p.member() == "ava"


def _member_command(server, database: str, role: str, name: str) -> str:
    """The ``portalreview member`` command the words give IT: the study owner's address."""
    owner = f"postgresql://portalreview_admin@127.0.0.1:{server.port}/{database}"
    return f'portalreview member "{owner}" {role} --as {name}'


def test_a_study_restored_or_copied_before_its_members_are_set_up_again_says_so(
    server, address, capsys
):
    """A copy of the study's database (pg_restore, CREATE DATABASE ... TEMPLATE) keeps
    study_members but not the search path `member` gave the clinician in the first database:
    she was told her account "works as a clinician or lacks this right ... the PI runs it"
    (the app: an empty window). Now the open says what happened and what IT runs; once run,
    she works in the copy, and the PI's account (no search path of its own) always did."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    ava, pat = (f"{who}_{secrets.token_hex(4)}" for who in ("ava", "pat"))
    server.admin_sql(
        f"CREATE ROLE {ava} LOGIN PASSWORD 'ava-pw'", f"CREATE ROLE {pat} LOGIN PASSWORD 'p'"
    )
    assert main(["member", address, ava, "--as", "ava"]) == 0
    assert main(["member", address, pat, "--as", "pat"]) == 0
    copy = server.clone_database(address.rsplit("/", 1)[1], prefix="restored")
    capsys.readouterr()
    as_ava = server.dsn(copy, ava, "ava-pw")
    assert main(["info", as_ava]) == 2
    said = capsys.readouterr().err
    assert f"The database account {ava} works as ava in the study at" in said
    assert "the study was restored or copied into this database since IT set" in said
    assert _member_command(server, copy, ava, "ava") in said
    assert "lacks this right" not in said and "ava-pw" not in said
    with open_project(server.dsn(copy, pat, "p")) as p:
        assert p.member() == "pat"
    assert main(["member", server.dsn(copy), ava, "--as", "ava"]) == 0
    with open_project(as_ava) as p:
        assert p.member() == "ava"


def test_a_login_that_is_no_member_of_the_study_is_told_so(server, address, capsys):
    """An account that may connect but was never made a member: "refused this: permission
    denied for table project_meta", nothing on what to do. Where it may not even connect
    (IT revoked CONNECT from PUBLIC, as docs/deployment.md says), the server's words came."""
    assert main(["new", address, "--annotator", "ava"]) == 0
    eve = f"eve_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {eve} LOGIN PASSWORD 'eve-pw'")
    database = address.rsplit("/", 1)[1]
    capsys.readouterr()
    assert main(["info", server.dsn(database, eve, "eve-pw")]) == 2
    said = capsys.readouterr().err
    assert f"The database account {eve} may connect to" in said
    assert "but is not a member of the study there" in said
    assert _member_command(server, database, eve, "NAME") in said
    assert "permission denied" not in said
    server.admin_sql(f'REVOKE ALL ON DATABASE "{database}" FROM PUBLIC')
    assert main(["info", server.dsn(database, eve, "eve-pw")]) == 2
    said = capsys.readouterr().err
    assert f"does not let the database account {eve} connect to {database}" in said
    assert f"portalreview member ADDRESS {eve} --as NAME" in said
    assert "FATAL" not in said


def test_a_clinician_whose_rights_are_given_in_part_is_told_who_sets_them_up(
    server, address, capsys
):
    """A refusal of a command that is hers to run (a right taken from her account) said only
    that the PI or IT runs it; it now says that IT sets her account up again, and how."""
    assert main(["new", address, "--annotator", "ava", "--pi", "pat"]) == 0
    ava = f"ava_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {ava} LOGIN PASSWORD 'ava-pw'")
    assert main(["member", address, ava, "--as", "ava"]) == 0
    database = address.rsplit("/", 1)[1]
    server.admin_sql(f"REVOKE SELECT ON assignments FROM {ava}", database=database)
    capsys.readouterr()
    assert main(["info", server.dsn(database, ava, "ava-pw")]) == 2
    said = capsys.readouterr().err
    assert "(permission denied for table assignments)" in said
    assert "your account is not fully set up as a member of the study" in said
    assert "portalreview member ADDRESS ROLE --as NAME" in said and "Traceback" not in said
