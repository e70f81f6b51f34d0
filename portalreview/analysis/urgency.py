"""Urgency as pairwise ranking: PMR-Bench's tables (seed 002) from urgency answers.

An urgency answer names the case of the pair that needs care first - a case, never a side of
the screen. Against the cases' reference levels (``cases.urgency_level``; 1 = most urgent) it
is right or wrong, which gives pairwise accuracy overall and by difficulty (Section 4.1,
Table 2). Between annotators: percent agreement and Krippendorff's alpha (Appendix A.1,
Table 4), each answer coded as "chose the unit's first case" (``units.case_id``), so the
screen side never enters. Position bias: the share of answers choosing the case shown first
(``presentation.swap``). The inbox (cases tagged ``inbox=<name>``): each message scored by its
win rate over the inbox's pairs, sorted, and scored with NDCG@k and T-NDCG@k (Section 4.2,
FACTS.md's reading) and expected T-NDCG over random orders of tied messages (Section 4.3,
Appendix C.3).

The inbox scores' intervals are not over units. An inbox is a fixed design - its messages and
the pairs of them put to the annotators (PMR-Bench compares every pair) - and its score is that
of one sort, which needs the comparisons. Resampling the pairs with replacement, as for the
other figures, leaves about a third of them out of each resample: the resampled sorts rest on
fewer comparisons, are noisier than the sort being measured, and their NDCGs lie below it
(on a 10,000-case synthetic study the mean NDCG@10 of 0.981 got the interval [0.932, 0.968]).
So the intervals resample *judgements* instead (:func:`judgement_resamples`): every pair of the
inbox is kept, and its answers are drawn with replacement from the answers it received (a
pair answered by four annotators gets four answers drawn from those four). Each message keeps
its number of comparisons and, on average, its win rate; only the annotators' disagreement
moves the sort. The interval reads: how much the score depends on which of the given
judgements were made, for these messages and these pairs (not across other inboxes). A pair
answered once is held fixed, so a scorer of one annotator, or of pairs all answered once, gets
no interval (``null``). It is a sampling-variability interval that need not contain the
value: NDCG is a sort's score, not a smooth function of the judgements, and near a perfect
sort any perturbation can only lower it, so most resampled scores lie below the value (on the
same study the mean T-NDCG@10 0.841 gets [0.819, 0.840]). docs/report.md says so to the reader.

An *adaptive* inbox (``store/adaptive.py``, issue 19) is judged on pairs chosen from the
answers so far, a few per message, each mostly once. Win rates are then not comparable (a
message met by close rivals wins about half whatever its place), so its messages are scored
by Bradley-Terry strengths (``metrics/bradley_terry.py``), and the entry says so
(``"score": "bradley_terry"``, ``"adaptive"``: its sets, the inbox's pairs, the judgements
made). Its intervals resample *outcomes* instead of answers (:func:`outcome_resamples`): the
same pairs, each judgement's outcome drawn from the fitted model's probability for it, the
strengths fitted again. They read as the spread of sorts that the same pairs, judged again by
clinicians who disagree as much as the fit says, would give.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._agreement import model_vs_people, nominal_agreement
from portalreview.analysis._bootstrap import interval_and_count
from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    count_table,
    figure,
    humans,
    jsonable,
    models,
    ordered_names,
    people,
    safe_ratio,
)
from portalreview.analysis._memo import Memo
from portalreview.domain.catalogs import Catalogs
from portalreview.metrics import (
    DEFAULT_RELEVANCE,
    expected_t_ndcg_at_k,
    ndcg_at_k,
    relevance_from_levels,
    sort_by_score,
    t_ndcg_at_k,
    win_rate_scores,
)
from portalreview.metrics.bradley_terry import bradley_terry, strengths
from portalreview.metrics.urgency import inbox_scores, merge_near_ties
from portalreview.store.frames import StudyFrames

KIND = "urgency"
BUCKETS = ("easy", "medium", "hard", "total")
CUTOFFS = (10, 30)
INBOX_TAG = "inbox"
#: The result's keys (after the counts) when the study has no urgency answer.
EMPTY: dict[str, Any] = {
    "n_ask_second": 0,
    "relevance_mapping": {str(k): v for k, v in DEFAULT_RELEVANCE.items()},
    "accuracy": None,
    "accuracy_by_annotator": [],
    "agreement": None,
    "model_agreement": [],
    "model_accuracy": [],
    "position_bias": None,
    "inboxes": [],
    "inbox_summary": None,
}


# --------------------------------------------------------------------------------------------
# Answers with reference levels
# --------------------------------------------------------------------------------------------


def cases_by_id(frames: StudyFrames) -> pd.DataFrame:
    """``frames.cases`` indexed by case id, made once per frames (every inbox looks its cases
    up there; ``analysis._common.carry_memo`` carries it while the cases stay the same).
    Read it, never change it in place."""
    found = frames.memo.get("cases_by_id")
    if found is None:
        found = frames.memo["cases_by_id"] = frames.cases.set_index("case_id")
    return found


def decisions(frames: StudyFrames) -> pd.DataFrame:
    """Urgency answers with a choice: unit cases a and b, the chosen case, the reference levels
    of a and b, whether a was chosen and whether the chosen case was shown first."""
    answers = people(frames, KIND).merge(frames.urgency, on="answer_id")
    answers = answers.dropna(subset=["more_urgent_case_id"])
    levels = cases_by_id(frames).urgency_level
    a = answers.case_id.astype(int)
    b = answers.case_b_id.astype(int)
    chosen = answers.more_urgent_case_id.astype(int)
    swapped = answers.presentation.map(lambda p: bool(p.get("swap", False)))
    return answers.assign(
        case_a=a,
        case_b=b,
        chosen=chosen,
        level_a=a.map(levels),
        level_b=b.map(levels),
        chose_a=(chosen == a),
        shown_first=np.where(swapped, b, a),
        has_presentation=answers.presentation.map(lambda p: "swap" in p),
    )


def _difficulty(gap: pd.Series) -> pd.Series:
    """easy: gap >= 4, medium: 2-3, hard: 1 (seed 002, Section 3.2.2; metrics.difficulty)."""
    return pd.Series(
        np.select([gap >= 4, gap >= 2, gap == 1], ["easy", "medium", "hard"], ""), index=gap.index
    )


def accuracy(rows: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Pairwise accuracy against reference levels, overall and per difficulty (Table 2):
    pairs whose two levels are equal or missing are left out and counted."""
    missing = rows.level_a.isna() | rows.level_b.isna()
    equal = ~missing & (rows.level_a == rows.level_b)
    valid = rows[~missing & ~equal]
    bucket = _difficulty((valid.level_a - valid.level_b).abs())
    correct = valid.chose_a == (valid.level_a < valid.level_b)
    units, _, n = count_table(valid.unit_id, bucket, list(BUCKETS[:3]))
    hits = count_table(valid.unit_id, bucket, list(BUCKETS[:3]), weights=correct)[2]
    n_block = np.column_stack([n, n.sum(axis=1)])
    hit_block = np.column_stack([hits, hits.sum(axis=1)])
    pop = s.population({"n": n_block, "hit": hit_block}, units)
    totals = pop.totals()
    out: dict[str, Any] = {
        "n_answers": len(valid),
        "n_excluded_equal_levels": int(equal.sum()),
        "n_excluded_missing_level": int(missing.sum()),
    }
    for i, name in enumerate(BUCKETS):
        # A pair's difficulty is fixed by its two levels, so each unit falls in one bucket:
        # the bucket's figure rests on its own units only.
        n_units = int((n_block[:, i] > 0).sum())
        out[name] = {
            "n": int(totals["n"][i]),
            "correct": int(totals["hit"][i]),
            "accuracy": pop.figure(
                lambda x, i=i: safe_ratio(x["hit"][:, i], x["n"][:, i]), n_units=n_units
            ),
        }
    return out


