"""The analysis layer's vectorised bootstrap and coefficients equal the metrics functions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from portalreview import metrics
from portalreview.analysis._bootstrap import (
    Population,
    Resampler,
    alpha_statistic,
    alpha_terms,
    binary_kappa,
    presence_alpha,
    presence_alpha_blocks,
)
from portalreview.analysis._common import count_table, jsonable, records, safe_ratio


def _ratio(sums):
    return safe_ratio(sums["hit"], sums["n"])


def test_population_ci_equals_metrics_bootstrap_ci():
    rng = np.random.default_rng(1)
    hit = rng.integers(0, 4, 60).astype(float)
    n = hit + rng.integers(0, 4, 60)
    pop = Population({"hit": hit, "n": n}, seed=5, n_resamples=500)
    units = np.column_stack([hit, n])
    expected = metrics.bootstrap_ci(
        units,
        lambda a: safe_ratio(a[..., 0].sum(axis=1), a[..., 1].sum(axis=1)),
        n_resamples=500,
        seed=5,
        vectorized=True,
    )
    assert pop.interval(_ratio) == pytest.approx(expected, rel=1e-5)
    assert pop.value(_ratio) == pytest.approx(hit.sum() / n.sum())


def test_a_group_resampled_within_its_kind_equals_bootstrap_ci_over_the_kind():
    # A group (units 3..12 of 40) resampled with the kind's resampler is bootstrap_ci over all
    # 40 units with the group's columns and zeros elsewhere.
    rng = np.random.default_rng(2)
    hit = rng.integers(0, 3, 40).astype(float)
    n = hit + 1
    group = np.arange(3, 13)
    resampler = Resampler(range(40), seed=9, n_resamples=300)
    pop = Population({"hit": hit[group], "n": n[group]}, group, resampler=resampler)
    mask = np.isin(np.arange(40), group)
    units = np.column_stack([hit * mask, n * mask])
    expected = metrics.bootstrap_ci(
        units,
        lambda a: safe_ratio(a[..., 0].sum(axis=1), a[..., 1].sum(axis=1)),
        n_resamples=300,
        seed=9,
        vectorized=True,
    )
    assert pop.interval(_ratio) == pytest.approx(expected, rel=1e-5)
    assert pop.figure(_ratio)["n_units"] == 10
    # A small group takes its units' weights only; a large one scatters: same sums.
    big = Population({"hit": hit, "n": n}, np.arange(40), resampler=resampler)
    assert big.figure(_ratio)["n_units"] == 40


def test_resampler_rejects_foreign_units():
    resampler = Resampler([1, 2, 3], n_resamples=10)
    with pytest.raises(ValueError, match="units"):
        Population({"x": [1.0]}, [7], resampler=resampler)


def test_no_resamples_no_interval_and_empty_population():
    pop = Population({"hit": [1.0, 0.0], "n": [1.0, 1.0]}, n_resamples=0)
    assert pop.figure(_ratio) == {"value": 0.5, "ci": None, "n_units": 2, "n_resamples": 0}
    empty = Population({"hit": np.zeros(0), "n": np.zeros(0)})
    assert empty.figure(_ratio) == {"value": None, "ci": None, "n_units": 0, "n_resamples": 0}


@pytest.mark.parametrize("seed", range(5))
def test_nominal_alpha_equals_krippendorff(seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 3, size=(30, 4)).astype(object)
    table[rng.random(table.shape) < 0.25] = None
    counts = np.array(
        [[sum(v == c for v in row if v is not None) for c in range(3)] for row in table]
    )
    pop = Population(alpha_terms(counts), n_resamples=0)
    assert pop.value(alpha_statistic) == pytest.approx(metrics.krippendorff_alpha(table))


def test_presence_alpha_equals_krippendorff_per_label_and_pooled():
    rng = np.random.default_rng(4)
    coded = rng.random((25, 3, 4)) < 0.3  # units x raters x labels
    answered = rng.random((25, 3)) < 0.8
    raters = answered.sum(axis=1)
    present = (coded & answered[:, :, None]).sum(axis=1)
    blocks = presence_alpha_blocks(raters, present)
    sums = {k: v.sum(axis=0, keepdims=True) for k, v in blocks.items()}
    for label in range(4):
        table = [
            [int(coded[u, r, label]) if answered[u, r] else None for r in range(3)]
            for u in range(25)
        ]
        assert presence_alpha(sums, label)[0] == pytest.approx(metrics.krippendorff_alpha(table))
    rows = [
        [int(coded[u, r, label]) if answered[u, r] else None for r in range(3)]
        for u in range(25)
        for label in range(4)
    ]
    assert presence_alpha(sums)[0] == pytest.approx(metrics.krippendorff_alpha(rows))


def test_binary_kappa_equals_cohen_kappa():
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = rng.integers(0, 2, 20)
        b = np.where(rng.random(20) < 0.7, a, 1 - a)
        n = [((a == i) & (b == j)).sum() for i in (0, 1) for j in (0, 1)]
        assert binary_kappa(*n) == pytest.approx(metrics.cohen_kappa(list(a), list(b)))
    assert math.isnan(binary_kappa(5, 0, 0, 0))  # one category only: undefined
    assert binary_kappa(0, 3, 2, 0) == pytest.approx(
        metrics.cohen_kappa([0] * 3 + [1] * 2, [1] * 3 + [0] * 2)
    )


def test_count_table_and_json_helpers():
    index, columns, table = count_table([3, 1, 3, 3], ["b", "a", "a", "z"], ["a", "b"])
    assert list(index) == [1, 3] and columns == ["a", "b"]
    assert table.tolist() == [[1, 0], [1, 1]]  # "z" is not a column: dropped
    data = {"a": np.float64("nan"), "b": (np.int64(2), np.float32(0.5)), 3: {np.bool_(True)}}
    clean = jsonable(data)
    assert clean == {"a": None, "b": [2, 0.5], "3": [True]}
    import pandas as pd

    rows = records(pd.DataFrame({"x": [1.0, np.nan], "y": ["p", None]}))
    assert json.dumps(jsonable({"rows": rows}), allow_nan=False) == (
        '{"rows": [{"x": 1.0, "y": "p"}, {"x": null, "y": null}]}'
    )


def _drawn_by_loop(n_units: int, group, seed: int, n_resamples: int) -> np.ndarray:
    """How many of ``group``'s units each resample of metrics.bootstrap_ci's draws holds."""
    indices = np.random.default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))
    return np.isin(indices, group).sum(axis=1)


def _f1(sums):
    # P / R / F1's convention: 0.0 when TP = FP = FN = 0 (as scikit-learn).
    return safe_ratio(2 * sums["tp"], 2 * sums["tp"] + sums["fp"] + sums["fn"], 0.0)


def test_resamples_without_the_groups_units_are_dropped():
    # A group of 3 units among 40: (1 - 3/40)^40 = 4% of resamples draw none of them. Such a
    # resample holds no data of the group; F1's zero-denominator convention would score it
    # 0.0 and pull the lower bound to 0, so it is dropped. Each unit alone has F1 2/3 or more.
    tp, fp, fn = np.array([2.0, 1.0, 3.0]), np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 1.0])
    group = np.array([5, 17, 30])
    resampler = Resampler(range(40), seed=9, n_resamples=400)
    pop = Population({"tp": tp, "fp": fp, "fn": fn}, group, resampler=resampler)
    drawn = _drawn_by_loop(40, group, 9, 400)
    assert 0 < (drawn == 0).sum() < 400  # some resamples miss the group
    # By a loop: each resample's counts from its draws, F1 on the resamples that hold a unit.
    indices = np.random.default_rng(9).integers(0, 40, size=(400, 40))
    values = []
    for row in indices:
        picked = [np.flatnonzero(group == u)[0] for u in row if u in group]
        if picked:
            t, p, n = tp[picked].sum(), fp[picked].sum(), fn[picked].sum()
            values.append(2 * t / (2 * t + p + n))
    figure = pop.figure(_f1)
    assert figure["n_resamples"] == len(values) == (drawn > 0).sum()
    assert figure["ci"] == pytest.approx(np.quantile(values, [0.025, 0.975]), rel=1e-6)
    assert figure["ci"][0] > 0.5  # was 0.0 when empty resamples scored 0


@pytest.mark.parametrize("deferred", [False, True])
def test_empty_resamples_are_found_however_the_columns_look(deferred):
    # A column positive on every unit ("n") tells the empty resamples by its zero sums; an
    # integer matrix without one gets a column of ones; fractions without one count the
    # draws apart. A small group (2 of 20) and a large one (2 of 4) alike.
    for n_units, group in ((20, np.array([3, 11])), (4, np.array([1, 2]))):
        resampler = Resampler(range(n_units), seed=2, n_resamples=300)
        expected = _drawn_by_loop(n_units, group, 2, 300) == 0
        assert expected.any()
        for columns in (
            {"x": np.array([0.0, 3.0]), "n": np.array([1.0, 2.0])},  # witness "n"
            {"x": np.array([0.0, 3.0]), "y": np.array([2.0, 0.0])},  # integers, none positive
            {"x": np.array([0.0, 0.5]), "y": np.array([0.25, 0.0])},  # fractions, none positive
        ):
            pop = Population(columns, group, resampler=resampler, deferred=deferred)
            values = pop.resampled(lambda s: s["x"] * 0.0)  # 0.0 on every resample with data
            assert np.array_equal(np.isnan(values), expected), columns
            assert pop.figure(lambda s: s["x"] * 0.0)["n_resamples"] == (~expected).sum()
            # The sums of the columns themselves are unchanged by the added column of ones.
            alone = Population(
                columns, group, resampler=Resampler(range(n_units), seed=2, n_resamples=300)
            )
            assert np.array_equal(pop._resampled_sums()[:, :2], alone._resampled_sums()[:, :2])
