"""File > Sign in as someone else…: the sign-in dialog is shown over the study open now, and
only a person chosen there closes it and opens it again as them; Cancel leaves everything as
it was (it closed the study and left the clinician on the welcome page)."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from ui_support import answer_sign_in_dialog, open_window, show_kind, stored_answer

from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.sign_in import SignInDialog

TYPED = "I am sorry you are hurting."


def cancel_sign_in_dialog(seen: list[str]) -> None:
    """Press Cancel in the sign-in dialog when it appears; ``seen`` gets the names it offers."""

    def cancel() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, SignInDialog):
            QTimer.singleShot(50, cancel)
            return
        seen.extend(dialog.list.item(row).text() for row in range(dialog.list.count()))
        dialog.reject()

    QTimer.singleShot(50, cancel)


def type_in_respond(qtbot, window) -> TextBox:
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, TYPED)
    return box


def test_cancel_leaves_the_study_open_and_the_work_on_screen(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = type_in_respond(qtbot, window)
    project, session = window.project, window.session
    offered: list[str] = []
    cancel_sign_in_dialog(offered)
    window.act_switch_user.trigger()
    qtbot.waitUntil(lambda: bool(offered), timeout=20000)
    assert any("Dr. Ben" in name for name in offered)
    qtbot.wait(200)  # (the old code closed the study on Cancel, after reopening it)
    assert window.project is project and window.session is session
    assert window.annotator_name == "ava" and window.kind == "respond"
    assert box.toPlainText() == TYPED
    window.close()


def test_choosing_someone_saves_the_work_then_signs_them_in(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    type_in_respond(qtbot, window)
    answer_sign_in_dialog(qtbot, "ben")
    window.act_switch_user.trigger()
    qtbot.waitUntil(lambda: window.session is not None and window.annotator_name == "ben")
    typed = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert typed is not None and typed.payload["parts"]["empathy"] == TYPED
    window.close()
