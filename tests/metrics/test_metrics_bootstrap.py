"""Tests for portalreview.metrics.bootstrap. Small cases worked by hand; scipy's percentile
bootstrap as the independent reference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from portalreview.metrics.bootstrap import bootstrap_ci


def test_same_seed_same_interval_and_seed_matters():
    data = list(np.random.default_rng(0).normal(size=50))
    a = bootstrap_ci(data, np.mean, seed=3)
    assert a == bootstrap_ci(data, np.mean, seed=3)
    assert a != bootstrap_ci(data, np.mean, seed=4)
    assert a[0] < np.mean(data) < a[1]


def test_constant_units_give_a_point_interval():
    assert bootstrap_ci([2.0] * 10, np.mean) == (2.0, 2.0)


def test_two_units_hand_worked():
    # resampling [0, 1] twice gives means 0, .5, .5, 1 with probabilities 1/4, 1/2, 1/4:
    # the 2.5% and 97.5% quantiles of many draws are 0 and 1
    assert bootstrap_ci([0.0, 1.0], np.mean, n_resamples=4000) == (0.0, 1.0)


def test_agrees_with_scipy_percentile_bootstrap():
    data = np.random.default_rng(1).normal(loc=3, scale=2, size=200)
    ours = bootstrap_ci(data, np.mean, n_resamples=5000, seed=0)
    ref = stats.bootstrap(
        (data,), np.mean, n_resamples=5000, method="percentile", random_state=0
    ).confidence_interval
    assert ours[0] == pytest.approx(ref.low, abs=0.05)
    assert ours[1] == pytest.approx(ref.high, abs=0.05)


def test_vectorized_equals_loop_with_the_same_seed():
    data = np.random.default_rng(2).integers(0, 5, size=40).astype(float)
    loop = bootstrap_ci(data, np.mean, n_resamples=300, seed=9)
    fast = bootstrap_ci(data, lambda a: a.mean(axis=1), n_resamples=300, seed=9, vectorized=True)
    assert loop == pytest.approx(fast)


def test_dataframe_rows_are_the_units():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "w": [1, 1, 1, 1]})
    low, high = bootstrap_ci(frame, lambda f: float((f["x"] * f["w"]).sum() / f["w"].sum()))
    assert 1.0 <= low <= high <= 4.0


def test_confidence_changes_width():
    data = list(np.random.default_rng(3).normal(size=80))
    narrow = bootstrap_ci(data, np.mean, confidence=0.5)
    wide = bootstrap_ci(data, np.mean, confidence=0.99)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


def test_nan_resamples_are_dropped():
    # undefined when the resample is constant (like a kappa with one category)
    def spread(values):
        return math.nan if len(set(values)) == 1 else float(np.std(values))

    low, high = bootstrap_ci([0, 1], spread, n_resamples=200)
    assert (low, high) == (0.5, 0.5)
    with pytest.raises(ValueError, match="every resample"):
        bootstrap_ci([1, 1], spread)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units": []}, "empty"),
        ({"units": "abc"}, "not a string"),
        ({"confidence": 1.0}, "confidence"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"vectorized": True}, "numpy array"),
    ],
)
def test_validation(kwargs, message):
    args = {"units": [1.0, 2.0], "statistic": np.mean, **kwargs}
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(**args)


def test_vectorized_statistic_must_return_one_value_per_resample():
    with pytest.raises(ValueError, match="must return"):
        bootstrap_ci(np.arange(5.0), np.mean, n_resamples=10, vectorized=True)
