"""The model in its own process, seen from the app: the model process is ended with SIGKILL (as
the system's out-of-memory killer would) in the middle of a suggestion's generation, of a
drafting run's stream, of an inbox scoring, and while idle. Each time the app goes on, says
what happened, keeps every saved answer (and every stored draft), and offers to load the same
file again, which works. Through the real engine with the tiny random model."""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton
from ui_support import open_window, preferences, show_kind, stored_answer, wait_saved

from portalreview.llm.engines.process import ProcessEngine, ProcessGeneration
from portalreview.store.models import Response
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui import inbox_view
from portalreview.ui.drafts_dialog import DraftsDialog
from portalreview.ui.suggestions import SuggestionBanner
from tests.llm.llm_testkit import PARAMS, SMALL_LIMITS, drafts_end_at_the_limit, tiny_model_file

WAIT_MS = 60000


@pytest.fixture
def model(tmp_path_factory):
    return tiny_model_file(tmp_path_factory)


def save_answers(path: Path, answers: list[tuple[str, int, dict, str]]) -> None:
    with Project.open(path) as project:
        svc = StudyService(project)
        for name, unit, payload, status in answers:
            svc.as_viewer(name).save_answer(unit, payload, status=status)


def read_answers(path: Path, keys: list[tuple[str, int]]) -> dict:
    with Project.open(path, read_only=True) as project:
        svc = StudyService(project)
        out = {}
        for name, unit in keys:
            answer = svc.as_viewer(name).get_answer(unit)
            out[(name, unit)] = None if answer is None else (answer.payload, answer.status)
        return out


def model_drafts(path: Path) -> list[int]:
    """The case of every model draft a run stored (external id "llm:...")."""
    with Project.open(path, read_only=True) as project, project.read() as s:
        rows = s.query(Response.case_id).filter(Response.external_id.like("llm:%"))
        return [case_id for (case_id,) in rows]


def host_of(window):
    return window.suggestions.host


def load_model(qtbot, window, model: Path) -> ProcessEngine:
    host = host_of(window)
    host.load_options = {"gpu": False, "hash_cache": False, "n_threads": 1}
    host.load(model, show_progress=False)
    qtbot.waitUntil(lambda: host.engine is not None, timeout=WAIT_MS)
    assert isinstance(host.engine, ProcessEngine)  # the app's default
    return host.engine


def stopped_box(qtbot, window) -> QMessageBox:
    """Wait for the box that says the model process stopped; check what it says."""
    host = host_of(window)
    qtbot.waitUntil(
        lambda: host.stopped_box is not None and host.stopped_box.isVisible(), timeout=WAIT_MS
    )
    box = host.stopped_box
    text = box.text()
    assert "The model process stopped" in text and "SIGKILL" in text
    assert "your answers are saved" in text and "Load the model again" in text
    assert host.engine is None
    assert window.suggestions.model_label.text() == "Model stopped"
    return box


def reload_from(qtbot, window, box: QMessageBox, old_pid: int) -> ProcessEngine:
    """Click "Load the model again" like a person; the same file comes back in a new process."""
    button = box.findChild(QPushButton, "reloadModel")
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    host = host_of(window)
    qtbot.waitUntil(lambda: host.engine is not None, timeout=WAIT_MS)
    engine = host.engine
    assert isinstance(engine, ProcessEngine) and not engine.closed
    assert engine.pid != old_pid
    assert host.stopped_box is None
    return engine


def banner_state(window, kind: str) -> str | None:
    banner = window.editors[kind].findChild(SuggestionBanner)
    return None if banner is None else banner.state


def kill_after_first_piece(monkeypatch) -> list[int]:
    """Every generation's model process gets SIGKILL right after its first piece arrives
    (on the model thread, mid-stream). Returns the pids killed."""
    real_iter = ProcessGeneration.__iter__
    killed: list[int] = []

    def killing(self):
        for count, piece in enumerate(real_iter(self)):
            if count == 0:
                killed.append(self.engine.pid)
                os.kill(self.engine.pid, signal.SIGKILL)
            yield piece

    monkeypatch.setattr(ProcessGeneration, "__iter__", killing)
    return killed


