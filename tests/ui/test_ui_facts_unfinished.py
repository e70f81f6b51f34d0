"""Fact checks left in the middle of typing, done like a person: a fact's wording corrected in
its cell (F2) without Enter, or a new fact typed in the box without Enter, when the clinician
submits (Ctrl+Enter), goes to the next unit (Alt+Right) or closes the window. What was typed is
saved with the unit it was typed for, never with the next one, and never lost."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService

NEW = "Go to the ER now, do not drive"
TYPED = "ER visit advised today"


def add_second_facts_unit(gui) -> int:
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        ids = gui.ids
        unit_set = svc.create_unit_set("facts 2", "facts")
        unit = svc.add_unit(unit_set, ids.case1, response_id=ids.original, response_b_id=ids.edited)
        svc.assign(unit, ids.ava)
    return unit


def open_first_facts_unit(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    assert window.queue.select_unit(gui.ids.units["facts"])
    return window, window.editors["facts"]


def leave(qtbot, window, widget, how: str) -> None:
    """Submit, go on or close the way a person does, the focus still in ``widget``."""
    if how == "submit":
        qtbot.keyClick(widget, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    elif how == "next unit":
        qtbot.keyClick(widget, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    else:
        window.close()


@pytest.mark.parametrize("how", ["submit", "next unit", "close"])
def test_a_fact_reworded_in_its_cell_is_saved_without_enter(qtbot, gui, prefs, how):
    add_second_facts_unit(gui)
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    qtbot.keyClicks(side.entry, "Go to the ER")
    qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    editor.set_entailed("original", 0, True)
    wait_saved(qtbot, window)
    side.table.setFocus()
    side.table.setCurrentCell(0, 1)
    qtbot.keyClick(side.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    assert isinstance(cell, QLineEdit) and cell is not side.entry  # the cell's editor
    cell.selectAll()
    qtbot.keyClicks(cell, NEW)  # and no Enter

    leave(qtbot, window, cell, how)
    if how == "next unit":
        assert window.session.unit.unit_id != gui.ids.units["facts"]
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in answer.payload["facts"]] == [NEW]
    assert answer.status == ("submitted" if how == "submit" else "draft")


@pytest.mark.parametrize("how", ["next unit", "close"])
def test_a_new_fact_typed_without_enter_stays_with_its_unit(qtbot, gui, prefs, how):
    second = add_second_facts_unit(gui)
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    qtbot.keyClicks(side.entry, TYPED)  # and no Enter

    leave(qtbot, window, side.entry, how)
    if how == "next unit":
        assert window.session.unit.unit_id == second
        assert side.entry.text() == "" and editor.sides["edited"].entry.text() == ""
        qtbot.keyClick(side.entry, Qt.Key.Key_Return)  # an empty box adds nothing
        assert editor.payload()["facts"] == []
    window.close()
    first = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in first.payload["facts"]] == [TYPED]
    assert first.status == "draft"  # the typed fact is not judged yet
    assert stored_answer(gui.path, second, "ava") is None


def test_submitting_with_a_new_fact_typed_keeps_the_unit_to_judge_it(qtbot, gui, prefs):
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    qtbot.keyClicks(side.entry, "Go to the ER")
    qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    editor.set_entailed("original", 0, True)
    qtbot.keyClicks(side.entry, TYPED)  # a second fact, no Enter

    leave(qtbot, window, side.entry, "submit")
    assert f"original fact 2 “{TYPED}”" in window.statusBar().currentMessage()
    assert window.session.unit.unit_id == gui.ids.units["facts"]
    assert side.table.rowCount() == 2 and side.entry.text() == ""
    wait_saved(qtbot, window)
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in answer.payload["facts"]] == ["Go to the ER", TYPED]
    assert answer.status == "draft"


def test_a_suggestion_shown_for_the_pair_keeps_the_fact_being_typed(qtbot, gui, prefs):
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["edited"]
    qtbot.keyClicks(side.entry, TYPED)
    fact = {"side": "original", "text": "Go to the ER", "entailed": True}
    editor.show_suggestion({"facts": [fact]})  # a model's answer arriving meanwhile
    assert side.entry.text() == TYPED
    # the suggestion's fact, and the one typed (saved with it, as leaving the unit enters it)
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER", TYPED]
    window.close()


def test_save_now_saves_the_wording_being_typed(qtbot, gui, prefs):
    """Ctrl+S ("Save now") enters a cell being edited, as Enter would, and saves it at once:
    it said "Saved" over the old wording."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    qtbot.keyClicks(side.entry, "Go to the ER")
    qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    wait_saved(qtbot, window)
    side.table.setFocus()
    side.table.setCurrentCell(0, 1)
    qtbot.keyClick(side.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    cell.selectAll()
    qtbot.keyClicks(cell, NEW)
    qtbot.keyClick(cell, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in answer.payload["facts"]] == [NEW]
    window.close()


def test_a_fact_typed_and_not_entered_is_autosaved(qtbot, gui, prefs):
    """It was saved only when the unit was left: killed meanwhile, the program lost it while
    the status bar said "Saved"."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    entry = window.editors["facts"].sides["original"].entry
    entry.setFocus()
    qtbot.keyClicks(entry, "Go to the ER now")  # no Enter
    qtbot.waitUntil(lambda: window.session.pending)
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in stored.payload["facts"]] == ["Go to the ER now"]
    assert entry.text() == "Go to the ER now"  # still in the box, to go on typing


def _reword_in_cell(qtbot, window, side, wording: str):
    """List "Go to the ER", let it save, then F2 on its cell and type ``wording`` (no Enter)."""
    qtbot.keyClicks(side.entry, "Go to the ER")
    qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    wait_saved(qtbot, window)
    return _type_in_cell(qtbot, side, side.table.rowCount() - 1, wording)


def _type_in_cell(qtbot, side, row: int, wording: str):
    """F2 on the fact in ``row`` and type ``wording`` over it (no Enter)."""
    side.table.setFocus()
    side.table.setCurrentCell(row, 1)
    qtbot.keyClick(side.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    assert isinstance(cell, QLineEdit) and cell is not side.entry
    cell.selectAll()
    qtbot.keyClicks(cell, wording)
    return cell


@pytest.mark.parametrize("side_name", ["original", "edited"])
def test_a_fact_being_reworded_in_its_cell_is_autosaved(qtbot, gui, prefs, side_name):
    """Its cell open (F2), the new wording was no part of the answer until Enter: killed
    meanwhile, the program lost it while the status bar said "Saved"."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    editor.add_fact("original", "Rest at home")
    side = editor.sides[side_name]
    cell = _reword_in_cell(qtbot, window, side, NEW)
    qtbot.waitUntil(lambda: window.session.pending)
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    expected = {"original": ["Rest at home", NEW], "edited": ["Rest at home", NEW]}[side_name]
    assert [f["text"] for f in stored.payload["facts"]] == expected
    assert [f["side"] for f in stored.payload["facts"]] == ["original", side_name]
    assert QApplication.focusWidget() is cell  # still open, to go on typing
    assert editor.state[side_name][-1]["text"] == "Go to the ER"  # entered only with Enter


def test_escape_in_a_reworded_cell_saves_the_old_wording_again(qtbot, gui, prefs):
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    cell = _reword_in_cell(qtbot, window, side, NEW)
    wait_saved(qtbot, window)
    qtbot.keyClick(cell, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: side.table.state() != side.table.State.EditingState)
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER"]
    qtbot.waitUntil(lambda: window.session.pending)
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["text"] for f in stored.payload["facts"]] == ["Go to the ER"]
    assert not editor.undo_stack.canRedo() and editor.undo_stack.count() == 1  # the listing


