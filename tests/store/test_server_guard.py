"""What a clinician can do with their own SQL on a server study, beyond what the blinding
tests ask (store/backends/postgres_security.py), on a new study and on one upgraded from
format 7 (Alembic v8):

* the blinded views are security barriers: a condition that fails on a value
  (``message::int = 0``) never runs on a row the view hides, so its error message shows
  nothing of another unit's case, response or hidden tag;
* the audit log's guard: an entry inserted by hand must follow the newest entry, carry the
  hash the program computes, and, for a clinician, be about their own answer and units; the
  PI's and the owner's are checked for the chain too, and only in a READ COMMITTED
  transaction (a REPEATABLE READ one would check against its old snapshot and fork the chain);
  no two entries may follow the same one, whatever the trigger lets through, and a study whose
  log is already forked is not upgraded. The hash computed by the database is the program's,
  bit for bit."""

from __future__ import annotations

import json
import random
import secrets

import psycopg
import pytest
from sqlalchemy import create_engine, text

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import ServerProject, server_migrations
from portalreview.store.backends.postgres import WRITE_LOCK, ServerError
from portalreview.store.models import AuditEntry, utc_now
from portalreview.store.service import GENESIS_HASH, StoreError, StudyService, audit_hash
from tests.io.io_support import full_study

SECRET = "SECRET-jane-roe-hiv"


@pytest.fixture(params=["new", "upgraded"])
def team(request, postgres_server):
    """The full test study, plus a case, a draft and a unit given to ben alone, a hidden
    relevancy tag on a case of ava's, and a comment in ben's answer, all holding SECRET; a
    database role for ava, ben and the PI. "upgraded": the study taken down to format 7 and
    upgraded again, as ``portalreview upgrade`` does for an existing study."""
    server = postgres_server
    database = server.new_database()
    address = server.url(database)
    project = ServerProject.create(address)
    study = full_study(project)
    svc = study.service
    case = svc.add_case(
        f"ext-{SECRET}", f"message {SECRET}", chart_text=f"chart {SECRET}", urgency_level=2
    )
    draft = svc.add_response(
        case, f"d-{SECRET}", f"draft {SECRET}", author_kind="model", author="gpt-x"
    )
    unit = svc.add_unit(svc.create_unit_set("ben only", "respond"), case)
    svc.assign(unit, study.ben)
    server.admin_sql(
        f"INSERT INTO case_tags (case_id, key, value) VALUES ({study.case1}, 'relevancy', "
        f"'tag {SECRET}')",
        database=database,
    )
    ben = svc.as_viewer("ben")
    with project.read() as s:
        mine = s.execute(
            text("SELECT unit_id FROM answers WHERE annotator_id = :b AND NOT is_gold"),
            {"b": study.ben},
        ).scalars()
        ben_units = list(mine)
    for unit_id in ben_units:  # through the program: the log records it
        answer = ben.get_answer(unit_id)
        ben.save_answer(unit_id, answer.payload, status=answer.status, comment=f"comment {SECRET}")
    roles = {person: server.member_login(project, person) for person in ("ava", "ben", "pat")}
    if request.param == "upgraded":
        engine = create_engine(address)
        try:
            with engine.begin() as conn:
                server_migrations.downgrade(conn, "v7")
        finally:
            engine.dispose()
        assert ServerProject.upgrade(address) == (7, 10)
    ben_answer = _answer(project, study.ben, study.units["urgency"])
    extra = {"case": case, "draft": draft, "unit": unit, "ben_answer": ben_answer}
    yield server, database, project, study, roles, extra
    project.close()


def _answer(project, annotator_id: int, unit_id: int) -> int:
    with project.read() as s:
        return s.execute(
            text("SELECT id FROM answers WHERE annotator_id = :a AND unit_id = :u AND NOT is_gold"),
            {"a": annotator_id, "u": unit_id},
        ).scalar_one()


def _connect(team, person) -> psycopg.Connection:
    server, database, _project, _study, roles, _extra = team
    role, password = roles[person]
    return psycopg.connect(server.dsn(database, role, password), autocommit=True)


def _open_as(team, person) -> ServerProject:
    server, database, _project, _study, roles, _extra = team
    role, password = roles[person]
    return ServerProject.open(server.url(database, role, password))


# --- the blinded views --------------------------------------------------------------------------