def test_killed_during_a_suggestion_the_app_goes_on_and_reloads(
    qtbot, gui, tmp_path, model, monkeypatch
):
    ids = gui.ids
    saved = [
        ("ava", ids.units["urgency"], {"more_urgent_case_id": ids.case1}, "submitted"),
        ("ava", ids.units["empathy"], {"equal": True}, "draft"),
        ("ben", ids.units["empathy"], {"equal": True}, "submitted"),
    ]
    save_answers(gui.path, saved)
    keys = [(name, unit) for name, unit, _p, _s in saved]
    before = read_answers(gui.path, keys)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    window.suggestions.params, window.suggestions.limits = PARAMS, SMALL_LIMITS
    show_kind(window, "urgency")
    engine = load_model(qtbot, window, model)
    killed = kill_after_first_piece(monkeypatch)

    show_kind(window, "respond")  # asks the model for a suggestion: a generation
    box = stopped_box(qtbot, window)
    assert killed == [engine.pid] and engine.died is not None
    qtbot.waitUntil(lambda: banner_state(window, "respond") == "note", timeout=WAIT_MS)
    note = window.editors["respond"].findChild(SuggestionBanner)
    assert "The model process stopped" in note.text.text(), note.text.text()

    # the app still works: the person answers by hand, and it is saved
    editor = window.editors["respond"]
    first_box = next(b for b in editor.findChildren(TextBox) if b.isVisible())
    first_box.setFocus()
    qtbot.keyClicks(first_box, "Please come in today.")
    wait_saved(qtbot, window)
    unit = ids.units["respond"]
    qtbot.waitUntil(
        lambda: "Please come in today." in str(stored_answer(gui.path, unit, "ava")),
        timeout=WAIT_MS,
    )
    assert read_answers(gui.path, keys) == before  # every answer saved before is there

    # Load the model again: a new process, and suggestions work again
    monkeypatch.undo()
    reload_from(qtbot, window, box, engine.pid)
    show_kind(window, "rank")
    qtbot.waitUntil(lambda: banner_state(window, "rank") == "offered", timeout=WAIT_MS)
    window.close()


def test_killed_while_idle_the_app_notices_and_offers_to_reload(qtbot, gui, tmp_path, model):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    engine = load_model(qtbot, window, model)
    host = host_of(window)
    qtbot.waitUntil(lambda: not host._running, timeout=WAIT_MS)  # the open unit's suggestion
    os.kill(engine.pid, signal.SIGKILL)
    box = stopped_box(qtbot, window)
    assert box.windowModality() == Qt.WindowModality.NonModal  # the window stays usable
    # "Not now" closes the box; the app goes on without a model
    not_now = next(b for b in box.buttons() if b.text() == "Not now")
    qtbot.mouseClick(not_now, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: host_of(window).stopped_box is None, timeout=5000)
    assert host_of(window).engine is None
    window.close()


# --- drafting and inbox scoring (the PI) ----------------------------------------------------

MESSAGES = [
    ("u1", 1, "I have crushing chest pain and I am sweating."),
    ("u2", 2, "My child has a fever of 104 and is very sleepy."),
    ("u3", 5, "What can I take for a mild cold?"),
    ("u4", 6, "Please send me my vaccination record."),
]
INBOX = "crash-inbox"


@pytest.fixture
def inbox_study(tmp_path) -> tuple[Path, dict[str, int], list[tuple[str, int, dict, str]]]:
    """Four inbox messages, every pair an urgency unit for ava and ben, who answered some."""
    path = tmp_path / "inbox.prproj"
    with Project.create(path, name="Model process test") as project:
        svc = StudyService(project)
        people = [svc.add_annotator(name, name.title()) for name in ("ava", "ben")]
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        cases = {
            key: svc.add_case(key, text, urgency_level=level, tags={"inbox": INBOX})
            for key, level, text in MESSAGES
        }
        pair_set = svc.create_unit_set("pairs", "urgency")
        units = []
        for (_ka, a), (_kb, b) in itertools.combinations(cases.items(), 2):
            unit = svc.add_unit(pair_set, a, case_b_id=b)
            units.append((unit, a))
            for person in people:
                svc.assign(unit, person)
    saved = [
        (name, unit, {"more_urgent_case_id": first}, "submitted")
        for name, (unit, first) in itertools.product(("ava", "ben"), units[:4])
    ]
    save_answers(path, saved)
    return path, cases, saved