def position_bias(rows: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Share of answers that chose the case shown first (on the left / top)."""
    shown = rows[rows.has_presentation.astype(bool)]
    first = (shown.chosen == shown.shown_first).groupby(shown.unit_id).agg(["sum", "size"])
    pop = s.population(
        {"first": first["sum"].to_numpy(), "n": first["size"].to_numpy()}, first.index
    )
    return {
        "n_answers": len(shown),
        "n_chose_first_shown": int(first["sum"].sum()),
        "share_chose_first_shown": pop.figure(lambda x: safe_ratio(x["first"], x["n"])),
    }


# --------------------------------------------------------------------------------------------
# Inbox: win rates, NDCG@k and T-NDCG@k
# --------------------------------------------------------------------------------------------


def _ndcg_rows(order_rel: np.ndarray, ideal: np.ndarray, k: int) -> np.ndarray:
    k = min(k, order_rel.shape[1])
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    idcg = float(ideal[:k] @ disc)
    if idcg == 0:
        return np.zeros(order_rel.shape[0])
    return (order_rel[:, :k] @ disc) / idcg


def _ranking_scores(sums: Mapping[str, np.ndarray], relevance: np.ndarray, k: int, tail: bool):
    """NDCG@k (or T-NDCG@k) of each row's inbox sorted by score, as metrics.sort_by_score
    sorts (highest first, ties in item order, never-compared messages last). The scores are
    ``sums["scores"]`` (one row per resample, NaN = never compared) or else the win rates;
    scores within ``TIE_TOLERANCE`` are ties, as for the value."""
    rates = sums["scores"] if "scores" in sums else safe_ratio(sums["wins"], sums["played"])
    rates = merge_near_ties(rates)
    keys = np.where(np.isnan(rates), np.inf, -rates)
    order = np.argsort(keys, axis=1, kind="stable")
    rows = relevance[order]
    ideal = np.sort(relevance)[::-1]
    forward = _ndcg_rows(rows, ideal, k)
    return forward - _ndcg_rows(rows[:, ::-1], ideal, k) if tail else forward


def judgement_resamples(
    rows: pd.DataFrame, items: list[int], s: Settings, stream: tuple[int, ...]
) -> dict[str, np.ndarray] | None:
    """Each message's wins and comparisons on each judgement resample of an inbox's answers
    ``rows``: every pair (unit) keeps its number of answers, drawn with replacement from the
    answers it received; ``None`` when intervals are off or no pair has two answers.

    Draws: ``numpy.random.default_rng([seed, *stream]).integers(0, m, size=(n_resamples,
    n_answers))`` with the answers in (unit, answer) order and ``m`` each answer's unit's
    number of answers: draw ``j`` of resample ``r`` picks, among the answers of answer
    ``j``'s unit, the one at that offset. ``stream`` tells the inboxes (and scorers) apart.
    """
    if s.n_resamples == 0 or rows.empty:
        return None
    ordered = rows.sort_values(["unit_id", "answer_id"], kind="stable")
    _, start, size = np.unique(ordered.unit_id.to_numpy(), return_index=True, return_counts=True)
    if size.max() < 2:
        return None
    column = pd.Index(items)
    chosen = column.get_indexer(ordered.chosen.to_numpy())
    m = np.repeat(size, size)
    offset = np.random.default_rng([s.seed, *stream]).integers(0, m, size=(s.n_resamples, len(m)))
    picked = chosen[np.repeat(start, size) + offset]
    n = len(items)
    flat = (np.arange(s.n_resamples)[:, None] * n + picked).reshape(-1)
    wins = np.bincount(flat, minlength=s.n_resamples * n).reshape(s.n_resamples, n)
    played = np.bincount(column.get_indexer(ordered.case_a.to_numpy()), minlength=n)
    played += np.bincount(column.get_indexer(ordered.case_b.to_numpy()), minlength=n)
    return {"wins": wins.astype(float), "played": played[None, :].astype(float)}


def _pairs_as_indices(rows: pd.DataFrame, items: list[int]) -> tuple[np.ndarray, ...]:
    """Each judgement as (index of case a, index of case b, 1 when a was chosen)."""
    column = pd.Index(items)
    first = column.get_indexer(rows.case_a.to_numpy())
    second = column.get_indexer(rows.case_b.to_numpy())
    return first, second, (rows.chosen.to_numpy() == rows.case_a.to_numpy()).astype(float)


def outcome_resamples(
    rows: pd.DataFrame, items: list[int], s: Settings, stream: tuple[int, ...]
) -> dict[str, np.ndarray] | None:
    """Strengths on each outcome resample of an adaptive inbox's judgements (see the module
    docstring): every judgement kept, its outcome drawn from the fitted probability that case
    a is chosen, the strengths fitted again; ``None`` when intervals are off.

    Draws: ``numpy.random.default_rng([seed, *stream]).random((n_resamples, n_answers))``,
    an outcome "a chosen" where the draw is below the fitted probability."""
    if s.n_resamples == 0 or rows.empty:
        return None
    first, second, won = _pairs_as_indices(rows, items)
    theta = bradley_terry(len(items), first, second, won)
    p_first = 1.0 / (1.0 + np.exp(-(theta[first] - theta[second])))
    draws = np.random.default_rng([s.seed, *stream]).random((s.n_resamples, len(first)))
    return {"scores": strengths(len(items), first, second, (draws < p_first).astype(float))}


#: One scorer's inbox figures and resampled scores (:func:`_score`), kept for the process.
#: Why: the inbox tables sort every inbox again for the pooled scorer and each annotator, with
#: 1000 judgement resamples and an enumeration of tied orders each; an urgency answer changes
#: at most one inbox, so a refresh finds the others here. Key: everything :func:`_score`
#: reads - the inbox's items in order and their reference levels, the seed, the number of
#: resamples, the resampling stream, and the scorer's answers (unit, answer, chosen case, case
#: a, case b; in their order). Bound: 2,000 scorers, least recently used dropped first (a
#: 10,000-case study has 10 inboxes x 5 scorers: 0.9 MiB measured).
_SCORED = Memo("urgency.inbox_scorer", max_entries=2_000)


def _scorer(
    rows: pd.DataFrame,
    items: list[int],
    levels: pd.Series,
    s: Settings,
    stream: tuple[int, ...],
    resampled: dict[str, np.ndarray | None] | None = None,
    adaptive: bool = False,
) -> dict:
    """One scorer's inbox: win rates, the sorted order's NDCG / T-NDCG and expected T-NDCG,
    with intervals over judgement resamples (:func:`judgement_resamples`). When
    ``resampled`` is given it receives each NDCG / T-NDCG on every resample (for the mean
    over inboxes), or None where there is no interval. From ``_SCORED`` when the same scorer
    was met before (read the result, never change it)."""
    answers = np.column_stack(
        [rows[c].to_numpy(dtype=np.int64) for c in ("unit_id", "answer_id", "chosen")]
        + [rows[c].to_numpy(dtype=np.int64) for c in ("case_a", "case_b")]
    )
    key = (
        adaptive,
        tuple(items),
        tuple(levels.loc[items].astype(int).tolist()),
        s.seed,
        s.n_resamples,
        stream,
        answers.tobytes(),
    )
    found = _SCORED.get(key)
    if found is None:
        found = _SCORED.put(key, _score(rows, items, levels, s, stream, adaptive))
    out, draws = found
    if resampled is not None:
        resampled.update(draws)
    return dict(out)


def _score(
    rows: pd.DataFrame,
    items: list[int],
    levels: pd.Series,
    s: Settings,
    stream: tuple[int, ...],
    adaptive: bool = False,
) -> tuple[dict, dict[str, np.ndarray | None]]:
    """:func:`_scorer`'s figures and each NDCG / T-NDCG on every resample (read-only)."""
    resampled: dict[str, np.ndarray | None] = {}
    scores = inbox_scores(items, _outcomes(rows), adaptive=adaptive)
    relevance = relevance_from_levels([int(levels[c]) for c in items])
    by_item = pd.Series(relevance, index=items)
    ordered = by_item.loc[sort_by_score(scores)].to_numpy()
    resample = outcome_resamples if adaptive else judgement_resamples
    sums = resample(rows, items, s, stream)
    n_pairs = int(rows.unit_id.nunique())
    finite = scores.fillna(scores.min() - 1 if scores.notna().any() else 0.0)
    out: dict[str, Any] = {"n_pairs": n_pairs, "n_answers": len(rows)}
    for k in CUTOFFS:
        expected = expected_t_ndcg_at_k(finite.to_numpy(), relevance, k, seed=s.seed)
        for key, tail, value in (
            (f"ndcg@{k}", False, ndcg_at_k(ordered, k)),
            (f"t_ndcg@{k}", True, t_ndcg_at_k(ordered, k)),
        ):
            draws = None if sums is None else _ranking_scores(sums, relevance, k, tail)
            ci, used = (None, 0) if draws is None else interval_and_count(draws)
            out[key] = figure(float(value), ci, n_pairs, used)
            if draws is not None:
                draws.flags.writeable = False
            resampled[key] = draws
        out[f"expected_t_ndcg@{k}"] = {
            "mean": expected.mean,
            "sd": expected.sd,
            "n_orders": expected.n_orders,
            "exact": expected.exact,
        }
    return out, resampled


