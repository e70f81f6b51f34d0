"""The desktop app, driven like a person would: sign in, type theme boxes, rank by keyboard with
a tie, match by selecting draft text, edit a draft; then the file holds exactly those answers,
a restart shows them again, and another clinician sees none of them."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QComboBox, QPushButton
from ui_support import (
    answer_sign_in_dialog,
    drag_select,
    make_gui_study,
    open_window,
    preferences,
    show_kind,
    stored_answer,
    wait_saved,
)

from portalreview.store.project import Project
from portalreview.store.service import AccessError, StudyService
from portalreview.tasks.common.editor_base import TextBox

EMPATHY = "I am sorry you are hurting."
PLANNING = "Please go to the emergency room now."


def box(window, box_id: str) -> TextBox:
    return window.editors["respond"].findChild(TextBox, f"box_{box_id}")


def write_theme_guided(qtbot, window) -> None:
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    qtbot.keyClicks(box(window, "empathy"), EMPATHY)
    qtbot.keyClicks(box(window, "planning"), PLANNING)
    wait_saved(qtbot, window)
    window.act_submit.trigger()


def rank_by_keyboard(qtbot, window) -> list[int]:
    """Response A rank 1, response B rank 1 (a tie); A correct, B incorrect for C2."""
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_1, Qt.Key.Key_N):
        qtbot.keyClick(editor, key)
    qtbot.keyClick(editor, Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    return editor.order


def select_in_draft(qtbot, view, start: int, end: int) -> None:
    """Drag the mouse over the draft's characters ``start`` to ``end``."""
    drag_select(view, start, end)


def match_by_selection(qtbot, window, draft_text: str) -> tuple[int, int]:
    """Reference: "I am sorry to hear that." NO MATCH; "Please go to the emergency room now."
    matched by selecting it in the draft; "Do not drive yourself." NO MATCH; every sentence
    given a theme."""
    show_kind(window, "match")
    editor = window.editors["match"]
    start = draft_text.index(PLANNING)
    end = start + len(PLANNING)
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)  # sentence 1: NO MATCH
    select_in_draft(qtbot, editor.draft_view, start, end)
    cursor = editor.draft_view.textCursor()
    assert (cursor.selectionStart(), cursor.selectionEnd()) == (start, end)
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_M)  # sentence 2: the selection
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)  # sentence 3: NO MATCH
    # Themes by number keys (1 Empathy, 5 Planning, 9 Other), row after row.
    editor.ref_table.setCurrentCell(0, 1)
    for key in (Qt.Key.Key_1, Qt.Key.Key_5, Qt.Key.Key_5):
        qtbot.keyClick(editor.ref_table, key)
    editor.draft_table.setCurrentCell(0, 1)
    for _sentence in editor.draft.sentences:
        qtbot.keyClick(editor.draft_table, Qt.Key.Key_4)
    first = editor.draft_table.theme_boxes[editor.draft.sentences[0].id]
    first.setCurrentIndex(first.findData("other"))  # and one with the mouse's drop-down
    wait_saved(qtbot, window)
    assert "EM 1  EA 2" in editor.scores.text()
    window.act_submit.trigger()
    return start, end