def test_killed_during_inbox_scoring_the_view_says_so_and_sorting_works_again(
    qtbot, tmp_path, inbox_study, model
):
    path, _cases, saved = inbox_study
    keys = [(name, unit) for name, unit, _p, _s in saved]
    before = read_answers(path, keys)
    assert all(v is not None for v in before.values())
    window = open_window(qtbot, preferences(tmp_path), path, "pat")
    engine = load_model(qtbot, window, model)
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: not view.loading and view.result is not None, timeout=WAIT_MS)

    killed: list[int] = []

    def kill_at_first_question(_generation: int, done: int, _total: int) -> None:
        if done == 1 and not killed:  # on the model thread, between two questions
            killed.append(engine.pid)
            os.kill(engine.pid, signal.SIGKILL)

    view._relay.progress.connect(kill_at_first_question, Qt.ConnectionType.DirectConnection)
    view.model_button.click()
    qtbot.waitUntil(lambda: not view.loading, timeout=WAIT_MS)
    assert killed == [engine.pid]
    assert "The model could not sort the inbox: The model process stopped" in view.status.text()
    assert view.model_run is None and not view.keep_button.isVisible()
    box = stopped_box(qtbot, window)
    view._relay.progress.disconnect(kill_at_first_question)

    # the app goes on: the judgements are shown again, every answer is there
    view.refresh_button.click()
    qtbot.waitUntil(lambda: not view.loading and view.result is not None, timeout=WAIT_MS)
    assert view.result.model is None
    assert read_answers(path, keys) == before

    # the model comes back, and the inbox is sorted by it: 4 x 3 ordered pairs
    reload_from(qtbot, window, box, engine.pid)
    view.model_button.click()
    qtbot.waitUntil(lambda: not view.loading, timeout=WAIT_MS)
    assert view.result.model is not None and view.result.model.n_questions == 12
    window.close()


def test_killed_while_a_draft_streams_the_stored_drafts_are_kept(
    qtbot, tmp_path, inbox_study, model, monkeypatch
):
    drafts_end_at_the_limit(monkeypatch)  # the tiny model's drafts end only at the limit
    path, _cases, saved = inbox_study
    keys = [(name, unit) for name, unit, _p, _s in saved]
    before = read_answers(path, keys)
    window = open_window(qtbot, preferences(tmp_path), path, "pat")
    engine = load_model(qtbot, window, model)
    next(a for a in window.tools_menu.actions() if a.text() == "Generate drafts…").trigger()
    dialog = window.findChild(DraftsDialog)
    dialog.max_tokens.setValue(400)
    dialog.by_tags.setChecked(True)
    dialog.tags_edit.setText("")  # every case
    started: list[int] = []
    killed: list[int] = []

    def on_piece(case_id: int, _text: str) -> None:
        if len(started) == 2 and not killed:  # the second draft is being written
            killed.append(engine.pid)
            os.kill(engine.pid, signal.SIGKILL)

    dialog._relay.started.connect(
        lambda case_id, *_: started.append(case_id), Qt.ConnectionType.DirectConnection
    )
    dialog._relay.piece.connect(on_piece, Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(dialog.run_finished, timeout=WAIT_MS) as finished:
        dialog.run_button.click()
    report = finished.args[0]  # the run's report is kept, with why it stopped
    assert killed == [engine.pid] and "SIGKILL" in report.stopped
    assert report.stored == [started[0]]
    status = dialog.status.text()
    assert "The run stopped." in status and "SIGKILL" in status
    assert "drafts stored are kept" in status
    box = stopped_box(qtbot, window)
    dialog._relay.piece.disconnect(on_piece)

    # the first case's draft is stored, the second's (cut off) is not
    drafts = model_drafts(path)
    assert [drafts.count(c) for c in started] == [1, 0] and len(drafts) == 1
    assert read_answers(path, keys) == before

    reload_from(qtbot, window, box, engine.pid)
    with qtbot.waitSignal(dialog.run_finished, timeout=WAIT_MS) as finished:
        dialog.run_button.click()
    report = finished.args[0]
    assert report is not None and report.skipped == [started[0]] and len(report.stored) == 3
    window.close()
