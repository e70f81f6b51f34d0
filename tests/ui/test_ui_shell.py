"""The shell around the editors: time on task, text size per person, queue filters and jumps,
the command line that opens the app, and a kill -9 that loses nothing shown as saved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from ui_support import make_gui_study, open_window, preferences, show_kind, stored_answer

from portalreview import cli
from portalreview.store.errors import ReadFailed
from portalreview.tasks.rank.editor import groups_from_ranks, ranks_from_groups
from portalreview.ui.session import IDLE_SECONDS, ActivityClock

REPO = Path(__file__).resolve().parents[2]


def test_active_time_counts_gaps_between_inputs_but_not_idle_time():
    now = [100.0]
    clock = ActivityClock(clock=lambda: now[0])
    clock.start()
    for t in (100.0, 105.0, 107.5, 107.5 + 600.0, 107.5 + 602.0):
        now[0] = t
        clock.touch()
    # gaps 5 + 2.5 + (600 capped at IDLE_SECONDS) + 2
    assert clock.seconds == pytest.approx(5 + 2.5 + IDLE_SECONDS + 2)
    clock.stop()
    now[0] += 10
    clock.touch()
    assert clock.seconds == pytest.approx(5 + 2.5 + IDLE_SECONDS + 2)


def test_ranks_from_drag_and_drop_groups():
    # [[A], [B, C], [D]] -> 1, 2, 2, 4 (competition ranks: a tie takes the places it covers)
    assert ranks_from_groups([[1], [2, 3], [4]]) == {1: 1, 2: 2, 3: 2, 4: 4}
    assert groups_from_ranks([4, 3, 2, 1], {1: 1, 2: 2, 3: 2, 4: None}) == [[1], [3, 2]]


def test_dropping_in_the_ranking_reorders_and_ties(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    window.kind_tabs.setCurrentIndex(window.kinds.index("rank"))
    editor = window.editors["rank"]
    a, b = editor.order
    editor.move_in_ranking(a, None, "end")  # A dropped into the empty ranking
    editor.move_in_ranking(b, a, "above")  # B above A
    assert editor.state["ranks"] == {b: 1, a: 2}
    assert [editor.ranking.item(i).text() for i in range(2)] == ["1. Response B", "2. Response A"]
    editor.move_in_ranking(a, b, "onto")  # A onto B: a tie
    assert editor.state["ranks"] == {a: 1, b: 1}
    assert "(tie)" in editor.ranking.item(0).text()
    window.act_undo.trigger()
    assert editor.state["ranks"] == {b: 1, a: 2}


def test_text_size_is_remembered_per_person(qtbot, gui, tmp_path):
    prefs = preferences(tmp_path)
    window = open_window(qtbot, prefs, gui.path, "ava")
    start = window.point_size
    window.act_zoom_in.trigger()
    window.act_zoom_in.trigger()
    assert window.editors["respond"].font().pointSizeF() == start + 2
    window.close()
    for who, size in (("ava", start + 2), ("ben", start)):
        again = open_window(qtbot, prefs, gui.path, who)
        assert again.point_size == size
        again.close()


@pytest.fixture
def large_system_font(qapp):
    """The system's font at 18 pt, as a person who needs large text sets it for every program."""
    before = qapp.font()
    font = qapp.font()
    font.setPointSizeF(18)
    qapp.setFont(font)
    yield
    qapp.setFont(before)


