"""Study set-up in the desktop app (Tools > Study set-up…): the PI adds an annotator, makes a
unit set from the project's cases after previewing it, hands it out with an overlap from a
seed, and follows the progress; bad input gets a message and changes nothing; a cancel saves
nothing. Every count is checked in the project file by SQL, not through the window."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QProgressDialog, QPushButton
from ui_support import make_gui_study, open_window, shown_text

from portalreview.demo import INBOX, build_demo
from portalreview.store import study_setup as setup
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.urgency.editor import ASK_SECOND_TIP
from portalreview.ui.study_setup_dialog import (
    StudySetupDialog,
    open_tool,
    plain_text,
    table_rows,
)
from portalreview.ui.tools import TOOLS

TITLE = "Study set-up…"
CLINICIANS = ["nurse_ava", "dr_ben", "np_chloe"]


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> Path:
    """The demo study, built once; each test works on its own copy."""
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")


def demo_copy(demo_file: Path, folder: Path, name: str = "study.prproj") -> Path:
    target = folder / name
    shutil.copy(demo_file, target)
    return target


def sql(path: Path, query: str, *args) -> list[tuple]:
    """Rows from the project file through a separate read-only connection."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def open_setup(qtbot, window) -> StudySetupDialog:
    """Tools > Study set-up…, as the menu does it."""
    window._fill_tools_menu()
    action = next(a for a in window.tools_menu.actions() if a.text() == TITLE)
    assert action.isEnabled()
    action.trigger()
    dialog = window.findChild(StudySetupDialog)
    qtbot.waitUntil(dialog.isVisible)
    wait_read(qtbot, dialog)
    return dialog


def wait_read(qtbot, dialog: StudySetupDialog) -> None:
    """The progress and hard pairs are read in the background: wait for them."""
    qtbot.waitUntil(lambda: not dialog.loading, timeout=20_000)


def click(qtbot, button) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def wait_idle(qtbot, dialog) -> None:
    qtbot.waitUntil(lambda: not dialog.busy, timeout=20000)


def type_into(qtbot, widget, text: str) -> None:
    """Replace a line edit's or spin box's text by typing."""
    edit = widget.lineEdit() if hasattr(widget, "lineEdit") else widget
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Delete)
    qtbot.keyClicks(edit, text)


def pick(qtbot, combo, text: str, data) -> None:
    """Choose a combo box item by typing the start of its text (keyboard search)."""
    combo.setFocus()
    qtbot.wait(QApplication.keyboardInputInterval() + 50)  # a new search, not a longer one
    qtbot.keyClicks(combo, text)
    assert combo.currentData() == data


def tick(qtbot, dialog, names: list[str]) -> None:
    """Tick people in the Assign tab with the Space key."""
    people = dialog.people_list
    for row in range(people.count()):
        item = people.item(row)
        if item.data(Qt.ItemDataRole.UserRole) in names:
            people.setCurrentRow(row)
            qtbot.keyClick(people, Qt.Key.Key_Space)
            assert item.checkState() == Qt.CheckState.Checked
    assert sorted(dialog.ticked_people()) == sorted(names)


def plan_urgency_set(qtbot, dialog, name: str, per_message: int) -> None:
    dialog.tabs.setCurrentIndex(1)
    pick(qtbot, dialog.recipe_box, "urg", "urgency")
    type_into(qtbot, dialog.inbox_box, INBOX)
    type_into(qtbot, dialog.comparisons_spin, str(per_message))
    type_into(qtbot, dialog.set_name_edit, name)
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)


def hand_out(qtbot, dialog, names: list[str], overlap: int, seed: int) -> None:
    dialog.tabs.setCurrentIndex(2)
    tick(qtbot, dialog, names)
    type_into(qtbot, dialog.overlap_spin, str(overlap))
    type_into(qtbot, dialog.assign_seed_spin, str(seed))
    click(qtbot, dialog.assign_preview_button)
    wait_idle(qtbot, dialog)