def _outcomes(rows: pd.DataFrame) -> list[tuple[int, int]]:
    """(winner, loser) of each judgement."""
    return [
        (w, b if w == a else a)
        for w, a, b in zip(
            rows.chosen.tolist(), rows.case_a.tolist(), rows.case_b.tolist(), strict=True
        )
    ]


def _inbox_order(
    rows: pd.DataFrame, items: list[int], frames: StudyFrames, adaptive: bool = False
) -> list[dict]:
    """The inbox sorted by its score (win rate; strength for an adaptive inbox)."""
    outcomes = _outcomes(rows)
    rates = win_rate_scores(items, outcomes)
    scores = inbox_scores(items, outcomes, adaptive=True) if adaptive else rates
    order = sort_by_score(scores)
    cases = cases_by_id(frames).loc[order]
    wins = rows.chosen.value_counts().reindex(order, fill_value=0)
    played = pd.concat([rows.case_a, rows.case_b]).value_counts().reindex(order, fill_value=0)
    columns = zip(
        order,
        cases.external_id.tolist(),
        cases.urgency_level.astype(int).tolist(),
        wins.tolist(),
        played.tolist(),
        rates.loc[order].tolist(),
        scores.loc[order].tolist(),
        strict=True,
    )
    return [
        {
            "case_id": c,
            "external_id": external_id,
            "level": level,
            "wins": n_wins,
            "comparisons": n_played,
            "win_rate": rate,
            **({"strength": score} if adaptive else {}),
        }
        for c, external_id, level, n_wins, n_played, rate, score in columns
    ]


