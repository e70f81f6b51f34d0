"""The PI's gold decision a failed save could not store is kept on this computer
(``portalreview.ui.unsaved_gold``) and offered back when the adjudication window opens again,
as a clinician's answer is (``test_ui_unsaved_kept``)."""

from __future__ import annotations

import os
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from test_ui_adjudication import (
    BEN_EDITED,
    asking,
    choose_kind,
    disk_full,
    edited_gold,
    gold_of,
    open_adjudication,
    study_with_disagreements,
)
from ui_support import open_window, preferences

from portalreview.store.service import StoreError, StudyService
from portalreview.ui import adjudication


@pytest.fixture
def study(tmp_path):
    return study_with_disagreements(tmp_path)


@pytest.fixture
def questions(monkeypatch):
    yield from asking(monkeypatch)


KEPT = "could not be saved, and was kept on this computer"
NOTE = "Edited from Dr. Ben's answer"


def kept_files(tmp_path) -> list:
    folder = tmp_path / "unsaved"
    return sorted(folder.glob("*.json")) if folder.exists() else []


def failed_save(qtbot, study, tmp_path, monkeypatch) -> tuple:
    """Ben's EPPC answer changed in the gold editor, Ctrl+S while the disk is full."""
    window, dialog = edited_gold(qtbot, study, tmp_path)
    disk_full(monkeypatch, dialog)
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert dialog.dirty
    return window, dialog


def crash(monkeypatch, window, dialog) -> None:
    """The program dies over the unsaved decision: nothing asked, nothing saved; the disk
    has room again."""
    monkeypatch.delattr(dialog.service, "save_answer")  # the class's own save again
    dialog.dirty = False
    window.close()


def test_a_failed_save_keeps_the_decision_and_says_so(qtbot, study, tmp_path, monkeypatch):
    _window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    status = dialog.status.text()
    assert "Not saved: the disk is full" in status and "Kept on this computer" in status
    [path] = kept_files(tmp_path)
    assert os.stat(path).st_mode & 0o077 == 0  # readable by its owner only
    kept = dialog.unsaved.read(study.ids.units["eppc"])
    assert kept.payload == BEN_EDITED and kept.comment == NOTE and kept.kind == "eppc"
    assert kept.why == "the disk is full"
    dialog.dirty = False


