"""Agreement between annotators, and between a model judge and annotators.

Sources: seed 000 (EditJudge paper) Section 4.2 and Appendix E.1 (theme strict inclusion /
exclusion / agreement, Table 3; pairwise cosine similarity, Table 11) and Appendix C.1 (judge
agreement measures, Table 8); seed 002 (PMR-Bench) Appendix A.1 (percent agreement and
Krippendorff's alpha, Table 4); seed 003 (EPPCMinerBen) Section 3.2.2 (Cohen's kappa tracked
per annotation batch).

Krippendorff's alpha comes from the ``krippendorff`` package, Cohen's kappa from scikit-learn,
TF-IDF from scikit-learn; the theme IAA, percent agreement and judge measures are hand-written
counts (no library computes them).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from portalreview.metrics._common import composed, is_missing, ratio, sorted_labels

Level = Literal["nominal", "ordinal", "interval", "ratio"]


# --------------------------------------------------------------------------------------------
# Theme inclusion agreement (seed 000, Table 3)
# --------------------------------------------------------------------------------------------


def theme_inclusion_agreement(
    responses: Sequence[Sequence[Collection[str]]],
    *,
    themes: Sequence[str] | None = None,
    min_raters: int = 2,
) -> pd.DataFrame:
    """Strict inclusion, strict exclusion and strict agreement per theme (seed 000, Table 3).

    ``responses[u]`` holds, for case ``u``, one collection of theme labels per clinician who
    answered it (the themes that clinician's response contains). In the paper's terms
    (Appendix E.1): for each theme, strict inclusion is the share of cases in which every
    clinician's response included the theme, strict exclusion the share in which none did, and
    strict agreement their sum. The denominator is every counted case, not only cases where
    someone used the theme - Table 3's rows add up that way (0.03 + 0.33 = 0.36).

    Conventions: a case counts when at least ``min_raters`` clinicians answered it ("all" then
    means all who answered); fewer is skipped. Columns: strict_inclusion, strict_exclusion,
    strict_agreement, n_units. No countable case is a ValueError.
    """
    if min_raters < 2:
        raise ValueError(f"min_raters must be at least 2, got {min_raters}")
    units: list[list[set[str]]] = []
    for u, answers in enumerate(responses):
        if isinstance(answers, (str, bytes)):
            raise ValueError(f"responses[{u}] must be a list of per-rater theme collections")
        sets = []
        for r, labels in enumerate(answers):
            if isinstance(labels, (str, bytes)) or any(not isinstance(x, str) for x in labels):
                raise ValueError(f"responses[{u}][{r}] must be a collection of theme labels")
            sets.append(set(labels))
        if len(sets) >= min_raters:
            units.append(sets)
    if not units:
        raise ValueError(f"no case was answered by at least {min_raters} raters")
    seen = {x for sets in units for s in sets for x in s}
    labels = list(themes) if themes is not None else sorted_labels(seen)
    unknown = seen - set(labels)
    if unknown:
        raise ValueError(f"theme labels not in themes: {sorted(unknown)}")
    rows = []
    for theme in labels:
        inc = sum(all(theme in s for s in sets) for sets in units) / len(units)
        exc = sum(all(theme not in s for s in sets) for sets in units) / len(units)
        rows.append(
            {
                "theme": theme,
                "strict_inclusion": inc,
                "strict_exclusion": exc,
                "strict_agreement": inc + exc,
                "n_units": len(units),
            }
        )
    columns = ["theme", "strict_inclusion", "strict_exclusion", "strict_agreement", "n_units"]
    return pd.DataFrame(rows, columns=columns).set_index("theme")


# --------------------------------------------------------------------------------------------
# Chance-corrected coefficients
# --------------------------------------------------------------------------------------------


def _as_table(data: Any, name: str) -> np.ndarray:
    """Units x raters as a 2-D object array with None for missing; ValueError if not 2-D."""
    if isinstance(data, pd.DataFrame):
        array = data.to_numpy(dtype=object)
    else:
        try:
            array = np.asarray(data, dtype=object)
        except ValueError as exc:
            raise ValueError(f"{name} must be a rectangular table of units x raters") from exc
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (units x raters), got {array.ndim}-D")
    if array.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D table of units x raters")
    out = np.empty(array.shape, dtype=object)
    for index, value in np.ndenumerate(array):
        out[index] = None if is_missing(value) else value
    return out


def _pairable_mask(table: np.ndarray) -> np.ndarray:
    return (table != None).sum(axis=1) >= 2  # noqa: E711 - elementwise test on an object array


def krippendorff_alpha(data: Any, *, level: Level = "nominal") -> float:
    """Krippendorff's alpha for a units x raters table (seed 002, Appendix A.1, Table 4).

    ``data`` is a 2-D array or DataFrame, one row per unit and one column per rater, with NaN or
    None where a rater gave no answer. ``level`` is the level of measurement: "nominal"
    (values may be any hashable; they are coded as categories first), "ordinal", "interval" or
    "ratio" (values must be numbers). The coefficient itself is ``krippendorff.alpha``.

    Errors and conventions: fewer than 2 raters (columns), or no unit with at least 2 answers
    (no pairable unit), is a ValueError. When all pairable answers hold one single value the
    expected disagreement is 0 and alpha is undefined: NaN is returned.
    """
    import krippendorff

    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, got {level!r}")
    table = _as_table(data, "data")
    if table.shape[1] < 2:
        raise ValueError(f"Krippendorff's alpha needs at least 2 raters, got {table.shape[1]}")
    pairable = _pairable_mask(table)
    if not pairable.any():
        raise ValueError("no pairable unit: every unit has fewer than 2 answers")
    values = [v for v in table[pairable].ravel() if v is not None]
    if len(set(values)) < 2:
        return math.nan
    if level == "nominal":
        present = {v for v in table.ravel() if v is not None}
        codes = {v: float(i) for i, v in enumerate(sorted_labels(present))}
        convert = codes.__getitem__
    else:
        convert = float
    matrix = np.full(table.shape, np.nan)
    for index, value in np.ndenumerate(table):
        if value is None:
            continue
        try:
            matrix[index] = convert(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{level} alpha needs numeric answers, got {value!r}") from exc
    matrix = matrix.T  # krippendorff wants raters x units
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))


def _paired(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        raise ValueError("ratings must be sequences, not strings")
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"the two raters must rate the same units: got {len(a)} and {len(b)}")
    keep = [i for i in range(len(a)) if not is_missing(a[i]) and not is_missing(b[i])]
    return [a[i] for i in keep], [b[i] for i in keep]


def cohen_kappa(
    rater_a: Sequence[Any],
    rater_b: Sequence[Any],
    *,
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence[Any] | None = None,
) -> float:
    """Cohen's kappa between two raters over the same units (seed 003, Section 3.2.2).

    Thin wrapper on ``sklearn.metrics.cohen_kappa_score``. Position ``i`` of both sequences is
    the same unit; units where either rater is missing (None/NaN) are dropped first. ``weights``
    ("linear"/"quadratic") is for ordinal labels; ``labels`` fixes the category list.

    Conventions: no unit rated by both is a ValueError. When both raters used one and the same
    single category everywhere, chance agreement is 1 and kappa is undefined: NaN.
    """
    from sklearn.metrics import cohen_kappa_score

    a, b = _paired(rater_a, rater_b)
    if not a:
        raise ValueError("no unit was rated by both raters")
    if len(set(a) | set(b)) < 2:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(a, b, weights=weights, labels=labels)
    return float(value)


def kappa_per_batch(
    rater_a: Sequence[Any],
    rater_b: Sequence[Any],
    batch_size: int,
    *,
    weights: Literal["linear", "quadratic"] | None = None,
) -> pd.DataFrame:
    """Cohen's kappa for consecutive batches of units (seed 003, Section 3.2.2).

    EPPCMinerBen tracked agreement per annotated sample of 50 messages; here units are taken in
    the order given and cut into batches of ``batch_size`` (the last batch may be shorter).
    Each batch's kappa is :func:`cohen_kappa` (missing answers dropped, NaN when undefined or
    when no unit of the batch was rated by both). Columns: batch (from 1), first_unit,
    last_unit (positions, inclusive), n_pairs, kappa.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    a, b = list(rater_a), list(rater_b)
    if len(a) != len(b):
        raise ValueError(f"the two raters must rate the same units: got {len(a)} and {len(b)}")
    if not a:
        raise ValueError("no units given")
    rows = []
    for number, start in enumerate(range(0, len(a), batch_size), start=1):
        sa, sb = a[start : start + batch_size], b[start : start + batch_size]
        pa, _ = _paired(sa, sb)
        kappa = cohen_kappa(sa, sb, weights=weights) if pa else math.nan
        rows.append(
            {
                "batch": number,
                "first_unit": start,
                "last_unit": start + len(sa) - 1,
                "n_pairs": len(pa),
                "kappa": kappa,
            }
        )
    return pd.DataFrame(rows, columns=["batch", "first_unit", "last_unit", "n_pairs", "kappa"])


