"""PMR-Bench tables (seed 002) from urgency answers: difficulty buckets, equal and missing
levels, a single-annotator pair, agreement coded by case, position bias and the inbox."""

from __future__ import annotations

import math

import numpy as np
import pytest
from analysis_builders import new_study

from portalreview import metrics
from portalreview.analysis import urgency

LEVELS = {"c1": 1, "c2": 2, "c3": 5, "c4": 5, "c5": None, "c6": 3}
# unit: (case a, case b, {annotator: chosen case})
PAIRS = {
    "u1": ("c1", "c3", {"x": "c1", "y": "c1", "z": "c3"}),  # gap 4: easy
    "u2": ("c2", "c6", {"x": "c2", "y": "c2"}),  # gap 1: hard (z assigned, no answer)
    "u3": ("c3", "c4", {"x": "c3", "y": "c4"}),  # equal levels: left out
    "u4": ("c6", "c3", {"x": "c6"}),  # gap 2: medium, one annotator
    "u5": ("c1", "c5", {"x": "c1"}),  # c5 has no level: left out
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("urgency"))
    for name in ("x", "y", "z"):
        st.person(name)
    for case, level in LEVELS.items():
        st.case(case, f"Message of {case}.", level, inbox="box")
    for unit, (a, b, chosen) in PAIRS.items():
        st.unit(unit, "urgency", a, who=["x", "y", "z"], case_b_id=st.cases[b])
        for name, case in chosen.items():
            st.answer(unit, name, {"more_urgent_case_id": st.cases[case]})
    frames = st.frames()
    yield st, frames, urgency.analyse(frames, n_resamples=0)
    st.project.close()


def test_pairwise_accuracy_by_difficulty(study):
    _, _, result = study
    acc = result["accuracy"]
    # Valid answers: u1 (3), u2 (2), u4 (1). Correct: x, y on u1; x, y on u2; x on u4.
    assert acc["total"]["n"] == 6 and acc["total"]["correct"] == 5
    assert acc["total"]["accuracy"]["value"] == pytest.approx(5 / 6)
    assert (acc["easy"]["n"], acc["easy"]["correct"]) == (3, 2)
    assert (acc["medium"]["n"], acc["hard"]["n"], acc["hard"]["correct"]) == (1, 2, 2)
    # u3's two answers have equal levels; u5's one answer a missing level.
    assert (acc["n_excluded_equal_levels"], acc["n_excluded_missing_level"]) == (2, 1)
    table = metrics.pairwise_accuracy([1, 2, 3], [5, 3, 5], [True, True, True])
    assert table.loc["total", "n"] == 3  # same bucket rules as metrics.difficulty
    by = {row["annotator"]: row for row in result["accuracy_by_annotator"]}
    assert by["z"]["total"]["accuracy"]["value"] == 0.0  # z's one answer, on u1, is wrong


def test_agreement_coded_by_case(study):
    _, _, result = study
    agreement = result["agreement"]
    # Pairable units: u1 (x, y chose c1 = the first case; z the second), u2 (both first),
    # u3 (x first, y second). Unanimous on u2 only: 1/3.
    assert agreement["n_units"] == 3
    assert agreement["percent_agreement"]["value"] == pytest.approx(1 / 3)
    # Alpha by hand: values 1,1,0 | 1,1 | 1,0 -> n = 7, n1 = 5, n0 = 2; per-unit
    # disagreement (m^2 - sum n_c^2) / (m - 1): u1 (9 - 5) / 2 = 2, u2 0, u3 (4 - 2) / 1 = 2.
    # alpha = 1 - (7 - 1) * 4 / (49 - 25 - 4) = 1 - 24 / 20 = -0.2.
    assert agreement["alpha"]["value"] == pytest.approx(-0.2)
    table = [[1, 1, 0], [1, 1, None], [1, 0, None]]
    assert agreement["alpha"]["value"] == pytest.approx(metrics.krippendorff_alpha(table))


def test_position_bias_uses_the_presentation(study):
    st, _, result = study
    first = n = 0
    for unit, (a, b, chosen) in PAIRS.items():
        for name, case in chosen.items():
            swap = st.presentation(unit, name)["swap"]
            shown_first = b if swap else a
            first += case == shown_first
            n += 1
    bias = result["position_bias"]
    assert bias["n_answers"] == n == 9
    assert bias["n_chose_first_shown"] == first
    assert bias["share_chose_first_shown"]["value"] == pytest.approx(first / n)


def _ndcg(rel, k):
    disc = [1 / math.log2(i + 2) for i in range(min(k, len(rel)))]
    ideal = sorted(rel, reverse=True)[: len(disc)]
    dcg = sum(r * d for r, d in zip(rel[: len(disc)], disc, strict=True))
    return dcg / sum(r * d for r, d in zip(ideal, disc, strict=True))


