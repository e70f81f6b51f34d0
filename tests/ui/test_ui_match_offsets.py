"""Matching in a draft that holds emoji and a Windows line break, or starts with U+FEFF, driven
like a person would: Qt counts an emoji as two positions and "\\r\\n" as one and drops a
leading U+FEFF (a byte-order mark), the store counts characters of the Python string. The words
selected with the mouse (or with S) are the words stored, and the stored spans highlight the
same words again."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QTextDocument
from ui_support import drag_select, open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.offsets import TextOffsets

DRAFT = "Thanks for writing 🙏\r\nPlease go to the emergency room now. Call 911 if it gets worse 😟"
REFERENCE = "Please go to the emergency room now. Call 911 if it gets worse."
ER = "Please go to the emergency room now."
CALL = "Call 911 if it gets worse 😟"  # runs to the end of the draft


def add_emoji_match_unit(gui, draft_text: str = DRAFT) -> int:
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        ids = gui.ids
        ref = svc.add_response(ids.case1, "ref-e", REFERENCE, author_kind="clinician", author="a")
        draft = svc.add_response(
            ids.case1, "d-e", draft_text, author_kind="model", author="m", source="m"
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


def test_a_span_selected_in_a_draft_that_starts_with_a_bom_is_stored_as_the_words_selected(
    qtbot, gui, prefs
):
    # a draft read from a Notepad file (UTF-8 with BOM) by a script that kept the U+FEFF
    draft = "\ufeff" + REFERENCE
    unit = add_emoji_match_unit(gui, draft)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    assert window.queue.select_unit(unit)
    view = window.editors["match"].draft_view
    assert view.toPlainText() == REFERENCE  # Qt does not show (nor count) the U+FEFF

    mouse_select(view, "emergency room")
    qtbot.keyClick(view, Qt.Key.Key_M)
    mouse_select(view, "Please go")  # from the document's first position
    qtbot.keyClick(view, Qt.Key.Key_M)
    assert highlighted(view) >= {"emergency room", "Please go"}
    wait_saved(qtbot, window)
    window.close()

    decisions = stored_answer(gui.path, unit, "ava").payload["decisions"]
    assert [[draft[s:e] for s, e in d["spans"]] for d in decisions] == [
        ["emergency room"],
        ["Please go"],
    ]
    again = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(again, "match")
    assert again.queue.select_unit(unit)
    assert highlighted(again.editors["match"].draft_view) >= {"emergency room", "Please go"}


@pytest.mark.parametrize(
    "text",
    [
        "\ufeffab c",  # dropped by setPlainText
        "\ufeff\ufeffab",  # only the first one is dropped
        "a\ufeffb c",  # kept further in
        "\ufeff\r\nab 😀 c",
        "\ufeff",
        "a\r\nb\rc\u2028d 😀",
    ],
)
def test_offsets_agree_with_a_qt_document(qtbot, text):
    document = QTextDocument()
    document.setPlainText(text)
    offsets = TextOffsets(text)
    assert offsets.qt_length == document.characterCount() - 1
    inside_crlf = {i for i in range(1, len(text)) if text[i - 1 : i + 1] == "\r\n"}
    bounds = [i for i in range(len(text) + 1) if i not in inside_crlf]
    for start in bounds:
        for end in (e for e in bounds if e > start):
            cursor = QTextCursor(document)
            cursor.setPosition(offsets.to_qt(start))
            cursor.setPosition(offsets.to_qt(end), QTextCursor.MoveMode.KeepAnchor)
            assert cursor.selectedText() == as_shown(text, start, end)
            if cursor.hasSelection():  # selected back: without the U+FEFF Qt dropped
                assert offsets.span_from_qt(*offsets.span_to_qt(start, end)) == (
                    max(start, hidden(text)),
                    end,
                )


def hidden(text: str) -> int:
    """Characters at the start of ``text`` that setPlainText drops: a leading U+FEFF."""
    return 1 if text.startswith("\ufeff") else 0


def as_shown(text: str, start: int, end: int) -> str:
    """``text[start:end]`` as a QTextCursor's selectedText gives it."""
    words = text[max(start, hidden(text)) : end]
    for line_break in ("\r\n", "\r", "\n"):
        words = words.replace(line_break, "\u2029")
    return words
