"""Offline copies: the PI hands a clinician a copy of the project, and merges it back.

A **copy** is the project file itself, copied consistently with SQLite's backup API, so every
id (cases, units, annotators, answers made before the copy) means the same thing in both
files, less what the program did not make: a table, view, index or trigger added with another
tool is dropped from every copy before anything in it changes, so that none of it runs during
the clean-up below, and the program's own triggers are put back as a new file has them
(:func:`_keep_own_schema`). :func:`make_copy` writes these keys into the copy's ``project_meta``:

``copy_id`` (a new UUID), ``copy_of`` (the master's ``project_id``), ``copy_for`` (the
clinician), ``copy_made_at``, ``copy_base_audit_id`` and ``copy_base_audit_hash`` (the last
entry of the master's audit log when the copy was made), ``copy_only_assigned`` and, in a
copy for one clinician, ``copy_max_answer_id`` (its highest answer id when it was made: the
answers whose entries stay in the master's log, see :mod:`portalreview.store.audit_verify`).

With ``only_assigned`` the copy keeps only that clinician's assignments and answers: the other
people's answers, assignments and the audit log (which holds their answers) are removed; the
responses' authors, sources, author kinds and productions, and the cases' reference urgency
levels with what derives from them (the filter label, the inbox relevancy tag, the urgency
pairs' difficulty batch) are blanked; the responses' external ids (which often name a draft's
model or author) become neutral ones. The responses are renumbered in a random order (their
sentences after them, the rank rows rewritten in key order, one creation time for all), so no
id follows the master's import order, which is model by model (:func:`_renumber`); units not
given to the clinician that name a response, and the responses none of theirs names, are left
out. The key back to the master's ids (``copy_ids_renumbered`` in the copy) is kept in the
master only, in ``project_meta`` under ``copy_ids:<copy_id>`` (:class:`_IdMap`), and the merge
reads the copy's answers, suggestions and rank orders through it (a copy without that mark
keeps the master's ids). That blinding holds even for someone who opens the file with another
SQLite tool: the file is vacuumed, so nothing removed stays in free pages. The copy is made in
a private working folder of this machine's temporary folder and only the finished file goes
to the destination, so the whole study never reaches the clinician's drive. The CLI and the
Offline copies window make this kind of copy unless the PI asks for the whole study explicitly
(:func:`whole_study_contents` says what such a copy would hand over); this function keeps
``only_assigned`` an explicit argument.

**Merging** (:func:`merge_copy`) compares each answer of the copy with the master's, and with
the answer's state at the copy's *base* (the master's audit log up to ``copy_base_audit_id``;
for a plain file copy without those keys, the longest common prefix of the two hash-chained
audit logs):

* answered only in the copy: **added** to the master;
* changed in the copy, unchanged in the master since the base: the master is **updated**;
* changed in both (or in two copies, the first one merged already) to different answers: a
  **conflict**. Nothing is overwritten: the master keeps its answer, and both versions (and the
  base) are kept in the merge's audit entry, listed by :func:`open_conflicts` until the PI
  resolves them (:func:`resolve_conflict`, keeping either version), each with the number it
  keeps meanwhile (``Conflict.number``: the order merges first recorded them in);
* everything else (unchanged in the copy, or the same answer in both) is left alone.

Time on task only grows, and time spent in the copy (on an answer left unchanged there too:
no audit entry) was spent all the same: the master takes the copy's time where it is longer,
whatever happened to the answer (:func:`_longer_times`; a conflict keeps the master's answer
with the longer time, an updated answer keeps the longer of its two times).

An answer of a copy merged before is measured from what the master last took in of it, found
alike in both, or settled of it (a resolved conflict, either way), not from the base: an answer
changed back in the copy to its base state is a change (:func:`_last_agreed`). A later merge of
the same copy lists all of its conflicts again and replaces the earlier ones
(:func:`_open_conflict_records`).

A merge is one transaction, recorded in the audit log (action ``merge``) with the copy's
identity and counts, a copy's first merge even when it brought nothing (the copy came back);
the answers it saves add their own ``create``/``update`` entries, and keep the copy's times.
Merging the same copy again changes nothing and records nothing: what it
brought is already there, and its conflicts are already on record (it is recorded when it
settles earlier conflicts of the copy or finds answers now alike, to keep that starting
point). A copy of another project is refused, and so is a copy whose starting point is not in
this file's history (a master restored from an older backup); refusals change nothing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from portalreview.store import leftovers, own_schema
from portalreview.store.audit_verify import require_whole_view
from portalreview.store.csv_cells import safe_row, safe_writer
from portalreview.store.importers.portable import (
    ANSWER_REFS,
    PRESENTATION_REFS,
    RefPath,
    params_refs,
    translate,
)
from portalreview.store.kinds import PayloadError
from portalreview.store.migrations import SCHEMA_VERSION, MigrationError
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    AuditEntry,
    Case,
    ProjectMeta,
    RankMember,
    Response,
    Suggestion,
    Unit,
    UnitSet,
    utc_now,
)
from portalreview.store.output_files import output_error, write_through_temporary
from portalreview.store.project import SUFFIX, Project, ProjectError, sqlite_uri
from portalreview.store.schema_sql import trigger_statements
from portalreview.store.service import AccessError, StoreError, StudyService, find_annotator
from portalreview.store.study_setup import CancelFn, EventRecorder, ProgressFn, Steps

COPY_KEYS = (
    "copy_id",
    "copy_of",
    "copy_for",
    "copy_made_at",
    "copy_base_audit_id",
    "copy_base_audit_hash",
    "copy_only_assigned",
    "copy_ids_renumbered",
    "copy_max_answer_id",
)
TAKE = ("master", "copy")
# The master's project_meta key (with the copy's id) of a blinded copy's ids (_IdMap)
ID_MAP_PREFIX = "copy_ids:"


class MergeRefused(StoreError):
    """A copy that cannot be merged into this project; nothing was changed."""


# --- states of answers -------------------------------------------------------------------------


def _canon(state: dict[str, Any] | None) -> str:
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(state: dict[str, Any] | None) -> str:
    return hashlib.sha256(_canon(state).encode("utf-8")).hexdigest()


def _normal(state: dict[str, Any] | None) -> dict[str, Any] | None:
    """A state as it reads back from JSON (tuples as lists, keys as text)."""
    return None if state is None else json.loads(_canon(state))


def _key_text(unit_id: int, annotator: str, is_gold: bool) -> str:
    return f"{unit_id}:{annotator}:{'gold' if is_gold else 'answer'}"


@dataclass
class _Row:
    """One answer as the merge sees it (in the copy or in the master)."""

    answer_id: int
    unit_id: int
    kind: str
    annotator: str
    annotator_id: int
    is_gold: bool
    state: dict[str, Any]
    active_seconds: float
    created_at: str
    updated_at: str
    suggestion: dict[str, Any] | None = None  # the copy's suggestion row, for the master

    @property
    def key(self) -> tuple[int, str, bool]:
        return (self.unit_id, self.annotator, self.is_gold)


# Units named in one SQL ``IN`` list at most: SQLite before 3.32 binds 999 parameters at most.
_MAX_SQL_IN = 900


def _rows(
    s: Session,
    keys: set[tuple[int, str, bool]] | None = None,
    with_suggestions: bool = False,
) -> dict[tuple[int, str, bool], _Row]:
    """The answers (those of ``keys`` only, when given) with their full states."""
    names = dict(s.execute(select(Annotator.id, Annotator.name)).all())
    query = select(Answer).order_by(Answer.id)
    units = {k[0] for k in keys} if keys is not None else set()
    if keys is not None and len(units) <= _MAX_SQL_IN:
        query = query.where(Answer.unit_id.in_(units))  # spares loading every answer
    out = {}
    for answer in s.scalars(query):
        key = (answer.unit_id, names[answer.annotator_id], bool(answer.is_gold))
        if keys is not None and key not in keys:
            continue
        view = EventRecorder._answer_view(s, answer)
        suggestion = None
        if with_suggestions and answer.suggestion_id is not None:
            sug = s.get(Suggestion, answer.suggestion_id)
            suggestion = {c.name: getattr(sug, c.name) for c in Suggestion.__table__.columns}
        out[key] = _Row(
            answer_id=answer.id,
            unit_id=answer.unit_id,
            kind=answer.kind,
            annotator=key[1],
            annotator_id=answer.annotator_id,
            is_gold=key[2],
            state=_normal(EventRecorder._audit_state(view)),
            active_seconds=answer.active_seconds,
            created_at=answer.created_at,
            updated_at=answer.updated_at,
            suggestion=suggestion,
        )
    return out


def _meta(s: Session) -> dict[str, str]:
    return {row.key: row.value for row in s.scalars(select(ProjectMeta))}


# --- copies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CopyInfo:
    path: Path
    copy_id: str
    annotator: str | None
    only_assigned: bool
    base_audit_id: int
    made_at: str


def _sqlite_copy(source: Path, target: Path, steps: Steps | None = None) -> None:
    """A consistent copy of ``source`` (read-only) into the new file ``target`` (owner-only)."""
    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    src = sqlite3.connect(sqlite_uri(source.resolve(), "mode=ro"), uri=True)
    try:
        dest = sqlite3.connect(target)
        try:

            def report(status: int, remaining: int, total: int) -> None:
                if steps is not None:
                    steps.check()

            src.backup(dest, pages=256, progress=report)
        finally:
            dest.close()
    finally:
        src.close()


def _keep_own_schema(path: Path, vacuum: bool) -> None:
    """Drop from the copy every table, view, index and trigger PortalReview did not make, and
    put back its own triggers the copy lacks (:func:`own_schema.keep_only_own`), before
    anything in it changes: a trigger left by a database tool, or planted, would run during the
    clean-up of a copy for one clinician and could keep what it removes (everyone's answers,
    the reference levels) in a table of its own. ``vacuum``: leave nothing of what was dropped
    in the file's free pages."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")  # (a foreign table may name another)
        with _checked_transaction(conn):
            dropped = own_schema.keep_only_own(conn)
        if dropped and vacuum:
            conn.execute("VACUUM")
    finally:
        conn.close()