def inbox_members(frames: StudyFrames) -> dict[str, list[int]]:
    """Inbox name -> its case ids (cases tagged inbox=<name>), sorted."""
    out: dict[str, list[int]] = {}
    for case_id, tags in zip(
        frames.cases.case_id.tolist(), frames.cases.tags.tolist(), strict=True
    ):
        for name in tags.get(INBOX_TAG, []):
            out.setdefault(name, []).append(int(case_id))
    return {k: sorted(v) for k, v in sorted(out.items())}


def inbox(
    name: str,
    members: list[int],
    rows: pd.DataFrame,
    frames: StudyFrames,
    s: Settings,
    resampled: dict[str, np.ndarray | None] | None = None,
    index: int = 0,
) -> dict[str, Any]:
    """One inbox: the pooled scorer (every annotator's answers) and one per annotator;
    ``resampled`` receives the pooled scorer's resampled NDCG / T-NDCG (see _scorer);
    ``index`` (the inbox's place in name order) seeds its judgement resamples."""
    levels = cases_by_id(frames).urgency_level
    items = [c for c in members if pd.notna(levels.get(c))]
    inside = rows[rows.case_a.isin(items) & rows.case_b.isin(items)]
    adaptive_sets = _adaptive_sets(frames, members)
    adaptive = bool(adaptive_sets)
    out: dict[str, Any] = {
        "inbox": name,
        "n_messages": len(items),
        "n_messages_without_level": len(members) - len(items),
        "relevance": "6 - level",
        "score": "bradley_terry" if adaptive else "win_rate",
        "margin_weighted": None,
    }
    if adaptive:  # (counted over every message: the clinicians judged them all)
        judged = rows[rows.case_a.isin(members) & rows.case_b.isin(members)]
        out["adaptive"] = _adaptive_summary(judged, adaptive_sets, len(members))
    if len(items) < 2 or inside.empty:
        return {**out, "all": None, "by_annotator": [], "order": []}
    out["all"] = _scorer(inside, items, levels, s, (index, 0), resampled, adaptive)
    out["unit_ids"] = sorted(inside.unit_id.unique().tolist())
    out["by_annotator"] = [
        {
            "annotator": who,
            **_scorer(
                inside[inside.annotator == who], items, levels, s, (index, j + 1), None, adaptive
            ),
        }
        for j, who in enumerate(ordered_names(inside.annotator))
    ]
    out["order"] = _inbox_order(inside, items, frames, adaptive)
    return out


