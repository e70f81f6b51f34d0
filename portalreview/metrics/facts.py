"""Fact preservation when a response is edited: MedFactChecking (seed 004, "From Generation to
Collaboration: Using LLMs to Edit for Empathy", Section 3.3 "Formal Definition", equations 1-4,
and Supplementary Table 4).

The original response d is decomposed into medical facts C and the edited response d' into
facts C'. Each fact of C is checked for entailment by d' (preserved) and each fact of C' for
entailment by d (grounded). Fact-Recall = preserved / |C| (information kept), Fact-Precision =
grounded / |C'| (additions that are supported). All arithmetic here is hand-written; the
decomposition and entailment judgments come from annotators or a model elsewhere.

A pair in which neither response holds a medical fact (an annotator's "no medical facts on
either side") is ``fact_scores([], [])``: 1.0 and 1.0 by the paper's rule, which the macro
averages count like any pair; the micro sums gain nothing from it, so it changes a micro figure
only when every pair pooled is empty (then 1.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portalreview.metrics._common import check_count, harmonic_mean, ratio


@dataclass(frozen=True)
class FactScores:
    """Counts and scores of one pair, or of pairs pooled (micro)."""

    n_original: int
    n_preserved: int
    n_edited: int
    n_grounded: int
    recall: float
    precision: float
    f1: float


@dataclass(frozen=True)
class MacroFactScores:
    """Macro averages over pairs (seed 004, equations 3-4, left-hand forms)."""

    n_pairs: int
    recall: float
    precision: float
    f1: float


@dataclass(frozen=True)
class FactFlow:
    """Supplementary Table 4's fact flow."""

    original: int
    preserved: int
    edited: int
    grounded: int
    new_facts: int
    loss_rate: float
    hallucination_rate: float


def _empty_rule(n_own: int, n_other: int) -> float:
    """Seed 004, Section 3.3: with an empty fact set, 1.0 if both sets are empty, else 0.0."""
    return 1.0 if n_own == 0 and n_other == 0 else 0.0


def fact_scores_from_counts(
    n_original: int, n_preserved: int, n_edited: int, n_grounded: int
) -> FactScores:
    """Fact-Recall, Fact-Precision and their F1 from counts (seed 004, equations 1-2).

    recall = n_preserved / n_original (|C|), precision = n_grounded / n_edited (|C'|). The
    paper's edge-case rule ("1.0 if both sets are empty, and 0.0 otherwise"): when |C| = 0,
    recall is 1.0 if |C'| = 0 too, else 0.0; when |C'| = 0, precision is 1.0 if |C| = 0, else
    0.0. F1 is the harmonic mean of the two (0.0 when both are 0). A preserved or grounded
    count above its set size is a ValueError.
    """
    n_original = check_count(n_original, "n_original")
    n_preserved = check_count(n_preserved, "n_preserved")
    n_edited = check_count(n_edited, "n_edited")
    n_grounded = check_count(n_grounded, "n_grounded")
    if n_preserved > n_original:
        raise ValueError(f"n_preserved ({n_preserved}) exceeds n_original ({n_original})")
    if n_grounded > n_edited:
        raise ValueError(f"n_grounded ({n_grounded}) exceeds n_edited ({n_edited})")
    recall = ratio(n_preserved, n_original, _empty_rule(n_original, n_edited))
    precision = ratio(n_grounded, n_edited, _empty_rule(n_edited, n_original))
    return FactScores(
        n_original=n_original,
        n_preserved=n_preserved,
        n_edited=n_edited,
        n_grounded=n_grounded,
        recall=recall,
        precision=precision,
        f1=harmonic_mean(recall, precision),
    )


def _flags(values: Sequence[Any], name: str) -> int:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of True/False, one per fact")
    total = 0
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
            total += int(v)
        else:
            raise ValueError(f"{name}[{i}] must be True/False (entailment decided), got {v!r}")
    return total


def fact_scores(preserved: Sequence[bool], grounded: Sequence[bool]) -> FactScores:
    """Fact-Recall and Fact-Precision of one (original, edited) pair (seed 004, eqs. 1-2).

    ``preserved[i]`` is [d' entails c_i] for the i-th fact of the original response;
    ``grounded[j]`` is [d entails c'_j] for the j-th fact of the edited response. Empty lists
    are empty fact sets (see :func:`fact_scores_from_counts` for the empty-set rule). An
    undecided entry (None, NaN) is a ValueError.
    """
    return fact_scores_from_counts(
        len(preserved), _flags(preserved, "preserved"), len(grounded), _flags(grounded, "grounded")
    )


def _pairs(pairs: Iterable[FactScores]) -> list[FactScores]:
    items = list(pairs)
    if not items:
        raise ValueError("no pairs given")
    if any(not isinstance(p, FactScores) for p in items):
        raise ValueError("pairs must be FactScores (see fact_scores)")
    return items


def micro_fact_scores(pairs: Iterable[FactScores]) -> FactScores:
    """Micro Fact-Recall / Fact-Precision over pairs (seed 004, equations 3-4, right-hand).

    "Micro" = all fact counts are summed over the corpus first, then divided once, so pairs
    with many facts weigh more. The empty-set rule applies to the pooled counts. F1 = harmonic
    mean of micro recall and micro precision.
    """
    items = _pairs(pairs)
    return fact_scores_from_counts(
        sum(p.n_original for p in items),
        sum(p.n_preserved for p in items),
        sum(p.n_edited for p in items),
        sum(p.n_grounded for p in items),
    )


def macro_fact_scores(pairs: Iterable[FactScores]) -> MacroFactScores:
    """Macro Fact-Recall / Fact-Precision over pairs (seed 004, equations 3-4, left-hand).

    "Macro" = each pair's recall and precision (with the per-pair empty-set rule) averaged
    with equal weight. F1 is the harmonic mean of macro recall and macro precision, not the mean
    of per-pair F1: the paper's figures agree with that (macro R 0.84, P 0.92 -> F1 0.88;
    R 0.27, P 0.40 -> F1 0.32, Section 4).
    """
    items = _pairs(pairs)
    recall = float(np.mean([p.recall for p in items]))
    precision = float(np.mean([p.precision for p in items]))
    return MacroFactScores(
        n_pairs=len(items),
        recall=recall,
        precision=precision,
        f1=harmonic_mean(recall, precision),
    )


def fact_flow(pairs: Iterable[FactScores]) -> FactFlow:
    """Fact flow over pairs (seed 004, Supplementary Table 4).

    Totals of original |C|, preserved, edited |C'| and grounded facts, and the table's
    formulas: new facts = edited - grounded; loss rate = (original - preserved) / original;
    hallucination rate = new / edited. A rate whose denominator is 0 is NaN (no facts on that
    side: nothing to lose, or nothing added).
    """
    items = _pairs(pairs)
    original = sum(p.n_original for p in items)
    preserved = sum(p.n_preserved for p in items)
    edited = sum(p.n_edited for p in items)
    grounded = sum(p.n_grounded for p in items)
    new = edited - grounded
    return FactFlow(
        original=original,
        preserved=preserved,
        edited=edited,
        grounded=grounded,
        new_facts=new,
        loss_rate=ratio(original - preserved, original, math.nan),
        hallucination_rate=ratio(new, edited, math.nan),
    )
