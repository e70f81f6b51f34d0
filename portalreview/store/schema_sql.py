"""Triggers: the integrity rules that reach across tables, which CHECK constraints cannot.

Each rule is written once as a condition that must never hold, and becomes a BEFORE INSERT
and a BEFORE UPDATE trigger that aborts the statement with a message starting ``integrity:``
(``service.py`` turns that into an error a person can read).
"""

from __future__ import annotations

# The unit an answer detail row belongs to, and that unit's columns.
_UNIT_OF = "(SELECT unit_id FROM answers WHERE id = NEW.answer_id)"


def _unit_col(column: str) -> str:
    return f"(SELECT {column} FROM units WHERE id = {_UNIT_OF})"


_OWNER_TEXT = (
    "COALESCE((SELECT message FROM cases WHERE id = NEW.case_id), "
    "(SELECT text FROM responses WHERE id = NEW.response_id))"
)
_SENTENCE_CASE = (
    "(SELECT COALESCE(s.case_id, (SELECT r.case_id FROM responses r WHERE r.id = s.response_id))"
    " FROM sentences s WHERE s.id = NEW.sentence_id)"
)

# (name, table, condition that must never hold, message)
GUARDS: list[tuple[str, str, str, str]] = [
    (
        "sentence_inside_text",
        "sentences",
        f"NEW.end > length({_OWNER_TEXT}) OR "
        f"NEW.text != substr({_OWNER_TEXT}, NEW.start + 1, NEW.end - NEW.start)",
        "a sentence must be the exact text between its offsets",
    ),
    (
        "unit_response_of_case",
        "units",
        "(NEW.response_id IS NOT NULL AND "
        "(SELECT case_id FROM responses WHERE id = NEW.response_id) != NEW.case_id) OR "
        "(NEW.response_b_id IS NOT NULL AND "
        "(SELECT case_id FROM responses WHERE id = NEW.response_b_id) != NEW.case_id)",
        "a unit's responses must answer the unit's case",
    ),
    (
        "unit_sentence_of_case",
        "units",
        f"NEW.sentence_id IS NOT NULL AND {_SENTENCE_CASE} != NEW.case_id",
        "a unit's sentence must belong to the unit's case",
    ),
    (
        "rank_member_of_case",
        "rank_members",
        "(SELECT kind FROM units WHERE id = NEW.unit_id) != 'rank' OR "
        "(SELECT case_id FROM responses WHERE id = NEW.response_id) != "
        "(SELECT case_id FROM units WHERE id = NEW.unit_id)",
        "a rank set holds responses to its own case only",
    ),
    (
        "respond_base_of_case",
        "respond_answers",
        "NEW.base_response_id IS NOT NULL AND "
        "(SELECT case_id FROM responses WHERE id = NEW.base_response_id) != "
        f"{_unit_col('case_id')}",
        "the draft being edited must be a response to the unit's case",
    ),
    (
        "rank_entry_in_set",
        "rank_entries",
        "NOT EXISTS (SELECT 1 FROM rank_members m "
        f"WHERE m.unit_id = {_UNIT_OF} AND m.response_id = NEW.response_id)",
        "a rank can only be given to a response of the unit's rank set",
    ),
    (
        "rank_within_set_size",
        "rank_entries",
        f"NEW.rank > (SELECT count(*) FROM rank_members m WHERE m.unit_id = {_UNIT_OF})",
        "a rank cannot exceed the number of responses in the set",
    ),
    (
        "criterion_only_if_incorrect",
        "rank_criteria",
        "(SELECT correct FROM rank_entries e WHERE e.answer_id = NEW.answer_id "
        "AND e.response_id = NEW.response_id) IS NOT 0",
        "a reason (C1-C3) can only be given for a response marked incorrect",
    ),
    (
        "match_sentence_of_reference",
        "match_decisions",
        "(SELECT response_id FROM sentences WHERE id = NEW.sentence_id) IS NOT "
        f"{_unit_col('response_id')}",
        "a match decision must be about a sentence of the unit's reference response",
    ),
    (
        "match_span_inside_draft",
        "match_spans",
        f"NEW.end > length((SELECT text FROM responses WHERE id = {_unit_col('response_b_id')}))",
        "a matched span must lie inside the draft's text",
    ),
    (
        "sentence_theme_of_unit",
        "sentence_themes",
        "(SELECT response_id FROM sentences WHERE id = NEW.sentence_id) IS NULL OR "
        "(SELECT response_id FROM sentences WHERE id = NEW.sentence_id) NOT IN "
        f"({_unit_col('response_id')}, {_unit_col('response_b_id')})",
        "a theme label must be for a sentence of one of the unit's two responses",
    ),
    (
        "urgency_case_of_pair",
        "urgency_answers",
        f"NEW.more_urgent_case_id NOT IN ({_unit_col('case_id')}, {_unit_col('case_b_id')})",
        "the more urgent case must be one of the pair",
    ),
    (
        "urgency_level_case_of_pair",
        "urgency_case_levels",
        f"NEW.case_id NOT IN ({_unit_col('case_id')}, {_unit_col('case_b_id')})",
        "a level can only be given to a case of the pair",
    ),
    (
        "eppc_span_inside_sentence",
        "eppc_spans",
        f"NEW.end > (SELECT length(text) FROM sentences WHERE id = {_unit_col('sentence_id')})",
        "an evidence span must lie inside the sentence",
    ),
    (
        "empathy_response_of_pair",
        "empathy_answers",
        "NEW.more_empathetic_response_id IS NOT NULL AND NEW.more_empathetic_response_id "
        f"NOT IN ({_unit_col('response_id')}, {_unit_col('response_b_id')})",
        "the more empathetic response must be one of the pair",
    ),
    # Schema version 3: "no medical facts on either side" and a listed fact exclude each other.
    (
        "fact_not_in_a_no_facts_check",
        "facts",
        "EXISTS (SELECT 1 FROM fact_checks c WHERE c.answer_id = NEW.answer_id AND c.no_facts)",
        "a fact check marked 'no medical facts on either side' cannot list a fact",
    ),
    (
        "no_facts_check_without_facts",
        "fact_checks",
        "NEW.no_facts AND EXISTS (SELECT 1 FROM facts f WHERE f.answer_id = NEW.answer_id)",
        "a fact check that lists facts cannot be marked 'no medical facts on either side'",
    ),
]

