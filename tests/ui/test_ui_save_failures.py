"""When a save fails, the clinician is told and keeps their text: the status bar says
"⚠ Not saved", the unit cannot be left, closing the window asks before losing it, and staying
(Cancel) leaves everything as it was, saving again as soon as it can."""

from __future__ import annotations

import logging
import shutil

import pytest
from PySide6.QtWidgets import QMessageBox
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.backends.postgres import ServerSaveOutcomeUnknown, ServerUnavailable
from portalreview.tasks.common.editor_base import TextBox
from tests.store.test_file_save_failures import LONG, full_disk


class Asked(list):
    """The warnings shown; each is answered with ``answer``."""

    answer = QMessageBox.StandardButton.Cancel


@pytest.fixture
def asked(monkeypatch) -> Asked:
    shown = Asked()

    def warning(*args, **_kwargs):
        shown.append(args[2])
        return shown.answer

    monkeypatch.setattr(QMessageBox, "warning", staticmethod(warning))
    return shown


def _respond_box(qtbot, window) -> TextBox:
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, "First part.")
    wait_saved(qtbot, window)
    return box


def test_a_full_disk_is_said_and_the_text_kept_until_it_saves(qtbot, gui, prefs, asked):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    with full_disk(window.project):
        box.insertPlainText(LONG)
        window.save_now()
        assert window.session.pending and window.save_label.text() == "⚠ Not saved"
        assert "is full" in window.save_problem.text() and window.save_problem.isVisible()
        window.act_next.trigger()  # leaving would drop the text: refused, and said
        assert window.session.unit.unit_id == unit
        assert window.queue.current_unit() == unit
        assert asked and "not saved yet, so it stays on screen" in asked[-1]
        assert not window.close()  # asks; Cancel keeps the window and the text
        assert "It is kept on this computer" in asked[-1]  # tests/ui/test_ui_unsaved_kept.py
        assert window.isVisible() and box.toPlainText() == "First part." + LONG
    window.save_now()  # room again: Ctrl+S saves it
    assert not window.session.pending and window.save_label.text().startswith("✓ Saved")
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"].endswith(LONG)


