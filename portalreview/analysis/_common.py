"""Helpers the analysis modules share: who counts as an annotator, source labels, JSON-ready
values and the shape of a reported figure (private).

Nothing here implements a paper's measure; see :mod:`portalreview.metrics` for those and
:mod:`portalreview.analysis._bootstrap` for the confidence intervals.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from portalreview.domain.catalogs import DEFAULT_CATALOGS, Catalogs
from portalreview.store.frames import StudyFrames

if TYPE_CHECKING:
    from portalreview.analysis._bootstrap import Population, Resampler

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Settings:
    """What every analysis needs besides the frames: catalogs, bootstrap settings and the
    resampler of the kind's units (see :mod:`portalreview.analysis._bootstrap`)."""

    catalogs: Catalogs = DEFAULT_CATALOGS
    seed: int = 0
    n_resamples: int = 1000
    resampler: Resampler | None = None

    def for_units(self, unit_ids: Any) -> Settings:
        """These settings with one resampler of ``unit_ids`` shared by every figure."""
        from portalreview.analysis._bootstrap import Resampler

        made = Resampler(unit_ids, seed=self.seed, n_resamples=self.n_resamples)
        return replace(self, resampler=made)

    def population(self, columns: Mapping[str, Any], unit_ids: Any) -> Population:
        """Per-unit columns of the units ``unit_ids`` (row order), resampled with the kind's
        resampler (or on their own when there is none)."""
        from portalreview.analysis._bootstrap import Population

        return Population(
            columns,
            unit_ids,
            resampler=self.resampler,
            seed=self.seed,
            n_resamples=self.n_resamples,
            deferred=self.resampler is not None,
        )

    @classmethod
    def of(cls, catalogs: Catalogs | None, seed: int, n_resamples: int) -> Settings:
        """Settings from an analysis function's keyword arguments."""
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 0:
            raise ValueError(f"n_resamples must be a whole number >= 0, got {n_resamples!r}")
        return cls(catalogs or DEFAULT_CATALOGS, int(seed), n_resamples)


class Deferred:
    """A value computed only when a result is made JSON-ready (:func:`jsonable` calls
    :meth:`json`): the analyses' bootstrap intervals, summed all together at the end."""

    def json(self) -> Any:
        raise NotImplementedError


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers, NaN/inf/NA as None, tuples as lists.

    Every analysis returns its result through this, so ``json.dumps(..., allow_nan=False)``
    works on a report.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None or kind is JsonRows:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:  # the common containers first: the checks below are slower
        return {str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if kind is np.float64:  # the common numpy scalars before the abstract type checks
        return float(value) if math.isfinite(value) else None
    if kind is np.int64:
        return int(value)
    if isinstance(value, Deferred):
        return jsonable(value.json())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray, pd.Index)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    return value


def number(value: Any) -> float | None:
    """A finite float, or None for NaN, inf and missing values."""
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def figure(
    value: Any, ci: tuple[float, float] | None, n_units: int, n_resamples: int = 0
) -> dict[str, Any]:
    """A headline figure: its value, its 95% bootstrap CI over units, the units' count and
    the number of bootstrap resamples the CI rests on (those where the figure is defined)."""
    return {
        "value": number(value),
        "ci": None if ci is None else [number(ci[0]), number(ci[1])],
        "n_units": int(n_units),
        "n_resamples": int(n_resamples) if ci is not None else 0,
    }


def answers_of_kind(frames: StudyFrames, kind: str) -> pd.DataFrame:
    """``frames.answers[frames.answers.kind == kind]`` (same rows, order and index), made once
    per frames and kind from the kinds coded once per frames: comparing the long text column
    with each kind in turn costs more than the analyses' own work on small kinds, and a
    refresh that recomputes one kind takes that kind's rows only. Read it, never change it in
    place."""
    key = ("answers_of_kind", kind)
    found = frames.memo.get(key)
    if found is None:
        split = frames.memo.get("answer_kind_codes")
        if split is None:  # every answer's kind as a code, once per frames
            codes, names = pd.factorize(frames.answers.kind.to_numpy(dtype=object))
            split = (codes, {name: i for i, name in enumerate(names)})
            frames.memo["answer_kind_codes"] = split
        code = split[1].get(kind)
        rows = np.flatnonzero(split[0] == code) if code is not None else []
        found = frames.memo[key] = frames.answers.iloc[rows]
    return found


