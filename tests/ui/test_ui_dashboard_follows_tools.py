"""The agreement dashboard, "Update when answers are saved" ticked, computes again after the
PI's tool windows write to the study, not only after saves in the main window's editor: a
merged offline copy and a gold answer saved in Adjudicate. Before, it said "Up to date" over
the old figures (and exported them) until F5."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ui_support import open_window

from portalreview.store import merge
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import copies_dialog
from portalreview.ui.adjudication import AdjudicationDialog
from portalreview.ui.dashboard import Dashboard
from portalreview.ui.tools import TOOLS

COMPUTE_MS = 60_000


def open_tool(window, title: str):
    return next(t for t in TOOLS if t.title == title).load()(window)


def stored_submitted(path: Path) -> int:
    """Submitted answers in the file, gold ones included (as the dashboard counts them)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM answers WHERE status = 'submitted'").fetchone()[0]
    finally:
        conn.close()


def wait_counts(qtbot, dashboard: Dashboard, n: int) -> None:
    qtbot.waitUntil(
        lambda: (
            not dashboard.loading
            and dashboard.computed is not None
            and dashboard.computed.n_answers == n
        ),
        timeout=COMPUTE_MS,
    )


def test_a_merge_and_a_gold_answer_update_the_figures(qtbot, gui, prefs, tmp_path, monkeypatch):
    ids, unit = gui.ids, gui.ids.units["urgency"]
    copy = tmp_path / "ben.prproj"
    with Project.open(gui.path) as project:
        StudyService(project).save_answer(
            unit,
            {"more_urgent_case_id": ids.case1, "ask_second": False, "levels": {}},
            status="submitted",
            annotator_id=ids.ava,
        )
        merge.make_copy(project, copy, annotator="ben", only_assigned=True)
    with Project.open(copy) as project:  # Ben answers the pair on the ward, differently
        StudyService(project).as_viewer("ben").save_answer(
            unit,
            {"more_urgent_case_id": ids.case2, "ask_second": False, "levels": {}},
            status="submitted",
        )
    window = open_window(qtbot, prefs, gui.path, "pat")
    dashboard = open_tool(window, "Agreement dashboard")
    assert dashboard.auto.isChecked()
    wait_counts(qtbot, dashboard, stored_submitted(gui.path))

    copies = open_tool(window, "Offline copies…")
    monkeypatch.setattr(copies_dialog, "ask_copies_to_merge", lambda parent, folder: [copy])
    copies.merge_copies()
    qtbot.waitUntil(lambda: not copies.busy, timeout=COMPUTE_MS)
    merged = stored_submitted(gui.path)
    wait_counts(qtbot, dashboard, merged)  # Ben's merged answer is counted

    adjudication = open_tool(window, "Adjudicate disagreements")
    assert isinstance(adjudication, AdjudicationDialog)
    qtbot.waitUntil(lambda: not adjudication.loading, timeout=COMPUTE_MS)
    adjudication.set_kind("urgency")
    qtbot.waitUntil(lambda: not adjudication.loading, timeout=COMPUTE_MS)
    assert adjudication.take_as_gold(adjudication.report.answers[0])
    assert stored_submitted(gui.path) == merged + 1
    wait_counts(qtbot, dashboard, merged + 1)  # and the gold answer