def assignment_of(path: Path, set_name: str) -> set[tuple[int, str]]:
    """(unit position, annotator) of every assignment in a set: comparable across files."""
    return set(
        sql(
            path,
            "SELECT u.position, a.name FROM assignments x JOIN units u ON u.id = x.unit_id "
            "JOIN unit_sets s ON s.id = u.unit_set_id JOIN annotators a ON a.id = x.annotator_id "
            "WHERE s.name = ?",
            set_name,
        )
    )


def set_up_through_the_window(qtbot, prefs, path: Path, seed: int) -> StudySetupDialog:
    """On a demo copy: an urgency set of the inbox, each message compared 6 times, handed out
    to the three clinicians with 30 units everyone answers, from ``seed``."""
    window = open_window(qtbot, prefs, path, "dr_pi")
    dialog = open_setup(qtbot, window)
    plan_urgency_set(qtbot, dialog, "Ward pairs", 6)
    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    hand_out(qtbot, dialog, CLINICIANS, 30, seed)
    click(qtbot, dialog.assign_button)
    wait_idle(qtbot, dialog)
    return dialog


def test_the_pi_adds_a_person_makes_a_set_and_hands_it_out_with_an_overlap(
    qtbot, demo_file, tmp_path, prefs
):
    path = demo_copy(demo_file, tmp_path)
    window = open_window(qtbot, prefs, path, "dr_pi")
    dialog = open_setup(qtbot, window)
    count_people = lambda: sql(path, "SELECT count(*) FROM annotators")[0][0]  # noqa: E731
    people_before = count_people()

    # A new clinician, typed and confirmed with Enter.
    qtbot.keyClicks(dialog.name_edit, "np_dana")
    qtbot.keyClick(dialog.name_edit, Qt.Key.Key_Return)
    assert sql(path, "SELECT role FROM annotators WHERE name = 'np_dana'") == [("clinician",)]
    assert count_people() == people_before + 1
    assert dialog.people_table.rowCount() == people_before + 1
    assert "Added np_dana" in dialog.message.plain()
    dana = sql(path, "SELECT id FROM annotators WHERE name = 'np_dana'")[0][0]
    assert window.work_of_box.findData(dana) >= 0  # the main window shows the new person
    added = sql(
        path,
        "SELECT actor_id, json_extract(new_json, '$.annotator_id') FROM audit_log "
        "WHERE action = 'annotator' AND json_extract(new_json, '$.name') = 'np_dana'",
    )
    pi_id = sql(path, "SELECT id FROM annotators WHERE name = 'dr_pi'")[0][0]
    assert added == [(pi_id, dana)]  # recorded, naming the PI who added her

    # A blank name and a name already taken: a message, nothing added.
    click(qtbot, dialog.add_button)
    assert "Type the new annotator's name" in dialog.message.plain()
    qtbot.keyClicks(dialog.name_edit, "dr_ben")
    click(qtbot, dialog.add_button)
    assert "already an annotator called 'dr_ben'" in dialog.message.plain()
    assert count_people() == people_before + 1

    # The plan first: 30 inbox messages each compared 6 times = 30 * 6 / 2 = 90 pairs.
    inbox = sql(path, "SELECT count(*) FROM case_tags WHERE key = 'inbox' AND value = ?", INBOX)
    assert inbox == [(30,)]
    sets_before = sql(path, "SELECT count(*) FROM unit_sets")[0][0]
    plan_urgency_set(qtbot, dialog, "Ward pairs", 6)
    assert "'Ward pairs': 90 urgency unit(s)" in plain_text(dialog.plan_label.text())
    rows = table_rows(dialog.plan_table)
    assert len(rows) == 30 and {r[1] for r in rows} == {"6"}
    assert sql(path, "SELECT count(*) FROM unit_sets")[0][0] == sets_before  # nothing saved

    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    assert "Created the unit set 'Ward pairs' (90 urgency units)" in dialog.message.plain()
    ((set_id, kind),) = sql(path, "SELECT id, kind FROM unit_sets WHERE name = 'Ward pairs'")
    pairs = sql(path, "SELECT case_id, case_b_id FROM units WHERE unit_set_id = ?", set_id)
    assert kind == "urgency" and len(pairs) == 90
    assert len({frozenset(p) for p in pairs}) == 90  # no pair twice
    per_case = Counter(c for pair in pairs for c in pair)
    assert len(per_case) == 30 and set(per_case.values()) == {6}

    # The hand-out: 30 units to all three, the other 60 split: 30 + 60 / 3 = 50 each.
    assert dialog.assign_set_box.currentData() == set_id  # the new set is offered
    hand_out(qtbot, dialog, CLINICIANS, 30, 7)
    assert table_rows(dialog.assign_table) == [[n, "50", "30", "20"] for n in CLINICIANS]
    assert assignment_of(path, "Ward pairs") == set()  # a preview saves nothing
    click(qtbot, dialog.assign_button)
    wait_idle(qtbot, dialog)
    given = assignment_of(path, "Ward pairs")
    assert Counter(name for _, name in given) == dict.fromkeys(CLINICIANS, 50)
    raters = Counter(position for position, _ in given)
    assert Counter(raters.values()) == {3: 30, 1: 60}
    assert "Handed out 'Ward pairs'" in dialog.message.plain()
    # The audit log names the PI who made and handed out the set, not "the system".
    pi = sql(path, "SELECT id FROM annotators WHERE name = 'dr_pi'")[0][0]
    events = sql(
        path,
        "SELECT action, actor_id FROM audit_log WHERE action IN ('setup', 'assign') "
        "AND json_extract(new_json, '$.unit_set') = 'Ward pairs' ORDER BY id",
    )
    assert events == [("setup", pi), ("assign", pi)]

    # Progress: the table shows study_progress, per set or summed per kind.
    dialog.tabs.setCurrentIndex(3)
    wait_read(qtbot, dialog)
    with Project.open(path, read_only=True) as project:
        by_set = setup.study_progress(project)
    shown = [
        [r.unit_set, r.kind, r.annotator]
        + [str(v) for v in (r.assigned, r.shared, r.drafts, r.submitted, r.todo)]
        for r in by_set
    ]
    assert table_rows(dialog.progress_table) == shown
    ward = [row for row in table_rows(dialog.progress_table) if row[0] == "Ward pairs"]
    # every clinician: 50 assigned, the 30 of the overlap shared, nothing answered yet
    assert ward == [
        ["Ward pairs", "urgency", n, "50", "30", "0", "0", "50"] for n in sorted(CLINICIANS)
    ]
    qtbot.mouseClick(dialog.by_kind_box, Qt.MouseButton.LeftButton)
    assert dialog.by_kind_box.isChecked() and dialog.progress_table.isColumnHidden(0)
    summed = setup.progress_by_kind(by_set)
    assert [row[1:] for row in table_rows(dialog.progress_table)] == [
        [r.kind, r.annotator]
        + [str(v) for v in (r.assigned, r.shared, r.drafts, r.submitted, r.todo)]
        for r in summed
    ]
    # the demo's urgency set (120 per clinician, all shared) plus the new one
    urgency = {row[2]: row[3] for row in table_rows(dialog.progress_table) if row[1] == "urgency"}
    assert urgency == dict.fromkeys(CLINICIANS, str(120 + 50))