def test_inbox_win_rates_ndcg_and_t_ndcg(study):
    _, _, result = study
    (box,) = result["inboxes"]
    assert (box["n_messages"], box["n_messages_without_level"]) == (5, 1)
    # Pairs inside the inbox with levels: u1, u2, u3, u4 (u5 involves c5). Win rates:
    # c1 2/3, c2 2/2, c3 2/6 (z on u1, x on u3), c4 1/2, c6 1/3. Sorted (ties in case
    # order): c2, c1, c4, c3, c6 -> relevance 6 - level = 4, 5, 1, 1, 3.
    order = [row["external_id"] for row in box["order"]]
    assert order == ["c2", "c1", "c4", "c3", "c6"]
    assert [row["win_rate"] for row in box["order"]] == pytest.approx([1, 2 / 3, 0.5, 1 / 3, 1 / 3])
    rel = [4, 5, 1, 1, 3]
    assert box["all"]["ndcg@10"]["value"] == pytest.approx(_ndcg(rel, 10))
    t_ndcg = _ndcg(rel, 10) - _ndcg(rel[::-1], 10)
    assert box["all"]["t_ndcg@10"]["value"] == pytest.approx(t_ndcg)
    assert box["all"]["t_ndcg@30"]["value"] == pytest.approx(metrics.t_ndcg_at_k(rel, 30))
    # Expected T-NDCG: c3 and c6 are tied, so the last two places are (1, 3) or (3, 1).
    other = [4, 5, 1, 3, 1]
    expected = np.mean([metrics.t_ndcg_at_k(rel, 10), metrics.t_ndcg_at_k(other, 10)])
    assert box["all"]["expected_t_ndcg@10"]["mean"] == pytest.approx(expected)
    assert box["all"]["expected_t_ndcg@10"]["exact"] is True
    assert box["margin_weighted"] is None
    x = {row["annotator"]: row for row in box["by_annotator"]}["x"]
    assert x["n_pairs"] == 4 and x["n_answers"] == 4


def test_vectorised_scores_equal_metrics_on_random_inboxes():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = 12
        items = list(range(n))
        relevance = rng.integers(0, 6, n).astype(float)
        pairs = [tuple(rng.choice(n, 2, replace=False)) for _ in range(25)]
        wins = np.zeros((len(pairs), n))
        played = np.zeros((len(pairs), n))
        outcomes = []
        for i, (a, b) in enumerate(pairs):
            w = a if rng.random() < 0.5 else b
            outcomes.append((w, b if w == a else a))
            wins[i, w] += 1
            played[i, [a, b]] += 1
        order = metrics.sort_by_score(metrics.win_rate_scores(items, outcomes))
        rel = relevance[order]
        sums = {"wins": wins.sum(0, keepdims=True), "played": played.sum(0, keepdims=True)}
        for k in (5, 10):
            got = urgency._ranking_scores(sums, relevance, k, tail=True)[0]
            assert got == pytest.approx(metrics.t_ndcg_at_k(rel, k))


def test_each_difficulty_bucket_rests_on_its_own_pairs(study):
    _, _, result = study
    acc = result["accuracy"]
    # Scored pairs: u1 (gap 4, easy), u4 (gap 2, medium), u2 (gap 1, hard); u3 and u5 are
    # left out. Each bucket's figure rests on its one pair; the total on all three.
    assert [acc[b]["accuracy"]["n_units"] for b in ("easy", "medium", "hard")] == [1, 1, 1]
    assert acc["total"]["accuracy"]["n_units"] == 3
    by = {row["annotator"]: row for row in result["accuracy_by_annotator"]}
    # x answered u1, u2, u4 (one per bucket); z only u1 (easy): no medium or hard pair.
    assert [by["z"][b]["accuracy"]["n_units"] for b in ("easy", "medium", "hard")] == [1, 0, 0]
    assert by["z"]["medium"]["accuracy"]["value"] is None


INBOX_LEVELS = {"a1": 1, "a2": 3, "a3": 5, "a4": 6, "b1": 2, "b2": 2, "b3": 4, "b4": 6}
INBOX_PAIRS = [
    ("a1", "a2"),
    ("a1", "a3"),
    ("a2", "a4"),
    ("a3", "a4"),
    ("a1", "a4"),
    ("b1", "b2"),
    ("b1", "b3"),
    ("b2", "b4"),
    ("b3", "b4"),
    ("a1", "b1"),  # across the inboxes: resampled, but inside neither inbox
]


def _chosen(name: str, a: str, b: str) -> str:
    """x picks the more urgent case except on (a3, a4); y always picks the first case."""
    if name == "y" or (a, b) == ("a3", "a4"):
        return a if name == "y" else b
    return a if INBOX_LEVELS[a] <= INBOX_LEVELS[b] else b


def _inbox_study(tmp_path, chooser=None):
    st = new_study(tmp_path)
    for name in ("x", "y"):
        st.person(name)
    for case, level in INBOX_LEVELS.items():
        st.case(case, f"Message {case}.", level, inbox="A" if case[0] == "a" else "B")
    for i, (a, b) in enumerate(INBOX_PAIRS):
        st.unit(f"p{i}", "urgency", a, who=["x", "y"], case_b_id=st.cases[b])
        for name in ("x", "y"):
            chosen = (chooser or _chosen)(name, a, b)
            st.answer(f"p{i}", name, {"more_urgent_case_id": st.cases[chosen]})
    result = urgency.analyse(st.frames(), seed=3, n_resamples=200)
    st.project.close()
    return result