def percent_agreement(
    data: Any, *, method: Literal["unanimous", "pairwise"] = "unanimous"
) -> float:
    """Observed (not chance-corrected) agreement over a units x raters table (seed 002, Table 4).

    Missing answers (None/NaN) are ignored and units with fewer than two answers are skipped.
    ``method="unanimous"`` (default): share of units on which all answers are equal - for two
    raters, the plain share of units they agree on, as in PMR-Bench. ``method="pairwise"``: per
    unit, the share of rater pairs that agree, averaged over units. No pairable unit is a
    ValueError.
    """
    if method not in ("unanimous", "pairwise"):
        raise ValueError(f"method must be 'unanimous' or 'pairwise', got {method!r}")
    table = _as_table(data, "data")
    scores = []
    for row in table:
        answers = [v for v in row if v is not None]
        if len(answers) < 2:
            continue
        if method == "unanimous":
            scores.append(float(all(v == answers[0] for v in answers)))
        else:
            pairs = list(itertools.combinations(answers, 2))
            scores.append(sum(x == y for x, y in pairs) / len(pairs))
    if not scores:
        raise ValueError("no pairable unit: every unit has fewer than 2 answers")
    return float(np.mean(scores))


# --------------------------------------------------------------------------------------------
# Judge agreement (seed 000, Appendix C.1, Table 8)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeAgreement:
    """Seed 000, Table 8 measures; NaN where the denominator is empty."""

    n: int
    n_reference_matches: int
    n_reference_non_matches: int
    agreement: float
    non_match_agreement: float
    match_agreement: float
    match_overlap: float


