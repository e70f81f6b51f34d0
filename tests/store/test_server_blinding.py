"""Blinding by the database (store/backends/postgres_security.py): a clinician connected as
their own PostgreSQL role reads only their own work and blinded cases, asked in plain SQL
through psycopg, not through our code; the PI reads everything; and our own service works
as the clinician within those limits."""

from __future__ import annotations

import psycopg
import pytest

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import ServerProject
from portalreview.store.service import StudyService
from tests.io.io_support import full_study, payloads

DETAIL_TABLES = (
    "respond_answers", "respond_parts", "rank_entries", "rank_criteria", "match_decisions",
    "match_spans", "sentence_themes", "urgency_answers", "urgency_case_levels", "eppc_labels",
    "eppc_spans", "empathy_answers", "facts", "fact_checks",
)  # fmt: skip


@pytest.fixture
def team(postgres_server):
    """A server study with every kind answered by ava, a draft by ben and a gold answer by
    the PI, and a database role for each of the three (passwords known)."""
    server = postgres_server
    database = server.new_database()
    project = ServerProject.create(server.url(database))
    study = full_study(project)
    roles = {person: server.member_login(project, person) for person in ("ava", "ben", "pat")}
    yield server, database, project, study, roles
    project.close()


def _connect(team, person):
    server, database, _project, _study, roles = team
    role, password = roles[person]
    return psycopg.connect(server.dsn(database, role, password), autocommit=True)


def _column(conn, sql, *params):
    return [row[0] for row in conn.execute(sql, params).fetchall()]


def test_a_clinician_reads_none_of_anyone_elses_work(team):
    _server, _db, _project, study, _roles = team
    with _connect(team, "ava") as conn:
        assert set(_column(conn, "SELECT annotator_id FROM answers")) == {study.ava}
        others = _column(conn, "SELECT count(*) FROM answers WHERE annotator_id != %s", study.ava)
        assert others == [0]
        assert _column(conn, "SELECT count(*) FROM answers WHERE is_gold") == [0]
        own = set(_column(conn, "SELECT id FROM answers"))
        for table in DETAIL_TABLES:
            found = set(_column(conn, f"SELECT answer_id FROM {table}"))
            assert found <= own, table
        assert set(_column(conn, "SELECT annotator_id FROM assignments")) == {study.ava}
        assert set(_column(conn, "SELECT actor_id FROM audit_log")) <= {study.ava}
    with _connect(team, "ben") as conn:
        assert set(_column(conn, "SELECT annotator_id FROM answers")) == {study.ben}
        for table in DETAIL_TABLES:  # ben's only answer (urgency) is a draft of his own
            others = _column(
                conn,
                f"SELECT count(*) FROM {table} WHERE answer_id IN "
                "(SELECT id FROM public.answers WHERE annotator_id != %s)",
                study.ben,
            )
            assert others == [0], table


