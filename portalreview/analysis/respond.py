"""Clinicians' own responses (seed 000) from respond answers.

A respond answer is either a theme-guided response (one box per theme; a filled box means the
response includes that theme, Appendix G) or a clinician's edit of an LLM draft. Reported:

* theme proportions: the share of theme-guided responses that include each theme (Table 6);
* theme inter-annotator agreement on cases answered by several clinicians: strict inclusion,
  strict exclusion and strict agreement per theme (Table 3, Appendix E.1) and Krippendorff's
  alpha on theme presence per theme and pooled;
* pairwise TF-IDF cosine similarity between clinicians' composed responses - a stand-in for
  Table 11's embedding cosine that needs no download (see ``metrics.tfidf_cosine_matrix``);
  a theme-guided response is composed as ``store.kinds.respond.compose`` does (the filled
  boxes in catalog order joined by a space), an edited draft is its final text;
* editing load of edited drafts (:mod:`portalreview.analysis.editing`: draft words kept,
  deleted and added, per answer, pooled, per annotator and per draft source beside the drafts'
  Edit-F1 estimate) and time on task.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from portalreview.analysis import editing as edits
from portalreview.analysis._bootstrap import presence_alpha, presence_alpha_blocks
from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    humans,
    jsonable,
    people,
    safe_ratio,
    spliced_or_whole,
)
from portalreview.analysis._kept import kept_figures
from portalreview.analysis._memo import Memo
from portalreview.domain.catalogs import Catalogs
from portalreview.metrics._common import composed
from portalreview.store.frames import StudyFrames
from portalreview.store.kinds.respond import compose

if TYPE_CHECKING:
    from portalreview.analysis._bootstrap import Population

KIND = "respond"
#: The result's keys (after the counts) when the study has no respond answer.
EMPTY: dict[str, Any] = {
    "n_theme_guided": 0,
    "n_edit_draft": 0,
    "theme_proportions": [],
    "theme_agreement": None,
    "similarity": None,
    "editing_load": edits.EMPTY,
    "time_on_task": [],
}


def respond_answers(frames: StudyFrames) -> pd.DataFrame:
    """People's respond answers with their mode, base draft and final text."""
    answers = humans(people(frames, KIND))
    return answers.merge(frames.respond_answers, on="answer_id")


def theme_counts(answers: pd.DataFrame, frames: StudyFrames, themes: list[str]) -> pd.DataFrame:
    """Theme-guided answers x themes: 1 when the answer's box for the theme is filled."""
    guided = answers[answers["mode"] == "theme_guided"]
    parts = frames.respond_parts[frames.respond_parts.answer_id.isin(guided.answer_id)]
    table = np.zeros((len(guided), len(themes)))
    rows = pd.Index(guided.answer_id).get_indexer(parts.answer_id)
    cols = pd.Index(themes).get_indexer(parts.theme)
    keep = (rows >= 0) & (cols >= 0)
    table[rows[keep], cols[keep]] = 1.0
    return pd.DataFrame(table, index=guided.answer_id.to_numpy(), columns=themes)


# --------------------------------------------------------------------------------------------
# Table 6 and Table 3
# --------------------------------------------------------------------------------------------


def proportions(guided: pd.DataFrame, table: pd.DataFrame, themes: list[str], s: Settings):
    """Share of theme-guided responses including each theme (Table 6), pooled over people
    with CIs over units, and per annotator."""
    units = guided.set_index("answer_id").unit_id.loc[table.index].to_numpy()
    per_unit = table.groupby(units).sum()
    n = pd.Series(units).value_counts().reindex(per_unit.index).to_numpy()
    columns = {"n": n, "k": per_unit.to_numpy()}

    def make(pop: Population) -> dict[str, Any]:
        return {
            i: pop.figure(lambda x, i=i: safe_ratio(x["k"][:, i], x["n"]))
            for i in range(len(themes))
        }

    shares = kept_figures("respond.proportions", s, columns, per_unit.index, make, tuple(themes))
    who = guided.set_index("answer_id").annotator.loc[table.index].to_numpy()
    by_annotator = table.groupby(who).mean()
    return [
        {
            "theme": theme,
            "n_responses_including": int(table[theme].sum()),
            "share": shares[i],
            "share_by_annotator": {a: by_annotator.loc[a, theme] for a in by_annotator.index},
        }
        for i, theme in enumerate(themes)
    ]


