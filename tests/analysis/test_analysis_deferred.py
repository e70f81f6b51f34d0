"""Deferred populations (the analyses' figures): their resampled sums are computed together, in
one matrix product per few hundred columns, and must equal the ones computed population by
population bit for bit; only integer columns are deferred (their float32 sums are exact)."""

from __future__ import annotations

import numpy as np
import pytest

from portalreview.analysis._bootstrap import DeferredInterval, Population, Resampler
from portalreview.analysis._common import jsonable, safe_ratio


def _ratio(sums):
    return safe_ratio(sums["hit"], sums["n"])


def _pair(columns, units, resampler_args):
    """The same population built eagerly and deferred, each on its own resampler."""
    eager = Population(columns, units, resampler=Resampler(**resampler_args))
    lazy = Population(columns, units, resampler=Resampler(**resampler_args), deferred=True)
    return eager, lazy


def test_deferred_integer_figures_equal_eager_ones():
    rng = np.random.default_rng(0)
    args = {"unit_ids": range(300), "seed": 4, "n_resamples": 400}
    hit = rng.integers(0, 5, 300).astype(float)
    n = hit + rng.integers(0, 5, 300)
    eager, lazy = _pair({"hit": hit, "n": n}, np.arange(300), args)
    assert lazy._deferred and not eager._deferred
    figure = lazy.figure(_ratio)
    assert isinstance(figure["ci"], DeferredInterval)
    assert figure["value"] == eager.figure(_ratio)["value"]
    # jsonable fills the interval in: the very same numbers as the eager population's.
    assert jsonable(figure)["ci"] == list(eager.interval(_ratio))
    assert np.array_equal(lazy.resampled(_ratio), eager.resampled(_ratio))


def test_many_deferred_populations_in_chunks():
    rng = np.random.default_rng(1)
    args = {"unit_ids": range(120), "seed": 2, "n_resamples": 300}
    resampler = Resampler(**args)
    eager_resampler = Resampler(**args)
    pairs = []
    for i in range(7):
        units = np.sort(rng.choice(120, 60 + 5 * i, replace=False))  # large groups
        block = rng.integers(0, 9, (len(units), 1 + i % 3)).astype(float)
        lazy = Population({"b": block}, units, resampler=resampler, deferred=True)
        eager = Population({"b": block}, units, resampler=eager_resampler)
        pairs.append((lazy, eager))
    assert all(lazy._deferred for lazy, _ in pairs)
    resampler.flush(max_columns=3)  # several matrix products of at most 3 columns
    for lazy, eager in pairs:
        assert not lazy._deferred
        assert np.array_equal(lazy._resampled_sums(), eager._resampled_sums())


def test_fractions_small_groups_and_large_sums_are_not_deferred():
    args = {"unit_ids": range(100), "seed": 0, "n_resamples": 50}
    resampler = Resampler(**args)
    units = np.arange(100)
    fractions = Population({"x": np.full(100, 0.5)}, units, resampler=resampler, deferred=True)
    assert not fractions._deferred  # a float32 sum of fractions depends on the order
    small = Population({"x": np.ones(10)}, np.arange(10), resampler=resampler, deferred=True)
    assert not small._deferred  # a small group takes its own units' weights
    huge = Population({"x": np.full(100, 2.0**20)}, units, resampler=resampler, deferred=True)
    assert not huge._deferred  # resampled sums past 2**24 are not exact in float32
    nan = Population({"x": np.r_[np.nan, np.ones(99)]}, units, resampler=resampler, deferred=True)
    assert not nan._deferred
    eager = Population({"x": np.full(100, 0.5)}, units, resampler=Resampler(**args))
    assert fractions.interval(lambda s: s["x"]) == eager.interval(lambda s: s["x"])


def test_no_resamples_nothing_deferred():
    resampler = Resampler(range(10), n_resamples=0)
    pop = Population(
        {"hit": np.ones(10), "n": np.ones(10)}, np.arange(10), resampler=resampler, deferred=True
    )
    assert pop.figure(_ratio) == {"value": 1.0, "ci": None, "n_units": 10, "n_resamples": 0}


def test_figure_n_units_of_a_subgroup():
    pop = Population({"hit": [1.0, 0.0, 1.0], "n": [1.0, 1.0, 1.0]}, n_resamples=0)
    assert pop.figure(_ratio, n_units=2)["n_units"] == 2
    assert pop.figure(_ratio)["value"] == pytest.approx(2 / 3)