def test_a_kept_decision_is_put_back_and_saved_when_the_window_opens_again(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    assert gold_of(study.path, study.ids.units["eppc"]) is None and kept_files(tmp_path)
    questions.answer = QMessageBox.StandardButton.No  # not at sign-in: when the window opens
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    assert len(questions) == 1 and "Open the adjudication window now" in questions[0]
    questions.answer = QMessageBox.StandardButton.Yes
    dialog = open_adjudication(qtbot, window)  # shows match first, then goes to EPPC's
    qtbot.waitUntil(lambda: gold_of(study.path, study.ids.units["eppc"]) is not None)
    assert len(questions) == 2 and KEPT in questions[1] and "the disk is full" in questions[1]
    assert "saved since" not in questions[1]
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold.payload == BEN_EDITED and gold.comment == NOTE and gold.status == "submitted"
    assert dialog.kind == "eppc" and dialog.report.unit_id == study.ids.units["eppc"]
    assert not dialog.dirty and dialog.editor.payload() == BEN_EDITED
    assert not kept_files(tmp_path)
    window.close()
    assert len(questions) == 2


def test_yes_at_sign_in_opens_the_window_that_puts_it_back(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    questions.answer = QMessageBox.StandardButton.Yes
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    qtbot.waitUntil(lambda: gold_of(study.path, study.ids.units["eppc"]) is not None)
    assert gold_of(study.path, study.ids.units["eppc"]).payload == BEN_EDITED
    assert not kept_files(tmp_path)
    window.close()


def test_cancel_keeps_it_for_next_time_and_discard_throws_it_away(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    questions.answer = QMessageBox.StandardButton.Cancel  # also No at sign-in
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: len(questions) == 2)
    assert KEPT in questions[1] and kept_files(tmp_path)
    dialog.close()
    window.close()
    questions.answer = QMessageBox.StandardButton.Discard
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: len(questions) == 4)  # sign-in, then the window
    assert KEPT in questions[3]
    assert not kept_files(tmp_path)
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    window.close()


def test_the_question_says_when_the_gold_was_saved_since(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    other = {"labels": [{"code": "InfoGive", "subcode": "Symptoms", "spans": [[11, 30]]}]}
    from portalreview.store.project import Project

    with Project.open(study.path) as project:  # the PI at another computer
        StudyService(project).as_viewer("pat").save_answer(
            study.ids.units["eppc"], other, status="submitted", gold=True, comment="Ava's"
        )
    questions.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: len(questions) == 2)
    assert "saved since" in questions[1] and "replaces it" in questions[1]
    assert gold_of(study.path, study.ids.units["eppc"]).payload == other
    window.close()


def test_a_save_that_succeeds_after_a_failed_one_deletes_the_kept_file(
    qtbot, study, tmp_path, monkeypatch
):
    _window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    assert kept_files(tmp_path)
    monkeypatch.delattr(dialog.service, "save_answer")
    assert dialog.save_gold()
    assert not kept_files(tmp_path)
    assert gold_of(study.path, study.ids.units["eppc"]).payload == BEN_EDITED


def test_discarding_the_unsaved_decision_deletes_the_kept_file(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    questions.answer = QMessageBox.StandardButton.Discard
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_Escape)
    assert not dialog.isVisible() and not kept_files(tmp_path)
    window.close()


@pytest.mark.parametrize(
    ("kind", "why"),
    [("urgency", "its unit has no answers"), ("nokind", "no units of that kind are assigned")],
)
def test_a_kept_decision_with_nowhere_to_go_can_be_discarded(
    qtbot, study, tmp_path, questions, monkeypatch, kind, why
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    with open(kept_files(tmp_path)[0], encoding="utf-8") as handle:
        text = handle.read()
    with open(kept_files(tmp_path)[0], "w", encoding="utf-8") as handle:
        handle.write(text.replace('"kind": "eppc"', f'"kind": "{kind}"'))
    questions.answer = QMessageBox.StandardButton.Discard
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: len(questions) == 2)
    assert f"It cannot be put back: {why}" in questions[1]
    assert not kept_files(tmp_path)
    choose_kind(qtbot, dialog, "eppc")
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    window.close()


def test_a_damaged_kept_file_is_named_and_left_alone(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    [path] = kept_files(tmp_path)
    path.write_text("{not json", encoding="utf-8")
    warnings = []
    monkeypatch.setattr(
        QMessageBox, "warning", staticmethod(lambda *args, **_k: warnings.append(args[2]))
    )
    questions.answer = QMessageBox.StandardButton.No
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: bool(warnings))
    assert str(path) in warnings[0] and "damaged" in warnings[0]
    assert path.read_text(encoding="utf-8") == "{not json"
    window.close()


def test_cancel_then_opening_the_window_again_offers_it_again(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    questions.answer = QMessageBox.StandardButton.Cancel
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: len(questions) == 2)
    dialog.close()
    assert open_adjudication(qtbot, window) is dialog  # Ctrl+J: the same window, shown again
    qtbot.waitUntil(lambda: len(questions) == 3)
    assert KEPT in questions[2] and kept_files(tmp_path)
    window.close()


def test_discarding_another_edit_keeps_a_decision_kept_apart(
    qtbot, study, tmp_path, questions, monkeypatch
):
    """Cancel at the offer, or a failed Take as gold, keeps a decision that is not on screen:
    Discard of an edit in the editor throws away that edit only."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "eppc")
    disk_full(monkeypatch, dialog)
    assert not dialog.take_as_gold(dialog.report.answers[1])
    assert kept_files(tmp_path) and not dialog.dirty
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    qtbot.keyClick(dialog.units, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_9)
    assert dialog.dirty
    questions.answer = QMessageBox.StandardButton.Discard
    qtbot.keyClick(dialog.units, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert len(questions) == 1 and kept_files(tmp_path)
    dialog.dirty = False
    window.close()


def two_kept(qtbot, study, tmp_path, monkeypatch) -> None:
    """A failed EPPC save from the editor and a failed Take as gold in facts, then a crash."""
    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    dialog.dirty = False
    choose_kind(qtbot, dialog, "facts")
    assert not dialog.take_as_gold(dialog.report.answers[0])
    assert len(kept_files(tmp_path)) == 2
    crash(monkeypatch, window, dialog)


def test_a_window_closed_during_the_offers_asks_nothing_more(
    qtbot, study, tmp_path, questions, monkeypatch
):
    two_kept(qtbot, study, tmp_path, monkeypatch)
    questions.answer = QMessageBox.StandardButton.No
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    real_read = adjudication.read_kind

    def slow_eppc(service, kind, *args):  # a large study: the EPPC read takes a while
        if kind == "eppc":
            time.sleep(0.8)
        return real_read(service, kind, *args)

    monkeypatch.setattr(adjudication, "read_kind", slow_eppc)
    dialog = adjudication.open_tool(window)
    qtbot.waitUntil(lambda: dialog.kind == "eppc" and dialog.loading, timeout=10_000)
    questions.answer = QMessageBox.StandardButton.Cancel
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # while it reads EPPC to offer the first
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: not dialog.loading, timeout=10_000)
    qtbot.wait(200)
    assert len(questions) == 1  # only the sign-in's
    assert len(kept_files(tmp_path)) == 2
    window.close()


def test_the_kind_the_pi_chooses_during_the_offers_stands(
    qtbot, study, tmp_path, questions, monkeypatch
):
    two_kept(qtbot, study, tmp_path, monkeypatch)
    questions.answer = QMessageBox.StandardButton.No
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    monkeypatch.setattr(StudyService, "save_answer", _disk_still_full)
    questions.answer = QMessageBox.StandardButton.Yes  # put back: its save fails again
    dialog = adjudication.open_tool(window)
    qtbot.waitUntil(lambda: dialog.dirty, timeout=10_000)
    questions.answer = QMessageBox.StandardButton.Discard  # the EPPC edit put back
    asked = len(questions)
    choose_kind(qtbot, dialog, "match")
    qtbot.wait(300)
    assert dialog.kind == "match" and len(questions) == asked + 1  # Discard's, no offer
    assert len(kept_files(tmp_path)) == 1  # the facts decision, offered next time
    window.close()


def _disk_still_full(*_args, **_kwargs):
    raise StoreError("the disk is full")


def test_a_kept_decision_its_editor_cannot_show_is_named_damaged(
    qtbot, study, tmp_path, questions, monkeypatch
):
    """A kept decision of valid JSON whose EPPC labels are not a list: put back, the editor's
    load crashed the window. It is named damaged and left as it is; nothing is saved."""
    import json

    window, dialog = failed_save(qtbot, study, tmp_path, monkeypatch)
    crash(monkeypatch, window, dialog)
    [path] = kept_files(tmp_path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["answer"]["payload"] = {"labels": "oops"}
    path.write_text(json.dumps(record), encoding="utf-8")
    warnings = []
    monkeypatch.setattr(
        QMessageBox, "warning", staticmethod(lambda *args, **_k: warnings.append(args[2]))
    )
    questions.answer = QMessageBox.StandardButton.No  # not at sign-in: when the window opens
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    questions.answer = QMessageBox.StandardButton.Yes
    dialog = open_adjudication(qtbot, window)
    qtbot.waitUntil(lambda: bool(warnings))
    assert str(path) in warnings[0] and "damaged" in warnings[0]
    assert path.exists() and gold_of(study.path, study.ids.units["eppc"]) is None
    assert not dialog.dirty
    window.close()


def test_the_question_shows_the_note_as_written():
    """A message box reads its text as HTML when its first line looks like HTML, and the
    PI's note was on the first line: "<b>x</b> < 5" lost its tags and words. The first line
    is the program's own words now."""
    from PySide6.QtGui import Qt as GuiQt

    from portalreview.ui.unsaved_gold import _kept_sentence
    from portalreview.ui.unsaved_work import UnsavedAnswer

    kept = UnsavedAnswer(
        unit_id=1, kind="eppc", payload={}, comment="<b>x</b> < 5", status="draft", flag=None,
        suggestion_id=None, suggestion_use=None, unsaved_seconds=0.0, based_on=None,
        kept_at="2026-11-29T09:00:00", why="<i>disk</i> full",
    )  # fmt: skip
    sentence = _kept_sentence(kept)
    assert KEPT in sentence and "“<b>x</b> < 5”" in sentence
    assert not GuiQt.mightBeRichText(sentence)
