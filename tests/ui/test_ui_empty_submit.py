"""Submit (Ctrl+Enter) on a unit where nothing was entered stores nothing: it once stored an
empty draft, which then counted as begun. Found by an explorer (x_rank p18)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from ui_support import make_gui_study, open_window, show_kind, stored_answer, wait_saved


def _submit(window) -> None:
    QTest.keyClick(window, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("urgency", "choose which patient needs care first"),
        ("rank", "Response A, Response B not ranked yet"),
    ],
)
def test_submitting_an_untouched_unit_stores_nothing(qtbot, gui, prefs, kind, missing):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    window.editors[kind].setFocus()
    _submit(window)
    assert stored_answer(gui.path, gui.ids.units[kind], "ava") is None
    message = window.statusBar().currentMessage()
    assert message.startswith("Not submitted, nothing saved:")
    assert missing in message


def test_a_touched_unit_keeps_its_draft_and_time_on_submit(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    window.session.clock.seconds = 30.0  # time spent reading before the first key
    QTest.keyClick(editor, Qt.Key.Key_1)
    _submit(window)
    stored = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert stored.status == "draft"
    assert stored.active_seconds >= 30.0
    assert window.statusBar().currentMessage().startswith("Saved as a draft, not submitted:")


def test_a_complete_answer_already_saved_still_submits(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_2, Qt.Key.Key_Y):
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)  # stored as a draft: nothing is pending when it is submitted
    _submit(window)
    assert stored_answer(gui.path, gui.ids.units["rank"], "ava").status == "submitted"


def test_a_choice_the_levels_given_contradict_is_kept_as_a_draft(qtbot, gui, prefs):
    """Left patient level 3, right patient level 5, and the right one chosen to need care
    first: it was submitted with "Submitted." (found by an explorer). It is kept as a draft
    and the status bar says what contradicts; a level changed to agree, it is submitted."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    editor.setFocus()
    for key in (Qt.Key.Key_L, Qt.Key.Key_3, Qt.Key.Key_R, Qt.Key.Key_5, Qt.Key.Key_Right):
        QTest.keyClick(editor, key)
    _submit(window)
    unit = gui.ids.units["urgency"]
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    message = window.statusBar().currentMessage()
    assert message.startswith("Saved as a draft, not submitted:")
    assert "the right patient, chosen to need care first, has level 5, less urgent" in message
    for key in (Qt.Key.Key_R, Qt.Key.Key_2):
        QTest.keyClick(editor, key)
    _submit(window)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.status == "submitted" and answer.payload["more_urgent_case_id"] == (
        editor.case_ids[1]
    )


def test_looking_at_a_submitted_answer_the_editor_would_not_take_keeps_it_submitted(
    qtbot, gui, prefs
):
    """An imported urgency answer whose levels contradict its choice was made a draft by
    reading it: the save of the time spent asked the editor's check again (found by an
    explorer). A save that changes no part of the answer keeps it submitted."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    unit, ids = gui.ids.units["urgency"], gui.ids
    levels = {str(ids.case1): 6, str(ids.case2): 1}
    payload = {"more_urgent_case_id": ids.case1, "ask_second": False, "levels": levels}
    with Project.open(gui.path) as project:
        StudyService(project).save_answer(unit, payload, status="submitted", annotator_id=ids.ava)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    qtbot.waitUntil(lambda: window.session.unit is not None)
    window.session.clock.seconds = 5.0  # read for a while, no key pressed
    window.close()
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.status == "submitted" and answer.active_seconds >= 5


def _submitted_then_slipped(qtbot, gui, prefs):
    """ava's urgency unit submitted (the left patient first), then a slip that contradicts it
    (left level 5, right level 2), which made it a draft: (window, editor, unit)."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    editor.setFocus()
    QTest.keyClick(editor, Qt.Key.Key_Left)
    _submit(window)
    unit = gui.ids.units["urgency"]
    assert stored_answer(gui.path, unit, "ava").status == "submitted"
    editor.setFocus()
    for key in (Qt.Key.Key_L, Qt.Key.Key_5, Qt.Key.Key_R, Qt.Key.Key_2):  # the slip
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    return window, editor, unit


def test_a_slip_put_right_after_leaving_the_unit_is_submitted_again(qtbot, gui, prefs):
    """"Put right, it is submitted again" stopped being true once she left the unit and came
    back to put it right (found by an explorer)."""
    window, editor, unit = _submitted_then_slipped(qtbot, gui, prefs)
    show_kind(window, "rank")
    show_kind(window, "urgency")
    qtbot.waitUntil(lambda: window.session.unit is not None and window.session.unit.unit_id == unit)
    editor.setFocus()
    for key in (Qt.Key.Key_R, Qt.Key.Key_0):  # put right: the right patient's level cleared
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").status == "submitted"
    assert window.statusBar().currentMessage() == "Submitted again: the answer is complete again."
    window.close()


def test_a_flag_on_a_unit_a_slip_left_incomplete_does_not_submit_it(qtbot, gui, prefs):
    """A flag saves the answer as it is: on a submitted unit a slip made a draft, it must not
    submit the contradicting answer the editor refuses."""
    window, _editor, unit = _submitted_then_slipped(qtbot, gui, prefs)
    window.session.set_flag(True, "Which one first?")
    answer = stored_answer(gui.path, unit, "ava")
    assert (answer.status, answer.flagged) == ("draft", True)
    window.close()


