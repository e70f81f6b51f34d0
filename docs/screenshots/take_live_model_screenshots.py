"""Screenshots of the PI working with a loaded model: drafts being written, the inbox sorted.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_live_model_screenshots.py \
        [--threads N] [--only drafts|inbox]

Builds the demo study in a temporary folder, signs in as the PI, loads the small model fetched
at install time (SmolLM2-135M-Instruct, ``packaging/fetch_small_model.py``) on the CPU as
Tools > Models… does, and saves next to this script:

- ``drafts-1-streaming.png``: Tools > Generate drafts… on the demo's rank set, taken while the
  second case's draft is being written (the first one stored); the run is then cancelled, so
  only one or two drafts are written.
- ``inbox-4-live-model.png``: the inbox view sorted by the loaded model (Ctrl+M), "whole inbox
  in view" ticked, as the PI sees it. The demo inbox (8,310 tokens) does not fit this model's
  8,192-token context, so the view asks pair by pair: 870 questions, about 20 minutes on two
  cores.

Look at both images after running it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings
from PySide6.QtTest import QTest

from portalreview.demo import build_demo
from portalreview.llm.model_file import small_model_path
from portalreview.ui import drafts_dialog, inbox_view
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
DRAFTS = "drafts-1-streaming.png"
INBOX = "inbox-4-live-model.png"
SHOWN_CHARS = 240  # of the second draft, on screen when the picture is taken
TEMPERATURE, SEED = 0.7, 0
WAIT_S = 1800


def wait_until(done, what: str, seconds: float = WAIT_S) -> None:
    end = time.monotonic() + seconds
    while not done():
        if time.monotonic() > end:
            sys.exit(f"gave up waiting for {what}")
        QTest.qWait(50)


def save(widget, name: str) -> None:
    QTest.qWait(200)
    widget.grab().save(str(HERE / name))
    print("saved", name)


def signed_in_with_model(path: Path, prefs: Preferences, model: Path, threads: int | None):
    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator="dr_pi")
    wait_until(lambda: window.session is not None, "the study to open")
    host = window.suggestions.host
    host.load_options = {"gpu": False, **({"n_threads": threads} if threads else {})}
    host.load(model, show_progress=False)
    wait_until(lambda: not host.loading, "the model to load")
    if host.engine is None:
        sys.exit(f"the model did not load: {host.last_error}")
    print("loaded", host.engine.info.file_name, "-", host.engine.info.describe())
    return window


def drafts_screen(window: MainWindow) -> None:
    """The demo's rank set, drafted with the dialog's defaults; the picture while the second
    case's draft is being written, then Cancel."""
    dialog = drafts_dialog.open_tool(window)
    finished: list[tuple[int, str]] = []
    ended: list[object] = []
    dialog.case_finished.connect(lambda case_id, status: finished.append((case_id, status)))
    dialog.run_finished.connect(ended.append)
    dialog.temperature.setValue(TEMPERATURE)  # greedy, the 135M model repeats itself to the
    dialog.seed.setValue(SEED)  # token limit, and such an unfinished draft is not stored
    started = time.monotonic()
    dialog.run()
    wait_until(lambda: finished or ended, "the first draft")
    print("first case:", finished[0][1] if finished else dialog.status.text())
    wait_until(
        lambda: (
            ended
            or (
                dialog._case_id not in (None, finished[0][0])
                and len(dialog.stream_view.toPlainText()) >= SHOWN_CHARS
            )
        ),
        "the second draft",
    )
    if not ended:
        save(dialog, DRAFTS)
        dialog.cancel()
        wait_until(lambda: ended, "the run to stop")
    print(f"{time.monotonic() - started:.0f} s:", dialog.counts.text(), "|", dialog.current.text())
    dialog.close()


def inbox_screen(window: MainWindow) -> None:
    """The demo inbox sorted by the model with the whole inbox in view, as the PI sees it."""
    view = inbox_view.open_tool(window)
    view.resize(1100, 720)
    wait_until(lambda: not view.loading and view.result is not None, "the inbox")
    view.whole_inbox.setChecked(True)
    started = time.monotonic()
    view.sort_by_model()
    wait_until(lambda: not view.loading, "the model's order")
    if view.result is None or view.result.model is None:
        sys.exit(f"the model did not sort the inbox: {view.status.text()}")
    print(f"{time.monotonic() - started:.0f} s:", view.status.text())
    save(view, INBOX)
    view.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, help="llama.cpp threads (1 on cores other work keeps busy)"
    )
    parser.add_argument(
        "--only",
        choices=("drafts", "inbox"),
        help="take one of the two pictures (the inbox's "
        "takes about 20 minutes, the drafts' one or two)",
    )
    args = parser.parse_args()
    model = small_model_path()
    if model is None:
        sys.exit("the small model is missing: run `python packaging/fetch_small_model.py`")
    application()
    folder = Path(tempfile.mkdtemp(prefix="live_model_screens_"))
    prefs = Preferences(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
    path = build_demo(folder / "demo.prproj")
    window = signed_in_with_model(path, prefs, model, args.threads)
    if args.only in (None, "drafts"):
        drafts_screen(window)
    if args.only in (None, "inbox"):
        inbox_screen(window)
    window.close()


if __name__ == "__main__":
    main()
