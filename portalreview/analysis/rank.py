"""Ranking several drafts of one case: MedAlign's tables (seed 001) from rank answers.

Each rank answer is one "ranking": a rank (1 = best, ties allowed) and a correct / incorrect
mark with reasons C1-C3 for every candidate response of the unit. Responses are grouped by
their source (``responses.source``). From these: the head-to-head win-rate matrix (Figure 2),
average win rate, mean rank and % correct per source (Table 3), the criteria counts (Section 5),
Kendall's tau-b between raters on shared units (Table 4) and the point-biserial correlation of
correctness with rank (Appendix L, Table S9).

Everything is computed on arrays (one row per ranking, one column per source) so a study of
10,000 cases stays fast; each figure equals the corresponding ``portalreview.metrics.ranking``
function on the same rows (the tests check this).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._bootstrap import Population
from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    humans,
    jsonable,
    people,
    records,
    safe_ratio,
    sources_of,
)
from portalreview.domain.catalogs import Catalogs
from portalreview.store.frames import StudyFrames

KIND = "rank"


# --------------------------------------------------------------------------------------------
# Rankings as arrays
# --------------------------------------------------------------------------------------------


def long_table(answers: pd.DataFrame, frames: StudyFrames) -> tuple[pd.DataFrame, int]:
    """One row per (ranking, source): unit, rater, source, rank, correct, criteria. A second
    response of the same source within one ranking is left out (counted in the result): the
    one with the higher response id, whatever order the answer listed them in."""
    entries = frames.rank_entries.merge(
        answers[["answer_id", "unit_id", "annotator"]], on="answer_id"
    )
    entries = entries.assign(source=entries.response_id.map(sources_of(frames)))
    by_response = entries.sort_values(["answer_id", "response_id"], kind="stable")
    duplicated = by_response.duplicated(["answer_id", "source"]).reindex(entries.index)
    kept = entries[~duplicated].rename(columns={"unit_id": "unit", "annotator": "rater"})
    return kept.reset_index(drop=True), int(duplicated.sum())


def wide(long: pd.DataFrame, column: str, sources: list[str]) -> pd.DataFrame:
    """Rankings (index answer_id, with unit) x sources table of one column, NaN = absent."""
    values = pd.to_numeric(long[column].astype("float"), errors="coerce").to_numpy(float)
    # As ``pivot`` then ``reindex(columns=sources)``, placed with numpy: the rankings in
    # answer id order, one entry per (ranking, source) (``long_table`` keeps one).
    ids, rows = np.unique(long.answer_id.to_numpy(), return_inverse=True)
    columns = pd.Index(sources).get_indexer(long.source)
    known = columns >= 0
    table = np.full((len(ids), len(sources)), np.nan)
    table[rows.reshape(-1)[known], columns[known]] = values[known]
    index = pd.Index(ids, name="answer_id")
    return pd.DataFrame(table, index=index, columns=pd.Index(sources, name="source"))


def average_ranks(ranks: np.ndarray) -> np.ndarray:
    """Each row re-ranked 1..m over its present entries, ties sharing the average of their
    positions (as ``scipy.stats.rankdata(method="average")``); NaN stays NaN."""
    present = ~np.isnan(ranks)
    a, b = ranks[:, :, None], ranks[:, None, :]
    less = ((b < a) & present[:, None, :]).sum(axis=2)
    equal = ((b == a) & present[:, None, :]).sum(axis=2)
    return np.where(present, less + (equal + 1) / 2.0, np.nan)


def _unit_sums(values: np.ndarray, units: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (one per ranking) summed per unit, units in ``order``."""
    flat = np.asarray(values, dtype=float).reshape(len(values), -1)
    where = np.searchsorted(order, units)
    known = (where < len(order)).all() and np.array_equal(order[where], units)
    if not known or not _exact_sums(flat):
        return pd.DataFrame(flat).groupby(units).sum().reindex(order).to_numpy()
    # Counts, ranks and their products are multiples of 1/4 far below 2**48: every partial
    # sum is exact, so one bincount gives pandas' (compensated) sums bit for bit.
    width = flat.shape[1]
    cells = (where[:, None] * width + np.arange(width)).reshape(-1)
    sums = np.bincount(cells, flat.reshape(-1), minlength=len(order) * width)
    return sums.reshape(len(order), width)


