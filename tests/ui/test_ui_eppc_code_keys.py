"""EPPC coding after the PI extended the codebook past nine codes (or a code past nine
subcodes): keys are 1-9 and Alt+1-9, so the tenth has no number in the list, no "Alt+10" on
its button, and the help says to click it (it showed "10" and "Alt+10", keys that do nothing)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QRadioButton
from ui_support import open_window, show_kind

from portalreview.store.project import Project
from portalreview.store.service import StudyService


def _extend_codes(path) -> None:
    subcodes = [
        {"id": f"sub{i}", "name": f"Subcode {i}", "definition": f"Sub {i}."} for i in range(1, 11)
    ]
    extension = {
        "eppc_codes": [
            {
                "id": "extra",
                "name": "Extra code",
                "definition": "A tenth code.",
                "subcodes": subcodes,
            }
        ]
    }
    with Project.open(path) as project:
        StudyService(project).extend_catalogs(extension)


def test_a_tenth_code_and_subcode_show_no_key_that_does_nothing(qtbot, gui, prefs):
    _extend_codes(gui.path)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    items = [editor.codes_list.item(row).text() for row in range(editor.codes_list.count())]
    assert len(items) == 10 and items[8].startswith("9  ") and items[9] == "Extra code"
    helps = [label.text() for label in editor.findChildren(QLabel)]
    assert any("the 10th on: click it" in text for text in helps)
    assert any("of this sentence (1-9, then click)" in text for text in helps)
    editor.codes_list.item(9).setCheckState(Qt.CheckState.Checked)  # clicked: no key
    buttons = [b.text() for b in editor.findChildren(QRadioButton) if b.isVisibleTo(editor)]
    assert "Alt+9  Subcode 9" in buttons and "Subcode 10" in buttons
    assert not any(text.startswith("Alt+10") for text in buttons)
    window.close()


def test_nine_codes_keep_their_numbers_and_help(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    assert editor.codes_list.item(8).text().startswith("9  ")
    helps = [label.text() for label in editor.findChildren(QLabel)]
    assert any(text.startswith("1-9 choose a code (again: remove it)") for text in helps)
    window.close()
