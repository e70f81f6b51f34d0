"""Offline copies in the desktop app (Tools > Offline copies…): the PI writes copies for the
clinicians, merges them back (answers added, the same answer changed differently listed as a
conflict, a foreign file refused), settles the conflict in the window, and merging again
changes nothing; a cancelled merge leaves the master as it was. The master is checked in the
file itself, by SQL through a separate connection."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QProgressDialog, QPushButton
from ui_support import open_window, stored_answer

from portalreview.store import merge
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import copies_dialog
from portalreview.ui.copies_dialog import CopiesDialog
from portalreview.ui.study_setup_dialog import table_rows
from portalreview.ui.tools import TOOLS

TITLE = "Offline copies…"


def sql(path: Path, query: str, *args) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def answers_table(path: Path) -> list[tuple]:
    """Every row of the master's answers table, as stored."""
    return sql(path, "SELECT * FROM answers ORDER BY id")


def audit_length(path: Path) -> int:
    return sql(path, "SELECT count(*) FROM audit_log")[0][0]


def edit(path: Path, annotator: str, unit: int, payload: dict, status="submitted") -> None:
    """A clinician's change in their copy, through the service layer."""
    with Project.open(path) as project:
        StudyService(project).as_viewer(annotator).save_answer(unit, payload, status=status)


def in_copy(copy: Path, master: Path, response_id: int) -> int:
    """The id a copy for one person gives a master's response (renumbered in a random order
    there), found by its text."""
    (text,) = sql(master, "SELECT text FROM responses WHERE id = ?", response_id)[0]
    return sql(copy, "SELECT id FROM responses WHERE text = ?", text)[0][0]


@pytest.fixture
def study(gui):
    """The small study, with ava's urgency answer and ben's empathy answer in the master."""
    ids = gui.ids
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        svc.as_viewer("ava").save_answer(
            ids.units["urgency"], {"more_urgent_case_id": ids.case1}, status="submitted"
        )
        svc.as_viewer("ben").save_answer(ids.units["empathy"], {"equal": True}, status="submitted")
    return gui


def open_copies(qtbot, window) -> CopiesDialog:
    window._fill_tools_menu()
    action = next(a for a in window.tools_menu.actions() if a.text() == TITLE)
    assert action.isEnabled()
    action.trigger()
    dialog = window.findChild(CopiesDialog)
    qtbot.waitUntil(dialog.isVisible)
    return dialog


def wait_idle(qtbot, dialog) -> None:
    qtbot.waitUntil(lambda: not dialog.busy, timeout=20000)


def click(qtbot, button) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def save_copy(qtbot, dialog, monkeypatch, who: str, whole_study: bool, target: Path) -> None:
    """Choose the person and the scope, click Save a copy…, answer the file chooser (and the
    whole-study confirmation: yes, after checking it says what the copy holds)."""
    dialog.tabs.setCurrentIndex(0)
    dialog.for_box.setCurrentIndex(dialog.for_box.findData(who))
    if dialog.whole_study_box.isChecked() != whole_study:
        qtbot.mouseClick(dialog.whole_study_box, Qt.MouseButton.LeftButton)
    offered, confirmed = [], []
    monkeypatch.setattr(
        copies_dialog,
        "ask_copy_path",
        lambda parent, suggested: offered.append(suggested) or target,
    )
    monkeypatch.setattr(
        copies_dialog,
        "confirm_whole_study",
        lambda parent, name, holds: confirmed.append((name, holds)) or True,
    )
    click(qtbot, dialog.save_button)
    if whole_study:
        ((name, holds),) = confirmed
        assert name == target.name and "answer(s) by" in holds and "audit log" in holds
    else:
        assert confirmed == []
    wait_idle(qtbot, dialog)
    assert offered[0].parent == dialog.project.path.parent and who in offered[0].name
    assert target.exists(), dialog.message.plain()


def merge_slowly(monkeypatch, pause: float):
    """Make the real merge report its progress slowly (``pause`` seconds a step), so that a
    test can act while it runs; the real merge is returned."""
    real = merge.merge_copy

    def slowly(*args, progress=None, **kwargs):
        def report(done, total):
            progress(done, total)
            time.sleep(pause)

        return real(*args, progress=report, **kwargs)

    monkeypatch.setattr(merge, "merge_copy", slowly)
    return real