def test_the_same_seed_gives_the_same_hand_out(qtbot, demo_file, tmp_path, prefs):
    first = demo_copy(demo_file, tmp_path, "first.prproj")
    again = demo_copy(demo_file, tmp_path, "again.prproj")
    other = demo_copy(demo_file, tmp_path, "other.prproj")
    for path, seed in ((first, 7), (again, 7), (other, 8)):
        set_up_through_the_window(qtbot, prefs, path, seed)
    assert len(assignment_of(first, "Ward pairs")) == 3 * 50
    assert assignment_of(again, "Ward pairs") == assignment_of(first, "Ward pairs")
    assert assignment_of(other, "Ward pairs") != assignment_of(first, "Ward pairs")


def test_bad_input_is_named_and_changes_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = open_setup(qtbot, window)
    before = sql(
        gui.path, "SELECT count(*) FROM unit_sets, units WHERE units.unit_set_id = unit_sets.id"
    )
    dialog.tabs.setCurrentIndex(1)

    pick(qtbot, dialog.recipe_box, "mat", "match")
    type_into(qtbot, dialog.tags_edit, "split")
    click(qtbot, dialog.preview_button)
    assert "cannot read the tag 'split'" in dialog.message.plain()
    type_into(qtbot, dialog.tags_edit, "")
    type_into(qtbot, dialog.second_edit, "colour=red")
    click(qtbot, dialog.preview_button)
    assert "cannot read the response filter 'colour=red'" in dialog.message.plain()
    type_into(qtbot, dialog.second_edit, "")
    type_into(qtbot, dialog.cases_edit, "c1, c99")
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    assert "there is no case 'c99'" in dialog.message.plain()
    assert not dialog.create_button.isEnabled()
    type_into(qtbot, dialog.cases_edit, "")
    type_into(qtbot, dialog.set_name_edit, "match set")  # the small study has one already
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    assert "already a unit set called 'match set'" in dialog.message.plain()
    assert not dialog.create_button.isEnabled()

    pick(qtbot, dialog.recipe_box, "urg", "urgency")
    type_into(qtbot, dialog.set_name_edit, "")
    assert dialog.plan_table.rowCount() > 0  # the plan just shown
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    assert "name the inbox" in dialog.message.plain()
    # no plan left on show (it said "Planning…" over the last plan's cases)
    assert plain_text(dialog.plan_label.text()) == "Not planned: see the message below."
    assert dialog.plan_table.rowCount() == 0 and not dialog.create_button.isEnabled()

    # the small study's urgency set holds one unit, assigned already; the match set too
    dialog.tabs.setCurrentIndex(2)
    dialog.assign_set_box.setCurrentIndex(
        dialog.assign_set_box.findText("match set", Qt.MatchFlag.MatchStartsWith)
    )
    click(qtbot, dialog.assign_preview_button)
    assert "Tick the annotators" in dialog.message.plain()
    tick(qtbot, dialog, ["ava", "ben"])
    click(qtbot, dialog.assign_preview_button)
    wait_idle(qtbot, dialog)
    assert "every unit of 'match set' is already assigned (1 unit(s))" in dialog.message.plain()
    assert (
        sql(
            gui.path, "SELECT count(*) FROM unit_sets, units WHERE units.unit_set_id = unit_sets.id"
        )
        == before
    )


