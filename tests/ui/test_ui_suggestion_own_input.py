"""A flag or a comment the person adds while a model suggestion is offered (neither accepted
nor changed) is theirs: it is kept and saved, and never makes the suggestion their answer.
It is saved with the answer when they accept or edit the suggestion, at once when they
dismiss it (the comment stays on screen), and, when they leave the unit without deciding,
with an answer that sets the suggestion aside (recorded as ignored) and holds nothing of the
model's. Before, the flag and its note were dropped, and Dismiss emptied the comment box."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from ui_support import open_window, preferences, show_kind, stored_answer

from portalreview.ui.flag_dialog import REMOVE_FLAG, FlagNoteDialog
from portalreview.ui.suggestions import SuggestionBanner


@pytest.fixture
def offered(qtbot, gui, tmp_path):
    """ava's window with a stored (overnight) suggestion offered on the urgency unit."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    unit = window.admin.read_unit(gui.ids.units["urgency"])
    payload = {"more_urgent_case_id": unit.cases[0].id, "ask_second": False, "levels": {}}
    window.admin.add_suggestion(
        unit.unit_id,
        payload,
        model_file="overnight.gguf",
        model_sha256="0" * 64,
        template_id="urgency_pair@v1",
    )
    show_kind(window, "urgency")
    window.show_unit(unit.unit_id)
    qtbot.waitUntil(lambda: window.session.suggestion_state == "offered", timeout=5000)
    return window


def banner(window) -> SuggestionBanner:
    return window.editors["urgency"].findChild(SuggestionBanner)


def remove_the_flag(window) -> None:
    """Flag for the PI on a flagged unit, and Remove the flag in its dialog."""
    with patch.object(FlagNoteDialog, "exec", lambda _dialog: REMOVE_FLAG):
        window.toggle_flag()


def urgency_answer(gui):
    return stored_answer(gui.path, gui.ids.units["urgency"], "ava")


def test_a_flag_set_while_a_suggestion_is_offered_is_saved_on_leaving(qtbot, offered, gui):
    offered.session.set_flag(True, "Self-harm mentioned in the second line")
    assert urgency_answer(gui) is None  # the suggestion is not the answer
    assert offered.session.flagged
    assert offered.save_label.text() == "⚠ Not saved"
    assert "flag" in offered.save_problem.text()

    show_kind(offered, "rank")  # leaves the unit without deciding on the suggestion
    answer = urgency_answer(gui)
    assert answer is not None and answer.status == "draft"
    assert answer.flagged and answer.flag_note == "Self-harm mentioned in the second line"
    assert answer.suggestion_use == "ignored"
    assert answer.payload["more_urgent_case_id"] is None  # nothing of the model's


def test_a_flag_set_while_offered_is_saved_with_the_accepted_suggestion(qtbot, offered, gui):
    offered.session.set_flag(True, "Please look")
    offered.act_accept.trigger()
    answer = urgency_answer(gui)
    assert answer.suggestion_use == "accepted"
    assert answer.flagged and answer.flag_note == "Please look"
    assert answer.payload["more_urgent_case_id"] is not None


def test_a_flag_set_while_offered_can_be_taken_back_before_it_is_saved(qtbot, offered, gui):
    offered.session.set_flag(True, "Please look")
    remove_the_flag(offered)
    assert not offered.session.flagged
    offered.act_accept.trigger()
    assert not urgency_answer(gui).flagged


def test_a_comment_typed_while_offered_survives_dismiss_and_is_saved(qtbot, offered, gui):
    editor = offered.editors["urgency"]
    qtbot.keyClicks(editor.comment, "Patient B called twice")
    qtbot.wait(50)
    offered.session.save()  # the autosave: refused, the suggestion is not the answer
    assert urgency_answer(gui) is None

    offered.act_dismiss.trigger()
    assert not banner(offered).isVisible()
    assert editor.comment.text() == "Patient B called twice"
    answer = urgency_answer(gui)
    assert answer is not None and answer.comment == "Patient B called twice"
    assert answer.suggestion_use == "ignored"
    assert answer.payload["more_urgent_case_id"] is None


def test_a_comment_typed_while_offered_is_saved_on_leaving(qtbot, offered, gui):
    qtbot.keyClicks(offered.editors["urgency"].comment, "Patient B called twice")
    qtbot.wait(50)
    offered.session.save()
    show_kind(offered, "rank")
    answer = urgency_answer(gui)
    assert answer is not None and answer.comment == "Patient B called twice"
    assert answer.suggestion_use == "ignored"

    show_kind(offered, "urgency")  # back: the comment, an empty form, no suggestion offered
    assert offered.editors["urgency"].comment.text() == "Patient B called twice"
    assert offered.session.suggestion_state == "ignored"


def test_leaving_an_offered_suggestion_with_nothing_of_ones_own_saves_nothing(qtbot, offered, gui):
    show_kind(offered, "rank")
    assert urgency_answer(gui) is None


def test_a_flag_set_and_taken_back_while_offered_leaves_nothing_to_save(qtbot, offered, gui):
    offered.session.set_flag(True, "Please look")
    remove_the_flag(offered)
    assert not offered.session.has_held_input()
    show_kind(offered, "rank")
    assert urgency_answer(gui) is None  # no empty draft, the suggestion not set aside
    show_kind(offered, "urgency")
    qtbot.waitUntil(lambda: offered.session.suggestion_state == "offered", timeout=5000)


def test_an_accepted_suggestion_left_as_it_is_can_be_dismissed(qtbot, offered, gui):
    """Accept pressed by a slip of the key was kept as "accepted" for good: Undo had nothing
    to undo and Dismiss was refused. Dismiss now takes it back while the answer is still the
    suggestion; once changed, the answer is the person's edit and stays."""
    offered.act_accept.trigger()
    assert urgency_answer(gui).suggestion_use == "accepted"
    assert banner(offered).dismiss_button.isVisible()
    offered.act_dismiss.trigger()
    answer = urgency_answer(gui)
    assert answer.suggestion_use == "ignored" and answer.status == "draft"
    assert answer.payload["more_urgent_case_id"] is None  # nothing of the model's kept
    assert not banner(offered).isVisible()


def test_the_dismissal_note_does_not_follow_to_the_next_unit(qtbot, offered, gui):
    offered.act_dismiss.trigger()
    assert "Suggestion dismissed" in offered.statusBar().currentMessage()
    show_kind(offered, "rank")
    assert "Suggestion dismissed" not in offered.statusBar().currentMessage()


def test_a_flag_held_beside_an_offered_suggestion_survives_a_crash(qtbot, offered, gui):
    """The banner said the flag and comment were kept, but only the screen held them: killed
    then, the program lost them. They are kept on this computer as leaving the unit would save
    them (the suggestion set aside), and put back at the next sign-in."""
    offered.session.set_flag(True, "Self-harm mentioned in the second line")
    unit = gui.ids.units["urgency"]
    kept = offered.session.unsaved.read(unit)
    assert kept is not None and kept.flag["flag_note"] == "Self-harm mentioned in the second line"
    assert kept.suggestion_use == "ignored" and kept.payload == {}
    offered.session.put_back(kept)  # what the next sign-in's "Yes" does
    answer = urgency_answer(gui)
    assert answer.flagged and answer.flag_note == "Self-harm mentioned in the second line"
    assert answer.suggestion_use == "ignored" and answer.payload["more_urgent_case_id"] is None
    assert offered.session.unsaved.kept() == []