def _judgement_draws(key: str, k: int, chooser=None) -> dict[str, np.ndarray]:
    """Each inbox's NDCG@k (or T-NDCG@k) on the 200 judgement resamples of seed 3, by a loop
    over the documented draws (analysis.urgency.judgement_resamples: every pair inside the
    inbox kept, its answers - x's then y's - drawn with replacement) and scored with
    metrics.win_rate_scores / sort_by_score / ndcg_at_k / t_ndcg_at_k."""
    score = metrics.ndcg_at_k if key.startswith("ndcg") else metrics.t_ndcg_at_k
    out = {}
    for index, box in enumerate(("A", "B")):  # inboxes in name order
        cases = [c for c in INBOX_LEVELS if c[0] == box.lower()]
        inside = [(a, b) for a, b in INBOX_PAIRS if a in cases and b in cases]
        answers = [(a, b) for a, b in inside for _ in ("x", "y")]  # (unit, answer) order
        m = np.full(len(answers), 2)  # two answers per pair
        offsets = np.random.default_rng([3, index, 0]).integers(0, m, size=(200, len(m)))
        values = []
        for row in offsets:
            outcomes = []
            for (a, b), offset in zip(answers, row, strict=True):
                w = (chooser or _chosen)(("x", "y")[offset], a, b)
                outcomes.append((w, b if w == a else a))
            order = metrics.sort_by_score(metrics.win_rate_scores(cases, outcomes))
            values.append(score(metrics.relevance_from_levels([INBOX_LEVELS[c] for c in order]), k))
        out[box] = np.array(values)
    return out


def test_inbox_cis_resample_judgements_within_pairs(tmp_path):
    result = _inbox_study(tmp_path)
    summary = result["inbox_summary"]
    boxes = {b["inbox"]: b for b in result["inboxes"]}
    for k in (10, 30):
        for key in (f"ndcg@{k}", f"t_ndcg@{k}"):
            mean = (boxes["A"]["all"][key]["value"] + boxes["B"]["all"][key]["value"]) / 2
            assert summary[key]["value"] == pytest.approx(mean) == summary[f"mean_{key}"]
            assert summary[key]["n_units"] == 9  # the pairs inside an inbox
            # The CIs by another route (see _judgement_draws): each inbox's, and the mean's
            # from the two inboxes' resampled scores averaged resample by resample.
            draws = _judgement_draws(key, k)
            for box in ("A", "B"):
                figure = boxes[box]["all"][key]
                assert figure["ci"] == pytest.approx(np.quantile(draws[box], [0.025, 0.975]))
                assert figure["n_resamples"] == 200
            both = (draws["A"] + draws["B"]) / 2
            assert summary[key]["ci"] == pytest.approx(np.quantile(both, [0.025, 0.975]))
            assert summary[key]["n_resamples"] == 200
    # One annotator's sort has one answer per pair: nothing to resample, no interval.
    for box in boxes.values():
        for row in box["by_annotator"]:
            assert row["ndcg@10"]["ci"] is None and row["ndcg@10"]["n_resamples"] == 0
            assert row["ndcg@10"]["value"] is not None


def _right(name: str, a: str, b: str) -> str:
    """Both annotators always pick the more urgent case (ties: the first)."""
    return a if INBOX_LEVELS[a] <= INBOX_LEVELS[b] else b


def test_unanimous_judgements_give_the_value_as_interval(tmp_path):
    # x and y agree on every pair, so every judgement resample is the study itself: the
    # interval is the value. Resampling the pairs instead (report version 2) dropped about a
    # third of them from each resample and put the interval below the value (shown here with
    # metrics.bootstrap_ci over the pairs of inbox A).
    result = _inbox_study(tmp_path, chooser=_right)
    box = {b["inbox"]: b for b in result["inboxes"]}["A"]
    value = box["all"]["ndcg@10"]["value"]
    assert box["all"]["ndcg@10"]["ci"] == pytest.approx([value, value])
    summary = result["inbox_summary"]["ndcg@10"]
    assert summary["ci"] == pytest.approx([summary["value"], summary["value"]])
    cases = [c for c in INBOX_LEVELS if c[0] == "a"]
    inside = [(a, b) for a, b in INBOX_PAIRS if a in cases and b in cases]

    def ndcg_of_pairs(drawn):
        outcomes = []
        for i in drawn:
            a, b = inside[i]
            w = _right("x", a, b)
            outcomes += [(w, b if w == a else a)] * 2
        order = metrics.sort_by_score(metrics.win_rate_scores(cases, outcomes))
        return metrics.ndcg_at_k(
            metrics.relevance_from_levels([INBOX_LEVELS[c] for c in order]), 10
        )

    low, high = metrics.bootstrap_ci(list(range(len(inside))), ndcg_of_pairs, 200, seed=3)
    assert high <= value and low < value - 0.01