def _restrict(path: Path, annotator_id: int) -> _IdMap:
    """Keep only one clinician's work in a copy (see the module docstring); the copy's new
    response and sentence ids, as copy id -> master id, for the master to keep."""
    freezes = {
        name: statement
        for statement in trigger_statements()
        for name in ("audit_no_update", "audit_no_delete")
        if statement.startswith(f"CREATE TRIGGER {name} ")
    }
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        with _checked_transaction(conn):
            for name in freezes:
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("DELETE FROM audit_log")
            for statement in freezes.values():
                conn.execute(statement)
            conn.execute("DELETE FROM report_cache")  # figures of everyone's answers
            # the keys of earlier copies' ids: with them, this copy's ids could be undone
            conn.execute("DELETE FROM project_meta WHERE key LIKE ?", (f"{ID_MAP_PREFIX}%",))
            conn.execute(  # gold is the PI's, whatever name it is stored under
                "DELETE FROM answers WHERE annotator_id != ? OR is_gold", (annotator_id,)
            )
            conn.execute("DELETE FROM assignments WHERE annotator_id != ?", (annotator_id,))
            conn.execute(  # (a suggestion made for someone else holds their replies)
                "DELETE FROM suggestions WHERE unit_id NOT IN "
                "(SELECT unit_id FROM assignments WHERE annotator_id = ?) "
                "OR for_annotator_id != ?",
                (annotator_id, annotator_id),
            )
            _drop_unused_responses(conn, annotator_id)
            conn.execute(
                "UPDATE responses SET author = '', source = '', author_kind = 'imported', "
                "production = 'other'"
            )
            # the reference urgency and what is derived from it: the filter label, PMR-Bench's
            # inbox relevancy tag, the pairs' difficulty (stored as the urgency units' batch)
            conn.execute("UPDATE cases SET urgency_level = NULL, urgency_filter = NULL")
            conn.execute("DELETE FROM case_tags WHERE key = 'relevancy'")
            conn.execute("UPDATE units SET batch = '' WHERE kind = 'urgency'")
        # ids are renumbered with the foreign keys off (no cascade, no check per row) and the
        # triggers dropped (they forbid changing a sentence or a unit's responses); checked
        # as a whole before the commit
        conn.execute("PRAGMA foreign_keys = OFF")
        with _checked_transaction(conn):
            ids = _renumber(conn)
        conn.execute("VACUUM")
    finally:
        conn.close()
    return ids


@contextlib.contextmanager
def _checked_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction on the copy, committed only if every foreign key still holds."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise StoreError(f"the restricted copy breaks foreign keys: {problems[:3]}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _drop_unused_responses(conn: sqlite3.Connection, annotator_id: int) -> None:
    """Remove the units not given to the clinician that name a response or a response's
    sentence (their roles would tell a pair's original from its edit), then every response
    (and its sentences) that nothing left names: the clinician's units, rank sets and
    answers."""
    mine = "SELECT unit_id FROM assignments WHERE annotator_id = ?"
    others = (
        f"SELECT id FROM units WHERE id NOT IN ({mine}) AND (response_id IS NOT NULL "
        "OR response_b_id IS NOT NULL OR kind = 'rank' "
        "OR sentence_id IN (SELECT id FROM sentences WHERE response_id IS NOT NULL))"
    )
    conn.execute(f"DELETE FROM rank_members WHERE unit_id IN ({others})", (annotator_id,))
    conn.execute(f"DELETE FROM units WHERE id IN ({others})", (annotator_id,))
    used = (
        "SELECT response_id FROM units WHERE response_id IS NOT NULL "
        "UNION SELECT response_b_id FROM units WHERE response_b_id IS NOT NULL "
        "UNION SELECT response_id FROM rank_members "
        "UNION SELECT response_id FROM sentences WHERE response_id IS NOT NULL "
        "AND id IN (SELECT sentence_id FROM units) "
        "UNION SELECT base_response_id FROM respond_answers WHERE base_response_id IS NOT NULL "
        "UNION SELECT response_id FROM rank_entries "
        "UNION SELECT more_empathetic_response_id FROM empathy_answers "
        "WHERE more_empathetic_response_id IS NOT NULL"
    )
    # (a case's own sentences have no response; "NOT IN" an empty set is true even of NULL)
    conn.execute(
        f"DELETE FROM sentences WHERE response_id IS NOT NULL AND response_id NOT IN ({used})"
    )
    conn.execute(f"DELETE FROM responses WHERE id NOT IN ({used})")


# Where a copy holds response and sentence ids: (table, column). The foreign keys to
# ``responses.id`` and ``sentences.id`` are all here (checked, see _renumber), and the reasons
# of a rank, which reach the response through their rank entry.
_RESPONSE_COLUMNS = (
    ("responses", "id"),
    ("sentences", "response_id"),
    ("units", "response_id"),
    ("units", "response_b_id"),
    ("rank_members", "response_id"),
    ("respond_answers", "base_response_id"),
    ("rank_entries", "response_id"),
    ("rank_criteria", "response_id"),
    ("empathy_answers", "more_empathetic_response_id"),
)
_SENTENCE_COLUMNS = (
    ("sentences", "id"),
    ("units", "sentence_id"),
    ("match_decisions", "sentence_id"),
    ("match_spans", "sentence_id"),
    ("sentence_themes", "sentence_id"),
)
# Tables without an id of their own whose rows hold response or sentence ids: SQLite's hidden
# rowid would keep the order the rows were made in (a rank set's members in import order).
_ROWID_TABLES = (
    "rank_members",
    "rank_entries",
    "rank_criteria",
    "match_decisions",
    "match_spans",
    "sentence_themes",
)


@dataclass
class _IdMap:
    """A blinded copy's response and sentence ids -> the master's (kept in the master)."""

    responses: dict[int, int] = field(default_factory=dict)
    sentences: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "responses": sorted(self.responses.items()),
                "sentences": sorted(self.sentences.items()),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> _IdMap:
        data = json.loads(text)
        return cls(
            {int(c): int(m) for c, m in data.get("responses", [])},
            {int(c): int(m) for c, m in data.get("sentences", [])},
        )

    def inverse(self) -> _IdMap:
        return _IdMap(
            {m: c for c, m in self.responses.items()}, {m: c for c, m in self.sentences.items()}
        )

    def convert(self, ref: str, value: Any, keep: bool = False) -> Any:
        """The other file's id of a ``ref`` ("response", "sentence"; cases keep theirs); an id
        this map does not know: None (``keep``: itself, a case sentence)."""
        if ref == "case" or value is None:
            return value
        table = self.responses if ref == "response" else self.sentences
        try:
            return table.get(int(value), value if keep else None)
        except (TypeError, ValueError):
            return None

    def translate(self, value: Any, paths: tuple[RefPath, ...]) -> Any:
        return translate(value, paths, lambda ref, v, _trail: self.convert(ref, v))

    def payload(self, kind: str, payload: Any, sort: bool = True) -> Any:
        """An answer's payload in the other file's ids, in the order its kind reads back (by
        id); not ``sort``: in its own order (a suggestion's, compared as text)."""
        if not isinstance(payload, dict):
            return payload
        out = self.translate(payload, ANSWER_REFS.get(kind, ()))
        if not sort:
            return out
        for name, key in (("entries", "response_id"), ("decisions", "sentence_id"),
                          ("themes", "sentence_id")):  # fmt: skip
            if isinstance(out.get(name), list):
                out[name] = sorted(out[name], key=lambda item, k=key: _id_order(item, k))
        return out

    def json_text(self, text: str, convert: Any) -> str:
        """A JSON column's text with ids converted (unchanged text when nothing is)."""
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            return text
        new = convert(value)
        return text if new == value else json.dumps(new)

    def suggestion(self, kind: str, payload_json: str, params_json: str) -> tuple[str, str]:
        """A suggestion's payload and parameters (JSON texts) in the other file's ids, each in
        its own order (the merge compares them with the master's as text)."""
        return (
            self.json_text(payload_json, lambda v: self.payload(kind, v, sort=False)),
            self.json_text(params_json, lambda v: self.translate(v, params_refs(kind))),
        )

    def rank_order(self, presentation_json: str) -> str:
        """How a rank set is shown to its annotator (an assignment's presentation), in the
        other file's ids."""
        return self.json_text(
            presentation_json, lambda v: self.translate(v, PRESENTATION_REFS["rank"])
        )


def _id_order(item: Any, key: str) -> tuple[int, int]:
    value = item.get(key) if isinstance(item, dict) else None
    return (0, value) if isinstance(value, int) else (1, 0)