def merge_through_dialog(qtbot, dialog, monkeypatch, paths: list[Path]) -> None:
    monkeypatch.setattr(copies_dialog, "ask_copies_to_merge", lambda parent, folder: list(paths))
    click(qtbot, dialog.merge_button)


def test_a_preview_counts_its_conflicts_and_is_no_good_news(
    qtbot, study, prefs, tmp_path, monkeypatch
):
    """A preview-only merge said "0 new conflict(s)" in green beside a row with one."""
    ids, units, master = study.ids, study.ids.units, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    copy = tmp_path / "ava-ward.prproj"
    save_copy(qtbot, dialog, monkeypatch, "ava", False, copy)
    edit(copy, "ava", units["urgency"], {"more_urgent_case_id": ids.case2})
    change = {"more_urgent_case_id": ids.case1}
    window.service.save_answer(units["urgency"], change, status="draft", annotator_id=ids.ava)
    merges_before = sql(master, "SELECT count(*) FROM audit_log WHERE action = 'merge'")
    dialog.dry_run_box.setChecked(True)
    merge_through_dialog(qtbot, dialog, monkeypatch, [copy])
    wait_idle(qtbot, dialog)
    said = dialog.message.plain()
    assert said.startswith("⚠ Would add 0 answer(s), would update 0; 1 new conflict(s).")
    assert "Merging would keep the master's answer in each, for you to settle." in said
    assert table_rows(dialog.results_table)[0][5] == "1 (1 new)"
    assert sql(master, "SELECT count(*) FROM audit_log WHERE action = 'merge'") == merges_before


