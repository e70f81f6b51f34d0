"""The study's frames kept in memory, re-reading only the answers saved since the last refresh.

:func:`portalreview.store.frames.read_frames` reads everything: seconds on a 10,000-case study.
A :class:`LiveFrames` reads everything once, then, at each :meth:`LiveFrames.refresh`, re-reads
only the answers that changed and splices them into the frames it holds. What it returns always
equals a fresh ``read_frames`` of the project: the same columns, column types, values and row
order (the tests check it after every kind of write).

**The rule.** Each refresh notes, in the read transaction it reads in, a *watermark*: the last
audit-log entry (id and hash); a *fingerprint* of the tables the frames read besides the
answers; the assignments' count and largest rowid; and the answers' time on task summed per
block of 256 answer ids (``BLOCK_BITS``), with each block's count of answers
(:func:`block_counts`). The next refresh reads **in full** when

* the fingerprint changed: the count and largest rowid of ``units``, ``unit_sets``, ``cases``,
  ``case_tags``, ``responses``, ``sentences`` and ``annotators``; the annotators' names and
  model flags and the unit sets' names (short tables); the cases' reference urgency levels
  (their count and id-weighted sum); every ``project_meta`` entry (the catalogs, the project's
  id); the schema's version numbers (``PRAGMA schema_version`` and ``user_version``; on a
  server study, the count of the study's table columns and its ``schema_version`` entry);
* the assignments changed otherwise than by new rows;
* the audit log was not only added to (the entry at the old watermark is gone or another: a
  file restored from a backup, another copy of the project);
* a new audit entry names no answer and is not one of ``SAFE_ACTIONS``;
* more than ``FULL_READ_SHARE`` of the answers listed are to be re-read.

Otherwise it re-reads exactly the answers that the new audit entries name, and those whose
time on task changed (found by comparing the blocks' sums, then the changed blocks' answers
one by one), and nothing else. A refresh that finds nothing to change returns the same frames.

**The write paths, and how each is seen.**

* Every change of an answer's status, content, flag, comment or suggestion, whoever makes it,
  goes through ``StudyService._save`` and writes an audit entry naming the answer: the editor's
  saves and submits, gold answers, imported answers, merged answers (``merge.py`` saves them
  with ``save_answer``), the settling of a conflict with the copy's version, model answers.
* A save that changes nothing but the time on task writes no entry (time is not audited): the
  block sums find it. It rewrites the answer's detail rows unchanged, which needs nothing.
* A new assignment is not in the frames: an assignment shows only as the presentation of its
  answer, and an answer to it writes its own entry (the PI's first gold answer to a unit adds
  one). So new assignments are allowed; fewer, or replaced, are read in full.
* New cases, responses (with their sentences), tags, units, unit sets and annotators (the
  service, study set-up, importers, model drafts and model annotators): the fingerprint. A
  catalog extension: its ``catalogs`` entry, and ``project_meta``.
* Rows the frames read updated in place: an import that sets a case's reference level or an
  assignment's presentation writes an ``import`` entry (in full), and the levels are in the
  fingerprint as well; a PI's gold holder made work (``StudyService.assign``) rewrites the
  gold answer's presentation and writes a ``presentation`` entry (in full). No code updates a
  unit, a sentence, a response or an annotator in a project file (an offline copy is blinded
  in its own file before anyone opens it); the annotators and unit sets are in the
  fingerprint all the same.
* ``SAFE_ACTIONS`` change nothing the frames read by themselves: a ``merge`` or ``resolve``
  entry sums up answers saved with their own entries (and assignments a merge adds are new
  rows); ``copy`` records an offline copy made; ``template`` a prompt template saved.
* Any other entry without an answer (``catalogs``, ``import``, ``setup``, ``assign``, a model
  ``draft``, and any action added later) is read in full.

Not seen: writes by other programs (another SQLite tool) that change rows in place without
changing a count, or delete and re-insert an assignment at the same rowid; two time-on-task
changes without an audit entry in one block that cancel out to the last bit of its sum.

**Row order and column types.** ``read_frames`` orders every frame (see ``frames.py``), and a
splice puts the re-read rows where that order puts them. A column's type in a detail frame
follows every stored row, the left-out drafts' too (a NULL in a draft's row makes the column
nullable): the state keeps, per detail table, the number of stored rows and of NULLs per
column, and the same per answer not listed, so that a splice gives each column the type
``read_frames`` would, without reading the table again.

A refresh runs in one read transaction (one consistent state of the project) and may run on a
worker thread; one :class:`LiveFrames` serves one thread at a time (two threads' calls wait
for each other). Frames a refresh did not change are the same objects as before: never change
them in place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

from portalreview.store.frames import (
    DETAIL_TABLES,
    DETAILS,
    StudyFrames,
    column_kind,
    column_types,
    conformed,
    only_listed_answers,
    paused_gc,
    read_all,
    read_answers,
    read_detail,
)
from portalreview.store.models import KINDS
from portalreview.store.project import Project

#: Audit actions without an answer that change nothing the frames read by themselves.
SAFE_ACTIONS = frozenset({"merge", "resolve", "copy", "template"})
#: Re-reading more than this share of the stored answers: read everything instead.
FULL_READ_SHARE = 0.25
#: Answers per block of summed time on task: ids ``b << BLOCK_BITS`` up to the next block.
BLOCK_BITS = 8
#: More changed blocks than this: compare every answer's time at once.
MAX_BLOCKS_ONE_BY_ONE = 512
#: A study with fewer answers than this is re-read answer by answer all the same.
_FEW = 1000

_FINGERPRINTED = (
    "units",
    "unit_sets",
    "cases",
    "case_tags",
    "responses",
    "sentences",
    "annotators",
)
_COUNTS_SQL = "SELECT " + ", ".join(
    f"(SELECT count(*) FROM {t}), (SELECT max(rowid) FROM {t})" for t in _FINGERPRINTED
)
_ASSIGNMENTS_SQL = "SELECT (SELECT count(*) FROM assignments), (SELECT max(rowid) FROM assignments)"
_SMALL_TABLES_SQL = (
    "SELECT count(urgency_level), sum(urgency_level * id) FROM cases",
    "SELECT id, name, is_model FROM annotators ORDER BY id",
    "SELECT id, name FROM unit_sets ORDER BY id",
    "SELECT key, value FROM project_meta ORDER BY key",
)
# What says the schema changed: SQLite counts every change of it; PostgreSQL has no such
# counter, so its tables' columns are counted (schema_version is in project_meta there).
_SCHEMA_SQL = {
    "sqlite": ("PRAGMA schema_version", "PRAGMA user_version"),
    "postgresql": (
        "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped",
    ),
}
_PER_BLOCK_SQL = """
WITH RECURSIVE block(b) AS (
    SELECT 0
    UNION ALL
    SELECT b + 1 FROM block WHERE b < (SELECT coalesce(max(id), 0) FROM answers) >> {bits}
)
SELECT (SELECT {what} FROM answers WHERE id >= b << {bits} AND id < (b + 1) << {bits})
FROM block ORDER BY b
"""
_BLOCK_SUMS_SQL = _PER_BLOCK_SQL.replace("{what}", "coalesce(sum(active_seconds{order}), 0.0)")
# Each block's sum in id order, so that it does not move when nothing changed: SQLite reads a
# range of ids in that order; PostgreSQL in the rows' physical order, which an update of any
# of them changes (and with it the last bits of a floating-point sum).
_BLOCK_SUMS = {
    "sqlite": _BLOCK_SUMS_SQL.format(bits=BLOCK_BITS, order=""),
    "postgresql": _BLOCK_SUMS_SQL.format(bits=BLOCK_BITS, order=" ORDER BY id"),
}
# The answers per block: counted block by block only when the ids have gaps; without gaps
# (the usual case: answers are added, and deleted only in an offline copy being blinded)
# the blocks' counts follow from the ids' range, and the whole table's count(*) is cheap
# where counting each block's ids costs as much again as summing its times.
_BLOCK_COUNTS_SQL = _PER_BLOCK_SQL.format(what="count(*)", bits=BLOCK_BITS)
# Three subqueries: each is then answered from the b-tree alone (together, they scan it all).
_ID_RANGE_SQL = (
    "SELECT (SELECT count(*) FROM answers), (SELECT min(id) FROM answers), "
    "(SELECT max(id) FROM answers)"
)


@dataclass(frozen=True)
class FrameChange:
    """What one :meth:`LiveFrames.refresh` found."""

    #: The current frames: a new StudyFrames after a refresh that changed anything (frames it
    #: did not change are the same DataFrame objects as before), the same object otherwise.
    frames: StudyFrames
    #: True: read from scratch (the first refresh, or a change that is not only answers).
    full: bool
    #: Answer kinds whose answers or detail rows changed in the frames; every kind when full.
    changed_kinds: frozenset[str]
    #: Answers re-read incrementally (0 when full); may count drafts that are left out.
    n_answers_reread: int
    #: Seconds the refresh took.
    seconds: float
    #: What ``refresh(..., first=...)`` returned, read in the same snapshot as the frames.
    first: Any = None
    #: The answers re-read incrementally (empty when full): every answer whose rows in any
    #: frame may differ from the last refresh's; an answer not listed has the same rows.
    reread: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Mark:
    """The watermark of one refresh (see the module docstring)."""

    audit_id: int
    audit_hash: str | None
    fingerprint: tuple
    assignments: tuple[int, int]  # count, largest rowid
    time_sums: np.ndarray = field(compare=False)
    block_counts: np.ndarray = field(compare=False)  # answers per block, drafts too


@dataclass
class _State:
    """The frames and what a splice needs to keep their column types right.

    ``stored``: per detail table, [rows, NULLs of each typed column] over every stored row;
    ``hidden``: per detail table, the same per answer for stored answers not listed."""

    frames: StudyFrames
    mark: Mark
    stored: dict[str, np.ndarray]
    hidden: dict[str, dict[int, np.ndarray]]


class LiveFrames:
    """A study's frames, kept up to date by :meth:`refresh` (see the module docstring)."""

    def __init__(self, include_drafts: bool = False) -> None:
        self.include_drafts = include_drafts
        self._state: _State | None = None
        self._lock = threading.Lock()

    @property
    def frames(self) -> StudyFrames | None:
        """The frames of the last refresh (None before the first)."""
        state = self._state
        return None if state is None else state.frames

    def reset(self) -> None:
        """Forget everything: the next refresh reads in full."""
        with self._lock:
            self._state = None

    def refresh(
        self, project: Project, first: Callable[[Session, Mark], Any] | None = None
    ) -> FrameChange:
        """The frames of ``project`` now, re-reading what changed since the last refresh.
        ``first(session, mark)``, when given, runs first in the same read transaction (one
        snapshot with the frames), with the refresh's :class:`Mark`; the change carries what
        it returned."""
        started = time.perf_counter()
        before = None
        with self._lock:
            with paused_gc(), project.read() as s:
                mark = watermark(s)
                if first is not None:
                    before = first(s, mark)
                ids = self._changed_answers(s, mark)
                if ids is None:
                    state, kinds = _full_state(s, self.include_drafts, mark), frozenset(KINDS)
                else:
                    splice = _Splice(s, self._state, ids, self.include_drafts)
                    state, kinds = splice.run(mark), frozenset(splice.changed_kinds)
            self._state = state
        reread = frozenset() if ids is None else frozenset(ids)
        seconds = time.perf_counter() - started
        return FrameChange(state.frames, ids is None, kinds, len(reread), seconds, before, reread)

    def _changed_answers(self, s: Session, mark: Mark) -> set[int] | None:
        """The answers to re-read since the last refresh; None: read everything."""
        state = self._state
        if state is None:
            return None
        last = state.mark
        if mark.fingerprint != last.fingerprint or mark.audit_id < last.audit_id:
            return None
        if not _only_assignments_added(s, last.assignments, mark.assignments):
            return None
        if last.audit_id and audit_hash(s, last.audit_id) != last.audit_hash:
            return None
        ids: set[int] = set()
        if mark.audit_id > last.audit_id:
            query = "SELECT action, answer_id FROM audit_log WHERE id > ? ORDER BY id"
            for action, answer_id in sql_rows(s, query, (last.audit_id,)):
                if answer_id is not None:
                    ids.add(answer_id)
                elif action not in SAFE_ACTIONS:
                    return None
        timed = _time_changes(
            s, state.frames.answers, last.time_sums, mark.time_sums, self.include_drafts
        )
        if timed is None:
            return None
        ids |= timed
        too_many = len(ids) > FULL_READ_SHARE * max(len(state.frames.answers), _FEW)
        return None if too_many else ids