def _renumber(conn: sqlite3.Connection) -> _IdMap:
    """Give the copy's responses new ids in a random order (and their sentences ids in that
    order), so that no id, nor a row's place in a table, follows the order the master's drafts
    were imported in (model by model); the responses' times become one. Returns copy id ->
    master id."""
    _check_id_columns(conn)
    triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for (name,) in triggers:  # (they forbid changing a sentence or a unit's responses)
        conn.execute(f'DROP TRIGGER "{name}"')
    ids = _new_ids(conn)
    _remap(conn, "response", ids.responses, _RESPONSE_COLUMNS)
    _remap(conn, "sentence", ids.sentences, _SENTENCE_COLUMNS)
    _remap_json(conn, ids)
    # two passes: no new external id can meet an old one while the ids are unique
    conn.execute("UPDATE responses SET external_id = hex(randomblob(16)) || '.' || id")
    conn.execute("UPDATE responses SET external_id = 'response-' || id, created_at = ?",
                 (utc_now(),))  # fmt: skip
    _rows_in_key_order(conn)
    for statement in trigger_statements():  # the program's own, whatever the file held
        conn.execute(statement)
    return ids.inverse()


def _check_id_columns(conn: sqlite3.Connection) -> None:
    """Every column that refers to a response or a sentence is one :func:`_renumber` knows
    (a column added to the schema and not listed would keep the master's ids)."""
    referring = {
        (table, fk[3])
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        for fk in conn.execute(f"PRAGMA foreign_key_list({table})")
        if fk[2] in ("responses", "sentences") and fk[4] == "id"
    }
    unknown = referring - set(_RESPONSE_COLUMNS) - set(_SENTENCE_COLUMNS)
    if unknown:
        raise StoreError(f"the copy cannot renumber the ids held in {sorted(unknown)}")


def _new_ids(conn: sqlite3.Connection) -> _IdMap:
    """Master id -> copy id: the responses in a random order (``secrets``), their sentences
    numbered after the cases' sentences in that order."""
    old = [r for (r,) in conn.execute("SELECT id FROM responses ORDER BY id")]
    new = list(range(1, len(old) + 1))
    secrets.SystemRandom().shuffle(new)
    responses = dict(zip(old, new, strict=True))
    first = (
        conn.execute("SELECT max(id) FROM sentences WHERE case_id IS NOT NULL").fetchone()[0] or 0
    ) + 1
    owned = conn.execute(
        "SELECT id, response_id, position FROM sentences WHERE response_id IS NOT NULL"
    ).fetchall()
    owned.sort(key=lambda row: (responses[row[1]], row[2]))
    return _IdMap(responses, {sid: first + i for i, (sid, _r, _p) in enumerate(owned)})


def _remap(conn: sqlite3.Connection, name: str, mapping: dict[int, int], columns: tuple) -> None:
    """Old ids -> new ids in every column of ``columns``: first to the negative of the new
    id, then back, so that no new id meets an old one."""
    conn.execute(f"CREATE TEMP TABLE _new_{name} (old INTEGER PRIMARY KEY, new INTEGER)")
    conn.executemany(f"INSERT INTO _new_{name} VALUES (?, ?)", mapping.items())
    for table, column in columns:
        conn.execute(
            f"UPDATE {table} SET {column} = -(SELECT new FROM _new_{name} "
            f"WHERE old = {table}.{column}) WHERE {column} IN (SELECT old FROM _new_{name})"
        )
    for table, column in columns:
        conn.execute(f"UPDATE {table} SET {column} = -{column} WHERE {column} < 0")
    conn.execute(f"DROP TABLE _new_{name}")


def _remap_json(conn: sqlite3.Connection, ids: _IdMap) -> None:
    """The JSON that names responses: how each rank set is shown, the suggestions."""
    for unit_id, annotator, text in conn.execute(
        "SELECT a.unit_id, a.annotator_id, a.presentation_json FROM assignments a "
        "JOIN units u ON u.id = a.unit_id WHERE u.kind = 'rank'"
    ).fetchall():
        conn.execute(
            "UPDATE assignments SET presentation_json = ? WHERE unit_id = ? AND annotator_id = ?",
            (ids.rank_order(text), unit_id, annotator),
        )
    for sid, kind, payload, params in conn.execute(
        "SELECT id, kind, payload_json, params_json FROM suggestions"
    ).fetchall():
        conn.execute(
            "UPDATE suggestions SET payload_json = ?, params_json = ? WHERE id = ?",
            (*ids.suggestion(kind, payload, params), sid),
        )


def _rows_in_key_order(conn: sqlite3.Connection) -> None:
    """The rows of the tables SQLite keeps in insertion order (its hidden row number), again
    in the order of their keys: their places followed the master's import order."""
    for table in _ROWID_TABLES:
        keys = [
            f'"{c[1]}"'
            for c in sorted(conn.execute(f"PRAGMA table_info({table})"), key=lambda c: c[5])
            if c[5]
        ]
        conn.execute(f"CREATE TEMP TABLE _rows AS SELECT * FROM {table}")
        conn.execute(f"DELETE FROM {table}")
        conn.execute(f"INSERT INTO {table} SELECT * FROM _rows ORDER BY {', '.join(keys)}")
        conn.execute("DROP TABLE _rows")


def whole_study_contents(project: Project, annotator: str | None = None) -> str:
    """What a whole-study copy for ``annotator`` would hand over beyond their own work, in
    words (the CLI's warning, the window's confirmation): the others' answers, the drafts'
    authors and sources, the reference urgency levels and the audit log."""
    with project.read() as s:
        me = getattr(find_annotator(s, annotator or ""), "id", None)
        n_answers, n_people = s.execute(
            select(func.count(), func.count(func.distinct(Answer.annotator_id))).where(
                Answer.annotator_id != (me or -1)
            )
        ).one()
        n_named = s.scalar(
            select(func.count()).where((Response.author != "") | (Response.source != ""))
        )
        n_levels = s.scalar(select(func.count()).where(Case.urgency_level.is_not(None)))
        n_audit = s.scalar(select(func.count()).select_from(AuditEntry))
    people = "other person(s)" if me else "person(s)"
    return (
        f"{n_answers} answer(s) by {n_people} {people}, the authors and sources of {n_named} "
        f"response(s) (which model or clinician wrote each draft), the reference urgency "
        f"levels of {n_levels} case(s) and the audit log ({n_audit} entries, every answer's "
        "history); anyone who has the file can read them with any SQLite tool"
    )