def test_another_kind_asked_for_with_changes_not_saved_goes_back_to_them(qtbot, gui, prefs, asked):
    """Switching kind with a change that cannot be saved: the tab, list and editor go back to
    the unit with the change, and the message says so once."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    with full_disk(window.project):
        box.insertPlainText(LONG)
        window.save_now()
        window.kind_tabs.setCurrentIndex(window.kinds.index("urgency"))
        assert (
            window.kind == "respond" and window.kinds[window.kind_tabs.currentIndex()] == "respond"
        )
        assert window.session.unit.unit_id == unit == window.queue.current_unit()
        assert window.stack.currentWidget() is window._page_of(window.editors["respond"])
        assert asked and asked[-1].count("stays on screen") == 1
        assert box.toPlainText() == "First part." + LONG
    window.save_now()
    assert not window.session.pending


@pytest.mark.parametrize("how", ["file renamed", "folder deleted"])
def test_a_file_gone_while_open_is_said_and_the_text_kept(qtbot, gui, prefs, asked, tmp_path, how):
    """The project file renamed (in a file manager) or its folder deleted while typing: the
    next save is refused in words, not reported saved into a file no name leads to."""
    path = tmp_path / "share" / "gui.prproj"
    path.parent.mkdir()
    gui.path.rename(path)
    window = open_window(qtbot, prefs, path, "ava")
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    if how == "file renamed":
        path.rename(path.with_name("gui-final.prproj"))
    else:
        shutil.rmtree(path.parent)
    qtbot.keyClicks(box, " Typed after.")
    window.save_now()
    assert window.session.pending and window.save_label.text() == "⚠ Not saved"
    assert "was moved, renamed or deleted while it was open" in window.save_problem.text()
    window.act_next.trigger()  # leaving would drop the text: refused
    assert window.session.unit.unit_id == unit
    assert box.toPlainText() == "First part. Typed after."
    assert not window.close()  # asks; Cancel keeps the window and the text
    assert window.isVisible() and box.toPlainText() == "First part. Typed after."
    if how == "file renamed":  # the saves made before are in the renamed file
        renamed = path.with_name("gui-final.prproj")
        assert stored_answer(renamed, unit, "ava").payload["parts"]["empathy"] == "First part."


def test_an_unexpected_error_in_a_save_is_a_failed_save(qtbot, gui, prefs, monkeypatch, caplog):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in the save")

    monkeypatch.setattr(window.session.service, "save_answer", broken)
    failures = []
    window.session.save_failed.connect(failures.append)
    qtbot.keyClicks(box, " More.")
    with caplog.at_level(logging.WARNING, logger="portalreview.ui.session"):
        window.save_now()
    assert failures and window.session.pending and window.session.last_failure
    assert window.save_label.text() == "⚠ Not saved"
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
    assert box.toPlainText() == "First part. More."
    monkeypatch.undo()  # mended: it saves
    window.save_now()
    assert not window.session.pending


def test_staying_after_close_anyway_keeps_saving(qtbot, gui, prefs, asked, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    service = window.session.service
    real_save = service.save_answer

    def server_away(*_args, **_kwargs):
        raise ServerUnavailable("The study server did not answer. Nothing was saved.")

    monkeypatch.setattr(service, "save_answer", server_away)
    qtbot.keyClicks(box, " Typed while it was away.")
    window.save_now()
    assert not window.close()  # "Close anyway?" -> Cancel
    assert window.session is not None and window.session.unit.unit_id == unit
    qtbot.keyClicks(box, " And after staying.")
    window.act_next.trigger()  # still not saved: the unit stays
    assert window.session.unit.unit_id == unit
    monkeypatch.setattr(service, "save_answer", real_save)  # the server is back
    window._heard_from_study("study")
    assert not window.session.pending and window.save_label.text().startswith("✓ Saved")
    held = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert held == "First part. Typed while it was away. And after staying."
    qtbot.keyClicks(box, " Typing still saves.")
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"].endswith("saves.")


def test_closing_anyway_closes(qtbot, gui, prefs, asked, monkeypatch):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)

    def server_away(*_args, **_kwargs):
        raise ServerUnavailable("The study server did not answer. Nothing was saved.")

    monkeypatch.setattr(window.session.service, "save_answer", server_away)
    qtbot.keyClicks(box, " Kept on this computer.")
    asked.answer = QMessageBox.StandardButton.Close
    assert window.close()
    assert window.project is None and window.session is None


def test_an_error_while_closing_never_closes_over_unsaved_text(qtbot, gui, prefs, asked):
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)
    qtbot.keyClicks(box, " Not saved yet.")  # pending: the autosave has not run

    def broken() -> None:
        raise RuntimeError("a bug while closing")

    window.session.leave = broken
    assert not window.close()  # no exception out of closeEvent, and the person is asked
    assert "Close anyway and lose it?" in asked[-1]
    assert window.isVisible() and window.session.pending
    del window.session.leave  # mended: the autosave saves it
    wait_saved(qtbot, window)


def test_a_backup_copied_over_the_open_file_is_said_and_the_text_kept(
    qtbot, gui, prefs, asked, tmp_path
):
    """A backup copied over the project while typing (same file, same name): the next save is
    refused in words, not mixed into the file put there."""
    from portalreview.store.project import make_backup

    backup = make_backup(gui.path, "manual")
    window = open_window(qtbot, prefs, gui.path, "ava")
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    shutil.copyfile(backup, gui.path)
    qtbot.keyClicks(box, " Typed after.")
    window.save_now()
    assert window.session.pending and window.save_label.text() == "⚠ Not saved"
    assert "was changed by another program" in window.save_problem.text()
    window.act_next.trigger()
    assert window.session.unit.unit_id == unit
    assert box.toPlainText() == "First part. Typed after."
    assert gui.path.read_bytes() == backup.read_bytes()
    assert not window.close()  # asks; Cancel keeps the window and the text


def test_a_long_reason_is_shown_whole_above_the_editor_until_a_save_succeeds(
    qtbot, gui, prefs, asked, monkeypatch
):
    """The status bar cut a reason off at its width (one line) and dropped it after 15 s; the
    reason is now shown whole above the editor, wrapped, until a save succeeds."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    window.resize(1024, 640)
    box = _respond_box(qtbot, window)
    reason = "The study server did not answer. " + "Nothing was saved, and here is why. " * 12
    service = window.session.service

    def server_away(*_args, **_kwargs):
        raise ServerUnavailable(reason)

    monkeypatch.setattr(service, "save_answer", server_away)
    qtbot.keyClicks(box, " More.")
    window.save_now()
    banner = window.save_problem
    assert banner.isVisible() and reason.strip() in banner.text()
    assert "also kept on this computer" in banner.text()
    qtbot.waitUntil(lambda: banner.height() >= banner.heightForWidth(banner.width()))
    assert banner.width() <= window.centralWidget().width()  # wrapped, not cut
    monkeypatch.delattr(service, "save_answer")  # the server is back
    window.save_now()
    assert not banner.isVisible() and window.save_label.text().startswith("✓ Saved")


