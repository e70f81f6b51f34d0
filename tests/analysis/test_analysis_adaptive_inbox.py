"""An adaptive inbox in the report (issue 19): scored by Bradley-Terry strengths, not win
rates, with intervals over outcome resamples, and marked with its sets and the judgements
made; an inbox of all pairs is scored as before; the live report equals the full one."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from portalreview import metrics
from portalreview.analysis import urgency
from portalreview.analysis._common import Settings
from portalreview.metrics.bradley_terry import bradley_terry
from portalreview.reports.json_report import build_report
from portalreview.reports.live_report import LiveReport
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)
from tests.store.test_adaptive_inbox import fill_inbox, judge, levels_of, make_adaptive, todo

SETTINGS = {"seed": 3, "n_resamples": 200}


def work_through(project, who: str, truth: dict[int, int], limit: int | None = None) -> None:
    person = StudyService(project).as_viewer(who)
    done = 0
    while todo(person) and (limit is None or done < limit):
        judge(person, project, todo(person)[0], truth)
        done += 1


@pytest.fixture
def judged(tmp_path):
    project = fill_inbox(Project.create(tmp_path / "a.prproj", name="Adaptive"))
    make_adaptive(project, judgements=30)
    truth = levels_of(project)
    for who in ("ava", "ben"):
        work_through(project, who, truth)
    yield project
    project.close()


def test_an_adaptive_inbox_is_scored_by_strengths(judged):
    frames = read_frames(judged)
    result = urgency.analyse(frames, **SETTINGS)
    (box,) = result["inboxes"]
    assert box["score"] == "bradley_terry"
    assert box["adaptive"] == {
        "unit_sets": ["Adaptive urgency pairs: ward-3"],
        "n_pairs": 66,
        "n_judgements": 60,
        "judgements_by_annotator": {"ava": 30, "ben": 30},
    }
    # the value, worked out independently: fit, sort (ties in item order), metrics.ndcg_at_k
    rows = urgency.decisions(frames)
    items = sorted(frames.cases.case_id.tolist())
    index = {c: i for i, c in enumerate(items)}
    theta = bradley_terry(
        len(items),
        np.array([index[a] for a in rows.case_a]),
        np.array([index[b] for b in rows.case_b]),
        (rows.chosen == rows.case_a).to_numpy().astype(float),
    )
    levels = frames.cases.set_index("case_id").urgency_level
    order = sorted(range(len(items)), key=lambda i: -theta[i])
    relevance = [6 - levels[items[i]] for i in order]
    assert box["all"]["ndcg@10"]["value"] == pytest.approx(metrics.ndcg_at_k(relevance, 10))
    assert box["all"]["t_ndcg@10"]["value"] == pytest.approx(metrics.t_ndcg_at_k(relevance, 10))
    assert [row["case_id"] for row in box["order"]] == [items[i] for i in order]
    assert box["order"][0]["strength"] == pytest.approx(theta[order[0]])
    for scorer in [box["all"], *box["by_annotator"]]:  # every scorer keeps its interval
        figure = scorer["ndcg@10"]
        assert figure["ci"] is not None and figure["n_resamples"] == 200
        assert figure["ci"][0] <= figure["ci"][1] <= 1.0


def test_an_adaptive_inbox_counts_the_pairs_of_a_message_without_a_level(tmp_path):
    """The clinicians judge every message, one without a reference level too: its pairs and
    judgements are the inbox's (they were left out of the counts, which then disagreed with
    the clinicians' progress); only the scores leave the message out."""
    project = fill_inbox(Project.create(tmp_path / "c.prproj", name="Adaptive"))
    make_adaptive(project, judgements=30)
    truth = levels_of(project)
    for who in ("ava", "ben"):
        work_through(project, who, truth)
    with project.write() as s:
        s.execute(text("UPDATE cases SET urgency_level = NULL WHERE external_id = 'm00'"))
    (box,) = urgency.analyse(read_frames(project), **SETTINGS)["inboxes"]
    assert (box["n_messages"], box["n_messages_without_level"]) == (11, 1)
    assert box["adaptive"] == {
        "unit_sets": ["Adaptive urgency pairs: ward-3"],
        "n_pairs": 66,
        "n_judgements": 60,
        "judgements_by_annotator": {"ava": 30, "ben": 30},
    }
    project.close()