def make_copy(
    project: Project,
    out: str | os.PathLike,
    *,
    annotator: str | None = None,
    only_assigned: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> CopyInfo:
    """Write a copy of ``project`` to ``out`` for ``annotator`` to take away (see the module
    docstring), and record it in the master's audit log (when the master is open for writing).

    ``only_assigned`` keeps only the annotator's own assignments and answers. The file appears
    at ``out`` only once complete; a failure or a cancel leaves nothing there. ``by`` is the id
    of the person the master's audit log names (the PI in the app; None: the system).
    """
    out = Path(out)
    if not out.suffix:
        out = out.with_suffix(SUFFIX)
    if out.exists():
        raise StoreError(f"{out} already exists; choose another name")
    if not out.parent.is_dir():
        raise StoreError(f"the folder {out.parent} does not exist")
    if only_assigned and not annotator:
        raise StoreError("name the annotator whose assignments the copy keeps")
    _refuse_a_clinicians_login(project)
    person_id = has_units = None
    if annotator:
        with project.read() as s:
            person_id = getattr(find_annotator(s, annotator), "id", None)
            has_units = s.scalar(
                select(Assignment.unit_id).where(Assignment.annotator_id == person_id).limit(1)
            )
        if person_id is None:
            raise StoreError(f"there is no annotator called {annotator!r}")
    if only_assigned and has_units is None:
        raise StoreError(
            f"{annotator} has no unit to work on in {project.label}, so a copy for them would "
            "hold nothing to do: assign them units first (portalreview assign; a copy made for "
            "another clinician holds only that clinician's units)"
        )
    if only_assigned and project.read_only:
        raise StoreError(
            f"{project.label} is open read-only: a copy for one clinician renumbers the drafts, "
            "and the master must keep the key to their ids to merge it back; open it for "
            "writing"
        )
    steps = Steps(4, progress, cancel)
    steps.start()
    remove_leftover_work()
    for old in out.parent.glob(".portalreview-copy-*"):  # where versions before 2026-12 made it
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    with _in_temporary_folder():
        work = _work_folder()
    try:
        with _in_temporary_folder():  # nothing of the master is changed in there
            temporary = work / out.name
            if project.path is None:  # a server study: its rows, into a new file
                from portalreview.store.transfer import copy_study

                copy_study(project, temporary).close()
            else:
                _sqlite_copy(project.path, temporary, steps)
            _keep_own_schema(temporary, vacuum=not only_assigned)  # (_restrict vacuums)
            steps.step()
            conn = sqlite3.connect(temporary)
            try:
                base_id, base_hash = conn.execute(
                    "SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1"
                ).fetchone() or (0, "")
            finally:
                conn.close()
            ids = _restrict(temporary, person_id) if only_assigned else None
            max_answer_id = None
            if only_assigned:  # its answers have no entries in its log (audit_verify)
                conn = sqlite3.connect(temporary)
                try:
                    max_answer_id = conn.execute("SELECT max(id) FROM answers").fetchone()[0] or 0
                finally:
                    conn.close()
            steps.step()
            info = CopyInfo(
                path=out,
                copy_id=str(uuid.uuid4()),
                annotator=annotator,
                only_assigned=only_assigned,
                base_audit_id=int(base_id),
                made_at=utc_now(),
            )
            with Project.open(temporary, automatic_backup=False) as copy:
                recorder = EventRecorder(copy)
                with recorder._write() as s:
                    master_id = s.get(ProjectMeta, "project_id").value
                    values = {
                        "copy_id": info.copy_id,
                        "copy_of": master_id,
                        "copy_for": annotator or "",
                        "copy_made_at": info.made_at,
                        "copy_base_audit_id": str(info.base_audit_id),
                        "copy_base_audit_hash": base_hash,
                        "copy_only_assigned": "1" if only_assigned else "0",
                    }
                    if ids is not None:
                        values["copy_ids_renumbered"] = "1"
                    if max_answer_id is not None:
                        values["copy_max_answer_id"] = str(max_answer_id)
                    for key, value in values.items():
                        s.merge(ProjectMeta(key=key, value=value))
                    recorder.record(s, "copy", _copy_details(info, out.name))
            _settle(temporary)
        steps.step()
        steps.check()
        # The master keeps the key to the copy's ids before the copy leaves: a copy that
        # reached the clinician and whose key the master lacks could never be merged back.
        # (A key and an entry of a copy whose delivery then failed do no harm.)
        if not project.read_only:
            recorder = EventRecorder(project, by)
            with recorder._write() as s:
                if ids is not None:
                    s.add(ProjectMeta(key=ID_MAP_PREFIX + info.copy_id, value=ids.to_json()))
                recorder.record(s, "copy", _copy_details(info, out.name))
        _deliver(temporary, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    steps.finish()
    return info


@contextlib.contextmanager
def _in_temporary_folder() -> Iterator[None]:
    """The copy's work in the system's temporary folder: a failure there (its disk full) in
    words that name that folder, not SQLite's "database or disk is full" about no file."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(_temporary_work_failed(_temporary_folders(), exc)) from exc


def _temporary_folders() -> list[Path]:
    """Where a copy is worked on: Python's temporary folder (its work folder) and the one
    SQLite keeps its scratch files in, named by the environment. They differ when the one
    named is full: Python then falls back to another, SQLite does not."""
    folders = [Path(tempfile.gettempdir())]
    names = ("SQLITE_TMPDIR", "TMPDIR", "TEMP", "TMP")
    named = next((os.environ[name] for name in names if os.environ.get(name)), "")
    if named and Path(named).is_dir() and Path(named).resolve() != folders[0].resolve():
        folders.insert(0, Path(named))
    return folders


def _temporary_work_failed(folders: list[Path], exc: BaseException) -> str:
    full = getattr(exc, "errno", None) == errno.ENOSPC or (
        getattr(exc, "sqlite_errorname", "") or ""
    ).startswith("SQLITE_FULL")
    said = getattr(exc, "strerror", None) or str(exc)  # an OSError's without the temporary path
    why = f"its disk is full ({said})" if full else said
    where = " or ".join(str(folder) for folder in folders)
    return (
        f"the copy could not be made in the system's temporary folder {where}, where it is "
        f"put together first: {why}. Nothing was changed. Make room there (or set TMPDIR to "
        "a folder on a disk with room), then try again"
    )


# The working folders of copies being made: on this machine, never on the copy's drive (a
# USB stick's file system has no owner-only files, and what is deleted there may be read back).
WORK_PREFIX = "portalreview-copy-work-"
# The folders of the upgraded temporary copies of older files read by a merge, a verify and
# the self-test (open_read_only_upgraded): each holds a whole study.
MERGE_PREFIX = ".portalreview-merge-"
VERIFY_PREFIX = ".portalreview-verify-"
SELFTEST_PREFIX = ".portalreview-selftest-"
TEMPORARY_PREFIXES = (WORK_PREFIX, MERGE_PREFIX, VERIFY_PREFIX, SELFTEST_PREFIX)


def _refuse_a_clinicians_login(project: Project) -> None:
    """A clinician's login to a team study sees only her own work, so a copy is the PI's to
    make: said before anything is read (the server refused it part-way, and a copy for
    another clinician was refused as "has no unit to work on": she cannot see his)."""
    member = getattr(project, "member", None)  # a server study's login; a file has none
    me = member() if member is not None else None
    if me is None:
        return
    with project.read() as s:
        role = s.scalar(select(Annotator.role).where(Annotator.name == me))
    if role != "pi":
        raise StoreError(
            f"your database account works as the clinician {me}, who sees only their own "
            "work: offline copies of a team study are made by the study's PI (or IT with "
            "the study owner's account)"
        )


def _work_folder(prefix: str = WORK_PREFIX) -> Path:
    """A new owner-only folder in the system's temporary folder, named for this process (so
    that a later run can tell when it was abandoned)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def remove_leftover_work(older_than: float = leftovers.STALE_AFTER) -> list[Path]:
    """Remove the program's folders in the system's temporary folder (copies being made,
    upgraded copies being read: :data:`TEMPORARY_PREFIXES`) that a program ended without
    removing (a crash, a power cut): abandoned as :func:`leftovers.is_abandoned` tells,
    never one a running program uses. Returns the folders removed."""
    removed = []
    try:
        found = list(Path(tempfile.gettempdir()).iterdir())
    except OSError:
        return removed
    for folder in found:
        prefix = next((p for p in TEMPORARY_PREFIXES if folder.name.startswith(p)), None)
        if prefix is None or folder.is_symlink() or not folder.is_dir():
            continue
        pid = leftovers.pid_in_name(folder.name, prefix)
        if leftovers.is_abandoned([folder], pid, older_than=older_than):
            leftovers.remove(folder)
            removed.append(folder)
    return removed


# A file being delivered is ".<name>.portalreview-<pid>-<machine>-<random>.part" beside its
# destination; <machine> is a digest of this computer's name, so that a process id is only
# checked on the computer that wrote it (a drive or share is seen by several).
_PART_MARK = ".portalreview-"
_PART_NAME = re.compile(r"\..*\.portalreview-(\d+)-([0-9a-f]{8})-[a-z0-9_]+\.part")


def remove_abandoned_parts(folder: Path, older_than: float = leftovers.STALE_AFTER) -> list[Path]:
    """Remove the half-delivered copies (``.part`` files) in ``folder`` that a copy killed
    while delivering left there (see :func:`leftovers.is_abandoned`); one another copy is
    still writing stays. Returns the files removed."""
    removed = []
    try:
        found = [p for p in folder.iterdir() if _PART_MARK in p.name]
    except OSError:
        return removed
    for part in found:
        named = _PART_NAME.fullmatch(part.name)
        if named is None or part.is_symlink() or not part.is_file():
            continue
        made_here = named[2] == leftovers.machine_tag()
        if leftovers.is_abandoned(
            [part], int(named[1]), made_here=made_here, older_than=older_than
        ):
            leftovers.remove(part)
            removed.append(part)
    return removed


def _deliver(finished: Path, out: Path) -> None:
    """Copy the finished file to ``out`` under a temporary name beside it, then rename it
    (:func:`~portalreview.store.output_files.write_through_temporary`): a failure leaves no
    half file there, and one a kill leaves is removed by the next copy delivered to that
    folder."""
    remove_abandoned_parts(out.parent)
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{out.stem}{_PART_MARK}{os.getpid()}-{leftovers.machine_tag()}-",
            suffix=".part",
            dir=out.parent,
        )
    except OSError as exc:  # it names the hidden part file, not the copy asked for
        raise output_error(exc, out) from exc
    os.close(fd)  # made owner-only under a name no other copy takes; written below
    # the same wording as every other output (a copy open in another program on Windows)
    try:
        write_through_temporary(
            out, lambda part: _copy_file(finished, part), temporary=Path(name), replace=False
        )
    except FileExistsError:  # made there by another program since the start: never replaced
        raise StoreError(
            f"{out} appeared while the copy was being made; choose another name"
        ) from None


def _copy_file(source: Path, target: Path) -> None:
    with source.open("rb") as read, target.open("wb") as written:
        shutil.copyfileobj(read, written, 1 << 20)


def _settle(path: Path) -> None:
    """Fold the write-ahead log into the file, so that the file alone is the whole copy."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()
    for extra in ("-wal", "-shm"):
        Path(str(path) + extra).unlink(missing_ok=True)


def _copy_details(info: CopyInfo, file_name: str) -> dict[str, Any]:
    return {
        "copy_id": info.copy_id,
        "file": file_name,
        "for": info.annotator,
        "only_assigned": info.only_assigned,
        "base_audit_id": info.base_audit_id,
        "made_at": info.made_at,
    }


def _user_version(path: Path) -> int:
    """The file's project format; the current one when SQLite cannot read it."""
    try:
        conn = sqlite3.connect(sqlite_uri(path.resolve(), "mode=ro"), uri=True)
    except sqlite3.Error:
        return SCHEMA_VERSION
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError:
        return SCHEMA_VERSION
    finally:
        conn.close()


@contextlib.contextmanager
def open_read_only_upgraded(
    path: Path, prefix: str = MERGE_PREFIX
) -> Iterator[tuple[Project, int | None]]:
    """The file ``path`` opened read-only, and None; a file in an older project format is
    upgraded in a temporary copy of it (in a new owner-only folder of the system's temporary
    folder, named ``prefix<pid>-...``, removed afterwards, or by a later run if this one is
    killed: :func:`remove_leftover_work`, which runs first), which is opened instead, with the
    format it was upgraded from. The file itself is never changed."""
    remove_leftover_work()
    try:
        project = Project.open(path, read_only=True)
    except ProjectError:
        # a folder or a missing file: the ProjectError already says so
        if not path.is_file():
            raise
        version = _user_version(path)
        if not 1 <= version < SCHEMA_VERSION:
            raise
        work = _work_folder(prefix)
        try:
            upgraded = work / path.name
            _sqlite_copy(path, upgraded)
            _upgrade_temporary_copy(upgraded, version)
            with Project.open(upgraded, read_only=True) as project:
                yield project, version
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        yield project, None
    finally:
        project.close()


