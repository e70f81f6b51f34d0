"""An answer a save could not store is kept on this computer until a save succeeds, and
offered back when the person opens the study again: a crash, a power cut or "Close anyway"
while the server is away loses nothing (``portalreview.ui.unsaved_work``)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QMessageBox
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.backends.postgres import ServerUnavailable
from portalreview.store.merge import make_copy
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.flag_dialog import FlagNoteDialog
from portalreview.ui.unsaved_work import UnsavedAnswer, UnsavedWork, UnsavedWorkError

REPO = Path(__file__).resolve().parents[2]


class Answers:
    """The questions and warnings shown, each question answered with ``answer``."""

    def __init__(self) -> None:
        self.answer = QMessageBox.StandardButton.Yes
        self.questions: list[str] = []
        self.warnings: list[str] = []


@pytest.fixture
def boxes(monkeypatch) -> Answers:
    said = Answers()

    def question(*args, **_kwargs):
        said.questions.append(args[2])
        return said.answer

    def warning(*args, **_kwargs):
        said.warnings.append(args[2])
        return QMessageBox.StandardButton.Close

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(warning))
    return said


def _server_away(*_args, **_kwargs):
    raise ServerUnavailable("The study server did not answer. Nothing was saved.")


def _typed_while_away(qtbot, window, monkeypatch) -> tuple[int, TextBox]:
    """'Saved part.' saved, then ' Typed while away.' typed while every save fails."""
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, "Saved part.")
    wait_saved(qtbot, window)
    monkeypatch.setattr(window.session.service, "save_answer", _server_away)
    qtbot.keyClicks(box, " Typed while away.")
    window.save_now()
    assert window.save_label.text() == "⚠ Not saved"
    return window.session.unit.unit_id, box


def _kept(project_path: Path, person: str) -> UnsavedWork:
    with Project.open(project_path) as project:
        return UnsavedWork(project.meta("project_id"), person)


def test_a_failed_save_is_kept_on_this_computer_until_a_save_succeeds(
    qtbot, gui, prefs, boxes, monkeypatch
):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _typed_while_away(qtbot, window, monkeypatch)
    kept = window.session.unsaved.read(unit)
    assert kept.unit_id == unit and kept.kind == "respond"
    assert kept.payload["parts"]["empathy"] == "Saved part. Typed while away."
    assert "did not answer" in kept.why and kept.based_on is not None
    if os.name == "posix":  # the answer's text: readable by its owner only
        assert window.session.unsaved.path_for(unit).stat().st_mode & 0o077 == 0
    qtbot.keyClicks(box, " More.")
    window.save_now()  # each failed save keeps the newest text
    assert window.session.unsaved.read(unit).payload["parts"]["empathy"].endswith("away. More.")
    # the server is back: saved, and the kept file goes
    monkeypatch.delattr(window.session.service, "save_answer")
    window.save_now()
    assert not window.session.pending
    assert window.session.unsaved.kept() == []
    assert not window.session.unsaved.path_for(unit).exists()


def test_closing_anyway_keeps_it_and_the_next_opening_puts_it_back(
    qtbot, gui, prefs, boxes, monkeypatch
):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    assert window.close()  # "Close anyway?" answered Close
    assert "kept on this computer and offered back" in boxes.warnings[-1]
    assert "lose it" not in boxes.warnings[-1]
    stored = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert stored == "Saved part."  # only the part saved before

    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 1
    assert "was kept on this computer" in boxes.questions[0]
    assert "did not answer" in boxes.questions[0] and "saved since" not in boxes.questions[0]
    assert window.session.unit.unit_id == unit and window.kind == "respond"
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    assert box.toPlainText() == "Saved part. Typed while away."
    assert not window.session.pending and "back on screen" in window.statusBar().currentMessage()
    stored = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert stored == "Saved part. Typed while away."
    assert window.session.unsaved.read(unit) is None
    qtbot.keyClicks(box, " Then on.")  # the unit goes on as any other
    wait_saved(qtbot, window)
    window.close()
    window = open_window(qtbot, prefs, gui.path, "ava")  # nothing is offered twice
    assert len(boxes.questions) == 1
    window.close()


def test_cancel_keeps_it_for_next_time_and_discard_throws_it_away(
    qtbot, gui, prefs, boxes, monkeypatch
):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    boxes.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 1 and window.session.unsaved.read(unit) is not None
    window.close()
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"] == "Saved part."
    boxes.answer = QMessageBox.StandardButton.Discard
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 2 and window.session.unsaved.read(unit) is None
    window.close()
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"] == "Saved part."
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 2  # gone for good
    window.close()


def test_where_it_cannot_be_kept_closing_says_it_is_lost(
    qtbot, gui, prefs, boxes, monkeypatch, tmp_path
):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("PORTALREVIEW_UNSAVED_DIR", str(blocked / "unsaved"))
    window = open_window(qtbot, prefs, gui.path, "ava")
    _typed_while_away(qtbot, window, monkeypatch)
    assert window.session.kept_unit is None
    assert not window.close()  # answered Close, not Discard: the window stays
    assert "Close anyway and lose it?" in boxes.warnings[-1]
    assert not any("could not be read" in text for text in boxes.warnings)
    monkeypatch.delattr(window.session.service, "save_answer")
    window.save_now()
    assert window.close()


def test_an_answer_kept_and_not_put_back_is_not_overwritten_by_another_units(
    qtbot, gui, prefs, boxes, monkeypatch
):
    """Cancel at sign-in keeps unit 1's answer; a failed save in unit 2 kept its own over it
    (one file per study and person), and unit 1's text was in neither the study nor a file.
    Both are kept, and offered one after the other, the older first."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    first, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    boxes.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")  # another unit
    window.queue.jump_to_number(1)
    second = window.session.unit.unit_id
    monkeypatch.setattr(window.session.service, "save_answer", _server_away)
    qtbot.keyClick(window.editors["urgency"], Qt.Key.Key_Right)
    window.save_now()
    assert {a.unit_id for a in window.session.unsaved.kept()} == {first, second}
    typed_in_second = window.session.unsaved.read(second).payload
    assert typed_in_second["more_urgent_case_id"] is not None
    window.close()
    boxes.answer = QMessageBox.StandardButton.Yes
    asked = len(boxes.questions)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == asked + 2
    assert stored_answer(gui.path, first, "ava").payload["parts"]["empathy"].endswith("away.")
    assert stored_answer(gui.path, second, "ava").payload == typed_in_second
    assert window.session.unsaved.kept() == []
    window.close()


