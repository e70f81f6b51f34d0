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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._agreement import model_vs_people, nominal_agreement
from portalreview.analysis._bootstrap import Population, percentile_interval
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


def decisions(frames: StudyFrames) -> pd.DataFrame:
    """Urgency answers with a choice: unit cases a and b, the chosen case, the reference levels
    of a and b, whether a was chosen and whether the chosen case was shown first."""
    answers = people(frames, KIND).merge(frames.urgency, on="answer_id")
    answers = answers.dropna(subset=["more_urgent_case_id"])
    levels = frames.cases.set_index("case_id").urgency_level
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
    """NDCG@k (or T-NDCG@k) of each row's inbox sorted by win rate, as metrics.sort_by_score
    sorts (highest first, ties in item order, never-compared messages last)."""
    rates = safe_ratio(sums["wins"], sums["played"])
    keys = np.where(np.isnan(rates), np.inf, -rates)
    order = np.argsort(keys, axis=1, kind="stable")
    rows = relevance[order]
    ideal = np.sort(relevance)[::-1]
    forward = _ndcg_rows(rows, ideal, k)
    return forward - _ndcg_rows(rows[:, ::-1], ideal, k) if tail else forward


def _unit_blocks(rows: pd.DataFrame, items: list[int]) -> dict[str, np.ndarray]:
    """Per unit (pair) of the inbox: wins and comparisons of each message."""
    where = {c: i for i, c in enumerate(items)}
    units = sorted(rows.unit_id.unique())
    row_of = {u: i for i, u in enumerate(units)}
    wins = np.zeros((len(units), len(items)))
    played = np.zeros((len(units), len(items)))
    r = rows.unit_id.map(row_of).to_numpy()
    np.add.at(wins, (r, rows.chosen.map(where).to_numpy()), 1)
    for column in (rows.case_a, rows.case_b):
        np.add.at(played, (r, column.map(where).to_numpy()), 1)
    return {"wins": wins, "played": played}


def _scorer(
    rows: pd.DataFrame,
    items: list[int],
    levels: pd.Series,
    s: Settings,
    resampled: dict[str, np.ndarray | None] | None = None,
) -> dict:
    """One scorer's inbox: win rates, the sorted order's NDCG / T-NDCG and expected T-NDCG.
    When ``resampled`` is given it receives each NDCG / T-NDCG on every bootstrap resample
    (for the mean over inboxes)."""
    outcomes = [
        (w, b if w == a else a)
        for w, a, b in zip(
            rows.chosen.tolist(), rows.case_a.tolist(), rows.case_b.tolist(), strict=True
        )
    ]
    scores = win_rate_scores(items, outcomes)
    relevance = relevance_from_levels([int(levels[c]) for c in items])
    by_item = pd.Series(relevance, index=items)
    ordered = by_item.loc[sort_by_score(scores)].to_numpy()
    blocks = _unit_blocks(rows, items)
    pop = s.population(blocks, sorted(rows.unit_id.unique()))
    finite = scores.fillna(scores.min() - 1 if scores.notna().any() else 0.0)
    out: dict[str, Any] = {"n_pairs": int(rows.unit_id.nunique()), "n_answers": len(rows)}
    for k in CUTOFFS:
        expected = expected_t_ndcg_at_k(finite.to_numpy(), relevance, k, seed=s.seed)
        for key, tail, value in (
            (f"ndcg@{k}", False, ndcg_at_k(ordered, k)),
            (f"t_ndcg@{k}", True, t_ndcg_at_k(ordered, k)),
        ):
            draws = pop.resampled(lambda x, t=tail, k=k: _ranking_scores(x, relevance, k, t))
            out[key] = _checked(pop, draws, value)
            if resampled is not None:
                resampled[key] = draws
        out[f"expected_t_ndcg@{k}"] = {
            "mean": expected.mean,
            "sd": expected.sd,
            "n_orders": expected.n_orders,
            "exact": expected.exact,
        }
    return out


def _checked(pop: Population, draws: np.ndarray | None, value: float) -> dict:
    """The figure of a ranking score: the point value from metrics (ndcg_at_k or t_ndcg_at_k)
    and the CI from the vectorised resamples of the same computation (``draws``)."""
    ci = None if draws is None else percentile_interval(draws)
    return figure(float(value), ci, pop.n_units)


