"""Screenshot of the dashboard opened again on figures the project keeps.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_kept_dashboard_screenshot.py

On a fresh demo study the PI opens the agreement dashboard (its figures are then kept in the
project), signs out, and a rank answer is saved meanwhile; signed in again, the dashboard shows
the kept figures at once, marked as kept and with the rank figures out of date, while the
figures of now are computed (held back here until the picture is taken). Saves
``dashboard-7-kept.png`` next to this script. Look at it after running it.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from portalreview.demo import build_demo
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import dashboard as dashboard_module
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
PI = "dr_pi"


def _wait(condition, ms: int = 60000) -> None:
    """Process events until ``condition()`` (sleeping with the GIL released, so that the
    background computation runs at full speed)."""
    waited = 0
    while not condition() and waited < ms:
        QApplication.processEvents()
        time.sleep(0.02)
        waited += 20


def _kept_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM report_cache").fetchone()[0]


def _save_a_rank_answer(path: Path) -> None:
    with Project.open(path) as project:
        service = StudyService(project)
        answers = read_frames(project).answers
        row = answers[(answers.kind == "rank") & ~answers.is_gold.astype(bool)].iloc[0]
        who = next(a.id for a in service.annotators() if a.name == row.annotator)
        view = service.get_answer(int(row.unit_id), who)
        service.save_answer(
            view.unit_id, view.payload, status="submitted", flagged=True, annotator_id=who
        )


def main() -> None:
    application()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_demo(Path(tmp) / "demo.prproj")
        prefs = Preferences(QSettings(str(Path(tmp) / "prefs.ini"), QSettings.Format.IniFormat))
        window = MainWindow(prefs)
        window.show()
        window.open_project(path, annotator=PI)
        _wait(lambda: window.session is not None)
        dashboard = dashboard_module.open_tool(window)
        _wait(lambda: dashboard.computed is not None and not dashboard.loading)
        _wait(lambda: _kept_rows(path) > 0)
        window.close_project()
        _save_a_rank_answer(path)

        release = threading.Event()
        compute = dashboard_module.compute

        def held_compute(*args, **kwargs):
            release.wait(60)
            return compute(*args, **kwargs)

        dashboard_module.compute = held_compute
        window.open_project(path, annotator=PI)
        _wait(lambda: window.session is not None)
        dashboard.resize(1200, 820)
        dashboard.refresh()
        _wait(lambda: "Kept figures" in dashboard.info.text())
        QTest.qWait(300)
        dashboard.grab().save(str(HERE / "dashboard-7-kept.png"))
        release.set()
        _wait(lambda: dashboard.computed is not None and not dashboard.loading)
        dashboard.close()
        window.close()


if __name__ == "__main__":
    main()
