"""A fact check of replies that hold no medical fact, done like a person: submitting with no
fact listed is refused and says what to do; ticking "No medical facts on either side" with the
mouse (or X from the keyboard) lets the answer be submitted, and the file holds the flag. The
box cannot be ticked while facts are listed; listing a fact unticks it (undo brings it back)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import open_window, show_kind, stored_answer, wait_saved


def test_ticking_no_facts_lets_the_check_be_submitted(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    box = editor.no_facts_box
    assert box.isVisible() and not box.isChecked()

    window.act_submit.trigger()  # nothing listed and nothing said: not done yet
    assert "no facts listed yet" in window.statusBar().currentMessage()
    assert "No medical facts on either side" in window.statusBar().currentMessage()

    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert box.isChecked() and editor.payload() == {"facts": [], "no_facts": True}
    assert "Fact-Recall 1.00" in editor.scores.text()
    assert "Fact-Precision 1.00" in editor.scores.text()
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert answer.status == "submitted"
    assert answer.payload == {"facts": [], "no_facts": True}

    again = open_window(qtbot, prefs, gui.path, "ava")  # shown ticked when opened again
    show_kind(again, "facts")
    assert again.editors["facts"].no_facts_box.isChecked()
    again.close()


def test_x_ticks_it_and_facts_and_the_box_exclude_each_other(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    original = editor.sides["original"]
    qtbot.keyClick(original.text_view, Qt.Key.Key_X)
    assert editor.no_facts_box.isChecked()
    qtbot.keyClick(original.text_view, Qt.Key.Key_X)
    assert not editor.no_facts_box.isChecked()

    qtbot.keyClicks(original.entry, "Go to the ER now")
    qtbot.keyClick(original.entry, Qt.Key.Key_Return)
    qtbot.mouseClick(editor.no_facts_box, Qt.MouseButton.LeftButton)  # refused: a fact is listed
    assert not editor.no_facts_box.isChecked()
    assert "remove them" in editor.notice.text()
    # said in the status bar too: the notice is below the part of the page in view on a
    # laptop screen, where X seemed to do nothing
    assert "remove them" in window.statusBar().currentMessage()

    original.table.setCurrentCell(0, 1)
    qtbot.keyClick(original.table, Qt.Key.Key_Delete)
    qtbot.keyClick(original.table, Qt.Key.Key_X)
    assert editor.no_facts_box.isChecked()
    original.entry.setFocus()  # (keys go where the focus is: the box clicked last had it)
    qtbot.keyClicks(original.entry, "Come back Friday")  # listing a fact unticks it
    qtbot.keyClick(original.entry, Qt.Key.Key_Return)
    assert not editor.no_facts_box.isChecked()
    window.act_undo.trigger()
    assert editor.no_facts_box.isChecked() and editor.state["original"] == []
    wait_saved(qtbot, window)
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert answer.status == "draft" and answer.payload == {"facts": [], "no_facts": True}