def test_an_error_message_shows_nothing_of_a_row_the_clinician_may_not_read(team):
    _server, _db, _project, study, _roles, extra = team
    case, draft, unit, answer = extra["case"], extra["draft"], extra["unit"], extra["ben_answer"]
    probes = [
        f"SELECT 1 FROM cases WHERE id = {case} AND message::int = 0",
        f"SELECT 1 FROM cases WHERE id = {case} AND (external_id || chart_text)::int = 0",
        f"SELECT 1 FROM responses WHERE id = {draft} AND text::int = 0",
        f"SELECT 1 FROM responses WHERE case_id = {case} AND text::int = 0",
        "SELECT 1 FROM case_tags WHERE key = 'relevancy' AND value::int = 0",
        f"SELECT 1 FROM units WHERE id = {unit} AND ('unit ' || case_id)::int = 0",
        f"SELECT 1 FROM answers WHERE id = {answer} AND comment::int = 0",
        f"SELECT 1 FROM audit_log WHERE actor_id = {study.ben} AND new_json::int = 0",
    ]
    with _connect(team, "ava") as conn:
        for probe in probes:
            try:
                rows = conn.execute(probe).fetchall()
            except psycopg.Error as error:
                shown = f"{error} {error.diag.message_detail} {error.diag.context}"
                assert SECRET not in shown and f"unit {case}" not in shown, probe
            else:
                assert rows == [], probe
        options = conn.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relnamespace = 'blinded'::regnamespace"
        ).fetchall()
        assert {name: opts for name, opts in options} == {
            name: ["security_barrier=true"] for name in ("cases", "responses", "units", "case_tags")
        }
        leaky = conn.execute(
            "SELECT proname FROM pg_proc WHERE proleakproof "
            "AND pronamespace = 'public'::regnamespace"
        ).fetchall()
        assert leaky == []  # none of our functions may be moved before a view's filter
    with _connect(team, "ben") as conn:  # his own unit, as before
        assert conn.execute(f"SELECT message FROM cases WHERE id = {case}").fetchall() == [
            (f"message {SECRET}",)
        ]


# --- the audit log's guard ----------------------------------------------------------------------


def _entry(conn, actor: int | None, answer_id=None, unit_id=None, prev=None, **fields):
    """A correctly made entry (the program's hash, after the newest entry) unless told."""
    if prev is None:
        prev = conn.execute("SELECT portalreview_last_audit_hash()").fetchone()[0] or GENESIS_HASH
    entry = AuditEntry(
        at=utc_now(),
        actor_id=actor,
        action="update",
        answer_id=answer_id,
        unit_id=unit_id,
        old_json=json.dumps({"note": "x"}),
        new_json=json.dumps({"status": "submitted", "payload": {"forged": True}}),
        prev_hash=prev,
    )
    entry.hash = audit_hash(entry)
    for name, value in fields.items():
        setattr(entry, name, value)
    return entry


def _insert(conn, entry: AuditEntry, row_id: int | None = None) -> None:
    columns = ["at", "actor_id", "action", "answer_id", "unit_id", "old_json", "new_json",
               "prev_hash", "hash"]  # fmt: skip
    values = [getattr(entry, c) for c in columns]
    if row_id is not None:
        columns.append("id")
        values.append(row_id)
    marks = ", ".join(["%s"] * len(values))
    conn.execute(f"INSERT INTO audit_log ({', '.join(columns)}) VALUES ({marks})", values)


def _refused(conn, entry: AuditEntry, words: str, row_id: int | None = None) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match=words):
        _insert(conn, entry, row_id)


def test_a_clinician_cannot_log_a_change_to_someone_elses_answer_or_unit(team):
    _server, _db, project, study, _roles, extra = team
    pi = StudyService(project).as_viewer("pat")
    unit = study.units["urgency"]
    history = pi.history(unit, annotator_id=study.ben)
    with _connect(team, "ava") as conn:
        about_ben = _entry(conn, study.ava, answer_id=extra["ben_answer"], unit_id=unit)
        _refused(conn, about_ben, "can only be about an answer of their own")
        ben_unit = _entry(conn, study.ava, unit_id=extra["unit"])
        _refused(conn, ben_unit, "can only be about a unit given to them")
        with project.read() as s:
            gold = s.execute(text("SELECT id FROM answers WHERE is_gold")).scalar_one()
        _refused(conn, _entry(conn, study.ava, answer_id=gold), "an answer of their own")
    assert pi.history(unit, annotator_id=study.ben) == history
    assert verify_project(project).ok