def people(frames: StudyFrames, kind: str) -> pd.DataFrame:
    """Submitted answers of ``kind`` with unit columns, split by role: columns of
    ``frames.answers`` plus the unit's ``unit_set``, ``position``, ``batch``, ``case_id``,
    ``case_b_id``, ``response_id``, ``response_b_id``, ``sentence_id``, ``adaptive``. Made once
    per frames and kind (several analyses read the same kind): read it, never change it in place."""
    key = ("people", kind)
    found = frames.memo.get(key)
    if found is None:
        answers = answers_of_kind(frames, kind)
        units = frames.units.drop(columns=["kind"])
        found = answers.merge(units, on="unit_id", how="left", validate="many_to_one")
        frames.memo[key] = found
    return found


def humans(answers: pd.DataFrame) -> pd.DataFrame:
    """Ordinary answers of people: neither gold (adjudicated) nor a model pseudo-annotator."""
    keep = ~answers.is_gold.astype(bool) & ~answers.is_model.astype(bool)
    return answers[keep]


def models(answers: pd.DataFrame) -> pd.DataFrame:
    """Ordinary answers of model pseudo-annotators (``annotators.is_model``)."""
    keep = ~answers.is_gold.astype(bool) & answers.is_model.astype(bool)
    return answers[keep]


def answered_units(frames: StudyFrames, kind: str) -> list[int]:
    """The units of ``kind`` with at least one answer: what a kind's bootstrap resamples."""
    return sorted(answers_of_kind(frames, kind).unit_id.unique().tolist())


def answer_counts(answers: pd.DataFrame) -> dict[str, Any]:
    """How many answers, units and annotators a figure rests on, and who the annotators are."""
    names = sorted(answers.annotator.unique().tolist())
    return {
        "n_answers": len(answers),
        "n_units": int(answers.unit_id.nunique()),
        "n_annotators": len(names),
        "annotators": names,
    }


def source_labels(responses: pd.DataFrame) -> pd.Series:
    """Each response's "source" for per-source tables: ``responses.source``, else its author,
    else its author kind (indexed by response_id).

    A study has a few distinct (source, author, author kind) triples and many responses, so
    each distinct triple is labelled once and the labels are spread back with numpy."""
    columns = [responses[c].to_numpy(dtype=object) for c in ("source", "author", "author_kind")]
    if pd.isna(columns[2]).any():  # NA kinds of different types print differently: one by one
        labels = np.array([_source_label(*row) for row in zip(*columns, strict=True)], object)
        return pd.Series(labels, index=responses.response_id.to_numpy(), name="source")
    combined = np.zeros(len(responses), dtype=np.int64)
    for values in columns:  # NA sources and authors share a code: both mean "none given"
        codes, distinct = pd.factorize(values)
        combined = combined * (len(distinct) + 1) + codes + 1
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    labels = np.array([_source_label(*(c[i] for c in columns)) for i in first.tolist()], object)
    return pd.Series(
        labels[inverse.reshape(-1)] if len(first) else np.array([], dtype=object),
        index=responses.response_id.to_numpy(),
        name="source",
    )


def _source_label(source: Any, author: Any, kind: Any) -> str:
    label = source.strip() if isinstance(source, str) else ""
    if not label:
        label = author.strip() if isinstance(author, str) else ""
    return label or str(kind)


def sources_of(frames: StudyFrames) -> pd.Series:
    """:func:`source_labels` of the study's responses, made once per frames (every analysis
    that groups by source uses it). Read it, never change it in place."""
    labels = frames.memo.get("sources")
    if labels is None:
        labels = frames.memo["sources"] = source_labels(frames.responses)
    return labels


#: Memo entries made of rows per answer (every row of an answer made from that answer's rows
#: alone), which :func:`carry_memo` hands on for :func:`spliced`. Per key (a memo key, or the
#: first item of a tuple key): the frames other than the answers' that they are made from,
#: the frames of the answers' own detail rows, and the kind of answers they read.
PER_ANSWER = {
    "match_pair_counts": (("units", "responses"), ("match_decisions",), "match"),
    "match_theme_recall": ((), ("match_decisions", "sentence_themes"), "match"),
    "match_theme_presence": (("units", "sentences"), ("sentence_themes",), "match"),
    "match_span_columns": ((), ("match_decisions",), "match"),
    "match_pair_records": (("units", "responses"), ("match_decisions",), "match"),
    "respond_composed_texts": ((), ("respond_answers", "respond_parts"), "respond"),
    "respond_term_counts": ((), ("respond_answers", "respond_parts"), "respond"),
    "respond_edit_rows": (("responses",), ("respond_answers",), "respond"),
    "eppc_compared_rows": (("units", "sentences"), ("eppc_labels",), "eppc"),
}


