"""The rank screen's drafts, as a clinician meets them: a draft's text is shown as stored
(never read as markup), a click anywhere on a draft makes it the one the keys act on, and the
window's shortcuts (Ctrl+Y, Alt+N...) never record a judgement."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

MARKUP = (
    "Hi Mr. Lee, your <b>troponin</b> result is back.\n"
    "Take aspirin <325 mg> only if told.\n"
    "<!-- drafted by model X -->\n"
    "Call 911 if the pain spreads to your arm."
)


@pytest.fixture
def three_drafts(tmp_path: Path) -> tuple[Path, int, list[int]]:
    """A rank unit of three drafts for ava, the first one with text that looks like HTML."""
    path = tmp_path / "rank.prproj"
    with Project.create(path, name="Rank cards") as project:
        ids = build_small_study(project)
        svc = StudyService(project)
        texts = [MARKUP, "Please go to the emergency room now.", "Rest, and call us tomorrow."]
        drafts = [
            svc.add_response(ids.case1, f"card-{n}", text, author_kind="model", author=f"m{n}")
            for n, text in enumerate(texts)
        ]
        unit = svc.add_unit(svc.create_unit_set("cards", "rank"), ids.case1, members=drafts)
        svc.assign(unit, ids.ava)
    return path, unit, drafts


def _rank_editor(qtbot, prefs, path: Path, unit: int):
    window = open_window(qtbot, prefs, path, "ava")
    show_kind(window, "rank")
    assert window.queue.select_unit(unit)
    editor = window.editors["rank"]
    editor.setFocus()
    return window, editor


def test_a_draft_is_shown_as_stored_never_as_markup(qtbot, prefs, three_drafts):
    path, unit, drafts = three_drafts
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    body = editor.cards[drafts[0]].body
    assert body.text() == MARKUP
    # Read as rich text, the four lines ran into one and "<325 mg>" and the comment vanished.
    width = 2000
    assert body.heightForWidth(width) >= 4 * body.fontMetrics().lineSpacing()
    assert body.textFormat() == Qt.TextFormat.PlainText
    window.close()


def test_a_click_on_a_draft_s_text_makes_it_the_one_the_keys_act_on(qtbot, prefs, three_drafts):
    path, unit, _drafts = three_drafts
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    first, clicked = editor.order[0], editor.order[2]
    assert editor.current == first
    card = editor.cards[clicked]
    editor.cards_area.ensureWidgetVisible(card.body)
    QTest.mouseClick(card.body, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert editor.current == clicked
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_2)
    assert editor.state["ranks"].get(clicked) == 2 and not editor.state["ranks"].get(first)
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_Up)  # Up and Down still choose a draft
    assert editor.current == editor.order[1]
    window.close()


@pytest.mark.parametrize(
    ("key", "modifier"),
    [
        (Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier),  # Redo, with nothing to redo
        (Qt.Key.Key_8, Qt.KeyboardModifier.ControlModifier),
        (Qt.Key.Key_N, Qt.KeyboardModifier.AltModifier),
        (Qt.Key.Key_Backspace, Qt.KeyboardModifier.AltModifier),  # Undo, nothing to undo
    ],
)
def test_a_shortcut_is_never_a_judgement(qtbot, prefs, three_drafts, key, modifier):
    path, unit, _drafts = three_drafts
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    current = editor.current
    qtbot.keyClick(editor, Qt.Key.Key_1)  # a rank to clear, were Alt+Backspace taken for one
    editor.undo_stack.clear()  # nothing to undo or redo: the shortcut has nothing to do
    qtbot.keyClick(editor, key, modifier)
    assert editor.state["correct"].get(current) is None
    assert editor.state["ranks"].get(current) == 1
    wait_saved(qtbot, window)
    window.close()
    answer = stored_answer(path, unit, "ava")
    assert answer is None or not any(v is not None for v in answer.payload.get("correct", {}))


def test_submitting_an_unfinished_ranking_names_the_drafts_missing(qtbot, prefs, three_drafts):
    """It said "1 response(s) have no rank yet", then, once that was put right, "1 response(s)
    are not marked correct or incorrect": the clinician searched the drafts twice."""
    path, unit, _drafts = three_drafts
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    first, second, third = editor.order
    labels = {r: editor.cards[r].label for r in editor.order}
    editor.set_rank(first, 1)
    editor.set_correct(first, True)
    editor.set_rank(second, 2)
    editor.set_correct(third, True)
    problem = editor.submit_problem()
    assert problem == (
        f"{labels[third]} not ranked yet; {labels[second]} not marked correct or incorrect"
    )
    window.act_submit.trigger()
    assert labels[third] in window.statusBar().currentMessage()
    assert window.session.unit.unit_id == unit  # kept, to finish it
    window.close()


