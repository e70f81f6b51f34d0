"""Screenshot of the dashboard's Models tab: SmolLM2-135M-Instruct beside the demo's clinicians.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_model_screenshot.py \
        [--limit N] [--project DEMO.prproj]

Builds the demo study in a temporary folder, runs the small model fetched at install time
(``packaging/fetch_small_model.py``) over N units of each kind as a pseudo annotator
(``portalreview evaluate-model --model ... --limit N``; minutes on a laptop's CPU), opens the
agreement dashboard as the PI and saves ``dashboard-5-models.png`` (the top of the Models
tab) and ``dashboard-6-models-agreement.png`` (from the rank table on) next to this script. With
``--project``, a demo study the model already answered is used as it is. Look at the image
after running it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QEventLoop, QPoint, QSettings
from PySide6.QtTest import QTest

from portalreview.cli import main as cli
from portalreview.demo import build_demo
from portalreview.llm.model_file import small_model_path
from portalreview.ui import dashboard as dashboard_tool
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.model_quality import TAB
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
NAME = "dashboard-5-models.png"
SECOND = "dashboard-6-models-agreement.png"


def evaluated_demo(folder: Path, limit: int, threads: int | None) -> Path:
    model = small_model_path()
    if model is None:
        sys.exit("the small model is missing: run `python packaging/fetch_small_model.py`")
    path = build_demo(folder / "demo.prproj")
    argv = ["evaluate-model", str(path), "--model", str(model), "--limit", str(limit)]
    status = cli(argv + (["--threads", str(threads)] if threads else []))
    if status:
        sys.exit(f"evaluate-model stopped with status {status}")
    return path


def shoot(path: Path, prefs: Preferences) -> None:
    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator="dr_pi")
    while window.session is None:
        QTest.qWait(20)
    board = dashboard_tool.open_tool(window)
    board.resize(1440, 1000)
    if board.loading:  # an event loop, not qWait: the worker thread needs the GIL
        loop = QEventLoop()
        board.finished.connect(loop.quit)
        loop.exec()
    names = [board.tabs.tabText(i) for i in range(board.tabs.count())]
    board.tabs.setCurrentIndex(names.index(TAB))
    QTest.qWait(300)
    board.grab().save(str(HERE / NAME))
    print("saved", NAME)
    # the agreement tables further down: from the rank table on
    page = board.tabs.currentWidget()
    view = next((v for _, t, v in board.model_views if t.key.endswith("_rank")), None)
    if view is not None:
        page.verticalScrollBar().setValue(view.mapTo(page.widget(), QPoint(0, 0)).y() - 40)
        QTest.qWait(300)
        board.grab().save(str(HERE / SECOND))
        print("saved", SECOND)
    board.close()
    window.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=3, help="units of each kind (default 3)")
    parser.add_argument("--project", type=Path, help="a demo study the model already answered")
    parser.add_argument(
        "--threads", type=int, help="llama.cpp threads (1 on cores other work keeps busy)"
    )
    args = parser.parse_args()
    application()
    folder = Path(tempfile.mkdtemp(prefix="model_screen_"))
    prefs = Preferences(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
    shoot(args.project or evaluated_demo(folder, args.limit, args.threads), prefs)


if __name__ == "__main__":
    main()