#: The guards added by schema version 3 (the upgrade step creates their triggers).
V3_GUARDS = ("fact_not_in_a_no_facts_check", "no_facts_check_without_facts")

# Statements refused outright.
FREEZES: list[tuple[str, str, str, str]] = [
    ("audit_no_update", "UPDATE", "audit_log", "the audit log cannot be changed"),
    ("audit_no_delete", "DELETE", "audit_log", "the audit log cannot be changed"),
    ("sentences_no_update", "UPDATE", "sentences", "sentences are fixed once made"),
    (
        "units_no_update",
        "UPDATE OF kind, case_id, case_b_id, response_id, response_b_id, sentence_id",
        "units",
        "a unit's cases and responses are fixed once made",
    ),
]

# Texts that sentences point into cannot change once split.
TEXT_LOCKS: list[tuple[str, str, str, str]] = [
    ("case_message_locked", "cases", "message", "case_id"),
    ("response_text_locked", "responses", "text", "response_id"),
]


def _raise(message: str) -> str:
    escaped = message.replace("'", "''")
    return f"BEGIN SELECT RAISE(ABORT, 'integrity: {escaped}'); END"


def guard_statements(names: tuple[str, ...] | None = None) -> list[str]:
    """The CREATE TRIGGER statements of the guards named (all guards when None)."""
    statements = []
    for name, table, condition, message in GUARDS:
        if names is not None and name not in names:
            continue
        for event in ("INSERT", "UPDATE"):
            statements.append(
                f"CREATE TRIGGER {name}_{event.lower()} BEFORE {event} ON {table} "
                f"FOR EACH ROW WHEN {condition} {_raise(message)}"
            )
    return statements


