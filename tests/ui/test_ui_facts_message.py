"""The fact check shows the patient's message above the two replies (seed 004, Section 3.1: the
expert received the original patient message with the original and the edited response; an
error category such as "Adds Unnecessary Advice", advice unrelated to the patient's query, is
judged against it). The message folds away, giving its room to the replies."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from ui_support import open_window, show_kind

from portalreview.store.service import CaseView
from portalreview.tasks.facts.editor import MessagePanel


def test_the_patient_s_message_is_shown_above_the_replies(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    panel = editor.case_panel
    message = window.session.unit.cases[0].message
    assert "crushing chest pain" in message
    assert panel.isVisible() and panel.message.isVisible()
    assert panel.message.text() == message
    assert panel.sections == {}  # the message alone: seed 004's experts saw no chart
    original = editor.sides["original"].text_view
    below = original.mapTo(editor, QPoint(0, 0)).y()
    assert panel.mapTo(editor, QPoint(0, panel.height())).y() <= below
    window.close()


def test_folding_the_message_gives_its_room_to_the_replies(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    section = editor.case_panel.message_section
    message_height, replies_height = editor.reading.sizes()
    qtbot.mouseClick(section.toggle, Qt.MouseButton.LeftButton)
    assert not editor.case_panel.message.isVisible()
    folded, taller = editor.reading.sizes()
    assert folded < message_height and taller > replies_height
    qtbot.mouseClick(section.toggle, Qt.MouseButton.LeftButton)
    assert editor.case_panel.message.isVisible()
    assert editor.reading.sizes() == [message_height, replies_height]
    window.close()


def test_a_message_that_fits_its_panel_does_not_scroll_on_through_blank_space(qtbot):
    """A word-wrapped label asks, at its narrowest, for more height than it takes at the
    panel's width: the panel's contents are as tall as their text at that width."""
    panel = MessagePanel()
    qtbot.addWidget(panel)
    sentence = "I have had a dull ache in my left knee since the long walk on Sunday. "
    case = CaseView(1, "c1", sentence * 4, {}, "", None, None, ())
    panel.show_case(case)
    panel.resize(1100, panel.sizeHint().height())
    panel.show()
    qtbot.waitUntil(lambda: panel.message.height() > 0)
    qtbot.wait(50)
    text = panel.widget().heightForWidth(panel.viewport().width())
    assert text <= panel.viewport().height()  # the message is whole in the panel...
    assert panel.verticalScrollBar().maximum() == 0  # ...and there is nothing to scroll to