def _upgrade_temporary_copy(upgraded: Path, version: int) -> None:
    """Upgrade the temporary copy of an older file. Its refusal names no backup: the one
    made beside the copy goes with the temporary folder, and the file itself is unchanged."""
    try:
        Project.open(upgraded, automatic_backup=False).close()
    except ProjectError as exc:
        cause = exc.__cause__
        why = cause.reason if isinstance(cause, MigrationError) else str(cause or exc)
        raise ProjectError(
            f"{upgraded.name} is in the older project format {version}, and a temporary copy "
            f"of it could not be upgraded to be read ({why}). The file itself is unchanged."
        ) from exc


@contextlib.contextmanager
def _open_copy(path: Path) -> Iterator[Project]:
    """The copy, read-only; a copy in an older project format is upgraded in a temporary
    copy of it (the clinician's file is never changed)."""
    with open_read_only_upgraded(path) as (project, _):
        yield project


# --- merging -----------------------------------------------------------------------------------


@dataclass
class Conflict:
    """One answer changed differently in the master and in a copy since the copy was made."""

    unit_id: int
    unit_set: str
    position: int
    kind: str
    annotator: str
    is_gold: bool
    master: dict[str, Any]
    copy: dict[str, Any]
    base: dict[str, Any] | None
    master_updated_at: str
    copy_updated_at: str
    copy_file: str
    copy_id: str
    copy_suggestion: dict[str, Any] | None = None
    #: Its number in the study (``conflicts --resolve N``), kept until it is settled: the order
    #: merges first recorded it in (None: not recorded, a dry run's new conflict).
    number: int | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return _key_text(self.unit_id, self.annotator, self.is_gold)

    @property
    def identity(self) -> tuple[str, str, str]:
        """The answer and the two versions offered: what a resolve record names."""
        return (self.key, self.copy_hash, self.master_hash)

    @property
    def master_hash(self) -> str:
        return _digest(self.master)

    @property
    def copy_hash(self) -> str:
        return _digest(self.copy)

    @property
    def answer_named(self) -> str:
        """Whose answer to which unit, as a person reads it."""
        what = "gold answer" if self.is_gold else "answer"
        return f"{self.annotator}'s {what} to {self.unit_named}"

    @property
    def unit_named(self) -> str:
        return f"{self.kind} unit {self.position + 1} of {self.unit_set!r} (unit {self.unit_id})"

    def describe(self) -> str:
        what = "gold answer" if self.is_gold else "answer"
        return (
            f"{self.unit_named}: "
            f"{self.annotator}'s {what} was changed in the master ({self.master_updated_at}) "
            f"and in {self.copy_file} ({self.copy_updated_at}); the master's is kept"
        )

    def differences(self) -> dict[str, tuple[Any, Any]]:
        """field -> (master's, copy's) for the fields of the answer that differ."""
        return {
            k: (self.master.get(k), self.copy.get(k))
            for k in sorted(set(self.master) | set(self.copy))
            if self.master.get(k) != self.copy.get(k)
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MergeReport:
    copy_file: str
    copy_id: str
    copy_for: str
    base_audit_id: int
    dry_run: bool = False
    added: list[str] = field(default_factory=list)  # answer keys "unit:annotator:answer"
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    new_conflicts: int = 0
    settled: int = 0  # conflicts an earlier merge of this copy found that it no longer finds
    skipped: list[str] = field(default_factory=list)  # why an answer could not be merged
    recorded: bool = False  # a merge entry was written to the audit log
    # answers whose time on task the master took from the copy (longer there), the answer kept
    timed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated)

    @property
    def brought_anything(self) -> bool:
        """Whether the merge changed the master (or would: a dry run)."""
        return self.changed or bool(self.timed or self.new_conflicts or self.settled)

    def summary(self) -> str:
        head = f"{self.copy_file}" + (f" (copy for {self.copy_for})" if self.copy_for else "")
        verb = "would add" if self.dry_run else "added"
        lines = [
            f"{head}: {verb} {len(self.added)} answer(s), "
            f"{'would update' if self.dry_run else 'updated'} {len(self.updated)}, "
            f"{self.unchanged} unchanged, {len(self.conflicts)} conflict(s)"
            + (f" ({self.new_conflicts} new)" if self.conflicts else "")
        ]
        if self.settled:
            lines.append(
                f"  {self.settled} conflict(s) found by an earlier merge of this copy "
                f"{'would be' if self.dry_run else 'are'} settled: the copy's answer changed since"
            )
        if self.timed:
            lines.append(
                f"  {'would take' if self.dry_run else 'took'} the longer time on task of "
                f"{len(self.timed)} answer(s) from the copy"
            )
        if not self.brought_anything and not self.dry_run:
            lines.append(
                "  nothing new: merged before, its conflicts are already on record"
                if self.conflicts
                else "  nothing new: the master already holds everything in this copy"
            )
        lines += [
            f"  conflict{'' if c.number is None else f' #{c.number}'}: {c.describe()}"
            for c in self.conflicts
        ]
        lines += [f"  skipped: {why}" for why in self.skipped]
        return "\n".join(lines)


def _unit_signature(
    s: Session, unit_ids: Iterable[int], blinded: bool = False, to_master: _IdMap | None = None
) -> dict[int, tuple]:
    """What a unit is, by ids and external ids, to check a copy's unit is the master's;
    ``blinded``: by the responses' ids only (a copy with only one person's work has neutral
    response ids); ``to_master``: the copy's response and sentence ids, in the master's."""
    ids = set(unit_ids)

    def response(r: int | None) -> int | None:
        return r if to_master is None or r is None else to_master.convert("response", r)

    def sentence(x: int | None) -> int | None:
        return x if to_master is None else to_master.convert("sentence", x, keep=True)

    case_ext = dict(s.execute(select(Case.id, Case.external_id)).all())
    resp_ext = {} if blinded else _response_ids(s)
    members: dict[int, list[int]] = {}
    for unit_id, response_id in s.execute(select(RankMember.unit_id, RankMember.response_id)):
        if unit_id in ids:
            members.setdefault(unit_id, []).append(response_id)
    out = {}
    for unit, set_name in s.execute(
        select(Unit, UnitSet.name).join(UnitSet, UnitSet.id == Unit.unit_set_id)
    ):
        if unit.id not in ids:
            continue
        out[unit.id] = (
            set_name,
            unit.kind,
            unit.position,
            unit.case_id,
            case_ext.get(unit.case_id),
            unit.case_b_id,
            case_ext.get(unit.case_b_id),
            response(unit.response_id),
            resp_ext.get(unit.response_id),
            response(unit.response_b_id),
            resp_ext.get(unit.response_b_id),
            sentence(unit.sentence_id),
            tuple(
                sorted(((response(r), resp_ext.get(r)) for r in members.get(unit.id, [])), key=str)
            ),
        )
    return out


def _response_ids(s: Session) -> dict[int, str]:
    return dict(s.execute(select(Response.id, Response.external_id)).all())


@dataclass
class _Copy:
    """What the merge reads from a copy, in one read transaction."""

    file: str
    meta: dict[str, str]
    audit: list[tuple[int, str]]  # (id, hash), oldest first
    base: int = 0  # the copy's starting point in the master's audit log
    base_time: str = ""
    rows: dict[tuple[int, str, bool], _Row] = field(default_factory=dict)
    signatures: dict[int, tuple] = field(default_factory=dict)
    responses: dict[int, str] = field(default_factory=dict)
    presentations: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    n_same: int = 0  # answers the copy's audit log shows untouched since the base
    # every answer's time on task, read or not (it changes without an audit entry)
    times: dict[tuple[int, str, bool], float] = field(default_factory=dict)

    @property
    def head(self) -> str:
        return self.audit[-1][1] if self.audit else ""

    @property
    def blinded(self) -> bool:
        """A copy with only one person's work: its responses' external ids are neutral."""
        return self.meta.get("copy_only_assigned") == "1"


def _read_copy(path: Path, master: Project) -> _Copy:
    """Read the copy, after checking it comes from ``master``: only the answers its own audit
    log shows changed since its base are read in full (the others are only counted)."""
    with _open_copy(path) as copy, copy.read() as s:
        audit = list(s.execute(select(AuditEntry.id, AuditEntry.hash, AuditEntry.answer_id)))
        found = _Copy(file=path.name, meta=_meta(s), audit=[(i, h) for i, h, _ in audit])
        with master.read() as ms:
            found.base, found.base_time = _check_identity(ms, master.label, found)
            to_master = _copy_ids(ms, master.label, found)
        changed = {a for i, _, a in audit if a is not None and i > found.base}
        names = dict(s.execute(select(Annotator.id, Annotator.name)).all())
        times = _answer_times(s, names)
        found.times = {key: seconds for key, (_, seconds) in times.items()}
        keys = {key for key, (answer_id, _) in times.items() if answer_id in changed}
        found.rows = _rows(s, keys, with_suggestions=True)
        found.n_same = s.scalar(select(func.count()).select_from(Answer)) - len(found.rows)
        found.signatures = _unit_signature(
            s, {r.unit_id for r in found.rows.values()}, found.blinded, to_master
        )
        found.responses = {} if found.blinded else _response_ids(s)
        found.presentations = {
            (a.unit_id, names[a.annotator_id]): (a.position, a.presentation_json)
            for a in s.scalars(select(Assignment))
        }
        if to_master is not None:
            _in_master_ids(s, found, to_master)
        return found


