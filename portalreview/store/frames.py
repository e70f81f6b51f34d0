"""A project's answers as pandas DataFrames, one long table per kind, for the measures.

Each function reads with a few bulk queries (no query per answer), so a full report on a
study of 10,000 cases stays fast. Only the PI's or the system's view may read these: they hold
every annotator's answers and every draft's source.

By default only submitted answers count; ``include_drafts=True`` adds unsubmitted ones. Gold
(adjudicated) answers carry ``is_gold=True`` and are never mixed into agreement by the callers.

Row order is fixed: ``answers``, ``units``, ``cases``, ``responses`` and ``sentences`` by id;
every detail table (``DETAIL_TABLES``) by ``answer_id``, an answer's rows in the order they
were stored (``match_decisions`` by sentence, ``facts`` by side and position). So a table
re-read in part (:mod:`portalreview.store.live_frames`) can be put back exactly.

Column types follow the stored values (see :func:`_column`): in a detail table they follow
*every* stored row, drafts' rows included, even when the drafts are then left out (a NULL in a
draft's row makes the column nullable for all). :func:`column_kind` states the rule, so that
the live frames can keep to it without reading the table again.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd
from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    Select,
    String,
    and_,
    cast,
    func,
    literal,
    literal_column,
    select,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.sqltypes import NullType

from portalreview.store.adaptive import KEY_PREFIX as ADAPTIVE_PREFIX
from portalreview.store.gc_pause import paused_gc
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    Case,
    CaseTag,
    EmpathyAnswer,
    EppcLabel,
    EppcSpan,
    Fact,
    FactCheck,
    MatchDecision,
    MatchSpan,
    ProjectMeta,
    RankCriterion,
    RankEntry,
    RespondAnswer,
    RespondPart,
    Response,
    Sentence,
    SentenceTheme,
    Unit,
    UnitSet,
    UrgencyAnswer,
)
from portalreview.store.project import Project


class Reading(Protocol):
    """What the readers here use of a session: its bind (for the dialect) and its connection
    (for the driver's cursor). A :class:`Session`, or a :class:`SharedConnection` for reader
    threads."""

    def get_bind(self) -> Any: ...

    def connection(self) -> Any: ...


class SharedConnection:
    """A session's bind and connection, taken once, for readers running in threads.

    Why: a ``Session`` must not be used by two threads at once (its transaction tracks its
    own state changes), while the connection it holds may be: Python's sqlite3 shares a
    connection between threads (``check_same_thread=False``, threadsafety 3) and SQLite
    runs one of its statements at a time. Taking the connection here begins the session's
    transaction, so every reader reads its one snapshot."""

    def __init__(self, session: Session) -> None:
        self._bind = session.get_bind()
        self._connection = session.connection()

    def get_bind(self) -> Any:
        return self._bind

    def connection(self) -> Any:
        return self._connection


@dataclass(frozen=True)
class StudyFrames:
    """Every table the analysis layer needs, read in one consistent snapshot."""

    answers: pd.DataFrame  # one row per answer: answer_id, unit_id, kind, annotator, ...
    units: pd.DataFrame  # one row per unit: unit_id, kind, unit_set, case_id, ..., adaptive
    cases: pd.DataFrame  # case_id, external_id, urgency_level, tags (dict)
    responses: pd.DataFrame  # response_id, case_id, external_id, author_kind, author, ...
    sentences: pd.DataFrame  # sentence_id, owner response/case, position, start, end, text
    respond_parts: pd.DataFrame  # answer_id, theme, text
    respond_answers: pd.DataFrame  # answer_id, mode, notes, base_response_id, final_text
    rank_entries: pd.DataFrame  # answer_id, response_id, rank, correct, criteria (tuple)
    match_decisions: pd.DataFrame  # answer_id, sentence_id, spans (tuple of (start, end))
    sentence_themes: pd.DataFrame  # answer_id, sentence_id, theme
    urgency: pd.DataFrame  # answer_id, more_urgent_case_id, ask_second
    eppc_labels: pd.DataFrame  # answer_id, code, subcode, spans (tuple of (start, end))
    empathy: pd.DataFrame  # answer_id, more_empathetic_response_id (NaN = equal)
    facts: pd.DataFrame  # answer_id, side, position, text, entailed, error_category
    fact_checks: pd.DataFrame  # answer_id, no_facts (no row: an answer saved before version 3)
    #: Values the analyses derive from these frames once and share (e.g. response sources).
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


# --- reading rows ---------------------------------------------------------------------------------

#: Answer ids per query when reading some answers only (each id is one literal in the SQL).
ID_CHUNK = 500

#: (the column to restrict by, the answer ids to keep); None: the whole table.
Only = tuple[ColumnElement, Collection[int]] | None


def _raw_rows(session: Reading, query: Select) -> list[tuple]:
    """The rows of ``query`` as plain tuples, fetched through the driver's own cursor.

    The query runs inside the session's transaction (the same snapshot as every other read of
    ``read_frames``) but skips SQLAlchemy's per-row result processing, which costs more than
    the query itself on large studies. Values are SQLite's: a Boolean column comes back as
    0 / 1 (:func:`_column` converts them).
    """
    sql = str(query.compile(dialect=session.get_bind().dialect, compile_kwargs=_LITERAL))
    cursor = session.connection().connection.dbapi_connection.cursor()
    try:
        return cursor.execute(sql).fetchall()
    finally:
        cursor.close()


_LITERAL = {"literal_binds": True}


def _rows(session: Reading, query: Select, only: Only = None) -> list[tuple]:
    """The rows of ``query``; with ``only``, those whose column is one of the ids (read
    ``ID_CHUNK`` ids at a time, in id order, each chunk in the query's own order)."""
    if only is None:
        return _raw_rows(session, query)
    column, ids = only
    ordered = sorted(ids)
    rows: list[tuple] = []
    for start in range(0, len(ordered), ID_CHUNK):
        chunk = ordered[start : start + ID_CHUNK]
        rows += _raw_rows(session, query.where(column.in_(chunk)))
    return rows


# --- reading column-wise (SQLite) -----------------------------------------------------------------

#: Stands for NULL in an integer column read column-wise (checked against the column's count of
#: values, so that a stored value equal to it is never taken for a NULL).
_NULL_INT = -(2**63)


class _NotColumnar(Exception):
    """This query cannot be read column-wise here: read it row by row."""


def _columnar(session: Reading, query: Select) -> list[Any] | None:
    """Each column of ``query``'s rows, in order, read column-wise; None when that cannot be
    done here (then the caller reads the rows).

    Why: fetching a large table row by row builds a Python tuple and an object per value,
    most of the time of reading a study. SQLite can hand each column over as one text made in
    C instead: integers and Booleans as one ``group_concat`` (parsed by numpy, NULLs written
    as ``_NULL_INT``), text as one ``json_group_array`` (parsed by ``json.loads``), real
    numbers as two integer columns that give them back exactly (:func:`_real_aggregates`;
    SQLite's own text for a real keeps only 15 digits). The aggregates read the query as
    a subquery; SQLite keeps its ORDER BY for an aggregate over it (such a subquery is never
    flattened), and the order of the first sort key is checked all the same.

    The values are those the rows would give: integers as int64 (float64 with NaN where
    NULL), real numbers as float64 (NaN where NULL), Booleans as bool (object True / False /
    None where NULL), text as a list of str (None where NULL), a column of only NULLs as a
    tuple of None.
    """
    if session.get_bind().dialect.name != "sqlite":
        return None
    try:
        return _ColumnarRead(session, query).run()
    except (_NotColumnar, sqlite3.Error, ValueError):
        return None


class _ColumnarRead:
    """One :func:`_columnar` read: the aggregate query and the parsing of its texts."""

    def __init__(self, session: Reading, query: Select) -> None:
        self.session = session
        columns = list(query.selected_columns)
        self.types = [c.type for c in columns]
        labelled = query.with_only_columns(
            *(c.label(f"c{i}") for i, c in enumerate(columns)), maintain_column_froms=True
        )
        order = list(query._order_by_clauses)
        self.descending = False
        if order:  # the first sort key (an integer or a rowid), to check the order kept
            key = order[0]
            if getattr(key, "modifier", None) is operators.desc_op:
                key, self.descending = key.element, True
            if not isinstance(key.type, Integer | NullType):
                raise _NotColumnar("the first sort key is not a number")
            labelled = labelled.add_columns(key.label("sort_key"))
        self.inner = _compiled(session, labelled)
        self.check_order = bool(order)
        self.kinds = [_read_as(t) for t in self.types]

    def run(self) -> list[Any]:
        aggregates = ["count(*)"]
        for i, kind in enumerate(self.kinds):
            if kind in ("int", "bool"):
                aggregates += [f"group_concat(ifnull(c{i}, {_NULL_INT}))", f"count(c{i})"]
            elif kind == "text":
                aggregates.append(f"json_group_array(c{i})")
            else:
                aggregates += _real_aggregates(f"c{i}")
        if self.check_order:
            aggregates.append(f"group_concat(ifnull(sort_key, {_NULL_INT}))")
        cursor = _cursor(self.session)
        try:
            row = cursor.execute(f"SELECT {', '.join(aggregates)} FROM ({self.inner})").fetchone()
        finally:
            cursor.close()
        n, values = row[0], list(row[1:])
        if n == 0:
            return []
        out = []
        for i, kind in enumerate(self.kinds):
            if kind in ("int", "bool"):
                text, count = values.pop(0), values.pop(0)
                out.append(_parsed_ints(text, n, n - count, kind))
            elif kind == "text":
                out.append(_parsed_texts(values.pop(0), n))
            else:
                reals = _parsed_reals(*(values.pop(0) for _ in range(4)), n)
                out.append(self._fetched(i, n) if reals is None else reals)
        if self.check_order and not _in_order(values.pop(0), n, self.descending):
            raise _NotColumnar("the rows did not come in the query's order")
        return out

    def _fetched(self, i: int, n: int) -> Any:
        """A real-number column the two integers cannot carry (see :func:`_real_aggregates`),
        fetched row by row (exact), as the rows would give it."""
        cursor = _cursor(self.session)
        try:
            values = tuple(v for (v,) in cursor.execute(f"SELECT c{i} FROM ({self.inner})"))
        finally:
            cursor.close()
        if len(values) != n:
            raise _NotColumnar("the query gave another number of rows")
        return _column(values, self.types[i])


def _read_as(sql_type: Any) -> str:
    """How a column of ``sql_type`` is read column-wise: "int", "bool", "text" or "real"."""
    if isinstance(sql_type, Boolean):
        return "bool"
    if isinstance(sql_type, Integer):
        return "int"
    if isinstance(sql_type, String):
        return "text"
    if isinstance(sql_type, Float):
        return "real"
    raise _NotColumnar(f"no column-wise reading of {sql_type!r}")


def _parsed_ints(text: str, n: int, nulls: int, kind: str) -> Any:
    if nulls == n:
        return (None,) * n
    values = np.fromstring(text, dtype=np.int64, sep=",")
    if len(values) != n:
        raise _NotColumnar("an integer column did not parse")
    if not nulls:
        return values.astype(bool) if kind == "bool" else values
    missing = values == _NULL_INT
    if int(missing.sum()) != nulls:
        raise _NotColumnar("a stored value equals the NULL stand-in")
    if kind == "bool":
        out = values.astype(bool).astype(object)
        out[missing] = None
        return out
    out = values.astype(float)
    out[missing] = np.nan
    return out


#: A real number x is read as two integers, its whole part and its fraction times this scale
#: (2**62; see :func:`_real_aggregates`).
_REAL_SCALE = 4611686018427387904.0


def _real_aggregates(column: str) -> list[str]:
    """The aggregates that carry a real column exactly: each x as ``CAST(x AS INTEGER)`` (its
    whole part) and ``CAST((x - whole) * 2**62 AS INTEGER)`` (its fraction), the count of
    values, and how many x the two do not give back (an x with bits below 2**-62, such as
    1e-5, or beyond the integers' range). Scaling by a power of two and taking the whole part
    are exact, so when SQLite finds ``whole + fraction / 2**62`` equal to every x, numpy's same
    IEEE arithmetic on the two integers gives every x bit for bit (SQLite's own text for a real
    keeps only 15 digits)."""
    whole = f"CAST({column} AS INTEGER)"
    fraction = f"CAST(({column} - {whole}) * {_REAL_SCALE!r} AS INTEGER)"
    return [
        f"group_concat(ifnull({whole}, {_NULL_INT}))",
        f"group_concat(ifnull({fraction}, {_NULL_INT}))",
        f"count({column})",
        f"total({column} != {whole} + {fraction} / {_REAL_SCALE!r})",
    ]


def _parsed_reals(wholes: str, fractions: str, count: int, lost: float, n: int) -> Any:
    """A real column from :func:`_real_aggregates`' texts: float64 (NaN where NULL); None
    when some value has bits the two integers do not carry (the column is then fetched row
    by row: a time on task under a millisecond, say)."""
    if count == 0:
        return (None,) * n
    if lost:
        return None
    whole = np.fromstring(wholes, dtype=np.int64, sep=",")
    fraction = np.fromstring(fractions, dtype=np.int64, sep=",")
    if len(whole) != n or len(fraction) != n:
        raise _NotColumnar("a real column did not parse")
    values = whole.astype(float) + fraction.astype(float) / _REAL_SCALE
    missing = whole == _NULL_INT
    if int(missing.sum()) != n - count or not np.array_equal(missing, fraction == _NULL_INT):
        raise _NotColumnar("a stored value equals the NULL stand-in")
    values[missing] = np.nan
    return values


def _parsed_texts(text: str, n: int) -> list[str | None]:
    # (a text column holds text or NULL: SQLite stores what is written to a column of text
    # affinity as text, and json_group_array refuses a BLOB)
    values = json.loads(text)
    if len(values) != n:
        raise _NotColumnar("a text column did not parse")
    return values


def _in_order(text: str, n: int, descending: bool) -> bool:
    keys = np.fromstring(text, dtype=np.int64, sep=",")
    steps = np.diff(keys)
    return len(keys) == n and bool(np.all(steps <= 0 if descending else steps >= 0))


def _compiled(session: Reading, query: Select) -> str:
    return str(query.compile(dialect=session.get_bind().dialect, compile_kwargs=_LITERAL))


def _cursor(session: Reading) -> Any:
    return session.connection().connection.dbapi_connection.cursor()


def _column(values: tuple, sql_type: Any) -> Any:
    """One column of driver values as the array pandas would infer from the same Python
    values (a frame built from row tuples), but built column-wise at C speed.

    Text: pandas' ``str`` dtype (None as NaN); numbers: int64 / float64, float64 with NaN for
    NULLs; a Boolean: ``bool``, or object True / False / None when it holds NULLs. A column
    that is all NULL stays an object column of None, as pandas leaves it. Values are taken to
    be of their column's type (the models write them so).
    """
    n, nulls = len(values), values.count(None)
    if nulls == n:
        return np.array(values, dtype=object)
    if isinstance(sql_type, String):  # Text is a String
        return pd.array(values, dtype="str")
    if isinstance(sql_type, Boolean):
        if nulls:
            return np.array([None if v is None else bool(v) for v in values], dtype=object)
        return np.array(values).astype(bool)
    if nulls:  # numbers with NULLs
        return np.array(values, dtype=float)
    return np.array(values)


def column_kind(sql_type: Any, n: int, nulls: int) -> str:
    """What :func:`_column` makes of ``n`` values of ``sql_type`` of which ``nulls`` are
    NULL: "none" (object None), "str", "bool", "bool_object" (True / False / None), "float"
    or "int". (``n`` > 0: a query with no rows makes an empty frame of object columns.)"""
    if nulls == n:
        return "none"
    if isinstance(sql_type, String):
        return "str"
    if isinstance(sql_type, Boolean):
        return "bool_object" if nulls else "bool"
    if nulls or isinstance(sql_type, Float):
        return "float"
    return "int"


def conformed(parts: Sequence[pd.Series], kind: str) -> Any:
    """The values of ``parts`` (pieces of columns :func:`_column` made, possibly of other
    kinds) joined into one column of ``kind`` (see :func:`column_kind`), as :func:`_column`
    would have made it from the same values."""
    if kind == "none":
        return np.full(sum(len(p) for p in parts), None, dtype=object)
    joined = _joined(parts)
    if kind == "str":
        if isinstance(joined.dtype, pd.StringDtype):
            return joined.array
        return pd.array(joined.to_numpy(dtype=object), dtype="str")
    if kind == "bool":
        return joined.to_numpy().astype(bool)
    if kind == "bool_object":
        values = joined.to_numpy(dtype=object)
        if all(p.dtype == object for p in parts):
            return values  # already Python True / False / None
        return np.array([None if pd.isna(v) else bool(v) for v in values], dtype=object)
    if kind == "float":
        return joined.to_numpy(dtype=float, na_value=np.nan)
    return joined.to_numpy().astype(np.int64)


def _joined(parts: Sequence[pd.Series]) -> pd.Series:
    kept = [p for p in parts if len(p)] or list(parts[:1])
    if not kept:
        return pd.Series([], dtype=object)
    if len(kept) == 1:
        return kept[0].reset_index(drop=True)
    return pd.concat(kept, ignore_index=True)


def _empty_frame(columns: Sequence[str], convert: Mapping[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame([], columns=list(columns))
    return frame.assign(**{c: [] for c in convert}).astype({c: object for c in convert})


def _frame(
    session: Reading,
    query: Select,
    columns: Sequence[str],
    convert: Mapping[str, Callable[[tuple], Any]] | None = None,
    only: Only = None,
) -> pd.DataFrame:
    """The rows of ``query`` (restricted by ``only``) as a DataFrame with the given column
    names; ``convert`` maps a column name to a function that makes that column from its tuple
    of driver values."""
    # Plain tuples from the driver, turned into typed columns: building a frame from
    # SQLAlchemy Row objects, or letting pandas infer every column from row tuples, is
    # several times slower on 10,000-case studies.
    convert = convert or {}
    types = [c.type for c in query.selected_columns]
    read = _columnar(session, query) if only is None else None
    if read is not None:  # each column already as the rows would give it
        if not read:
            return _empty_frame(columns, convert)
        data = {
            name: convert[name](values) if name in convert else _typed(values, sql_type)
            for name, values, sql_type in zip(columns, read, types, strict=True)
        }
        return pd.DataFrame(data)
    rows = _rows(session, query, only)
    if not rows:
        return _empty_frame(columns, convert)
    data = {
        name: convert[name](values) if name in convert else _column(values, sql_type)
        for name, values, sql_type in zip(columns, zip(*rows, strict=True), types, strict=True)
    }
    return pd.DataFrame(data)


def _typed(values: Any, sql_type: Any) -> Any:
    """A column read column-wise, as :func:`_column` makes it from the rows' values (numbers
    and Booleans come made; text and all-NULL columns go through :func:`_column`)."""
    if isinstance(values, np.ndarray):
        return values
    return _column(values, sql_type)


def _by_answer(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` in answer order, each answer's rows kept in the order they came (a stable
    sort; the frame itself when it is in that order already)."""
    keys = frame["answer_id"]
    if len(keys) < 2 or keys.is_monotonic_increasing:
        return frame
    order = np.argsort(keys.to_numpy(), kind="stable")
    return frame.take(order).reset_index(drop=True)


def _rowid(model: Any) -> Any:
    """A table's rowid: the order its rows were stored in."""
    return literal_column(f"{model.__tablename__}.rowid")


# --- the tables -----------------------------------------------------------------------------------


def _answers_query(include_drafts: bool) -> Select:
    query = (
        select(
            Answer.id,
            Answer.unit_id,
            Answer.kind,
            Annotator.name,
            Annotator.is_model,
            Answer.is_gold,
            Answer.status,
            Answer.active_seconds,
            Answer.flagged,
            Answer.suggestion_use,
            Assignment.presentation_json,
        )
        .join(Annotator, Annotator.id == Answer.annotator_id)
        .join(
            Assignment,
            and_(
                Assignment.unit_id == Answer.unit_id, Assignment.annotator_id == Answer.annotator_id
            ),
        )
        .order_by(Answer.id)
    )
    if not include_drafts:
        query = query.where(Answer.status == "submitted")
    return query


ANSWER_COLUMNS = (
    "answer_id",
    "unit_id",
    "kind",
    "annotator",
    "is_model",
    "is_gold",
    "status",
    "active_seconds",
    "flagged",
    "suggestion_use",
    "presentation",
)


def read_answers(
    session: Reading, include_drafts: bool, ids: Collection[int] | None = None
) -> pd.DataFrame:
    """The ``answers`` frame; with ``ids``, only those answers (in id order)."""
    return _frame(
        session,
        _answers_query(include_drafts),
        ANSWER_COLUMNS,
        convert={"presentation": _parsed_json},
        only=None if ids is None else (Answer.id, ids),
    )


def _parsed_json(texts: tuple[str, ...]) -> np.ndarray:
    """Each JSON text parsed (an object array of dicts), every distinct text once: most
    assignments share a handful of presentations ("{}", a swap flag). Rows with the same text
    share one dict: read it, never change it in place."""
    codes, distinct = pd.factorize(np.array(texts, dtype=object))
    parsed = np.empty(len(distinct), dtype=object)
    for i, text in enumerate(distinct.tolist()):
        parsed[i] = json.loads(text)  # one by one: a JSON list must stay one object
    return parsed[codes]


def _units(session: Reading) -> pd.DataFrame:
    return _frame(
        session,
        select(
            Unit.id,
            Unit.kind,
            UnitSet.name,
            Unit.position,
            Unit.batch,
            Unit.case_id,
            Unit.case_b_id,
            Unit.response_id,
            Unit.response_b_id,
            Unit.sentence_id,
            ProjectMeta.key,
        )
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .outerjoin(  # an adaptive set's mark (store/adaptive.py)
            ProjectMeta,
            ProjectMeta.key == literal(ADAPTIVE_PREFIX) + cast(Unit.unit_set_id, String),
        )
        .order_by(Unit.id),
        [
            "unit_id",
            "kind",
            "unit_set",
            "position",
            "batch",
            "case_id",
            "case_b_id",
            "response_id",
            "response_b_id",
            "sentence_id",
            "adaptive",
        ],
        convert={"adaptive": lambda keys: np.array([k is not None for k in keys], dtype=bool)},
    )


def _cases(session: Reading) -> pd.DataFrame:
    cases = _frame(
        session,
        select(
            Case.id,
            Case.external_id,
            Case.urgency_level,
            Case.age_band,
            Case.gender,
            Case.source_dataset,
        ).order_by(Case.id),
        ["case_id", "external_id", "urgency_level", "age_band", "gender", "source_dataset"],
    )
    tags: dict[int, dict[str, list[str]]] = {}
    query = select(CaseTag.case_id, CaseTag.key, CaseTag.value).order_by(_rowid(CaseTag))
    for case_id, key, value in _raw_rows(session, query):
        tags.setdefault(case_id, {}).setdefault(key, []).append(value)
    cases["tags"] = cases["case_id"].map(lambda c: tags.get(c, {}))
    return cases


def _responses(session: Reading) -> pd.DataFrame:
    return _frame(
        session,
        select(
            Response.id,
            Response.case_id,
            Response.external_id,
            Response.author_kind,
            Response.author,
            Response.source,
            Response.production,
            Response.text,
        ).order_by(Response.id),
        [
            "response_id",
            "case_id",
            "external_id",
            "author_kind",
            "author",
            "source",
            "production",
            "text",
        ],
    )


def _sentences(session: Reading) -> pd.DataFrame:
    return _frame(
        session,
        select(
            Sentence.id,
            Sentence.case_id,
            Sentence.response_id,
            Sentence.position,
            Sentence.start,
            Sentence.end,
            Sentence.text,
        ).order_by(Sentence.id),
        ["sentence_id", "case_id", "response_id", "position", "start", "end", "text"],
    )


def _plain_rows(session: Reading, query: Select, only: Only) -> Iterable[tuple]:
    """The rows of ``query`` (restricted by ``only``) as tuples of the driver's values, read
    column-wise where that can be done (:func:`_columnar`: several times faster on a whole
    table, and its query runs without Python's lock, so it does not wait on other readers'
    threads as fetching row by row does)."""
    read = _columnar(session, query) if only is None else None
    if read is None or any(_nulls_changed(values) for values in read):
        return _rows(session, query, only)
    return zip(*(v.tolist() if isinstance(v, np.ndarray) else v for v in read), strict=True)


def _nulls_changed(values: Any) -> bool:
    """Whether a column :func:`_columnar` read no longer holds the driver's values as they
    are: NULLs in a number column became NaN, Booleans became bool."""
    return isinstance(values, np.ndarray) and values.dtype != np.int64


def _grouped_spans(session: Reading, query: Select, only: Only) -> dict[tuple, tuple]:
    """{(answer_id, key): ((start, end), ...)} from rows (answer_id, key, start, end), each
    group's spans sorted."""
    out: dict[tuple, tuple] = {}
    for answer, key, start, end in _plain_rows(session, query, only):
        got = out.get((answer, key))
        out[(answer, key)] = ((start, end),) if got is None else (*got, (start, end))
    return {k: v if len(v) == 1 else tuple(sorted(v)) for k, v in out.items()}


# --- the detail tables (one or more rows per answer) ----------------------------------------------


@dataclass(frozen=True)
class _Detail:
    """How one detail frame is read: a query of one table (in its order), the frame's column
    names, the answer kind its rows belong to, and columns made from other tables
    (``derived``: an object column filled by ``add``)."""

    kind: str
    query: Select
    columns: tuple[str, ...]
    derived: tuple[str, ...] = ()
    add: Callable[[Reading, pd.DataFrame, Only], None] | None = None

    @property
    def answer_column(self) -> ColumnElement:
        return self.query.selected_columns[0]


def _add_criteria(session: Reading, rank: pd.DataFrame, only: Only) -> None:
    ids = None if only is None else (RankCriterion.answer_id, only[1])
    criteria: dict[tuple[int, int], list[str]] = {}
    query = select(RankCriterion.answer_id, RankCriterion.response_id, RankCriterion.criterion_id)
    for answer_id, response_id, criterion in _plain_rows(session, query, ids):
        criteria.setdefault((answer_id, response_id), []).append(criterion)
    rank["criteria"] = [
        tuple(sorted(criteria.get((a, r), ())))
        for a, r in zip(rank.answer_id, rank.response_id, strict=True)
    ]


def _add_match_spans(session: Reading, decisions: pd.DataFrame, only: Only) -> None:
    ids = None if only is None else (MatchSpan.answer_id, only[1])
    spans = _grouped_spans(
        session,
        select(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start, MatchSpan.end),
        ids,
    )
    decisions["spans"] = [
        spans.get((a, x), ())
        for a, x in zip(decisions.answer_id, decisions.sentence_id, strict=True)
    ]


def _add_eppc_spans(session: Reading, eppc: pd.DataFrame, only: Only) -> None:
    ids = None if only is None else (EppcSpan.answer_id, only[1])
    spans = _grouped_spans(
        session, select(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start, EppcSpan.end), ids
    )
    eppc["spans"] = [spans.get((a, c), ()) for a, c in zip(eppc.answer_id, eppc.code, strict=True)]


DETAILS: dict[str, _Detail] = {
    "respond_parts": _Detail(
        "respond",
        select(RespondPart.answer_id, RespondPart.theme_id, RespondPart.text).order_by(
            _rowid(RespondPart)
        ),
        ("answer_id", "theme", "text"),
    ),
    "respond_answers": _Detail(
        "respond",
        select(
            RespondAnswer.answer_id,
            RespondAnswer.mode,
            RespondAnswer.notes,
            RespondAnswer.base_response_id,
            RespondAnswer.final_text,
        ).order_by(_rowid(RespondAnswer)),
        ("answer_id", "mode", "notes", "base_response_id", "final_text"),
    ),
    "rank_entries": _Detail(
        "rank",
        select(
            RankEntry.answer_id, RankEntry.response_id, RankEntry.rank, RankEntry.correct
        ).order_by(_rowid(RankEntry)),
        ("answer_id", "response_id", "rank", "correct"),
        ("criteria",),
        _add_criteria,
    ),
    "match_decisions": _Detail(
        "match",
        select(MatchDecision.answer_id, MatchDecision.sentence_id).order_by(
            MatchDecision.answer_id, MatchDecision.sentence_id
        ),
        ("answer_id", "sentence_id"),
        ("spans",),
        _add_match_spans,
    ),
    "sentence_themes": _Detail(
        "match",
        select(SentenceTheme.answer_id, SentenceTheme.sentence_id, SentenceTheme.theme_id).order_by(
            _rowid(SentenceTheme)
        ),
        ("answer_id", "sentence_id", "theme"),
    ),
    "urgency": _Detail(
        "urgency",
        select(
            UrgencyAnswer.answer_id, UrgencyAnswer.more_urgent_case_id, UrgencyAnswer.ask_second
        ).order_by(_rowid(UrgencyAnswer)),
        ("answer_id", "more_urgent_case_id", "ask_second"),
    ),
    "eppc_labels": _Detail(
        "eppc",
        select(EppcLabel.answer_id, EppcLabel.code_id, EppcLabel.subcode_id).order_by(
            _rowid(EppcLabel)
        ),
        ("answer_id", "code", "subcode"),
        ("spans",),
        _add_eppc_spans,
    ),
    "empathy": _Detail(
        "empathy",
        select(EmpathyAnswer.answer_id, EmpathyAnswer.more_empathetic_response_id).order_by(
            _rowid(EmpathyAnswer)
        ),
        ("answer_id", "more_empathetic_response_id"),
    ),
    "facts": _Detail(
        "facts",
        select(
            Fact.answer_id,
            Fact.side,
            Fact.position,
            Fact.text,
            Fact.entailed,
            Fact.error_category_id,
        ).order_by(Fact.answer_id, Fact.side, Fact.position),
        ("answer_id", "side", "position", "text", "entailed", "error_category"),
    ),
    "fact_checks": _Detail(
        "facts",
        select(FactCheck.answer_id, FactCheck.no_facts).order_by(_rowid(FactCheck)),
        ("answer_id", "no_facts"),
    ),
}

#: Tables with one row per (part of an) answer: they hold every stored answer's rows until
#: :func:`_only_listed_answers` keeps the listed answers' only.
DETAIL_TABLES = tuple(DETAILS)


def read_detail(session: Reading, name: str, ids: Collection[int] | None = None) -> pd.DataFrame:
    """The detail frame ``name`` of every stored answer (drafts too), or of the answers
    ``ids`` only, in answer order."""
    detail = DETAILS[name]
    only = None if ids is None else (detail.answer_column, ids)
    frame = _frame(session, detail.query, detail.columns, only=only)
    if detail.add is not None:
        detail.add(session, frame, only)
    return _by_answer(frame)


def column_types(name: str) -> dict[str, Any]:
    """The SQL type of each column of the frame ``name`` (``"answers"`` or a detail table)
    that :func:`_column` makes; None for a column made otherwise (parsed JSON, tuples)."""
    if name == "answers":
        selected = _answers_query(True).selected_columns
        types = dict(zip(ANSWER_COLUMNS, (c.type for c in selected), strict=True))
        return types | {"presentation": None}
    detail = DETAILS[name]
    selected = detail.query.selected_columns
    types = dict(zip(detail.columns, (c.type for c in selected), strict=True))
    return types | dict.fromkeys(detail.derived)


# --- the whole study ------------------------------------------------------------------------------


def read_frames(project: Project, include_drafts: bool = False) -> StudyFrames:
    """Read the whole study into DataFrames (PI / system use)."""
    with paused_gc(), project.read() as s:
        return only_listed_answers(*read_all(s, include_drafts))


def read_all(session: Session, include_drafts: bool) -> tuple[StudyFrames, int]:
    """Every frame, in the session's snapshot, with the detail tables still holding every
    stored answer's rows (see :func:`only_listed_answers`), and the number of stored
    answers."""
    read = _run_readers(session, functools.partial(_readers, include_drafts=include_drafts))
    n_stored = read.pop("n_stored")
    return StudyFrames(**read), n_stored


def _readers(session: Reading, include_drafts: bool) -> dict[str, Callable[[], Any]]:
    """Each frame's reader (and the count of stored answers'), by :class:`StudyFrames`
    field (the answers, the longest, first)."""
    count = select(func.count()).select_from(Answer)
    return {
        "answers": functools.partial(read_answers, session, include_drafts),
        **{name: functools.partial(read_detail, session, name) for name in DETAILS},
        "units": functools.partial(_units, session),
        "cases": functools.partial(_cases, session),
        "responses": functools.partial(_responses, session),
        "sentences": functools.partial(_sentences, session),
        "n_stored": lambda: _raw_rows(session, count)[0][0],
    }


#: Threads reading the frames of a SQLite project side by side (see :func:`_run_readers`).
READER_THREADS = 2


def _run_readers(
    session: Session, readers_of: Callable[[Reading], dict[str, Callable[[], Any]]]
) -> dict[str, Any]:
    """Each reader's result, by name; on SQLite, ``READER_THREADS`` readers at a time.

    Why: SQLite works out a query without holding Python's lock, so one reader's query runs
    on one core while another reader turns the text of its columns into a frame on the
    other (reading a 10,000-case study: about 2.1 s one after the other, 1.85 s side by
    side, on 2 cores). The threads share the session's connection (see
    :class:`SharedConnection`), so all read one snapshot. Other back ends, and a driver that
    does not share connections between threads, read one frame after the other."""
    shared = session.get_bind().dialect.name == "sqlite" and sqlite3.threadsafety == 3
    if not shared or READER_THREADS < 2:
        return {name: reader() for name, reader in readers_of(session).items()}
    readers = readers_of(SharedConnection(session))
    with ThreadPoolExecutor(READER_THREADS, thread_name_prefix="read-frames") as pool:
        futures = {name: pool.submit(reader) for name, reader in readers.items()}
        return {name: future.result() for name, future in futures.items()}


def only_listed_answers(
    frames: StudyFrames, n_stored: int, left_out: dict[str, pd.DataFrame] | None = None
) -> StudyFrames:
    """Keep detail rows of the answers in ``frames.answers`` only (drafts left out).

    ``n_stored`` is the number of answers in the project: when every one of them is listed,
    every detail row already belongs to a listed answer (foreign keys) and nothing is cut.
    Cutting keeps each column's type. ``left_out`` (when given) receives the rows cut from
    each detail table.
    """
    if len(frames.answers) == n_stored and frames.answers.answer_id.is_unique:
        return frames
    keep = set(frames.answers.answer_id)
    trimmed = {}
    for name in DETAIL_TABLES:
        table = getattr(frames, name)
        listed = table.answer_id.isin(keep)
        trimmed[name] = table[listed].reset_index(drop=True)
        if left_out is not None:
            left_out[name] = table[~listed]
    return replace(frames, **trimmed)


__all__ = ["DETAIL_TABLES", "StudyFrames", "paused_gc", "read_frames"]