def _adaptive_sets(frames: StudyFrames, members: list[int]) -> list[str]:
    """The adaptive sets (store/adaptive.py) of pairs of the inbox's messages: read from the
    units, so that an inbox is adaptive before anyone has judged a pair of it."""
    units = frames.units
    mine = units[
        (units.kind == "urgency")
        & units.adaptive.astype(bool)
        & units.case_id.isin(members)
        & units.case_b_id.isin(members)
    ]
    return sorted(mine.unit_set.unique().tolist())


def _adaptive_summary(rows: pd.DataFrame, sets: list[str], n_messages: int) -> dict[str, Any]:
    """Which sets of an adaptive inbox, its pairs, and the judgements made (per annotator),
    of every message, with a reference level or not."""
    chosen = rows[rows.adaptive.astype(bool)]
    return {
        "unit_sets": sets,
        "n_pairs": n_messages * (n_messages - 1) // 2,
        "n_judgements": len(chosen),
        "judgements_by_annotator": {
            who: int((chosen.annotator == who).sum()) for who in ordered_names(chosen.annotator)
        },
    }


def _inbox_summary(inboxes: list[dict], resampled: list[dict]) -> dict[str, Any]:
    """Mean over inboxes of the pooled scorer's figures: plain means (``mean_*``), and the
    NDCG@k / T-NDCG@k means as figures whose CI is over the same judgement resamples: on each
    resample every inbox is re-sorted from its resampled judgements and the inboxes' scores
    averaged (an inbox without resamples - every pair answered once - counts as its value)."""
    scored = [(b["all"], r) for b, r in zip(inboxes, resampled, strict=True) if b["all"]]
    units = {u for b in inboxes for u in b.get("unit_ids", [])}
    out: dict[str, Any] = {"n_inboxes": len(scored)}
    for k in CUTOFFS:
        for key in (f"ndcg@{k}", f"t_ndcg@{k}"):
            values = [b[key]["value"] for b, _ in scored]
            out[f"mean_{key}"] = float(np.mean(values)) if values else None
            ci, used = _mean_interval([(b[key]["value"], r.get(key)) for b, r in scored])
            out[key] = figure(out[f"mean_{key}"], ci, len(units), used)
        values = [b[f"expected_t_ndcg@{k}"]["mean"] for b, _ in scored]
        out[f"mean_expected_t_ndcg@{k}"] = float(np.mean(values)) if values else None
    return out


