"""The Study set-up window counts the progress and finds the hard pairs in the background: on
10,000 cases it froze the program for seconds when it opened, its window blank."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from PySide6.QtWidgets import QApplication
from shiboken6 import isValid
from sqlalchemy import event
from ui_support import held_off_gui_thread, make_gui_study, open_window, preferences

from portalreview.store import study_setup as setup
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import study_setup_dialog, workers
from portalreview.ui.study_setup_dialog import StudySetupDialog, table_rows


def gui_study_with_units(folder, n: int):
    """The GUI study, with ``n`` more respond units handed to ava and ben, ava's answered."""
    folder.mkdir()
    gui = make_gui_study(folder)
    with Project.open(gui.path) as project:
        svc, ids = StudyService(project), gui.ids
        set_id = svc.create_unit_set(f"respond x{n}", "respond")
        for _ in range(n):
            unit = svc.add_unit(set_id, ids.case1)
            svc.assign(unit, ids.ava)
            svc.assign(unit, ids.ben)
            payload = {"mode": "theme_guided", "parts": {"planning": "Call 911."}}
            svc.save_answer(unit, payload, status="submitted", annotator_id=ids.ava)
    return gui


def wait_read(qtbot, dialog: StudySetupDialog) -> None:
    qtbot.waitUntil(lambda: not dialog.loading, timeout=20_000)


@contextlib.contextmanager
def counted_statements(project: Project) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(project._engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(project._engine, "before_cursor_execute", count)


def opening_statements(qtbot, folder, n: int) -> list[str]:
    """The SQL statements the window runs from opening to its progress shown."""
    gui = gui_study_with_units(folder, n)
    window = open_window(qtbot, preferences(folder), gui.path, "pat")
    with counted_statements(window.project) as statements:
        dialog = study_setup_dialog.open_tool(window)
        wait_read(qtbot, dialog)
    assert any(row[0] == f"respond x{n}" for row in table_rows(dialog.progress_table))
    window.close()
    return statements


def test_the_window_reads_as_many_statements_for_many_cases_as_for_few(qtbot, tmp_path):
    few = opening_statements(qtbot, tmp_path / "few", 2)
    many = opening_statements(qtbot, tmp_path / "many", 30)
    assert len(many) == len(few), "the window's statements grow with the number of units"


def held_progress(monkeypatch):
    """``study_progress`` held back until the event is set, when it runs off the GUI thread;
    the threads it ran on."""
    return held_off_gui_thread(monkeypatch, setup, "study_progress")


def test_the_progress_is_read_in_the_background_the_window_saying_so(qtbot, tmp_path, monkeypatch):
    gui = gui_study_with_units(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    with held_progress(monkeypatch) as (release, threads):
        dialog = study_setup_dialog.open_tool(window)
        qtbot.waitUntil(lambda: bool(threads))
        assert threads[0] is not threading.main_thread(), "read on the GUI thread"
        assert dialog.loading and dialog.loading_row.isVisible()
        assert "Reading" in dialog.loading_label.text()
        assert table_rows(dialog.progress_table) == []
        assert table_rows(dialog.people_table), "the other tabs wait for nothing"
        QApplication.processEvents()  # the window answers meanwhile
        release.set()
        wait_read(qtbot, dialog)
    assert not dialog.loading_row.isVisible()
    assert any(row[0] == "respond x3" for row in table_rows(dialog.progress_table))


def test_the_sum_per_kind_reads_nothing_again(qtbot, tmp_path, monkeypatch):
    gui = gui_study_with_units(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    dialog = study_setup_dialog.open_tool(window)
    wait_read(qtbot, dialog)
    with held_progress(monkeypatch) as (_release, threads):
        dialog.by_kind_box.setChecked(True)
        dialog.by_kind_box.setChecked(False)
    assert threads == []
    assert any(row[0] == "respond x3" for row in table_rows(dialog.progress_table))


def test_closing_the_window_while_it_reads_is_safe(qtbot, tmp_path, monkeypatch):
    gui = gui_study_with_units(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    with held_progress(monkeypatch) as (release, threads):
        dialog = study_setup_dialog.open_tool(window)
        qtbot.waitUntil(lambda: bool(threads))
        dialog.close()
        release.set()
        wait_read(qtbot, dialog)
    assert study_setup_dialog.open_tool(window) is dialog
    wait_read(qtbot, dialog)
    assert any(row[0] == "respond x3" for row in table_rows(dialog.progress_table))
    with held_progress(monkeypatch) as (release, threads):
        dialog.reload()
        qtbot.waitUntil(lambda: bool(threads))
        dialog.deleteLater()  # as a new project's window replaces it
        qtbot.waitUntil(lambda: not isValid(dialog))
        release.set()
        qtbot.waitUntil(lambda: not workers._running, timeout=20_000)
        qtbot.wait(100)  # the result arrives for a deleted window: dropped, no error