def slowed(monkeypatch, name: str, pause: float) -> None:
    """Make the core's ``name`` report progress slowly, so that Cancel comes mid-way; the
    real function does the work, and checks for the cancel as always."""
    real = getattr(setup, name)

    def slow(*args, progress=None, **kwargs):
        def report(done, total):
            progress(done, total)
            time.sleep(pause)

        return real(*args, progress=report, **kwargs)

    monkeypatch.setattr(setup, name, slow)


def cancel_when_shown(qtbot, dialog) -> None:
    """Click Cancel in the progress window as soon as it shows."""

    def shown() -> bool:
        box = dialog.findChild(QProgressDialog)
        return box is not None and box.isVisible()

    qtbot.waitUntil(shown, timeout=10000)
    box = dialog.findChild(QProgressDialog)
    qtbot.mouseClick(box.findChild(QPushButton), Qt.MouseButton.LeftButton)
    wait_idle(qtbot, dialog)


def test_the_window_sends_only_the_response_filters_a_recipe_reads(qtbot, gui, prefs):
    """plan_units refuses the others (setup.RECIPE_FILTERS): the window never sends them."""
    dialog = open_setup(qtbot, open_window(qtbot, prefs, gui.path, "pat"))
    dialog.tabs.setCurrentIndex(1)
    dialog.first_edit.setText("author_kind=model")  # left there, greyed out or not
    dialog.second_edit.setText("author_kind=model")
    for index in range(dialog.recipe_box.count()):
        dialog.recipe_box.setCurrentIndex(index)
        recipe = dialog.recipe_box.currentData()
        arguments = dialog._plan_arguments()
        sent = tuple(option for option in ("first", "second") if arguments[option] is not None)
        assert sent == setup.RECIPE_FILTERS[recipe], recipe