def _inbox_order(rows: pd.DataFrame, items: list[int], frames: StudyFrames) -> list[dict]:
    outcomes = [
        (w, b if w == a else a)
        for w, a, b in zip(
            rows.chosen.tolist(), rows.case_a.tolist(), rows.case_b.tolist(), strict=True
        )
    ]
    scores = win_rate_scores(items, outcomes)
    cases = frames.cases.set_index("case_id")
    wins = rows.chosen.value_counts()
    played = pd.concat([rows.case_a, rows.case_b]).value_counts()
    return [
        {
            "case_id": c,
            "external_id": cases.external_id[c],
            "level": int(cases.urgency_level[c]),
            "wins": int(wins.get(c, 0)),
            "comparisons": int(played.get(c, 0)),
            "win_rate": scores[c],
        }
        for c in sort_by_score(scores)
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
) -> dict[str, Any]:
    """One inbox: the pooled scorer (every annotator's answers) and one per annotator;
    ``resampled`` receives the pooled scorer's resampled NDCG / T-NDCG (see _scorer)."""
    levels = frames.cases.set_index("case_id").urgency_level
    items = [c for c in members if pd.notna(levels.get(c))]
    inside = rows[rows.case_a.isin(items) & rows.case_b.isin(items)]
    out: dict[str, Any] = {
        "inbox": name,
        "n_messages": len(items),
        "n_messages_without_level": len(members) - len(items),
        "relevance": "6 - level",
        "score": "win_rate",
        "margin_weighted": None,
    }
    if len(items) < 2 or inside.empty:
        return {**out, "all": None, "by_annotator": [], "order": []}
    out["all"] = _scorer(inside, items, levels, s, resampled)
    out["unit_ids"] = sorted(inside.unit_id.unique().tolist())
    out["by_annotator"] = [
        {"annotator": who, **_scorer(inside[inside.annotator == who], items, levels, s)}
        for who in ordered_names(inside.annotator)
    ]
    out["order"] = _inbox_order(inside, items, frames)
    return out


def _inbox_summary(inboxes: list[dict], resampled: list[dict]) -> dict[str, Any]:
    """Mean over inboxes of the pooled scorer's figures: plain means (``mean_*``), and the
    NDCG@k / T-NDCG@k means as figures whose CI is over the urgency units: on each bootstrap
    resample of the pairs every inbox is re-scored and the inboxes' scores averaged."""
    scored = [b["all"] for b in inboxes if b["all"] is not None]
    units = {u for b in inboxes for u in b.get("unit_ids", [])}
    out: dict[str, Any] = {"n_inboxes": len(scored)}
    for k in CUTOFFS:
        for key in (f"ndcg@{k}", f"t_ndcg@{k}"):
            values = [b[key]["value"] for b in scored]
            out[f"mean_{key}"] = float(np.mean(values)) if values else None
            draws = [r.get(key) for r in resampled]
            out[key] = figure(out[f"mean_{key}"], _mean_interval(draws), len(units))
        values = [b[f"expected_t_ndcg@{k}"]["mean"] for b in scored]
        out[f"mean_expected_t_ndcg@{k}"] = float(np.mean(values)) if values else None
    return out


def _mean_interval(draws: list[np.ndarray | None]) -> tuple[float, float] | None:
    """Percentile CI of the mean over inboxes from each inbox's resampled scores."""
    if not draws or any(d is None for d in draws):
        return None
    return percentile_interval(np.mean(np.vstack(draws), axis=0))


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
    for name, members in inbox_members(frames).items():
        resampled.append({})
        inboxes.append(inbox(name, members, people_rows, frames, s, resampled[-1]))
    summary = _inbox_summary(inboxes, resampled)
    for entry in inboxes:
        entry.pop("unit_ids", None)
    return jsonable(
        {
            **answer_counts(people_rows),
            "n_ask_second": int(people_rows.ask_second.astype(bool).sum()),
            "relevance_mapping": {str(k): v for k, v in DEFAULT_RELEVANCE.items()},
            "accuracy": accuracy(people_rows, s),
            "accuracy_by_annotator": [
                {"annotator": who, **accuracy(people_rows[people_rows.annotator == who], s)}
                for who in ordered_names(people_rows.annotator)
            ],
            "agreement": nominal_agreement(_long(people_rows), s),
            "model_agreement": model_vs_people(
                _long(rows[~rows.is_gold.astype(bool)]), model_names, s
            ),
            "model_accuracy": [
                {"annotator": who, **accuracy(rows[rows.annotator == who], s)}
                for who in model_names
            ],
            "position_bias": position_bias(people_rows, s),
            "inboxes": inboxes,
            "inbox_summary": summary,
        }
    )
