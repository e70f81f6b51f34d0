"""Fewer urgency judgements for the same inbox order? A measurement before any recipe is built
(issue 19, part 1: "measured, not assumed").

Simulated clinicians judge pairs of an inbox as the demo's simulated annotators do: each sees a
message's reference level plus Gaussian noise (sd 0.4 + 2 x their personal noise: 0.6, 0.72 and
0.84 for the demo's three), and picks the lower (more urgent); no ties. So they err mostly on
adjacent levels. Two ways to spend their judgements:

* **all pairs** (seed 002): every unordered pair once, the inbox sorted by win rate. Its NDCG@10
  and T-NDCG@10 (``metrics.urgency``) are the target.
* **adaptive**: a Bradley-Terry model (fitted by scipy's L-BFGS with a small ridge) after each
  round of judgements (n / 10 of them); the next pairs are the unasked ones the model is least
  sure of (p(1-p) largest), weighted by where the two stand in the current order: NDCG@k
  looks at its top, T-NDCG@k at its bottom too, so each message weighs 1 / log2(2 + its
  distance from the nearer end), and a pair the sum of its two. Sides at random.

Printed, per inbox size: how many judgements the adaptive way needed before its order's NDCG@10
and T-NDCG@10 were both within 0.02 of the all-pairs values of the same clinician (and stayed
there at every later check), as a share of all pairs: median and the 10th-90th percentiles over
``--seeds`` seeds. The 30-message inbox is the demo's (its reference levels); the 100-message
inboxes draw levels 1-6 with the demo inbox's level shares.

    .venv/bin/python benchmarks/bench_adaptive_pairs.py [--seeds 20] [--sizes 30,100]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize

from portalreview.metrics.urgency import ndcg_at_k, relevance_from_levels, t_ndcg_at_k

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


def bradley_terry(n: int, judged: list[tuple[int, int]], ridge: float = 0.05) -> np.ndarray:
    """Strengths (log scale) maximising the Bradley-Terry likelihood of ``judged``."""
    if not judged:
        return np.zeros(n)
    winners = np.array([w for w, _ in judged])
    losers = np.array([lo for _, lo in judged])

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        diff = theta[winners] - theta[losers]
        p = 1.0 / (1.0 + np.exp(-diff))
        value = -np.sum(np.log(p + 1e-12)) + ridge * np.sum(theta**2)
        grad = 2 * ridge * theta
        np.add.at(grad, winners, -(1 - p))
        np.add.at(grad, losers, 1 - p)
        return float(value), grad

    return minimize(loss, np.zeros(n), jac=True, method="L-BFGS-B").x


def order_quality(scores: np.ndarray, relevance: np.ndarray, rng: np.random.Generator):
    """NDCG@K and T-NDCG@K of the order by ``scores`` (ties broken at random)."""
    order = np.lexsort((rng.random(scores.size), -scores))
    in_order = relevance[order]
    return ndcg_at_k(in_order, K), t_ndcg_at_k(in_order, K)


def next_pairs(theta: np.ndarray, asked: np.ndarray, count: int) -> list[tuple[int, int]]:
    """The unasked pairs the model is least sure of, weighted toward the top of its order."""
    n = theta.size
    rank = np.empty(n, dtype=int)
    rank[np.argsort(-theta)] = np.arange(n)
    # NDCG@k looks at the top of the order, T-NDCG@k also at its bottom (the reversed order)
    weight = np.maximum(1.0 / np.log2(rank + 2.0), 1.0 / np.log2(n - rank + 1.0))
    diff = theta[:, None] - theta[None, :]
    p = 1.0 / (1.0 + np.exp(-diff))
    value = p * (1 - p) * (weight[:, None] + weight[None, :])
    value[asked] = -1.0
    value[np.tril_indices(n)] = -1.0
    best = np.argsort(value, axis=None)[::-1][:count]
    return [tuple(np.unravel_index(i, value.shape)) for i in best if value.flat[i] >= 0]


def judgements_needed(levels: np.ndarray, sd: float, seed: int, step: int) -> tuple[int, int]:
    """(judgements the adaptive way needed, all pairs) for one simulated clinician."""
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

    asked = np.zeros((n, n), dtype=bool)
    judged: list[tuple[int, int]] = []
    # a start: every message in one random pair (a chain through a random permutation)
    start = rng.permutation(n)
    for a, b in itertools.pairwise(start):
        asked[a, b] = asked[b, a] = True
        judged.append(judge(a, b))
    reached_at = None
    while len(judged) < len(all_pairs):
        theta = bradley_terry(n, judged)
        ndcg, tndcg = order_quality(theta, relevance, rng)
        close = ndcg >= target[0] - TOLERANCE and tndcg >= target[1] - TOLERANCE
        if close and reached_at is None:
            reached_at = len(judged)
        elif not close:
            reached_at = None  # it must stay there
        for a, b in next_pairs(theta, asked, step):
            asked[a, b] = asked[b, a] = True
            judged.append(judge(a, b))
    return (reached_at if reached_at is not None else len(all_pairs)), len(all_pairs)


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
    parser.add_argument("--step", type=int, default=0,
                        help="judgements between two model fits (default: n / 10)")
    args = parser.parse_args(argv)
    demo = demo_inbox_levels()
    print(f"clinician noise sd {args.sd}; target: all-pairs NDCG@{K} and T-NDCG@{K} within "
          f"{TOLERANCE}; {args.seeds} seeds")
    print(f"{'messages':>9}{'all pairs':>11}{'median':>9}{'p10':>7}{'p90':>7}"
          f"{'median share':>14}{'p90 share':>11}")
    for size in (int(s) for s in args.sizes.split(",")):
        needed, total = [], 0
        for seed in range(args.seeds):
            levels = levels_for(size, demo, np.random.default_rng(1000 + seed))
            step = args.step or max(1, size // 10)
            used, total = judgements_needed(levels, args.sd, seed, step)
            needed.append(used)
        p10, p90 = np.percentile(needed, [10, 90])
        median = statistics.median(needed)
        print(f"{size:>9}{total:>11}{median:>9.0f}{p10:>7.0f}{p90:>7.0f}"
              f"{median / total:>14.2f}{p90 / total:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