def test_a_large_system_font_is_the_editors_reading_size(qtbot, gui, tmp_path, large_system_font):
    """The editors read at the system's size when it is larger than 11 pt (they were set to
    11 pt at sign-in, and Ctrl+0 went back to 11 pt, under 18 pt menus and lists)."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    assert window.point_size == 18
    assert window.editors["respond"].font().pointSizeF() == 18
    window.act_zoom_in.trigger()
    assert window.point_size == 19
    window.act_zoom_reset.trigger()
    assert window.point_size == 18


def test_queue_filters_jumps_and_next_to_do(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    assert window.kind == "respond"
    assert "0 of 2 done" in window.queue.progress_label.text()
    window.queue.jump_to_number(2)
    assert window.session.unit.unit_id == gui.edit_unit
    window.act_submit.trigger()  # the draft as it is: a complete edit
    qtbot.waitUntil(lambda: window.session.unit.unit_id == gui.ids.units["respond"])
    assert "1 of 2 done" in window.queue.progress_label.text()
    assert window.kind_tabs.tabText(0).endswith("(1/2)")
    filter_box = window.queue.filter
    filter_box.setCurrentIndex(filter_box.findData("submitted"))
    assert [i.unit_id for i in window.queue.model.items] == [gui.edit_unit]
    filter_box.setCurrentIndex(filter_box.findData("todo"))
    assert [i.unit_id for i in window.queue.model.items] == [gui.ids.units["respond"]]
    assert window.queue.jump_to_number(2)  # hidden by the filter: the filter is cleared
    assert window.session.unit.unit_id == gui.edit_unit
    window.act_prev.trigger()
    assert window.session.unit.unit_id == gui.ids.units["respond"]


def test_units_assigned_while_signed_in_show_after_reload(qtbot, gui, tmp_path):
    """On a team server the PI assigns while clinicians work and no one is told: the tab kept
    its old count ("19/22" over a list of 27) once its list was read again, and a kind that
    was new got no tab until the next sign-in (found by an explorer). Go > Reload work list
    (F5) reads them again; a tab's count follows its list; the unit on screen stays."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    assert window.kinds == ["respond", "rank", "match", "urgency", "eppc", "empathy", "facts"]
    window.queue.jump_to_number(2)
    shown = window.session.unit.unit_id
    admin, ids = window.admin, gui.ids
    rank_set = admin.create_unit_set("more drafts", "rank")
    admin.assign(admin.add_unit(rank_set, ids.case1, members=[ids.draft1, ids.draft2]), ids.ava)
    respond_set = admin.create_unit_set("more replies", "respond")
    for case in (ids.case1, ids.case2):
        admin.assign(admin.add_unit(respond_set, case), ids.ava)
    assert window.kind_tabs.tabText(0).endswith("(0/2)")  # not read again yet
    qtbot.keyClick(window, Qt.Key.Key_F5)
    assert window.kind_tabs.tabText(0).endswith("(0/4)")
    assert "Unit 2 of 4" in window.unit_label.whole_text()
    assert window.queue.total == 4 and window.session.unit.unit_id == shown
    assert window.kind == "respond" and window.kind_tabs.currentIndex() == 0
    admin.assign(admin.add_unit(rank_set, ids.case1, members=[ids.draft1, ids.draft2]), ids.ava)
    show_kind(window, "rank")  # its list read again: its tab's count follows
    assert window.kind_tabs.tabText(1).endswith("(0/3)")
    assert window.queue.total == 3
    window.close()