def _decision_spans(decision: Any, draft: str | None, where: str) -> list[tuple[int, int]] | None:
    """None for NO MATCH; else the merged spans (empty list: a match we cannot locate)."""
    if decision is None or (isinstance(decision, str) and decision.strip().upper() == "NO MATCH"):
        return None
    if isinstance(decision, str):
        if draft is None:
            raise ValueError(f"{where}: text decisions need drafts= to locate them in the draft")
        needle = decision.strip()
        start = draft.find(needle) if needle else -1
        return [] if start < 0 else [(start, start + len(needle))]
    is_single = (
        isinstance(decision, (tuple, list))
        and len(decision) == 2
        and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in decision)
    )
    spans = (
        [decision] if is_single else list(decision) if isinstance(decision, (tuple, list)) else []
    )
    if not spans:
        raise ValueError(f"{where}: expected None, 'NO MATCH', text, or (start, end) span(s)")
    out = []
    for span in spans:
        ok = (
            isinstance(span, (tuple, list))
            and len(span) == 2
            and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in span)
            and 0 <= span[0] < span[1]
        )
        if not ok:
            raise ValueError(f"{where}: invalid span {span!r}; need 0 <= start < end")
        out.append((int(span[0]), int(span[1])))
    merged: list[tuple[int, int]] = []
    for s, e in sorted(out):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _overlaps(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(max(s1, s2) < min(e1, e2) for s1, e1 in a for s2, e2 in b)


def judge_agreement(
    reference: Sequence[Any],
    judged: Sequence[Any],
    *,
    drafts: Sequence[str] | None = None,
) -> JudgeAgreement:
    """Agreement of a content-matching judge with annotated decisions (seed 000, Table 8).

    Position ``i`` of ``reference`` (the annotators' decision) and ``judged`` (the judge's) is
    one (reference sentence, draft) sample. A decision is None / "NO MATCH", a ``(start, end)``
    character span or a list of spans in the draft, or the verbatim matching text (then
    ``drafts[i]`` is needed to locate it; text not found verbatim stays a match decision that
    neither equals nor overlaps anything).

    Measures, in the words of Appendix C.1 made exact:
    agreement = share of all samples where both made the same match / NO MATCH decision;
    non_match_agreement = share of reference NO MATCH samples the judge also called NO MATCH;
    match_agreement = share of reference matches where the judge output exactly the same
    span(s) (Table 8 "Avg Match"); match_overlap = share of reference matches where the judge's
    span(s) share at least one character position with the reference's (Table 8 "% Match").
    Both match measures use reference matches as denominator (the caption's "84% of the
    matching author annotations"), so overlap >= exact as in every row of Table 8. An empty
    denominator gives NaN.
    """
    if len(reference) != len(judged):
        raise ValueError(
            f"reference and judged must be parallel, got {len(reference)} and {len(judged)}"
        )
    if drafts is not None and len(drafts) != len(reference):
        raise ValueError(f"drafts must have {len(reference)} entries, got {len(drafts)}")
    if not reference:
        raise ValueError("no samples given")
    same = non_match_hits = exact = overlap = n_match = 0
    for i, (ref_dec, judge_dec) in enumerate(zip(reference, judged, strict=True)):
        draft = drafts[i] if drafts is not None else None
        ref = _decision_spans(ref_dec, draft, f"reference[{i}]")
        got = _decision_spans(judge_dec, draft, f"judged[{i}]")
        same += (ref is None) == (got is None)
        if ref is None:
            non_match_hits += got is None
            continue
        n_match += 1
        if got:
            exact += bool(ref) and got == ref
            overlap += _overlaps(ref, got)
    n = len(reference)
    return JudgeAgreement(
        n=n,
        n_reference_matches=n_match,
        n_reference_non_matches=n - n_match,
        agreement=same / n,
        non_match_agreement=ratio(non_match_hits, n - n_match, math.nan),
        match_agreement=ratio(exact, n_match, math.nan),
        match_overlap=ratio(overlap, n_match, math.nan),
    )


# --------------------------------------------------------------------------------------------
# Text similarity between clinicians (seed 000, Appendix E.1, Table 11)
# --------------------------------------------------------------------------------------------


def tfidf_cosine_matrix(texts: Sequence[str]) -> np.ndarray:
    """Pairwise cosine similarity of TF-IDF vectors of ``texts`` (stand-in for seed 000 Table 11).

    The paper compares clinicians' responses by cosine similarity of (presumably) sentence
    embeddings; this offline tool has no embedding model to download, so it uses scikit-learn's
    ``TfidfVectorizer`` with its defaults (lowercase, words of 2+ characters, smoothed idf, L2
    rows), fitted on ``texts`` themselves, read in composed form (NFC: "café" typed with a
    separate accent is the same word). Values are lower than embedding cosines and are not
    comparable to the paper's numbers, only between clinicians within one study.

    A text without any token has NaN similarity with everything (itself included); if no text
    has a token, the whole matrix is NaN.
    """
    matrix, empty = _tfidf_rows(texts)
    n = len(empty)
    if matrix is None:
        return np.full((n, n), np.nan)
    sims = (matrix @ matrix.T).toarray()
    sims[empty, :] = np.nan
    sims[:, empty] = np.nan
    np.fill_diagonal(sims, np.where(empty, np.nan, 1.0))
    return np.clip(sims, -1.0, 1.0)


def tfidf_cosine_to_first(texts: Sequence[str]) -> np.ndarray:
    """Row 0 of :func:`tfidf_cosine_matrix` without the rest of the matrix: the similarity of
    ``texts[0]`` to every text (the same vectoriser, fitted on all of them; NaN where either
    text has no token). Linear in the number of texts, where the whole matrix is quadratic.
    Stand-in for seed 000 Table 11's similarity, as the matrix is; here it picks a clinician's
    own earlier replies most like a message (``llm/own_examples.py``)."""
    matrix, empty = _tfidf_rows(texts)
    if matrix is None or empty[0]:
        return np.full(len(empty), np.nan)
    row = (matrix[0] @ matrix.T).toarray().ravel()
    row[empty] = np.nan
    row[0] = 1.0
    return np.clip(row, -1.0, 1.0)


def _tfidf_rows(texts: Sequence[str]) -> tuple[Any, np.ndarray]:
    """The L2-normalised TF-IDF rows of ``texts`` (scikit-learn's defaults, fitted on them in
    composed form, NFC, so a decomposed accent does not make another word), and which texts
    have no token; no rows (None) when no text has one."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if isinstance(texts, (str, bytes)):
        raise ValueError("texts must be a sequence of strings")
    texts = list(texts)
    if any(not isinstance(t, str) for t in texts):
        raise ValueError("every text must be a string")
    if not texts:
        raise ValueError("no texts given: texts must be a non-empty sequence of strings")
    try:
        matrix = TfidfVectorizer().fit_transform([composed(t) for t in texts])
    except ValueError:  # empty vocabulary
        return None, np.ones(len(texts), dtype=bool)
    return matrix, np.asarray(matrix.getnnz(axis=1) == 0)


def rater_cosine_similarity(responses: pd.DataFrame) -> pd.DataFrame:
    """Average pairwise TF-IDF cosine similarity between raters (seed 000, Appendix E.1).

    ``responses`` is wide: one row per case, one column per rater, each cell that rater's
    response text (None/NaN or blank when missing; ``df.pivot(index="unit", columns="rater",
    values="text")`` builds it from a long table). One TF-IDF model is fitted on every present
    text (:func:`tfidf_cosine_matrix`); entry (r1, r2) is the mean, over cases both answered,
    of the cosine between their two responses; NaN when they share no case; 1.0 on the
    diagonal. Fewer than 2 raters is a ValueError.
    """
    if not isinstance(responses, pd.DataFrame):
        raise ValueError("responses must be a DataFrame of cases x raters")
    if responses.shape[1] < 2:
        raise ValueError(f"need at least 2 raters (columns), got {responses.shape[1]}")
    cells = [
        (u, r, v)
        for u, row in enumerate(responses.itertuples(index=False))
        for r, v in enumerate(row)
        if not is_missing(v) and isinstance(v, str) and v.strip()
    ]
    bad = [v for v in responses.to_numpy().ravel() if not is_missing(v) and not isinstance(v, str)]
    if bad:
        raise ValueError(f"responses must hold text, found {type(bad[0]).__name__}")
    sims = tfidf_cosine_matrix([v for _, _, v in cells]) if cells else np.zeros((0, 0))
    where = {(u, r): i for i, (u, r, _) in enumerate(cells)}
    raters = list(responses.columns)
    out = pd.DataFrame(np.nan, index=raters, columns=raters, dtype=float)
    for r1, r2 in itertools.combinations(range(len(raters)), 2):
        values = [
            sims[where[(u, r1)], where[(u, r2)]]
            for u in range(len(responses))
            if (u, r1) in where and (u, r2) in where
        ]
        values = [v for v in values if not math.isnan(v)]
        mean = float(np.mean(values)) if values else math.nan
        out.iloc[r1, r2] = out.iloc[r2, r1] = mean
    for r in range(len(raters)):
        out.iloc[r, r] = 1.0
    return out
