"""A long run of random saves: after each refresh, the live report - whatever it carried from
the last refresh (spliced per-answer tables, kept memos, results of the kinds that did not
change), took from the project after a restart, or left after a cancelled refresh - equals,
byte for byte as JSON, the report computed from scratch."""

from __future__ import annotations

import json
import random

import pytest

from portalreview.analysis import KINDS
from portalreview.analysis.filters import FrameFilter, filter_choices
from portalreview.reports.json_report import build_report, read_project_catalogs, report_header
from portalreview.reports.live_report import LiveReport
from portalreview.store.frames import read_frames
from portalreview.store.service import StudyService
from tests.reports.test_live_report import SETTINGS
from tests.store.test_store_live_frames import RandomSaves

pytestmark = pytest.mark.both_backends

STEPS = 16


def _json(report: dict) -> str:
    return json.dumps(report, allow_nan=False)


class _Stop(Exception):
    """Raised by a refresh's ``before_each``: the dashboard's cancel."""


def _cancelled(live: LiveReport, project, choice: FrameFilter, at: str) -> bool:
    """A refresh cancelled as it reaches the analysis ``at``; False when it computed no
    ``at`` (then it ran to the end)."""

    def stop(kind: str) -> None:
        if kind == at:
            raise _Stop

    try:
        live.refresh(project, choice=choice, before_each=stop, **SETTINGS)
    except _Stop:
        return True
    return False


def _fresh(project, include_drafts: bool, choice: FrameFilter) -> dict:
    """The report from scratch: with a filter, the analyses on the answers it keeps and
    ``study`` counting the whole project (docs/report.md)."""
    frames = read_frames(project, include_drafts=include_drafts)
    if not choice.active:
        return build_report(project, frames=frames, include_drafts=include_drafts, **SETTINGS)
    report = build_report(
        project, frames=choice.apply(frames), include_drafts=include_drafts, **SETTINGS
    )
    whole = report_header(
        project,
        frames,
        read_project_catalogs(project),
        include_drafts=include_drafts,
        **SETTINGS,
    )
    return {**report, "study": whole["study"]}


@pytest.mark.parametrize("include_drafts", [False, True], ids=["submitted", "with-drafts"])
def test_random_saves_the_live_report_equals_a_fresh_one_after_every_refresh(
    fresh_demo, include_drafts
):
    project = fresh_demo
    rng = random.Random(20261127 + include_drafts)
    saves = RandomSaves(project, StudyService(project))
    people = filter_choices(read_frames(project)).annotators
    live = LiveReport(include_drafts=include_drafts)
    partial, restarts, filtered, cancels = 0, 0, 0, 0
    for step in range(STEPS):
        saves.one(rng)
        if rng.random() < 0.3:  # two saves between refreshes
            saves.one(rng)
        if rng.random() < 0.2:  # the program started again: the project's kept results
            live, restarts = LiveReport(include_drafts=include_drafts), restarts + 1
        choice = FrameFilter()
        if rng.random() < 0.15:  # the dashboard filtered to two annotators
            choice, filtered = FrameFilter.of(annotators=rng.sample(people, 2)), filtered + 1
        if rng.random() < 0.2:  # a refresh cancelled part way, perhaps a save after it
            cancels += _cancelled(live, project, choice, rng.choice(KINDS))
            if rng.random() < 0.5:
                saves.one(rng)
        result = live.refresh(project, choice=choice, **SETTINGS)
        partial += not result.change.full and 0 < len(result.recomputed) < len(KINDS)
        assert _json(result.report) == _json(_fresh(project, include_drafts, choice)), step
    # the run went through the paths it is meant to: refreshes that computed only some
    # analyses, restarts, filters, cancels
    assert partial and restarts and filtered and cancels