def _mean_interval(
    scored: list[tuple[float, np.ndarray | None]],
) -> tuple[tuple[float, float] | None, int]:
    """Percentile CI of the mean over inboxes from each inbox's resampled scores (its value
    on every resample when it has none), and the resamples it rests on; no CI when no inbox
    has resamples."""
    draws = [d for _, d in scored if d is not None]
    if not draws:
        return None, 0
    rows = [np.full(len(draws[0]), v) if d is None else d for v, d in scored]
    return interval_and_count(np.mean(np.vstack(rows), axis=0))


#: The columns of the decisions that the inboxes and accuracy tables read: they filter the
#: decisions inbox by inbox and annotator by annotator, and a narrow frame is cheaper to copy.
_INBOX_COLUMNS = ("unit_id", "answer_id", "annotator", "chosen", "case_a", "case_b")
_INBOX_OPTIONAL = ("adaptive", "unit_set")
_ACCURACY_COLUMNS = ("unit_id", "annotator", "level_a", "level_b", "chose_a")


def _narrow(
    rows: pd.DataFrame, columns: tuple[str, ...], optional: tuple[str, ...] = ()
) -> pd.DataFrame:
    """``rows`` with only ``columns`` and those of ``optional`` it has."""
    return rows[[*columns, *(c for c in optional if c in rows)]]