def theme_iaa(guided: pd.DataFrame, table: pd.DataFrame, themes: list[str], s: Settings):
    """Strict inclusion / exclusion / agreement per theme (Table 3) and alpha on theme
    presence, over the cases answered by two or more clinicians."""
    units = guided.set_index("answer_id").unit_id.loc[table.index].to_numpy()
    k = table.groupby(units).sum()
    m = pd.Series(units).value_counts().reindex(k.index).to_numpy(float)
    shared = m >= 2
    ids = k.index[shared]
    k, m = k.to_numpy(float)[shared], m[shared]
    blocks = {
        "one": np.ones(len(m)),
        "inc": (k == m[:, None]).astype(float),
        "exc": (k == 0).astype(float),
        **presence_alpha_blocks(m, k),
    }
    figures = kept_figures(
        "respond.theme_iaa",
        s,
        blocks,
        ids,
        functools.partial(_iaa_figures, themes=themes),
        tuple(themes),
    )
    rows = [
        {"theme": theme, **{name: figures[(i, name)] for name in _IAA_FIGURES}}
        for i, theme in enumerate(themes)
    ]
    return {
        "n_units": int(shared.sum()),
        "n_responses": int(m.sum()),
        "per_theme": rows,
        "alpha_pooled": figures["alpha_pooled"],
    }


_IAA_FIGURES = ("strict_inclusion", "strict_exclusion", "strict_agreement", "alpha")


def _iaa_figures(pop: Population, themes: list[str]) -> dict[Any, Any]:
    """:func:`theme_iaa`'s figures: per (theme's position, figure's name), and the pooled
    alpha."""
    out: dict[Any, Any] = {}
    for i, _ in enumerate(themes):
        out[i, "strict_inclusion"] = pop.figure(lambda x, i=i: safe_ratio(x["inc"][:, i], x["one"]))
        out[i, "strict_exclusion"] = pop.figure(lambda x, i=i: safe_ratio(x["exc"][:, i], x["one"]))
        out[i, "strict_agreement"] = pop.figure(
            lambda x, i=i: safe_ratio(x["inc"][:, i] + x["exc"][:, i], x["one"])
        )
        out[i, "alpha"] = pop.figure(lambda x, i=i: presence_alpha(x, i))
    out["alpha_pooled"] = pop.figure(presence_alpha)
    return out


# --------------------------------------------------------------------------------------------
# Table 11 (TF-IDF cosine stand-in)
# --------------------------------------------------------------------------------------------


def people_composed_texts(frames: StudyFrames, themes: list[str]) -> pd.Series:
    """:func:`composed_texts` of the people's respond answers (``respond_answers``), made once
    per frames and themes (and, in a live report, only for the answers saved since:
    ``analysis._common.spliced``)."""
    key = ("respond_composed_texts", tuple(themes))
    found = frames.memo.get(key)
    if found is None:
        answers = respond_answers(frames)

        def make(ids: pd.Series) -> pd.DataFrame:
            mine = composed_texts(answers[answers.answer_id.isin(ids)], frames, themes)
            return pd.DataFrame({"answer_id": mine.index, "text": mine.to_numpy()})

        found = spliced_or_whole(frames, key, answers.answer_id, make)
    return pd.Series(found.text.to_numpy(), index=found.answer_id.to_numpy())