def _unit_sums_of(
    arrays: Mapping[str, np.ndarray], units: np.ndarray, order: np.ndarray
) -> dict[str, np.ndarray]:
    """:func:`_unit_sums` of each array (one row per ranking), in one pass: each the same
    (units x flattened row) sums as on its own (exact, or pandas' per column)."""
    flat = {k: np.asarray(v, dtype=float).reshape(len(units), -1) for k, v in arrays.items()}
    summed = _unit_sums(np.hstack(list(flat.values())), units, order)
    out, start = {}, 0
    for name, block in flat.items():
        out[name] = summed[:, start : start + block.shape[1]]
        start += block.shape[1]
    return out


def _exact_sums(values: np.ndarray) -> bool:
    """Whether every sum of some of ``values`` is exact in float64 (quarters, well within
    range), so that the order of the additions does not matter."""
    quarters = values * 4
    return bool(np.array_equal(quarters, np.rint(quarters)) and np.abs(values).sum() < 2**48)


# --------------------------------------------------------------------------------------------
# Table 3 and Figure 2
# --------------------------------------------------------------------------------------------


def _pairwise(ranks: np.ndarray) -> dict[str, np.ndarray]:
    a, b = ranks[:, :, None], ranks[:, None, :]
    both = ~np.isnan(a) & ~np.isnan(b)
    return {"wins": (a < b) & both, "ties": (a == b) & both, "both": both}


def _win_rates(sums: Mapping[str, np.ndarray], m: int, non_tied: bool) -> np.ndarray:
    wins = sums["wins"].reshape(-1, m, m)
    both = sums["both"].reshape(-1, m, m)
    den = both - sums["ties"].reshape(-1, m, m) if non_tied else both
    rates = safe_ratio(wins, den)
    rates[:, np.arange(m), np.arange(m)] = np.nan
    return rates


def _average_win_rate(sums: Mapping[str, np.ndarray], m: int, i: int) -> np.ndarray:
    """Table 3 "WR": unweighted mean of the non-tied win rates of row i over met opponents."""
    row = _win_rates(sums, m, non_tied=True)[:, i, :]
    met = ~np.isnan(row)
    total = np.where(met, row, 0.0).sum(axis=1)
    return safe_ratio(total, met.sum(axis=1))


def source_table(
    ranks: np.ndarray,
    correct: np.ndarray,
    units: np.ndarray,
    sources: list[str],
    s: Settings,
    avg: np.ndarray | None = None,
) -> tuple[list[dict], list[dict]]:
    """Per source (Table 3) and per ordered pair of sources (Figure 2), with CIs over units;
    ``avg``: ``average_ranks(ranks)`` when the caller has it."""
    order = np.unique(units)
    m = len(sources)
    pair = _pairwise(ranks)
    avg = average_ranks(ranks) if avg is None else avg
    per_ranking = {
        **pair,
        "rank_sum": np.nan_to_num(avg),
        "ranked": ~np.isnan(avg),
        "correct": np.nan_to_num(correct),
        "judged": ~np.isnan(correct),
    }
    columns = _unit_sums_of(per_ranking, units, order)
    pop = s.population(columns, order)
    totals = pop.totals()
    # Each figure's n_units: the units that add to its denominator.
    met = columns["both"].reshape(-1, m, m) > 0
    untied = (columns["both"] - columns["ties"]).reshape(-1, m, m) > 0
    untied[:, np.arange(m), np.arange(m)] = False
    rows = []
    for i, source in enumerate(sources):
        rows.append(
            {
                "source": source,
                "n_rankings": int(totals["ranked"][i]),
                "n_judged": int(totals["judged"][i]),
                "n_correct": int(totals["correct"][i]),
                "average_win_rate": pop.figure(
                    lambda x, i=i: _average_win_rate(x, m, i),
                    n_units=int(untied[:, i, :].any(axis=1).sum()),
                ),
                "mean_rank": pop.figure(
                    lambda x, i=i: safe_ratio(x["rank_sum"][:, i], x["ranked"][:, i]),
                    n_units=int((columns["ranked"][:, i] > 0).sum()),
                ),
                "percent_correct": pop.figure(
                    lambda x, i=i: 100 * safe_ratio(x["correct"][:, i], x["judged"][:, i]),
                    n_units=int((columns["judged"][:, i] > 0).sum()),
                ),
            }
        )
    return rows, _matrix_rows(pop, sources, met.sum(axis=0), untied.sum(axis=0))