def _copy_ids(master: Session, master_label: str, copy: _Copy) -> _IdMap | None:
    """The key to a blinded copy's response and sentence ids, kept in the master when the
    copy was made; None for a copy that keeps the master's ids (made before 2026-12, or a
    whole-study copy). MergeRefused when the copy's key is not in the master."""
    if copy.meta.get("copy_ids_renumbered") != "1":
        return None
    row = master.get(ProjectMeta, ID_MAP_PREFIX + copy.meta.get("copy_id", ""))
    if row is None:
        raise MergeRefused(
            f"{copy.file} holds its drafts under new ids, and {master_label} does not hold "
            "the key to them (it is kept in the file the copy was made from): was this file "
            "restored from an older backup? Merge it into the file it was copied from. "
            "Nothing was merged."
        )
    return _IdMap.from_json(row.value)


def _in_master_ids(s: Session, copy: _Copy, to_master: _IdMap) -> None:
    """A blinded copy's answers, suggestions and rank orders in the master's response and
    sentence ids (after that, the merge compares and saves them as any copy's)."""
    kinds = dict(s.execute(select(Unit.id, Unit.kind)).all())
    for row in copy.rows.values():
        row.state = {**row.state, "payload": to_master.payload(row.kind, row.state["payload"])}
        if row.suggestion is not None:
            sug = dict(row.suggestion)
            sug["payload_json"], sug["params_json"] = to_master.suggestion(
                sug["kind"], sug["payload_json"], sug["params_json"]
            )
            row.suggestion = sug
    for key, (position, text) in copy.presentations.items():
        if kinds.get(key[0]) == "rank":
            copy.presentations[key] = (position, to_master.rank_order(text))


def _check_identity(master: Session, master_label: str, copy: _Copy) -> tuple[int, str]:
    """The copy's base (audit id, time) in the master's history; MergeRefused otherwise."""
    mine = _meta(master)
    theirs = copy.meta
    if theirs.get("project_id") != mine.get("project_id"):
        raise MergeRefused(
            f"{copy.file} is not a copy of this project: it belongs to the project "
            f"{theirs.get('name', '?')!r} ({theirs.get('project_id', 'no project id')}), and "
            f"{master_label} is {mine.get('name', '?')!r} ({mine.get('project_id')}). "
            "Nothing was merged."
        )
    if theirs.get("copy_base_audit_id") is not None:
        base = int(theirs["copy_base_audit_id"])
        if base == 0:
            return 0, theirs.get("copy_made_at", "")
        entry = master.get(AuditEntry, base)
        if entry is None or entry.hash != theirs.get("copy_base_audit_hash"):
            raise MergeRefused(
                f"{copy.file} was made from a state of this project that {master_label} "
                f"does not hold (its starting point, audit entry {base}, is not in this file's "
                "history): was this file restored from an older backup? Merge it into the file "
                "it was copied from. Nothing was merged."
            )
        return base, theirs.get("copy_made_at") or entry.at
    # A plain file copy: the longest common prefix of the two hash-chained logs.
    master_log = dict(master.execute(select(AuditEntry.id, AuditEntry.hash)).all())
    base = 0
    for entry_id, entry_hash in copy.audit:
        if master_log.get(entry_id) != entry_hash:
            break
        base = entry_id
    at = master.get(AuditEntry, base).at if base else ""
    return base, at


def _history(master: Session, base: int) -> tuple[dict[int, dict], set[int], list[dict]]:
    """(answer id -> its state at the base, answers changed after the base, merge records)."""
    at_base: dict[int, dict] = {}
    after: set[int] = set()
    merges: list[dict] = []
    for entry_id, action, answer_id, new_json in master.execute(
        select(AuditEntry.id, AuditEntry.action, AuditEntry.answer_id, AuditEntry.new_json)
        .where((AuditEntry.answer_id.is_not(None)) | AuditEntry.action.in_(("merge", "resolve")))
        .order_by(AuditEntry.id)
    ):
        if answer_id is not None:
            if entry_id <= base:
                at_base[answer_id] = _normal(json.loads(new_json)) if new_json else None
            else:
                after.add(answer_id)
        elif new_json:
            merges.append({"action": action, **json.loads(new_json)})
    return at_base, after, merges


def _master_suggestion(master: Session, sug: dict[str, Any] | None) -> int | str | None:
    """The master's id of a copy's suggestion row, or "new" when the master lacks it."""
    if sug is None:
        return None
    found = master.scalar(
        select(Suggestion.id).where(
            Suggestion.unit_id == sug["unit_id"],
            Suggestion.model_sha256 == sug["model_sha256"],
            Suggestion.template_id == sug["template_id"],
            Suggestion.created_at == sug["created_at"],
            Suggestion.payload_json == sug["payload_json"],
        )
    )
    return found if found is not None else "new"


def _ensure_suggestion(master: Session, sug: dict[str, Any] | None) -> int | None:
    """The master's id of a copy's suggestion, inserting it (with its provenance) if new."""
    found = _master_suggestion(master, sug)
    if found is None or isinstance(found, int):
        return found
    made = Suggestion(**{k: v for k, v in sug.items() if k != "id"})
    master.add(made)
    master.flush()
    return made.id


