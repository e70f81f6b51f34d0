"""The log file of a working session: the app started as a clinician starts it, an answer typed
and submitted, a command run; the log has the actions and none of the typed text. Help > Open
log folder shows the folder."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication
from ui_support import preferences, show_kind, stored_answer, wait_saved

from portalreview import applog
from portalreview.cli import main
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui import app as app_module
from portalreview.ui.main_window import MainWindow

ANSWER = "Quendrilax Pravotine reassurance for Marguerite"  # no word of it may reach the log


@pytest.fixture
def logs(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    monkeypatch.setenv(applog.LOG_DIR_ENV, str(folder))
    yield folder
    applog.close_log()


def start_app(qtbot, monkeypatch, tmp_path, path, who: str) -> MainWindow:
    """``run_app`` as ``portalreview PATH`` calls it, with its event loop left to the test."""
    monkeypatch.setattr(app_module, "Preferences", lambda: preferences(tmp_path))
    monkeypatch.setattr(QApplication, "exec", lambda self: 0)
    before = set(QApplication.topLevelWidgets())
    assert app_module.run_app(path, who) == 0
    (window,) = [
        w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w not in before
    ]
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    return window


def test_a_session_is_logged_without_its_texts(qtbot, gui, tmp_path, monkeypatch, logs, capsys):
    window = start_app(qtbot, monkeypatch, tmp_path, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    unit = window.session.unit.unit_id
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, ANSWER)
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    window.close()
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"] == ANSWER

    out = tmp_path / "export"
    assert main(["export", str(gui.path), "--format", "csv", "-o", str(out)]) == 0
    capsys.readouterr()

    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "gui start: PortalReview" in text and "cli start: PortalReview" in text
    assert f"project opened: {gui.path} (for writing)" in text
    assert re.search(rf"answer saved: unit {unit} \(respond\), answer \d+, draft in \d+ ms", text)
    assert re.search(rf"answer saved: unit {unit} \(respond\), answer \d+, submitted in", text)
    assert f"export written: {out} (csv;" in text
    assert "command export done (status 0)" in text
    for word in ("Quendrilax", "Pravotine", "reassurance", "Marguerite"):
        assert word not in text, word
    assert "crushing chest pain" not in text  # the message on screen is not there either


def test_help_opens_the_log_folder(qtbot, gui, tmp_path, monkeypatch, logs):
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window = start_app(qtbot, monkeypatch, tmp_path, gui.path, "ava")
    help_menu = next(
        a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "Help"
    )
    (item,) = [a for a in help_menu.actions() if a.text().replace("&", "") == "Open log folder"]
    item.trigger()
    assert [url.toLocalFile() for url in opened] == [str(logs)]
    window.close()


def test_a_failed_background_task_is_logged_with_its_traceback(logs):
    from portalreview.ui.workers import Worker

    def read_the_file(text: str) -> None:
        raise ValueError(f"row 2 holds {text!r}")

    applog.setup_logging("gui")
    failures = []
    worker = Worker(read_the_file, "Quendrilax wheezing")
    worker.signals.failed.connect(lambda message, exc: failures.append(message))
    worker.run()  # on this thread: what a pool thread runs
    assert failures == ["row 2 holds 'Quendrilax wheezing'"]  # the person still sees it all
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "ERROR" in text and "background task " in text and "read_the_file failed" in text
    assert "Traceback (most recent call last):" in text and ", in read_the_file\n" in text
    assert "ValueError (message not logged: 33 characters)" in text and "Quendrilax" not in text


def test_a_task_stopped_by_its_closed_project_is_one_info_line(logs):
    """Opening another study (or quitting) under a background read ends it with ProjectClosed:
    an expected end, logged in one line that names the file, not as an error."""
    from portalreview.store.closing import Closing
    from portalreview.ui.workers import Worker

    life = Closing("s3a.prproj")
    life.close()

    def read_kind() -> None:
        life.check()

    applog.setup_logging("gui")
    failures = []
    worker = Worker(read_kind)
    worker.signals.failed.connect(lambda message, exc: failures.append(message))
    worker.run()
    assert failures == [
        "The project s3a.prproj was closed. Nothing was read. Open it again to go on."
    ]
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "ERROR" not in text and "Traceback" not in text
    (line,) = [line for line in text.splitlines() if "background task" in line]
    assert " INFO " in line and "read_kind stopped: ProjectClosed: The project s3a.prproj" in line


def test_a_cancelled_task_that_fails_is_one_info_line(logs):
    from portalreview.ui.workers import Worker

    def compute(cancelled) -> None:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    applog.setup_logging("gui")
    worker = Worker(compute)
    worker.cancel()
    worker.run()
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "ERROR" not in text and "Traceback" not in text
    assert " INFO " in text and "background task " in text and "compute stopped: " in text