def test_a_cancelled_creation_or_hand_out_saves_nothing(qtbot, gui, prefs, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = open_setup(qtbot, window)
    slowed(monkeypatch, "create_unit_set", 0.4)
    slowed(monkeypatch, "assign_units", 0.4)
    dialog.tabs.setCurrentIndex(1)
    pick(qtbot, dialog.recipe_box, "mat", "match")
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    # references ref1 and o1 (clinicians) x drafts d1, d2, e1 (models) of case c1: 2 x 3 = 6
    assert "6 match unit(s)" in plain_text(dialog.plan_label.text())
    name = dialog.plan.name
    click(qtbot, dialog.create_button)
    cancel_when_shown(qtbot, dialog)
    assert dialog.message.plain() == "Cancelled: nothing was saved."
    assert sql(gui.path, "SELECT count(*) FROM unit_sets WHERE name = ?", name) == [(0,)]

    monkeypatch.undo()
    slowed(monkeypatch, "assign_units", 0.4)
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    assert sql(gui.path, "SELECT count(*) FROM unit_sets WHERE name = ?", name) == [(1,)]
    assignments = sql(gui.path, "SELECT count(*) FROM assignments")
    audit = sql(gui.path, "SELECT count(*) FROM audit_log")
    hand_out(qtbot, dialog, ["ava", "ben"], 2, 0)
    click(qtbot, dialog.assign_button)
    cancel_when_shown(qtbot, dialog)
    assert dialog.message.plain() == "Cancelled: nothing was saved."
    assert sql(gui.path, "SELECT count(*) FROM assignments") == assignments
    assert sql(gui.path, "SELECT count(*) FROM audit_log") == audit


def test_the_main_window_shows_work_handed_to_the_pi(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "pat")
    assert window.kinds == []  # the PI has no work in the small study
    dialog = open_setup(qtbot, window)
    dialog.tabs.setCurrentIndex(1)
    pick(qtbot, dialog.recipe_box, "mat", "match")
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    hand_out(qtbot, dialog, ["pat", "ava"], 2, 3)
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    qtbot.keyClick(dialog.assign_table, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_idle(qtbot, dialog)
    # 6 units: 2 to both, the other 4 split: 2 + 4 / 2 = 4 in the PI's queue
    assert window.kinds == ["match"]
    assert len(window.queue.all_items) == 4
    assert "(0/4)" in window.kind_tabs.tabText(0)


def test_a_clinician_has_no_set_up(qtbot, gui, prefs, monkeypatch):
    told = []
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: told.append(a[2])))
    window = open_window(qtbot, prefs, gui.path, "ava")
    tool = next(t for t in TOOLS if t.title == TITLE)
    assert tool.roles == ("pi",)
    window._fill_tools_menu()
    action = next(a for a in window.tools_menu.actions() if a.text() == TITLE)
    assert not action.isEnabled()
    assert tool.load()(window) is None
    assert "principal investigator" in told[0]
    assert window.findChild(StudySetupDialog) is None


def test_a_window_left_open_after_the_project_closed_writes_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = open_setup(qtbot, window)
    before = sql(gui.path, "SELECT count(*) FROM annotators")
    assert window.close_project()
    qtbot.keyClicks(dialog.name_edit, "np_dana")
    click(qtbot, dialog.add_button)
    assert "gui.prproj was closed: open this window again" in dialog.message.plain()
    assert sql(gui.path, "SELECT count(*) FROM annotators") == before


def test_opening_another_study_closes_the_set_up_window_of_the_one_before(
    qtbot, gui, prefs, tmp_path
):
    """The set-up window was made for one study: opening another closes it (it stayed open on
    the old study's annotators, saying in red that the old study was closed); opened again,
    it shows the new study's."""
    (tmp_path / "other").mkdir()
    other = make_gui_study(tmp_path / "other")
    with Project.open(other.path) as project:
        StudyService(project).add_annotator("np_dana", "Dana", role="clinician")
    window = open_window(qtbot, prefs, gui.path, "pat")
    before = open_setup(qtbot, window)
    window.open_project(other.path, annotator="pat")
    qtbot.waitUntil(lambda: window.session is not None and window.project.path == other.path)
    assert not before.isVisible()
    after = open_tool(window)  # (the one before is still found until deleted)
    assert after is not before
    wait_read(qtbot, after)
    assert "np_dana" in [row[0] for row in table_rows(after.people_table)]