def test_outcome_resamples_refit_the_same_pairs():
    # three messages, judged a > b twice, b > c twice, a > c once: fitted p(a chosen) per
    # judgement; with p near 1 for every judgement nearly every resample keeps the order
    import pandas as pd

    rows = pd.DataFrame(
        {"case_a": [1, 1, 2, 2, 1], "case_b": [2, 2, 3, 3, 3], "chosen": [1, 1, 2, 2, 1]}
    )
    settings = Settings.of(None, 0, 500)
    draws = urgency.outcome_resamples(rows, [1, 2, 3], settings, (0,))["scores"]
    assert draws.shape == (500, 3)
    again = urgency.outcome_resamples(rows, [1, 2, 3], settings, (0,))["scores"]
    assert np.array_equal(draws, again)  # reproducible from the seed and stream
    theta = bradley_terry(3, np.array([0, 0, 1, 1, 0]), np.array([1, 1, 2, 2, 2]), np.ones(5))
    p = 1 / (1 + np.exp(-(theta[[0, 0, 1, 1, 0]] - theta[[1, 1, 2, 2, 2]])))
    kept = np.mean((draws[:, 0] > draws[:, 1]) & (draws[:, 1] > draws[:, 2]))
    assert kept >= np.prod(p) - 0.05  # every outcome as fitted keeps the order (and more do)
    assert urgency.outcome_resamples(rows, [1, 2, 3], Settings.of(None, 0, 0), (0,)) is None


def test_an_inbox_of_all_pairs_keeps_its_win_rates(tmp_path):
    project = fill_inbox(Project.create(tmp_path / "b.prproj", name="All pairs"))
    made = create_unit_set(project, plan_units(project, "urgency", inbox="ward-3"))
    assign_units(project, plan_assignment(project, made.name, ["ava"]))
    work_through(project, "ava", levels_of(project), limit=20)
    (box,) = urgency.analyse(read_frames(project), **SETTINGS)["inboxes"]
    assert box["score"] == "win_rate" and "adaptive" not in box
    assert "strength" not in box["order"][0]
    project.close()


def test_the_live_report_follows_an_adaptive_inbox(tmp_path):
    project = fill_inbox(Project.create(tmp_path / "c.prproj", name="Live"))
    truth = levels_of(project)
    live = LiveReport()
    live.refresh(project, **SETTINGS)
    make_adaptive(project, judgements=20)
    work_through(project, "ava", truth, limit=5)
    assert live.refresh(project, **SETTINGS).report == build_report(project, **SETTINGS)
    work_through(project, "ava", truth, limit=3)
    result = live.refresh(project, **SETTINGS)
    assert not result.change.full and result.recomputed == ("urgency",)
    assert result.report == build_report(project, **SETTINGS)
    (box,) = result.report["urgency"]["inboxes"]
    assert box["adaptive"]["n_judgements"] == 8
    project.close()


def test_the_workbook_says_which_inbox_was_sorted_adaptively(judged, tmp_path):
    from openpyxl import load_workbook

    from portalreview.reports.xlsx_report import write_xlsx_report

    book = load_workbook(write_xlsx_report(judged, tmp_path / "r.xlsx", n_resamples=20))
    rows = [[c.value for c in row] for row in book["Urgency"].iter_rows()]
    (header,) = [i for i, r in enumerate(rows) if r[:2] == ["Inbox", "Unit sets"]]
    assert rows[header + 1][:5] == [
        "ward-3",
        "Adaptive urgency pairs: ward-3",
        66,
        60,
        "ava 30, ben 30",
    ]
    sorted_by = {r[1] for r in rows if r[:1] == ["ward-3"] and r[2] in ("all people", "ava")}
    assert sorted_by == {"Bradley-Terry strength (adaptive)"}


def test_the_inbox_view_sorts_an_adaptive_inbox_as_the_report_does(judged):
    from portalreview.tasks.urgency.inbox import judges, load_inbox

    pi = StudyService(judged)  # the system sees as the PI does
    everyone = next(j for j in judges(pi) if j.key == "all")
    result = load_inbox(pi, "ward-3", everyone)
    assert result.adaptive and result.n_judgements == 60
    report = urgency.analyse(read_frames(judged), **SETTINGS)
    (box,) = report["inboxes"]
    assert [row.case_id for row in result.rows] == [row["case_id"] for row in box["order"]]
    assert result.scores["ndcg@10"] == pytest.approx(box["all"]["ndcg@10"]["value"])


def test_the_inbox_view_keeps_win_rates_for_an_inbox_of_all_pairs(tmp_path):
    from portalreview.tasks.urgency.inbox import judges, load_inbox

    project = fill_inbox(Project.create(tmp_path / "d.prproj", name="All pairs"))
    made = create_unit_set(project, plan_units(project, "urgency", inbox="ward-3"))
    assign_units(project, plan_assignment(project, made.name, ["ava"]))
    work_through(project, "ava", levels_of(project), limit=10)
    service = StudyService(project)
    result = load_inbox(service, "ward-3", next(j for j in judges(service) if j.key == "all"))
    assert not result.adaptive
    rates = [row.win_rate for row in result.rows if row.comparisons]
    assert rates == sorted(rates, reverse=True)
    project.close()