def test_a_clinicians_junk_entry_is_refused_and_the_log_stays_whole(team):
    _server, _db, project, study, _roles, _extra = team
    own = _answer(project, study.ava, study.units["rank"])
    with _connect(team, "ava") as conn:
        _refused(conn, _entry(conn, study.ava, prev="junk"), "must follow the newest entry")
        _refused(conn, _entry(conn, study.ava, hash="junk"), "must be the hash of its content")
        wrong = _entry(conn, study.ava, old_json='{"note": "y"}')  # hashed before the change
        _refused(conn, wrong, "must be the hash of its content")
        _refused(conn, _entry(conn, study.ava, prev=GENESIS_HASH), "must follow")
        # a number far ahead would put every later entry out of order
        _refused(conn, _entry(conn, study.ava), "given by the database", row_id=10**6)
        _refused(conn, _entry(conn, study.ava), "after the newest entry", row_id=1)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the policy, as before
            _insert(conn, _entry(conn, study.ben))
        # an entry of her own, made as the program makes it, is taken
        _insert(conn, _entry(conn, study.ava, answer_id=own, unit_id=study.units["rank"]))
    with _open_as(team, "ben") as as_ben:  # the program goes on after her
        ben = StudyService(as_ben).as_viewer("ben")
        ben.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1}, comment="new")
    _chain_whole_but_forged(verify_project(project), own)


def test_an_entry_made_without_the_write_lock_cannot_fork_the_chain(team):
    """A raw insert read the newest hash, the program saved meanwhile: the insert, chained to
    the old newest entry, is refused; and an insert holds the program's write lock."""
    _server, _db, project, study, _roles, _extra = team
    with _connect(team, "ava") as conn:
        stale = _entry(conn, study.ava)
        with _open_as(team, "ben") as as_ben:
            ben = StudyService(as_ben).as_viewer("ben")
            ben.save_answer(
                study.units["urgency"], {"more_urgent_case_id": study.case2}, comment="changed"
            )
        _refused(conn, stale, "must follow the newest entry")
        with conn.transaction():
            _insert(conn, _entry(conn, study.ava))
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            with project.read() as s:
                held = s.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                        "AND pid = :p AND objid = :k AND granted"
                    ),
                    {"p": pid, "k": WRITE_LOCK},
                ).scalar()
            assert held == 1
    verification = verify_project(project)
    assert verification.ok, verification.describe()


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_transaction_with_an_old_snapshot_cannot_fork_the_chain(team, level):
    """The reviewer's psql session: ben's transaction reads the newest hash (its snapshot is
    taken then), ava saves through the program, ben inserts an entry correctly hashed after the
    hash he read, about his own answer. Refused: the log stays one chain."""
    server, database, project, study, roles, extra = team
    unit = study.units["urgency"]
    role, password = roles["ben"]
    with psycopg.connect(server.dsn(database, role, password)) as conn:
        conn.execute(f"BEGIN ISOLATION LEVEL {level}")
        entry = _entry(conn, study.ben, answer_id=extra["ben_answer"], unit_id=unit)
        ava = StudyService(project).as_viewer("ava")
        answer = ava.get_answer(unit)
        ava.save_answer(unit, answer.payload, status=answer.status, comment="meanwhile")
        _refused(conn, entry, "only be added in a READ COMMITTED transaction")
        conn.rollback()
    verification = verify_project(project)
    assert verification.ok, verification.describe()
    # without the trigger (a superuser's replica session), the UNIQUE index still refuses
    with psycopg.connect(server.dsn(database), autocommit=True) as owner:
        owner.execute("SET session_replication_role = replica")
        (prev,) = owner.execute(
            "SELECT prev_hash FROM audit_log ORDER BY id DESC LIMIT 1"
        ).fetchone()
        with pytest.raises(psycopg.errors.UniqueViolation, match="audit_log_one_follower"):
            _insert(owner, _entry(owner, None, prev=prev))
    # the program's saves are READ COMMITTED whatever the database's default
    server.admin_sql(
        f"ALTER DATABASE {database} SET default_transaction_isolation = 'serializable'"
    )
    with _open_as(team, "ben") as as_ben:
        ben = StudyService(as_ben).as_viewer("ben")
        ben.save_answer(unit, {"more_urgent_case_id": study.case1}, comment="after")
    verification = verify_project(project)
    assert verification.ok, verification.describe()