def trigger_statements() -> list[str]:
    """All CREATE TRIGGER statements of the current schema."""
    statements = guard_statements()
    for name, event, table, message in FREEZES:
        statements.append(f"CREATE TRIGGER {name} BEFORE {event} ON {table} {_raise(message)}")
    for name, table, column, fk in TEXT_LOCKS:
        statements.append(
            f"CREATE TRIGGER {name} BEFORE UPDATE OF {column} ON {table} FOR EACH ROW "
            f"WHEN NEW.{column} != OLD.{column} AND "
            f"EXISTS (SELECT 1 FROM sentences WHERE {fk} = OLD.id) "
            + _raise("the text has sentences and cannot change")
        )
    return statements


# --- the same rules on PostgreSQL --------------------------------------------------------------
# PostgreSQL runs a trigger's work in a function, and its WHEN clause may not hold a subquery:
# each rule becomes a function that raises, and a trigger calling it. The conditions are the ones
# above, translated by dialects.postgres_sql; the errors carry SQLSTATE 23514 (check_violation),
# so that they arrive as IntegrityError exactly as SQLite's RAISE(ABORT) does.


# The search path a function that runs with the owner's rights is pinned to: the study's own
# schema, then the session's temporary schema, named last. Unnamed, pg_temp is searched FIRST,
# so a member's temporary table (``study_members``...) would stand in for the study's own
# (PostgreSQL docs, "Writing SECURITY DEFINER Functions Safely"). Format 9 pins it on the
# functions of an older study (server_migrations/scripts/versions/v9_search_path.py).
PG_SEARCH_PATH = "public, pg_temp"


def _pg_raise(message: str) -> str:
    escaped = message.replace("'", "''")
    return f"RAISE EXCEPTION USING ERRCODE = 'check_violation', MESSAGE = 'integrity: {escaped}';"


def _pg_rule(name: str, timing: str, table: str, body: str, level: str = "ROW") -> list[str]:
    """A rule's function and trigger. PostgreSQL fires a table's triggers in the order of
    their names, so the names begin freeze_, guard_ or lock_: a statement refused outright says
    so before a guard finds fault with its values."""
    returned = "NULL" if level == "STATEMENT" else "NEW"
    return [
        # With the owner's rights: a rule sees every row, whoever writes (postgres_security).
        f"CREATE FUNCTION {name}_rule() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER "
        f"SET search_path = {PG_SEARCH_PATH} AS $$ BEGIN {body} RETURN {returned}; END $$",
        f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH {level} "
        f"EXECUTE FUNCTION {name}_rule()",
    ]


def postgres_guard_statements(names: tuple[str, ...] | None = None) -> list[str]:
    """The PostgreSQL functions and triggers of the guards named (all guards when None)."""
    from portalreview.store.dialects import postgres_sql

    statements = []
    for name, table, condition, message in GUARDS:
        if names is not None and name not in names:
            continue
        body = f"IF {postgres_sql(condition)} THEN {_pg_raise(message)} END IF;"
        statements += _pg_rule(f"guard_{name}", "BEFORE INSERT OR UPDATE", table, body)
    return statements


def postgres_trigger_statements() -> list[str]:
    """The statements that give a PostgreSQL database every rule :func:`trigger_statements`
    gives an SQLite file: the guards, the freezes and the text locks."""
    statements = postgres_guard_statements()
    for name, event, table, message in FREEZES:
        statements += _pg_rule(f"freeze_{name}", f"BEFORE {event}", table, _pg_raise(message))
    # TRUNCATE skips row triggers: the audit log refuses it too.
    statements += _pg_rule(
        "freeze_audit_no_truncate", "BEFORE TRUNCATE", "audit_log",
        _pg_raise("the audit log cannot be changed"), level="STATEMENT",
    )  # fmt: skip
    for name, table, column, fk in TEXT_LOCKS:
        condition = (
            f"NEW.{column} IS DISTINCT FROM OLD.{column} AND "
            f"EXISTS (SELECT 1 FROM sentences WHERE {fk} = OLD.id)"
        )
        refusal = _pg_raise("the text has sentences and cannot change")
        body = f"IF {condition} THEN {refusal} END IF;"
        statements += _pg_rule(f"lock_{name}", f"BEFORE UPDATE OF {column}", table, body)
    return statements