def _matrix_rows(
    pop: Population, sources: list[str], met_units: np.ndarray, untied_units: np.ndarray
) -> list[dict]:
    """Figure 2: one row per ordered pair (source, opponent) that met; ``met_units[i, j]``
    counts the units where i and j met, ``untied_units[i, j]`` those where they met untied
    (each win rate's own units)."""
    m = len(sources)
    totals = pop.totals()
    wins = np.asarray(totals["wins"]).reshape(m, m)
    ties = np.asarray(totals["ties"]).reshape(m, m)
    both = np.asarray(totals["both"]).reshape(m, m)
    out = []
    for i in range(m):
        for j in range(m):
            if i == j or both[i, j] == 0:
                continue
            out.append(
                {
                    "source": sources[i],
                    "opponent": sources[j],
                    "n_rankings": int(both[i, j]),
                    "wins": int(wins[i, j]),
                    "losses": int(wins[j, i]),
                    "ties": int(ties[i, j]),
                    "win_rate": pop.figure(
                        lambda x, i=i, j=j: _win_rates(x, m, False)[:, i, j],
                        n_units=int(met_units[i, j]),
                    ),
                    "win_rate_non_tied": pop.figure(
                        lambda x, i=i, j=j: _win_rates(x, m, True)[:, i, j],
                        n_units=int(untied_units[i, j]),
                    ),
                }
            )
    return out


def criteria_table(long: pd.DataFrame, catalogs: Catalogs) -> list[dict]:
    """Counts of each incorrectness criterion per source (seed 001, Section 5): responses
    with the criterion ticked (``counts``, by criterion id), responses with any criterion
    (= marked incorrect with a reason) and responses ranked - ``metrics.criteria_counts``'s
    columns."""
    ids = [c.id for c in catalogs.criteria]
    sources = sorted(long.source.unique().tolist())
    where = pd.Index(sources).get_indexer(long.source)
    # A study's rankings tick few distinct sets of criteria: count the (source, set) pairs,
    # then each set's criteria once, instead of testing every criterion on every row.
    sets, distinct = pd.factorize(long.criteria.to_numpy(dtype=object))
    per_set = np.bincount(
        where * len(distinct) + sets, minlength=len(sources) * len(distinct)
    ).reshape(len(sources), len(distinct))
    member = np.array([[c in t for c in ids] for t in distinct], dtype=np.int64)
    ticked = per_set @ member.reshape(len(distinct), len(ids))
    n_any = per_set @ np.array([len(t) > 0 for t in distinct], dtype=np.int64)
    n = np.bincount(where, minlength=len(sources))
    return [
        {
            "source": source,
            "counts": {c: int(ticked[i, j]) for j, c in enumerate(ids)},
            "n_with_any_criterion": int(n_any[i]),
            "n_responses": int(n[i]),
        }
        for i, source in enumerate(sources)
    ]


# --------------------------------------------------------------------------------------------
# Table 4 (Kendall's tau-b between raters) and Appendix L (point-biserial)
# --------------------------------------------------------------------------------------------


def tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair over the columns both rank (scipy's formula:
    (P - Q) / sqrt((P + Q + T)(P + Q + U))); NaN with fewer than 2 shared columns or when
    either side ties every shared column."""
    i, j = np.triu_indices(x.shape[1], 1)
    valid = ~(np.isnan(x[:, i]) | np.isnan(x[:, j]) | np.isnan(y[:, i]) | np.isnan(y[:, j]))
    dx = np.where(valid, np.sign(np.nan_to_num(x[:, i] - x[:, j])), 0.0)
    dy = np.where(valid, np.sign(np.nan_to_num(y[:, i] - y[:, j])), 0.0)
    n0 = valid.sum(axis=1)
    not_tied_x = n0 - (valid & (dx == 0)).sum(axis=1)
    not_tied_y = n0 - (valid & (dy == 0)).sum(axis=1)
    den = np.sqrt(not_tied_x * not_tied_y.astype(float))
    return np.where(den > 0, safe_ratio((dx * dy).sum(axis=1), den), np.nan)


def rater_tau(table: pd.DataFrame, meta: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Kendall's tau-b for every pair of raters on every unit both ranked (seed 001, Table 4):
    mean and sample SD over comparisons, per rater pair, and a CI over units."""
    pairs = meta.merge(meta, on="unit", suffixes=("_a", "_b"))
    pairs = pairs[pairs.rater_a < pairs.rater_b]
    x = table.loc[pairs.answer_id_a].to_numpy(float)
    y = table.loc[pairs.answer_id_b].to_numpy(float)
    comparisons = pairs.assign(tau=tau_b(x, y) if len(pairs) else np.array([]))
    comparisons = comparisons.dropna(subset=["tau"])
    return _mean_summary(comparisons, "tau", ["rater_a", "rater_b"], s)