def carry_memo(
    old: StudyFrames,
    new: StudyFrames,
    changed_kinds: frozenset[str],
    reread: frozenset[int] = frozenset(),
) -> int:
    """Copy into ``new.memo`` the entries of ``old.memo`` that ``new`` would make the same,
    because nothing they are made from changed; returns how many were copied.

    For a live report: ``new`` is ``old`` refreshed after answers of ``changed_kinds``
    changed, the answers ``reread`` re-read (``store.live_frames``: frames that did not change
    are the same objects, and an answer not re-read has the same rows). An entry is copied
    only when every frame it is made from is the same object in both and no answer of a kind
    it reads changed:

    * ``("people", kind)``: that kind's rows of ``answers`` (``kind`` not changed) and
      ``units`` (merged, so the rows' positions in ``answers`` do not matter); the same for
      ``("people_counts", kind)``, counted from it (``reports.json_report``);
    * the :data:`_NO_ANSWERS` entries (``"sources"``, ``"eppc_batches"``, ``"cases_by_id"``,
      ``"units_per_kind"``): the frames listed there;
    * ``"eppc_evidence"`` (``analysis.eppc.EvidenceTexts``): always, while not too large (it
      holds evidence texts and what was decided of them, whatever frames they came from);
    * the :data:`PER_ANSWER` tables: their kind's rows of ``answers`` and the frames listed
      there.

    A :data:`PER_ANSWER` table whose answers changed, but nothing else it is made from, is
    handed on as ``("previous", key)``: (the old table, ``reread``), for :func:`spliced`.

    Entries made from the whole ``answers`` frame (``answers_of_kind`` and the kind codes:
    their rows keep the frame's positions) are never copied; nor any made from rows of
    ``answers`` when its column types changed (a column's type follows every row: another
    kind's answer can turn it).
    """
    same_types = old.answers.dtypes.equals(new.answers.dtypes)
    copied = 0
    for key, value in old.memo.items():
        if key in new.memo:
            continue
        how = _how_carried(key, value, old, new, changed_kinds, same_types)
        if how == "copy":
            new.memo[key] = value
            copied += 1
        elif how == "previous":
            new.memo[("previous", key)] = (value, reread)
    return copied


def _how_carried(
    key: Any,
    value: Any,
    old: StudyFrames,
    new: StudyFrames,
    changed_kinds: frozenset[str],
    same_types: bool,
) -> str | None:
    """How :func:`carry_memo` hands on the entry ``key``: "copy" (``new`` would make it the
    same), "previous" (a :data:`PER_ANSWER` table whose answers changed, for
    :func:`spliced`), or None (not at all)."""
    if key == "eppc_evidence":  # texts and decisions by content: valid for any frames
        return "copy" if len(value) < value.MAX_TEXTS else None
    per_answer = _per_answer(key)
    if per_answer is not None:
        frames_used, answer_rows, kind = per_answer
        if not same_types or not _same(old, new, frames_used):
            return None
        if kind in changed_kinds or not _same(old, new, answer_rows):
            return "previous"
        return "copy"
    if isinstance(key, tuple) and key[0] in ("people", "people_counts"):
        if key[1] in changed_kinds or not same_types:
            return None
        frames_used = ("units",)
    elif key in _NO_ANSWERS:
        frames_used = _NO_ANSWERS[key]
    else:
        return None
    return "copy" if _same(old, new, frames_used) else None


#: Memo entries made from no answer: the frames each is made from.
_NO_ANSWERS = {
    "sources": ("responses",),
    "eppc_batches": ("units", "sentences"),
    "cases_by_id": ("cases",),
    "units_per_kind": ("units",),
}


def _per_answer(key: Any) -> tuple | None:
    name = key[0] if isinstance(key, tuple) and key else key
    return PER_ANSWER.get(name) if isinstance(name, str) else None


def _same(old: StudyFrames, new: StudyFrames, names: tuple[str, ...]) -> bool:
    return all(getattr(old, name) is getattr(new, name) for name in names)


def spliced_or_whole(
    frames: StudyFrames, key: str | tuple, answer_ids: pd.Series, make: Any
) -> pd.DataFrame:
    """The :data:`PER_ANSWER` table ``key`` of ``frames``, kept in its memo: :func:`spliced`
    from the last refresh's where there is one, else ``make(answer_ids)``, every answer's."""
    found = spliced(frames, key, answer_ids, make)
    if found is None:
        found = make(answer_ids)
    frames.memo[key] = found
    return found


def one_row_per_answer(
    frames: StudyFrames, key: str, answer_ids: pd.Series, make: Any
) -> pd.DataFrame:
    """A :data:`PER_ANSWER` table with one row per answer, for the answers ``answer_ids``:
    kept in the frames' memo (:func:`spliced_or_whole`), or, when the memo holds it for other
    answers, ``make(answer_ids)`` made and not kept."""
    found = frames.memo.get(key)
    if found is None:
        found = spliced_or_whole(frames, key, answer_ids, make)
    if not np.array_equal(found.answer_id.to_numpy(), answer_ids.to_numpy()):
        found = make(answer_ids)
    return found