def test_a_study_whose_log_is_forked_is_not_upgraded(postgres_server):
    address = postgres_server.url(postgres_server.new_database())
    project = ServerProject.create(address)
    full_study(project)
    project.close()
    engine = create_engine(address)
    try:
        with engine.begin() as conn:
            server_migrations.downgrade(conn, "v7")
            # a fork made before format 8 (nothing refused it then)
            first = conn.execute(text("SELECT id, prev_hash FROM audit_log ORDER BY id")).all()
            entry = AuditEntry(at=utc_now(), action="update", prev_hash=first[2].prev_hash)
            entry.hash = audit_hash(entry)
            conn.execute(
                text(
                    "INSERT INTO audit_log (at, action, prev_hash, hash) "
                    "VALUES (:at, :action, :prev, :hash)"
                ),
                {
                    "at": entry.at,
                    "action": entry.action,
                    "prev": entry.prev_hash,
                    "hash": entry.hash,
                },
            )
        with pytest.raises(ServerError, match=r"audit log is forked.*nothing was changed"):
            ServerProject.upgrade(address)
        with engine.connect() as conn:
            assert server_migrations.revision(conn) == "v7"
    finally:
        engine.dispose()


def test_the_pi_and_the_owner_are_checked_for_the_chain_alone(team):
    server, database, project, study, _roles, extra = team
    with _connect(team, "pat") as conn:
        _refused(conn, _entry(conn, study.pi, prev="junk"), "must follow the newest entry")
        _refused(conn, _entry(conn, study.pi, hash="0" * 64), "the hash of its content")
        # the PI logs any answer and unit, as the program does for them
        _insert(conn, _entry(conn, study.pi, answer_id=extra["ben_answer"], unit_id=extra["unit"]))
    with psycopg.connect(server.dsn(database), autocommit=True) as owner:
        _refused(owner, _entry(owner, None, prev="junk"), "must follow the newest entry")
        _insert(owner, _entry(owner, None, answer_id=extra["ben_answer"]))
    _chain_whole_but_forged(verify_project(project), extra["ben_answer"])


def _chain_whole_but_forged(verification, forged: int) -> None:
    """The chain verifies; the answer the taken entries claim to have changed (their
    "payload" is made up) is reported as differing from its last entry, and nothing else."""
    assert not verification.problems, verification.describe()
    (problem,) = verification.answer_problems
    assert problem.startswith(f"answer {forged} ") and "differs from its last" in problem


def test_a_refused_entry_is_worded_for_the_person(team, monkeypatch):
    _server, _db, _project, study, _roles, _extra = team
    with _open_as(team, "ben") as as_ben:
        monkeypatch.setattr(as_ben, "last_audit_hash", lambda session: "f" * 64)
        ben = StudyService(as_ben).as_viewer("ben")
        with pytest.raises(StoreError, match=r"^not saved: an audit entry must follow the newest"):
            ben.save_answer(
                study.units["urgency"], {"more_urgent_case_id": study.case2}, comment="changed"
            )


# --- temporary tables ---------------------------------------------------------------------------

# A clinician's temporary tables named as the study's own, that would make her the PI to a
# function searching pg_temp first (PostgreSQL does, unless it is named: schema_sql.PG_SEARCH_PATH).
_STAND_INS = [
    "CREATE TEMP TABLE study_members (role_name name, annotator_id integer)",
    "INSERT INTO study_members SELECT session_user, id FROM public.annotators WHERE role = 'pi'",
    "CREATE TEMP TABLE annotators AS SELECT * FROM public.annotators",
    "UPDATE annotators SET role = 'pi'",
]


def _stand_ins_refused(conn, study, extra) -> None:
    """With her stand-in tables, ava is still ava: no one else's answer, no gold answer, no
    change to ben's answer, no audit entry about it."""
    for statement in _STAND_INS:
        conn.execute(statement)
    assert conn.execute("SELECT portalreview_me(), portalreview_is_pi()").fetchone() == (
        study.ava,
        False,
    )
    seen = conn.execute("SELECT DISTINCT annotator_id, is_gold FROM public.answers").fetchall()
    assert seen == [(study.ava, False)]
    changed = conn.execute(
        "UPDATE public.answers SET comment = 'by ava' WHERE id = %s", (extra["ben_answer"],)
    )
    assert changed.rowcount == 0
    about_ben = _entry(conn, study.ava, answer_id=extra["ben_answer"])
    _refused(conn, about_ben, "can only be about an answer of their own")


