"""When the project file cannot be read any more after it was opened (its drive went away, the
file was cut short), the person is told in words: opening another unit keeps the list and the
editor in step (the unit highlighted is the unit shown, and keeps what was typed), and the
dashboard's figures and export say why they failed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from ui_support import make_gui_study, open_window, show_kind

from portalreview.store.errors import ReadFailed
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.dashboard import Dashboard, open_tool

DRIVER_WORDS = ("sqlalche.me", "OperationalError", "DatabaseError", "sqlite3")


def folder_gone(window) -> str:
    path = window.project.path
    shutil.rmtree(path.parent)  # the network drive with the study went away
    window.project._engine.dispose()  # a new connection, as after the drive's hiccup
    return "the drive it is on"


def cut_short(window) -> str:
    path = window.project.path
    window.project._engine.dispose()  # the last connection merges the WAL into the file
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    return "is damaged"


TROUBLES = {"folder gone": folder_gone, "cut short": cut_short}


@pytest.fixture
def on_drive(tmp_path) -> Path:
    """The GUI study in a folder of its own (the "drive")."""
    (tmp_path / "drive").mkdir()
    return make_gui_study(tmp_path / "drive").path


@pytest.fixture
def warned(monkeypatch) -> list[str]:
    shown: list[str] = []
    for name in ("warning", "critical", "information"):
        monkeypatch.setattr(
            QMessageBox, name, staticmethod(lambda *args, **_kw: shown.append(args[2]))
        )
    return shown


def assert_worded(message: str, words: str) -> None:
    assert words in message and "The project file gui.prproj" in message, message
    assert not any(raw in message for raw in DRIVER_WORDS), message


def _first_respond_unit(window) -> int:
    show_kind(window, "respond")
    assert len(window.queue.all_items) >= 2
    window.queue.jump_to_number(1)
    return window.session.unit.unit_id


@pytest.mark.parametrize("trouble", list(TROUBLES))
def test_the_next_unit_that_cannot_be_read_leaves_the_unit_shown_highlighted(
    qtbot, on_drive, prefs, warned, trouble
):
    window = open_window(qtbot, prefs, on_drive, "ava")
    first = _first_respond_unit(window)
    words = TROUBLES[trouble](window)
    window.step(1)
    assert len(warned) == 1
    assert warned[0].startswith("Could not show this unit:")
    assert_worded(warned[0], words)
    assert warned[0].endswith("Unit 1 stays on screen.")
    assert window.session.unit.unit_id == first  # the editor shows unit 1...
    assert window.queue.current_unit() == first  # ...and the list highlights it
    assert window.editors["respond"].isEnabled()


def test_what_was_typed_stays_on_the_unit_shown_when_the_drive_goes(qtbot, on_drive, prefs, warned):
    window = open_window(qtbot, prefs, on_drive, "ava")
    first = _first_respond_unit(window)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, "Typed before the drive went.")
    folder_gone(window)
    window.step(1)  # leaving saves first: that fails, so the unit stays, with the text
    assert window.session.pending and window.save_label.text() == "⚠ Not saved"
    status = window.save_problem.text()
    assert status.startswith("⚠ Not saved:") and not any(raw in status for raw in DRIVER_WORDS)
    assert warned and warned[-1].count("stays on screen") == 1  # said once
    assert window.session.unit.unit_id == first and window.queue.current_unit() == first
    assert box.toPlainText() == "Typed before the drive went."


def test_a_unit_of_another_kind_that_cannot_be_read_leaves_nothing_highlighted(
    qtbot, on_drive, prefs, warned, monkeypatch
):
    window = open_window(qtbot, prefs, on_drive, "ava")
    first = _first_respond_unit(window)

    def unreadable(_unit_id, **_how):
        raise ReadFailed("The project file gui.prproj cannot be read: the drive it is on...")

    monkeypatch.setattr(window.session.service, "read_unit", unreadable)
    show_kind(window, "rank")  # its list is read, then its first unit cannot be
    assert warned and warned[-1].endswith("No unit is shown: choose one in the list to try again.")
    assert window.queue.current_unit() is None  # nothing highlighted...
    rank_editor = window.editors["rank"]
    assert not rank_editor.isEnabled()  # ...and nothing to type into that no save would keep
    assert window.session.unit.unit_id == first  # the respond unit is still the open one
    monkeypatch.undo()
    window.queue.select_row(0)  # the file is back: choosing a unit shows it
    assert window.session.unit.kind == "rank" and rank_editor.isEnabled()
    assert window.queue.current_unit() == window.session.unit.unit_id


def test_another_kinds_list_that_cannot_be_read_is_said_in_words(qtbot, on_drive, prefs, warned):
    window = open_window(qtbot, prefs, on_drive, "ava")
    _first_respond_unit(window)
    folder_gone(window)
    show_kind(window, "rank")  # its list cannot be read: said, and nothing listed
    assert warned and warned[0].startswith("Could not read the list of units:")
    assert_worded(warned[0], "the drive it is on")
    assert window.queue.all_items == [] and window.queue.current_unit() is None
    window.study_changed()  # the kinds' tabs are read again: said too
    assert warned[-1].startswith("Could not read the kinds of work:")


def _dashboard(qtbot, window) -> Dashboard:
    dashboard = open_tool(window)  # Tools > Agreement dashboard
    qtbot.waitUntil(
        lambda: dashboard.computed is not None and not dashboard.loading, timeout=60_000
    )
    return dashboard


@pytest.mark.parametrize("trouble", list(TROUBLES))
def test_the_dashboard_says_in_words_why_it_could_not_compute_or_export(
    qtbot, on_drive, prefs, warned, tmp_path, trouble
):
    window = open_window(qtbot, prefs, on_drive, "pat")
    dashboard = _dashboard(qtbot, window)
    words = TROUBLES[trouble](window)
    dashboard.refresh()
    qtbot.waitUntil(lambda: not dashboard.loading, timeout=60_000)
    status = dashboard.status.text()
    assert status.startswith("Could not compute the figures: ")
    assert_worded(status, words)
    out = tmp_path / "out.xlsx"
    dashboard.write_workbook_to(out)  # the figures still shown, exported
    qtbot.waitUntil(lambda: dashboard.export_worker is None, timeout=60_000)
    assert warned and warned[-1].startswith(f"Could not write {out}:")
    assert_worded(warned[-1], words)
    assert not out.exists()
