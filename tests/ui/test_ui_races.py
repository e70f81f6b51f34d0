"""Races between the main window and work it started in the background: a window closed (or
replaced) before its result arrives, a project closed (or opened twice) while something still
uses it. Each test forces the order of events the person could cause (a gate holds the
background work until the test lets it go)."""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from ui_support import open_window

from portalreview.store import study_setup as setup
from portalreview.ui import model_panel
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


def held_loader(gate: threading.Event, started: threading.Event):
    def load_engine(path, isolated=True, cancel=None, **options):
        started.set()
        gate.wait(30)
        return FakeEngine(path)

    return load_engine


# --- Tools > Models… closed (deleted) before the model changes ---------------------------------


def test_models_window_closed_while_a_model_loads(qtbot, prefs, monkeypatch, tmp_path):
    """The Models window closes (it is deleted on close) while its Load runs: the model that
    arrives afterwards reaches no dead window (RuntimeError: already deleted)."""
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    gate, started = threading.Event(), threading.Event()
    monkeypatch.setattr(model_panel, "load_engine", held_loader(gate, started))
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
    gate, started = threading.Event(), threading.Event()
    gate.set()
    monkeypatch.setattr(model_panel, "load_engine", held_loader(gate, started))
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
    gate, started = threading.Event(), threading.Event()
    real = setup.plan_units

    def held_plan(*args, **kwargs):
        started.set()
        gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(setup, "plan_units", held_plan)
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
        qtbot.wait(1000)
    assert errors == []
    assert new.plan is None and not new.busy  # the new window is not told of the old plan