def _rank_answer(study, unit_id: int, svc) -> dict:
    """Every response ranked and judged, the third incorrect for a reason (C2 and C1, listed
    otherwise than the store keeps them)."""
    members = sorted(r.id for r in svc.read_unit(unit_id).responses)
    reasons = {2: ["C2", "C1"]}
    entries = [
        {"response_id": r, "rank": i + 1, "correct": i != 2, "criteria": reasons.get(i, [])}
        for i, r in enumerate(members)
    ]
    return {"entries": entries}


def _match_answer(study, unit_id: int, svc) -> dict:
    """Every reference sentence decided (no match), every sentence of both sides themed: the
    editor lists the reference's sentences first, the store the draft's (smaller ids)."""
    responses = {r.id: r for r in svc.read_unit(unit_id).responses}
    reference = [s.id for s in responses[study.reference].sentences]
    draft = [s.id for s in responses[study.draft1].sentences]
    return {
        "decisions": [{"sentence_id": s, "spans": []} for s in reference],
        "themes": [{"sentence_id": s, "theme": "empathy"} for s in sorted(reference + draft)],
    }


def _eppc_answer(study, unit_id: int, svc) -> dict:
    """Two codes, which the codebook lists the other way round from their ids' order."""
    labels = [
        {"code": "InfoGiveSDOH", "subcode": "EconomicStability", "spans": [[0, 6]]},
        {"code": "InfoSeek", "subcode": "Symptoms", "spans": [[7, 11]]},
    ]
    return {"labels": labels}


def _a_rank_unit_shuffled_for_ava(gui, svc) -> int:
    """A rank unit of five drafts whose cards ava sees in another order than their ids'."""
    for unit in gui.rank_units:
        shown = [r.id for r in svc.read_unit(unit, as_seen_by=gui.ids.ava).responses]
        if shown != sorted(shown):
            return unit
    raise AssertionError("every rank unit shown in the order of its ids")


@pytest.mark.parametrize("kind", ["rank", "match", "eppc"])
@pytest.mark.parametrize("save", ["flag", "Ctrl+S"])
def test_an_answer_stored_in_another_order_than_shown_is_unchanged(
    qtbot, prefs, tmp_path, kind, save
):
    """A submitted answer the editor would not take now (imported, or made before a newer
    rule) was made a draft by a flag or Ctrl+S: the editor lists entries in its own order (rank
    cards shuffled, codes in codebook order), so its payload never equalled the stored one and
    the save counted as a change (found by an explorer: 149 of the demo's 1,059 submitted
    answers). Only what the answer says is compared: it stays submitted."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    gui = make_gui_study(tmp_path, extra_rank_units=2)
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        unit = _a_rank_unit_shuffled_for_ava(gui, svc) if kind == "rank" else gui.ids.units[kind]
        build = {"rank": _rank_answer, "match": _match_answer, "eppc": _eppc_answer}[kind]
        svc.save_answer(
            unit, build(gui.ids, unit, svc), status="submitted", annotator_id=gui.ids.ava
        )
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert window.go_to_unit(kind, unit)
    session = window.session
    assert session.editor.payload() != session.answer.payload  # the same, listed otherwise
    # a rule added since it was submitted (the store's own rules hold for it)
    session.editor.submit_problem = lambda: "a rule of a newer version is not met"
    assert session.editor.submit_problem()
    if save == "flag":
        session.set_flag(True, "Is this right?")
    else:
        window.save_now()
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.status == "submitted"
    assert answer.flagged is (save == "flag")
    assert "no longer submitted" not in window.statusBar().currentMessage()
    window.close()


def test_a_slip_put_right_after_the_program_was_closed_is_submitted_again(qtbot, gui, prefs):
    """The promise "Put right, it is submitted again" held only until the program was closed:
    the next morning, put right, it stayed a draft (found by an explorer). The answer's
    history says her own save made it a draft."""
    window, _editor, unit = _submitted_then_slipped(qtbot, gui, prefs)
    window.close()
    window = open_window(qtbot, prefs, gui.path, "ava")  # the next morning
    assert window.go_to_unit("urgency", unit)
    editor = window.editors["urgency"]
    editor.setFocus()
    for key in (Qt.Key.Key_R, Qt.Key.Key_0):  # put right: the right patient's level cleared
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").status == "submitted"
    assert window.statusBar().currentMessage() == "Submitted again: the answer is complete again."
    window.close()


def test_a_submitted_answer_an_import_made_a_draft_is_not_submitted_by_a_change(qtbot, gui, prefs):
    """A draft the PI's import made of a submitted answer is not her slip: completing it
    leaves it a draft until she submits it."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    window, _editor, unit = _submitted_then_slipped(qtbot, gui, prefs)
    window.close()
    contradicting = stored_answer(gui.path, unit, "ava").payload
    with Project.open(gui.path) as project:  # the system's service: an import's saves
        service = StudyService(project)
        for status in ("submitted", "draft"):
            chosen = {**contradicting, "levels": {}} if status == "submitted" else contradicting
            service.save_answer(unit, chosen, status=status, annotator_id=gui.ids.ava)
    window = open_window(qtbot, prefs, gui.path, "ava")
    assert window.go_to_unit("urgency", unit)
    editor = window.editors["urgency"]
    editor.setFocus()
    for key in (Qt.Key.Key_R, Qt.Key.Key_0):
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    window.close()