def test_saved_says_when_the_answer_on_screen_was_saved():
    """A unit reopened after a crash said "✓ Saved" with the clock's time of now, as if the
    last typing had just been saved (found by an explorer); it is the time stored."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from portalreview.ui.main_window import MainWindow

    before = datetime.now(UTC) - timedelta(seconds=65)
    view = SimpleNamespace(updated_at=before.isoformat(timespec="milliseconds"), status="draft")
    local = before.astimezone()
    if local.date() == datetime.now().astimezone().date():
        assert MainWindow._saved_text(view) == f"✓ Saved {local:%H:%M:%S}"
    older = SimpleNamespace(updated_at="2026-01-02T03:04:05.000+00:00", status="submitted")
    stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).astimezone()
    assert MainWindow._saved_text(older) == f"✓ Saved {stamp:%Y-%m-%d %H:%M} · submitted"
    unreadable = SimpleNamespace(updated_at="yesterday", status="draft")
    assert MainWindow._saved_text(unreadable) == "✓ Saved"
    assert MainWindow._saved_text(None) == "Nothing entered yet"


def _written_in_full(qtbot, window) -> tuple[int, TextBox]:
    """Both parts of the first respond unit written and saved as a draft: it may be submitted."""
    box = _respond_box(qtbot, window)
    planning = window.editors["respond"].findChild(TextBox, "box_planning")
    qtbot.keyClicks(planning, "Go to the clinic.")
    wait_saved(qtbot, window)
    return window.session.unit.unit_id, box


def _submission_waits(window, unit: int) -> None:
    """A submission that failed: said, still on screen, waiting to be saved again."""
    assert window.save_label.text() == "⚠ Not saved" and window.save_problem.isVisible()
    assert window.session.unit.unit_id == unit and window.session.pending
    assert window.session.unsaved.read(unit).status == "submitted"


@pytest.mark.parametrize("changed", [True, False], ids=["after a change", "nothing changed"])
def test_a_submission_the_server_missed_is_submitted_when_it_is_back(
    qtbot, gui, prefs, asked, monkeypatch, changed
):
    """Ctrl+Enter while the server was away: when it came back, the answer was saved as a
    draft (after a change) or not at all, "⚠ Not saved" staying (found by an explorer)."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _written_in_full(qtbot, window)
    service = window.session.service

    def server_away(*_args, **_kwargs):
        raise ServerUnavailable("The study server did not answer. Nothing was saved.")

    monkeypatch.setattr(service, "save_answer", server_away)
    if changed:
        qtbot.keyClicks(box, " Typed while it was away.")
    window.act_submit.trigger()
    _submission_waits(window, unit)
    monkeypatch.delattr(service, "save_answer")  # the server is back
    window._heard_from_study("study")
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted"
    assert stored.payload["parts"]["empathy"].endswith("away." if changed else "First part.")
    assert not window.session.pending and window.save_label.text().endswith("· submitted")
    assert window.unit_label.text().startswith("done") and window.queue.done == 1
    assert window.statusBar().currentMessage().startswith("Submitted")
    assert window.session.unsaved.kept() == []


