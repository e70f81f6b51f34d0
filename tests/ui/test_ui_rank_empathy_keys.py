"""Rank drafts and empathy pairs with the keyboard and a screen reader, on a small screen: a
draft's text wraps to its pane (nothing cut off at the right), PageDown scrolls a draft taller
than its pane, every card's buttons are named for their response and reached by Tab, the
editors' accessible names say the current state after each key (and a screen reader is told),
and a rank key that cannot apply says why."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QApplication, QLabel, QRadioButton, QWidget
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.domain.catalogs import DEFAULT_CATALOGS
from portalreview.store.service import CaseView, ResponseView, UnitView
from portalreview.tasks.empathy.editor import EmpathyEditor
from portalreview.tasks.rank.editor import RankEditor
from portalreview.tasks.urgency.editor import UrgencyEditor

LONG = "\n\n".join(
    f"Paragraph {i}: please check your blood pressure and your blood sugar if you have a "
    "monitor at home, and call us if your symptoms do not improve within the next hour."
    for i in range(40)
)
SHORT = "Please rest and call us tomorrow."


def case(case_id: int = 1) -> CaseView:
    return CaseView(
        id=case_id,
        external_id=f"c{case_id}",
        message="My right hand will not work and my words are coming out wrong.",
        chart={"demographics": ["Age: 72"]},
        chart_text="",
        age_band="70-79",
        gender="female",
        sentences=(),
    )


def response(response_id: int, label: str, text: str) -> ResponseView:
    return ResponseView(id=response_id, label=label, text=text, sentences=())


def rank_unit(first_text: str = LONG) -> UnitView:
    texts = [first_text, SHORT, SHORT + " Drink water."]
    return UnitView(
        unit_id=1,
        kind="rank",
        unit_set="drafts",
        position=1,
        cases=(case(),),
        responses=tuple(response(10 + i, f"Response {'ABC'[i]}", t) for i, t in enumerate(texts)),
    )


def shown(qtbot, editor: QWidget, width: int, height: int) -> QWidget:
    """``editor`` in a window of its own of the given size (the editor's page in the main
    window at 1024x768 is 750 px wide; at 1366x768, 1092)."""
    qtbot.addWidget(editor)
    editor.resize(width, height)
    editor.show()
    qtbot.waitExposed(editor)
    editor.activateWindow()
    editor.setFocus()
    qtbot.wait(50)
    return editor


def rank_editor(qtbot, width: int = 750, height: int = 620, text: str = LONG) -> RankEditor:
    editor = RankEditor(DEFAULT_CATALOGS)
    editor.load(rank_unit(text), None)
    return shown(qtbot, editor, width, height)


@pytest.mark.parametrize("width", [750, 1006, 1092])  # 1024x768, 1280x720, 1366x768
def test_a_draft_s_text_wraps_to_its_pane_and_its_buttons_are_in_view(qtbot, width):
    editor = rank_editor(qtbot, width)
    editor.set_correct(editor.order[0], False)  # the reasons show too
    qtbot.wait(50)
    area = editor.cards_area
    assert area.widget().width() <= area.viewport().width()
    texts = {r.id: r.text for r in editor.unit.responses}
    for response_id, card in editor.cards.items():
        body = next(x for x in card.findChildren(QLabel) if x.text() == texts[response_id])
        for widget in (card.title, body, card.correct, card.incorrect):
            right = widget.mapTo(area.viewport(), widget.rect().topRight()).x()
            assert right <= area.viewport().width(), (card.label, widget, right)
    for box in editor.cards[editor.order[0]].reasons.findChildren(QLabel):
        assert box.mapTo(area.viewport(), box.rect().topRight()).x() <= area.viewport().width()


def test_page_down_scrolls_a_draft_taller_than_its_pane_to_its_end(qtbot):
    editor = rank_editor(qtbot)
    bar = editor.cards_area.verticalScrollBar()
    first = editor.cards[editor.order[0]]
    assert first.height() > editor.cards_area.viewport().height()
    assert bar.value() == 0
    qtbot.keyClick(editor, Qt.Key.Key_PageDown)
    assert bar.value() > 0
    assert editor.current == editor.order[0]  # the same response, further down
    for _ in range(40):
        qtbot.keyClick(editor, Qt.Key.Key_PageDown)
    end = first.y() + first.height() - editor.cards_area.viewport().height()
    assert end - 20 <= bar.value() <= end + 20  # its end, not the next card's
    qtbot.keyClick(editor, Qt.Key.Key_Home)
    assert bar.value() <= first.y()
    qtbot.keyClick(editor, Qt.Key.Key_End)
    assert end - 20 <= bar.value() <= end + 20
    qtbot.keyClick(editor, Qt.Key.Key_PageUp)
    assert bar.value() < end - 20
    # A rank keeps the scroll where it is (it used to jump to the card's middle).
    here = bar.value()
    qtbot.keyClick(editor, Qt.Key.Key_1)
    assert editor.state["ranks"][editor.order[0]] == 1
    assert bar.value() == here
    # Down goes to the next response and shows it.
    qtbot.keyClick(editor, Qt.Key.Key_Down)
    card = editor.cards[editor.current]
    top = card.mapTo(editor.cards_area.viewport(), card.rect().topLeft()).y()
    assert top >= 0 and top + card.height() <= editor.cards_area.viewport().height()


def test_empathy_page_down_scrolls_a_long_response(qtbot):
    editor = EmpathyEditor(DEFAULT_CATALOGS)
    unit = UnitView(
        unit_id=2,
        kind="empathy",
        unit_set="pairs",
        position=1,
        cases=(case(),),
        responses=(response(1, "Response 1", LONG), response(2, "Response 2", SHORT)),
    )
    editor.load(unit, None)
    shown(qtbot, editor, 750, 620)
    bar = editor.cards[0].area.verticalScrollBar()
    assert bar.maximum() > 0
    qtbot.keyClick(editor, Qt.Key.Key_PageDown)
    assert bar.value() > 0
    qtbot.keyClick(editor, Qt.Key.Key_End)
    assert bar.value() == bar.maximum()
    qtbot.keyClick(editor, Qt.Key.Key_Home)
    assert bar.value() == 0
    qtbot.keyClick(editor, Qt.Key.Key_2)
    assert editor.payload() == {"more_empathetic_response_id": 2}  # the choice keys still work
    assert editor.accessibleName() == "Empathy pairs: response 2 is more empathetic"


def test_every_card_s_buttons_are_named_for_their_response_and_reached_by_tab(qtbot):
    editor = rank_editor(qtbot, text=SHORT)
    names = [b.accessibleName() for b in editor.findChildren(QRadioButton)]
    assert sorted(names) == sorted(
        f"Response {x}: {what}" for x in "ABC" for what in ("correct", "incorrect")
    )
    reached = []
    for _ in range(40):  # the whole Tab chain (the case panel's sections, the list...)
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        reached.append(QApplication.focusWidget())
    radios = {w.accessibleName() for w in reached if isinstance(w, QRadioButton)}
    assert radios == set(names)
    # Focus on a card's button makes it the current response; Space marks it.
    editor.cards[editor.order[1]].incorrect.setFocus()
    assert editor.current == editor.order[1]
    qtbot.keyClick(editor.cards[editor.order[1]].incorrect, Qt.Key.Key_Space)
    assert editor.state["correct"][editor.order[1]] is False


def accessible_name(widget: QWidget) -> str:
    return QAccessible.queryAccessibleInterface(widget).text(QAccessible.Text.Name)


def test_the_rank_editor_s_name_says_the_current_response_and_its_state(qtbot, monkeypatch):
    told = []
    original = QAccessible.updateAccessibility
    monkeypatch.setattr(
        QAccessible,
        "updateAccessibility",
        lambda event: (told.append((event.object(), event.type())), original(event)),
    )
    editor = rank_editor(qtbot, text=SHORT)
    assert accessible_name(editor).startswith("Rank drafts: Response A of 3, not ranked")
    told.clear()
    for key in (Qt.Key.Key_Down, Qt.Key.Key_2, Qt.Key.Key_Y):
        qtbot.keyClick(editor, key)
        assert (editor, QAccessible.Event.NameChanged) in told, key
        told.clear()
    assert accessible_name(editor) == "Rank drafts: Response B of 3, rank 2 of 3, marked correct"
    qtbot.keyClick(editor, Qt.Key.Key_N)
    qtbot.keyClick(editor, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert accessible_name(editor).endswith("rank 2 of 3, marked incorrect: C1")


def test_rank_keys_that_cannot_apply_say_why(qtbot):
    editor = rank_editor(qtbot, text=SHORT)
    before = editor.payload()
    said = []
    editor.said.connect(said.append)  # for the window's status bar
    qtbot.keyClick(editor, Qt.Key.Key_5)  # three responses
    assert editor.payload() == before
    assert said and "ranks go from 1 to 3" in said[-1]
    assert editor.notice.isVisible()
    assert "ranks go from 1 to 3" in editor.notice.text()
    assert "ranks go from 1 to 3" in editor.accessibleName()  # and a screen reader hears it
    qtbot.keyClick(editor, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert editor.payload() == before
    assert "not marked incorrect" in editor.notice.text()
    assert "press N first" in editor.notice.text()
    qtbot.keyClick(editor, Qt.Key.Key_9, Qt.KeyboardModifier.AltModifier)
    assert "Alt+1 to Alt+3" in editor.notice.text()
    qtbot.keyClick(editor, Qt.Key.Key_1)  # a key that works clears the message
    assert not editor.notice.isVisible()
    assert editor.state["ranks"][editor.order[0]] == 1


def test_the_urgency_editor_s_name_says_the_choice_and_the_levels(qtbot):
    editor = UrgencyEditor(DEFAULT_CATALOGS)
    unit = UnitView(
        unit_id=3,
        kind="urgency",
        unit_set="pairs",
        position=1,
        cases=(case(1), case(2)),
        responses=(),
    )
    editor.load(unit, None)
    shown(qtbot, editor, 750, 620)
    assert accessible_name(editor) == "Urgency pairs: no patient chosen yet"
    for key in (Qt.Key.Key_Right, Qt.Key.Key_L):
        qtbot.keyClick(editor, key)
    assert accessible_name(editor) == (
        "Urgency pairs: the right patient needs care first; press 1-6 for the left patient's level"
    )
    qtbot.keyClick(editor, Qt.Key.Key_2)
    level = next(x for x in DEFAULT_CATALOGS.urgency_levels if x.level == 2)
    assert accessible_name(editor) == (
        f"Urgency pairs: the right patient needs care first; left patient level 2, {level.name}"
    )


def test_a_response_marked_incorrect_without_a_reason_is_not_submitted(qtbot, gui, prefs):
    """Seed 001 Sec. 5: "incorrect" means meeting at least one of C1-C3, so a submission with
    an incorrect response and no reason is kept as a draft, saying which response and why."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_1, Qt.Key.Key_N):
        qtbot.keyClick(editor, key)
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    unit = gui.ids.units["rank"]
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "draft"
    assert [e["correct"] for e in stored.payload["entries"]] != [None, None]  # the work is kept
    message = window.statusBar().currentMessage()
    assert message.startswith("Saved as a draft, not submitted: Response B marked incorrect")
    assert "tick at least one of C1-C3" in message

    qtbot.keyClick(editor, Qt.Key.Key_3, Qt.KeyboardModifier.AltModifier)  # C3
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted"
    by_label = {editor.cards[e["response_id"]].label: e for e in stored.payload["entries"]}
    assert by_label["Response B"]["correct"] is False
    assert by_label["Response B"]["criteria"] == ["C3"]


