"""Looking at a unit never changes its stored answer. Leaving a unit after a few seconds saves
the time spent with what the boxes give back, and a box does not give every text back as it
was given (Windows line breaks become "\\n", a leading U+FEFF is dropped): a theme-guided
answer or a note imported from REDCap was stored changed, with an audit entry for an edit the
clinician never made."""

from __future__ import annotations

import sqlite3

from ui_support import open_window, show_kind, stored_answer

from portalreview.store.project import Project
from portalreview.store.service import StudyService

THEME = "I am sorry.\r\nPlease rest.\r\n"
NOTES = "note one\r\nnote two"
COMMENT = "\ufeffsee the chart"  # (a line edit drops the U+FEFF)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _audit_rows(path, unit_id: int) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT count(*) FROM audit_log WHERE unit_id = ?", (unit_id,)
        ).fetchone()[0]


def _look_at(qtbot, window, kind: str, unit_id: int) -> None:
    """Open ``unit_id``, spend five seconds on it without typing, and leave it."""
    clock = FakeClock()
    window.session.clock._clock = clock
    show_kind(window, kind)
    assert window.queue.select_unit(unit_id)
    window.session.clock.start()
    clock.now += 5
    window.session.clock.touch()  # an input event: scrolling, the mouse moved
    window.session.leave()
    assert window.session.last_failure is None


def test_viewing_keeps_windows_line_breaks_of_every_box_and_comment(qtbot, gui, prefs):
    theme_unit, edit_unit, urgency = (
        gui.ids.units["respond"],
        gui.edit_unit,
        gui.ids.units["urgency"],
    )
    with Project.open(gui.path) as project:
        ava = StudyService(project).as_viewer("ava")
        ava.save_answer(
            theme_unit, {"parts": {"empathy": THEME}, "notes": NOTES}, active_seconds=30.0
        )
        ava.save_answer(
            edit_unit,
            {"mode": "edit_draft", "base_response_id": gui.ids.draft1, "final_text": "Fine.\r\nOK.",
             "notes": NOTES},
            active_seconds=30.0,
        )  # fmt: skip
        ava.save_answer(
            urgency, {"more_urgent_case_id": gui.ids.case1}, comment=COMMENT, active_seconds=30.0
        )
    units = {theme_unit: "respond", edit_unit: "respond", urgency: "urgency"}
    before = {u: stored_answer(gui.path, u, "ava") for u in units}
    audits = {u: _audit_rows(gui.path, u) for u in units}
    window = open_window(qtbot, prefs, gui.path, "ava")
    for unit_id, kind in units.items():
        _look_at(qtbot, window, kind, unit_id)
    for unit_id in units:
        after = stored_answer(gui.path, unit_id, "ava")
        assert after.active_seconds == 35.0  # the time was saved...
        assert (after.payload, after.comment) == (before[unit_id].payload, before[unit_id].comment)
        assert _audit_rows(gui.path, unit_id) == audits[unit_id]  # ... and nothing else


def test_a_nul_a_project_file_kept_is_left_out_rather_than_blocking_the_unit(qtbot, gui, prefs):
    """A project file from before the store refused a NUL may hold one: the unit saves, without
    it, instead of refusing every save over a character no one can see."""
    unit, urgency = gui.ids.units["respond"], gui.ids.units["urgency"]
    with Project.open(gui.path) as project:
        ava = StudyService(project).as_viewer("ava")
        ava.save_answer(unit, {"parts": {"empathy": "x"}})
        ava.save_answer(urgency, {"more_urgent_case_id": gui.ids.case1}, comment="y")
    with sqlite3.connect(gui.path) as db:
        db.execute("UPDATE respond_parts SET text = 'pasted' || char(0) || ' text'")
        db.execute("UPDATE answers SET comment = 'see' || char(0) || ' chart'")
    window = open_window(qtbot, prefs, gui.path, "ava")
    _look_at(qtbot, window, "respond", unit)
    _look_at(qtbot, window, "urgency", urgency)
    assert stored_answer(gui.path, unit, "ava").payload["parts"] == {"empathy": "pasted text"}
    assert stored_answer(gui.path, urgency, "ava").comment == "see chart"


def test_leaving_never_puts_an_older_answer_over_one_saved_elsewhere(qtbot, gui, prefs):
    """A team study: the clinician's answer is on screen at one workstation while she submits
    a new version at another; leaving the first one after a few seconds saved the time spent
    with the answer on screen, her older draft over the submitted one."""
    unit = gui.ids.units["respond"]
    with Project.open(gui.path) as project:
        StudyService(project).as_viewer("ava").save_answer(
            unit, {"parts": {"empathy": "Version one"}}, active_seconds=30.0
        )
    window = open_window(qtbot, prefs, gui.path, "ava")
    clock = FakeClock()
    window.session.clock._clock = clock
    show_kind(window, "respond")
    assert window.queue.select_unit(unit)
    window.session.clock.start()
    # the other workstation (here the same program's project, as a server would serve it)
    StudyService(window.project).as_viewer("ava").save_answer(
        unit, {"parts": {"empathy": "Version two"}}, status="submitted", active_seconds=60.0
    )
    clock.now += 5
    window.session.clock.touch()
    window.session.leave()
    after = stored_answer(gui.path, unit, "ava")
    assert after.payload["parts"]["empathy"] == "Version two"
    assert after.status == "submitted"
    window.close()
