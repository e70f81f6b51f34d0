"""Races between the main window and work it started in the background: a window closed (or
replaced) before its result arrives, a project closed (or opened twice) while something still
uses it. Each test forces the order of events the person could cause (a gate holds the
background work until the test lets it go)."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton
from ui_support import make_gui_study, open_window, preferences, show_kind, stored_answer

from portalreview.reports import report_cache
from portalreview.store import study_setup as setup
from portalreview.store.project import Project
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui import dashboard as dash
from portalreview.ui import model_panel, workers
from portalreview.ui import study_setup_dialog as ssd
from portalreview.ui.main_window import MainWindow


@contextlib.contextmanager
def uncaught():
    """The exceptions raised in Qt slots meanwhile (an uncaught one is logged as a crash)."""
    errors: list[str] = []
    before = sys.excepthook
    sys.excepthook = lambda kind, value, _tb: errors.append(f"{kind.__name__}: {value}")
    try:
        yield errors
    finally:
        sys.excepthook = before


class FakeEngine:
    """Enough of a loaded model for the Models window and the model host."""

    def __init__(self, path) -> None:
        self.info = SimpleNamespace(
            file_name=Path(path).name, path=Path(path), describe=lambda: "a fake model"
        )
        self.sha256 = "0" * 64
        self.closed = False

    def close(self) -> None:
        self.closed = True


def held(monkeypatch, owner, name: str, then=None) -> tuple[threading.Event, threading.Event]:
    """Replace ``owner.name`` by a call that says it ``started``, waits for the ``gate`` and
    then does ``then`` (the function it replaced by default): a background step held open
    while the test does something meanwhile."""
    gate, started = threading.Event(), threading.Event()
    then = then or getattr(owner, name)

    def held_call(*args, **kwargs):
        started.set()
        gate.wait(30)
        return then(*args, **kwargs)

    monkeypatch.setattr(owner, name, held_call)
    return gate, started


def held_loader(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """Loading a model held open; it gives a FakeEngine."""
    return held(monkeypatch, model_panel, "load_engine", lambda path, **_kw: FakeEngine(path))


# --- Tools > Models… closed (deleted) before the model changes ---------------------------------


def test_models_window_closed_while_a_model_loads(qtbot, prefs, monkeypatch, tmp_path):
    """The Models window closes (it is deleted on close) while its Load runs: the model that
    arrives afterwards reaches no dead window (RuntimeError: already deleted)."""
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    gate, started = held_loader(monkeypatch)
    model_panel.open_tool(window)
    dialog = window.findChild(model_panel.ModelDialog)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    host = window.suggestions.host
    host.load(model, show_progress=False)
    qtbot.waitUntil(started.is_set)
    dialog.close()
    qtbot.waitUntil(lambda: window.findChild(model_panel.ModelDialog) is None, timeout=3000)
    with uncaught() as errors:
        gate.set()
        qtbot.waitUntil(lambda: host.engine is not None, timeout=5000)
        qtbot.wait(100)
        host.unload()
        qtbot.wait(50)
    assert errors == []


def test_models_window_opened_again_follows_the_model(qtbot, prefs, monkeypatch, tmp_path):
    """Open Models…, close it, open it again: the second window shows each model change, and
    the first (deleted) one is no longer called."""
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    gate, _started = held_loader(monkeypatch)
    gate.set()
    model_panel.open_tool(window)
    window.findChild(model_panel.ModelDialog).close()
    qtbot.waitUntil(lambda: window.findChild(model_panel.ModelDialog) is None, timeout=3000)
    model_panel.open_tool(window)
    second = window.findChild(model_panel.ModelDialog)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    host = window.suggestions.host
    with uncaught() as errors:
        host.load(model, show_progress=False)
        qtbot.waitUntil(lambda: host.engine is not None, timeout=5000)
        qtbot.wait(50)
        assert "m.gguf" in second.current.text()
        host.unload()
        qtbot.wait(50)
        assert "No model loaded" in second.current.text()
    assert errors == []


# --- Study set-up: a plan arriving at a window replaced meanwhile ----------------------------


def test_setup_plan_arriving_after_the_window_was_replaced(qtbot, gui, prefs, monkeypatch):
    """Preview the plan runs on a pool thread; meanwhile the PI closes the project, opens it
    again and opens Study set-up again (the old window is deleted). The plan that arrives
    afterwards is dropped, not shown in the deleted window (RuntimeError)."""
    window = open_window(qtbot, prefs, gui.path, "pat")
    gate, started = held(monkeypatch, setup, "plan_units")
    old = ssd.open_tool(window)
    old.preview_units()
    qtbot.waitUntil(started.is_set)
    assert window.close_project()
    window.open_project(gui.path, annotator="pat")
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    new = ssd.open_tool(window)
    assert new is not old
    qtbot.wait(50)  # the old window's deleteLater
    with uncaught() as errors:
        gate.set()
        qtbot.waitUntil(lambda: not workers._running, timeout=20000)  # the old plan arrived
    assert errors == []
    assert new.plan is None and not new.busy  # the new window is not told of the old plan


# --- the dashboard keeping its figures while the project closes -------------------------------


def kept_rows(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT count(*) FROM report_cache").fetchone()[0]
    finally:
        connection.close()


def test_figures_kept_after_the_project_closed_are_not_written(qtbot, gui, prefs, monkeypatch):
    """The dashboard keeps its figures in the project on a pool thread; the PI closes the
    project meanwhile and another program takes the file: the late write is refused, not
    made in a file this program no longer holds."""
    window = open_window(qtbot, prefs, gui.path, "pat")
    gate, started = held(monkeypatch, report_cache, "store")
    dash.open_tool(window)
    qtbot.waitUntil(started.is_set, timeout=60000)  # the figures shown, being kept
    assert window.close_project()
    before = kept_rows(gui.path)
    other = Project.open(gui.path)  # another program, for writing
    try:
        with uncaught() as errors:
            gate.set()
            qtbot.waitUntil(lambda: not workers._running, timeout=20000)  # the late write ended
        assert kept_rows(gui.path) == before
    finally:
        other.close()
    assert errors == []


# --- opening a project twice at once ---------------------------------------------------------


def recent_button(window: MainWindow, path: Path) -> QPushButton:
    return next(b for b in window.welcome.findChildren(QPushButton) if path.name in b.text())


def test_a_double_click_on_a_recent_project_opens_it_once(qtbot, gui, tmp_path, monkeypatch):
    """A double click on a recent project's button clicks it twice before the first open
    reports: the second is ignored. (It opened the project a second time, found it locked by
    this very program, offered read-only as if another person had it, and left the first
    open's lock held until the program ended.)"""
    prefs = preferences(tmp_path)
    prefs.add_recent(gui.path)
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    window.show()
    said: list[str] = []
    monkeypatch.setattr(
        QMessageBox,
        "question",
        lambda _parent, _title, text, *a, **k: said.append(text) or QMessageBox.StandardButton.Yes,
    )
    monkeypatch.setattr(QMessageBox, "critical", lambda _p, _t, text, *a, **k: said.append(text))
    monkeypatch.setattr(window, "_ask_who", lambda people: "ava")
    opened: list[Project] = []
    real_open = Project.open.__func__

    def slow_open(cls, *args, **kwargs):
        opened.append(real_open(cls, *args, **kwargs))
        time.sleep(0.3)  # longer than a double click
        return opened[-1]

    monkeypatch.setattr(Project, "open", classmethod(slow_open))
    button = recent_button(window, gui.path)
    with uncaught() as errors:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # the double click's second
        qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
        qtbot.wait(600)
    assert errors == [] and said == []
    assert len(opened) == 1 and window.project is opened[0]
    assert not window.project.read_only
    assert window.close_project()
    monkeypatch.undo()
    Project.open(gui.path).close()  # its lock released on closing


def test_a_project_opened_over_another_closes_that_one(qtbot, gui, prefs, tmp_path):
    """A project that arrives while another is open (a new project made, an open that raced
    another) closes the one open: dropped, its lock stayed held until the program ended."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    first = window.project
    (tmp_path / "second").mkdir()
    second = make_gui_study(tmp_path / "second")
    window._project_opened(Project.open(second.path), "ava")
    assert window.project is not first and window.project.path == second.path
    assert window.session is not None
    Project.open(gui.path).close()  # the first one's lock is free
    assert window.close_project()


# --- quitting while a tool window reads -------------------------------------------------------


def test_quitting_while_a_tool_window_reads_saves_then_stops_the_read(qtbot, gui, prefs):
    """The window closes (Ctrl+Q) while a read runs on the shared pool (the dashboard's
    figures, the inbox view): what was typed is saved first, then the read is cancelled and
    waited for, and reports to no one. It ran on as Python shut down: "Signal source has been
    deleted" and "cannot schedule new futures after interpreter shutdown" on stderr."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    unit = window.session.unit.unit_id
    qtbot.keyClicks(window.editors["respond"].findChild(TextBox, "box_empathy"), "typed at quit")
    started, ended = threading.Event(), threading.Event()
    reported: list[object] = []

    def read(cancelled) -> str:
        started.set()
        give_up = time.monotonic() + 10  # (never cancelled: the test ends anyway)
        while not cancelled() and time.monotonic() < give_up:
            time.sleep(0.01)
        time.sleep(0.2)  # what it read still being put together
        ended.set()
        return "figures"

    workers.run_in_background(
        read, on_done=reported.append, on_error=lambda message, _exc: reported.append(message)
    )
    assert started.wait(10)
    with uncaught() as errors:
        window.close()
        assert ended.is_set()  # waited for before the window went
        qtbot.wait(100)
    assert errors == [] and reported == [] and not workers._running
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"] == "typed at quit"


def test_a_read_ending_after_its_signals_were_deleted_raises_nothing():
    """As Python shuts down, the worker's signals object may be deleted under it: emitting
    then raised RuntimeError ("Signal source has been deleted"), printed on stderr."""
    worker = workers.Worker(lambda: "figures")
    shiboken6.delete(worker.signals)
    worker.run()
