"""Ranking several responses to one case: MedAlign's measures (seed 001).

Clinicians rank the responses of several sources (models, or a clinician's gold answer) to the
same instruction, ties allowed (Section 5, "Clinician Evaluation"), and mark each response
correct or incorrect by criteria C1-C3. This module computes the head-to-head win-rate matrix
(Figure 2), the average win rate, mean rank and % correct (Table 3), Kendall's tau between
raters and between an automatic metric and the human ranks (Table 4), and the point-biserial
correlation of correctness with rank (Appendix L, Table S9).

Input layout: a long DataFrame with one row per (unit, rater, source), columns ``unit``,
``rater``, ``source``, ``rank`` (1 = best; NaN = not ranked), and for the correctness
functions ``correct`` (True/False/1/0, NaN = not judged). One (unit, rater) pair is one
"ranking". Kendall's tau-b and the point-biserial correlation are scipy's; the rest is
hand-written counting.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from portalreview.metrics._common import is_missing, mean_sd

_KEYS = ["unit", "rater", "source"]


@dataclass(frozen=True)
class CorrelationSummary:
    """Mean and sample SD (ddof=1) of per-comparison coefficients, and the comparisons."""

    mean: float
    sd: float
    n: int
    values: pd.DataFrame


def _check_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{name} has no rows")


def _numeric(series: pd.Series, name: str) -> pd.Series:
    try:
        return pd.to_numeric(series, errors="raise").astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"column {name!r} must be numeric (NaN for missing): {exc}") from exc


def _rank_table(ranks: pd.DataFrame) -> pd.DataFrame:
    """(unit, rater) x source table of ranks, NaN where a source was not ranked."""
    _check_columns(ranks, [*_KEYS, "rank"], "ranks")
    dup = ranks.duplicated(_KEYS)
    if dup.any():
        row = ranks.loc[dup, _KEYS].iloc[0].tolist()
        raise ValueError(f"more than one rank for (unit, rater, source) = {tuple(row)}")
    frame = ranks[_KEYS].copy()
    frame["rank"] = _numeric(ranks["rank"], "rank")
    table = frame.pivot(index=["unit", "rater"], columns="source", values="rank")
    return table.dropna(how="all")


def _average_ranks(table: pd.DataFrame) -> pd.DataFrame:
    """Each ranking re-ranked 1..m with ties given their average rank; NaN stays NaN."""
    values = table.to_numpy(dtype=float)
    out = np.full_like(values, np.nan)
    for i, row in enumerate(values):
        present = ~np.isnan(row)
        out[i, present] = stats.rankdata(row[present], method="average")
    return pd.DataFrame(out, index=table.index, columns=table.columns)


def win_rate_matrix(
    ranks: pd.DataFrame, *, denominator: Literal["all", "non_tied"] = "all"
) -> pd.DataFrame:
    """Head-to-head win rates between sources (seed 001, Figure 2; Appendix Q, Figure S8).

    Entry (i, j) is the share of rankings (one (unit, rater) pair each; a unit judged by three
    raters gives three) in which source i got a strictly better (smaller) rank than source j.
    A tie is a win for neither. ``denominator="all"`` (default) divides by the rankings in which
    both i and j were ranked, ties included - Figure 2's "proportion of instructions for which
    [i] was strictly preferred over [j]" - so w[i, j] + w[j, i] <= 1. ``"non_tied"`` divides by
    the rankings where they were not tied (Figure S8's "all non-tied A vs. B battles"), so
    w[i, j] + w[j, i] = 1; Table 3's WR column sums to 3.00 over 6 models, which holds only
    under this denominator. Pairs never compared (or always tied, for non_tied) are NaN, as is
    the diagonal.
    """
    if denominator not in ("all", "non_tied"):
        raise ValueError(f"denominator must be 'all' or 'non_tied', got {denominator!r}")
    table = _rank_table(ranks)
    r = table.to_numpy(dtype=float)
    a, b = r[:, :, None], r[:, None, :]
    wins = (a < b).sum(axis=0).astype(float)
    both = (~np.isnan(a) & ~np.isnan(b)).sum(axis=0).astype(float)
    if denominator == "non_tied":
        both = both - (a == b).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(both > 0, wins / np.where(both > 0, both, 1), np.nan)
    np.fill_diagonal(rates, np.nan)
    sources = list(table.columns)
    return pd.DataFrame(rates, index=pd.Index(sources, name="source"), columns=sources)


def average_win_rate(win_matrix: pd.DataFrame) -> pd.Series:
    """Average win rate of each source over its opponents (seed 001, Table 3 "WR").

    "Average win rate marginalizing over model pairings": the unweighted mean of row i of
    :func:`win_rate_matrix` over the other sources, skipping NaN (opponents never met). A
    source that met nobody gets NaN.
    """
    if not isinstance(win_matrix, pd.DataFrame) or win_matrix.shape[0] != win_matrix.shape[1]:
        raise ValueError("win_matrix must be a square DataFrame from win_rate_matrix")
    values = win_matrix.to_numpy(dtype=float).copy()
    np.fill_diagonal(values, np.nan)
    counts = (~np.isnan(values)).sum(axis=1)
    sums = np.nansum(values, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
    return pd.Series(means, index=win_matrix.index, name="average_win_rate")


def mean_rank(ranks: pd.DataFrame) -> pd.Series:
    """Mean human-assigned rank per source, lower is better (seed 001, Table 3 "Rank").

    Within each ranking the given ranks are read only as an order and re-ranked 1..m over the
    sources ranked there, tied sources sharing the average of their positions (1, 1, 3 and
    1, 1, 2 both become 1.5, 1.5, 3). Each source's mean is over the rankings that include it.
    With every source ranked everywhere the means add up to m(m+1)/2, as Table 3's do (21.0).
    """
    table = _average_ranks(_rank_table(ranks))
    return table.mean(axis=0, skipna=True).rename("mean_rank")


def _flag_values(series: pd.Series, name: str) -> pd.Series:
    """A True/False/1/0 column as floats 1.0/0.0, missing (None/NaN/NA) as NaN."""

    def convert(v: object) -> float:
        if is_missing(v):
            return math.nan
        if isinstance(v, (bool, np.bool_)) or (
            isinstance(v, (int, float, np.number)) and v in (0, 1)
        ):
            return float(bool(v))
        raise ValueError(f"column {name!r} must hold True/False/1/0 or NaN, got {v!r}")

    return series.astype(object).map(convert).astype(float)


def percent_correct(ratings: pd.DataFrame) -> pd.Series:
    """Percentage of a source's judged responses marked correct (seed 001, Table 3 "Correct").

    ``ratings`` has columns ``source`` and ``correct``; rows with ``correct`` missing are left
    out. Returned on a 0-100 scale (Table 3 prints 65.0% etc.); NaN for a source never judged.
    """
    _check_columns(ratings, ["source", "correct"], "ratings")
    values = _flag_values(ratings["correct"], "correct")
    return (values.groupby(ratings["source"]).mean() * 100).rename("percent_correct")


def criteria_counts(
    ratings: pd.DataFrame, criteria: Sequence[str] = ("c1", "c2", "c3")
) -> pd.DataFrame:
    """How often each incorrectness criterion was ticked, per source (seed 001, Section 5).

    A response is incorrect when it meets at least one of C1 (not clinically appropriate), C2
    (errors that would change the clinical interpretation), C3 (does not address the
    instruction). ``ratings`` has a ``source`` column and one boolean column per criterion
    (NaN counts as not ticked). Columns: one count per criterion, ``any`` (responses with at
    least one criterion, i.e. incorrect) and ``n`` (rows).
    """
    criteria = list(criteria)
    if not criteria:
        raise ValueError("criteria must name at least one column")
    _check_columns(ratings, ["source", *criteria], "ratings")
    flags = pd.DataFrame({c: _flag_values(ratings[c], c).fillna(0.0) > 0 for c in criteria})
    counts = flags.groupby(ratings["source"]).sum().astype(int)
    counts["any"] = flags.any(axis=1).groupby(ratings["source"]).sum().astype(int)
    counts["n"] = ratings.groupby("source").size()
    return counts


def _summary(rows: list[dict], columns: list[str], value: str) -> CorrelationSummary:
    frame = pd.DataFrame(rows, columns=columns)
    mean, sd = mean_sd(frame[value].tolist())
    return CorrelationSummary(mean=mean, sd=sd, n=len(frame), values=frame)


def rater_kendall_tau(ranks: pd.DataFrame) -> CorrelationSummary:
    """Kendall's tau-b between raters on shared units (seed 001, Table 4 "Inter-Rater").

    For every pair of raters and every unit both ranked, tau-b (``scipy.stats.kendalltau``,
    which corrects for ties) between their ranks over the sources both ranked. Skipped: pairs
    sharing fewer than 2 sources, and comparisons where tau is undefined because one rater tied
    everything. The summary is the mean and sample SD over all comparisons (each (rater pair,
    unit) counts once); ``values`` lists them (rater_a, rater_b, unit, n_sources, tau). For a CI
    as in Table 4, bootstrap over ``values.tau``.
    """
    table = _rank_table(ranks)
    rows = []
    units = table.index.get_level_values("unit").unique()
    for unit in units:
        block = table.xs(unit, level="unit")
        for ra, rb in itertools.combinations(block.index, 2):
            x, y = block.loc[ra].to_numpy(float), block.loc[rb].to_numpy(float)
            keep = ~np.isnan(x) & ~np.isnan(y)
            if keep.sum() < 2 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
                continue
            tau = float(stats.kendalltau(x[keep], y[keep]).statistic)
            rows.append(
                {
                    "rater_a": ra,
                    "rater_b": rb,
                    "unit": unit,
                    "n_sources": int(keep.sum()),
                    "tau": tau,
                }
            )
    return _summary(rows, ["rater_a", "rater_b", "unit", "n_sources", "tau"], "tau")


def metric_kendall_tau(ranks: pd.DataFrame, scores: pd.DataFrame) -> CorrelationSummary:
    """Kendall's tau-b between an automatic metric and human ranks (seed 001, Table 4).

    ``scores`` has columns ``unit``, ``source``, ``score`` with higher = better (COMET-like).
    For each human ranking, tau-b between the metric's scores and the negated human ranks over
    the sources that have both, so agreement is positive. Rankings with fewer than 2 such
    sources, or with tau undefined (all tied on one side), are skipped. Mean and sample SD over
    rankings; ``values`` lists (unit, rater, n_sources, tau).
    """
    table = _rank_table(ranks)
    _check_columns(scores, ["unit", "source", "score"], "scores")
    if scores.duplicated(["unit", "source"]).any():
        raise ValueError("scores has more than one score for a (unit, source)")
    frame = scores[["unit", "source"]].copy()
    frame["score"] = _numeric(scores["score"], "score")
    score_table = frame.pivot(index="unit", columns="source", values="score")
    rows = []
    for (unit, rater), row in table.iterrows():
        if unit not in score_table.index:
            continue
        metric = score_table.loc[unit].reindex(table.columns).to_numpy(float)
        human = row.to_numpy(float)
        keep = ~np.isnan(metric) & ~np.isnan(human)
        if keep.sum() < 2 or np.ptp(metric[keep]) == 0 or np.ptp(human[keep]) == 0:
            continue
        tau = float(stats.kendalltau(metric[keep], -human[keep]).statistic)
        rows.append({"unit": unit, "rater": rater, "n_sources": int(keep.sum()), "tau": tau})
    return _summary(rows, ["unit", "rater", "n_sources", "tau"], "tau")


def correctness_rank_correlation(
    ratings: pd.DataFrame, *, per_ranking: bool = True
) -> CorrelationSummary:
    """Point-biserial correlation of correctness with rank (seed 001, Appendix L, Table S9).

    ``ratings`` has ``unit``, ``rater``, ``source``, ``rank`` and ``correct``. Ranks are first
    turned into average ranks within each ranking (as in :func:`mean_rank`); rows missing
    either value are dropped. ``scipy.stats.pointbiserialr`` then correlates correct (1/0)
    with rank: negative values mean correct responses sit near the top (the paper reports
    -0.79). ``per_ranking=True`` (default): one coefficient per (unit, rater) ranking, skipping
    rankings where correctness or rank is constant (undefined), summarised by mean and sample
    SD; ``per_ranking=False``: one pooled coefficient over all rows (sd NaN).
    """
    _check_columns(ratings, [*_KEYS, "rank", "correct"], "ratings")
    avg = _average_ranks(_rank_table(ratings)).stack().rename("avg_rank")
    frame = ratings[_KEYS].copy()
    frame["correct"] = _flag_values(ratings["correct"], "correct")
    frame = frame.join(avg, on=_KEYS).dropna(subset=["correct", "avg_rank"])
    groups = [(None, frame)] if not per_ranking else list(frame.groupby(["unit", "rater"]))
    rows = []
    for key, group in groups:
        c, r = group["correct"].to_numpy(), group["avg_rank"].to_numpy()
        if len(group) < 2 or np.ptp(c) == 0 or np.ptp(r) == 0:
            continue
        value = float(stats.pointbiserialr(c, r).statistic)
        unit, rater = key if key is not None else (None, None)
        rows.append({"unit": unit, "rater": rater, "n": len(group), "r_pb": value})
    if not per_ranking and not rows:
        raise ValueError("correctness or rank is constant over all rows: correlation undefined")
    return _summary(rows, ["unit", "rater", "n", "r_pb"], "r_pb")
