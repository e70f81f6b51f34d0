"""Blinding by the database: what each member of a server study may read and write.

Each clinician and the PI connect as their own PostgreSQL role (hospital IT creates the roles
and their passwords; docs/deployment.md). ``study_members`` maps a role to the study's
annotator, and :func:`add_member` grants what that annotator's role in the study allows:

* **The PI** reads and writes every row of every table, as the study's owner does.
* **A clinician** reads, through row-level security on the tables and through the views of the
  ``blinded`` schema (first on the clinician's ``search_path``):

  - their own assignments, the units assigned to them, those units' cases, the responses
    those units name (:data:`MY_RESPONSES`), and the sentences of both; no other unit, case or
    response;
  - their own answers and the rows that belong to them (never another person's, nor the PI's
    gold answer), their own audit entries, and the suggestions for their units;
  - the cases and responses blinded exactly as an offline copy for one clinician is
    (``merge._restrict``): no reference urgency level, filter label or relevancy tag, no
    urgency pair's difficulty, no response's author, source, kind or production, and neutral
    response ids. The views read the tables with their owner's rights, so a clinician needs and
    has no privilege on the tables ``cases``, ``responses``, ``units`` and ``case_tags``: asking
    for ``public.cases`` directly is refused. The views are *security barriers*: the
    conditions of a clinician's own query run only on the rows a view lets through (otherwise
    the planner may test ``message::int = 0`` on every row first, and the error message would
    print a hidden row's text). The tables' row-level policies hold that way by themselves.
    None of the helper functions below is ``LEAKPROOF``, so none is ever moved before a filter.

  and writes only their own answers (and their rows), their own audit entries, and suggestions
  for their units. Their assignments are read-only to them: changing one would hand them another
  person's unit. They may use only the sequences that number the rows of the tables they write
  (USAGE, which also shows how far each has come: how many answers, details, audit entries and
  suggestions everyone has saved, as the numbers of their own rows tell anyway); the others'
  states would tell how many cases, drafts, units and assignments the whole study holds.

Who a connection is: the role it logged in as (``session_user``; inside the helper functions,
which run with the owner's rights, ``current_user`` is the owner). ``SET ROLE`` changes nothing
here.

Every function that runs with the owner's rights searches the study's schema, then the
session's temporary schema (``schema_sql.PG_SEARCH_PATH``): a member may create temporary
tables, and one named ``study_members`` or ``annotators``, searched first, would make them the
PI to every helper and rule. Revoking TEMPORARY from a member's role would not do instead: PUBLIC
holds it unless IT revokes it from PUBLIC (docs/deployment.md, set-up step 1).

The catalogs, the unit sets, the annotators' names and ``project_meta`` are readable by all
members and writable by the PI only. Rules that reach across tables (``schema_sql``) run with
the owner's rights, so that they see every row whoever writes.

The audit log's hash chain needs the newest entry's hash, which a clinician may not read:
``portalreview_last_audit_hash()`` gives that one value (and nothing else) to any member.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, MetaData, Table, text

from portalreview.store.backends.postgres import WRITE_LOCK
from portalreview.store.schema_sql import PG_SEARCH_PATH, _pg_raise
from portalreview.store.service import GENESIS_HASH, StoreError, person_name

# The tables a clinician reads only through a blinded view, and what the view shows for each
# column that differs from the table (everything else is the table's own value).
BLINDED = {
    "cases": {"urgency_level": "NULL::integer", "urgency_filter": "NULL::varchar"},
    "responses": {
        "external_id": "'response-' || t.id",
        "author_kind": "'imported'::varchar",
        "author": "''::varchar",
        "source": "''::varchar",
        "production": "'other'::varchar",
    },
    "units": {"batch": "CASE WHEN t.kind = 'urgency' THEN ''::varchar ELSE t.batch END"},
    "case_tags": {},
}
# Which rows of a blinded table a clinician sees (the view's WHERE).
_BLINDED_ROWS = {
    "cases": "t.id IN (SELECT portalreview_my_cases())",
    "responses": "t.id IN (SELECT portalreview_my_responses())",
    "units": "t.id IN (SELECT portalreview_my_units())",
    "case_tags": "t.case_id IN (SELECT portalreview_my_cases()) AND t.key != 'relevancy'",
}
# Row-level security on the other tables a clinician reaches: (who sees the row, may write).
_OWN_ANSWER = "EXISTS (SELECT 1 FROM answers a WHERE a.id = answer_id)"
_CLINICIAN_ROWS = {
    # read only: a clinician who could change an assignment could take someone else's unit
    "assignments": ("annotator_id = portalreview_me()", None),
    # saved and changed, never deleted (the service never deletes an answer; a deletion would
    # leave no audit entry)
    "answers": ("annotator_id = portalreview_me() AND NOT is_gold", "SAVE"),
    "audit_log": ("actor_id = portalreview_me()", "INSERT"),
    # a suggestion made for another clinician holds their replies in its prompt
    "suggestions": (
        "unit_id IN (SELECT portalreview_my_units()) "
        "AND (for_annotator_id IS NULL OR for_annotator_id = portalreview_me())",
        "INSERT",
    ),
    "sentences": (
        "case_id IN (SELECT portalreview_my_cases()) "
        "OR response_id IN (SELECT portalreview_my_responses())",
        None,
    ),
    "rank_members": ("unit_id IN (SELECT portalreview_my_units())", None),
    # the report's figures sum every person's answers: the PI's alone
    "report_cache": ("false", None),
}

# The responses a clinician's units name: a pair's two, a rank set's drafts, the reply an EPPC
# unit's sentence is from, an edit-a-draft unit's draft. Not every response to her units' cases:
# another clinician's reply to a case she answers too is not hers to read (an offline copy
# leaves such responses out: merge._drop_unused_responses). Also used by an upgrade.
MY_RESPONSES = f"""
    CREATE OR REPLACE FUNCTION portalreview_my_responses() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        WITH mine AS (SELECT * FROM units WHERE id IN (SELECT portalreview_my_units()))
        SELECT response_id FROM mine WHERE response_id IS NOT NULL
        UNION SELECT response_b_id FROM mine WHERE response_b_id IS NOT NULL
        UNION SELECT response_id FROM rank_members
              WHERE unit_id IN (SELECT portalreview_my_units())
        UNION SELECT s.response_id FROM sentences s JOIN mine ON mine.sentence_id = s.id
              WHERE s.response_id IS NOT NULL
    $$
    """

_FUNCTIONS = [
    """
    CREATE TABLE study_members (
        role_name name PRIMARY KEY,
        annotator_id integer NOT NULL UNIQUE REFERENCES annotators (id)
    )
    """,
    f"""
    CREATE FUNCTION portalreview_me() RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT annotator_id FROM study_members WHERE role_name = session_user
    $$
    """,
    f"""
    CREATE FUNCTION portalreview_is_pi() RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT coalesce((SELECT a.role = 'pi' FROM annotators a
                         WHERE a.id = portalreview_me()), false)
    $$
    """,
    f"""
    CREATE FUNCTION portalreview_my_units() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT unit_id FROM assignments WHERE annotator_id = portalreview_me()
    $$
    """,
    f"""
    CREATE FUNCTION portalreview_my_cases() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT case_id FROM units WHERE id IN (SELECT portalreview_my_units())
        UNION SELECT case_b_id FROM units
              WHERE id IN (SELECT portalreview_my_units()) AND case_b_id IS NOT NULL
    $$
    """,
    MY_RESPONSES,
    f"""
    CREATE FUNCTION portalreview_last_audit_hash() RETURNS varchar
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1
    $$
    """,
    "REVOKE ALL ON study_members FROM PUBLIC",
    "CREATE SCHEMA blinded",
]


def _refusal(rule: tuple[str, str]) -> str:
    """One refusal of the audit guard: its condition, and its words for the person (as
    service.readable_integrity shows them)."""
    condition, words = rule
    return f"IF {condition} THEN {_pg_raise(words)} END IF;"


# What the guard refuses: (the condition, in the trigger function, the words).
_AUDIT_REFUSALS = {
    # under REPEATABLE READ or SERIALIZABLE the newest entry is read from the transaction's
    # snapshot, taken before the lock was: an entry made since would go unseen (a fork)
    "isolation": (
        "current_setting('transaction_isolation') <> 'read committed'",
        "an audit entry can only be added in a READ COMMITTED transaction (the newest entry "
        "must be read as it is now, not as it was when the transaction began)",
    ),
    "chain": (
        f"NEW.prev_hash IS DISTINCT FROM coalesce(newest_hash, '{GENESIS_HASH}')",
        "an audit entry must follow the newest entry of the log (its prev_hash must be that "
        "entry's hash)",
    ),
    "hash": (
        "NEW.hash IS DISTINCT FROM portalreview_audit_hash(NEW.prev_hash, NEW.at, "
        "NEW.actor_id, NEW.action, NEW.answer_id, NEW.unit_id, NEW.old_json, NEW.new_json)",
        "an audit entry's hash must be the hash of its content and of the entry before it",
    ),
    "order": (
        "NEW.id <= coalesce(newest_id, 0)",
        "an audit entry must come after the newest entry of the log",
    ),
    "id": (
        "NEW.id > coalesce(pg_sequence_last_value("
        "pg_get_serial_sequence('audit_log', 'id')::regclass), 0)",
        "an audit entry's number is given by the database, not chosen",
    ),
    "answer": (
        "NEW.answer_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM answers a "
        "WHERE a.id = NEW.answer_id AND a.annotator_id = me_id AND NOT a.is_gold)",
        "a clinician's audit entry can only be about an answer of their own",
    ),
    "unit": (
        "NEW.unit_id IS NOT NULL AND NEW.unit_id NOT IN (SELECT portalreview_my_units())",
        "a clinician's audit entry can only be about a unit given to them",
    ),
}

# A member may insert audit entries with their own SQL (the program writes them that way), so
# each entry is checked as it is inserted, under the program's write lock (postgres.WRITE_LOCK,
# taken again here for a writer that did not take it), in a READ COMMITTED transaction (as the
# program's saves are: only there does the check read the newest entry as it is now, after the
# lock; postgres._make_engine): it follows the newest entry, carries the
# hash the program computes (service.audit_hash, computed again by portalreview_audit_hash),
# and comes after the newest entry. A member's entry has the number the sequence gave it (one
# chosen far ahead would make every later entry out of order), and a clinician's names only an
# answer of their own and units given to them. The PI and the study's owner log any answer or
# unit, as the program does for them (gold answers, merges, imports, the study's set-up).
# Whatever the trigger misses, no two entries may follow the same one (AUDIT_ONE_FOLLOWER): the
# database checks a UNIQUE index against every committed row, whatever a transaction's snapshot.
AUDIT_ONE_FOLLOWER = "audit_log_one_follower"
AUDIT_GUARD = [
    f"CREATE UNIQUE INDEX {AUDIT_ONE_FOLLOWER} ON audit_log (prev_hash)",
    # Python's json.dumps of one string (ensure_ascii): \" \\ \n \r \t \b \f, every other
    # character outside space..tilde as \uXXXX in lower-case hex, a surrogate pair above
    # U+FFFF. Backslashes are in E'' strings, which mean the same whatever a session's
    # standard_conforming_strings. Code points are the database's: a study's database is UTF8.
    r"""
    CREATE FUNCTION portalreview_json_string(value text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog AS $$
    DECLARE
        escaped text;
    BEGIN
        IF value !~ '[^ -~]' THEN  -- space to tilde only: quotes and backslashes alone change
            RETURN '"' || replace(replace(value, E'\\', E'\\\\'), '"', E'\\"') || '"';
        END IF;
        SELECT string_agg(
            CASE
                WHEN code = 34 THEN E'\\"'
                WHEN code = 92 THEN E'\\\\'
                WHEN code = 10 THEN E'\\n'
                WHEN code = 13 THEN E'\\r'
                WHEN code = 9 THEN E'\\t'
                WHEN code = 8 THEN E'\\b'
                WHEN code = 12 THEN E'\\f'
                WHEN code BETWEEN 32 AND 126 THEN c
                WHEN code < 65536 THEN E'\\u' || lpad(to_hex(code), 4, '0')
                ELSE E'\\u' || to_hex(55296 + ((code - 65536) >> 10))
                    || E'\\u' || to_hex(56320 + ((code - 65536) & 1023))
            END, '' ORDER BY n)
        INTO escaped
        FROM unnest(string_to_array(value, NULL)) WITH ORDINALITY AS chars (c, n),
            LATERAL ascii(c) AS code;
        RETURN '"' || coalesce(escaped, '') || '"';
    END $$
    """,
    # service.audit_hash: SHA-256 of the compact JSON array of the entry's fields
    f"""
    CREATE FUNCTION portalreview_audit_hash(
        prev_hash text, at text, actor_id integer, action text, answer_id integer,
        unit_id integer, old_json text, new_json text
    ) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT encode(sha256(convert_to('[' || concat_ws(',',
            coalesce(portalreview_json_string(prev_hash), 'null'),
            coalesce(portalreview_json_string(at), 'null'),
            coalesce(actor_id::text, 'null'),
            coalesce(portalreview_json_string(action), 'null'),
            coalesce(answer_id::text, 'null'),
            coalesce(unit_id::text, 'null'),
            coalesce(portalreview_json_string(old_json), 'null'),
            coalesce(portalreview_json_string(new_json), 'null')) || ']', 'UTF8')), 'hex')
    $$
    """,
    f"""
    CREATE FUNCTION guard_audit_chain_rule() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
    DECLARE
        newest_id integer;
        newest_hash varchar;
        me_id integer;
    BEGIN
        {_refusal(_AUDIT_REFUSALS["isolation"])}
        PERFORM pg_advisory_xact_lock({WRITE_LOCK});
        SELECT id, hash INTO newest_id, newest_hash FROM audit_log ORDER BY id DESC LIMIT 1;
        {_refusal(_AUDIT_REFUSALS["chain"])}
        {_refusal(_AUDIT_REFUSALS["hash"])}
        {_refusal(_AUDIT_REFUSALS["order"])}
        SELECT portalreview_me() INTO me_id;
        IF me_id IS NULL THEN  -- the study's owner
            RETURN NEW;
        END IF;
        {_refusal(_AUDIT_REFUSALS["id"])}
        IF portalreview_is_pi() THEN
            RETURN NEW;
        END IF;
        {_refusal(_AUDIT_REFUSALS["answer"])}
        {_refusal(_AUDIT_REFUSALS["unit"])}
        RETURN NEW;
    END $$
    """,
    "CREATE TRIGGER guard_audit_chain BEFORE INSERT ON audit_log FOR EACH ROW "
    "EXECUTE FUNCTION guard_audit_chain_rule()",
]


def _blinded_view(metadata: MetaData, table: str) -> str:
    shown = BLINDED[table]
    columns = [c.name for c in metadata.tables[table].columns] + ["rowid"]
    select = ", ".join(f'{shown[c]} AS "{c}"' if c in shown else f't."{c}"' for c in columns)
    return (
        f"CREATE VIEW blinded.{table} WITH (security_barrier = true) AS SELECT {select} "
        f"FROM public.{table} t WHERE portalreview_is_pi() OR ({_BLINDED_ROWS[table]})"
    )


def table_policies(table: Table) -> list[str]:
    """Row-level security on one table: the PI's policy, and the members' (see the module
    docstring). Used for a new study's tables, and by an upgrade for a table it adds."""
    name = table.name
    statements = [
        f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY pi_all ON {name} USING (portalreview_is_pi()) "
        "WITH CHECK (portalreview_is_pi())",
    ]
    if name in BLINDED:
        return statements  # clinicians read the view; the table's rows are the PI's alone
    rows, writes = _clinician_rows(table)
    statements.append(f"CREATE POLICY member_reads ON {name} FOR SELECT USING ({rows})")
    if writes == "ALL":
        statements.append(
            f"CREATE POLICY member_writes ON {name} FOR ALL USING ({rows}) WITH CHECK ({rows})"
        )
    elif writes == "SAVE":
        statements.append(f"CREATE POLICY member_adds ON {name} FOR INSERT WITH CHECK ({rows})")
        statements.append(
            f"CREATE POLICY member_changes ON {name} FOR UPDATE USING ({rows}) "
            f"WITH CHECK ({rows})"
        )
    elif writes == "INSERT":
        statements.append(f"CREATE POLICY member_adds ON {name} FOR INSERT WITH CHECK ({rows})")
    return statements


def _clinician_rows(table: Table) -> tuple[str, str | None]:
    """Which rows of a (not blinded) table a clinician sees, and what they may write."""
    if table.name in _CLINICIAN_ROWS:
        return _CLINICIAN_ROWS[table.name]
    if "answer_id" in table.columns and table.name != "audit_log":
        return _OWN_ANSWER, "ALL"
    return "true", None


def _policies(metadata: MetaData) -> list[str]:
    return [s for table in metadata.sorted_tables for s in table_policies(table)]


def security_statements(metadata: MetaData) -> list[str]:
    """What a new server study gets after its tables: members, helper functions, the blinded
    views, the row-level policies and the audit log's guard."""
    views = [_blinded_view(metadata, table) for table in BLINDED]
    return _FUNCTIONS + views + _policies(metadata) + AUDIT_GUARD


def _clinician_grants(
    metadata: MetaData, role: str, existing: Mapping[str, list[str]]
) -> list[str]:
    """A clinician's privileges on the ``existing`` tables (an older study lacks the newest;
    each with the sequences that number its rows)."""
    grants = [
        f"GRANT USAGE ON SCHEMA public, blinded TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA blinded TO {role}",
    ]
    verbs = {
        None: "SELECT",
        "ALL": "SELECT, INSERT, UPDATE, DELETE",
        "SAVE": "SELECT, INSERT, UPDATE",
        "INSERT": "SELECT, INSERT",
    }
    for table in metadata.sorted_tables:
        rows, writes = _clinician_rows(table)
        if table.name in BLINDED or table.name not in existing or rows == "false":
            continue  # (a table of the PI's alone is not granted at all)
        grants.append(f"GRANT {verbs[writes]} ON {table.name} TO {role}")
        if writes is not None and existing[table.name]:
            # Her rows draw their numbers from these; USAGE lets her read how far they have
            # come, so no other table's (how many cases, units, assignments there are)
            numbered = ", ".join(f'"{name}"' for name in existing[table.name])
            grants.append(f"GRANT USAGE ON SEQUENCE {numbered} TO {role}")
    return grants


def _pi_grants(role: str) -> list[str]:
    return [
        f"GRANT USAGE ON SCHEMA public, blinded TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA blinded TO {role}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}",
    ]


def add_member(conn: Connection, metadata: MetaData, role: str, annotator: str) -> str:
    """Let the database role ``role`` work in the study as ``annotator`` (see the module
    docstring for what each study role may do); the annotator's study role ("pi" or not).
    Run by the study's owner; the role must exist (IT creates it, with its password)."""
    _require_owner(conn)
    exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
    if exists is None:
        raise StoreError(f"there is no database role {role!r}: IT creates it first")
    found = conn.execute(  # (names are stored in one Unicode form: service.person_name)
        text("SELECT id, role FROM annotators WHERE name = :n"), {"n": person_name(annotator)}
    ).first()
    if found is None:
        raise StoreError(f"there is no annotator {annotator!r} in this study")
    annotator_id, study_role = found
    other = conn.execute(
        text("SELECT role_name FROM study_members WHERE annotator_id = :a AND role_name <> :r"),
        {"a": annotator_id, "r": role},
    ).scalar()
    if other is not None:
        raise StoreError(
            f"{annotator} already works through the database role {other!r}: a person has one "
            "role in a study (their answers are theirs by it). Nothing was changed"
        )
    conn.execute(
        text(
            "INSERT INTO study_members (role_name, annotator_id) VALUES (:r, :a) "
            "ON CONFLICT (role_name) DO UPDATE SET annotator_id = excluded.annotator_id"
        ),
        {"r": role, "a": annotator_id},
    )
    _grant(conn, metadata, role, study_role)
    quoted = conn.dialect.identifier_preparer.quote(role)
    database = conn.dialect.identifier_preparer.quote(
        conn.execute(text("SELECT current_database()")).scalar()
    )
    path = "public" if study_role == "pi" else "blinded, public"
    conn.exec_driver_sql(f"GRANT CONNECT ON DATABASE {database} TO {quoted}")
    may_set = conn.execute(  # ALTER ROLE ... SET needs CREATEROLE (or a superuser)
        text("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")
    ).scalar()
    if not may_set:
        raise StoreError(
            f"the study's owner role may not set role {role!r}'s search path in this database, "
            "which a member needs: as a database superuser, run ALTER ROLE <the owner> "
            "CREATEROLE, then this again (docs/deployment.md, set-up step 1). Nothing was changed"
        )
    conn.exec_driver_sql(f"ALTER ROLE {quoted} IN DATABASE {database} SET search_path = {path}")
    return study_role


def _require_owner(conn: Connection) -> None:
    """Only the database's owner (or a superuser) grants rights on its tables: another
    account (the PI's) got as far as a misleading message about CREATEROLE."""
    me, owner, superuser = conn.execute(
        text(
            "SELECT current_user, pg_get_userbyid(d.datdba), r.rolsuper FROM pg_database d, "
            "pg_roles r WHERE d.datname = current_database() AND r.rolname = current_user"
        )
    ).one()
    if me != owner and not superuser:
        raise StoreError(
            f"portalreview member is run with the account that owns the study's database "
            f"({owner}), not {me}: IT runs it (docs/deployment.md, set-up). Nothing was changed"
        )


def _grant(conn: Connection, metadata: MetaData, role: str, study_role: str) -> None:
    """The privileges of a member's role on the study's tables as they are now."""
    existing = _tables_and_sequences(conn)
    quoted = conn.dialect.identifier_preparer.quote(role)
    if study_role == "pi":
        grants = _pi_grants(quoted)
    else:
        grants = _clinician_grants(metadata, quoted, existing)
    # What the role had first goes: a PI's role made a clinician's kept the PI's rights,
    # writing study_members among them, and could make itself the PI again.
    for statement in (*_revokes(quoted), *grants):
        conn.exec_driver_sql(statement)


# Each table of the study's schema, and the sequences its serial columns own.
_TABLES_AND_SEQUENCES = """
    SELECT t.relname, s.relname FROM pg_class t
    LEFT JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid
        AND d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
    LEFT JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
    WHERE t.relnamespace = 'public'::regnamespace AND t.relkind IN ('r', 'p')
"""


def _tables_and_sequences(conn: Connection) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for table, sequence in conn.execute(text(_TABLES_AND_SEQUENCES)):
        found.setdefault(table, [])
        if sequence is not None:
            found[table].append(sequence)
    return found


def _revokes(role: str) -> list[str]:
    return [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA blinded FROM {role}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role}",
    ]


def grant_members_again(conn: Connection, metadata: MetaData) -> None:
    """Give every member the privileges of their study role on the tables as they are now
    (after an upgrade added a table)."""
    members = conn.execute(
        text(
            "SELECT m.role_name, a.role FROM study_members m "
            "JOIN annotators a ON a.id = m.annotator_id"
        )
    ).all()
    for role, study_role in members:
        _grant(conn, metadata, role, study_role)
