"""Fixtures shared by the GUI tests (helpers are in ui_support.py)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from ui_support import make_gui_study, preferences


@pytest.fixture
def gui(tmp_path):
    """The small study plus an edit-a-draft unit, on disk and closed."""
    return make_gui_study(tmp_path)


@pytest.fixture(scope="session")
def built_demo(tmp_path_factory) -> Path:
    """The demo study, built once for the GUI tests; a test that changes it takes
    ``demo_copy``."""
    from portalreview.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("built_demo") / "demo.prproj")


@pytest.fixture
def demo_copy(built_demo, tmp_path) -> Path:
    """A fresh copy of the demo study for one test."""
    return Path(shutil.copy(built_demo, tmp_path / built_demo.name))


@pytest.fixture(autouse=True)
def unsaved_answers_kept_apart(tmp_path, monkeypatch):
    """Answers a failed save keeps on "this computer" (``portalreview.ui.unsaved_work``) go to
    the test's own folder: copies of the demo study share one project id, so an answer kept by
    one test would be offered to the next."""
    monkeypatch.setenv("PORTALREVIEW_UNSAVED_DIR", str(tmp_path / "unsaved"))


@pytest.fixture
def prefs(tmp_path):
    """Preferences in a QSettings file of the test's own."""
    return preferences(tmp_path)


@pytest.fixture(autouse=True)
def background_work_ends_with_its_test(qtbot):
    """After each test, wait (up to 10 s) for the background work it started, so that a
    late result or error does not land in the next test."""
    yield
    from portalreview.ui import workers

    try:
        qtbot.waitUntil(lambda: not workers._running, timeout=10_000)
    except qtbot.TimeoutError:  # work held on purpose and never let go: say so, go on
        warnings.warn(f"{len(workers._running)} background task(s) outlived the test", stacklevel=1)


@pytest.fixture
def font_size(qapp):
    """Set the application's font to a point size for one test (put back afterwards)."""
    before = qapp.font()

    def set_size(points: float) -> None:
        font = qapp.font()
        font.setPointSizeF(points)
        qapp.setFont(font)

    yield set_size
    qapp.setFont(before)