def test_a_clinicians_temporary_table_does_not_make_her_the_pi(team):
    _server, _db, project, study, _roles, extra = team
    with _connect(team, "ava") as conn:
        _stand_ins_refused(conn, study, extra)
    assert verify_project(project).ok


def test_an_older_studys_functions_are_pinned_when_it_is_upgraded(postgres_server):
    """A study made in format 8 (its functions searched pg_temp first) is safe once upgraded."""
    address = postgres_server.url(postgres_server.new_database())
    project = ServerProject.create(address)
    study = full_study(project)
    ava_role, password = postgres_server.member_login(project, "ava")
    extra = {"ben_answer": _answer(project, study.ben, study.units["urgency"])}
    engine = create_engine(address)
    try:
        with engine.begin() as conn:
            server_migrations.downgrade(conn, "v8")
        database = address.rsplit("/", 1)[1]
        dsn = postgres_server.dsn(database, ava_role, password)
        with psycopg.connect(dsn, autocommit=True) as conn:  # format 8: she was the PI
            for statement in _STAND_INS:
                conn.execute(statement)
            assert conn.execute("SELECT portalreview_is_pi()").fetchone() == (True,)
        assert ServerProject.upgrade(address) == (8, 10)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _stand_ins_refused(conn, study, extra)
        with engine.connect() as conn:
            unpinned = conn.execute(
                text(
                    "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace "
                    "AND NOT coalesce(proconfig, '{}') && "
                    "ARRAY['search_path=public, pg_temp', 'search_path=pg_catalog']"
                )
            ).scalars()
            assert set(unpinned) == {"json_valid"}  # no table read, nor the owner's rights
    finally:
        engine.dispose()
        project.close()


# --- the hash, computed by the database ---------------------------------------------------------

_HARD = '"\\/\b\f\n\r\t\x7f\x00\x01\x1f "' + "éß€\u2028\ud7ff\ue000\uffff😀𝄞\U0010ffff"


def _random_text(rng: random.Random) -> str:
    def char() -> str:
        roll = rng.random()
        if roll < 0.3:
            return rng.choice(_HARD)
        if roll < 0.5:
            return chr(rng.randint(1, 0x7F))
        if roll < 0.7:
            return chr(rng.randint(0x80, 0x7FF))
        if roll < 0.85:
            code = rng.randint(0x800, 0xFFFF)
            return chr(code) if not 0xD800 <= code <= 0xDFFF else "x"
        return chr(rng.randint(0x10000, 0x10FFFF))

    return "".join(char() for _ in range(rng.randint(0, 40))).replace("\x00", "")


def test_the_databases_hash_is_the_programs_bit_for_bit(postgres_server):
    address = postgres_server.url(postgres_server.new_database())
    ServerProject.create(address).close()
    rng = random.Random(8)
    entries = []
    for i in range(400):
        maybe = lambda value: None if rng.random() < 0.2 else value  # noqa: E731
        entries.append(
            AuditEntry(
                prev_hash=_random_text(rng) if i % 3 else secrets.token_hex(32),
                at=utc_now() if i % 2 else _random_text(rng),
                actor_id=maybe(rng.randint(1, 10**9)),
                action=_random_text(rng),
                answer_id=maybe(rng.randint(1, 2**31 - 1)),
                unit_id=maybe(rng.randint(1, 5000)),
                old_json=maybe(_random_text(rng)),
                new_json=maybe(json.dumps({"text": _random_text(rng)}, sort_keys=True)),
            )
        )
    every_char = "".join(chr(c) for c in range(1, 0x800))
    entries.append(AuditEntry(prev_hash="", at="", actor_id=0, action=every_char, old_json=""))
    engine = create_engine(address)
    try:
        with engine.connect() as conn:
            for entry in entries:
                found = conn.execute(
                    text(
                        "SELECT portalreview_audit_hash(:prev, :at, :actor, :action, :answer, "
                        ":unit, :old, :new)"
                    ),
                    {"prev": entry.prev_hash, "at": entry.at, "actor": entry.actor_id,
                     "action": entry.action, "answer": entry.answer_id, "unit": entry.unit_id,
                     "old": entry.old_json, "new": entry.new_json},
                ).scalar()  # fmt: skip
                assert found == audit_hash(entry), entry.action
    finally:
        engine.dispose()