def test_copies_go_out_come_back_with_a_conflict_and_merge_once(
    qtbot, study, prefs, tmp_path, monkeypatch
):
    ids, units, master = study.ids, study.ids.units, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    ward = {"ava": tmp_path / "ava-ward.prproj", "ben": tmp_path / "ben-ward.prproj"}
    laptop = tmp_path / "ava-laptop.prproj"
    save_copy(qtbot, dialog, monkeypatch, "ava", False, ward["ava"])
    save_copy(qtbot, dialog, monkeypatch, "ben", False, ward["ben"])
    save_copy(qtbot, dialog, monkeypatch, "ava", True, laptop)
    assert "ava-laptop.prproj for ava (the whole study)" in dialog.message.plain()
    ben_id = ids.ben
    assert sql(ward["ava"], "SELECT count(*) FROM answers WHERE annotator_id = ?", ben_id) == [(0,)]
    assert sql(laptop, "SELECT count(*) FROM answers WHERE annotator_id = ?", ben_id) == [(1,)]
    assert [row[1:3] + row[4:] for row in table_rows(dialog.sent_table)] == [
        ["ava", "their assignments", "not yet"],
        ["ben", "their assignments", "not yet"],
        ["ava", "the whole study", "not yet"],
    ]

    # On the ward: ava changes her urgency answer and answers empathy; ben answers urgency and
    # changes his empathy answer. At home ava changes her urgency answer differently.
    edit(ward["ava"], "ava", units["urgency"], {"more_urgent_case_id": ids.case2})
    edited = in_copy(ward["ava"], master, ids.edited)  # (each copy has ids of its own)
    edit(ward["ava"], "ava", units["empathy"], {"more_empathetic_response_id": edited})
    edit(ward["ben"], "ben", units["urgency"], {"more_urgent_case_id": ids.case1})
    original = in_copy(ward["ben"], master, ids.original)
    edit(ward["ben"], "ben", units["empathy"], {"more_empathetic_response_id": original})
    edit(laptop, "ava", units["urgency"], {"more_urgent_case_id": ids.case1}, status="draft")
    with Project.create(tmp_path / "other.prproj", name="Another study"):
        pass
    merges_before = sql(master, "SELECT count(*) FROM audit_log WHERE action = 'merge'")[0][0]

    chosen = [ward["ava"], tmp_path / "other.prproj", ward["ben"], laptop]
    merge_through_dialog(qtbot, dialog, monkeypatch, chosen)
    wait_idle(qtbot, dialog)
    rows = table_rows(dialog.results_table)
    # copy, for, added, updated, (unchanged: the core's count), conflicts, result
    assert [r[:4] + r[5:] for r in rows] == [
        ["ava-ward.prproj", "ava", "1", "1", "0", "merged"],
        ["other.prproj", "", "", "", "", rows[1][6]],
        ["ben-ward.prproj", "ben", "1", "1", "0", "merged"],
        ["ava-laptop.prproj", "ava", "0", "0", "1 (1 new)", "merged"],
    ]
    assert rows[1][6].startswith("refused: other.prproj is not a copy of this project")
    assert "Added 2 answer(s), updated 2; 1 new conflict(s)" in dialog.message.plain()
    assert "Refused (nothing merged from it): other.prproj" in dialog.message.plain()

    # In the master: what the copies brought, and the master's answer kept in the conflict.
    payload = lambda unit, who: stored_answer(master, units[unit], who).payload  # noqa: E731
    assert payload("empathy", "ava") == {"more_empathetic_response_id": ids.edited}
    assert payload("urgency", "ben")["more_urgent_case_id"] == ids.case1
    assert payload("empathy", "ben") == {"more_empathetic_response_id": ids.original}
    assert payload("urgency", "ava")["more_urgent_case_id"] == ids.case2
    merges = sql(master, "SELECT count(*) FROM audit_log WHERE action = 'merge'")[0][0]
    assert merges == merges_before + 3  # one entry per copy that brought something
    pat = sql(master, "SELECT id FROM annotators WHERE name = 'pat'")[0][0]
    actors = sql(
        master, "SELECT DISTINCT actor_id FROM audit_log WHERE action IN ('copy', 'merge')"
    )
    assert actors == [(pat,)]  # the PI who made and merged the copies, not "the system"
    assert [r[-1] for r in table_rows(dialog.sent_table)] == ["yes", "yes", "yes"]

    # The conflict, both versions side by side; the PI takes the copy's.
    assert table_rows(dialog.conflict_table) == [  # #1: what `conflicts --resolve` takes
        ["#1", "urgency set", "1 (id {})".format(units["urgency"]), "urgency", "ava", laptop.name]
    ]
    shown = dialog.conflict_view.toPlainText()
    assert "More urgent: case c2" in shown and "More urgent: case c1" in shown
    assert "status: draft" in shown
    click(qtbot, dialog.take_copy_button)
    taken = stored_answer(master, units["urgency"], "ava")
    assert taken.payload["more_urgent_case_id"] == ids.case1 and taken.status == "draft"
    assert dialog.conflict_table.rowCount() == 0
    with Project.open(master, read_only=True) as project:
        assert merge.open_conflicts(project) == []
    assert not dialog.take_copy_button.isEnabled()

    # Merging the same copies again: nothing new, the answers table byte for byte the same.
    before, audit_before = answers_table(master), audit_length(master)
    merge_through_dialog(qtbot, dialog, monkeypatch, [ward["ava"], ward["ben"], laptop])
    wait_idle(qtbot, dialog)
    # (the laptop's answer is the master's now: no conflict left to report)
    assert [r[2:] for r in table_rows(dialog.results_table)] == [
        ["0", "0", r[4], "0", "nothing new"] for r in table_rows(dialog.results_table)
    ]
    assert dialog.message.plain().startswith("✓ Nothing new")
    assert answers_table(master) == before and audit_length(master) == audit_before
    assert dialog.conflict_table.rowCount() == 0