def test_another_person_is_not_offered_it(qtbot, gui, prefs, boxes, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "ava")
    _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    window = open_window(qtbot, prefs, gui.path, "ben")
    assert not boxes.questions
    window.close()
    assert _kept(gui.path, "ava").kept()


def test_an_urgency_choice_is_put_back_in_its_own_tab(qtbot, gui, prefs, boxes, monkeypatch):
    """The kept answer is of another kind than the tab the window opens on: its tab, list
    and unit are shown, and the choice is saved."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    window.queue.jump_to_number(1)
    unit = window.session.unit.unit_id
    monkeypatch.setattr(window.session.service, "save_answer", _server_away)
    qtbot.keyClick(window.editors["urgency"], Qt.Key.Key_Right)  # the right patient first
    window.save_now()
    chosen = window.session.unsaved.read(unit).payload
    window.close()  # the next window's service saves
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert window.kind == "urgency" and window.session.unit.unit_id == unit
    assert window.queue.current_unit() == unit
    assert stored_answer(gui.path, unit, "ava").payload == chosen
    window.close()


def test_an_answer_saved_since_is_named_before_it_is_replaced(
    qtbot, gui, prefs, boxes, monkeypatch
):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    with Project.open(gui.path) as project:  # saved from another workstation meanwhile
        StudyService(project).as_viewer("ava").save_answer(
            unit, {"mode": "theme_guided", "parts": {"empathy": "Saved elsewhere."}}
        )
    boxes.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert "saved since then" in boxes.questions[-1]
    assert "replaces the answer saved there" in boxes.questions[-1]
    window.close()
    stored = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert stored == "Saved elsewhere."


def test_what_was_kept_in_an_offline_copy_is_offered_there_only(
    qtbot, gui, prefs, boxes, monkeypatch, tmp_path
):
    copy = tmp_path / "ava-copy.prproj"
    with Project.open(gui.path) as project:
        make_copy(project, copy, annotator="ava")
    window = open_window(qtbot, prefs, copy, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    window = open_window(qtbot, prefs, gui.path, "ava")  # the study it was copied from
    assert not boxes.questions
    window.close()
    window = open_window(qtbot, prefs, copy, "ava")
    assert len(boxes.questions) == 1
    window.close()
    assert stored_answer(copy, unit, "ava").payload["parts"]["empathy"].endswith("away.")


@pytest.mark.parametrize(("kind", "unit", "why"), [
    ("respond", 99_999, "its unit is not in your list now"),
    ("pairs", 1, "you have no pairs work in this study now"),
])  # fmt: skip
def test_an_answer_with_nowhere_to_go_can_be_discarded(qtbot, gui, prefs, boxes, kind, unit, why):
    """The PI took the unit (or the kind) away since: Cancel keeps it and asks again,
    Discard throws it away; neither shows another unit as if it were it."""
    work = _kept(gui.path, "ava")
    work.keep(
        UnsavedAnswer(unit, kind, {"x": 1}, "", "draft", None, None, None, 0.0, None,
                      "2026-11-29T10:00:00", "The study server did not answer.")
    )  # fmt: skip
    boxes.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert why in boxes.questions[-1] and work.read(unit) is not None
    assert not window.session.pending
    window.close()
    boxes.answer = QMessageBox.StandardButton.Discard
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 2 and work.read(unit) is None
    window.close()


def test_a_damaged_kept_file_is_said_and_left_as_it_is(qtbot, gui, prefs, boxes, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    kept = _kept(gui.path, "ava")
    path = kept.path_for(unit)
    path.write_text('{"format": "portalreview-unsaved-answer", "ver', encoding="utf-8")
    with pytest.raises(UnsavedWorkError, match="is damaged"):
        kept.read(unit)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert not boxes.questions and "could not be read" in boxes.warnings[-1]
    assert path.read_text(encoding="utf-8").endswith('"ver')
    window.close()


def test_a_damaged_kept_file_does_not_hide_the_others(qtbot, gui, prefs, boxes, monkeypatch):
    """Several saves failed and one kept file was damaged afterwards: the damaged one was the
    only thing said, at every sign-in, and none of the whole ones was offered (found by an
    explorer: 0 of 6 came back)."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    kept = _kept(gui.path, "ava")
    whole = dataclasses.replace(kept.read(unit), unit_id=gui.edit_unit, kept_at="2001-01-01")
    assert kept.keep(whole)
    damaged = kept.path_for(unit)
    damaged.write_text('{"format": "portalreview-unsaved-answer", "ver', encoding="utf-8")
    boxes.answer = QMessageBox.StandardButton.Cancel
    warned, asked = len(boxes.warnings), len(boxes.questions)
    window = open_window(qtbot, prefs, gui.path, "ava")
    [warning] = boxes.warnings[warned:]
    assert str(damaged) in warning and "The other kept answers are offered now." in warning
    assert len(boxes.questions) == asked + 1  # the whole one, offered
    assert kept.kept() == [whole] and damaged.read_text(encoding="utf-8").endswith('"ver')
    window.close()


