"""Percentile bootstrap confidence intervals over units (for any statistic of the study).

Seed 001 (MedAlign, Table 4) reports 95% CIs for mean Kendall's tau and seed 003
(EPPCMinerBen, Section 5) compares models statistically; neither says how its interval was
made. This module gives the plain percentile bootstrap (Efron): resample the *units* (cases,
pairs, rankings - whatever is independent) with replacement, recompute the statistic, and
take the (1 - confidence)/2 and (1 + confidence)/2 quantiles. Hand-written so that it can
resample lists and DataFrames and so that the seed fixes the result exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from portalreview.metrics._common import check_probability


def _take(units: Any, index: np.ndarray) -> Any:
    if isinstance(units, (pd.DataFrame, pd.Series)):
        return units.iloc[index]
    if isinstance(units, np.ndarray):
        return units[index]
    return [units[i] for i in index]


def bootstrap_ci(
    units: Sequence[Any] | np.ndarray | pd.DataFrame | pd.Series,
    statistic: Callable[[Any], float],
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    *,
    vectorized: bool = False,
) -> tuple[float, float]:
    """Seeded percentile bootstrap CI of ``statistic`` over ``units``.

    Not from a paper: seed 001 (Table 4) and seed 003 (Section 5) report intervals and tests
    without saying how they were made; this is the plain percentile bootstrap.

    Each of ``n_resamples`` resamples draws len(units) units with replacement (indices from
    ``numpy.random.default_rng(seed)``, so the same seed gives the same interval) and passes
    them to ``statistic`` in the type they came in: a list for sequences, rows (``iloc``) for a
    DataFrame or Series, an array for an ndarray. With ``vectorized=True`` (ndarray units only)
    ``statistic`` is called once on an array of shape (n_resamples, n_units, ...) and must
    return one value per resample (e.g. ``lambda a: a.mean(axis=1)``).

    The interval is the pair of quantiles (1 - confidence)/2 and (1 + confidence)/2 of the
    resampled statistics (numpy's default linear interpolation). Resamples where the statistic
    is NaN (undefined on that resample, e.g. a kappa with one category) are dropped; if none is
    finite, or units is empty, it is a ValueError. The point estimate is not returned: compute
    ``statistic(units)`` directly.
    """
    check_probability(confidence, "confidence")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if isinstance(units, (str, bytes)):
        raise ValueError("units must be a sequence, array or DataFrame, not a string")
    n = len(units)
    if n == 0:
        raise ValueError("units is empty")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, size=(n_resamples, n))
    if vectorized:
        if not isinstance(units, np.ndarray):
            raise ValueError("vectorized=True needs units as a numpy array")
        values = np.asarray(statistic(units[indices]), dtype=float).reshape(-1)
        if values.size != n_resamples:
            raise ValueError(
                f"a vectorized statistic must return {n_resamples} values, got {values.size}"
            )
    else:
        values = np.array([float(statistic(_take(units, row))) for row in indices])
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        raise ValueError("the statistic was undefined (NaN) on every resample")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)