def spliced(
    frames: StudyFrames, key: str | tuple, answer_ids: pd.Series, make: Any
) -> pd.DataFrame | None:
    """The :data:`PER_ANSWER` table ``key`` of the frames that ``frames`` were refreshed from,
    brought up to date (None where :func:`carry_memo` left none, or the types differ).

    ``answer_ids``: the answers the table covers now, in ``frames.answers`` order (answer id
    order); ``make(ids)``: the table of those answers alone, as made from scratch. The old
    rows of answers not re-read are kept, those of the re-read ones made again, and the rows
    put in answer id order, each answer's rows in the order ``make`` gives them: the table
    ``make`` gives for every answer at once, row for row (tested)."""
    previous = frames.memo.pop(("previous", key), None)
    if previous is None:
        return None
    old, reread = previous
    covered = answer_ids.isin(reread).to_numpy()
    kept = old[old.answer_id.isin(answer_ids[~covered]).to_numpy()]
    if covered.any():
        fresh = make(answer_ids[covered])
        if not fresh.dtypes.equals(old.dtypes):
            return None
        kept = pd.concat([kept, fresh], ignore_index=True)
    order = np.argsort(kept.answer_id.to_numpy(), kind="stable")
    return kept.take(order).reset_index(drop=True)


class JsonRows(list):
    """A list of rows already JSON-ready (:func:`jsonable` passes it through untouched)."""


def _column_values(column: pd.Series) -> list[Any]:
    """A column's values as :func:`jsonable` makes them, the common dtypes without a call per
    value (a pairs table of a large study has hundreds of thousands of cells)."""
    values = column.tolist()
    kind = column.dtype.kind
    if kind in "iub":  # never missing, already Python numbers
        return values
    if kind == "f" and isinstance(column.dtype, np.dtype):  # only NaN and inf change (to None)
        if np.isfinite(column.to_numpy()).all():
            return values
        return [v if math.isfinite(v) else None for v in values]
    return [v if type(v) is str else jsonable(v) for v in values]


def records(frame: pd.DataFrame) -> JsonRows:
    """Rows of a DataFrame as JSON-ready dicts (index dropped; NaN as None)."""
    names = [str(c) for c in frame.columns]
    columns = [_column_values(frame[c]) for c in frame.columns]
    return JsonRows(map(dict, map(zip, itertools.repeat(names), zip(*columns, strict=True))))


def safe_ratio(num: np.ndarray, den: np.ndarray, zero_division: float = math.nan) -> np.ndarray:
    """Elementwise num / den, ``zero_division`` where den is 0."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, float(zero_division))
    np.divide(num, den, out=out, where=den != 0)
    return out


def f1_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, zero: float = 0.0) -> np.ndarray:
    """F1 = 2TP / (2TP + FP + FN) elementwise (as metrics does), ``zero`` where all are 0."""
    tp = np.asarray(tp, dtype=float)
    return safe_ratio(2 * tp, 2 * tp + fp + fn, zero)


def prf_columns(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> dict[str, np.ndarray]:
    """Micro precision, recall and F1 from (summed) counts; 0.0 for an empty denominator."""
    return {
        "precision": safe_ratio(tp, np.asarray(tp) + fp, 0.0),
        "recall": safe_ratio(tp, np.asarray(tp) + fn, 0.0),
        "f1": f1_counts(tp, fp, fn),
    }


def ordered_names(values: pd.Series) -> list[str]:
    """Distinct names, sorted (so every table lists annotators and sources in one order)."""
    return sorted(pd.unique(values.dropna()).tolist())


def count_table(
    row_keys: Any, col_keys: Any, columns: list[Any] | None = None, weights: Any = None
) -> tuple[pd.Index, list[Any], np.ndarray]:
    """Counts of each (row key, column key) pair, like ``pd.crosstab`` but on numpy: the
    sorted distinct row keys, the columns (given, or the sorted distinct column keys; pairs
    whose column is not among given columns are dropped) and the rows x columns counts
    (sums of ``weights`` when given)."""
    rows = np.asarray(row_keys)
    cols = np.asarray(col_keys, dtype=object) if columns is not None else np.asarray(col_keys)
    if columns is None:
        columns_found, c = np.unique(cols, return_inverse=True)
        columns = columns_found.tolist()
    else:
        c = pd.Index(columns).get_indexer(cols)
    keep = c >= 0
    index, r = np.unique(rows[keep], return_inverse=True)
    w = None if weights is None else np.asarray(weights, dtype=float)[keep]
    flat = np.bincount(r * len(columns) + c[keep], w, minlength=len(index) * len(columns))
    return pd.Index(index), list(columns), flat.reshape(len(index), len(columns)).astype(float)
