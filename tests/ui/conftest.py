"""Fixtures shared by the GUI tests (helpers are in ui_support.py)."""

from __future__ import annotations

import pytest
from ui_support import make_gui_study, preferences


@pytest.fixture
def gui(tmp_path):
    """The small study plus an edit-a-draft unit, on disk and closed."""
    return make_gui_study(tmp_path)


@pytest.fixture
def prefs(tmp_path):
    """Preferences in a QSettings file of the test's own."""
    return preferences(tmp_path)
