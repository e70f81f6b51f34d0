"""Matching in a draft that holds emoji and a Windows line break, driven like a person would:
Qt counts an emoji as two positions and "\\r\\n" as one, the store counts characters of the
Python string. The words selected with the mouse (or with S) are the words stored, and the
stored spans highlight the same words again."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import drag_select, open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService

DRAFT = "Thanks for writing 🙏\r\nPlease go to the emergency room now. Call 911 if it gets worse 😟"
REFERENCE = "Please go to the emergency room now. Call 911 if it gets worse."
ER = "Please go to the emergency room now."
CALL = "Call 911 if it gets worse 😟"  # runs to the end of the draft


def add_emoji_match_unit(gui) -> int:
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        ids = gui.ids
        ref = svc.add_response(ids.case1, "ref-e", REFERENCE, author_kind="clinician", author="a")
        draft = svc.add_response(
            ids.case1, "d-e", DRAFT, author_kind="model", author="m", source="m"
        )
        unit_set = svc.create_unit_set("emoji match", "match")
        unit = svc.add_unit(unit_set, ids.case1, response_id=ref, response_b_id=draft)
        svc.assign(unit, ids.ava)
    return unit


def mouse_select(view, words: str) -> None:
    """Drag the mouse over ``words`` where the document shows them (Qt's own positions)."""
    found = view.document().find(words)
    assert found.selectedText() == words
    drag_select(view, found.selectionStart(), found.selectionEnd())
    assert view.textCursor().selectedText() == words


def highlighted(view) -> set[str]:
    return {s.cursor.selectedText() for s in view.extraSelections() if s.cursor.hasSelection()}


def test_a_span_selected_after_an_emoji_is_stored_as_the_words_selected(qtbot, gui, prefs):
    unit = add_emoji_match_unit(gui)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    assert window.queue.select_unit(unit)
    editor = window.editors["match"]
    view = editor.draft_view
    assert editor.draft.text == DRAFT

    mouse_select(view, ER)
    qtbot.keyClick(view, Qt.Key.Key_M)  # reference sentence 1
    mouse_select(view, CALL)
    qtbot.keyClick(view, Qt.Key.Key_M)  # reference sentence 2: up to the end of the draft
    assert highlighted(view) >= {ER, CALL}
    # wavy: not matched, so deleted; "\r\n" is one paragraph separator in the view
    assert "Thanks for writing 🙏\u2029" in highlighted(view)
    wait_saved(qtbot, window)
    window.close()

    decisions = stored_answer(gui.path, unit, "ava").payload["decisions"]
    assert [[DRAFT[s:e] for s, e in d["spans"]] for d in decisions] == [[ER], [CALL]]
    # reopened, the stored spans highlight the same words again
    again = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(again, "match")
    assert again.queue.select_unit(unit)
    assert highlighted(again.editors["match"].draft_view) >= {ER, CALL}


def test_s_selects_the_draft_sentence_after_an_emoji(qtbot, gui, prefs):
    unit = add_emoji_match_unit(gui)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    assert window.queue.select_unit(unit)
    view = window.editors["match"].draft_view
    cursor = view.document().find("911")
    cursor.clearSelection()
    view.setTextCursor(cursor)
    qtbot.keyClick(view, Qt.Key.Key_S)
    assert view.textCursor().selectedText() == CALL
    cursor = view.document().find("emergency")
    cursor.clearSelection()
    view.setTextCursor(cursor)
    qtbot.keyClick(view, Qt.Key.Key_S)
    assert view.textCursor().selectedText() == ER
    window.close()