def test_an_adaptive_inbox_made_in_the_window_offers_one_pair_at_a_time(
    qtbot, demo_file, tmp_path, prefs
):
    """The PI makes an adaptive inbox of 12 judgements and hands it to one clinician; she
    sees one pair, judges it by keyboard, submits, and the next pair chosen from her answer
    appears, until the twelve are made."""
    path = demo_copy(demo_file, tmp_path)
    window = open_window(qtbot, prefs, path, "dr_pi")
    dialog = open_setup(qtbot, window)
    dialog.tabs.setCurrentIndex(1)
    pick(qtbot, dialog.recipe_box, "ada", "adaptive-inbox")
    assert dialog.judgements_spin.isEnabled() and not dialog.comparisons_spin.isEnabled()
    type_into(qtbot, dialog.inbox_box, INBOX)
    type_into(qtbot, dialog.judgements_spin, "12")
    type_into(qtbot, dialog.set_name_edit, "Adaptive ward")
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    assert "each clinician judges 12 of the 435 pairs" in plain_text(dialog.plan_label.text())
    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    hand_out(qtbot, dialog, ["nurse_ava"], 0, 0)
    assert "who judge 12 of them" in plain_text(dialog.assign_label.text())
    click(qtbot, dialog.assign_button)
    wait_idle(qtbot, dialog)
    dialog.close()
    window.close()

    window = open_window(qtbot, prefs, path, "nurse_ava")
    window.kind_tabs.setCurrentIndex(window.kinds.index("urgency"))
    queue = window.queue
    editor = window.editors["urgency"]
    already = queue.done
    total = queue.total
    adaptive = [item for item in queue.all_items if item.adaptive]
    assert len(adaptive) == 1 and adaptive[0].status == "todo"
    seen = set()
    for number in range(12):
        queue.select_unit(adaptive[-1].unit_id)
        unit = window.session.unit.unit_id
        assert unit not in seen
        seen.add(unit)
        editor.setFocus()
        qtbot.keyClick(editor, Qt.Key.Key_1)  # the left patient
        window.act_submit.trigger()
        qtbot.waitUntil(lambda n=number: queue.done == already + n + 1, timeout=5000)
        adaptive = [item for item in queue.all_items if item.adaptive]
        assert len(adaptive) == min(number + 2, 12)  # the answered ones and the next
        assert f"({already + number + 1}/{total})" in window.kind_tabs.tabText(
            window.kinds.index("urgency")
        )
    assert all(item.status == "submitted" for item in adaptive)
    stored = sql(
        path,
        "SELECT count(*) FROM answers a JOIN units u ON u.id = a.unit_id JOIN unit_sets s "
        "ON s.id = u.unit_set_id WHERE s.name = 'Adaptive ward' AND a.status = 'submitted'",
    )
    assert stored == [(12,)]
    window.close()


def flag_hard_pairs(path: Path) -> dict[str, list[int]]:
    """On a demo copy: a set "Hard ward" of 15 inbox pairs split between nurse_ava and dr_ben
    (no overlap); ava submits two pairs asking for a second annotator, ben one, and ava one
    more without asking. Returns who asked about which units."""
    with Project.open(path) as project:
        plan = setup.plan_units(
            project, "urgency", inbox=INBOX, comparisons_per_message=1, name="Hard ward"
        )
        setup.create_unit_set(project, plan)
        setup.assign_units(project, setup.plan_assignment(project, "Hard ward", CLINICIANS[:2]))
        asked: dict[str, list[int]] = {}
        for name, n_asked in (("nurse_ava", 2), ("dr_ben", 1)):
            person = StudyService(project).as_viewer(name)
            units = [q.unit_id for q in person.queue("urgency") if q.unit_id in _set_units(path)]
            for i, unit_id in enumerate(units[: n_asked + 1]):
                answer = {"more_urgent_case_id": person.read_unit(unit_id).cases[0].id}
                answer["ask_second"] = i < n_asked
                person.save_answer(unit_id, answer, status="submitted")
            asked[name] = units[:n_asked]
    return asked


def _set_units(path: Path) -> set[int]:
    rows = sql(
        path,
        "SELECT u.id FROM units u JOIN unit_sets s ON s.id = u.unit_set_id "
        "WHERE s.name = 'Hard ward'",
    )
    return {unit_id for (unit_id,) in rows}