# --- the watermark --------------------------------------------------------------------------------


def sql_rows(s: Session, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of ``sql`` in the session's transaction, through the driver's own cursor.
    Parameters are written ``?`` (SQLite's style) and given to psycopg as ``%s``."""
    if s.get_bind().dialect.name == "postgresql":
        sql = sql.replace("?", "%s")
    cursor = s.connection().connection.dbapi_connection.cursor()
    try:
        return cursor.execute(sql, params).fetchall()
    finally:
        cursor.close()


def watermark(s: Session) -> Mark:
    """Where the study stands, as a refresh compares it (see the module docstring)."""
    audit_id = last_audit_id(s)
    assignments = sql_rows(s, _ASSIGNMENTS_SQL)[0]
    blocks = sql_rows(s, _BLOCK_SUMS[s.get_bind().dialect.name])
    sums = np.array([row[0] for row in blocks], dtype=float)
    counts = block_counts(s, len(sums))
    return Mark(audit_id, audit_hash(s, audit_id), fingerprint(s), assignments, sums, counts)


def block_counts(s: Session, n_blocks: int) -> np.ndarray:
    """The answers (drafts too) of each of the ``n_blocks`` blocks of ``BLOCK_BITS`` ids:
    from the ids' range when they have no gap (``count(*)`` is ``max - min + 1``), else
    counted block by block."""
    n, low, high = sql_rows(s, _ID_RANGE_SQL)[0]
    if not n:
        return np.zeros(n_blocks, dtype=np.int64)
    if high - low + 1 != n:
        return np.array([row[0] for row in sql_rows(s, _BLOCK_COUNTS_SQL)], dtype=np.int64)
    starts = np.arange(n_blocks, dtype=np.int64) << BLOCK_BITS
    covered = np.minimum(starts + (1 << BLOCK_BITS), high + 1) - np.maximum(starts, low)
    return np.clip(covered, 0, None)


def last_audit_id(s: Session) -> int:
    """The newest audit entry's id (0: none)."""
    return sql_rows(s, "SELECT coalesce(max(id), 0) FROM audit_log")[0][0]


def fingerprint(s: Session) -> tuple:
    """What changes when anything the frames read besides the answers changes (the module
    docstring lists it): counts and largest rowids, the short tables, ``project_meta``, the
    schema's version numbers."""
    return (
        sql_rows(s, _COUNTS_SQL)[0],
        *(tuple(sql_rows(s, sql)) for sql in _SMALL_TABLES_SQL),
        *(tuple(sql_rows(s, sql)) for sql in _SCHEMA_SQL[s.get_bind().dialect.name]),
    )


def assignment_counts(s: Session) -> tuple[int, int | None]:
    """The assignments' count and largest rowid."""
    return tuple(sql_rows(s, _ASSIGNMENTS_SQL)[0])


def _only_assignments_added(s: Session, last: tuple[int, int], now: tuple[int, int]) -> bool:
    """Whether the assignments changed only by new rows (after the last largest rowid).

    The frames hold an assignment only as the presentation of its answer: a new one matters
    through its answer, whose audit entry has it re-read (a PI's first gold answer to a
    unit adds one). Any other change (fewer rows, or rows replaced) is read in full."""
    (count, largest), (count_now, largest_now) = last, now
    if (count_now, largest_now) == (count, largest):
        return True
    if largest_now is None or (largest is not None and largest_now < largest):
        return False
    added = sql_rows(s, "SELECT count(*) FROM assignments WHERE rowid > ?", (largest or 0,))[0][0]
    return count_now == count + added


def audit_hash(s: Session, audit_id: int) -> str | None:
    """The hash of the audit entry ``audit_id`` (None: no such entry)."""
    rows = sql_rows(s, "SELECT hash FROM audit_log WHERE id = ?", (audit_id,))
    return rows[0][0] if rows else None


def _time_changes(
    s: Session, answers: pd.DataFrame, old: np.ndarray, new: np.ndarray, include_drafts: bool
) -> set[int] | None:
    """Listed answers whose time on task (or presence) differs from the frames', in the
    blocks whose sums changed; None when the answers' ids went down (read everything)."""
    if len(new) < len(old):
        return None
    changed = np.flatnonzero(old != new[: len(old)]).tolist() + list(range(len(old), len(new)))
    if not changed:
        return set()
    submitted = "" if include_drafts else " AND status = 'submitted'"
    keys = answers.answer_id.to_numpy().astype(np.int64)
    seconds = answers.active_seconds.to_numpy().astype(float)
    if len(changed) > MAX_BLOCKS_ONE_BY_ONE:
        query = f"SELECT id, active_seconds FROM answers WHERE true{submitted} ORDER BY id"
        rows = sql_rows(s, query)
        return _differing(rows, keys, seconds)
    found: set[int] = set()
    for block in changed:
        low, high = block << BLOCK_BITS, (block + 1) << BLOCK_BITS
        rows = sql_rows(
            s,
            f"SELECT id, active_seconds FROM answers WHERE id >= ? AND id < ?{submitted} "
            "ORDER BY id",
            (low, high),
        )
        start, stop = np.searchsorted(keys, [low, high])
        found |= _differing(rows, keys[start:stop], seconds[start:stop])
    return found


def _differing(rows: list[tuple], ids: np.ndarray, seconds: np.ndarray) -> set[int]:
    """Ids listed on one side only, or with different times, between the stored ``rows``
    (id, seconds) and the frames' ``ids`` / ``seconds``."""
    stored_ids = np.array([r[0] for r in rows], dtype=np.int64)
    stored_seconds = np.array([r[1] for r in rows], dtype=float)
    both, i, j = np.intersect1d(stored_ids, ids, assume_unique=True, return_indices=True)
    other = np.setxor1d(stored_ids, ids, assume_unique=True)
    return set(both[stored_seconds[i] != seconds[j]].tolist()) | set(other.tolist())


# --- reading in full ------------------------------------------------------------------------------

_TYPES = {name: column_types(name) for name in ("answers", *DETAIL_TABLES)}
_TYPED = {name: [c for c, t in types.items() if t is not None] for name, types in _TYPES.items()}


def _counts(frame: pd.DataFrame, name: str) -> np.ndarray:
    """[rows, NULLs of each typed column] of ``frame``, a frame ``name``."""
    nulls = [int(frame[c].isna().sum()) for c in _TYPED[name]]
    return np.array([len(frame), *nulls], dtype=np.int64)


def _counts_by_answer(frame: pd.DataFrame, name: str) -> dict[int, np.ndarray]:
    """:func:`_counts` of each answer's rows in ``frame``."""
    if frame.empty:
        return {}
    flags = frame[_TYPED[name]].isna().astype(np.int64)
    flags.insert(0, "_rows", 1)
    sums = flags.groupby(frame.answer_id.to_numpy()).sum()
    return {int(a): row for a, row in zip(sums.index, sums.to_numpy(), strict=True)}


def _full_state(s: Session, include_drafts: bool, mark: Mark) -> _State:
    """Everything read from scratch (as ``read_frames``), with the counts a splice needs:
    of the listed answers' rows, and of every stored detail row."""
    every, n_stored = read_all(s, include_drafts)
    left_out: dict[str, pd.DataFrame] = {}
    frames = only_listed_answers(every, n_stored, left_out)
    stored = {name: _counts(getattr(every, name), name) for name in DETAIL_TABLES}
    stored["answers"] = _counts(frames.answers, "answers")
    hidden = {
        name: _counts_by_answer(left_out[name], name) if name in left_out else {}
        for name in DETAIL_TABLES
    }
    return _State(frames, mark, stored, hidden)


# --- splicing -------------------------------------------------------------------------------------

#: Up to this many answers re-read, a frame is spliced from slices; beyond, by a sort.
_MAX_SLICES = 256


def _kinds(name: str, counts: np.ndarray) -> dict[str, str] | None:
    """The column kinds (see ``frames.column_kind``) of the values behind a frame ``name``
    with these counts; None when there are none (the frame is then the empty frame of a
    query without rows)."""
    if counts[0] == 0:
        return None
    types = _TYPES[name]
    return {
        c: column_kind(types[c], int(counts[0]), int(counts[1 + i]))
        for i, c in enumerate(_TYPED[name])
    }


def _keys(frame: pd.DataFrame) -> np.ndarray:
    return frame.answer_id.to_numpy().astype(np.int64)


def _positions(frame: pd.DataFrame, ids: np.ndarray) -> np.ndarray:
    """Where the rows of the answers ``ids`` (sorted) are in ``frame`` (in answer order)."""
    keys = _keys(frame)
    starts = np.searchsorted(keys, ids, side="left")
    stops = np.searchsorted(keys, ids, side="right")
    spans = [np.arange(a, b) for a, b in zip(starts, stops, strict=True) if b > a]
    return np.concatenate(spans) if spans else np.empty(0, dtype=np.int64)


def _rows_of(frame: pd.DataFrame, ids: np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` (in answer order) of the answers ``ids`` (sorted)."""
    return frame.iloc[_positions(frame, ids)].reset_index(drop=True)


def _pieces(
    old: pd.DataFrame, new: pd.DataFrame, ids: np.ndarray
) -> tuple[list[pd.DataFrame], bool]:
    """Slices of ``old`` and ``new`` that, joined, give ``old`` with the rows of the answers
    ``ids`` (sorted) replaced by those of ``new`` (only answers of ``ids``), in answer order;
    and whether any slice is of ``old``."""
    old_keys, new_keys = _keys(old), _keys(new)
    old_starts = np.searchsorted(old_keys, ids, side="left").tolist()
    old_stops = np.searchsorted(old_keys, ids, side="right").tolist()
    new_starts = np.searchsorted(new_keys, ids, side="left").tolist()
    new_stops = np.searchsorted(new_keys, ids, side="right").tolist()
    pieces, cursor, any_old = [], 0, False
    for i in range(len(ids)):
        if old_starts[i] > cursor:
            pieces.append(old.iloc[cursor : old_starts[i]])
            any_old = True
        if new_stops[i] > new_starts[i]:
            pieces.append(new.iloc[new_starts[i] : new_stops[i]])
        cursor = max(cursor, old_stops[i])
    if cursor < len(old):
        pieces.append(old.iloc[cursor:])
        any_old = True
    return pieces, any_old


def _joined(old: pd.DataFrame, new: pd.DataFrame, ids: np.ndarray) -> tuple[pd.DataFrame, bool]:
    """``old`` with the rows of the answers ``ids`` (sorted) replaced by ``new``'s (in
    answer order, the columns as they come), and whether rows of ``old`` are kept. Few
    answers: slices; many: a mask and one stable sort."""
    if len(ids) <= _MAX_SLICES:
        pieces, any_old = _pieces(old, new, ids)
        if not pieces:
            return old.iloc[:0].reset_index(drop=True), False
        if len(pieces) == 1:
            return pieces[0].reset_index(drop=True), any_old
        return pd.concat(pieces, ignore_index=True), any_old
    kept = old[~np.isin(_keys(old), ids)]
    parts = [p for p in (kept, new) if len(p)]
    if not parts:
        return old.iloc[:0].reset_index(drop=True), False
    joined = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    order = np.argsort(_keys(joined), kind="stable")
    return joined.take(order).reset_index(drop=True), len(kept) > 0


def _overwritten(
    old: pd.DataFrame, new: pd.DataFrame, ids: np.ndarray, name: str, kinds: dict[str, str]
) -> pd.DataFrame | None:
    """``old`` with the values of the rows of the answers ``ids`` set to ``new``'s, when
    ``new`` has as many rows of each answer as ``old`` has (the usual re-save), and ``old``'s
    columns are of the kinds ``kinds``; None otherwise. Only the columns that change are
    copied; the others are ``old``'s own."""
    at = _positions(old, ids)
    if len(at) != len(new) or not np.array_equal(_keys(old)[at], _keys(new)):
        return None
    frame = old.copy(deep=False)
    before = old.iloc[at].reset_index(drop=True)
    for column in old.columns:
        if not _differing_rows(before[[column]], new[[column]]).any():
            continue
        kind = kinds.get(column)
        if isinstance(old[column].dtype, pd.StringDtype):
            values = old[column].array.copy()
        else:
            values = old[column].to_numpy(copy=True)
        if kind is None:  # parsed JSON, tuples
            values[at] = new[column].to_numpy(dtype=object)
        else:
            values[at] = conformed([new[column]], kind)
        frame[column] = values
    return frame


def _spliced(
    old: pd.DataFrame,
    new: pd.DataFrame,
    ids: np.ndarray,
    name: str,
    sources: tuple[dict[str, str] | None, dict[str, str] | None],
    kinds: dict[str, str],
) -> pd.DataFrame:
    """``old`` with the rows of the answers ``ids`` (sorted) replaced by ``new``'s, in
    answer order, each typed column of its kind in ``kinds``. ``sources``: the kinds of
    ``old``'s and ``new``'s columns as they are; a column whose pieces are all of its kind
    is taken as joined, any other is made again (:func:`frames.conformed`)."""
    if sources[0] == kinds:
        frame = _overwritten(old, new, ids, name, kinds)
        if frame is not None:
            return frame
    frame, any_old = _joined(old, new, ids)
    old_kinds, new_kinds = sources
    as_they_are = [k for k, used in ((old_kinds, any_old), (new_kinds, len(new) > 0)) if used]
    for column, kind in kinds.items():
        if not len(frame) or any(k is None or k[column] != kind for k in as_they_are):
            frame[column] = conformed([frame[column]], kind)
    for column, sql_type in _TYPES[name].items():
        if sql_type is None and frame[column].dtype != object:  # parsed JSON, tuples
            frame[column] = frame[column].astype(object)
    return frame


def _same(a: Any, b: Any) -> bool:
    """Equal values; a NULL (None or NaN) equals only a NULL."""
    missing_a = a is None or (isinstance(a, float) and a != a)
    missing_b = b is None or (isinstance(b, float) and b != b)
    if missing_a or missing_b:
        return missing_a and missing_b
    return bool(a == b)


def _differing_rows(old: pd.DataFrame, new: pd.DataFrame) -> np.ndarray:
    """Per row, whether two frames of the same length and columns differ in a value (the
    column types are compared apart, by their kinds)."""
    differ = np.zeros(len(old), dtype=bool)
    for column in old.columns:
        pairs = zip(
            old[column].to_numpy(dtype=object), new[column].to_numpy(dtype=object), strict=True
        )
        differ |= np.fromiter((not _same(a, b) for a, b in pairs), dtype=bool, count=len(old))
    return differ


def _same_rows(old: pd.DataFrame, new: pd.DataFrame) -> bool:
    """Whether two small frames hold the same values in the same order."""
    return len(old) == len(new) and not _differing_rows(old, new).any()


def _changed_answers(gone: pd.DataFrame, new: pd.DataFrame) -> set[str]:
    """Kinds of the answers whose row differs between ``gone`` (the frames' rows of the
    re-read answers) and ``new`` (their rows now), both in answer order."""
    before, after = _keys(gone), _keys(new)
    _, i, j = np.intersect1d(before, after, assume_unique=True, return_indices=True)
    only_before = ~np.isin(before, after)
    only_after = ~np.isin(after, before)
    both = _differing_rows(gone.iloc[i].reset_index(drop=True), new.iloc[j].reset_index(drop=True))
    return set(gone.kind.iloc[i[both]]) | set(gone.kind[only_before]) | set(new.kind[only_after])


class _Splice:
    """One incremental refresh: re-read the answers ``ids`` and put them in the frames.

    The state it was given is left as it is; :meth:`run` returns the new one, and
    ``changed_kinds`` the kinds whose frames changed."""

    def __init__(self, s: Session, state: _State, ids: set[int], include_drafts: bool) -> None:
        self.s = s
        self.state = state
        self.ids = np.array(sorted(ids), dtype=np.int64)
        self.include_drafts = include_drafts
        self.stored = dict(state.stored)
        self.hidden = dict(state.hidden)  # a table's dict is replaced, never changed
        self.changed_kinds: set[str] = set()
        self.listed: set[int] = set()
        self.kind_of: dict[int, str] = {}  # re-read answers: their kind (stored or listed)
        self.stored_kind: dict[int, str] = {}  # re-read answers still stored: their kind

    def run(self, mark: Mark) -> _State:
        """The new state (its frames the same object when nothing in them changed)."""
        old = self.state.frames
        changes: dict[str, pd.DataFrame] = {}
        if len(self.ids):
            answers = self._answers(old.answers)
            if answers is not None:
                changes["answers"] = answers
            for name in DETAIL_TABLES:
                frame = self._detail(name, getattr(old, name))
                if frame is not None:
                    changes[name] = frame
        frames = replace(old, **changes) if changes else old
        return _State(frames, mark, self.stored, self.hidden)

    def _answers(self, old: pd.DataFrame) -> pd.DataFrame | None:
        """The answers frame with the re-read answers; None: unchanged."""
        rows = read_answers(self.s, True, self.ids.tolist())
        new = rows if self.include_drafts else rows[(rows.status == "submitted").to_numpy()]
        new = new.reset_index(drop=True)
        gone = _rows_of(old, self.ids)
        self.listed = set(new.answer_id.tolist())
        self.stored_kind = dict(zip(rows.answer_id.tolist(), rows.kind.tolist(), strict=True))
        self.kind_of = {**dict(zip(gone.answer_id, gone.kind, strict=True)), **self.stored_kind}
        before = self.stored["answers"]
        after = before - _counts(gone, "answers") + _counts(new, "answers")
        self.stored["answers"] = after
        changed = _changed_answers(gone, new)
        if not changed:
            return None
        self.changed_kinds |= changed
        kinds = _kinds("answers", after)
        if kinds is None:
            return read_answers(self.s, self.include_drafts, ())
        sources = (_kinds("answers", before), _kinds("answers", _counts(rows, "answers")))
        return _spliced(old, new, self.ids, "answers", sources, kinds)

    def _detail(self, name: str, old: pd.DataFrame) -> pd.DataFrame | None:
        """The detail frame ``name`` with the re-read answers' rows; None: unchanged."""
        kind = DETAILS[name].kind
        hidden = self.state.hidden[name]
        ids = [a for a in self.ids.tolist() if self.kind_of.get(a, kind) == kind]
        if not ids or not (any(a in self.kind_of for a in ids) or any(a in hidden for a in ids)):
            return None
        gone = _rows_of(old, np.array(ids, dtype=np.int64))
        fresh = read_detail(self.s, name, [a for a in ids if self.stored_kind.get(a) == kind])
        shown = fresh.answer_id.isin(self.listed).to_numpy(dtype=bool)
        new = fresh[shown].reset_index(drop=True)
        before = self.stored[name]
        after = before - _counts(gone, name) + _counts(fresh, name)
        for answer_id in set(ids) & hidden.keys():
            after = after - hidden[answer_id]
        self.stored[name] = after
        self.hidden[name] = {a: c for a, c in hidden.items() if a not in set(ids)} | (
            _counts_by_answer(fresh[~shown], name)
        )
        kinds, kinds_before = _kinds(name, after), _kinds(name, before)
        if kinds == kinds_before and _same_rows(gone, new):
            return None
        self.changed_kinds.add(kind)
        if kinds is None:
            return read_detail(self.s, name, ())
        sources = (kinds_before, _kinds(name, _counts(fresh, name)))
        return _spliced(old, new, np.array(ids, dtype=np.int64), name, sources, kinds)


__all__ = ["BLOCK_BITS", "FULL_READ_SHARE", "SAFE_ACTIONS", "FrameChange", "LiveFrames"]