def composed_texts(answers: pd.DataFrame, frames: StudyFrames, themes: list[str]) -> pd.Series:
    """The response a patient would read, per answer (``store.kinds.respond.compose``): an
    edited draft's final text; otherwise the answer's boxes of the catalog's themes that hold
    more than blanks, stripped, in catalog order, joined by a space (a box saved twice counts
    as its last version, as in compose's dict of parts).

    The boxes are ordered and joined per answer with numpy and one join per answer, not a
    ``compose`` call on a dict per answer: the same texts, without building 40,000 dicts on a
    large study (the tests check it against ``compose``)."""
    if len(set(themes)) != len(themes):  # compose would repeat a box: keep its own loop
        return _composed_one_by_one(answers, frames, themes)
    parts = frames.respond_parts[frames.respond_parts.answer_id.isin(answers.answer_id)]
    parts = parts[~parts.duplicated(["answer_id", "theme"], keep="last")]
    stripped = [text.strip() for text in parts.text.tolist()]
    order = pd.Index(themes).get_indexer(parts.theme)
    keep = np.flatnonzero((order >= 0) & np.fromiter(map(bool, stripped), bool, len(stripped)))
    owner = parts.answer_id.to_numpy()[keep]
    rows = keep[np.lexsort((order[keep], owner))]
    owner = parts.answer_id.to_numpy()[rows]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]).tolist() if len(rows) else []
    ends = [*starts[1:], len(rows)] if starts else []
    pieces = [stripped[i] for i in rows.tolist()]
    joined = {
        answer: " ".join(pieces[a:b])
        for answer, a, b in zip(owner[starts].tolist(), starts, ends, strict=True)
    }
    texts = [
        (final or "") if mode == "edit_draft" else joined.get(answer, "")
        for answer, mode, final in zip(
            answers.answer_id.tolist(),
            answers["mode"].tolist(),
            answers.final_text.tolist(),
            strict=True,
        )
    ]
    return pd.Series(texts, index=answers.answer_id.to_numpy())


def _composed_one_by_one(
    answers: pd.DataFrame, frames: StudyFrames, themes: list[str]
) -> pd.Series:
    """:func:`composed_texts` with ``compose`` itself on each answer's dict of boxes."""
    parts = frames.respond_parts[frames.respond_parts.answer_id.isin(answers.answer_id)]
    boxes: dict[int, dict[str, str]] = {}
    for a, theme, text in zip(
        parts.answer_id.tolist(), parts.theme.tolist(), parts.text.tolist(), strict=True
    ):
        boxes.setdefault(a, {})[theme] = text
    texts = [
        compose({"mode": mode, "parts": boxes.get(a, {}), "final_text": final or ""}, themes)
        for a, mode, final in zip(
            answers.answer_id.tolist(),
            answers["mode"].tolist(),
            answers.final_text.tolist(),
            strict=True,
        )
    ]
    return pd.Series(texts, index=answers.answer_id.to_numpy())


