"""The system ending the program (SIGTERM at a logout, a reboot, ``systemctl stop``, ``kill PID``;
SIGHUP) closes it as the person closing the window would, saving what is open, but asking
nothing: what cannot be saved is kept on this computer. Before, the process died on the spot,
the text typed last was lost, the log said nothing and the project's lock was left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from test_ui_adjudication import disk_full, edited_gold, gold_of, study_with_disagreements
from ui_support import make_gui_study, open_window, show_kind, stored_answer

from portalreview.store.project import Project
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui import termination
from portalreview.ui.unsaved_work import UnsavedWork

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM for GUI programs")

REPO = Path(__file__).resolve().parents[2]
TYPED = "Twenty minutes of careful work."

# The app as ``portalreview PATH --as ava`` starts it; once the unit is open, TYPED is typed
# and the app's own loop runs on. Autosave is put off: only closing can save the text.
APP_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication
    from portalreview.cli import main
    from portalreview.tasks.common.editor_base import TextBox
    from portalreview.ui import app, session
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences

    folder, disk = Path(sys.argv[1]), sys.argv[2]
    ini = str(folder / "settings.ini")
    app.Preferences = lambda: Preferences(QSettings(ini, QSettings.Format.IniFormat))
    session.AUTOSAVE_MS = 3_600_000

    def type_once_open():
        window = next(
            (w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)), None
        )
        if window is None or window.session is None:
            QTimer.singleShot(20, type_once_open)
            return
        window.kind_tabs.setCurrentIndex(window.kinds.index("respond"))
        window.queue.jump_to_number(1)
        if disk == "full":
            from portalreview.store.errors import SaveFailed

            def full(*_args, **_kwargs):
                raise SaveFailed("the disk holding gui.prproj is full")

            window.session.service.save_answer = full
        QTest.keyClicks(window.editors["respond"].findChild(TextBox, "box_empathy"), sys.argv[3])
        print("TYPED", window.session.unit.unit_id, flush=True)

    QTimer.singleShot(0, type_once_open)
    sys.exit(main([str(folder / "gui.prproj"), "--as", "ava"]))
    """
)


def _hangup_as_usual() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def end_typing_app(folder: Path, how: signal.Signals, disk: str = "room") -> tuple[int, int]:
    """Start the app, type :data:`TYPED`, send ``how``: its exit status and the unit typed in."""
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
        "PORTALREVIEW_LOG_DIR": str(folder / "logs"),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", APP_SCRIPT, str(folder), disk, TYPED],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        # as a desktop starts it: a test run under nohup (SIGHUP ignored, which the app then
        # keeps ignoring, as it should) would otherwise wait for an end that never comes
        preexec_fn=_hangup_as_usual,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("TYPED"), "the app never showed the unit"
        process.send_signal(how)
        return process.wait(timeout=60), int(line.split()[1])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def last_log_lines(folder: Path) -> str:
    return (folder / "logs" / "portalreview.log").read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP])
def test_the_system_ending_the_program_saves_what_was_just_typed(tmp_path, how):
    study = make_gui_study(tmp_path)
    status, unit = end_typing_app(tmp_path, how)
    assert status == 0
    assert stored_answer(study.path, unit, "ava").payload["parts"]["empathy"] == TYPED
    assert not Path(f"{study.path}.lock").exists()  # the project was closed, its lock released
    assert f"ended by {how.name}: closing, saving what is open" in last_log_lines(tmp_path)


@pytest.mark.slow
def test_what_cannot_be_saved_as_the_program_ends_is_kept_on_this_computer(tmp_path):
    study = make_gui_study(tmp_path)
    status, unit = end_typing_app(tmp_path, signal.SIGTERM, disk="full")
    assert status == 0
    assert stored_answer(study.path, unit, "ava") is None
    with Project.open(study.path, read_only=True) as project:
        kept = UnsavedWork(project.meta("project_id"), "ava").read(unit)
    assert kept is not None and kept.payload["parts"]["empathy"] == TYPED
    assert kept.why == "the disk holding gui.prproj is full"


@pytest.fixture
def no_questions(monkeypatch) -> list[str]:
    """Every question box answered at once (Cancel), and recorded: none may be asked."""
    asked: list[str] = []

    def question(*args, **_kwargs):
        asked.append(args[2])
        return QMessageBox.StandardButton.Cancel

    for name in ("question", "warning"):
        monkeypatch.setattr(QMessageBox, name, staticmethod(question))
    return asked


def test_the_pis_decision_not_saved_as_gold_is_saved_unasked(qtbot, tmp_path, no_questions):
    study = study_with_disagreements(tmp_path)
    window, dialog = edited_gold(qtbot, study, tmp_path)
    assert window.close_unattended("SIGTERM")
    assert no_questions == []
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold is not None and gold.payload == dialog.editor.payload()


def test_the_pis_decision_that_cannot_be_saved_is_kept_unasked(
    qtbot, tmp_path, no_questions, monkeypatch
):
    study = study_with_disagreements(tmp_path)
    window, dialog = edited_gold(qtbot, study, tmp_path)
    disk_full(monkeypatch, dialog)
    assert window.close_unattended("SIGTERM")
    assert no_questions == []
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    kept = dialog.unsaved.read(study.ids.units["eppc"])
    assert kept.payload == dialog.editor.payload() and kept.why == "the disk is full"


def test_a_question_on_screen_when_the_program_ends_is_dismissed_and_the_text_kept(
    qtbot, gui, prefs, monkeypatch
):
    """The person had closed the window over a save that failed (one a failed save does not
    keep itself), and "Close anyway and lose it?" was waiting for an answer when the system
    ended the program: it is dismissed, never taken for Discard, and the text is kept."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    unit, unsaved = window.session.unit.unit_id, window.session.unsaved

    def refused(*_args, **_kwargs):
        raise PermissionError("ava may not save this unit now")

    monkeypatch.setattr(window.session.service, "save_answer", refused)
    monkeypatch.setattr(QApplication, "exit", staticmethod(lambda _code=0: None))
    qtbot.keyClicks(window.editors["respond"].findChild(TextBox, "box_empathy"), TYPED)
    ending = termination.Termination(window)
    ending.signal_name = "SIGTERM"
    QTimer.singleShot(100, ending.end)
    QTimer.singleShot(5000, dismiss_question)  # (a test failing must not hang on it)
    assert not window.close()  # the question, dismissed: not the person's answer
    assert unsaved.read(unit) is None
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert window.project is None  # closed for good
    kept = unsaved.read(unit)
    assert kept.payload["parts"]["empathy"] == TYPED
    assert kept.why == "ava may not save this unit now"


def dismiss_question() -> None:
    question = QApplication.activeModalWidget()
    if question is not None:
        question.reject()