def test_a_reload_that_cannot_read_changes_nothing_shown(qtbot, gui, tmp_path, monkeypatch):
    """Go > Reload work list with the project file not readable (its drive gone): the tabs
    were emptied and the editor hidden behind "nothing to do", typing on screen with it, and
    the warning came twice. One warning now, and the list and the unit stay as they were."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    window.queue.jump_to_number(2)
    shown, tabs = window.session.unit.unit_id, window.kinds[:]
    page = window.stack.currentWidget()
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: warnings.append(args[2]))

    def unreadable(*_args, **_kwargs):
        raise ReadFailed("The project file could not be read: its drive is gone.")

    for read in ("progress_by_kind", "queue"):
        with monkeypatch.context() as patched:
            patched.setattr(window.service, read, unreadable)
            window.act_reload.trigger()
        assert len(warnings) == 1 and "its drive is gone" in warnings.pop()
        assert window.kinds == tabs and window.kind_tabs.count() == len(tabs)
        assert window.queue.total == 2 and len(window.queue.model.items) == 2
        assert window.session.unit.unit_id == shown and window.stack.currentWidget() is page
    window.act_reload.trigger()  # readable again
    assert not warnings and window.session.unit.unit_id == shown
    window.close()


def test_a_kind_assigned_while_signed_in_gets_its_tab_after_reload(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    assert window.kinds == []
    admin, ids = window.admin, gui.ids
    admin.assign(ids.units["urgency"], ids.pi)
    window.act_reload.trigger()
    assert window.kinds == ["urgency"] and window.kind == "urgency"
    assert window.session.unit.unit_id == ids.units["urgency"]
    assert window.kind_tabs.tabText(0).endswith("(0/1)")
    window.close()


def test_a_clinician_reads_the_chart_sections_as_lists(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    panel = window.editors["respond"].case_panel
    assert "crushing chest pain" in panel.message.text()
    assert "<li>Age: 61</li>" in panel.section_labels["demographics"].text()
    assert "<li>Coronary artery disease</li>" in panel.section_labels["problems"].text()
    assert "none recorded" in panel.section_labels["medications"].text()
    section = panel.sections["problems"]
    qtbot.mouseClick(section.toggle, Qt.MouseButton.LeftButton)
    assert not section.body.isVisible()


def test_the_command_line_opens_the_app(monkeypatch, tmp_path, gui):
    opened = []
    monkeypatch.setattr(cli, "open_app", lambda path=None, who=None: opened.append((path, who)))
    cli.main([])
    cli.main([str(gui.path), "--as", "ava"])
    assert opened == [(None, None), (gui.path, "ava")]
    assert cli.main([str(tmp_path / "missing.prproj")]) == 2


def test_the_command_line_opens_a_server_study_in_the_app(monkeypatch, qtbot, capsys):
    """`portalreview postgresql://np_chloe@dbhost/ward5`, as --help says: it was taken for a
    missing file, its // made one (found by an explorer). The app opens File > Open server
    study… on that address, for its password; --as is refused (the account decides)."""
    from portalreview.ui import app
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.server_dialog import ServerStudyDialog

    address = "postgresql://np_chloe@dbhost/ward5"
    asked = []
    monkeypatch.setattr(app.QApplication, "exec", lambda _self: 0)
    monkeypatch.setattr(
        ServerStudyDialog, "exec", lambda dialog: asked.append(dialog.address()) or 0
    )
    assert cli.main([address]) == 0
    qtbot.waitUntil(lambda: asked == [address])
    for window in app.QApplication.topLevelWidgets():
        if isinstance(window, MainWindow):
            window.close()
    assert cli.main(["--as", "np_chloe", address]) == 2
    assert "leave out --as" in capsys.readouterr().err


@pytest.mark.parametrize(
    "recent", ["@ByteArray(/tmp/x)", "@Point(1 2)", "@Rect(0 0 5 5)", "/tmp/a.prproj, @Point(1 2)"]
)
def test_a_damaged_settings_file_does_not_stop_the_program(qtbot, tmp_path, recent):
    """A recent-projects entry that is not text (a settings file written by hand, or another
    program's) made the program exit at start with a TypeError and no window."""
    from PySide6.QtCore import QSettings

    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences

    ini = tmp_path / "settings.ini"
    ini.write_text(f"[General]\nrecent_projects={recent}\n", encoding="utf-8")
    prefs = Preferences(QSettings(str(ini), QSettings.Format.IniFormat))
    expected = [Path("/tmp/a.prproj")] if recent.startswith("/tmp/a") else []
    assert prefs.recent_projects() == expected
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    prefs.add_recent(tmp_path / "b.prproj")
    assert prefs.recent_projects() == [(tmp_path / "b.prproj").resolve(), *expected]


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from PySide6.QtCore import QSettings
    from PySide6.QtTest import QTest
    from portalreview.ui.app import application
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences
    from portalreview.tasks.common.editor_base import TextBox

    app = application()
    folder = Path(sys.argv[1])
    prefs = Preferences(QSettings(str(folder / "kill.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs)
    window.show()
    window.open_project(folder / "gui.prproj", annotator="ava")
    while window.session is None:
        app.processEvents()
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    for i in range(1000):
        QTest.keyClicks(box, f"word{i} ")
        app.processEvents()
        if "Saved" in window.save_label.text():
            print("SAVED " + box.toPlainText(), flush=True)
    """
)


@pytest.mark.slow
def test_kill_9_loses_nothing_that_was_shown_as_saved(gui, tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    shown = None
    for line in process.stdout:
        if line.startswith("SAVED ") and len(line) > 200:
            shown = line[len("SAVED ") :].rstrip("\n")
            break
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert shown, "the app never showed a save"
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    stored = answer.payload["parts"]["empathy"]
    # Everything shown as saved is in the file (later typing may be there too).
    assert stored.startswith(shown.strip())


def test_the_pi_starts_on_their_own_work_and_can_look_at_a_clinicians(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    box = window.work_of_box
    assert box.currentData() == gui.ids.pi and box.currentText() == "My own work"
    box.setCurrentIndex(box.findData(gui.ids.ava))
    assert window.work_of == gui.ids.ava
    assert window.kinds[:3] == ["respond", "rank", "match"]
    assert window.session.read_only
    window.close()


def _new_project_dialogs(monkeypatch, target: Path, pi: str) -> list[str]:
    """Answer New project's file and name questions; the error boxes shown, recorded."""
    from portalreview.ui import main_window

    monkeypatch.setattr(
        main_window.QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), ""))
    )
    monkeypatch.setattr(
        main_window.QInputDialog, "getText", staticmethod(lambda *a, **k: (pi, True))
    )
    errors: list[str] = []
    monkeypatch.setattr(
        main_window.QMessageBox, "critical", staticmethod(lambda _w, _t, text: errors.append(text))
    )
    return errors


def test_new_project_is_made_whole_and_opened_for_its_pi(qtbot, monkeypatch, tmp_path):
    from portalreview.ui.main_window import MainWindow

    folder = tmp_path / "studies"
    folder.mkdir()
    errors = _new_project_dialogs(monkeypatch, folder / "pilot", "pat")
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    window.new_project()
    assert errors == []
    assert window.project is not None and window.project.path == folder / "pilot.prproj"
    assert [a.name for a in window.admin.annotators()] == ["pat"]
    window.close_project()
    assert sorted(p.name for p in folder.iterdir()) == ["pilot.prproj"]


def test_new_project_failing_part_way_leaves_no_half_made_file(qtbot, monkeypatch, tmp_path):
    """Its PI could not be added: the file used to stay, a project with nobody to sign in as."""
    from portalreview.store.service import StudyService
    from portalreview.ui.main_window import MainWindow

    def refused(*args, **kwargs):
        raise ValueError("that name cannot be used")

    monkeypatch.setattr(StudyService, "add_annotator", refused)
    folder = tmp_path / "studies"
    folder.mkdir()
    errors = _new_project_dialogs(monkeypatch, folder / "pilot.prproj", "pat")
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    window.new_project()
    assert len(errors) == 1 and "that name cannot be used" in errors[0], errors
    assert "pilot.prproj" in errors[0]
    assert window.project is None
    assert list(folder.iterdir()) == []


def test_f1_lists_the_pi_s_tools_to_the_pi_only(qtbot, gui, tmp_path):
    """A clinician was shown "Adjudicate disagreements Ctrl+J" and "Agreement dashboard Ctrl+D",
    which do nothing for her."""
    clinician = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    listed = dict(clinician.shortcut_list())
    assert "Inbox view" in listed and "Undo" in listed
    assert "Adjudicate disagreements" not in listed and "Agreement dashboard" not in listed
    clinician.close()
    pi = open_window(qtbot, preferences(tmp_path / "pi"), gui.path, "pat")
    assert dict(pi.shortcut_list())["Agreement dashboard"] == "Ctrl+D"


def test_the_pi_sees_a_clinician_s_work_in_the_order_she_saw_it(qtbot, tmp_path):
    """The PI looking at a clinician's ranking was shown the drafts in his own order: her
    "Response B" (which her comment named) was another letter on his screen."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    gui = make_gui_study(tmp_path, extra_rank_units=6)
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        ava = svc.as_viewer("ava")
        seen_by_ava = {u: ava.read_unit(u).presentation for u in gui.rank_units}
        seen_by_pi = {u: svc.as_viewer("pat").read_unit(u).presentation for u in gui.rank_units}
    assert seen_by_ava != seen_by_pi  # (so that the check below can fail)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    box = window.work_of_box
    box.setCurrentIndex(box.findData(gui.ids.ava))
    show_kind(window, "rank")
    for unit in gui.rank_units:
        assert window.queue.select_unit(unit)
        assert window.session.unit.presentation == seen_by_ava[unit]
    window.close()


def _view_menu_action(window, starting: str):
    view_menu = next(
        a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "View"
    )
    return next(a for a in view_menu.actions() if a.text().replace("&", "").startswith(starting))


def test_view_work_queue_hides_the_queue_and_it_stays_hidden(qtbot, gui, tmp_path):
    """The README's advice for a small screen: View > Work queue was always greyed out (the
    queue's dock could not be closed), so the queue could never be hidden."""
    prefs = preferences(tmp_path)
    window = open_window(qtbot, prefs, gui.path, "ava")
    toggle = _view_menu_action(window, "Work queue")
    assert toggle.isEnabled() and toggle.isChecked() and window.queue_dock.isVisible()
    toggle.trigger()
    assert not window.queue_dock.isVisible()
    first = window.session.unit.unit_id
    window.act_next.trigger()  # the hidden queue still steps through the units
    assert window.session.unit.unit_id != first
    window.close()
    again = open_window(qtbot, prefs, gui.path, "ava")
    assert not again.queue_dock.isVisible()
    _view_menu_action(again, "Work queue").trigger()
    assert again.queue_dock.isVisible()
    again.close()


def test_a_clinician_s_tools_menu_shows_only_her_tools(qtbot, gui, tmp_path):
    """The README says clinicians do not see the PI's tools; her Tools menu listed them,
    greyed out (Adjudicate, Agreement dashboard, Generate drafts…, Study set-up…, Offline
    copies…)."""
    from portalreview.ui.tools import TOOLS

    def shown_tools(window) -> list[tuple[str, bool]]:
        window.tools_menu.aboutToShow.emit()  # as opening the menu fills it
        return [(a.text(), a.isEnabled()) for a in window.tools_menu.actions() if a.isVisible()]

    clinician = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    assert shown_tools(clinician) == [("Inbox view", True), ("Models…", True)]
    clinician.close()
    pi = open_window(qtbot, preferences(tmp_path / "pi"), gui.path, "pat")
    assert shown_tools(pi) == [(tool.title, True) for tool in TOOLS]
    assert dict(pi.shortcut_list())["Adjudicate disagreements"] == "Ctrl+J"


def test_the_demo_s_pi_is_called_the_pi_once(qtbot, tmp_path, demo_copy):
    """The demo's PI read "Signed in as Priya Iyer, MD (PI) (PI)", and "Priya Iyer, MD (PI)
    (principal investigator)" in the sign-in list: her display name held "(PI)" as well."""
    from portalreview.ui.sign_in import SignInDialog

    window = open_window(qtbot, preferences(tmp_path), demo_copy, "dr_pi")
    signed_in = window.person_label.whole_text()
    assert signed_in.count("(PI)") == 1 and "Priya Iyer, MD" in signed_in, signed_in
    people = [a for a in window.admin.annotators() if not a.is_model]
    dialog = SignInDialog("demo", people, None, window)
    listed = [dialog.list.item(row).text() for row in range(dialog.list.count())]
    assert "Priya Iyer, MD  (principal investigator)" in listed, listed
    dialog.close()


def test_a_name_the_store_finds_in_another_form_signs_in_as_the_stored_name(qtbot, gui, tmp_path):
    """`portalreview --as " ava" study.prproj`: the store found ava, the window looked for the
    name as typed, and sign-in stopped half-way, in a Qt slot (found by an explorer)."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, " ava")
    assert window.annotator_name == "ava"
    assert "Ava (RN)" in window.windowTitle() and window.kinds
    window.close()
