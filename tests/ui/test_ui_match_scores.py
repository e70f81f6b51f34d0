"""The match editor's live score line says "—" for a figure its metric leaves undefined (a
denominator of 0, as ``metrics.edit_f1`` defines it), not 0.00: a fresh unit read "P 0.00,
R 0.00 · Theme Edit-F1 0.00" with no sentence decided and no theme on either side."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import open_window, show_kind


def test_undefined_scores_read_as_a_dash_until_there_is_something_to_count(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    fresh = editor.scores.text()
    # nothing decided: EM = EA = 0, so recall is 0/0; the draft's 3 sentences are ED, so
    # precision (0/3) and F1 (2EM / (2EM + ED + EA) = 0/3) are defined
    assert "EM 0  EA 0  ED 3" in fresh
    assert "Content Edit-F1 0.00 (P 0.00, R —)" in fresh
    assert "Theme Edit-F1 —" in fresh  # no theme on either side: TP = FP = FN = 0
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)  # sentence 1: NO MATCH, an EA
    editor.ref_table.setCurrentCell(0, 1)
    qtbot.keyClick(editor.ref_table, Qt.Key.Key_1)  # a reference theme: one FN
    counted = editor.scores.text()
    assert "(P 0.00, R 0.00)" in counted and "Theme Edit-F1 0.00" in counted
    window.close()
