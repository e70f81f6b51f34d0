"""Fewer urgency judgements for the same inbox order: the adaptive-inbox recipe replayed on
simulated clinicians (issue 19, part 1: "measured, not assumed").

Simulated clinicians judge pairs of an inbox as the demo's simulated annotators do: each sees a
message's reference level plus Gaussian noise (sd 0.4 + 2 x their personal noise: 0.6, 0.72 and
0.84 for the demo's three), and picks the lower (more urgent); no ties. So they err mostly on
adjacent levels. Two ways to spend their judgements:

* **all pairs** (seed 002): every unordered pair once, the inbox sorted by win rate. Its NDCG@10
  and T-NDCG@10 (``metrics.urgency``) are the target.
* **adaptive**: exactly what the app does for an adaptive inbox (``store/adaptive.choose_pair``,
  one pair at a time): a chain through the inbox in a random order, then after every judgement
  a Bradley-Terry fit (``metrics/bradley_terry.py``) and the unasked pair it is least sure of,
  weighted toward both ends of its order. The order is sorted by the fitted strengths.

Printed, per inbox size, over ``--seeds`` seeds (median and the 10th-90th percentiles):

* how many judgements the adaptive way needed before its order's NDCG@10 and T-NDCG@10 were both
  within 0.02 of the all-pairs values of the same clinician, and stayed there at every later
  check (a check every n / 10 judgements), as a share of all pairs;
* at the recipe's default number of judgements (n log2 n, ``store/adaptive.default_judgements``):
  the share of seeds within 0.02 on both, and the median shortfall of each.

The 30-message inbox is the demo's (its reference levels); the 100-message inboxes draw levels
1-6 with the demo inbox's level shares.

    .venv/bin/python benchmarks/bench_adaptive_pairs.py [--seeds 20] [--sizes 30,100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

import numpy as np

from portalreview.metrics.bradley_terry import bradley_terry
from portalreview.metrics.urgency import ndcg_at_k, relevance_from_levels, t_ndcg_at_k
from portalreview.store.adaptive import choose_pair, default_judgements

TOLERANCE = 0.02
K = 10


def demo_inbox_levels() -> list[int]:
    from portalreview.demo import INBOX, _load

    return [row["urgency_level"] for row in _load("cases.jsonl")
            if (row.get("tags") or {}).get("inbox") == INBOX]


class Clinician:
    """Judges as the demo's simulated annotators do (see the module's docstring)."""

    def __init__(self, levels: np.ndarray, sd: float, rng: np.random.Generator) -> None:
        self.levels, self.sd, self.rng = levels, sd, rng

    def first_more_urgent(self, a: int, b: int) -> bool:
        seen_a = self.levels[a] + self.rng.normal(0, self.sd)
        seen_b = self.levels[b] + self.rng.normal(0, self.sd)
        return bool(seen_a <= seen_b)


def scores_by_win_rate(n: int, judged: list[tuple[int, int]]) -> np.ndarray:
    """Wins over comparisons (seed 002's all-pairs sort); ``judged``: (winner, loser)."""
    wins, seen = np.zeros(n), np.zeros(n)
    for winner, loser in judged:
        wins[winner] += 1
        seen[winner] += 1
        seen[loser] += 1
    return wins / np.maximum(seen, 1)


def order_quality(scores: np.ndarray, relevance: np.ndarray, rng: np.random.Generator):
    """NDCG@K and T-NDCG@K of the order by ``scores`` (ties broken at random)."""
    order = np.lexsort((rng.random(scores.size), -scores))
    in_order = relevance[order]
    return ndcg_at_k(in_order, K), t_ndcg_at_k(in_order, K)


def replay(levels: np.ndarray, sd: float, seed: int) -> dict[str, float]:
    """One simulated clinician: the judgements the adaptive way needed (see the module
    docstring), all pairs, and the shortfalls at the default number of judgements."""
    rng = np.random.default_rng(seed)
    n = levels.size
    relevance = relevance_from_levels(levels)
    clinician = Clinician(levels, sd, rng)

    def judge(a: int, b: int) -> tuple[int, int]:
        if rng.random() < 0.5:  # sides at random, as the app shows them
            a, b = b, a
        return (a, b) if clinician.first_more_urgent(a, b) else (b, a)

    all_pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    target = order_quality(scores_by_win_rate(n, [judge(a, b) for a, b in all_pairs]),
                           relevance, rng)
    budget = default_judgements(n)
    check = max(1, n // 10)
    open_pairs = ~np.eye(n, dtype=bool)
    first: list[int] = []
    second: list[int] = []
    won: list[float] = []
    reached_at = None
    at_budget = (np.nan, np.nan)
    while True:
        count = len(first)
        if count % check == 0 or count in (budget, len(all_pairs)):
            theta = bradley_terry(n, np.array(first, dtype=np.int64),
                                  np.array(second, dtype=np.int64), np.array(won))
            ndcg, tndcg = order_quality(theta, relevance, rng)
            close = ndcg >= target[0] - TOLERANCE and tndcg >= target[1] - TOLERANCE
            if close and reached_at is None:
                reached_at = count
            elif not close:
                reached_at = None  # it must stay there
            if count == budget:
                at_budget = (target[0] - ndcg, target[1] - tndcg)
        pair = choose_pair(np.array(first, dtype=np.int64), np.array(second, dtype=np.int64),
                           np.array(won), open_pairs, (seed, 1))
        if pair is None:
            break
        i, j = pair
        open_pairs[i, j] = open_pairs[j, i] = False
        winner, _loser = judge(i, j)
        first.append(i)
        second.append(j)
        won.append(1.0 if winner == i else 0.0)
    return {
        "needed": reached_at if reached_at is not None else len(all_pairs),
        "all_pairs": len(all_pairs),
        "budget": budget,
        "ndcg_short": at_budget[0],
        "t_ndcg_short": at_budget[1],
    }


def levels_for(size: int, demo: list[int], rng: np.random.Generator) -> np.ndarray:
    if size == len(demo):
        return np.array(demo)
    shares = np.bincount(demo, minlength=7)[1:] / len(demo)
    return rng.choice(np.arange(1, 7), size=size, p=shares)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--sizes", default="30,100")
    parser.add_argument("--sd", type=float, default=0.72, help="the clinician's noise (sd)")
    args = parser.parse_args(argv)
    demo = demo_inbox_levels()
    print(f"clinician noise sd {args.sd}; target: all-pairs NDCG@{K} and T-NDCG@{K} within "
          f"{TOLERANCE}; {args.seeds} seeds; the app's choice, one pair per fit")
    print(f"{'messages':>9}{'all pairs':>11}{'median':>8}{'p10':>6}{'p90':>6}{'share':>7}"
          f"{'p90 share':>11}{'default':>9}{'within':>8}{'NDCG short':>12}{'T-NDCG short':>14}")
    for size in (int(s) for s in args.sizes.split(",")):
        runs = []
        for seed in range(args.seeds):
            levels = levels_for(size, demo, np.random.default_rng(1000 + seed))
            runs.append(replay(levels, args.sd, seed))
        needed = [r["needed"] for r in runs]
        total, budget = runs[0]["all_pairs"], runs[0]["budget"]
        p10, p90 = np.percentile(needed, [10, 90])
        median = statistics.median(needed)
        within = np.mean([max(r["ndcg_short"], r["t_ndcg_short"]) <= TOLERANCE for r in runs])
        print(f"{size:>9}{total:>11}{median:>8.0f}{p10:>6.0f}{p90:>6.0f}{median / total:>7.2f}"
              f"{p90 / total:>11.2f}{budget:>9}{within:>8.0%}"
              f"{statistics.median(r['ndcg_short'] for r in runs):>12.3f}"
              f"{statistics.median(r['t_ndcg_short'] for r in runs):>14.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
