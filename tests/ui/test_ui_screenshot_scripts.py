"""The scripts that take the README's screenshots show plausible work: a picture of a
clinician's answer is read as an example of a good one."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from sqlalchemy import select
from ui_support import open_window, preferences

from portalreview.store.models import Case

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def screenshot_script(monkeypatch, saved: list[str]):
    """docs/screenshots/take_screenshots.py, imported without its desktop-sized screen (the
    test's application has its screen already) and saving no picture (names recorded)."""
    monkeypatch.setitem(sys.modules, "desktop_screen", types.ModuleType("desktop_screen"))
    monkeypatch.syspath_prepend(str(SCREENSHOTS))
    monkeypatch.delitem(sys.modules, "take_screenshots", raising=False)
    import take_screenshots

    monkeypatch.setattr(take_screenshots, "save", lambda _widget, name: saved.append(name))
    return take_screenshots


def test_the_urgency_screenshot_answers_as_the_reference_would(qtbot, monkeypatch, demo_copy):
    """It always pressed L, 4, Right: on the README's picture a man with crushing chest pain
    (reference level 1) was given "4 · Routine visit", and a request for immunisation records
    was chosen as needing care first, because the demo had put it on the right."""
    saved: list[str] = []
    script = screenshot_script(monkeypatch, saved)
    window = open_window(qtbot, preferences(demo_copy.parent), demo_copy, script.WHO)
    script.urgency_screen(window)
    assert saved == ["urgency-1-answered.png"]
    editor = window.editors["urgency"]
    left, right = editor.case_ids
    with window.project.read() as s:
        rows = s.execute(select(Case.id, Case.urgency_level).where(Case.id.in_([left, right])))
        reference = dict(rows.all())
    assert editor.state["levels"] == {left: reference[left], right: reference[right]}
    more_urgent = left if reference[left] < reference[right] else right
    assert editor.state["chosen"] == more_urgent