def edit_the_draft(qtbot, window) -> str:
    show_kind(window, "respond")
    window.queue.jump_to_number(2)
    editor = window.editors["respond"]
    assert editor.mode == "edit_draft"
    qtbot.keyClick(editor.draft_box, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(editor.draft_box, " Call us tomorrow.")
    wait_saved(qtbot, window)
    assert "added 3" in editor.edit_hint.text()
    window.act_submit.trigger()
    return editor.draft_text + " Call us tomorrow."


def test_a_clinician_does_all_three_tasks_and_the_file_holds_exactly_that(qtbot, gui, prefs):
    answer_sign_in_dialog(qtbot, "ava")
    window = open_window(qtbot, prefs, gui.path, None)
    assert window.annotator_name == "ava"
    assert window.kinds[:3] == ["respond", "rank", "match"]

    write_theme_guided(qtbot, window)
    order = rank_by_keyboard(qtbot, window)
    draft = window.session.service.read_unit(gui.ids.units["match"]).responses[1].text
    start, end = match_by_selection(qtbot, window, draft)
    final = edit_the_draft(qtbot, window)
    window.close()

    respond = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert respond.status == "submitted"
    assert respond.payload == {
        "mode": "theme_guided",
        "parts": {"empathy": EMPATHY, "planning": PLANNING},
        "notes": "",
    }
    assert respond.active_seconds > 0

    rank = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert rank.status == "submitted"
    entries = {e["response_id"]: e for e in rank.payload["entries"]}
    assert entries[order[0]] == {
        "response_id": order[0],
        "rank": 1,
        "correct": True,
        "criteria": [],
    }
    assert entries[order[1]] == {
        "response_id": order[1],
        "rank": 1,
        "correct": False,
        "criteria": ["C2"],
    }

    match = stored_answer(gui.path, gui.ids.units["match"], "ava")
    assert match.status == "submitted"
    spans = [d["spans"] for d in match.payload["decisions"]]
    assert spans == [[], [[start, end]], []]
    themes = {t["sentence_id"]: t["theme"] for t in match.payload["themes"]}
    with Project.open(gui.path, read_only=True) as project:
        svc = StudyService(project)
        reference = [s.id for s in svc.sentences(response_id=gui.ids.reference)]
        draft = [s.id for s in svc.sentences(response_id=gui.ids.draft1)]
    expected = dict(zip(reference, ["empathy", "planning", "planning"], strict=True))
    expected |= {sid: "assessment" for sid in draft} | {draft[0]: "other"}
    assert themes == expected

    edited = stored_answer(gui.path, gui.edit_unit, "ava")
    assert edited.status == "submitted"
    assert edited.payload == {
        "mode": "edit_draft",
        "base_response_id": gui.ids.draft1,
        "final_text": final,
        "notes": "",
    }


def add_windows_draft_unit(gui, draft_text: str) -> int:
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        draft = svc.add_response(
            gui.ids.case2, "windows", draft_text, author_kind="model", author="m", source="m"
        )
        unit_set = svc.create_unit_set("windows", "respond")
        unit = svc.add_unit(unit_set, gui.ids.case2, response_id=draft)
        svc.assign(unit, gui.ids.ava)
    return unit


def test_a_draft_with_windows_line_breaks_submitted_untouched_is_stored_as_the_draft(
    qtbot, gui, prefs
):
    # from a file written on Windows (CRLF, a lone CR) by Notepad (a leading U+FEFF): the box
    # shows "\n" and no U+FEFF, but the clinician changed nothing
    draft = "\ufeffI am sorry you are unwell.\r\nPlease call the clinic.\rWe are here."
    unit = add_windows_draft_unit(gui, draft)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    assert window.queue.select_unit(unit)
    editor = window.editors["respond"]
    assert editor.draft_box.toPlainText() == draft[1:].replace("\r\n", "\n").replace("\r", "\n")
    qtbot.keyClick(editor.draft_box, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(editor.draft_box, "!")
    qtbot.keyClick(editor.draft_box, Qt.Key.Key_Backspace)  # typed and taken back
    window.act_submit.trigger()
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").payload["final_text"] == draft

    # an edit is stored as the box gives it back
    qtbot.keyClicks(editor.draft_box, " Bye.")
    wait_saved(qtbot, window)
    window.close()
    final = stored_answer(gui.path, unit, "ava").payload["final_text"]
    assert final == "I am sorry you are unwell.\nPlease call the clinic.\nWe are here. Bye."


def test_restarting_shows_the_answers_again(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    write_theme_guided(qtbot, window)
    order = rank_by_keyboard(qtbot, window)
    window.close()

    again = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(again, "respond")
    again.queue.jump_to_number(1)
    assert box(again, "empathy").toPlainText() == EMPATHY
    assert box(again, "planning").toPlainText() == PLANNING
    assert box(again, "logistics").toPlainText() == ""
    assert "2 of 2 done" not in again.queue.progress_label.text()
    assert "1 of 2 done" in again.queue.progress_label.text()
    show_kind(again, "rank")
    editor = again.editors["rank"]
    assert editor.order == order  # the same shuffled order for the same person
    assert editor.state["ranks"] == {order[0]: 1, order[1]: 1}
    assert editor.state["criteria"][order[1]] == ["C2"]


def test_a_second_clinician_cannot_see_the_first_ones_answers(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    write_theme_guided(qtbot, window)
    window.close()

    ben = open_window(qtbot, prefs, gui.path, "ben")
    show_kind(ben, "respond")
    ben.queue.jump_to_number(1)
    assert box(ben, "empathy").toPlainText() == ""
    assert all(item.status == "todo" for item in ben.queue.all_items)
    with pytest.raises(AccessError):
        ben.session.service.get_answer(gui.ids.units["respond"], annotator_id=gui.ids.ava)
    assert ben.work_of_action.isVisible() is False  # no "work of others" for a clinician


def test_undo_and_redo_round_trip_typing_and_ranks(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy = box(window, "empathy")
    qtbot.keyClicks(empathy, "Sorry")
    qtbot.keyClicks(box(window, "planning"), "Rest")
    window.act_undo.trigger()
    assert box(window, "planning").toPlainText() == ""
    window.act_undo.trigger()
    assert empathy.toPlainText() == ""
    window.act_redo.trigger()
    window.act_redo.trigger()
    assert (empathy.toPlainText(), box(window, "planning").toPlainText()) == ("Sorry", "Rest")
    qtbot.keyClick(empathy, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # the keys
    assert box(window, "planning").toPlainText() == ""
    qtbot.keyClick(
        empathy,
        Qt.Key.Key_Z,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    assert box(window, "planning").toPlainText() == "Rest"
    # Ctrl+Y too (it was listed twice where the platform's Redo keys hold it: Qt then called
    # it ambiguous and redid nothing)
    qtbot.keyClick(empathy, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(empathy, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert box(window, "planning").toPlainText() == "Rest"
    assert [k.toString() for k in window.act_redo.shortcuts()].count("Ctrl+Y") == 1
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, gui.ids.units["respond"], "ava").payload["parts"] == {
        "empathy": "Sorry",
        "planning": "Rest",
    }

    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_2)
    first = editor.order[0]
    assert editor.state["ranks"][first] == 2
    window.act_undo.trigger()
    assert editor.state["ranks"][first] is None
    window.act_redo.trigger()
    assert editor.state["ranks"][first] == 2


def test_undo_takes_back_the_last_typing_when_it_followed_on_in_an_earlier_box(
    qtbot, gui, prefs
):
    """Typing in box A, then B, then at the end of A again: Ctrl+Z takes back the last
    typing, in A (a word at a time). Qt merged the later typing into A's first step, under
    B's, so Ctrl+Z emptied B (perhaps out of view), and the next took all of A at once."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy, planning = box(window, "empathy"), box(window, "planning")
    qtbot.keyClicks(empathy, "Sorry.")
    qtbot.keyClicks(planning, "Rest.")
    empathy.setFocus()
    empathy.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClicks(empathy, " Call us.")
    qtbot.keyClick(empathy, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert (empathy.toPlainText(), planning.toPlainText()) == ("Sorry. Call ", "Rest.")
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert stored.payload["parts"] == {"empathy": "Sorry. Call ", "planning": "Rest."}
    window.act_undo.trigger()
    assert (empathy.toPlainText(), planning.toPlainText()) == ("Sorry.", "Rest.")
    window.act_undo.trigger()
    assert (empathy.toPlainText(), planning.toPlainText()) == ("Sorry.", "")
    window.act_undo.trigger()
    assert empathy.toPlainText() == ""
    for _ in range(4):
        window.act_redo.trigger()
    assert (empathy.toPlainText(), planning.toPlainText()) == ("Sorry. Call us.", "Rest.")


def _in_flag_dialog(qtbot, keys: list[tuple[Qt.Key, Qt.KeyboardModifier]], seen: dict) -> None:
    """When the flag dialog opens, type a note in it and press ``keys``, as a keyboard user
    does; ``seen`` records whether the dialog was still open afterwards (then it is cancelled,
    so that the test goes on)."""

    def act() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:
            QTimer.singleShot(30, act)
            return
        qtbot.keyClicks(QApplication.focusWidget(), "Dose unclear")
        for key, modifiers in keys:
            qtbot.keyClick(QApplication.focusWidget(), key, modifiers)
        seen["open"] = dialog.isVisible()
        if dialog.isVisible():
            dialog.reject()

    QTimer.singleShot(30, act)


NONE, CTRL = Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ControlModifier


@pytest.mark.parametrize(
    "keys",
    [[(Qt.Key.Key_Tab, NONE), (Qt.Key.Key_Return, NONE)], [(Qt.Key.Key_Return, CTRL)]],
    ids=["tab-to-flag-then-enter", "ctrl-enter"],
)
def test_flag_with_a_note_for_the_pi_from_the_keyboard(qtbot, gui, prefs, keys):
    """Qt's own multi-line input dialog kept Tab and Enter in its box: only the mouse, or two
    Shift+Tabs and Space, could flag (Shift+Tab and Enter cancelled)."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    seen: dict = {}
    _in_flag_dialog(qtbot, [*keys], seen)
    window.act_flag.trigger()
    assert seen == {"open": False}
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert (answer.flagged, answer.flag_note) == (True, "Dose unclear")
    assert "⚑" in window.queue.model.data(window.queue.model.index(0))
    _with_flag_dialog(qtbot, lambda d: d.findChild(QPushButton, "removeFlag").click())
    window.act_flag.trigger()  # again: the flag comes off from its dialog
    assert stored_answer(gui.path, gui.ids.units["respond"], "ava").flagged is False


def _with_flag_dialog(qtbot, do) -> dict:
    """When the flag dialog opens, note what it shows and call ``do(dialog)``."""
    seen: dict = {}

    def act() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:
            QTimer.singleShot(30, act)
            return
        seen["note"] = dialog.note()
        do(dialog)
        seen["open"] = dialog.isVisible()
        if dialog.isVisible():
            dialog.reject()

    QTimer.singleShot(30, act)
    return seen


def test_the_flag_key_on_a_flagged_unit_shows_its_note_before_anything_goes(qtbot, gui, prefs):
    """Ctrl+Shift+F on a flagged unit took the flag and its note for the PI off at once, with
    no undo and nowhere to read the note first (found by an explorer). It shows the note: Esc
    keeps both, the note can be changed, and the flag comes off with Remove the flag."""
    unit = gui.ids.units["respond"]
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.session.set_flag(True, "Response B stops the warfarin")
    assert window.act_flag.text() == "The &flag for the PI…"
    seen = _with_flag_dialog(qtbot, lambda d: qtbot.keyClick(d.box, Qt.Key.Key_Escape))
    qtbot.keyClick(window, Qt.Key.Key_F, CTRL | Qt.KeyboardModifier.ShiftModifier)
    assert seen == {"note": "Response B stops the warfarin", "open": False}
    answer = stored_answer(gui.path, unit, "ava")
    assert (answer.flagged, answer.flag_note) == (True, "Response B stops the warfarin")

    def add_to_it(dialog) -> None:
        qtbot.keyClicks(dialog.box, " (and the INR)")
        qtbot.keyClick(dialog.box, Qt.Key.Key_Return, CTRL)

    _with_flag_dialog(qtbot, add_to_it)
    window.act_flag.trigger()
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.flag_note == "Response B stops the warfarin (and the INR)"
    remove = _with_flag_dialog(qtbot, lambda d: d.findChild(QPushButton, "removeFlag").click())
    window.act_flag.trigger()
    assert remove["note"].endswith("(and the INR)")
    assert stored_answer(gui.path, unit, "ava").flagged is False
    assert window.act_flag.text() == "&Flag for the PI…"
    window.close()


def test_escape_in_the_flag_dialog_flags_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    seen: dict = {}
    _in_flag_dialog(qtbot, [(Qt.Key.Key_Escape, NONE)], seen)
    window.act_flag.trigger()
    assert seen == {"open": False}
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert answer is None or not answer.flagged


def test_submitting_an_incomplete_answer_keeps_it_as_a_draft(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_1)
    window.act_submit.trigger()
    answer = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert answer.status == "draft"
    assert "not ranked yet" in window.statusBar().currentMessage()


def test_drafts_are_shuffled_per_annotator_and_stable_for_one(qtbot, tmp_path):
    gui = make_gui_study(tmp_path, extra_rank_units=6)
    prefs = preferences(tmp_path)
    orders = {}
    for who in ("ava", "ben", "ava"):
        window = open_window(qtbot, prefs, gui.path, who)
        show_kind(window, "rank")
        seen = []
        for number in range(2, 8):  # the six five-draft units follow the first set's unit
            window.queue.jump_to_number(number)
            editor = window.editors["rank"]
            cards = [editor.cards_layout.itemAt(i).widget() for i in range(5)]
            assert [c.label for c in cards] == [f"Response {x}" for x in "ABCDE"]
            seen.append([c.response_id for c in cards])
        window.close()
        if who in orders:
            assert orders[who] == seen  # stable for one person across restarts
        orders[who] = seen
    assert orders["ava"] != orders["ben"]
    for a, b in zip(orders["ava"], orders["ben"], strict=True):
        assert sorted(a) == sorted(b)


def test_the_theme_boxes_follow_the_catalog_and_preview_composes(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    editor = window.editors["respond"]
    with Project.open(gui.path, read_only=True) as project:
        catalogs = StudyService(project).catalogs
    expected = [t.id for t in catalogs.themes] + [catalogs.notes_box.id]
    assert list(editor.boxes) == expected
    qtbot.keyClicks(box(window, "planning"), "Second.")
    qtbot.keyClicks(box(window, "empathy"), "First.")
    qtbot.keyClicks(box(window, "notes"), "Not sent to the patient.")
    assert editor.preview.toPlainText() == "First. Second."


def test_theme_labels_for_draft_sentences_are_saved(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    draft_first = editor.draft.sentences[0].id
    combo: QComboBox = editor.draft_table.theme_boxes[draft_first]
    combo.setCurrentIndex(combo.findData("assessment"))
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, gui.ids.units["match"], "ava")
    assert answer.payload["themes"] == [{"sentence_id": draft_first, "theme": "assessment"}]
    assert answer.status == "draft"