def pair_cosines(
    answers: pd.DataFrame, texts: pd.Series, kept: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Cosine of the TF-IDF vectors of two clinicians' responses to the same case, for every
    pair of clinicians on every shared case; one TF-IDF model fitted on all non-blank texts
    (scikit-learn defaults, as ``metrics.tfidf_cosine_matrix``; its term counts taken from
    ``kept``, :func:`people_term_counts` of ``texts``, when given, else from
    :func:`tfidf_matrix`'s cache). Texts without a token give no value."""
    if kept is not None and np.array_equal(kept.answer_id.to_numpy(), texts.index.to_numpy()):
        blank = kept.blank.to_numpy(bool)
        known = (kept.counts.to_numpy()[~blank].tolist(), kept.generation.to_numpy()[~blank])
    else:
        values = texts.tolist()
        blank = np.fromiter((_blank(t) for t in values), bool, len(values))
        known = None
    present = texts[~blank]
    rows = answers[answers.answer_id.isin(present.index)][["answer_id", "unit_id", "annotator"]]
    # The annotators' ranks in sorted order compare as their names do (fewer string compares).
    rows = rows.assign(rank=pd.factorize(rows.annotator, sort=True)[0])
    pairs = rows.merge(rows, on="unit_id", suffixes=("_a", "_b"))
    pairs = pairs[pairs.rank_a < pairs.rank_b].drop(columns=["rank_a", "rank_b"])
    pairs = pairs.reset_index(drop=True)
    if pairs.empty:
        return pairs.assign(cosine=[])
    try:
        matrix = tfidf_matrix(present.tolist(), known).tocsr()
    except ValueError:  # no text has a token
        return pairs.iloc[:0].assign(cosine=[])
    where = pd.Series(np.arange(len(present)), index=present.index)
    left = matrix[where.loc[pairs.answer_id_a].to_numpy()]
    right = matrix[where.loc[pairs.answer_id_b].to_numpy()]
    cosine = np.asarray(left.multiply(right).sum(axis=1)).ravel()
    empty = (left.getnnz(axis=1) == 0) | (right.getnnz(axis=1) == 0)
    pairs["cosine"] = np.where(empty, np.nan, np.clip(cosine, -1.0, 1.0))
    return pairs.dropna(subset=["cosine"])


def _blank(text: Any) -> bool:
    return isinstance(text, str) and not text.strip()


def people_term_counts(frames: StudyFrames, themes: list[str]) -> pd.DataFrame:
    """Per people's respond answer (:func:`people_composed_texts`' order): whether its text is
    blank and, for a text that is not, its term counts (``_TERM_COUNTS``' value) and the term
    numbering they use (``_NUMBERING``); made once per frames and themes (and, in a live
    report, only for the answers saved since: ``analysis._common.spliced``), so a refresh
    does not look up every text in the cache again."""
    key = ("respond_term_counts", tuple(themes))
    found = frames.memo.get(key)
    if found is None:
        texts = people_composed_texts(frames, themes)

        def make(ids: pd.Series) -> pd.DataFrame:
            return _term_count_rows(texts[texts.index.isin(ids)])

        found = spliced_or_whole(frames, key, pd.Series(texts.index), make)
    return found


def _term_count_rows(texts: pd.Series) -> pd.DataFrame:
    """:func:`people_term_counts`' rows of ``texts`` (a text that is not a string: None)."""
    values = texts.tolist()
    blank = np.fromiter((_blank(t) for t in values), bool, len(values))
    counted = [i for i, t in enumerate(values) if isinstance(t, str) and not blank[i]]
    counts = np.full(len(values), None, dtype=object)
    with _TERMS_LOCK:
        if counted:
            analyze = _vectorizer_class()().build_analyzer()
            counts[counted] = _counts_of([values[i] for i in counted], analyze)
        numbering = _NUMBERING[0]
    return pd.DataFrame(
        {
            "answer_id": texts.index.to_numpy(),
            "blank": blank,
            "counts": counts,
            "generation": np.full(len(values), numbering, dtype=np.int64),
        }
    )


class _TermCountsMemo(Memo):
    """The term-count cache and the term numbering its values use, emptied together (a kept
    value's term ids would name other terms once the numbering restarts)."""

    def clear(self) -> None:
        with _TERMS_LOCK:
            super().clear()
            _TERM_IDS.clear()
            _TERMS.clear()
            _NUMBERING[0] += 1


#: Each text's term counts under scikit-learn's default TF-IDF tokenisation, kept for the
#: process. Why: tokenising every response for the TF-IDF fit is most of the similarity
#: table's cost, and a refresh after a few new answers meets every other response again.
#: Key: the text - all its counts depend on (the vectoriser's settings are its defaults,
#: checked before the cache is used). Value: the text's distinct terms in the order they first
#: occur (as ids of ``_TERM_IDS``), then their counts: 2k int32 as bytes. Bound: 100,000
#: texts, least recently used dropped first (a 10,000-case study has 40,000 respond answers:
#: 19.1 MiB measured with the keys). ``_TERM_IDS`` numbers every term met
#: (``_TERMS`` lists them by id); past 2,000,000 terms it restarts, emptying the cache with
#: it (``_NUMBERING`` counts the restarts: counts kept elsewhere are valid while it holds).
#: ``_TERMS_LOCK`` guards the numbering and its use.
_TERMS_LOCK = threading.RLock()
_NUMBERING = [0]
_TERM_IDS: dict[str, int] = {}
_TERMS: list[str] = []
_MAX_TERMS = 2_000_000
_TERM_COUNTS = _TermCountsMemo("respond.tfidf_term_counts", max_entries=100_000)


def tfidf_matrix(texts: list[str], known: tuple[list, np.ndarray] | None = None) -> Any:
    """scikit-learn's ``TfidfVectorizer().fit_transform`` (default settings) of ``texts`` in
    composed form (NFC: :func:`_default_tokens`), with the
    term counts of each text taken from ``known`` (each text's ``_TERM_COUNTS`` value or
    None, and the ``_NUMBERING`` it was made in: :func:`people_term_counts`) or from
    ``_TERM_COUNTS`` instead of tokenising it again.

    Only the counting step (``_count_vocab``: the vocabulary in the order terms are first met
    and the per-text counts, as a CSR matrix with sorted indices) is replaced; the
    vocabulary's sorting, the idf weights and the L2 normalisation stay scikit-learn's, so
    the matrix is the same, bit for bit (the tests compare its arrays). Raises ValueError
    when no text has a term, as scikit-learn does."""
    return _vectorizer_class()().fit_transform(_Texts(texts, known))


class _Texts(list):
    """Texts for the vectoriser, with the term counts already known of some (``known``)."""

    def __init__(self, texts: list[str], known: tuple[list, np.ndarray] | None) -> None:
        super().__init__(texts)
        self.known = known


@functools.cache
def _vectorizer_class() -> type:
    """A ``TfidfVectorizer`` whose counting step reads the term-count cache (made on first
    use: scikit-learn is imported only when a similarity table is computed)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    defaults = TfidfVectorizer().get_params()

    class CachedCountsTfidfVectorizer(TfidfVectorizer):
        def _count_vocab(self, raw_documents: Any, fixed_vocab: bool) -> tuple[dict, Any]:
            if fixed_vocab or self.get_params() != defaults:
                return super()._count_vocab(raw_documents, fixed_vocab)
            known = getattr(raw_documents, "known", None)
            return _cached_counts(list(raw_documents), self.build_analyzer(), self.dtype, known)

    return CachedCountsTfidfVectorizer


def _cached_counts(
    texts: list[str], analyze: Any, dtype: Any, known: tuple[list, np.ndarray] | None = None
) -> tuple[dict[str, int], Any]:
    """``CountVectorizer._count_vocab(texts, False)``'s (vocabulary, counts) from the cache
    (or ``known``, see :func:`tfidf_matrix`): the vocabulary numbers terms in the order they
    are first met (text by text, each text's terms in the order they occur); the counts are a
    CSR matrix of ``dtype`` (the vectoriser's) with sorted indices."""
    import scipy.sparse as sp

    with _TERMS_LOCK:  # the ids of the counts and of the vocabulary must be one numbering
        if len(_TERMS) > _MAX_TERMS:
            _TERM_COUNTS.clear()
        counts = _counts_of(texts, analyze, _still_valid(known, len(texts)))
        # Each value: its k term ids, then their k counts (int32); all texts' values at once.
        flat = np.frombuffer(b"".join(counts), dtype=np.int32)
        lengths = np.fromiter(map(len, counts), np.int64, len(counts)) // 8
        is_term = np.repeat(np.tile([True, False], len(counts)), np.repeat(lengths, 2))
        codes, first_met = pd.factorize(flat[is_term], sort=False)
        vocabulary = {_TERMS[t]: i for i, t in enumerate(first_met.tolist())}
    if not vocabulary:
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
    index = np.int64 if lengths.sum() > np.iinfo(np.int32).max else np.int32
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index)
    matrix = sp.csr_matrix(
        (flat[~is_term].astype(np.intc), codes.astype(index), indptr),
        shape=(len(texts), len(vocabulary)),
        dtype=dtype,
    )
    matrix.sort_indices()
    return vocabulary, matrix


def _still_valid(known: tuple[list, np.ndarray] | None, n: int) -> list | None:
    """The known counts made in the numbering of now (None for the others), or None when
    there are none. Called with ``_TERMS_LOCK`` held."""
    if known is None or len(known[0]) != n:
        return None
    values, numbering = known
    valid = np.asarray(numbering) == _NUMBERING[0]
    return [v if ok else None for v, ok in zip(values, valid.tolist(), strict=True)]


def _counts_of(texts: list[str], analyze: Any, known: list | None = None) -> list[bytes]:
    """Each text's term counts (:func:`_term_counts_many`): ``known``'s where it holds one, else the
    cache's, else made (and kept). Called with ``_TERMS_LOCK`` held."""
    if known is None:
        counts = _TERM_COUNTS.get_many(texts)
    else:
        counts = list(known)
        missing = [i for i, found in enumerate(counts) if found is None]
        for i, found in zip(missing, _TERM_COUNTS.get_many(texts[i] for i in missing), strict=True):
            counts[i] = found
    return _TERM_COUNTS.fill_all(counts, texts, functools.partial(_term_counts_of, analyze))


def _term_counts_of(analyze: Any, texts: list[str]) -> list[bytes]:
    """:func:`_term_counts_many` of ``analyze(text)`` of each text (``analyze``: scikit-learn's
    default analyser), ``_TERMS_CHUNK`` texts at a time."""
    out: list[bytes] = []
    for start in range(0, len(texts), _TERMS_CHUNK):
        chunk = texts[start : start + _TERMS_CHUNK]
        out += _term_counts_many([_default_tokens(text, analyze) for text in chunk])
    return out


#: Texts tokenised and counted together (bounds the tokens held at once: a few MiB).
_TERMS_CHUNK = 4096

#: scikit-learn's default token pattern ``(?u)\b\w\w+\b`` on lower-cased ASCII text: there a
#: word character is one of these, and findall takes each run of them whole (it starts
#: only where a run starts), so a run of two or more is a token and the boundaries hold.
_ASCII_TOKEN = re.compile(r"[0-9a-z_]{2,}")


def _default_tokens(text: str, analyze: Any) -> list[str]:
    """``analyze`` (scikit-learn's default analyser: lower case, then the token pattern) of
    ``text`` in composed form (NFC, as ``metrics.tfidf_cosine_matrix`` reads it), with a
    narrower pattern of the same tokens when the lowered text is ASCII (about a quarter
    faster; NFC leaves such a text's tokens as they are)."""
    lowered = text.lower()
    return _ASCII_TOKEN.findall(lowered) if lowered.isascii() else analyze(composed(text))


def _term_counts_many(token_lists: list[list[str]]) -> list[bytes]:
    """Each token list's term counts: its distinct terms' ids (``_TERM_IDS``, new terms
    numbered as first met, list by list) in the order they first occur, then how often each
    occurs, as 2k int32 in bytes (a third of the memory of a small array). Counted for all
    lists at once with numpy. Called with ``_TERMS_LOCK`` held."""
    lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists))
    n_tokens = int(lengths.sum())
    if not n_tokens:
        return [b""] * len(token_lists)
    tokens = np.fromiter(itertools.chain.from_iterable(token_lists), object, n_tokens)
    codes, terms = pd.factorize(tokens, sort=False)
    ids = np.fromiter(map(_term_id, terms.tolist()), np.int64, len(terms))
    # Each (list, term) pair as first met: lists are laid end to end, so within a list its
    # terms come in the order they first occur.
    owner = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    pair, first = pd.factorize(owner * len(terms) + codes, sort=False)
    counts = np.bincount(pair, minlength=len(first))
    owner = first // len(terms)
    per_list = np.bincount(owner, minlength=len(token_lists))
    starts = np.cumsum(per_list) - per_list
    # List i's value: its k term ids, then their k counts, at int32 slots 2 * starts[i] on.
    within = np.arange(len(first)) - starts[owner]
    slots = np.empty(2 * len(first), dtype=np.int32)
    slots[2 * starts[owner] + within] = ids[first % len(terms)]
    slots[2 * starts[owner] + per_list[owner] + within] = counts
    data = slots.tobytes()
    return [
        data[8 * s : 8 * (s + k)] for s, k in zip(starts.tolist(), per_list.tolist(), strict=True)
    ]


def _term_id(token: str) -> int:
    """The id of ``token`` in ``_TERM_IDS``, numbered as the next one when new. Called with
    ``_TERMS_LOCK`` held."""
    found = _TERM_IDS.get(token)
    if found is None:
        found = _TERM_IDS[token] = len(_TERMS)
        _TERMS.append(token)
    return found


def similarity(
    answers: pd.DataFrame, texts: pd.Series, s: Settings, kept: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Mean pairwise TF-IDF cosine per pair of clinicians and overall (CI over cases;
    ``kept``: see :func:`pair_cosines`)."""
    pairs = pair_cosines(answers, texts, kept)
    per_unit = pairs.groupby("unit_id").cosine.agg(["sum", "size"])
    columns = {"total": per_unit["sum"].to_numpy(), "n": per_unit["size"].to_numpy()}
    mean = kept_figures("respond.similarity", s, columns, per_unit.index, _mean_cosine)
    by_pair = pairs.groupby(["annotator_a", "annotator_b"]).cosine.agg(["mean", "size"])
    return {
        "method": "tfidf_cosine",
        "n_comparisons": len(pairs),
        "mean": mean["mean"],
        "by_pair": [
            {
                "annotator_a": a,
                "annotator_b": b,
                "mean_cosine": r["mean"],
                "n_units": int(r["size"]),
            }
            for (a, b), r in by_pair.iterrows()
        ],
    }


# --------------------------------------------------------------------------------------------
# Editing load and time
# --------------------------------------------------------------------------------------------


def _mean_cosine(pop: Population) -> dict[str, Any]:
    return {"mean": pop.figure(lambda x: safe_ratio(x["total"], x["n"]))}


def time_on_task(answers: pd.DataFrame) -> list[dict[str, Any]]:
    """Active seconds per mode: answers, mean and median (no CI: a description)."""
    grouped = answers.groupby("mode").active_seconds.agg(["size", "mean", "median"])
    return [
        {
            "mode": mode,
            "n_answers": int(r["size"]),  # (a row of floats: the size as 23.0)
            "mean_seconds": r["mean"],
            "median_seconds": r["median"],
        }
        for mode, r in grouped.iterrows()
    ]


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """The respond tables of seed 000 computed from the project's respond answers."""
    s = _settings(frames, seed, n_resamples, catalogs)
    themes = [t.id for t in s.catalogs.themes]
    answers = respond_answers(frames)
    if answers.empty:
        return jsonable({**answer_counts(answers), **EMPTY})
    guided = answers[answers["mode"] == "theme_guided"]
    table = theme_counts(answers, frames, themes)
    texts = people_composed_texts(frames, themes)
    modes = answers["mode"].value_counts()
    return jsonable(
        {
            **answer_counts(answers),
            "n_theme_guided": int(modes.get("theme_guided", 0)),
            "n_edit_draft": int(modes.get("edit_draft", 0)),
            "theme_proportions": proportions(guided, table, themes, s),
            "theme_agreement": theme_iaa(guided, table, themes, s),
            "similarity": similarity(answers, texts, s, people_term_counts(frames, themes)),
            "editing_load": edits.editing(answers, frames, s),
            "time_on_task": time_on_task(answers),
        }
    )


def _settings(
    frames: StudyFrames, seed: int, n_resamples: int, catalogs: Catalogs | None
) -> Settings:
    return Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))


def analyse_piece(
    frames: StudyFrames,
    key: str,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> Any:
    """``analyse(frames, ...)[key]`` alone, for a key of ``analysis.PIECES["respond"]`` (the
    editing load, which also reads the match answers): the same value, computed without the
    rest (a live report recomputes it alone after a match answer)."""
    if key != "editing_load":
        raise KeyError(f"respond has no piece {key!r}")
    answers = respond_answers(frames)
    if answers.empty:
        return jsonable(EMPTY[key])
    s = _settings(frames, seed, n_resamples, catalogs)
    return jsonable(edits.editing(answers, frames, s))
