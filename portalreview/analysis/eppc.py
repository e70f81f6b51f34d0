"""EPPC coding scores and agreement (seed 003, EPPCMinerBen) from eppc answers.

Each eppc unit is one sentence; an answer gives a set of codes, one subcode per code and an
evidence span per code (character offsets into the sentence; several rows = a discontinuous
span, joined with a space). Reported:

* micro P / R / F1 of codes and of (code, subcode) pairs (Appendix B (1)-(2)) and of evidence
  spans with the relaxed match (Appendix B (3): containment either way or token Jaccard >=
  0.6), for each annotator against the gold (adjudicated) answers and for each pair of
  annotators, with per-code breakdowns;
* Cohen's kappa between two coders on the presence of each code per sentence and pooled over
  codes, overall and per batch of units in order (Section 3.2.2);
* Krippendorff's alpha over all coders, per code and pooled.

Span instances follow the paper's equations: a sentence's predicted spans are matched against
the same sentence's gold spans, whatever their labels.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._bootstrap import (
    Population,
    binary_kappa,
    kappa_statistic,
    presence_alpha,
    presence_alpha_blocks,
)
from portalreview.analysis._common import (
    JsonRows,
    Settings,
    answer_counts,
    answered_units,
    humans,
    jsonable,
    models,
    ordered_names,
    people,
    prf_columns,
    spliced_or_whole,
)
from portalreview.analysis._memo import Memo
from portalreview.domain.catalogs import Catalogs
from portalreview.metrics import span_tokens
from portalreview.store.frames import StudyFrames

KIND = "eppc"
BATCH_SIZE = 50

_NUMBERINGS = itertools.count()


# --------------------------------------------------------------------------------------------
# Labels with their evidence text
# --------------------------------------------------------------------------------------------


def label_rows(answers: pd.DataFrame, frames: StudyFrames, codes: list[str]) -> pd.DataFrame:
    """One row per (answer, code): unit_id, code, subcode ('' when none), the evidence text
    (the sentence sliced by each span, pieces joined with a space; '' without spans), and
    integer ids of the evidence text and of the (code, subcode) pair (numbered by the frames'
    :class:`EvidenceTexts`) and of the code (its catalog position)."""
    return _label_rows_of(answers, frames, codes, evidence_texts(frames))


#: The label rows' columns a comparison of two coders reads (``Coding``).
_COMPARED = ("unit_id", "code_id", "pair_id", "evidence_id", "has_evidence")


def compared_rows(answers: pd.DataFrame, frames: StudyFrames, codes: list[str]) -> pd.DataFrame:
    """:func:`label_rows`' answer_id and :data:`_COMPARED` columns (numbers only: cheap to
    split and to splice). For the frames' eppc answers (``people``) the table is kept in the
    frames' memo, and a live report's next refresh makes only the re-read answers' rows again
    (``analysis._common.PER_ANSWER``, ``spliced``). Read it, never change it in place."""
    numbering = evidence_texts(frames)
    columns = ["answer_id", *_COMPARED]
    if answers is not people(frames, KIND):
        return _label_rows_of(answers, frames, codes, numbering, columns)
    # The ids are the numbering's: the key names it, so a table numbered by another (one not
    # carried to these frames) is never spliced into this one.
    key = ("eppc_compared_rows", tuple(codes), numbering.serial)
    found = frames.memo.get(key)
    if found is None:

        def make(answer_ids: pd.Series) -> pd.DataFrame:
            mine = answers[answers.answer_id.isin(answer_ids).to_numpy()]
            return _label_rows_of(mine, frames, codes, numbering, columns)

        found = spliced_or_whole(frames, key, answers.answer_id, make)
    return found


def _label_rows_of(
    answers: pd.DataFrame,
    frames: StudyFrames,
    codes: list[str],
    numbering: EvidenceTexts,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """:func:`label_rows` of ``answers`` (only ``columns`` when given), made from their label
    rows. The label rows and sentences are narrowed to the answers' first: a few answers'
    rows are made again after a save."""
    labels = frames.eppc_labels
    labels = labels[labels.answer_id.isin(answers.answer_id).to_numpy()]
    labels = labels.merge(answers[["answer_id", "unit_id", "sentence_id"]])
    sentences = frames.sentences
    sentences = sentences[sentences.sentence_id.isin(labels.sentence_id.unique()).to_numpy()]
    sentence = labels.sentence_id.map(sentences.set_index("sentence_id").text)
    evidence = [
        text[spans[0][0] : spans[0][1]]
        if len(spans) == 1
        else " ".join(text[a:b] for a, b in spans)
        for text, spans in zip(sentence.tolist(), labels.spans.tolist(), strict=True)
    ]
    evidence_id = numbering.numbered(evidence)
    subcode = labels.subcode.fillna("").astype(str)
    # Explicit types: the rows of a few answers (or of none) are spliced into the whole table.
    made = {
        "answer_id": lambda: labels.answer_id,
        "unit_id": lambda: labels.unit_id,
        "code": lambda: labels.code,
        "subcode": lambda: subcode,
        "evidence": lambda: pd.Series(evidence, index=labels.index, dtype="str"),
        "has_evidence": lambda: np.array([text != "" for text in evidence], dtype=bool),
        "evidence_id": lambda: evidence_id,
        "tokens": lambda: pd.Series(
            numbering.tokens_of(evidence_id), index=labels.index, dtype=object
        ),
        "code_id": lambda: pd.Index(codes).get_indexer(labels.code),
        "pair_id": lambda: numbering.pairs_numbered(labels.code.astype(str), subcode),
    }
    return pd.DataFrame({name: made[name]() for name in columns or made})


#: The token set of each evidence text, kept for the process. Why: tokenising every evidence
#: span is most of the label table's cost, and a refresh after a few new answers meets every
#: other span again. Key: the evidence text - all ``metrics.span_tokens`` depends on. Bound:
#: 100,000 texts, least recently used dropped first (a 10,000-case study with 4 annotators and
#: gold answers has about 16,000 distinct evidence texts: 11.8 MiB measured).
_TOKENS = Memo("eppc.span_tokens", max_entries=100_000)


def _tokens_of(texts: list[str]) -> list[frozenset[str]]:
    """``metrics.span_tokens`` of each text, cached."""
    found = _TOKENS.get_many(texts)
    made = {}
    for i, tokens in enumerate(found):
        if tokens is None:
            tokens = found[i] = made[texts[i]] = span_tokens(texts[i])
    _TOKENS.put_many(made.items())
    return found


# --------------------------------------------------------------------------------------------
# Reference vs predicted on shared units
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OnUnits:
    """One coder's label rows on the units compared: each row's unit position ``at`` (-1 for
    a unit not among them) and the rows' label and evidence columns as arrays."""

    at: np.ndarray
    code_id: np.ndarray
    pair_id: np.ndarray
    evidence_id: np.ndarray
    has_evidence: np.ndarray

    @classmethod
    def of(cls, rows: pd.DataFrame, units: pd.Index) -> OnUnits:
        """``rows`` (``label_rows``' columns) placed on ``units``."""
        return cls(
            units.get_indexer(rows.unit_id.to_numpy()),
            rows.code_id.to_numpy(),
            rows.pair_id.to_numpy(),
            rows.evidence_id.to_numpy(),
            rows.has_evidence.to_numpy(bool),
        )