def test_keeping_the_masters_answer_settles_the_conflict(
    qtbot, study, prefs, tmp_path, monkeypatch
):
    ids, master = study.ids, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    first, second = tmp_path / "ava-1.prproj", tmp_path / "ava-2.prproj"
    save_copy(qtbot, dialog, monkeypatch, "ava", False, first)
    save_copy(qtbot, dialog, monkeypatch, "ava", False, second)
    edit(first, "ava", ids.units["urgency"], {"more_urgent_case_id": ids.case2})
    edit(second, "ava", ids.units["urgency"], {"more_urgent_case_id": ids.case1}, "draft")
    merge_through_dialog(qtbot, dialog, monkeypatch, [first, second])
    wait_idle(qtbot, dialog)
    assert dialog.conflict_table.rowCount() == 1
    before = answers_table(master)
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    qtbot.keyClick(dialog.conflict_table, Qt.Key.Key_K, Qt.KeyboardModifier.AltModifier)
    assert dialog.conflict_table.rowCount() == 0
    assert answers_table(master) == before  # the master's answer stays
    assert "Kept the master's answer for ava's urgency unit" in dialog.message.plain()
    resolved = sql(master, "SELECT new_json FROM audit_log WHERE action = 'resolve'")
    assert len(resolved) == 1 and '"took": "master"' in resolved[0][0]


def test_a_cancelled_merge_leaves_the_master_as_it_was(qtbot, study, prefs, tmp_path, monkeypatch):
    ids, master = study.ids, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    copy = tmp_path / "ben-ward.prproj"
    save_copy(qtbot, dialog, monkeypatch, "ben", False, copy)
    edit(copy, "ben", ids.units["urgency"], {"more_urgent_case_id": ids.case1})
    original = in_copy(copy, master, ids.original)
    edit(copy, "ben", ids.units["empathy"], {"more_empathetic_response_id": original})
    before, audit_before = answers_table(master), audit_length(master)

    real = merge_slowly(monkeypatch, 0.4)  # so that Cancel comes mid-way
    merge_through_dialog(qtbot, dialog, monkeypatch, [copy])
    qtbot.waitUntil(
        lambda: (box := dialog.findChild(QProgressDialog)) is not None and box.isVisible(),
        timeout=10000,
    )
    box = dialog.findChild(QProgressDialog)
    qtbot.mouseClick(box.findChild(QPushButton), Qt.MouseButton.LeftButton)
    wait_idle(qtbot, dialog)
    assert table_rows(dialog.results_table)[0][6] == "cancelled: nothing of it was saved"
    assert "Cancelled: nothing of ben-ward.prproj was saved" in dialog.message.plain()
    assert answers_table(master) == before and audit_length(master) == audit_before

    monkeypatch.setattr(merge, "merge_copy", real)
    merge_through_dialog(qtbot, dialog, monkeypatch, [copy])
    wait_idle(qtbot, dialog)
    assert table_rows(dialog.results_table)[0][2:4] == ["1", "1"]  # added urgency, updated empathy


def test_a_clinician_has_no_copies_tool(qtbot, gui, prefs, monkeypatch):
    told = []
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: told.append(a[2])))
    window = open_window(qtbot, prefs, gui.path, "ben")
    tool = next(t for t in TOOLS if t.title == TITLE)
    assert tool.roles == ("pi",)
    window._fill_tools_menu()
    action = next(a for a in window.tools_menu.actions() if a.text() == TITLE)
    assert not action.isEnabled()
    assert tool.load()(window) is None
    assert "principal investigator" in told[0]
    assert window.findChild(CopiesDialog) is None


