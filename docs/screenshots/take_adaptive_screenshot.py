"""Screenshot of an adaptive inbox at work.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_adaptive_screenshot.py

On a fresh demo study the PI makes an adaptive inbox of the demo inbox (20 judgements per
clinician) and hands it to ``nurse_ava``, who then judges 6 pairs, each the one chosen for her
after her previous answer; saves ``urgency-adaptive.png`` next to this script: her queue shows
the answered pairs and the next one, and counts the judgements asked of her. Look at it after
running it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings
from PySide6.QtTest import QTest
from sqlalchemy import select

from portalreview.demo import INBOX, build_demo
from portalreview.store.models import Case
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
NAME = "Adaptive inbox"


def _wait(condition, ms: int = 60000) -> None:
    waited = 0
    while not condition() and waited < ms:
        QTest.qWait(50)
        waited += 50


def main() -> None:
    application()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_demo(Path(tmp) / "demo.prproj")
        with Project.open(path) as project:
            plan = plan_units(project, "adaptive-inbox", inbox=INBOX, judgements=20, name=NAME)
            made = create_unit_set(project, plan)
            assign_units(project, plan_assignment(project, made.name, ["nurse_ava"]))
            ava = StudyService(project).as_viewer("nurse_ava")
            with project.read() as s:
                levels = {c.id: c.urgency_level for c in s.scalars(select(Case))}
            for _ in range(6):  # she judges as the reference levels say
                item = next(
                    q for q in ava.queue("urgency") if q.adaptive and q.status == "todo"
                )
                a, b = (c.id for c in ava.read_unit(item.unit_id).cases[:2])
                chosen = a if (levels[a] or 9) <= (levels[b] or 9) else b
                ava.save_answer(item.unit_id, {"more_urgent_case_id": chosen}, status="submitted")
        prefs = Preferences(QSettings(str(Path(tmp) / "prefs.ini"), QSettings.Format.IniFormat))
        window = MainWindow(prefs)
        window.resize(1280, 800)
        window.show()
        window.open_project(path, annotator="nurse_ava")
        _wait(lambda: window.session is not None)
        window.kind_tabs.setCurrentIndex(window.kinds.index("urgency"))
        next_pair = next(i for i in window.queue.all_items if i.adaptive and i.status == "todo")
        window.queue.select_unit(next_pair.unit_id)
        QTest.qWait(300)
        window.grab().save(str(HERE / "urgency-adaptive.png"))
        window.close()


if __name__ == "__main__":
    main()