def _long(rows: pd.DataFrame) -> pd.DataFrame:
    """(unit_id, annotator, value) with value 1 when the unit's first case was chosen."""
    return rows.assign(value=rows.chose_a.astype(int))[["unit_id", "annotator", "value"]]


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """Every PMR-Bench table (seed 002) computed from the project's urgency answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    rows = decisions(frames)
    people_rows = humans(rows)
    if rows.empty:
        return jsonable({**answer_counts(people_rows), **EMPTY})
    model_names = ordered_names(models(rows).annotator)
    resampled: list[dict[str, np.ndarray | None]] = []
    inboxes = []
    inbox_rows = _narrow(people_rows, _INBOX_COLUMNS, _INBOX_OPTIONAL)
    for index, (name, members) in enumerate(inbox_members(frames).items()):
        resampled.append({})
        inboxes.append(inbox(name, members, inbox_rows, frames, s, resampled[-1], index))
    summary = _inbox_summary(inboxes, resampled)
    for entry in inboxes:
        entry.pop("unit_ids", None)
    graded = _narrow(people_rows, _ACCURACY_COLUMNS)
    model_graded = _narrow(rows, _ACCURACY_COLUMNS)
    return jsonable(
        {
            **answer_counts(people_rows),
            "n_ask_second": int(people_rows.ask_second.astype(bool).sum()),
            "relevance_mapping": {str(k): v for k, v in DEFAULT_RELEVANCE.items()},
            "accuracy": accuracy(people_rows, s),
            "accuracy_by_annotator": [
                {"annotator": who, **accuracy(graded[graded.annotator == who], s)}
                for who in ordered_names(graded.annotator)
            ],
            "agreement": nominal_agreement(_long(people_rows), s),
            "model_agreement": model_vs_people(
                _long(rows[~rows.is_gold.astype(bool)]), model_names, s
            ),
            "model_accuracy": [
                {"annotator": who, **accuracy(model_graded[model_graded.annotator == who], s)}
                for who in model_names
            ],
            "position_bias": position_bias(people_rows, s),
            "inboxes": inboxes,
            "inbox_summary": summary,
        }
    )