def test_a_clinician_reads_cases_and_drafts_blinded(team):
    with _connect(team, "ava") as conn:
        assert _column(conn, "SELECT count(*) FROM cases WHERE urgency_level IS NOT NULL") == [0]
        assert set(_column(conn, "SELECT author || source FROM responses")) == {""}
        assert set(_column(conn, "SELECT production FROM responses")) == {"other"}
        ids = _column(conn, "SELECT external_id FROM responses")
        assert ids and all(x.startswith("response-") for x in ids)
        assert _column(conn, "SELECT count(*) FROM case_tags WHERE key = 'relevancy'") == [0]
        assert set(_column(conn, "SELECT batch FROM units WHERE kind = 'urgency'")) <= {""}
        for table in ("cases", "responses", "units", "case_tags"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT * FROM public.{table}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM study_members")


def test_a_clinician_cannot_write_anyone_elses_answer(team):
    _server, _db, _project, study, _roles = team
    with _connect(team, "ava") as conn:
        changed = conn.execute(
            "UPDATE answers SET comment = 'x' WHERE annotator_id = %s", (study.ben,)
        ).rowcount
        assert changed == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, "
                "active_seconds, flagged, flag_note, comment, created_at, updated_at) "
                "VALUES (%s, 'rank', %s, false, 'draft', 0, false, '', '', '', '')",
                (study.units["rank"], study.ben),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE cases SET message = 'x'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no trace in the log
            conn.execute("DELETE FROM answers WHERE annotator_id = %s", (study.ava,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # taking another's unit
            conn.execute("UPDATE assignments SET unit_id = %s", (study.units["rank"],))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO annotators (name, display_name, role, is_model, created_at)"
                         " VALUES ('eve', 'Eve', 'pi', false, '')")  # fmt: skip


def test_the_pi_reads_everything(team):
    _server, _db, project, _study, _roles = team
    with project.read() as s:  # the owner's view, as a reference
        from sqlalchemy import text

        answers = s.execute(text("SELECT count(*) FROM answers")).scalar()
    with _connect(team, "pat") as conn:
        assert _column(conn, "SELECT count(*) FROM answers") == [answers]
        assert _column(conn, "SELECT count(*) FROM answers WHERE is_gold") == [1]
        assert _column(conn, "SELECT urgency_level FROM cases ORDER BY id") == [1, 6]
        assert "llama-8b" in _column(conn, "SELECT author FROM responses")


def test_the_report_cache_is_the_pis_alone(team):
    """The figures the dashboard keeps sum everyone's answers: the PI writes and reads them, a
    clinician can neither read nor add one."""
    from portalreview.reports.live_report import LiveReport

    server, database, _project, _study, roles = team
    role, password = roles["pat"]
    with ServerProject.open(server.url(database, role, password)) as as_pat:
        LiveReport().refresh(as_pat, seed=0, n_resamples=20)
        again = LiveReport().refresh(as_pat, seed=0, n_resamples=20)
    assert again.recomputed == () and again.from_cache
    with _connect(team, "pat") as conn:
        assert _column(conn, "SELECT count(*) FROM report_cache")[0] > 0
    with _connect(team, "ava") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM report_cache")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO report_cache VALUES ('k', 'rank', '{}', 0, NULL, '{}', '{}', '')"
            )


def test_our_service_works_as_the_clinician(team):
    server, database, project, study, roles = team
    role, password = roles["ben"]
    with ServerProject.open(server.url(database, role, password)) as as_ben:
        assert as_ben.member() == "ben"
        ben = StudyService(as_ben).as_viewer("ben")
        assert [item.unit_id for item in ben.queue("rank")] == [study.units["rank"]]
        done = {}
        own_payloads = payloads(study)
        for kind, unit in study.units.items():
            view = ben.read_unit(unit)
            assert all(r.author in ("", None) for r in view.responses)
            done[kind] = ben.save_answer(unit, own_payloads[kind], status="submitted")
        assert {a.annotator_id for a in done.values()} == {study.ben}
    verification = verify_project(project)
    assert verification.ok, verification
    with _connect(team, "ben") as conn:  # his saves' audit entries, and no one else's
        assert set(_column(conn, "SELECT actor_id FROM audit_log")) == {study.ben}
        assert len(_column(conn, "SELECT id FROM audit_log")) == len(study.units)
    with _connect(team, "ava") as conn:  # ava still sees only her own
        assert set(_column(conn, "SELECT annotator_id FROM answers")) == {study.ava}


def _responses_beside_avas(study) -> tuple[int, set[int], int]:
    """Responses to ava's case that none of her units names, and one that one of her units
    does: ben's own reply, the pair of an empathy unit given to ben only, and the reply whose
    second sentence is an EPPC unit of ava's."""
    svc = study.service
    ben_reply = svc.add_response(
        study.case1, "ben-reply", "Please come in today. We will see you at noon.",
        author_kind="clinician", author="ben", production="theme_guided",
    )  # fmt: skip
    other_a = svc.add_response(study.case1, "other-a", "Go to the ER. Bring your pills.")
    other_b = svc.add_response(study.case1, "other-b", "I am sorry. Go to the ER now.")
    bens_pair = svc.add_unit(
        svc.create_unit_set("ben's pairs", "empathy"),
        study.case1,
        response_id=other_a,
        response_b_id=other_b,
    )
    svc.assign(bens_pair, study.ben)
    coded = svc.add_response(study.case1, "coded", "Call us back. We can talk then.")
    sentence = svc.sentences(response_id=coded)[1]
    eppc = svc.add_unit(
        svc.create_unit_set("reply sentences", "eppc"), study.case1, sentence_id=sentence.id
    )
    svc.assign(eppc, study.ava)
    return ben_reply, {other_a, other_b}, coded


def test_a_clinician_reads_only_the_responses_her_units_name(team):
    """Another clinician's reply to a case she works on, and a pair given to someone else, are
    not hers to read, as her offline copy leaves them out (merge._drop_unused_responses); what
    her units show is: a rank set's drafts, a match or empathy pair, an EPPC unit's reply."""
    server, database, _project, study, roles = team
    ben_reply, bens_pair, coded = _responses_beside_avas(study)
    named = {study.draft1, study.draft2, study.reference, study.original, study.edited, coded}
    with _connect(team, "ava") as conn:
        assert set(_column(conn, "SELECT id FROM responses")) == named
        owners = set(_column(conn, "SELECT response_id FROM sentences"))
        assert owners - {None} == named
    with _connect(team, "ben") as conn:
        seen = set(_column(conn, "SELECT id FROM responses"))
        assert bens_pair <= seen and not {ben_reply, coded} & seen  # (his reply is no unit's)
    role, password = roles["ava"]
    with ServerProject.open(server.url(database, role, password)) as as_ava:
        ava = StudyService(as_ava).as_viewer("ava")
        for unit in (*study.units.values(), *(i.unit_id for i in ava.queue("eppc"))):
            view = ava.read_unit(unit)
            assert {r.id for r in view.responses} <= named
        coded_view = ava.read_unit(ava.queue("eppc")[-1].unit_id)
        assert [r.id for r in coded_view.responses] == [coded]
        assert coded_view.previous_sentence is not None and coded_view.next_sentence is None


# The sequences a login may read the state of (pg_sequences.last_value shows it to these).
_COUNTERS_READ = (
    "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' "
    "AND has_sequence_privilege('public.' || quote_ident(sequencename), 'SELECT, USAGE')"
)
# The sequences that number the rows of the tables a login may insert into.
_COUNTERS_OF_HER_TABLES = (
    "SELECT s.relname FROM pg_class s JOIN pg_depend d ON d.objid = s.oid "
    "AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass "
    "WHERE s.relkind = 'S' AND has_table_privilege(d.refobjid, 'INSERT')"
)

# Counters that would tell how many cases, drafts, units and assignments the study holds.
_STUDY_COUNTERS = (
    "cases_id_seq",
    "responses_id_seq",
    "sentences_id_seq",
    "units_id_seq",
    "rank_members_rowid_seq",
    "assignments_rowid_seq",
)


def test_a_clinician_reads_no_counter_but_those_of_the_rows_she_saves(team):
    """How far the sequences numbering cases, drafts, units or assignments have come would tell
    her how many the whole study holds, and how many units the others were given; she may read
    only those her own saves draw from (her answers, their details, audit entries,
    suggestions), which her saved rows' numbers show anyway."""
    server, database, _project, study, roles = team
    with _connect(team, "ava") as conn:
        readable = set(_column(conn, _COUNTERS_READ))
        assert readable == set(_column(conn, _COUNTERS_OF_HER_TABLES))
        assert {"answers_id_seq", "rank_entries_rowid_seq", "audit_log_id_seq"} <= readable
        for hidden in _STUDY_COUNTERS:
            assert hidden not in readable
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT pg_sequence_last_value(%s)", (hidden,))
    role, password = roles["ben"]  # (and everything she saves still finds its numbers)
    with ServerProject.open(server.url(database, role, password)) as as_ben:
        ben = StudyService(as_ben).as_viewer("ben")
        ben.save_answer(study.units["rank"], payloads(study)["rank"], status="submitted")


def test_an_upgrade_to_format_10_narrows_what_a_clinician_reads(team):
    """A study made before format 10 let her read every response to her units' cases, and
    every sequence's state."""
    from sqlalchemy import create_engine

    from portalreview.store.backends import server_migrations

    server, database, _project, study, roles = team
    ben_reply, bens_pair, _coded = _responses_beside_avas(study)
    engine = create_engine(server.url(database))
    try:
        with engine.begin() as conn:
            server_migrations.downgrade(conn, "v9")
            # what adding a member granted before format 10
            conn.exec_driver_sql(
                f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {roles['ava'][0]}"
            )
        with _connect(team, "ava") as conn:
            assert {ben_reply, *bens_pair} <= set(_column(conn, "SELECT id FROM responses"))
            assert "units_id_seq" in _column(conn, _COUNTERS_READ)
        with engine.begin() as conn:
            server_migrations.upgrade(conn)
    finally:
        engine.dispose()
    with _connect(team, "ava") as conn:
        assert not {ben_reply, *bens_pair} & set(_column(conn, "SELECT id FROM responses"))
        assert set(_column(conn, _COUNTERS_READ)) == set(_column(conn, _COUNTERS_OF_HER_TABLES))
