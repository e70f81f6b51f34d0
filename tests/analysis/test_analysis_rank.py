"""MedAlign tables (seed 001) from rank answers: ties, a single-annotator unit, a missing unit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from analysis_builders import new_study

from portalreview import metrics
from portalreview.analysis import rank


def _entries(st, ranks: dict[str, int], wrong: dict[str, list[str]]):
    return {
        "entries": [
            {
                "response_id": st.responses[key],
                "rank": value,
                "correct": key not in wrong,
                "criteria": wrong.get(key, []),
            }
            for key, value in ranks.items()
        ]
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("rank"))
    for name in ("x", "y", "z"):
        st.person(name)
    for case in ("c1", "c2", "c3"):
        st.case(case, "My knee hurts when I climb stairs. What should I do?")
        for source in ("A", "B", "C"):
            st.response(f"{case}{source}", case, f"Reply {source} to {case}.", "model", source)
    st.unit(
        "u1", "rank", "c1", who=["x", "y", "z"], members=[st.responses[f"c1{s}"] for s in "ABC"]
    )
    st.unit("u2", "rank", "c2", who=["x"], members=[st.responses[f"c2{s}"] for s in "AB"])
    st.unit(
        "u3",
        "rank",
        "c3",
        who=["x", "y"],  # assigned, never answered
        members=[st.responses[f"c3{s}"] for s in "ABC"],
    )
    st.answer("u1", "x", _entries(st, {"c1A": 1, "c1B": 2, "c1C": 3}, {"c1C": ["C2"]}))
    st.answer(
        "u1",
        "y",
        _entries(st, {"c1A": 1, "c1B": 1, "c1C": 3}, {"c1B": ["C1"], "c1C": ["C1", "C3"]}),
    )
    st.answer("u1", "z", _entries(st, {"c1A": 2, "c1B": 1, "c1C": 3}, {"c1C": ["C3"]}))
    st.answer("u2", "x", _entries(st, {"c2A": 2, "c2B": 1}, {"c2A": ["C2"]}))
    frames = st.frames()
    yield st, frames, rank.analyse(frames, n_resamples=0)
    st.project.close()


def _by_source(result):
    return {row["source"]: row for row in result["by_source"]}


def test_win_rates_with_ties(study):
    _, _, result = study
    pairs = {(r["source"], r["opponent"]): r for r in result["win_rates"]}
    # Rankings holding A and B: u1 by x (A ahead), y (tie), z (B ahead) and u2 by x (B
    # ahead). A over B: 1 win of 4 rankings = 0.25, of the 3 not tied = 1/3.
    ab = pairs[("A", "B")]
    assert (ab["wins"], ab["losses"], ab["ties"], ab["n_rankings"]) == (1, 2, 1, 4)
    assert ab["win_rate"]["value"] == 0.25
    assert ab["win_rate_non_tied"]["value"] == pytest.approx(1 / 3)
    assert pairs[("B", "A")]["win_rate_non_tied"]["value"] == pytest.approx(2 / 3)
    # C is last in all three rankings of u1.
    assert pairs[("A", "C")]["win_rate"]["value"] == 1.0
    assert pairs[("C", "B")]["win_rate"]["value"] == 0.0
    long, _ = rank.long_table(rank.humans(rank.people(study[1], "rank")), study[1])
    matrix = metrics.win_rate_matrix(long)
    assert matrix.loc["A", "B"] == ab["win_rate"]["value"]


def test_table_3_per_source(study):
    _, _, result = study
    rows = _by_source(result)
    # Average win rate over opponents (non-tied): A = (1/3 + 1) / 2 = 2/3,
    # B = (2/3 + 1) / 2 = 5/6, C = 0.
    assert rows["A"]["average_win_rate"]["value"] == pytest.approx(2 / 3)
    assert rows["B"]["average_win_rate"]["value"] == pytest.approx(5 / 6)
    assert rows["C"]["average_win_rate"]["value"] == 0.0
    # Average ranks per ranking: x (1, 2, 3), y (1.5, 1.5, 3), z (2, 1, 3), u2 x (2, 1).
    # A = (1 + 1.5 + 2 + 2) / 4 = 1.625; B = (2 + 1.5 + 1 + 1) / 4 = 1.375; C = 3.
    assert rows["A"]["mean_rank"]["value"] == pytest.approx(1.625)
    assert rows["B"]["mean_rank"]["value"] == pytest.approx(1.375)
    assert rows["C"]["mean_rank"]["value"] == 3.0
    # Correct: A 3 of 4, B 3 of 4, C 0 of 3 (percent).
    assert rows["A"]["percent_correct"]["value"] == 75.0
    assert rows["C"]["percent_correct"]["value"] == 0.0
    assert (rows["C"]["n_rankings"], rows["C"]["n_judged"]) == (3, 3)
    assert result["n_units"] == 2  # u3 was never answered


def test_criteria_counts(study):
    _, _, result = study
    rows = {r["source"]: r for r in result["criteria"]}
    # C: x C2, y C1 + C3, z C3.
    assert rows["C"]["counts"] == {"C1": 1, "C2": 1, "C3": 2}
    assert (rows["C"]["n_with_any_criterion"], rows["C"]["n_responses"]) == (3, 3)
    assert rows["A"]["counts"]["C2"] == 1 and rows["A"]["n_responses"] == 4
    long, _ = rank.long_table(rank.humans(rank.people(study[1], "rank")), study[1])
    flags = {c: long.criteria.map(lambda t, c=c: c in t) for c in ("C1", "C2", "C3")}
    table = metrics.criteria_counts(pd.DataFrame({"source": long.source, **flags}), list(flags))
    assert table.loc["C", "any"] == 3 and table.loc["B", "C1"] == rows["B"]["counts"]["C1"]


def test_kendall_tau_between_raters(study):
    _, frames, result = study
    tau = result["rater_tau"]
    # u1 only is shared. x (1,2,3) vs y (1,1,3): P 2, Q 0, one tie in y only:
    # 2 / sqrt(2 * 3). x vs z (2,1,3): P 2, Q 1 -> 1/3. y vs z: 2 / sqrt(3 * 2).
    values = [2 / math.sqrt(6), 1 / 3, 2 / math.sqrt(6)]
    assert tau["n_comparisons"] == 3
    assert tau["mean"]["value"] == pytest.approx(sum(values) / 3)
    assert tau["sd"] == pytest.approx(pd.Series(values).std(ddof=1))
    long, _ = rank.long_table(rank.humans(rank.people(frames, "rank")), frames)
    assert tau["mean"]["value"] == pytest.approx(metrics.rater_kendall_tau(long).mean)


def test_point_biserial_correctness_vs_rank(study):
    _, frames, result = study
    r_pb = result["correctness_vs_rank"]
    # Per ranking: x on u1 (1,1,0) vs (1,2,3): -1 / sqrt(6/9 * 2) = -0.866;
    # y (1,0,0) vs (1.5,1.5,3): -0.5 / sqrt(6/9 * 1.5) = -0.5; z: -0.866; x on u2: -1.
    expected = [-math.sqrt(3) / 2, -0.5, -math.sqrt(3) / 2, -1.0]
    assert r_pb["n_comparisons"] == 4
    assert r_pb["mean"]["value"] == pytest.approx(sum(expected) / 4)
    long, _ = rank.long_table(rank.humans(rank.people(frames, "rank")), frames)
    summary = metrics.correctness_rank_correlation(long)
    pooled = metrics.correctness_rank_correlation(long, per_ranking=False)
    assert r_pb["mean"]["value"] == pytest.approx(summary.mean)
    assert r_pb["pooled"]["value"] == pytest.approx(pooled.mean)


def test_average_ranks_equal_scipy():
    import numpy as np
    from scipy import stats

    table = np.array([[1, 1, 3, np.nan], [2, 2, 2, 1], [4, 3, 2, 1], [np.nan, 1, np.nan, 1]])
    got = rank.average_ranks(table)
    for row, out in zip(table, got, strict=True):
        present = ~np.isnan(row)
        assert np.allclose(out[present], stats.rankdata(row[present]))
        assert np.isnan(out[~present]).all()


def test_tau_b_equals_scipy():
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(3)
    x = rng.integers(1, 4, size=(200, 5)).astype(float)
    y = rng.integers(1, 4, size=(200, 5)).astype(float)
    x[rng.random(x.shape) < 0.15] = np.nan
    got = rank.tau_b(x, y)
    for a, b, value in zip(x, y, got, strict=True):
        keep = ~np.isnan(a) & ~np.isnan(b)
        if keep.sum() < 2 or np.ptp(a[keep]) == 0 or np.ptp(b[keep]) == 0:
            assert np.isnan(value)
        else:
            assert value == pytest.approx(stats.kendalltau(a[keep], b[keep]).statistic)


def test_each_figure_counts_its_own_units(study):
    # Answered rank units: u1 (A, B, C by x, y, z) and u2 (A, B by x); u3 was never answered.
    # C is ranked in u1 only, so its figures rest on 1 unit, A's and B's on 2 - not the
    # kind's 2 answered units for every source.
    _, _, result = study
    rows = _by_source(result)
    for source, n in (("A", 2), ("B", 2), ("C", 1)):
        for key in ("average_win_rate", "mean_rank", "percent_correct"):
            assert rows[source][key]["n_units"] == n, (source, key)
    pairs = {(r["source"], r["opponent"]): r for r in result["win_rates"]}
    # A and B meet in u1 (x: A ahead, y: tie, z: B ahead) and u2 (B ahead): 2 units, both
    # with an untied ranking; A and C (and B and C) meet in u1 only.
    assert pairs[("A", "B")]["win_rate"]["n_units"] == 2
    assert pairs[("A", "B")]["win_rate_non_tied"]["n_units"] == 2
    for pair in (("A", "C"), ("C", "A"), ("B", "C"), ("C", "B")):
        assert pairs[pair]["win_rate"]["n_units"] == 1
        assert pairs[pair]["win_rate_non_tied"]["n_units"] == 1


def test_a_pair_met_only_tied_has_no_untied_units(tmp_path):
    st = new_study(tmp_path)
    st.person("x")
    for case in ("c1", "c2"):
        st.case(case, "A question.")
        for source in ("A", "B"):
            st.response(f"{case}{source}", case, f"Reply {source}.", "model", source)
        st.unit(case, "rank", case, who=["x"], members=[st.responses[f"{case}{s}"] for s in "AB"])
    # c1: A and B tied; c2: A ahead. win_rate rests on both units, the non-tied one on c2.
    st.answer("c1", "x", _entries(st, {"c1A": 1, "c1B": 1}, {}))
    st.answer("c2", "x", _entries(st, {"c2A": 1, "c2B": 2}, {}))
    result = rank.analyse(st.frames(), n_resamples=50)
    st.project.close()
    pairs = {(r["source"], r["opponent"]): r for r in result["win_rates"]}
    ab = pairs[("A", "B")]
    assert (ab["win_rate"]["n_units"], ab["win_rate_non_tied"]["n_units"]) == (2, 1)
    assert ab["win_rate"]["value"] == 0.5 and ab["win_rate_non_tied"]["value"] == 1.0
    assert _by_source(result)["A"]["average_win_rate"]["n_units"] == 1


def test_two_drafts_of_one_source_give_the_same_figures_whatever_the_order_listed(tmp_path):
    """The second draft of a source in a ranking is left out: the one with the higher response
    id, not the one listed second (re-saving the same answer listed otherwise changed the
    figure in a fresh report and not in the live one)."""
    from portalreview.reports.json_report import build_report

    st = new_study(tmp_path)
    st.person("ava")
    st.case("c", "Should I come in?")
    a = st.response("a", "c", "Come in now.", "model", "m1")
    b = st.response("b", "c", "Stay home.", "model", "m1")
    st.unit("r", "rank", "c", who=["ava"], members=[a, b])
    first = {"response_id": a, "rank": 1, "correct": True, "criteria": []}
    second = {"response_id": b, "rank": 2, "correct": False, "criteria": ["C1"]}
    figures = []
    for entries in ([second, first], [first, second]):
        st.answer("r", "ava", {"entries": entries})
        (m1,) = build_report(st.project, n_resamples=0)["rank"]["by_source"]
        figures.append((m1["n_correct"], m1["percent_correct"]["value"]))
    assert figures == [(1, 100.0), (1, 100.0)]


def test_unit_sums_equal_pandas_group_sums():
    # Quarters and counts are summed with one bincount (exact in any order); other values
    # keep pandas' compensated sums: either way pandas' sums, bit for bit.
    rng = np.random.default_rng(4)
    units = rng.integers(0, 50, 3000) * 7
    order = np.unique(units)
    for values in (
        rng.integers(0, 9, (3000, 3)) / 4,
        rng.integers(0, 2, 3000).astype(bool),
        rng.random((3000, 2)) * 1e3,
    ):
        frame = pd.DataFrame(values.reshape(len(values), -1))
        expected = frame.groupby(units).sum().reindex(order).to_numpy()
        assert np.array_equal(rank._unit_sums(values, units, order), expected)