def test_a_submission_the_full_disk_refused_is_submitted_by_the_next_save(qtbot, gui, prefs, asked):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _written_in_full(qtbot, window)
    with full_disk(window.project):
        box.insertPlainText(LONG)
        window.act_submit.trigger()
        _submission_waits(window, unit)
    window.save_now()  # room again: Ctrl+S saves the submission
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted" and stored.payload["parts"]["empathy"].endswith(LONG)
    assert not window.session.pending and window.save_label.text().endswith("· submitted")


UNSURE = (
    "The study server did not answer for 30 s (it may be stopped or overloaded). It may or may "
    "not have been saved (the server had not finished it when it stopped answering). Saving it "
    "again replaces it. Try again when it is back."
)


@pytest.mark.parametrize(
    ("stored", "answers"),
    [(True, [True]), (False, [False]), (True, [None, True]), (False, [None, False])],
    ids=["kept", "not kept", "not known, then kept", "not known, then not kept"],
)
def test_saving_again_after_a_save_that_may_have_been_kept_replaces_it(
    qtbot, gui, prefs, asked, monkeypatch, stored, answers
):
    """After "It may or may not have been saved ... Saving it again replaces it.", the save
    was kept, and saving again was taken for a save from another computer (found by an
    explorer: its answer was not the one read). It replaces it, and the seconds on task the
    unsure save sent are stored once."""
    answers = list(answers)  # what the server says each time it is asked
    window = open_window(qtbot, prefs, gui.path, "ava")
    clock = [1000.0]
    window.session.clock._clock = lambda: clock[0]
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    service = window.session.service
    real_save = service.save_answer

    def commit_lost(*args, **kwargs):
        monkeypatch.setattr(service, "save_answer", real_save)  # this save only
        if stored:
            real_save(*args, **kwargs)
        raise ServerSaveOutcomeUnknown(UNSURE, lambda: answers.pop(0) if answers else None)

    monkeypatch.setattr(service, "save_answer", commit_lost)
    clock[0] += 40
    qtbot.keyClicks(box, " Second.")
    window.save_now()
    assert window.save_label.text() == "⚠ Not saved" and "replaces it" in window.save_problem.text()
    clock[0] += 5
    qtbot.keyClicks(box, " Third.")
    window.save_now()  # Ctrl+S, as the message invites
    assert window.session.conflict is None and not window.save_problem.isVisible()
    assert not window.session.pending and window.save_label.text().startswith("✓ Saved")
    assert stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"] == (
        "First part. Second. Third."
    )
    window.save_now()  # (seconds found not stored after the save go with the next one)
    assert stored_answer(gui.path, unit, "ava").active_seconds == 45.0
    assert not answers  # asked until it was known


