"""What the person did with a suggestion is kept. A model that finishes loading (load at start,
a server reconnect) while a unit is on screen never puts a suggestion over what the person
already did with that unit: a dismissed suggestion stays dismissed, and typing not yet
autosaved stays on screen and is saved. An answer is recorded "accepted" when it is the
suggestion unchanged and "edited" when it differs, whichever way it got there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt
from ui_support import open_window, preferences, show_kind, stored_answer, wait_saved

from portalreview.ui.suggestions import SuggestionBanner

SUGGESTED = "Please go to the emergency room now."


class _Info(SimpleNamespace):
    def describe(self) -> str:
        return f"{self.file_name} (fake)"


class _Engine(SimpleNamespace):
    def close(self) -> None:
        self.closed = True


def loaded_engine(window) -> None:
    """What the model host does when a model finished loading."""
    engine = _Engine(info=_Info(file_name="late.gguf"), closed=False, sha256="f" * 64)
    window.suggestions.host.engine = engine
    window.suggestions.host.engine_changed.emit(engine)


@pytest.fixture
def offered(qtbot, gui, tmp_path):
    """ava's window with a stored (overnight) suggestion offered on the respond unit."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    themes = [t.id for t in window.admin.catalogs.themes]
    payload = {"mode": "theme_guided", "parts": {themes[0]: SUGGESTED}, "notes": ""}
    window.admin.add_suggestion(
        gui.ids.units["respond"],
        payload,
        model_file="overnight.gguf",
        model_sha256="0" * 64,
        template_id="respond_boxes@v1",
    )
    show_kind(window, "respond")
    window.show_unit(gui.ids.units["respond"])
    qtbot.waitUntil(lambda: window.session.suggestion_state == "offered", timeout=5000)
    return window


def banner(window) -> SuggestionBanner:
    return window.editors["respond"].findChild(SuggestionBanner)


def test_a_dismissed_suggestion_stays_dismissed_when_a_model_loads(qtbot, offered):
    offered.act_dismiss.trigger()
    loaded_engine(offered)
    qtbot.wait(50)
    assert offered.session.suggestion_state == "ignored"
    assert offered.editors["respond"].payload()["parts"] == {}
    assert not banner(offered).isVisible()


def test_typing_before_the_first_autosave_survives_a_model_loading(qtbot, offered, gui):
    offered.act_dismiss.trigger()
    editor = offered.editors["respond"]
    box = editor.boxes["symptom_questions"]
    box.setFocus()
    qtbot.keyClicks(box, "My own words")
    assert offered.session.pending  # the load lands before the first autosave
    loaded_engine(offered)
    assert editor.payload()["parts"] == {"symptom_questions": "My own words"}
    wait_saved(qtbot, offered)
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert answer is not None and answer.payload["parts"] == {"symptom_questions": "My own words"}
    assert answer.suggestion_use == "ignored"


def test_an_offered_suggestion_stays_as_it_is_when_a_model_loads(qtbot, offered):
    offered_id = offered.session.suggestion_id
    loaded_engine(offered)
    assert offered.session.suggestion_state == "offered"
    assert offered.session.suggestion_id == offered_id
    assert banner(offered).state == "offered"
    assert offered.suggestions.job is None  # the model is not asked over it
    box = offered.editors["respond"].boxes["symptom_questions"]
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_X)
    wait_saved(qtbot, offered)
    assert offered.session.suggestion_state == "edited"


def stored_use(gui) -> tuple[str, dict]:
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    return answer.suggestion_use, answer.payload["parts"]


def type_x(qtbot, window) -> None:
    box = window.editors["respond"].boxes["symptom_questions"]
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(box, Qt.Key.Key_X)
    wait_saved(qtbot, window)


def delete_x(qtbot, window) -> None:
    box = window.editors["respond"].boxes["symptom_questions"]
    assert box.toPlainText() == "x"
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(box, Qt.Key.Key_Backspace)
    wait_saved(qtbot, window)


def reopen(window, gui) -> None:
    show_kind(window, "rank")
    show_kind(window, "respond")
    window.show_unit(gui.ids.units["respond"])


def test_an_edit_undone_back_to_the_suggestion_is_accepted(qtbot, offered, gui):
    suggested = offered.editors["respond"].payload()["parts"]
    type_x(qtbot, offered)
    assert stored_use(gui)[0] == "edited"
    offered.act_undo.trigger()
    wait_saved(qtbot, offered)
    assert stored_use(gui) == ("accepted", suggested)
    assert offered.session.suggestion_state == "accepted"
    offered.act_accept.trigger()  # the answer is still the suggestion: Accept is not refused
    assert "no suggestion to accept" not in offered.statusBar().currentMessage()
    assert stored_use(gui) == ("accepted", suggested)


@pytest.mark.parametrize("accept_first", [True, False])
def test_edited_then_changed_back_after_reopening_is_accepted(qtbot, offered, gui, accept_first):
    suggested = offered.editors["respond"].payload()["parts"]
    if accept_first:
        offered.act_accept.trigger()
        assert stored_use(gui)[0] == "accepted"
    type_x(qtbot, offered)
    assert stored_use(gui)[0] == "edited"
    reopen(offered, gui)
    assert offered.session.suggestion_state == "edited"
    delete_x(qtbot, offered)
    assert stored_use(gui) == ("accepted", suggested)
    type_x(qtbot, offered)  # and away from it again
    assert stored_use(gui)[0] == "edited"
