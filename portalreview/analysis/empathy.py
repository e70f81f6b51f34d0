"""Which of two responses is more empathetic (seed 004, Section 3.6) from empathy answers.

An answer names the more empathetic response of the unit's pair, or says they are equally
empathetic (``more_empathetic_response_id`` NaN). Reported per pair of sources (the two
responses' ``responses.source`` labels, in name order): the 3-way outcome shares with CIs over
units; agreement between people (percent agreement and Krippendorff's alpha, each answer coded
by that outcome: the first source's response / the second's / "equal", never a screen side nor
the side the pair is stored on, which is drawn at random when a set is made (a pair of one
source: its stored order));
agreement of a model pseudo-annotator with each person when there is one; and the share of
decided answers that chose the response shown first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._agreement import model_vs_people, nominal_agreement
from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    count_table,
    humans,
    jsonable,
    models,
    ordered_names,
    people,
    safe_ratio,
    sources_of,
)
from portalreview.domain.catalogs import Catalogs
from portalreview.store.frames import StudyFrames

KIND = "empathy"
OUTCOMES = ("first_more", "second_more", "equal")
#: The result's keys (after the counts) when the study has no decided empathy answer.
EMPTY: dict[str, Any] = {
    "by_source_pair": [],
    "agreement": None,
    "model_agreement": [],
    "position_bias": None,
}


def choices(frames: StudyFrames) -> tuple[pd.DataFrame, int]:
    """Decided empathy answers with the pair's sources in name order and the outcome relative
    to them, which is also each answer's code for agreement (``value``); and the undecided
    count. Coded by the stored sides, the agreement would change with the sides drawn (a
    nominal alpha's expected disagreement follows how often each code is used)."""
    answers = people(frames, KIND)
    decided = answers.merge(frames.empathy, on="answer_id")
    chosen = decided.more_empathetic_response_id
    sources = sources_of(frames)
    src_a = decided.response_id.map(sources)
    src_b = decided.response_b_id.map(sources)
    flipped = src_b < src_a
    first_response = np.where(flipped, decided.response_b_id, decided.response_id)
    outcome = np.where(
        chosen.isna(), "equal", np.where(chosen == first_response, "first_more", "second_more")
    )
    swapped = decided.presentation.map(lambda p: bool(p.get("swap", False)))
    shown_first = np.where(swapped, decided.response_b_id, decided.response_id)
    rows = decided.assign(
        value=outcome,
        first_source=np.where(flipped, src_b, src_a),
        second_source=np.where(flipped, src_a, src_b),
        outcome=outcome,
        chose_shown_first=chosen == shown_first,
        has_presentation=decided.presentation.map(lambda p: "swap" in p),
    )
    return rows, len(answers) - len(decided)


def outcome_shares(rows: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """3-way outcome shares per pair of sources, CIs over units."""
    out = []
    for (first, second), group in rows.groupby(["first_source", "second_source"]):
        units, _, counts = count_table(group.unit_id, group.outcome, list(OUTCOMES))
        pop = s.population({"n": counts.sum(axis=1), "k": counts}, units)
        entry: dict[str, Any] = {
            "first_source": first,
            "second_source": second,
            "n_answers": len(group),
            "n_units": len(counts),
            "n_annotators": int(group.annotator.nunique()),
        }
        for i, name in enumerate(OUTCOMES):
            entry[f"n_{name}"] = int(counts[:, i].sum())
            entry[f"share_{name}"] = pop.figure(lambda x, i=i: safe_ratio(x["k"][:, i], x["n"]))
        out.append(entry)
    return out


def position_bias(rows: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Share of decided (not "equal") answers that chose the response shown first."""
    decided = rows[(rows.value != "equal") & rows.has_presentation.astype(bool)]
    per = decided.chose_shown_first.groupby(decided.unit_id).agg(["sum", "size"])
    pop = s.population({"first": per["sum"].to_numpy(), "n": per["size"].to_numpy()}, per.index)
    return {
        "n_answers": len(decided),
        "share_chose_first_shown": pop.figure(lambda x: safe_ratio(x["first"], x["n"])),
    }


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """The empathy comparison tables (seed 004) computed from the project's empathy answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    rows, undecided = choices(frames)
    mine = humans(rows)
    if rows.empty:
        return jsonable({**answer_counts(mine), "n_undecided": undecided, **EMPTY})
    long = rows[~rows.is_gold.astype(bool)][["unit_id", "annotator", "value"]]
    return jsonable(
        {
            **answer_counts(mine),
            "n_undecided": undecided,
            "by_source_pair": outcome_shares(mine, s),
            "agreement": nominal_agreement(mine[["unit_id", "annotator", "value"]], s),
            "model_agreement": model_vs_people(long, ordered_names(models(rows).annotator), s),
            "position_bias": position_bias(mine, s),
        }
    )