def test_time_not_saved_on_leaving_by_switching_kind_is_added_once(qtbot, gui, prefs, monkeypatch):
    """50 s reading a unit, then Ctrl+2 while the server was away: the time, "added when that
    unit is next saved", was added twice (switching the kind leaves the unit, then opening the
    other kind's unit leaves it again, and the failed save had not set the seconds aside)."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    clock = [1000.0]
    window.session.clock._clock = lambda: clock[0]
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    before = stored_answer(gui.path, unit, "ava").active_seconds
    service = window.session.service

    def server_away(*_args, **_kwargs):
        raise ServerUnavailable("The study server did not answer. Nothing was saved.")

    monkeypatch.setattr(service, "save_answer", server_away)
    clock[0] += 50
    window.session.clock.touch()  # 50 s reading, then a mouse move
    show_kind(window, "rank")
    assert "added when that unit is next saved" in window.statusBar().currentMessage()
    monkeypatch.delattr(service, "save_answer")  # the server is back
    show_kind(window, "respond")
    assert window.session.unit.unit_id == unit
    qtbot.keyClicks(box, " More.")
    window.save_now()
    assert stored_answer(gui.path, unit, "ava").active_seconds - before == 50.0


@pytest.mark.parametrize(
    ("stored", "answers"),
    [(True, [True]), (False, [False]), (True, [None, True]), (False, [None, False])],
    ids=["kept", "not kept", "not known, then kept", "not known, then not kept"],
)
def test_time_on_leaving_that_may_have_been_saved_is_stored_once(
    qtbot, gui, prefs, monkeypatch, stored, answers
):
    """50 s reading a unit, then Alt+Right while the server stopped answering during the
    COMMIT of the save of that time: the server kept it, and the 50 s were added to the unit's
    next save too (found by an explorer). They wait until the server says it did not keep
    them."""
    answers = list(answers)  # what the server says each time it is asked
    window = open_window(qtbot, prefs, gui.path, "ava")
    clock = [1000.0]
    window.session.clock._clock = lambda: clock[0]
    box = _respond_box(qtbot, window)
    unit = window.session.unit.unit_id
    before = stored_answer(gui.path, unit, "ava").active_seconds
    service = window.session.service
    real_save = service.save_answer

    def commit_lost(*args, **kwargs):
        monkeypatch.setattr(service, "save_answer", real_save)  # this save only
        if stored:
            real_save(*args, **kwargs)
        raise ServerSaveOutcomeUnknown(UNSURE, lambda: answers.pop(0) if answers else None)

    monkeypatch.setattr(service, "save_answer", commit_lost)
    clock[0] += 50
    window.session.clock.touch()  # 50 s reading, then a mouse move
    window.act_next.trigger()
    assert window.session.unit.unit_id != unit
    assert "may not have been saved" in window.statusBar().currentMessage()
    window.act_prev.trigger()
    assert window.session.unit.unit_id == unit
    qtbot.keyClicks(box, " More.")
    window.save_now()
    window.save_now()  # (seconds found not stored after the save go with the next one)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.active_seconds - before == 50.0
    assert "More." in answer.payload["parts"]["empathy"]
    assert not answers  # asked until it was known


def test_time_of_two_units_left_while_saves_may_have_been_kept_is_stored_for_each(
    qtbot, gui, prefs, monkeypatch
):
    """Two units left in turn while the server stopped answering during each COMMIT, neither
    save kept: the seconds of the first, held aside until the server said so, are not lost
    when the second's are held."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    edited = {"mode": "edit_draft", "base_response_id": gui.ids.draft1, "final_text": "Hi."}
    with Project.open(gui.path) as project:
        StudyService(project).save_answer(gui.edit_unit, edited, annotator_id=gui.ids.ava)
    window = open_window(qtbot, prefs, gui.path, "ava")
    clock = [1000.0]
    window.session.clock._clock = lambda: clock[0]
    box = _respond_box(qtbot, window)
    first = window.session.unit.unit_id
    service = window.session.service

    def commit_lost(*_args, **_kwargs):
        raise ServerSaveOutcomeUnknown(UNSURE, lambda: False)

    monkeypatch.setattr(service, "save_answer", commit_lost)
    clock[0] += 50
    window.session.clock.touch()
    window.act_next.trigger()  # its 50 s: held aside
    assert window.session.unit.unit_id == gui.edit_unit
    clock[0] += 30
    window.session.clock.touch()
    window.act_prev.trigger()  # its 30 s: held aside, the first unit's 50 s still to store
    assert window.session.unit.unit_id == first
    monkeypatch.delattr(service, "save_answer")  # the server is back
    qtbot.keyClicks(box, " More.")
    window.save_now()
    window.act_next.trigger()
    window.act_prev.trigger()  # leaving the second unit saves its time
    assert stored_answer(gui.path, first, "ava").active_seconds == 50.0
    assert stored_answer(gui.path, gui.edit_unit, "ava").active_seconds == 30.0