def _mean_summary(values: pd.DataFrame, column: str, by: list[str], s: Settings) -> dict:
    sums = values.groupby("unit")[column].agg(["sum", "size"])
    pop = s.population({"total": sums["sum"].to_numpy(), "n": sums["size"].to_numpy()}, sums.index)
    groups = values.groupby(by)[column].agg(["mean", "size"]).reset_index()
    sd = float(values[column].std(ddof=1)) if len(values) > 1 else None
    return {
        "n_comparisons": len(values),
        "mean": pop.figure(lambda x: safe_ratio(x["total"], x["n"])),
        "sd": sd,
        "by_pair": records(groups.rename(columns={"mean": f"mean_{column}", "size": "n"})),
    }


def _pearson_rows(c: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row pair over the entries both have; NaN with fewer than
    2 such entries or no variation on either side (scipy's pointbiserialr = Pearson)."""
    valid = ~np.isnan(c) & ~np.isnan(r)
    n = valid.sum(axis=1)
    cz, rz = np.where(valid, c, 0.0), np.where(valid, r, 0.0)
    cm = safe_ratio(cz.sum(axis=1), n)[:, None]
    rm = safe_ratio(rz.sum(axis=1), n)[:, None]
    dc, dr = np.where(valid, c - cm, 0.0), np.where(valid, r - rm, 0.0)
    vc, vr = (dc**2).sum(axis=1), (dr**2).sum(axis=1)
    ok = (n >= 2) & (vc > 1e-12) & (vr > 1e-12)
    return np.where(ok, safe_ratio((dc * dr).sum(axis=1), np.sqrt(vc * vr)), np.nan)


def _pooled_pearson(sums: Mapping[str, np.ndarray]) -> np.ndarray:
    n, c, r = sums["n"], sums["c"], sums["r"]
    num = n * sums["cr"] - c * r
    den = np.sqrt(np.clip(n * sums["cc"] - c**2, 0, None) * np.clip(n * sums["rr"] - r**2, 0, None))
    return np.where(den > 1e-9, safe_ratio(num, den), np.nan)


def correctness_vs_rank(
    avg: np.ndarray, correct: np.ndarray, units: np.ndarray, s: Settings
) -> dict[str, Any]:
    """Point-biserial correlation of correct (1/0) with average rank (seed 001, App. L):
    per ranking (mean, sample SD, CI over units) and pooled over all (ranking, source) rows."""
    per = pd.DataFrame({"unit": units, "rater": "", "r_pb": _pearson_rows(correct, avg)})
    per = per.dropna(subset=["r_pb"])
    summary = _mean_summary(per, "r_pb", ["rater"], s)
    summary.pop("by_pair")
    both = ~np.isnan(avg) & ~np.isnan(correct)
    c, r = np.where(both, correct, 0.0), np.where(both, avg, 0.0)
    order = np.unique(units)
    cols = {"n": both, "c": c, "r": r, "cc": c * c, "rr": r * r, "cr": c * r}
    summed = _unit_sums_of({k: v.sum(axis=1) for k, v in cols.items()}, units, order)
    pooled = s.population({k: v[:, 0] for k, v in summed.items()}, order)
    return {**summary, "pooled": pooled.figure(_pooled_pearson)}


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
    """Every MedAlign table (seed 001) computed from the project's rank answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    answers = humans(people(frames, KIND))
    long, duplicates = long_table(answers, frames)
    out: dict[str, Any] = {**answer_counts(answers), "n_duplicate_source_entries": duplicates}
    if long.empty:
        return jsonable(
            {
                **out,
                "sources": [],
                "by_source": [],
                "win_rates": [],
                "criteria": [],
                "rater_tau": None,
                "correctness_vs_rank": None,
            }
        )
    sources = sorted(long.source.unique().tolist())
    ranks = wide(long, "rank", sources)
    correct = wide(long, "correct", sources).reindex(ranks.index)
    meta = long.drop_duplicates("answer_id").set_index("answer_id").loc[ranks.index]
    units = meta.unit.to_numpy()
    avg = average_ranks(ranks.to_numpy(float))
    by_source, matrix = source_table(
        ranks.to_numpy(float), correct.to_numpy(float), units, sources, s, avg
    )
    return jsonable(
        {
            **out,
            "sources": sources,
            "by_source": by_source,
            "win_rates": matrix,
            "criteria": criteria_table(long, s.catalogs),
            "rater_tau": rater_tau(ranks, meta.reset_index()[["answer_id", "unit", "rater"]], s),
            "correctness_vs_rank": correctness_vs_rank(avg, correct.to_numpy(float), units, s),
        }
    )
