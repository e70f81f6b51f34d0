"""The match editor for a screen reader and without colour: its sentence lists are named in
words, each theme drop-down says which sentence it is for and what it holds in a way Linux's
screen readers (AT-SPI) read too, and this sentence's match is told from the other matches by
more than a darker shade, in every colour scheme."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QTextCursor, QTextFormat
from ui_support import open_window, show_kind

from portalreview.tasks.common import colours
from portalreview.ui.main_window import apply_color_scheme

# What only colours a format; every other property is a cue that is not colour.
COLOUR_PROPERTIES = {
    QTextFormat.Property.BackgroundBrush,
    QTextFormat.Property.ForegroundBrush,
    QTextFormat.Property.TextUnderlineColor,
}


def test_the_sentence_lists_are_named_in_words(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    names = {
        QAccessible.queryAccessibleInterface(table).text(QAccessible.Text.Name)
        for table in (editor.ref_table, editor.draft_table)
    }
    assert names == {
        "Sentences of the reference response (the clinician's)",
        "Sentences of the draft",
    }


def test_each_theme_drop_down_says_its_sentence_and_its_theme(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    themes = {theme.id: theme.name for theme in editor.catalogs.themes}
    for table, which in ((editor.ref_table, "reference"), (editor.draft_table, "draft")):
        for row, sentence_id in enumerate(table.sentence_ids, start=1):
            box = table.theme_boxes[sentence_id]
            iface = QAccessible.queryAccessibleInterface(box)
            # Windows, macOS; each side's own (both said "Theme of sentence 1")
            assert box.accessibleName() == f"Theme of {which} sentence {row}"
            # Linux names a drop-down by its text: words, not a dash
            assert iface.text(QAccessible.Text.Name) == "no theme"
            labels = [
                other.text(QAccessible.Text.Name)
                for other, _relation in iface.relations(QAccessible.RelationFlag.Label)
            ]
            assert labels == [f"Theme of {which} sentence {row}"]
            description = iface.text(QAccessible.Text.Description)
            assert description == f"Theme of {which} sentence {row}: none"
    first = editor.draft_table.theme_boxes[editor.draft_table.sentence_ids[0]]
    theme = next(iter(themes))
    first.setCurrentIndex(first.findData(theme))
    described = QAccessible.queryAccessibleInterface(first).text(QAccessible.Text.Description)
    assert described == f"Theme of draft sentence 1: {themes[theme]}"
    first.setCurrentIndex(0)
    assert first.accessibleDescription() == "Theme of draft sentence 1: none"


def select(view, start: int, end: int) -> None:
    cursor = view.textCursor()
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    view.setTextCursor(cursor)


@pytest.mark.parametrize("scheme", ["light", "dark", "high_contrast"])
def test_this_sentence_s_match_differs_from_the_others_by_more_than_colour(
    qtbot, gui, prefs, scheme
):
    window = open_window(qtbot, prefs, gui.path, "ava")
    apply_color_scheme(scheme)
    show_kind(window, "match")
    editor = window.editors["match"]
    text = editor.draft.text
    first, second = text.split(". ")[:2]
    select(editor.draft_view, 0, len(first))
    editor.match_selection()  # sentence 1
    start = len(first) + 2
    select(editor.draft_view, start, start + len(second))
    editor.match_selection()  # sentence 2
    editor.ref_table.setCurrentCell(0, 1)  # back to sentence 1
    assert editor.current == editor.reference.sentences[0].id

    def cues(selection) -> dict:
        props = selection.format.properties()
        return {k: v for k, v in props.items() if k not in COLOUR_PROPERTIES}

    shade = colours.mark("matched_current")
    tinted = [s for s in editor.draft_view.extraSelections() if s.format.background().style()]
    this_match = [s for s in tinted if s.format.background().color() == shade]
    others = [s for s in tinted if s.cursor.selectionStart() == start]
    assert [s.cursor.selectionStart() for s in this_match] == [0] and others
    assert all(cues(a) != cues(b) for a in this_match for b in others)
    apply_color_scheme("light")


def test_undoing_a_decision_goes_back_to_its_sentence(qtbot, gui, prefs):
    """After X then Ctrl+Z the decision was undone but the view stayed on the next sentence, so
    the next M landed there."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    assert len(editor.reference.sentences) > 1
    first = editor.current
    editor.mark_no_match()
    assert editor.current != first  # on to the next sentence
    window.act_undo.trigger()
    assert first not in editor.state["decisions"] and editor.current == first
    window.act_redo.trigger()
    assert editor.state["decisions"][first] == [] and editor.current == first


def test_tab_follows_the_page(qtbot, gui, prefs):
    """Qt's order was the order the widgets were made: the draft before the reference's list,
    and every drop-down after both lists."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    expected = [
        editor.ref_table,
        *editor.ref_table.theme_boxes.values(),
        editor.draft_view,
        editor.match_button,
        editor.no_match_button,
        editor.clear_button,
        editor.draft_table,
        *editor.draft_table.theme_boxes.values(),
    ]
    walked = [expected[0]]
    while len(walked) < len(expected):
        walked.append(walked[-1].nextInFocusChain())
        while not walked[-1].focusPolicy() & Qt.FocusPolicy.TabFocus:  # (a holder, a viewport)
            walked[-1] = walked[-1].nextInFocusChain()
    assert walked == expected
