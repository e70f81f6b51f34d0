"""Fact preservation of an edit: MedFactChecking (seed 004, Section 3.3, equations 1-4, and
Supplementary Table 4) from facts answers.

A facts answer lists the medical facts of the original response (each marked preserved when
the edited response entails it) and of the edited response (each marked grounded when the
original entails it), with an error category for a fact that is not entailed. Per answer
(one "pair" in the paper): Fact-Recall = preserved / |C| and Fact-Precision = grounded / |C'|
with the paper's empty-set rule (1.0 if both sets are empty, else 0.0). A pair the annotator
marked "no medical facts on either side" (``no_facts``) is such a both-empty pair: 1.0 for
recall and precision in the macro averages; in the micro sums it adds nothing to either count,
so it moves a micro figure only when every pair of the group has no facts (the pooled sets are
empty too: 1.0). An answer with no fact listed and no such mark is a check not done yet (a
draft, when drafts are included): left out and counted, like an answer with a fact not yet
judged. Reported per pair of sources (the original's and the edited response's
``responses.source``) and per annotator: micro (counts summed first) and macro (pairs
averaged) scores, the fact flow (loss rate, hallucination rate, new facts) and error-category
counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    humans,
    jsonable,
    ordered_names,
    people,
    safe_ratio,
    sources_of,
)
from portalreview.domain.catalogs import Catalogs
from portalreview.store.frames import StudyFrames

KIND = "facts"
_COUNTS = ("n_original", "n_preserved", "n_edited", "n_grounded")
#: The result's keys (after the counts) when the study has no facts answer.
EMPTY: dict[str, Any] = {
    "n_pairs_with_undecided_facts": 0,
    "n_pairs_not_checked_yet": 0,
    "overall": None,
    "by_source_pair": [],
    "by_annotator": [],
    "error_categories": [],
}


def pair_counts(answers: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """One row per facts answer: |C|, preserved, |C'|, grounded, undecided facts, whether the
    annotator said "no medical facts on either side" (``no_facts``), whether the check is
    not done yet (``unchecked``: no fact listed and not said so, as a draft can be), and the
    pair's Fact-Recall / Precision / F1 (as ``metrics.fact_scores_from_counts``, empty-set
    rule included; NaN while any fact is undecided or the check is not done)."""
    facts = frames.facts[frames.facts.answer_id.isin(answers.answer_id)]
    decided = facts.entailed.notna()
    entailed = facts.entailed.fillna(False).astype(bool)
    original = facts.side == "original"
    flags = pd.DataFrame(
        {
            "answer_id": facts.answer_id,
            "n_original": original,
            "n_preserved": original & entailed,
            "n_edited": ~original,
            "n_grounded": ~original & entailed,
            "n_undecided": ~decided,
        }
    )
    counts = flags.groupby("answer_id").sum()
    out = answers[["answer_id", "unit_id", "annotator", "response_id", "response_b_id"]]
    out = out.join(counts, on="answer_id").fillna(0)
    checks = frames.fact_checks
    said = checks.answer_id[checks.no_facts.astype(bool)]
    out = out.assign(no_facts=out.answer_id.isin(said).to_numpy())
    empty = (out.n_original == 0) & (out.n_edited == 0)
    out = out.assign(unchecked=(empty & ~out.no_facts).to_numpy())
    scores = micro({k: out[k].to_numpy(float) for k in _COUNTS})
    undecided = (out.n_undecided.to_numpy() > 0) | out.unchecked.to_numpy()
    out = out.assign(**{k: np.where(undecided, np.nan, v) for k, v in scores.items()})
    return out.reset_index(drop=True)


def _empty_rule(own: np.ndarray, other: np.ndarray) -> np.ndarray:
    return np.where((own == 0) & (other == 0), 1.0, 0.0)


def micro(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Micro Fact-Recall / Precision / F1 on summed counts (equations 3-4, right-hand),
    with the empty-set rule on the pooled counts."""
    c, kept, e, grounded = (sums[k] for k in _COUNTS)
    recall = np.where(c > 0, safe_ratio(kept, c), _empty_rule(c, e))
    precision = np.where(e > 0, safe_ratio(grounded, e), _empty_rule(e, c))
    return {"recall": recall, "precision": precision, "f1": _harmonic(recall, precision)}