def merge_copy(
    project: Project,
    copy_path: str | os.PathLike,
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> MergeReport:
    """Merge the answers of the copy at ``copy_path`` into ``project`` (the master), in one
    transaction (see the module docstring). ``dry_run`` reports what would happen and changes
    nothing. Raises :class:`MergeRefused` for a copy of another project or history. ``by`` is
    the id of the person the audit log names (the PI in the app; None: the system)."""
    copy_path = Path(copy_path)
    if not copy_path.exists():
        raise MergeRefused(f"there is no file {copy_path}")
    if project.path is not None and copy_path.resolve() == project.path.resolve():
        raise MergeRefused(f"{copy_path.name} is this project itself, not a copy of it")
    if project.read_only and not dry_run:
        raise ProjectError(f"{project.label} is open read-only; a merge cannot be saved.")
    steps = Steps(1, progress, cancel)
    steps.start()
    copy = _read_copy(copy_path, project)
    steps = Steps(2 * len(copy.rows) + 1, progress, cancel)
    steps.done = 1
    recorder = EventRecorder(project, by)
    session = project.read() if dry_run else recorder._write()
    with session as s:
        report = _merge(s, recorder, project.label, copy, dry_run, steps)
    steps.finish()
    return report


def merge_copies(
    project: Project,
    paths: Iterable[str | os.PathLike],
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> list[MergeReport]:
    """Merge several copies one after the other (each in its own transaction): the same answer
    changed differently in two copies is a conflict when the second is merged."""
    paths = list(paths)
    reports = []
    for i, path in enumerate(paths):

        def scaled(done: int, total: int, i: int = i) -> None:
            if progress is not None:
                progress(i * 1000 + (1000 * done) // max(total, 1), 1000 * len(paths))

        reports.append(
            merge_copy(project, path, dry_run=dry_run, progress=scaled, cancel=cancel, by=by)
        )
    return reports


def _merge(
    s: Session, recorder: EventRecorder, master_label: str, copy: _Copy, dry_run: bool, steps
) -> MergeReport:
    base, base_time = _check_identity(s, master_label, copy)  # again, inside the transaction
    copy_id = copy.meta.get("copy_id", "")
    report = MergeReport(
        copy_file=copy.file,
        copy_id=copy_id,
        copy_for=copy.meta.get("copy_for", ""),
        base_audit_id=base,
        dry_run=dry_run,
        unchanged=copy.n_same,
    )
    at_base, changed_after, records = _history(s, base)
    last_merged = _last_agreed(records, copy_id)
    on_record = {
        (c["key"], c["copy_hash"], c["master_hash"])
        for rec in records
        if rec["action"] == "merge"
        for c in rec.get("conflicts", [])
    }
    agreed: dict[str, str] = {}  # answers the copy and the master came to alike, since
    master_rows = _rows(s, set(copy.rows))
    master_digests = {_key_text(*k): _digest(r.state) for k, r in master_rows.items()}
    open_before = _open_of_copy(records, master_digests, copy_id)
    master_people = dict(s.execute(select(Annotator.name, Annotator.id)).all())
    master_signatures = _unit_signature(s, {r.unit_id for r in copy.rows.values()}, copy.blinded)
    master_responses = _response_ids(s)
    # answers whose time on task the merge leaves alone: skipped, or added or updated (the
    # copy's answer, with the longer time, is saved whole)
    not_timed: set[tuple[int, str, bool]] = set()

    def base_state(m: _Row | None) -> dict | None:
        if m is None:
            return None
        if m.answer_id in at_base:
            return at_base[m.answer_id]
        if m.answer_id not in changed_after and base_time and m.updated_at <= base_time:
            return m.state  # no history recorded, and untouched since the copy was made
        return None

    todo: list[tuple[str, _Row, _Row | None]] = []
    for key, c in copy.rows.items():
        steps.step()
        text_key = _key_text(*key)
        m = master_rows.get(key)
        if c.annotator not in master_people:
            report.skipped.append(
                f"{c.annotator}'s answer to unit {c.unit_id}: there is no annotator "
                f"{c.annotator!r} in the master"
            )
            not_timed.add(key)
            continue
        if copy.signatures.get(c.unit_id) != master_signatures.get(c.unit_id):
            report.skipped.append(
                f"{c.annotator}'s answer to unit {c.unit_id}: that unit is not the same in the "
                "master (was it made in the copy?)"
            )
            not_timed.add(key)
            continue
        base_response = c.state["payload"].get("base_response_id")
        known = (
            base_response in master_responses
            if copy.blinded
            else copy.responses.get(base_response) == master_responses.get(base_response)
        )
        if base_response is not None and not known:
            report.skipped.append(
                f"{c.annotator}'s answer to unit {c.unit_id}: the draft it edits is not in "
                "the master"
            )
            not_timed.add(key)
            continue
        state = dict(c.state)
        if c.suggestion is not None:
            state["suggestion_id"] = _master_suggestion(s, c.suggestion)
        c_digest = _digest(state)
        b = base_state(m)
        # what the copy's answer is measured from: what the master last took in or settled
        # of it, else its state when the copy was made (the same text back is a change too)
        reference = last_merged.get(text_key) or _digest(b)
        # (a settled conflict recorded the copy's answer with the copy's own suggestion id)
        unchanged_in_copy = reference in (c_digest, _digest(c.state))
        m_digest = master_digests.get(text_key)
        if m is not None and m_digest == c_digest:
            report.unchanged += 1
            if copy_id and not unchanged_in_copy:
                agreed[text_key] = c_digest  # the copy's next change starts from here
            continue
        if m is not None and unchanged_in_copy:
            report.unchanged += 1  # not changed in the copy since, or merged already
            continue
        if m is None:
            todo.append(("add", c, None))
            continue
        if m_digest == reference:
            # time on task only grows, in either file: the longer one is the answer's
            longer = max(c.active_seconds, m.active_seconds)
            todo.append(("update", replace(c, active_seconds=longer), m))
            continue
        conflict = _conflict(s, c, m, b, copy)
        report.conflicts.append(conflict)
        if (conflict.key, conflict.copy_hash, conflict.master_hash) not in on_record:
            report.new_conflicts += 1
    merged: dict[str, str] = {}
    for action, c, _m in todo:
        text_key = _key_text(*c.key)
        (report.added if action == "add" else report.updated).append(text_key)
        if dry_run:
            steps.step()
            continue
        error = _apply(s, recorder, c, master_people[c.annotator], copy)
        if error:
            (report.added if action == "add" else report.updated).remove(text_key)
            report.skipped.append(f"{c.annotator}'s answer to unit {c.unit_id}: {error}")
        else:
            merged[text_key] = _digest(_normal(_state_of(s, c.unit_id, c)))
        steps.step()
    steps.check()
    not_timed |= {c.key for _action, c, _m in todo}
    longer_times = _longer_times(s, copy, not_timed)
    report.timed = sorted(longer_times)
    if not dry_run:
        for answer_id, seconds in longer_times.values():
            s.execute(update(Answer).where(Answer.id == answer_id).values(active_seconds=seconds))
    report.settled = len(open_before - {(c.key, c.copy_hash) for c in report.conflicts})
    # a copy's first merge is recorded even when it brought nothing: it came back
    first_return = bool(copy_id) and not any(
        r["action"] == "merge" and r.get("copy_id") == copy_id for r in records
    )
    if not dry_run and (report.brought_anything or agreed or first_return):
        recorder.record(
            s,
            "merge",
            {
                "copy_id": copy_id,
                "copy_file": copy.file,
                "copy_for": report.copy_for,
                "copy_head": copy.head,
                "base_audit_id": base,
                "added": len(report.added),
                "updated": len(report.updated),
                "unchanged": report.unchanged,
                "skipped": report.skipped,
                "merged": {**agreed, **merged},
                "time_on_task": {key: seconds for key, (_, seconds) in longer_times.items()},
                "conflicts": [
                    {
                        **_recorded_fields(c),
                        "key": c.key,
                        "copy_hash": c.copy_hash,
                        "master_hash": c.master_hash,
                    }
                    for c in report.conflicts
                ],
            },
        )
        report.recorded = True
    _number_conflicts(report.conflicts, records, new_ones_too=report.recorded)
    return report


def _recorded_fields(conflict: Conflict) -> dict[str, Any]:
    """A conflict as a merge records it: its number is the log's order, not stored."""
    fields = conflict.to_dict()
    del fields["number"]
    return fields


def _number_conflicts(conflicts: list[Conflict], records: list[dict], new_ones_too: bool) -> None:
    """Give the merge's conflicts their numbers: those on record already keep theirs; new ones
    (``new_ones_too``: now recorded) take the next, as the log will number them."""
    numbers = _conflict_numbers(records)
    for conflict in conflicts:
        if new_ones_too or conflict.identity in numbers:
            conflict.number = numbers.setdefault(conflict.identity, len(numbers) + 1)


def _longer_times(
    s: Session, copy: _Copy, not_timed: set[tuple[int, str, bool]]
) -> dict[str, tuple[int, float]]:
    """Answer key -> (the master's answer id, the copy's time on task) for the answers of
    both files, but ``not_timed``, whose time on task is longer in the copy: the same answer
    in both, or one the copy did not change, or a conflict (the master keeps its answer, and
    the time spent on it in the copy was spent all the same). A clinician who opens a
    submitted answer again in her copy and works on without changing it adds time with no
    audit entry; the longer time is kept because time on task only grows (the time at the
    base is not kept, so it is not summed)."""
    names = dict(s.execute(select(Annotator.id, Annotator.name)).all())
    out = {}
    for key, (answer_id, seconds) in _answer_times(s, names).items():
        theirs = copy.times.get(key)
        if key not in not_timed and theirs is not None and theirs > seconds:
            out[_key_text(*key)] = (answer_id, theirs)
    return out


def _answer_times(
    s: Session, names: dict[int, str]
) -> dict[tuple[int, str, bool], tuple[int, float]]:
    """Every answer's key (unit, annotator's name, gold) -> (its id, its time on task), in one
    query (``names``: annotator id -> name)."""
    columns = (Answer.id, Answer.unit_id, Answer.annotator_id, Answer.is_gold)
    return {
        (unit_id, names[annotator_id], bool(is_gold)): (answer_id, seconds)
        for answer_id, unit_id, annotator_id, is_gold, seconds in s.execute(
            select(*columns, Answer.active_seconds)
        )
    }


def _last_agreed(records: list[dict], copy_id: str) -> dict[str, str]:
    """Answer key -> the digest of the copy's answer the master last took in or settled: the
    state the copy's next change is measured from (merges of this copy: answers added,
    updated or found alike; conflicts of it the PI resolved, either way). Empty for a plain
    file copy (no id): its changes are measured from the copy's base."""
    agreed: dict[str, str] = {}
    if not copy_id:
        return agreed
    for rec in records:
        if rec.get("copy_id") != copy_id:
            continue
        if rec["action"] == "merge":
            agreed.update(rec.get("merged", {}))
        elif rec["action"] == "resolve":
            agreed[rec["key"]] = rec["copy_hash"]
    return agreed


def _open_of_copy(
    records: list[dict], current: dict[str, str], copy_id: str
) -> set[tuple[str, str]]:
    """(answer key, copy's digest) of the open conflicts an earlier merge of this copy found,
    given the master's answers now (``current``: key -> digest); none for a plain file copy.
    A merge that no longer finds one is recorded, to settle it."""
    if not copy_id:
        return set()
    return {
        (c["key"], c["copy_hash"])
        for c in _open_conflict_records(records, current)
        if c.get("copy_id") == copy_id
    }


def _conflict(s: Session, c: _Row, m: _Row, b: dict | None, copy: _Copy) -> Conflict:
    unit = s.get(Unit, c.unit_id)
    return Conflict(
        unit_id=c.unit_id,
        unit_set=s.get(UnitSet, unit.unit_set_id).name,
        position=unit.position,
        kind=c.kind,
        annotator=c.annotator,
        is_gold=c.is_gold,
        master=m.state,
        copy=c.state,
        base=b,
        master_updated_at=m.updated_at,
        copy_updated_at=c.updated_at,
        copy_file=copy.file,
        copy_id=copy.meta.get("copy_id", ""),
        copy_suggestion=c.suggestion,
    )


def _state_of(s: Session, unit_id: int, c: _Row) -> dict:
    answer = s.scalar(
        select(Answer).where(
            Answer.unit_id == unit_id,
            Answer.annotator_id
            == select(Annotator.id).where(Annotator.name == c.annotator).scalar_subquery(),
            Answer.is_gold.is_(c.is_gold),
        )
    )
    return EventRecorder._audit_state(EventRecorder._answer_view(s, answer))


def _save_state(
    s: Session,
    recorder: StudyService,
    unit_id: int,
    annotator_id: int,
    is_gold: bool,
    state: dict[str, Any],
    suggestion: dict[str, Any] | None,
    *,
    active_seconds: float | None = None,
) -> None:
    suggestion_id = _ensure_suggestion(s, suggestion) if suggestion else None
    recorder.save_answer(
        unit_id,
        state["payload"],
        status=state["status"],
        active_seconds=active_seconds,
        flagged=state["flagged"],
        flag_note=state["flag_note"],
        comment=state["comment"],
        suggestion_id=suggestion_id,
        suggestion_use=state["suggestion_use"] if suggestion_id else None,
        annotator_id=annotator_id,
        gold=is_gold,
        session=s,
    )


def _apply(
    s: Session, recorder: EventRecorder, c: _Row, annotator_id: int, copy: _Copy
) -> str | None:
    """Save the copy's answer in the master (inside a savepoint); the reason on failure."""
    try:
        with s.begin_nested():
            if not c.is_gold:
                _work_assignment(s, c, annotator_id, copy)
            existed = (
                s.scalar(
                    select(Answer.id).where(
                        Answer.unit_id == c.unit_id,
                        Answer.annotator_id == annotator_id,
                        Answer.is_gold.is_(c.is_gold),
                    )
                )
                is not None
            )
            _save_state(
                s,
                recorder,
                c.unit_id,
                annotator_id,
                c.is_gold,
                c.state,
                c.suggestion,
                active_seconds=c.active_seconds,
            )
            answer = s.scalar(
                select(Answer).where(
                    Answer.unit_id == c.unit_id,
                    Answer.annotator_id == annotator_id,
                    Answer.is_gold.is_(c.is_gold),
                )
            )
            answer.updated_at = c.updated_at  # when the clinician gave it, not the merge time
            if not existed:
                answer.created_at = c.created_at
            s.flush()
    except (StoreError, PayloadError, AccessError) as exc:
        return str(exc)
    return None


def _work_assignment(s: Session, c: _Row, annotator_id: int, copy: _Copy) -> None:
    """The assignment a merged work answer needs: added as the copy had it, or a master row
    that only held the PI's gold made work (as :meth:`StudyService.assign` does)."""
    row = s.get(Assignment, (c.unit_id, annotator_id))
    if row is not None and not row.is_gold_holder:
        return
    position, presentation = copy.presentations.get((c.unit_id, c.annotator), (0, "{}"))
    if row is None:
        row = Assignment(unit_id=c.unit_id, annotator_id=annotator_id)
        s.add(row)
    row.is_gold_holder = False
    row.position, row.presentation_json = position, presentation
    s.flush()


# --- conflicts ---------------------------------------------------------------------------------


def open_conflicts(project: Project) -> list[Conflict]:
    """Conflicts recorded by merges that the PI has not resolved yet (a conflict whose master
    answer has changed since, or now equals the copy's, is settled)."""
    with project.read() as s:
        _check_sees_every_merge(s)
        records = _merge_records(s)
        named = _conflicted_answers(records)
        if not named:  # no merge found a conflict: none can be open, no answer need be read
            return []
        current = {_key_text(*k): _digest(r.state) for k, r in _rows(s, named).items()}
    numbers = _conflict_numbers(records)
    out = []
    for c in _open_conflict_records(records, current):
        fields = {k: v for k, v in c.items() if k not in ("key", "copy_hash", "master_hash")}
        out.append(Conflict(**fields, number=numbers[_identity(c)]))
    return sorted(out, key=lambda c: (c.unit_set, c.position, c.annotator, c.copy_file))


def _check_sees_every_merge(session: Session) -> None:
    """On a server, refuse a clinician's login: row-level security shows it none of the merges'
    records, so its list would say no conflict is open while some are (about her answers too)."""
    require_whole_view(
        session,
        "list or resolve the conflicts merges left",
        "a clinician's login sees none of the merges' records, so its list would be empty",
    )


def _merge_records(s: Session) -> list[dict]:
    """The merge and resolve records of the audit log, oldest first (those of ``_history``,
    without reading the answers' entries)."""
    return [
        {"action": action, **json.loads(new_json)}
        for action, new_json in s.execute(
            select(AuditEntry.action, AuditEntry.new_json)
            .where(AuditEntry.answer_id.is_(None), AuditEntry.action.in_(("merge", "resolve")))
            .order_by(AuditEntry.id)
        )
        if new_json
    ]


def _identity(recorded: dict) -> tuple[str, str, str]:
    """A recorded conflict's :attr:`Conflict.identity`."""
    return (recorded["key"], recorded["copy_hash"], recorded["master_hash"])


def _conflict_numbers(records: list[dict]) -> dict[tuple[str, str, str], int]:
    """Every conflict ever recorded (by its identity) -> its number: 1, 2, ... in the order
    merges first recorded them. The log only grows, so a conflict's number never changes
    while others are resolved (a number from the list as it then was resolved another one)."""
    numbers: dict[tuple[str, str, str], int] = {}
    for rec in records:
        if rec["action"] == "merge":
            for c in rec.get("conflicts", []):
                numbers.setdefault(_identity(c), len(numbers) + 1)
    return numbers


def _conflicted_answers(records: list[dict]) -> set[tuple[int, str, bool]]:
    """The answers (unit, annotator, gold) that some merge record lists a conflict of: the
    only ones whose state can decide whether a conflict is still open."""
    return {
        (c["unit_id"], c["annotator"], bool(c["is_gold"]))
        for rec in records
        if rec["action"] == "merge"
        for c in rec.get("conflicts", [])
    }


def _open_conflict_records(records: list[dict], current: dict[str, str]) -> list[dict]:
    """The recorded conflicts still open, given the master's answers now (key -> digest).

    A merge of a copy lists every conflict that copy has then, so a later merge of the same
    copy (same ``copy_id``) replaces the conflicts of the earlier ones: the clinician may have
    changed the answer again in the copy, or made it the master's. A conflict is settled when
    the PI resolved it, the master's answer changed since, or now equals the copy's. Of
    conflicts offering the same version of the same answer, the latest is kept."""
    resolved = {
        (r["key"], r["copy_hash"], r["master_hash"]) for r in records if r["action"] == "resolve"
    }
    # copy_id -> (answer key, copy's digest) -> (the merge's place in the log, conflict)
    by_copy: dict[str, dict[tuple[str, str], tuple[int, dict]]] = {}
    for i, rec in enumerate(records):
        if rec["action"] != "merge":
            continue
        copy_id = rec.get("copy_id") or ""
        listed = {(c["key"], c["copy_hash"]): (i, c) for c in rec.get("conflicts", [])}
        if copy_id:
            by_copy[copy_id] = listed
        else:  # a plain file copy: no id tells its merges apart, each adds its conflicts
            by_copy.setdefault("", {}).update(listed)
    latest: dict[tuple[str, str], tuple[int, dict]] = {}
    for listed in by_copy.values():
        for pair, (i, c) in listed.items():
            if pair not in latest or latest[pair][0] < i:
                latest[pair] = (i, c)
    return [
        c
        for _, c in sorted(latest.values(), key=lambda found: found[0])
        if (c["key"], c["copy_hash"], c["master_hash"]) not in resolved
        and current.get(c["key"]) == c["master_hash"] != c["copy_hash"]
    ]


def resolve_conflict(
    project: Project, conflict: Conflict, take: str, by: int | None = None
) -> None:
    """Settle a conflict: keep the master's answer (``take="master"``) or replace it by the
    copy's (``"copy"``), recorded in the audit log (action ``resolve``), naming ``by`` (the
    PI in the app; None: the system)."""
    if take not in TAKE:
        raise StoreError(f"take must be 'master' or 'copy', not {take!r}")
    recorder = EventRecorder(project, by)
    with recorder._write() as s:
        _check_sees_every_merge(s)
        person = s.scalar(select(Annotator.id).where(Annotator.name == conflict.annotator))
        if person is None:
            raise StoreError(f"there is no annotator called {conflict.annotator!r}")
        now = _rows(s).get((conflict.unit_id, conflict.annotator, conflict.is_gold))
        if now is None or _digest(now.state) != conflict.master_hash:
            raise StoreError(
                "the master's answer has changed since this conflict was found; look again"
            )
        if take == "copy":
            _save_state(
                s,
                recorder,
                conflict.unit_id,
                person,
                conflict.is_gold,
                conflict.copy,
                conflict.copy_suggestion,
            )
        recorder.record(
            s,
            "resolve",
            {
                "key": conflict.key,
                "copy_hash": conflict.copy_hash,
                "master_hash": conflict.master_hash,
                "copy_file": conflict.copy_file,
                "copy_id": conflict.copy_id,
                "took": take,
            },
        )


def write_conflicts(conflicts: Iterable[Conflict], path: str | os.PathLike) -> Path:
    """The conflicts for the PI to read: ``.json`` (every field) or ``.csv`` (one row each,
    both versions as JSON text)."""
    path = Path(path)
    conflicts = list(conflicts)
    if path.suffix.lower() == ".json":
        text = json.dumps([c.to_dict() for c in conflicts], indent=2, ensure_ascii=False)
        return write_through_temporary(path, lambda p: p.write_text(text + "\n", "utf-8"))
    columns = (
        "number",  # what ``conflicts --resolve N`` takes
        "unit_set",
        "position",
        "unit_id",
        "kind",
        "annotator",
        "is_gold",
        "copy_file",
        "master_updated_at",
        "copy_updated_at",
        "master",
        "copy",
        "base",
    )

    def write(target: Path) -> None:
        with target.open("w", encoding="utf-8-sig", newline="") as fh:
            writer = safe_writer(fh)  # for a spreadsheet: no text runs as a formula
            writer.writerow(columns)
            for c in conflicts:
                row = c.to_dict()
                writer.writerow(
                    safe_row(
                        ""
                        if k == "number" and row[k] is None  # (a dry run's new conflict)
                        else json.dumps(row[k], ensure_ascii=False, sort_keys=True)
                        if isinstance(row[k], dict) or row[k] is None
                        else row[k]
                        for k in columns
                    )
                )

    return write_through_temporary(path, write)


__all__ = [
    "COPY_KEYS",
    "Conflict",
    "CopyInfo",
    "MergeRefused",
    "MergeReport",
    "make_copy",
    "merge_copies",
    "merge_copy",
    "open_conflicts",
    "open_read_only_upgraded",
    "resolve_conflict",
    "write_conflicts",
]