def test_ten_drafts_are_ranked_from_the_keyboard_alone(qtbot, prefs, tmp_path, monkeypatch):
    """Only 1-9 gave a rank: "1" then "0" gave rank 1 and cleared it, and the tenth draft could
    be ranked only by dragging it with the mouse."""
    from portalreview.tasks.rank import editor as rank_editor

    path = tmp_path / "ten.prproj"
    with Project.create(path, name="Ten drafts") as project:
        ids = build_small_study(project)
        svc = StudyService(project)
        drafts = [
            svc.add_response(ids.case1, f"ten-{n}", f"Draft {n}.", author_kind="model", author="m")
            for n in range(10)
        ]
        unit = svc.add_unit(svc.create_unit_set("ten", "rank"), ids.case1, members=drafts)
        svc.assign(unit, ids.ava)
    now = [1000.0]
    monkeypatch.setattr(rank_editor.time, "monotonic", lambda: now[0])
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    for rank in range(1, 11):
        for digit in str(rank):
            qtbot.keyClick(editor, getattr(Qt.Key, f"Key_{digit}"))
            now[0] += 0.3
        now[0] += 2  # a pause before the next draft
        qtbot.keyClick(editor, Qt.Key.Key_Y)
        qtbot.keyClick(editor, Qt.Key.Key_Down)
    assert [editor.state["ranks"][r] for r in editor.order] == list(range(1, 11))
    # a digit after a pause is a rank of its own; 0 then clears
    qtbot.keyClick(editor, Qt.Key.Key_Up)  # the tenth draft
    now[0] += 2
    qtbot.keyClick(editor, Qt.Key.Key_0)
    assert editor.state["ranks"].get(editor.order[-1]) is None
    window.close()


def test_a_draft_dropped_onto_an_unranked_one_ties_with_it(qtbot, prefs, three_drafts):
    """The tip says "drop onto another response to tie with it": dropped onto an unranked
    draft, the first one went last and the other stayed unranked."""
    path, unit, _drafts = three_drafts
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    first, second, third = editor.order
    editor.set_rank(first, 1)
    editor.set_rank(second, 2)
    editor.move_in_ranking(first, third, "onto")  # as the list's drop hands it over
    assert editor.state["ranks"] == {second: 1, third: 2, first: 2}
    window.close()


def test_the_reasons_of_a_long_draft_marked_incorrect_come_into_view(qtbot, prefs, tmp_path):
    """At 18 pt in a 1024 x 640 window, N on a long draft showed "Why incorrect?" and C1-C3
    below the pane, out of sight: the clinician did not see what to tick. The pane now shows
    them (their start, where they are taller than the pane)."""
    path = tmp_path / "long.prproj"
    long_text = " ".join(f"Sentence {n} about blood pressure at home." for n in range(40))
    with Project.create(path, name="Long draft") as project:
        ids = build_small_study(project)
        svc = StudyService(project)
        drafts = [
            svc.add_response(ids.case1, f"long-{n}", text, author_kind="model", author=f"m{n}")
            for n, text in enumerate((long_text, "Rest, and call us tomorrow."))
        ]
        unit = svc.add_unit(svc.create_unit_set("long", "rank"), ids.case1, members=drafts)
        svc.assign(unit, ids.ava)
    prefs.set_point_size("ava", 18)
    window, editor = _rank_editor(qtbot, prefs, path, unit)
    window.resize(1024, 640)
    QTest.qWait(50)
    editor.set_current(drafts[0])
    QTest.keyClick(editor, Qt.Key.Key_N)
    reasons = editor.cards[drafts[0]].reasons
    viewport = editor.cards_area.viewport()
    top = reasons.mapTo(viewport, QPoint(0, 0)).y()
    assert reasons.isVisible()
    assert 0 <= top < viewport.height() // 2, top  # "Why incorrect?" and the first reasons
    window.close()