def _keys(at: np.ndarray, label: np.ndarray, n_units: int, n_labels: int) -> np.ndarray:
    """Distinct (unit, label) items of rows on unit positions ``at`` with labels ``label`` as
    integers unit_position * n_labels + label, sorted."""
    keep = (at >= 0) & (label >= 0)
    return np.unique(at[keep].astype(np.int64) * n_labels + label[keep])


# Above this many (unit, label) items the sets are compared as sorted keys, not as masks.
_MAX_MASK = 2**25


def _item_mask(at: np.ndarray, label: np.ndarray, n_units: int, n_labels: int) -> np.ndarray:
    """The (unit, label) items of rows as a mask over every item unit_position * n_labels
    + label: the set of :func:`_keys` without sorting (a few thousand units x labels)."""
    keep = (at >= 0) & (label >= 0)
    mask = np.zeros(n_units * n_labels, dtype=bool)
    mask[at[keep].astype(np.int64) * n_labels + label[keep]] = True
    return mask


def set_counts(ref: OnUnits, pred: OnUnits, column: str, n_units: int, n: int):
    """TP / FP / FN of the label sets (``column``: code_id or pair_id) of ``pred`` against
    ``ref`` per unit (dict of arrays over the n_units units) and per label (dict of arrays
    over the n labels): micro counting as ``metrics.micro_prf`` / ``per_label_prf``."""
    items = _item_mask if n_units * n <= _MAX_MASK else _keys
    r = items(ref.at, getattr(ref, column), n_units, n)
    p = items(pred.at, getattr(pred, column), n_units, n)
    if items is _item_mask:
        found = {
            "tp": np.flatnonzero(r & p),
            "fp": np.flatnonzero(p & ~r),
            "fn": np.flatnonzero(r & ~p),
        }
    else:
        found = {
            "tp": np.intersect1d(r, p, assume_unique=True),
            "fp": np.setdiff1d(p, r, assume_unique=True),
            "fn": np.setdiff1d(r, p, assume_unique=True),
        }
    per_unit = {k: np.bincount(v // n, minlength=n_units) for k, v in found.items()}
    per_label = {k: np.bincount(v % n, minlength=n) for k, v in found.items()}
    return per_unit, per_label


def _relaxed(a: frozenset[str], b: frozenset[str], threshold: float = 0.6) -> bool:
    """``metrics.spans_match`` on token sets already made by ``metrics.span_tokens``: one
    contains the other, or Jaccard >= 0.6; a span without tokens never matches."""
    if not a or not b:
        return False
    return a <= b or b <= a or len(a & b) / len(a | b) >= threshold


class RelaxedMatcher:
    """The relaxed match (:func:`_relaxed`) of pairs of evidence texts given by their ids
    (``label_rows``' ``evidence_id``), each distinct pair decided once for the whole analysis
    (every comparison of two coders meets mostly the same pairs of texts)."""

    def __init__(self, rows: pd.DataFrame | None = None) -> None:
        self.tokens: dict[int, frozenset[str]] = {}
        if rows is not None:
            ids, first = np.unique(rows.evidence_id.to_numpy(), return_index=True)
            tokens = rows.tokens.to_numpy()[first].tolist()
            self.tokens = dict(zip(ids.tolist(), tokens, strict=True))
        # Pairs decided so far: their keys (sorted) and decisions, looked up with numpy.
        self._keys = np.zeros(0, dtype=np.int64)
        self._decided = np.zeros(0, dtype=bool)
        self._lock = threading.RLock()

    def _decide(self, key: int) -> bool:
        predicted, gold = key >> 32, key & 0xFFFFFFFF
        a = self.tokens[predicted]
        # The same text on both sides matches itself when it has a token (a <= a).
        return bool(a) if predicted == gold else _relaxed(a, self.tokens[gold])

    def __call__(self, predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
        """Whether each (predicted, gold) evidence pair matches."""
        with self._lock:
            return self._matches(predicted, gold)

    def _matches(self, predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
        keys = predicted.astype(np.int64) * (1 << 32) + gold.astype(np.int64)
        distinct, inverse = np.unique(keys, return_inverse=True)
        where = np.searchsorted(self._keys, distinct)
        known = where < len(self._keys)
        known[known] = self._keys[where[known]] == distinct[known]
        new = distinct[~known]
        if len(new):
            decided = np.fromiter((self._decide(k) for k in new.tolist()), bool, len(new))
            order = np.argsort(np.concatenate([self._keys, new]), kind="stable")
            self._keys = np.concatenate([self._keys, new])[order]
            self._decided = np.concatenate([self._decided, decided])[order]
            where = np.searchsorted(self._keys, distinct)
        return self._decided[where][inverse.reshape(-1)]


class EvidenceTexts(RelaxedMatcher):
    """The evidence texts of a study's label rows numbered as first met (``label_rows``'
    ``evidence_id``), with their token sets, and the relaxed match of each pair of them
    decided so far (:class:`RelaxedMatcher`); the (code, subcode) pairs numbered as first met
    too (``pair_id``). One lives in a frames' memo
    (:func:`evidence_texts`), and a live report carries it to the next refresh's frames
    (``analysis._common.carry_memo``), numbers and decisions alike: a refresh after one eppc
    answer meets the same texts and pairs again (on 10,000 cases, deciding 38,000 pairs anew
    took about 0.03 s). Numbers stand for texts only within one object; it is carried while it
    holds fewer than ``MAX_TEXTS`` texts."""

    MAX_TEXTS = 200_000

    def __init__(self) -> None:
        super().__init__()
        self._ids: dict[str, int] = {}
        self._pair_ids: dict[tuple[str, str], int] = {}
        #: Tells numberings apart (``compared_rows`` keeps its table under it).
        self.serial = next(_NUMBERINGS)
        #: The last analysis's JSON-ready results of pairs of coders (:class:`KeptPairs`),
        #: by a digest of what each is made of: the rows numbered here.
        self.pair_results: dict[tuple, Any] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def numbered(self, texts: list[str]) -> np.ndarray:
        """Each text's number (texts met for the first time numbered in order)."""
        codes, distinct = pd.factorize(pd.Series(texts, dtype=object))
        distinct = distinct.tolist()
        with self._lock:
            ids = self._ids
            new = [text for text in distinct if text not in ids]
            for text, tokens in zip(new, _tokens_of(new), strict=True):
                self.tokens[len(ids)] = tokens
                ids[text] = len(ids)
            numbers = np.array([ids[text] for text in distinct], dtype=np.int64)
        return numbers[codes] if len(codes) else np.zeros(0, dtype=np.int64)

    def pairs_numbered(self, codes: pd.Series, subcodes: pd.Series) -> np.ndarray:
        """Each (code, subcode) pair's number (pairs met for the first time numbered in
        order): each part factorized on its own, the pairs of numbers factorized again."""
        pair_of, pairs = _pairs_first_met(codes, subcodes)
        with self._lock:
            ids = self._pair_ids
            numbers = np.array([ids.setdefault(pair, len(ids)) for pair in pairs], np.int64)
        return numbers[pair_of] if len(pair_of) else np.zeros(0, dtype=np.int64)

    def tokens_of(self, numbers: np.ndarray) -> list[frozenset[str]]:
        """The token set of each numbered text."""
        tokens = self.tokens
        return [tokens[i] for i in numbers.tolist()]


def evidence_texts(frames: StudyFrames) -> EvidenceTexts:
    """The frames' :class:`EvidenceTexts` (made on first use)."""
    found = frames.memo.get("eppc_evidence")
    if found is None:
        found = frames.memo.setdefault("eppc_evidence", EvidenceTexts())
    return found


def _with_evidence(rows: OnUnits) -> tuple[np.ndarray, np.ndarray]:
    """The unit positions and evidence ids of the rows on the units that have evidence."""
    keep = rows.has_evidence & (rows.at >= 0)
    return rows.at[keep], rows.evidence_id[keep]


def _same_unit_pairs(p_unit: np.ndarray, g_unit: np.ndarray, n: int) -> tuple:
    """Every (p row, g row) pair of rows on the same unit (rows given by unit position, n
    units): the p rows' and the g rows' numbers, without a merge."""
    g_order = np.argsort(g_unit, kind="stable")
    g_count = np.bincount(g_unit, minlength=n)
    g_start = np.cumsum(g_count) - g_count
    per_p = g_count[p_unit]
    p_row = np.repeat(np.arange(len(p_unit)), per_p)
    # Each pair's place among its p row's pairs: 0, 1, ... within each run of p_row.
    place = np.arange(len(p_row)) - np.repeat(np.cumsum(per_p) - per_p, per_p)
    return p_row, g_order[g_start[p_unit][p_row] + place]


def _span_counts(ref: OnUnits, pred: OnUnits, n: int, matcher: RelaxedMatcher) -> dict:
    """Per unit (n units): predicted and gold spans, TP (predicted spans matching a gold span
    of the same sentence), matched gold spans, FP and FN - ``metrics.span_prf``'s
    counting."""
    (p_unit, p_text), (g_unit, g_text) = _with_evidence(pred), _with_evidence(ref)
    p_row, g_row = _same_unit_pairs(p_unit, g_unit, n)
    hits = matcher(p_text[p_row], g_text[g_row])
    hit_p = np.zeros(len(p_unit), dtype=bool)
    hit_p[p_row[hits]] = True
    hit_g = np.zeros(len(g_unit), dtype=bool)
    hit_g[g_row[hits]] = True
    out = {
        "n_predicted": np.bincount(p_unit, minlength=n),
        "n_gold": np.bincount(g_unit, minlength=n),
        "tp": np.bincount(p_unit[hit_p], minlength=n),
        "matched_gold": np.bincount(g_unit[hit_g], minlength=n),
    }
    out["fp"] = out["n_predicted"] - out["tp"]
    out["fn"] = out["n_gold"] - out["matched_gold"]
    return out


def _prf_figures(pop: Population, prefix: str, counts: dict[str, int]) -> dict[str, Any]:
    """The summed ``counts`` and the micro P / R / F1 of the population's columns
    ``{prefix}tp`` / ``fp`` / ``fn``."""
    out: dict[str, Any] = dict(counts)
    for score in ("precision", "recall", "f1"):
        out[score] = pop.figure(
            lambda x, k=score: prf_columns(x[f"{prefix}tp"], x[f"{prefix}fp"], x[f"{prefix}fn"])[k]
        )
    return out


def _per_code(per_label: dict[str, np.ndarray], codes: list[str]) -> list[dict[str, Any]]:
    tp, fp, fn = per_label["tp"], per_label["fp"], per_label["fn"]
    scores = prf_columns(tp, fp, fn)
    return [
        {
            "code": code,
            "tp": int(tp[i]),
            "fp": int(fp[i]),
            "fn": int(fn[i]),
            "precision": scores["precision"][i],
            "recall": scores["recall"][i],
            "f1": scores["f1"][i],
            "support": int(tp[i] + fn[i]),
        }
        for i, code in enumerate(codes)
    ]


def compare(
    ref: pd.DataFrame,
    pred: pd.DataFrame,
    units: pd.Index,
    codes: list[str],
    s: Settings,
    matcher: RelaxedMatcher,
) -> dict[str, Any]:
    """Micro P / R / F1 of codes, code-subcode pairs and spans of ``pred`` against ``ref`` on
    ``units`` (seed 003, Appendix B), CIs over units, and the per-code table."""
    r, p = OnUnits.of(ref, units), OnUnits.of(pred, units)
    code_counts, per_label = set_counts(r, p, "code_id", len(units), len(codes))
    on = np.r_[r.pair_id[r.at >= 0], p.pair_id[p.at >= 0], 0]
    pair_counts, _ = set_counts(r, p, "pair_id", len(units), max(int(on.max()) + 1, 1))
    spans = _span_counts(r, p, len(units), matcher)
    # The population holds what the intervals read (TP, FP, FN); the other span counts are
    # only summed.
    parts = {"c_": code_counts, "p_": pair_counts, "s_": spans}
    columns = {f"{part}{k}": of[k] for part, of in parts.items() for k in ("tp", "fp", "fn")}
    pop = s.population(columns, units)
    span_counts = ("n_predicted", "n_gold", "tp", "fp", "fn", "matched_gold")

    def summed(of: dict[str, np.ndarray], names: tuple[str, ...]) -> dict[str, int]:
        return {name: int(of[name].sum()) for name in names}

    return {
        "n_units": len(units),
        "codes": _prf_figures(pop, "c_", summed(code_counts, ("tp", "fp", "fn"))),
        "code_subcode": _prf_figures(pop, "p_", summed(pair_counts, ("tp", "fp", "fn"))),
        "spans": _prf_figures(pop, "s_", summed(spans, span_counts)),
        "per_code": _per_code(per_label, codes),
    }


@dataclass
class Coding:
    """The eppc answers and label rows of a study, split once per coder. ``rows``:
    :func:`label_rows`' table, or :func:`compared_rows`' with a ``matcher``."""

    answers: pd.DataFrame
    rows: pd.DataFrame
    units_of: dict[str, pd.Index] = field(default_factory=dict)
    rows_of: dict[str, pd.DataFrame] = field(default_factory=dict)
    is_model: dict[str, bool] = field(default_factory=dict)

    #: Decides the relaxed match of the rows' evidence texts: the :class:`EvidenceTexts` that
    #: numbered them (``label_rows``), or one made of the rows alone.
    matcher: RelaxedMatcher | None = None
    _layouts: dict[bytes, BatchLayout] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.matcher is None:
            self.matcher = RelaxedMatcher(self.rows)
        # Each answer's coder as a number (the gold answers last), each label row's by its
        # answer: one split of the rows, not one look-up of every row per coder. The coders'
        # rows keep the columns compared only (the text columns cost most to split).
        answers = self.answers
        gold = answers.is_gold.astype(bool).to_numpy()
        code, names = pd.factorize(answers.annotator.to_numpy(dtype=object)[~gold])
        coder = np.full(len(answers), len(names), dtype=np.int64)  # "" = the gold answers
        coder[~gold] = code  # -1: no name, no coder
        where = pd.Index(answers.answer_id).get_indexer(self.rows.answer_id)
        row_coder = np.where(where >= 0, coder[where], -2)
        unit_ids = answers.unit_id.to_numpy()
        is_model = answers.is_model.astype(bool).to_numpy()
        compared = self.rows[list(_COMPARED)]
        for i, name in enumerate([*map(str, names), ""]):
            mine = coder == i
            self.units_of[name] = pd.Index(np.unique(unit_ids[mine]), name="unit_id")
            self.rows_of[name] = compared.take(np.flatnonzero(row_coder == i))
            if name:
                self.is_model[name] = bool(is_model[mine].any())

    def shared(self, a: str, b: str) -> pd.Index:
        return self.units_of[a].intersection(self.units_of[b])

    def batch_layout(self, frames: StudyFrames, units: pd.Index) -> BatchLayout:
        """The :class:`BatchLayout` of ``units`` (made once per set of units: most pairs of
        coders share the same units)."""
        key = units.to_numpy().tobytes()
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = BatchLayout.of(batches(frames, units), units)
        return found


def versus_gold(
    c: Coding, codes: list[str], s: Settings, kept: KeptPairs | None = None
) -> list[dict[str, Any]]:
    """Each annotator (people and models) against the gold answers, on units with both."""
    out = []
    for name in sorted(c.is_model):
        units = c.shared(name, "")
        if units.empty:
            continue

        def made(name: str = name, units: pd.Index = units) -> dict[str, Any]:
            entry = {"annotator": name, "is_model": c.is_model[name]}
            return {**entry, **compare(c.rows_of[""], c.rows_of[name], units, codes, s, c.matcher)}

        out.append(_pair(kept, ("vs_gold", len(out), name, "", c.is_model[name]), made))
    return out


def between_annotators(
    c: Coding, coders: list[str], codes: list[str], s: Settings, kept: KeptPairs | None = None
) -> list:
    """Each pair of people (first as reference) on the units both coded."""
    out = []
    for a, b in itertools.combinations(coders, 2):
        units = c.shared(a, b)
        if units.empty:
            continue

        def made(a: str = a, b: str = b, units: pd.Index = units) -> dict[str, Any]:
            scores = compare(c.rows_of[a], c.rows_of[b], units, codes, s, c.matcher)
            return {"annotator_a": a, "annotator_b": b, **scores}

        out.append(_pair(kept, ("between_annotators", len(out), a, b), made))
    return out


def _pair(kept: KeptPairs | None, place: tuple, make: Any) -> Any:
    return make() if kept is None else kept.result(place, make)


class KeptPairs:
    """The results of pairs of coders of one analysis taken from the last analysis's
    (``EvidenceTexts.pair_results``) where nothing they are made of changed, and the others
    made now; :meth:`keep` hands them all on. Why: a save changes one coder's answers, so a
    refresh after it compares that coder again and takes the other pairs' figures (and their
    bootstrap sums) as they were.

    A result's key is its place in the analysis's result (section, position, the coders'
    names) and a digest of all it is made of: both coders' label rows (numbers of the
    ``EvidenceTexts`` that keeps them) and units, the codes, the resampler's seed, count and
    units, and for kappa the units' batches. A result made now is kept once the analysis's
    result is JSON-ready (its intervals are summed with the others at the end)."""

    def __init__(self, c: Coding, codes: list[str], s: Settings, numbering: EvidenceTexts):
        self.coding, self.numbering = c, numbering
        self._found = numbering.pair_results
        resampler = s.resampler
        context = hashlib.blake2b(repr((codes, s.seed, s.n_resamples)).encode())
        if resampler is not None:
            context.update(repr((resampler.seed, resampler.n_resamples)).encode())
            context.update(np.ascontiguousarray(resampler.units.to_numpy(np.int64)).data)
        self._context = context.digest()
        self._coders: dict[str, bytes] = {}
        self._results: dict[tuple, Any] = {}
        self._made: list[tuple[tuple, tuple]] = []  # (key, place) of the results made now

    def _coder(self, name: str) -> bytes:
        found = self._coders.get(name)
        if found is None:
            units = self.coding.units_of[name].to_numpy(np.int64)
            rows = self.coding.rows_of[name]
            digest = hashlib.blake2b(repr((len(units), len(rows))).encode())  # no run-on
            digest.update(units.tobytes())
            for column in _COMPARED:
                values = np.ascontiguousarray(rows[column].to_numpy())
                digest.update(values.dtype.str.encode())
                digest.update(values.data)
            found = self._coders[name] = digest.digest()
        return found

    def result(self, place: tuple, make: Any, extra: bytes = b"") -> Any:
        """The result at ``place`` (its section, position and coders' names first, then
        anything else that tells it apart): the last analysis's when nothing it is made of
        changed (``extra``: a digest of anything else it reads), else ``make()``."""
        key = (place, self._context, *(self._coder(n) for n in place[2:4]), extra)
        found = self._found.get(key)
        if found is None:
            found = make()
            self._made.append((key, place))
        self._results[key] = found
        return found

    def keep(self, result: dict[str, Any]) -> None:
        """Keep this analysis's pair results (those made now from the JSON-ready ``result``)
        for the next analysis; the last analysis's others are dropped."""
        for key, place in self._made:
            self._results[key] = result[place[0]][place[1]]
        self.numbering.pair_results = self._results


# --------------------------------------------------------------------------------------------
# Cohen's kappa per code, pooled, per batch; Krippendorff's alpha
# --------------------------------------------------------------------------------------------


def presence(mine: pd.DataFrame, units: pd.Index, codes: list[str]) -> np.ndarray:
    """Units x codes 0/1 table of one coder's label rows ``mine`` (``label_rows`` made with
    ``codes``) on ``units``."""
    r = units.get_indexer(mine.unit_id)
    c = mine.code_id.to_numpy()  # label_rows: the code's position in ``codes``, -1 if none
    keep = (r >= 0) & (c >= 0)
    table = np.zeros((len(units), len(codes)))
    table[r[keep], c[keep]] = 1.0
    return table


def batches(frames: StudyFrames, units: pd.Index) -> pd.DataFrame:
    """Each unit's batch, in unit order: ``units.batch`` when set, else blocks of 50 messages
    (the case or response a sentence is of) by position within the unit set, a message in the
    batch of its first unit ("#1" = the set's first 50 messages; 003 Sec. 3.2.2)."""
    every = frames.memo.get("eppc_batches")  # every unit's, once per frames
    if every is None:
        every = _batches(frames.units.set_index("unit_id"), frames.sentences)
        frames.memo["eppc_batches"] = every
    return every[every.index.isin(units)]


def _batches(info: pd.DataFrame, sentences: pd.DataFrame) -> pd.DataFrame:
    """The units ``info`` (indexed by unit id) with their batch ``label``, sorted by unit set
    and position (units of one set have distinct positions, so the order is one)."""
    info = info[["unit_set", "position", "batch", "sentence_id"]]
    info = info.sort_values(["unit_set", "position"], kind="stable")
    keys = pd.DataFrame(
        {"unit_set": info.unit_set.to_numpy(), "message": _messages(info, sentences)}
    )
    met = keys.groupby(["unit_set", "message"], sort=False).ngroup()  # numbered as first met
    ordinal = met - met.groupby(keys.unit_set).transform("min")  # within the unit set
    fallback = "#" + (ordinal.to_numpy() // BATCH_SIZE + 1).astype(str)
    label = info.batch.fillna("").astype(str)
    info = info.assign(label=label.where(label != "", fallback))
    return info[["unit_set", "position", "batch", "label"]]


def _messages(info: pd.DataFrame, sentences: pd.DataFrame) -> np.ndarray:
    """Each unit's message as a number: 2 x the case id or 2 x the response id + 1 for its
    sentence's owner; a unit without a sentence is a message of its own (a negative number)."""
    owners = sentences.set_index("sentence_id")
    where = owners.index.get_indexer(info.sentence_id)  # -1: no sentence (NaN below)

    def owner(column: str) -> np.ndarray:
        return np.append(owners[column].to_numpy(dtype=float, na_value=np.nan), np.nan)[where]

    case, response = owner("case_id"), owner("response_id")
    message = np.where(np.isnan(case), 2 * response + 1, 2 * case)
    alone = -1 - np.arange(len(info), dtype=float)
    return np.where(where >= 0, message, alone).astype(np.int64)


def _pairs_first_met(first: Any, second: Any) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """Each row's (first, second) pair as a number, pairs numbered as first met, and the
    pairs in that order: each part factorized on its own, the pairs of numbers factorized
    again (the same order as factorizing the pairs of values, without making them)."""
    first_of, firsts = pd.factorize(first)
    second_of, seconds = pd.factorize(second)
    width = len(seconds) + 1
    pair_of, met = pd.factorize(first_of.astype(np.int64) * width + second_of)
    pairs = zip(firsts.take(met // width).tolist(), seconds.take(met % width).tolist(), strict=True)
    return pair_of, list(pairs)


@dataclass(frozen=True)
class BatchLayout:
    """The batches of a set of units (``batches``' rows): each batch's (unit set, label) in
    order of first unit, its number of units, and the units' rows (positions in the unit
    set) grouped by batch, each group starting at ``starts``."""

    keys: list[tuple[Any, str]]
    sizes: np.ndarray
    rows: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, info: pd.DataFrame, units: pd.Index) -> BatchLayout:
        batch_of, keys = _pairs_first_met(info.unit_set, info.label)
        sizes = np.bincount(batch_of, minlength=len(keys))
        rows = units.get_indexer(info.index)[np.argsort(batch_of, kind="stable")]
        return cls(keys, sizes, rows, np.concatenate([[0], np.cumsum(sizes)[:-1]]))

    @functools.cached_property
    def digest(self) -> bytes:
        """A digest of the layout (for :class:`KeptPairs`)."""
        digest = hashlib.blake2b(repr(self.keys).encode())
        for array in (self.sizes, self.rows, self.starts):
            digest.update(np.ascontiguousarray(array, dtype=np.int64).data)
        return digest.digest()

    def sums(self, blocks: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each block (units x codes) summed over each batch's units: batches x codes. The
        blocks hold 0 / 1 counts, so the sums are exact in any order (np.add.at adds one row
        at a time)."""
        return {
            name: np.add.reduceat(block[self.rows], self.starts, axis=0)
            if len(self.rows)
            else np.zeros((0, block.shape[1]))
            for name, block in blocks.items()
        }


def _kappa_batches(
    layout: BatchLayout, blocks: Mapping[str, np.ndarray], codes: list[str]
) -> list[dict[str, Any]]:
    """Per batch: Cohen's kappa pooled over the batch's (unit, code) items, and per code over
    the batch's units with each coder's yes count (no CI: a batch is small)."""
    keys, sizes, sums = layout.keys, layout.sizes, layout.sums(blocks)
    pooled = _finite(kappa_statistic({k: v.sum(axis=1) for k, v in sums.items()}))
    per_code = kappa_statistic(sums)
    yes_a, yes_b = sums["n10"] + sums["n11"], sums["n01"] + sums["n11"]
    # Made JSON-ready here (Python numbers, None for an undefined kappa): a large study has
    # thousands of batch x code entries, too many to walk again in ``jsonable``.
    kappas = [_finite(row) for row in np.asarray(per_code, dtype=float).tolist()]
    counts_a = yes_a.astype(np.int64).tolist()
    counts_b = yes_b.astype(np.int64).tolist()
    return JsonRows(
        {
            "unit_set": jsonable(unit_set),
            "batch": jsonable(label),
            "n_units": int(sizes[j]),
            "kappa": pooled[j],
            "per_code": [
                {"code": code, "n_yes_a": a, "n_yes_b": b, "kappa": k}
                for code, a, b, k in zip(codes, counts_a[j], counts_b[j], kappas[j], strict=True)
            ],
        }
        for j, (unit_set, label) in enumerate(keys)
    )


def _finite(values: Any) -> list[float | None]:
    """Python floats, None where not finite (as :func:`jsonable` makes them)."""
    return [v if math.isfinite(v) else None for v in np.asarray(values, dtype=float).tolist()]


def _kappa_tables(sums: Mapping[str, np.ndarray], code: int | None = None) -> np.ndarray:
    """Cohen's kappa from a population of ``kappa_pair``'s columns: of code ``code``, or
    pooled over (unit, code) items when None. The 2x2 tables' n00 is the units' count less
    the other three (the population sums three blocks and a column of ones, not four
    blocks: its resampled sums are exact integers either way, so the figures are the same)."""
    n01, n10, n11 = sums["n01"], sums["n10"], sums["n11"]
    if code is None:
        units = sums["units"] * n01.shape[1]
        n01, n10, n11 = n01.sum(axis=1), n10.sum(axis=1), n11.sum(axis=1)
    else:
        units = sums["units"]
        n01, n10, n11 = n01[:, code], n10[:, code], n11[:, code]
    return binary_kappa(units - n01 - n10 - n11, n01, n10, n11)


def kappa_pair(c: Coding, a: str, b: str, frames, codes: list[str], s: Settings) -> dict:
    """Cohen's kappa between coders a and b on code presence per sentence (seed 003, Section
    3.2.2): per code, pooled over (sentence, code) items, and per batch of units in order,
    pooled and per code (the paper tracks kappa batch by batch of 50 messages)."""
    units = c.shared(a, b)
    x = presence(c.rows_of[a], units, codes)
    y = presence(c.rows_of[b], units, codes)
    blocks = {
        "n00": (1 - x) * (1 - y),
        "n01": (1 - x) * y,
        "n10": x * (1 - y),
        "n11": x * y,
    }
    counted = {"n01": blocks["n01"], "n10": blocks["n10"], "n11": blocks["n11"]}
    pop = s.population({**counted, "units": np.ones(len(units))}, units)
    yes_a, yes_b = x.sum(axis=0).tolist(), y.sum(axis=0).tolist()
    per_code = [
        {
            "code": code,
            "n_yes_a": int(yes_a[i]),
            "n_yes_b": int(yes_b[i]),
            "kappa": pop.figure(lambda v, i=i: _kappa_tables(v, i)),
        }
        for i, code in enumerate(codes)
    ]
    per_batch = _kappa_batches(c.batch_layout(frames, units), blocks, codes)
    return {
        "annotator_a": a,
        "annotator_b": b,
        "n_units": len(units),
        "pooled": pop.figure(_kappa_tables),
        "per_code": per_code,
        "per_batch": per_batch,
    }


def kappas(
    c: Coding,
    coders: list[str],
    frames: StudyFrames,
    codes: list[str],
    s: Settings,
    kept: KeptPairs | None = None,
) -> list[dict[str, Any]]:
    """:func:`kappa_pair` of each pair of people who coded units in common."""
    out = []
    for a, b in itertools.combinations(coders, 2):
        units = c.shared(a, b)
        if units.empty:
            continue

        def made(a: str = a, b: str = b) -> dict[str, Any]:
            return kappa_pair(c, a, b, frames, codes, s)

        if kept is None:
            out.append(made())
            continue
        batches_of = c.batch_layout(frames, units).digest
        out.append(kept.result(("kappa", len(out), a, b), made, batches_of))
    return out


def alpha_all(c: Coding, coders: list[str], codes: list[str], s: Settings) -> dict:
    """Krippendorff's alpha (nominal) of code presence over every coder (people), per code and
    pooled over (sentence, code) items; units coded by one person only are not pairable."""
    every = [c.units_of[n].to_numpy(np.int64) for n in coders]
    units = pd.Index(np.unique(np.concatenate(every)), name="unit_id")
    raters = np.zeros(len(units))
    present = np.zeros((len(units), len(codes)))
    for name in coders:
        raters[units.get_indexer(c.units_of[name])] += 1
        present += presence(c.rows_of[name], units, codes)
    pop = s.population(presence_alpha_blocks(raters, present), units[raters >= 2])
    return {
        "n_coders": len(coders),
        "n_units": pop.n_units,
        "pooled": pop.figure(presence_alpha),
        "per_code": [
            {"code": code, "alpha": pop.figure(lambda v, i=i: presence_alpha(v, i))}
            for i, code in enumerate(codes)
        ],
    }


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _empty(codes: list[str]) -> dict[str, Any]:
    return {
        "n_gold_units": 0,
        "n_model_answers": 0,
        "codes": codes,
        "vs_gold": [],
        "between_annotators": [],
        "kappa": [],
        "alpha": None,
    }


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """Every EPPCMinerBen table (seed 003) computed from the project's eppc answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    answers = people(frames, KIND)
    codes = [c.id for c in s.catalogs.eppc_codes]
    if answers.empty:
        return jsonable({**answer_counts(answers), **_empty(codes)})
    numbering = evidence_texts(frames)
    coding = Coding(answers, compared_rows(answers, frames, codes), matcher=numbering)
    kept = KeptPairs(coding, codes, s, numbering)
    coders = ordered_names(humans(answers).annotator)
    gold = answers[answers.is_gold.astype(bool)]
    result = jsonable(
        {
            **answer_counts(humans(answers)),
            "n_gold_units": int(gold.unit_id.nunique()),
            "n_model_answers": len(models(answers)),
            "codes": codes,
            "vs_gold": versus_gold(coding, codes, s, kept),
            "between_annotators": between_annotators(coding, coders, codes, s, kept),
            "kappa": kappas(coding, coders, frames, codes, s, kept),
            "alpha": alpha_all(coding, coders, codes, s) if len(coders) >= 2 else None,
        }
    )
    kept.keep(result)
    return result
