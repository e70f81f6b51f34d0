"""Agreement on nominal answers between annotators, and between a model judge and each person
(seed 002, Appendix A.1, Table 4; seed 004, Section 3.6) - shared by urgency and empathy.

Percent agreement is the share of units on which every answer is the same (PMR-Bench's
measure for two raters; ``metrics.percent_agreement(method="unanimous")``); Krippendorff's
alpha is nominal (``metrics.krippendorff_alpha``), computed here from per-unit category counts
so its CI over units is vectorised (the tests check both against metrics).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._bootstrap import alpha_statistic, alpha_terms
from portalreview.analysis._common import Settings, count_table, ordered_names, safe_ratio


def nominal_agreement(long: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Percent agreement and nominal alpha over the units with two or more answers."""
    units, _, table = count_table(long.unit_id.to_numpy(), long.value.astype(str).to_numpy())
    pairable = table.sum(axis=1) >= 2
    units, values = units[pairable], table[pairable]
    pairable_answers = long[long.unit_id.isin(units)]
    agree = (values.max(axis=1, initial=0) == values.sum(axis=1)).astype(float)
    pop = s.population({"agree": agree, "units": np.ones(len(units)), **alpha_terms(values)}, units)
    return {
        "n_units": len(units),
        "n_answers": len(pairable_answers),
        "n_annotators": int(pairable_answers.annotator.nunique()),
        "percent_agreement": pop.figure(lambda x: safe_ratio(x["agree"], x["units"])),
        "alpha": pop.figure(alpha_statistic),
    }


def model_vs_people(long: pd.DataFrame, model_names: list[str], s: Settings) -> list[dict]:
    """:func:`nominal_agreement` between each model pseudo-annotator and each person, on the
    units both answered."""
    people = ordered_names(long[~long.annotator.isin(model_names)].annotator)
    out = []
    for model in model_names:
        for person in people:
            pair = long[long.annotator.isin([model, person])]
            shared = pair.groupby("unit_id").annotator.nunique()
            pair = pair[pair.unit_id.isin(shared[shared == 2].index)]
            if pair.empty:
                continue
            out.append({"model": model, "annotator": person, **nominal_agreement(pair, s)})
    return out