def test_a_copy_holds_only_their_work_unless_the_whole_study_is_confirmed(
    qtbot, study, prefs, tmp_path, monkeypatch
):
    ids, master = study.ids, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    dialog.for_box.setCurrentIndex(dialog.for_box.findData("ava"))
    assert not dialog.whole_study_box.isChecked()  # the safe copy is the default
    target = tmp_path / "ava.prproj"
    monkeypatch.setattr(copies_dialog, "ask_copy_path", lambda parent, suggested: target)
    asked = []
    monkeypatch.setattr(
        copies_dialog,
        "confirm_whole_study",
        lambda parent, name, holds: asked.append(holds) or False,  # the PI says No
    )
    click(qtbot, dialog.save_button)
    wait_idle(qtbot, dialog)
    assert asked == [] and target.exists()
    assert sql(target, "SELECT DISTINCT annotator_id FROM answers") == [(ids.ava,)]
    assert sql(target, "SELECT DISTINCT author, source FROM responses") == [("", "")]
    assert "their assignments and answers only" in dialog.message.plain()

    whole = tmp_path / "ava-whole.prproj"
    monkeypatch.setattr(copies_dialog, "ask_copy_path", lambda parent, suggested: whole)
    qtbot.mouseClick(dialog.whole_study_box, Qt.MouseButton.LeftButton)
    assert dialog.whole_study_box.isChecked()
    click(qtbot, dialog.save_button)
    wait_idle(qtbot, dialog)
    # ben's empathy answer is the one other answer; the confirmation says so, and No writes nothing
    (holds,) = asked
    assert holds.startswith("1 answer(s) by 1 other person(s)") and "audit log" in holds
    assert not whole.exists()
    assert "No copy written" in dialog.message.plain()

    # a copy for anyone is a whole-study copy: the box is ticked and cannot be unticked
    dialog.for_box.setCurrentIndex(dialog.for_box.findData(None))
    assert dialog.whole_study_box.isChecked() and not dialog.whole_study_box.isEnabled()
    click(qtbot, dialog.save_button)
    wait_idle(qtbot, dialog)
    assert len(asked) == 2 and not whole.exists()
    dialog.for_box.setCurrentIndex(dialog.for_box.findData("ben"))  # back to a person: safe again
    assert dialog.whole_study_box.isEnabled() and not dialog.whole_study_box.isChecked()


def test_a_merge_that_only_settles_earlier_conflicts_says_so():
    from portalreview.store.merge import MergeReport
    from portalreview.ui.copies_dialog import MergeOutcome

    report = MergeReport("ava.prproj", "id", "ava", 5, settled=2)
    assert MergeOutcome(Path("ava.prproj"), report).result() == (
        "settled 2 earlier conflict(s): the copy's answer changed since"
    )
    assert MergeOutcome(Path("ava.prproj"), MergeReport("a", "i", "a", 5)).result() == (
        "nothing new"
    )


@pytest.mark.parametrize("name", ["../../../tmp/evil", "a/b", "..\\..\\evil"])
def test_the_copy_suggested_for_a_person_lies_in_the_studys_folder(qtbot, gui, prefs, name):
    with Project.open(gui.path) as project:
        StudyService(project).add_annotator(name, "Someone")
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = open_copies(qtbot, window)
    dialog.for_box.setCurrentIndex(dialog.for_box.findData(name))
    suggested = dialog.suggested_copy_path()
    folder = gui.path.parent.resolve()
    assert suggested.resolve().parent == folder  # no folder, .. or separator in its name
    assert not any(separator in suggested.name for separator in "/\\")
    assert suggested.name.startswith(f"{gui.path.stem}-") and suggested.suffix == ".prproj"


def test_the_study_is_not_closed_under_a_merge(qtbot, study, prefs, tmp_path, monkeypatch):
    """Opening another study (or quitting) while Offline copies merged cut the merge off, and
    the copies window that would have said so went with the study: the PI never learnt the
    copy was not merged (found by an explorer). Closing the study is refused, in words,
    until the merge ends; the merge then ends as it would have."""
    ids, master = study.ids, study.path
    window = open_window(qtbot, prefs, master, "pat")
    dialog = open_copies(qtbot, window)
    copy = tmp_path / "ben-ward.prproj"
    save_copy(qtbot, dialog, monkeypatch, "ben", False, copy)
    edit(copy, "ben", ids.units["urgency"], {"more_urgent_case_id": ids.case1})
    merge_slowly(monkeypatch, 0.3)
    told: list[str] = []
    monkeypatch.setattr(QMessageBox, "information", lambda _p, _t, text, *a: told.append(text))
    merge_through_dialog(qtbot, dialog, monkeypatch, [copy])
    qtbot.waitUntil(lambda: dialog.busy, timeout=10000)
    assert window.close_project() is False
    assert told and "Offline copies" in told[0] and "still at work" in told[0]
    assert window.project is not None and dialog.isVisible()
    wait_idle(qtbot, dialog)
    assert table_rows(dialog.results_table)[0][2] == "1"  # the urgency answer added
    assert window.close_project() is True