def test_a_put_back_that_fails_again_stays_kept(qtbot, gui, prefs, boxes, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _typed_while_away(qtbot, window, monkeypatch)
    window.close()
    real_save = StudyService.save_answer
    monkeypatch.setattr(StudyService, "save_answer", _server_away)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert window.session.pending and window.save_label.text() == "⚠ Not saved"
    kept = window.session.unsaved.read(unit)
    assert kept.payload["parts"]["empathy"].endswith("Typed while away.")
    monkeypatch.setattr(StudyService, "save_answer", real_save)
    window.save_now()
    assert not window.session.pending and window.session.unsaved.read(unit) is None
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"].endswith("away.")
    window.close()


CRASH_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from PySide6.QtCore import QSettings
    from PySide6.QtTest import QTest
    from portalreview.store.backends.postgres import ServerUnavailable
    from portalreview.ui.app import application
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences
    from portalreview.tasks.common.editor_base import TextBox

    def away(*_args, **_kwargs):
        raise ServerUnavailable("The study server did not answer. Nothing was saved.")

    app = application()
    folder = Path(sys.argv[1])
    prefs = Preferences(QSettings(str(folder / "crash.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs)
    window.show()
    window.open_project(folder / "gui.prproj", annotator="ava")
    while window.session is None:
        app.processEvents()
    window.kind_tabs.setCurrentIndex(window.kinds.index("respond"))
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    window.session.service.save_answer = away
    QTest.keyClicks(box, "Twenty minutes of work.")
    while window.save_label.text() != "⚠ Not saved":
        app.processEvents()
    print("NOT SAVED", window.session.unit.unit_id, flush=True)
    sys.stdin.readline()  # killed here
    """
)


@pytest.mark.slow
def test_kill_9_after_a_failed_save_loses_nothing(qtbot, gui, tmp_path, prefs, boxes):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("NOT SAVED"), "the app never showed a failed save"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    unit = int(line.split()[-1])
    assert stored_answer(gui.path, unit, "ava") is None  # nothing reached the project
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert boxes.questions and "was kept on this computer" in boxes.questions[0]
    stored = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert stored == "Twenty minutes of work."
    window.close()


def test_a_flag_set_while_saves_fail_is_kept_and_saved_later(qtbot, gui, prefs, boxes, monkeypatch):
    """The flag was remembered nowhere: the next failed autosave kept the answer without it,
    the window offered "Flag for the PI…" again, and the save that worked stored it unflagged."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _typed_while_away(qtbot, window, monkeypatch)
    monkeypatch.setattr(FlagNoteDialog, "exec", lambda _self: QDialog.DialogCode.Accepted)
    monkeypatch.setattr(FlagNoteDialog, "note", lambda _self: "Dose in the draft is wrong")
    window.toggle_flag()  # Flag for the PI…, with its note
    assert window.session.flagged and window.act_flag.text() == "The &flag for the PI…"
    assert "flagged" in window.unit_label.text()
    qtbot.keyClicks(box, " More.")
    window.save_now()  # fails again: the kept answer still holds the flag
    assert window.session.unsaved.read(unit).flag == {
        "flagged": True,
        "flag_note": "Dose in the draft is wrong",
    }
    monkeypatch.delattr(window.session.service, "save_answer")
    window.save_now()
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.flagged and stored.flag_note == "Dose in the draft is wrong"
    assert stored.payload["parts"]["empathy"].endswith("More.")
    window.close()


def test_a_time_only_save_that_fails_on_leaving_is_not_taken_for_lost_typing(
    qtbot, gui, prefs, boxes, monkeypatch
):
    """Leaving a unit after re-reading it, its time-only save failing once: the next unit's
    banner was hidden at once, the unit's time was lost, and the next sign-in asked to put back
    "what you typed", when nothing typed was lost. Now the time waits for the unit's next
    save in this session, and nothing is kept as typing."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    first = window.session.unit.unit_id
    qtbot.keyClicks(window.editors["respond"].findChild(TextBox, "box_empathy"), "Reply.")
    wait_saved(qtbot, window)
    before = stored_answer(gui.path, first, "ava").active_seconds
    window.session.clock.seconds = 120.0  # two minutes re-reading it
    real_save = window.session.service.save_answer
    failures = []

    def fails_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            _server_away()
        return real_save(*args, **kwargs)

    monkeypatch.setattr(window.session.service, "save_answer", fails_once)
    window.queue.jump_to_number(2)
    assert failures and window.session.unit.unit_id != first
    assert not window.save_problem.isVisible() and window.session.unsaved.kept() == []
    assert "time spent on the unit just left was not saved" in window.statusBar().currentMessage()
    window.queue.jump_to_number(1)  # back: its next save adds the two minutes
    assert window.session.clock.seconds >= 120.0
    qtbot.keyClicks(window.editors["respond"].findChild(TextBox, "box_empathy"), " More.")
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, first, "ava").active_seconds >= before + 120.0
    window.close()
    assert not boxes.questions


@pytest.mark.parametrize("cut_in", ["é", "’"])
def test_a_kept_file_cut_inside_a_character_is_named_as_damaged(tmp_path, cut_in):
    """Kept files are UTF-8: one cut short inside "é" raised UnicodeDecodeError, which no
    one caught, and no kept answer at all was offered, nor the damaged file named (found by
    an explorer). So did a kept time that is not text."""
    work = UnsavedWork("study-1", "ava", folder=tmp_path)
    answer = UnsavedAnswer(
        unit_id=7, kind="respond", payload={"parts": {"empathy": f"Caf{cut_in} au lait"}},
        comment="", status="draft", flag=None, suggestion_id=None, suggestion_use=None,
        unsaved_seconds=0.0, based_on=None, kept_at="2026-11-29T09:00:00", why="disk full",
    )  # fmt: skip
    assert work.keep(answer) and work.keep(dataclasses.replace(answer, unit_id=8))
    data = work.path_for(7).read_bytes()
    work.path_for(7).write_bytes(data[: data.index(cut_in.encode()) + 1])
    record = json.loads(work.path_for(8).read_text(encoding="utf-8"))
    record["answer"]["kept_at"] = 20261129
    record["answer"]["unit_id"] = 9
    work.path_for(9).write_text(json.dumps(record), encoding="utf-8")
    kept, damaged = work.read_all()
    assert kept == [dataclasses.replace(answer, unit_id=8)]
    assert [str(problem).split(" is damaged")[0] for problem in damaged] == [
        str(work.path_for(7)),
        str(work.path_for(9)),
    ]


def _kept_answer(unit_id: int) -> UnsavedAnswer:
    return UnsavedAnswer(
        unit_id=unit_id, kind="respond", payload={"parts": {"empathy": "Kept text."}},
        comment="", status="draft", flag={"flagged": True, "flag_note": "Ask the PI."},
        suggestion_id=None, suggestion_use=None, unsaved_seconds=3.0, based_on=None,
        kept_at="2026-11-29T09:00:00", why="disk full",
    )  # fmt: skip


def _with_field(work: UnsavedWork, unit_id: int, name: str, value) -> None:
    """The kept answer of ``unit_id`` with field ``name`` set to ``value`` (as support editing
    the file by hand, or a damaged disk, may leave it): still valid JSON of this version."""
    path = work.path_for(unit_id)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["answer"][name] = value
    path.write_text(json.dumps(record), encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("unit_id", True),
        ("kind", ["respond"]),
        ("payload", ["parts"]),
        ("comment", 5),
        ("status", None),
        ("status", "done"),
        ("flag", "yes"),
        ("flag", {"flagged": "yes", "flag_note": ""}),
        ("flag", {"flagged": True}),
        ("suggestion_id", "4"),
        ("suggestion_use", 1),
        ("unsaved_seconds", "12"),
        ("unsaved_seconds", False),
        ("unsaved_seconds", float("nan")),
        ("unsaved_seconds", -5),
        ("based_on", 20261129),
        ("why", None),
    ],
)
def test_a_kept_field_of_the_wrong_type_names_the_file_damaged(tmp_path, name, value):
    """A kept file of valid JSON with a field of the wrong type crashed sign-in, at every
    sign-in, in offer_kept_answer or put_back (found by an explorer); it is named damaged and
    the others are read."""
    work = UnsavedWork("study-1", "ava", folder=tmp_path)
    assert work.keep(_kept_answer(7)) and work.keep(_kept_answer(8))
    _with_field(work, 8, name, value)
    kept, damaged = work.read_all()
    assert kept == [_kept_answer(7)]
    [problem] = damaged
    assert str(problem).startswith(f"{work.path_for(8)} is damaged")


@pytest.mark.parametrize(
    ("name", "value"),
    [("kind", ["respond"]), ("unsaved_seconds", "12"), ("flag", "yes"), ("comment", 5)],
)
def test_signing_in_with_a_kept_field_of_the_wrong_type_names_it(
    qtbot, gui, prefs, boxes, name, value
):
    work = _kept(gui.path, "ava")
    unit = gui.ids.units["respond"]
    assert work.keep(_kept_answer(unit))
    _with_field(work, unit, name, value)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert not boxes.questions
    assert str(work.path_for(unit)) in boxes.warnings[-1] and window.session is not None
    assert work.path_for(unit).exists()  # left as it is, for support
    window.close()


def test_a_kept_answer_its_editor_cannot_show_is_named_damaged(qtbot, gui, prefs, boxes):
    """A kept respond answer whose theme boxes are not text: put back, it crashed sign-in (the
    editor's load), at every sign-in. It is named damaged and left as it is, the stored answer
    on screen."""
    work = _kept(gui.path, "ava")
    unit = gui.ids.units["respond"]
    assert work.keep(_kept_answer(unit))
    _with_field(work, unit, "payload", {"parts": "oops"})
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 1  # offered: Yes, put it back
    assert str(work.path_for(unit)) in boxes.warnings[-1]
    assert "could not be read" in boxes.warnings[-1]
    assert work.path_for(unit).exists()
    assert window.session.unit.unit_id == unit and not window.session.pending
    assert window.session.editor.payload() == {"mode": "theme_guided", "parts": {}, "notes": ""}
    assert stored_answer(gui.path, unit, "ava") is None
    window.close()


def test_a_kept_answer_naming_a_suggestion_not_in_the_study_is_saved_as_hers(
    qtbot, gui, prefs, boxes
):
    """A kept answer whose suggestion is not in the study (a file edited, or kept from another
    copy of it): put back, every save was refused ("there is no suggestion 999999") and the
    unit could not be left (found by an explorer). Her text is saved; only where it started
    is dropped."""
    work = _kept(gui.path, "ava")
    unit = gui.ids.units["respond"]
    kept = dataclasses.replace(_kept_answer(unit), suggestion_id=999_999, suggestion_use="accepted")
    assert work.keep(kept)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert len(boxes.questions) == 1  # offered: Yes, put it back
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.payload["parts"]["empathy"] == "Kept text." and stored.suggestion_id is None
    assert not window.session.pending and not work.path_for(unit).exists()
    window.close()


def test_an_answer_kept_by_a_build_with_one_file_per_person_is_offered(tmp_path):
    """Builds of 2026-11-28/29 kept one file per study and person (``<prefix>.json``, the same
    record); later builds read only ``<prefix>-<unit>.json`` and left her text in it unseen
    (found by an explorer). It is taken in under its unit's name; beside a newer file for the
    same unit it is named, never overwritten."""
    work = UnsavedWork("study-1", "ava", folder=tmp_path)
    assert work.keep(_kept_answer(7))
    one_per_person = tmp_path / f"{work.path_for(7).name.rsplit('-', 1)[0]}.json"
    work.path_for(7).rename(one_per_person)  # as those builds named it
    kept, damaged = work.read_all()
    assert kept == [_kept_answer(7)] and damaged == []
    assert work.path_for(7).exists() and not one_per_person.exists()

    newer = dataclasses.replace(_kept_answer(7), kept_at="2026-11-29T10:00:00")
    assert work.keep(_kept_answer(7))
    work.path_for(7).rename(one_per_person)
    assert work.keep(newer)
    kept, damaged = work.read_all()
    assert kept == [newer]
    [problem] = damaged
    assert str(problem).startswith(str(one_per_person)) and one_per_person.exists()