def holders(path: Path, unit_ids: list[int]) -> dict[int, set[str]]:
    rows = sql(
        path,
        "SELECT x.unit_id, a.name FROM assignments x JOIN annotators a ON a.id = x.annotator_id "
        f"WHERE x.unit_id IN ({', '.join('?' * len(unit_ids))})",
        *unit_ids,
    )
    found: dict[int, set[str]] = {}
    for unit_id, name in rows:
        found.setdefault(unit_id, set()).add(name)
    return found


def test_the_pi_gives_pairs_flagged_as_hard_to_a_second_annotator(
    qtbot, demo_file, tmp_path, prefs
):
    """Seed 002 App. A.5.1: the pairs that asked for a second annotator are listed (the tab
    says how many); the second annotator offered is never who asked; the pairs go to her as
    the same units, recorded naming the PI, and leave the list; a pair given to someone else
    meanwhile is refused with a message, nothing saved."""
    path = demo_copy(demo_file, tmp_path)
    asked = flag_hard_pairs(path)
    flagged = asked["nurse_ava"] + asked["dr_ben"]
    window = open_window(qtbot, prefs, path, "dr_pi")
    dialog = open_setup(qtbot, window)
    dialog.tabs.setCurrentIndex(4)
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    assert dialog.tabs.tabText(4) == "&Hard pairs (3)"
    assert "list of hard pairs" in ASK_SECOND_TIP  # the editor's box says where it leads
    rows = table_rows(dialog.hard_table)
    assert sorted(int(r[0]) for r in rows) == sorted(flagged)
    assert {r[1] for r in rows} == {"Hard ward"}
    assert {int(r[0]): r[3] for r in rows} == {
        u: name for name, units in asked.items() for u in units
    }

    # ava's pairs: anyone but ava may take them; all three: neither ava nor ben.
    model = dialog.hard_table.selectionModel()
    for row, r in enumerate(rows):
        if r[3] == "nurse_ava":
            index = dialog.hard_table.model().index(row, 0)
            model.select(index, model.SelectionFlag.Select | model.SelectionFlag.Rows)
    offered = lambda: [  # noqa: E731
        dialog.second_box.itemData(i) for i in range(dialog.second_box.count())
    ]
    assert offered() == ["dr_ben", "np_chloe", "dr_pi"]
    dialog.hard_table.setFocus()
    qtbot.keyClick(dialog.hard_table, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert len(dialog.selected_hard_pairs()) == 3
    assert offered() == ["np_chloe", "dr_pi"]

    # Meanwhile ben's pair got a second annotator (another PI of a server study, say):
    # refused, nothing saved.
    setup.assign_second_annotator(dialog.project, asked["dr_ben"], "dr_pi")
    before = holders(path, flagged)
    click(qtbot, dialog.second_button)
    assert f"unit {asked['dr_ben'][0]} has 2 annotators already" in dialog.message.plain()
    assert holders(path, flagged) == before

    dialog.reload()
    wait_read(qtbot, dialog)
    assert dialog.tabs.tabText(4) == "&Hard pairs (2)"
    qtbot.keyClick(dialog.hard_table, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    pick(qtbot, dialog.second_box, "np", "np_chloe")
    qtbot.keyClick(dialog.hard_table, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert "2 hard pair(s) given to np_chloe" in dialog.message.plain()
    wait_read(qtbot, dialog)
    assert holders(path, asked["nurse_ava"]) == {
        u: {"nurse_ava", "np_chloe"} for u in asked["nurse_ava"]
    }
    assert table_rows(dialog.hard_table) == [] and dialog.tabs.tabText(4) == "&Hard pairs"
    assert not dialog.second_button.isEnabled()
    pi = sql(path, "SELECT id FROM annotators WHERE name = 'dr_pi'")[0][0]
    events = sql(
        path,
        "SELECT actor_id, json_extract(new_json, '$.units') FROM audit_log WHERE action = "
        "'assign' AND json_extract(new_json, '$.second_annotator') = 'np_chloe'",
    )
    assert [(actor, sorted(json.loads(units))) for actor, units in events] == [
        (pi, sorted(asked["nurse_ava"]))
    ]


def test_replies_in_a_rank_set_are_kept_from_their_authors(qtbot, demo_file, tmp_path, prefs):
    """Seed 001 Sec. 5: no clinician judges a reply they wrote. The PI ranks the clinicians'
    replies beside the drafts; the preview says how many units are kept from whom and that
    the sets holding a reply by each of the three go to no one; the hand-out gives no one
    their own reply."""
    path = demo_copy(demo_file, tmp_path)
    window = open_window(qtbot, prefs, path, "dr_pi")
    dialog = open_setup(qtbot, window)
    dialog.tabs.setCurrentIndex(1)
    pick(qtbot, dialog.recipe_box, "ran", "rank")
    type_into(qtbot, dialog.first_edit, "author_kind=clinician,model")
    type_into(qtbot, dialog.set_name_edit, "Replies and drafts")
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    click(qtbot, dialog.create_button)
    wait_idle(qtbot, dialog)
    hand_out(qtbot, dialog, CLINICIANS, 5, 1)
    plan = plain_text(dialog.assign_label.text())
    assert (
        "Kept from their authors (seed 001 Sec. 5: no one judges a response they wrote): "
        "nurse_ava 14, dr_ben 14, np_chloe 14 unit(s)"
    ) in plan
    assert "Too few annotators: 14 unit(s) go to no one" in plan
    assert (
        "42 unit(s) kept from the person who wrote one of their responses (seed 001 Sec. 5); "
        "14 with too few annotators (14 with none): see the plan."
    ) in dialog.message.plain()
    click(qtbot, dialog.assign_button)
    wait_idle(qtbot, dialog)
    own = sql(
        path,
        "SELECT count(*) FROM assignments x JOIN annotators a ON a.id = x.annotator_id "
        "JOIN rank_members m ON m.unit_id = x.unit_id JOIN responses r ON r.id = m.response_id "
        "WHERE r.author = a.name",
    )
    assert own == [(0,)]
    assert len({unit for unit, _ in assignment_of(path, "Replies and drafts")}) == 36 - 14


def test_a_set_name_with_quotes_and_ampersands_is_shown_as_typed(qtbot, gui, prefs):
    """The labels show names escaped for rich text: "Created" showed "Dr. O&#x27;Neil &amp;
    co" as it was written, the label holding no tag that made Qt read it as rich text."""
    name = "Dr. O'Neil & co"
    dialog = open_setup(qtbot, open_window(qtbot, prefs, gui.path, "pat"))
    dialog.tabs.setCurrentIndex(1)
    dialog.set_name_edit.setText(name)
    dialog.preview_units()
    wait_idle(qtbot, dialog)
    assert name in shown_text(dialog.plan_label)
    dialog.create_units()
    wait_idle(qtbot, dialog)
    assert shown_text(dialog.plan_label).startswith(f"Created {name}: ")

    dialog.tabs.setCurrentIndex(2)
    assert dialog.assign_set_box.currentText().startswith(name)
    dialog.people_list.item(0).setCheckState(Qt.CheckState.Checked)
    dialog.preview_assignment()
    wait_idle(qtbot, dialog)
    assert name in shown_text(dialog.assign_label)


def test_a_project_without_cases_says_how_to_add_them(qtbot, tmp_path, prefs):
    """A project made by File > New project… was a dead end: its PI read "Nothing is assigned
    to you here", and the plan preview "Cannot plan: no case matches (every case)"."""
    path = tmp_path / "new study.prproj"
    with Project.create(path, name="New study") as project:
        StudyService(project).add_annotator("pat", role="pi")
    window = open_window(qtbot, prefs, path, "pat")
    assert window.stack.currentWidget() is window.empty
    page = shown_text(window.empty)
    command = f"portalreview import {shlex.quote(str(path))} FILE"
    assert "no cases yet" in page and command in page
    assert "docs/formats.md" in page
    dialog = open_setup(qtbot, window)
    dialog.tabs.setCurrentIndex(1)
    click(qtbot, dialog.preview_button)
    wait_idle(qtbot, dialog)
    said = dialog.message.plain()
    assert "no cases yet" in said and command in said, said