def test_a_cell_emptied_saves_the_old_wording(qtbot, gui, prefs):
    """A fact cannot be empty (Delete removes one): a cell being emptied keeps it."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    cell = _reword_in_cell(qtbot, window, side, "x")
    qtbot.keyClick(cell, Qt.Key.Key_Backspace)
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER"]
    qtbot.keyClick(cell, Qt.Key.Key_Return)  # entered after the key (a queued call)
    qtbot.waitUntil(lambda: "cannot be empty" in editor.notice.text())
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER"]
    window.close()


def _saved_texts(qtbot, window, gui) -> list[str]:
    qtbot.waitUntil(lambda: window.session.pending)
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    return [f["text"] for f in stored.payload["facts"]]


def test_undo_and_redo_after_a_fact_is_reworded_in_its_cell(qtbot, gui, prefs):
    """The autosaves while the cell is open add no undo steps: Enter makes one, which Ctrl+Z
    takes back (in the table, the answer and the project) and Ctrl+Y puts back."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    cell = _reword_in_cell(qtbot, window, side, NEW)
    assert _saved_texts(qtbot, window, gui) == [NEW]
    qtbot.keyClick(cell, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: side.table.state() != side.table.State.EditingState)
    assert editor.undo_stack.count() == 2  # listing it, rewording it
    side.table.setFocus()
    qtbot.keyClick(side.table, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert side.table.item(0, 1).text() == "Go to the ER"
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER"]
    assert _saved_texts(qtbot, window, gui) == ["Go to the ER"]
    qtbot.keyClick(side.table, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert side.table.item(0, 1).text() == NEW
    assert _saved_texts(qtbot, window, gui) == [NEW]
    window.close()


def test_ctrl_z_in_an_open_cell_undoes_its_typing_and_saves_that(qtbot, gui, prefs):
    """In the open cell Ctrl+Z takes back its typing a word at a time, as Edit > Undo does
    (the fact stays listed), and the wording it brings back is the one saved."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    cell = _reword_in_cell(qtbot, window, side, NEW)
    assert _saved_texts(qtbot, window, gui) == [NEW]
    qtbot.keyClick(cell, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert cell.text() == "Go to the ER now, do not "
    window.act_undo.trigger()
    assert cell.text() == "Go to the ER now, do "
    for _word in range(len(NEW.split())):
        if cell.text() == "Go to the ER":
            break
        qtbot.keyClick(cell, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert cell.text() == "Go to the ER"
    assert QApplication.focusWidget() is cell and editor.undo_stack.index() == 1  # the listing
    assert _saved_texts(qtbot, window, gui) == ["Go to the ER"]
    window.close()


def test_a_fact_judged_while_its_cell_is_open_keeps_the_wording_typed(qtbot, gui, prefs):
    """The fact's row shown again (its "Kept?" drop-down changed without taking the focus,
    once possible with the mouse wheel, which now turns only a focused drop-down) put the old
    wording back in the open cell over what was typed there, and that was saved."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    cell = _reword_in_cell(qtbot, window, side, NEW)
    side.entailed_boxes[0].setCurrentIndex(1)  # "Yes", the focus left in the cell
    assert side.entailed_boxes[0].currentData() is True  # (the judgement did change)
    assert QApplication.focusWidget() is cell and cell.text() == NEW
    assert [(f["text"], f["entailed"]) for f in editor.payload()["facts"]] == [(NEW, True)]
    assert _saved_texts(qtbot, window, gui) == [NEW]
    qtbot.keyClick(cell, Qt.Key.Key_Return)  # entered after the key (a queued call)
    qtbot.waitUntil(lambda: side.table.state() != side.table.State.EditingState)
    assert editor.state["original"] == [{"text": NEW, "entailed": True, "error_category": None}]
    window.close()


def test_a_fact_brought_back_while_a_cell_is_open_never_takes_its_wording(qtbot, gui, prefs):
    """A removal undone from the menu moves the facts down a row: the wording being typed for
    one is never entered for the fact brought back into its row (the cell closes, as Esc)."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    side = editor.sides["original"]
    editor.add_fact("original", "Rest at home")
    editor.add_fact("original", "Go to the ER")
    editor.remove_fact("original", 0)
    cell = _type_in_cell(qtbot, side, 0, NEW)  # over "Go to the ER", now the first row
    for _word in range(len(NEW.split())):  # the cell's typing first, a word at a time
        window.act_undo.trigger()
    assert side.table.state() == side.table.State.EditingState
    assert cell.text() == "Go to the ER"
    window.act_undo.trigger()  # "Rest at home" back in the first row
    assert side.table.state() != side.table.State.EditingState
    assert [f["text"] for f in editor.payload()["facts"]] == ["Rest at home", "Go to the ER"]
    assert side.table.item(0, 1).text() == "Rest at home"
    window.close()


def test_facts_listed_and_not_judged_give_no_figure_yet(qtbot, gui, prefs):
    """Five facts listed and none judged read "Fact-Recall 1.00 ... Fact-Precision 1.00 ... F1
    1.00", the figure seed 004 gives a pair with no facts at all."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    for fact in ("Rest at home", "Drink water", "Call if worse"):
        editor.add_fact("original", fact)
    editor.add_fact("edited", "Rest at home")
    shown = editor.scores.text()
    assert "Fact-Recall —" in shown and "Fact-Precision —" in shown and "F1 —" in shown
    editor.set_entailed("original", 0, False)  # one judged: lost
    shown = editor.scores.text()
    assert "Fact-Recall 0.00" in shown and "Fact-Precision —" in shown
    editor.set_entailed("edited", 0, True)
    assert "Fact-Precision 1.00" in editor.scores.text() and "F1 0.00" in editor.scores.text()
    window.close()


def test_an_incomplete_submission_names_the_unjudged_facts(qtbot, gui, prefs):
    """Side, number and the start of the wording of each fact not judged (the message only
    counted them); past five, the rest are counted."""
    window, editor = open_first_facts_unit(qtbot, gui, prefs)
    editor.add_fact("original", "Go to the ER now.")
    editor.set_entailed("original", 0, True)
    editor.add_fact("original", "Call 911 at once if the chest pain spreads to your arm or jaw.")
    editor.add_fact("edited", "You will be fine.")
    window.act_submit.trigger()
    message = window.statusBar().currentMessage()
    assert message == (
        "Saved as a draft, not submitted: not judged yet (Y or N in its list): "
        "original fact 2 “Call 911 at once if the chest…”, edited fact 1 “You will be fine.”"
    )
    for number in range(2, 7):
        editor.add_fact("edited", f"Fact {number}.")
    window.act_submit.trigger()
    assert window.statusBar().currentMessage().endswith("edited fact 4 “Fact 4.” and 2 more")
    window.close()
