"""Looking at an answer never changes it: a theme-guided answer, or an edited draft's text and
notes, holding Windows line breaks (an import, a merged copy) was stored with "\\n" when the
clinician only opened the unit and moved on, with an audit entry of a change nobody made."""

from __future__ import annotations

from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService

THEME_GUIDED = {
    "mode": "theme_guided",
    "parts": {"empathy": "I am sorry.\r\nPlease rest.\r\n"},
    "notes": "note one\r\nnote two",
}


def test_viewing_a_respond_answer_with_windows_line_breaks_keeps_it(qtbot, gui, prefs):
    edited = {
        "mode": "edit_draft",
        "base_response_id": gui.ids.draft1,
        "final_text": "Final.\r\nText.",
        "notes": "n1\r\nn2",
    }
    units = {gui.ids.units["respond"]: THEME_GUIDED, gui.edit_unit: edited}
    with Project.open(gui.path) as project:
        ava = StudyService(project).as_viewer("ava")
        for unit, payload in units.items():
            ava.save_answer(unit, payload, status="submitted", active_seconds=30.0)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    for unit in units:
        assert window.queue.select_unit(unit)
        qtbot.wait(50)
        assert window.editors["respond"].payload() == units[unit]
    show_kind(window, "rank")  # leaving the units (a save, if anything changed)
    wait_saved(qtbot, window)
    window.close()
    for unit, payload in units.items():
        assert stored_answer(gui.path, unit, "ava").payload == payload
