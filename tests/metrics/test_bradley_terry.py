"""Bradley-Terry strengths (``metrics/bradley_terry.py``): a case worked by hand, scipy's
L-BFGS on the same objective as an independent fit, the batched fit equal to one fit per row,
and the choice of the next pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from portalreview.metrics.bradley_terry import (
    bradley_terry,
    end_weights,
    most_informative_pair,
    pair_values,
    strengths,
    strengths_from_outcomes,
)


def test_two_messages_worked_by_hand():
    # a beat b 3 times of 4. The optimum solves w - (w + l) sigmoid(d) = ridge * d for the
    # difference d = theta_a - theta_b = 2 theta_a; with ridge = 1 / (3 ln 2), d = ln 2 solves
    # it (3 - 4 * 2/3 = 1/3 = ln 2 / (3 ln 2)), so theta = (ln 2 / 2, -ln 2 / 2).
    first, second = np.array([0, 0, 0, 1]), np.array([1, 1, 1, 0])
    won = np.array([1, 1, 1, 1])  # the last row: b shown first, and b won
    theta = bradley_terry(2, first, second, won, ridge=1 / (3 * math.log(2)))
    assert theta == pytest.approx([math.log(2) / 2, -math.log(2) / 2], abs=1e-9)


def scipy_fit(n, first, second, won, ridge):
    def loss(theta):
        d = theta[first] - theta[second]
        sign = np.where(won == 1, 1.0, -1.0)
        value = np.sum(np.logaddexp(0, -sign * d)) + ridge * np.sum(theta**2)
        p = 1 / (1 + np.exp(-d))
        g = 2 * ridge * theta
        np.add.at(g, first, -(won - p))
        np.add.at(g, second, won - p)
        return value, g

    return minimize(
        loss,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
    ).x


@pytest.mark.parametrize("seed", range(5))
def test_equals_scipy_on_random_judgements(seed):
    rng = np.random.default_rng(seed)
    n, m = 12, 40
    first = rng.integers(0, n, m)
    second = (first + rng.integers(1, n, m)) % n
    won = rng.integers(0, 2, m)
    for ridge in (0.01, 0.05, 0.5):
        ours = bradley_terry(n, first, second, won, ridge)
        assert ours == pytest.approx(scipy_fit(n, first, second, won, ridge), abs=1e-5)


def test_an_undefeated_message_stays_finite_and_on_top():
    # a chain 0 > 1 > 2 > 3, every judgement one way: no maximum without the ridge
    theta = bradley_terry(4, np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([1, 1, 1]))
    assert np.all(np.isfinite(theta)) and list(np.argsort(-theta)) == [0, 1, 2, 3]
    assert theta == pytest.approx(
        scipy_fit(4, [0, 1, 2], [1, 2, 3], np.array([1, 1, 1]), 0.05), abs=1e-5
    )


def test_batched_rows_equal_one_fit_each():
    rng = np.random.default_rng(7)
    first, second = np.array([0, 1, 2, 0, 3]), np.array([1, 2, 3, 2, 1])
    won = rng.integers(0, 2, (6, 5))
    batched = bradley_terry(5, first, second, won)
    assert batched.shape == (6, 5)
    for row, outcome in zip(batched, won, strict=True):
        assert row == pytest.approx(bradley_terry(5, first, second, outcome), abs=1e-12)
    assert batched[:, 4] == pytest.approx(0.0)  # never compared: the ridge's zero
    marked = strengths(5, first, second, won)  # ... which strengths() says is no strength
    assert np.isnan(marked[:, 4]).all()
    assert marked[:, :4] == pytest.approx(batched[:, :4])


def test_the_canonical_fit_ignores_the_order_of_the_outcomes():
    # the six judgements of the seed 002 inbox hunt: m00 and m04 end equal in exact
    # arithmetic; read in any order the fit gives the same strengths to the last bit
    outcomes = [("m01", "m04"), ("m04", "m00"), ("m00", "m03"), ("m03", "m02"),
                ("m04", "m03"), ("m00", "m01")]  # fmt: skip
    items = ["m00", "m01", "m02", "m03", "m04"]
    fitted = strengths_from_outcomes(items, outcomes)
    rng = np.random.default_rng(0)
    for _ in range(20):
        shuffled = [outcomes[i] for i in rng.permutation(len(outcomes))]
        assert strengths_from_outcomes(items, shuffled).to_numpy().tobytes() == (
            fitted.to_numpy().tobytes()
        )
    assert fitted["m00"] == pytest.approx(fitted["m04"], abs=1e-12)
    assert list(fitted.index) == items


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one entry per judgement"):
        bradley_terry(3, np.array([0]), np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError, match="itself"):
        bradley_terry(3, np.array([1]), np.array([1]), np.array([1]))
    with pytest.raises(ValueError, match="ridge"):
        bradley_terry(3, np.array([0]), np.array([1]), np.array([1]), ridge=0)


def test_end_weights_favour_both_ends_of_the_order():
    weights = end_weights(np.array([3.0, 2.0, 1.0, 0.0, -1.0]))
    assert weights[0] == pytest.approx(1.0) and weights[4] == pytest.approx(1.0)
    assert weights[2] == pytest.approx(1 / math.log2(4))  # the middle: 2 from either end
    assert weights[1] == weights[3] == pytest.approx(1 / math.log2(3))


def test_the_next_pair_is_the_unasked_one_the_model_is_least_sure_of():
    theta = np.array([2.0, 1.9, 0.0, -2.5])
    asked = np.zeros((4, 4), dtype=bool)
    rng = np.random.default_rng(0)
    assert most_informative_pair(theta, asked, rng) == (0, 1)  # close, and at the top
    asked[0, 1] = asked[1, 0] = True
    values = pair_values(theta)
    i, j = most_informative_pair(theta, asked, rng)
    expected = max(
        ((a, b) for a in range(4) for b in range(a + 1, 4) if (a, b) != (0, 1)),
        key=lambda pair: values[pair],
    )
    assert (i, j) == expected
    assert most_informative_pair(theta, np.ones((4, 4), dtype=bool), rng) is None
