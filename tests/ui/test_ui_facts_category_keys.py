"""Check facts' keyboard help names the category keys the study's codebook really has: after
the PI extended it past seed 004's six categories, the help still said "1-6" (found by an
explorer, x_emp repro_facts_extended_categories)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel
from ui_support import open_window, shortcuts_shown, show_kind

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.facts.editor import category_keys


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (0, ""),
        (1, ", 1 error category"),
        (6, ", 1-6 error category"),
        (9, ", 1-9 error category"),
        (10, ", 1-9 error category (10: the fact's drop-down)"),
        (12, ", 1-9 error category (10-12: the fact's drop-down)"),
    ],
)
def test_category_keys_name_one_digit_per_category(count, words):
    assert category_keys(count) == words


def _extend_categories(path, count: int) -> None:
    extension = {
        "error_categories": [
            {"id": f"extra{i}", "name": f"Extra category {i}", "definition": f"Extra {i}."}
            for i in range(7, 7 + count)
        ]
    }
    with Project.open(path) as project:
        StudyService(project).extend_catalogs(extension)


def _help_texts(window) -> tuple[str, str]:
    """The keyboard help under the fact lists, and what F1 says."""
    editor = window.editors["facts"]
    label = next(x for x in editor.findChildren(QLabel) if x.objectName() == "keyHelp")
    return label.text(), shortcuts_shown(window)


def test_the_help_follows_a_codebook_extended_past_six_categories(qtbot, gui, prefs):
    _extend_categories(gui.path, 3)  # nine in all
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    on_screen, f1 = _help_texts(window)
    assert "1-9 error category" in on_screen and "1-9 error category" in f1
    assert "1-6" not in on_screen + f1
    editor = window.editors["facts"]
    editor.add_fact("original", "Go to the ER now.")
    table = editor.sides["original"].table
    table.setFocus()
    table.setCurrentCell(0, 1)
    qtbot.keyClick(table, Qt.Key.Key_9)  # the key the help names works
    assert editor.state["original"][0]["error_category"] == "extra9"
    window.close()


def test_the_help_of_the_seed_codebook_names_six_keys(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    on_screen, f1 = _help_texts(window)
    assert "0 not judged, 1-6 error category, F2 edit" in on_screen
    assert "0 not judged, 1-6 error category, F2 edit" in f1
    window.close()
