"""Study set-up previews in the background: a preview that comes back after the PI changed the
options is not the plan of the form as it now stands. Before, it was taken as the plan: Assign
handed out the old overlap while the box showed the new one, and Create made the set under the
name typed before."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import held_off_gui_thread, open_window

from portalreview.store import study_setup as setup
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui.study_setup_dialog import StudySetupDialog
from portalreview.ui.tools import TOOLS

WAIT_MS = 20_000


def open_setup(qtbot, window) -> StudySetupDialog:
    dialog = next(t for t in TOOLS if t.title == "Study set-up…").load()(window)
    qtbot.waitUntil(lambda: not dialog.loading, timeout=WAIT_MS)
    return dialog


def wait_idle(qtbot, dialog: StudySetupDialog) -> None:
    qtbot.waitUntil(lambda: not dialog.busy, timeout=WAIT_MS)


def add_unassigned_set(path, case: int, n: int) -> int:
    with Project.open(path) as project:
        svc = StudyService(project)
        set_id = svc.create_unit_set("to hand out", "respond")
        for _ in range(n):
            svc.add_unit(set_id, case)
    return set_id


def test_a_late_hand_out_preview_is_not_the_plan(qtbot, gui, prefs, monkeypatch):
    set_id = add_unassigned_set(gui.path, gui.ids.case1, 6)
    dialog = open_setup(qtbot, open_window(qtbot, prefs, gui.path, "pat"))
    dialog.tabs.setCurrentIndex(2)
    dialog.assign_set_box.setCurrentIndex(dialog.assign_set_box.findData(set_id))
    for row in range(dialog.people_list.count()):
        dialog.people_list.item(row).setCheckState(Qt.CheckState.Checked)
    dialog.overlap_spin.setValue(1)
    with held_off_gui_thread(monkeypatch, setup, "plan_assignment") as (release, _threads):
        dialog.preview_assignment()
        dialog.overlap_spin.setValue(4)  # changed before the preview came back
        release.set()
        wait_idle(qtbot, dialog)
    assert dialog.assignment is None
    assert not dialog.assign_button.isEnabled()
    assert "preview again" in dialog.assign_label.text()

    dialog.preview_assignment()
    wait_idle(qtbot, dialog)
    assert dialog.assignment is not None and dialog.assignment.overlap == 4
    assert dialog.assign_button.isEnabled()


def test_a_late_unit_set_preview_is_not_the_plan(qtbot, gui, prefs, monkeypatch):
    dialog = open_setup(qtbot, open_window(qtbot, prefs, gui.path, "pat"))
    dialog.tabs.setCurrentIndex(1)
    dialog.set_name_edit.setText("Pilot set")
    with held_off_gui_thread(monkeypatch, setup, "plan_units") as (release, _threads):
        dialog.preview_units()
        dialog.set_name_edit.setText("Main set")  # retyped before the preview came back
        release.set()
        wait_idle(qtbot, dialog)
    assert dialog.plan is None
    assert not dialog.create_button.isEnabled()
    assert "preview again" in dialog.plan_label.text()

    dialog.preview_units()
    wait_idle(qtbot, dialog)
    assert dialog.plan is not None and dialog.plan.name == "Main set"
    assert dialog.create_button.isEnabled()