def test_undo_of_a_slip_on_a_submitted_unit_submits_it_again(qtbot, gui, prefs):
    """One key on a submitted unit that left the answer incomplete (Backspace clears a rank)
    made it a draft, and Ctrl+Z put the answer back on screen but left it a draft, not
    counted done (found by an explorer). The unit goes back to submitted, and the status
    bar says it stopped being submitted and that it is again."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_2, Qt.Key.Key_Y):
        qtbot.keyClick(editor, key)
    window.act_submit.trigger()
    unit = gui.ids.units["rank"]
    assert stored_answer(gui.path, unit, "ava").status == "submitted"
    window.queue.select_unit(unit)
    qtbot.waitUntil(lambda: window.session.unit.unit_id == unit)
    submitted = stored_answer(gui.path, unit, "ava").payload
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Backspace)  # the slip: the current response's rank
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    assert window.kind_tabs.tabText(window.kinds.index("rank")).endswith("(0/1)")
    message = window.statusBar().currentMessage()
    assert message.startswith("Saved as a draft, no longer submitted:")
    qtbot.keyClick(editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.status == "submitted" and answer.payload == submitted
    assert window.kind_tabs.tabText(window.kinds.index("rank")).endswith("(1/1)")
    assert window.statusBar().currentMessage() == "Submitted again: the answer is complete again."
    window.close()