def _harmonic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a + b > 0, safe_ratio(2 * a * b, a + b), 0.0)


def macro(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Macro Fact-Recall / Precision (pairs averaged, equations 3-4, left-hand) and their
    harmonic mean (``metrics.macro_fact_scores``)."""
    recall = safe_ratio(sums["recall_sum"], sums["pairs"])
    precision = safe_ratio(sums["precision_sum"], sums["pairs"])
    return {"recall": recall, "precision": precision, "f1": _harmonic(recall, precision)}


def _flow(sums: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    c, kept, e, grounded = (sums[k] for k in _COUNTS)
    if key == "loss_rate":
        return safe_ratio(c - kept, c)
    return safe_ratio(e - grounded, e)


def scores(pairs: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Micro and macro scores and the fact flow of a group of decided pairs, CIs over units."""
    units = pairs.groupby("unit_id")
    columns = {k: units[k].sum().to_numpy() for k in _COUNTS}
    columns["recall_sum"] = units.recall.sum().to_numpy()
    columns["precision_sum"] = units.precision.sum().to_numpy()
    columns["pairs"] = units.size().to_numpy()
    pop = s.population(columns, units.size().index)
    totals = pop.totals()
    flow = {k: int(totals[k]) for k in _COUNTS}
    flow["new_facts"] = flow["n_edited"] - flow["n_grounded"]
    for key in ("loss_rate", "hallucination_rate"):
        flow[key] = pop.figure(lambda x, k=key: _flow(x, k))
    return {
        "n_pairs": len(pairs),
        # the pairs said to hold no medical fact (scored 1.0 / 1.0 by the empty-set rule)
        "n_pairs_without_facts": int(pairs.no_facts.sum()),
        "n_units": int(pairs.unit_id.nunique()),
        "n_annotators": int(pairs.annotator.nunique()),
        "micro": {k: pop.figure(lambda x, k=k: micro(x)[k]) for k in ("recall", "precision", "f1")},
        "macro": {k: pop.figure(lambda x, k=k: macro(x)[k]) for k in ("recall", "precision", "f1")},
        "flow": flow,
    }


def error_categories(facts: pd.DataFrame, catalogs: Catalogs) -> list[dict[str, Any]]:
    """Counts of each error category among facts not entailed, per side (seed 004,
    Supplementary Table 3); ``null`` category = not entailed but not categorised."""
    wrong = facts[facts.entailed.notna() & ~facts.entailed.fillna(True).astype(bool)]
    ids = [c.id for c in catalogs.error_categories]
    out = []
    for side in ("original", "edited"):
        part = wrong[wrong.side == side]
        counts = part.error_category.value_counts()
        for category in [*ids, None]:
            n = (
                int(part.error_category.isna().sum())
                if category is None
                else counts.get(category, 0)
            )
            out.append({"side": side, "category": category, "n": int(n)})
    return out


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """The MedFactChecking tables (seed 004) computed from the project's facts answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    answers = humans(people(frames, KIND))
    if answers.empty:
        return jsonable({**answer_counts(answers), **EMPTY})
    pairs = pair_counts(answers, frames)
    sources = sources_of(frames)
    pairs = pairs.assign(
        original_source=pairs.response_id.map(sources),
        edited_source=pairs.response_b_id.map(sources),
    )
    decided = pairs[(pairs.n_undecided == 0) & ~pairs.unchecked]
    by_sources = [
        {"original_source": a, "edited_source": b, **scores(group, s)}
        for (a, b), group in decided.groupby(["original_source", "edited_source"])
    ]
    facts = frames.facts[frames.facts.answer_id.isin(decided.answer_id)]
    return jsonable(
        {
            **answer_counts(answers),
            "n_pairs_with_undecided_facts": int((pairs.n_undecided > 0).sum()),
            "n_pairs_not_checked_yet": int(pairs.unchecked.sum()),
            "overall": scores(decided, s) if len(decided) else None,
            "by_source_pair": by_sources,
            "by_annotator": [
                {"annotator": who, **scores(decided[decided.annotator == who], s)}
                for who in ordered_names(decided.annotator)
            ],
            "error_categories": error_categories(facts, s.catalogs),
        }
    )
