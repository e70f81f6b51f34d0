"""Urgency pairs, the inbox view and empathy pairs, driven like a person would: keys choose the
patient or the response, the file holds the chosen *case* / *response* whichever side it was
shown on (both sides checked), undo walks back, the inbox view sorts as the win rates say, and a
clinician's inbox view shows nothing of the reference levels."""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from ui_support import held_off_gui_thread, open_window, show_kind, stored_answer, wait_saved

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.urgency.inbox import judges, load_inbox
from portalreview.ui import inbox_view

INBOX = "test-inbox"
# (external id, reference level, message): one message per level, 1 = most urgent.
MESSAGES = [
    ("m1", 1, "Crushing chest pain and my left arm is numb."),
    ("m2", 2, "My toddler has had a fever of 104 since this morning."),
    ("m3", 3, "My ankle is still swollen three days after I twisted it."),
    ("m4", 4, "My knee has ached on and off for a few months."),
    ("m5", 5, "What can I take for a mild cold?"),
    ("m6", 6, "Please send me a copy of my vaccination record."),
]


@dataclass
class PairStudy:
    path: Path
    cases: dict[str, int]  # external id -> case id
    levels: dict[int, int]  # case id -> reference level
    pairs: dict[int, tuple[int, int]]  # urgency unit -> (case_id, case_b_id) as stored
    empathy: dict[int, tuple[int, int]]  # empathy unit -> (response_id, response_b_id)


def make_pair_study(folder: Path) -> PairStudy:
    """Six inbox messages, every pair of them as urgency units for ava and ben, and empathy
    pairs for ava until her screen shows both orders."""
    path = folder / "pairs.prproj"
    project = Project.create(path, name="Pairs test study")
    try:
        svc = StudyService(project)
        ava = svc.add_annotator("ava", "Ava (RN)")
        ben = svc.add_annotator("ben", "Dr. Ben")
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        cases = {
            key: svc.add_case(
                key,
                text,
                {"demographics": ["Age: 50"], "problems": [f"Problem of {key}"]},
                urgency_level=level,
                tags={"inbox": INBOX},
            )
            for key, level, text in MESSAGES
        }
        levels = {cases[key]: level for key, level, _ in MESSAGES}
        pair_set = svc.create_unit_set("inbox pairs", "urgency")
        pairs = {}
        for a, b in itertools.combinations(cases.values(), 2):
            unit = svc.add_unit(pair_set, a, case_b_id=b)
            pairs[unit] = (a, b)
            for person in (ava, ben):
                svc.assign(unit, person)
        empathy_set = svc.create_unit_set("empathy pairs", "empathy")
        seen: set[bool] = set()
        empathy: dict[int, tuple[int, int]] = {}
        ava_view = svc.as_viewer("ava")
        for i in range(40):
            case = cases["m3"]
            kind = svc.add_response(case, f"kind{i}", f"I am so sorry your ankle hurts ({i}).")
            blunt = svc.add_response(case, f"blunt{i}", f"Ice it ({i}).")
            unit = svc.add_unit(empathy_set, case, response_id=kind, response_b_id=blunt)
            svc.assign(unit, ava)
            empathy[unit] = (kind, blunt)
            seen.add(ava_view.read_unit(unit).presentation["swap"])
            if len(seen) == 2 and len(empathy) >= 2:
                break
    finally:
        project.close()
    return PairStudy(path, cases, levels, pairs, empathy)


@pytest.fixture
def study(tmp_path):
    return make_pair_study(tmp_path)


def swap_of(path: Path, unit: int, who: str) -> bool:
    with Project.open(path, read_only=True) as project:
        return StudyService(project).as_viewer(who).read_unit(unit).presentation["swap"]


def units_by_swap(study: PairStudy, units, who: str = "ava") -> dict[bool, int]:
    """One unit shown in the stored order and one shown swapped, to ``who``."""
    found: dict[bool, int] = {}
    for unit in units:
        found.setdefault(swap_of(study.path, unit, who), unit)
    assert set(found) == {False, True}, "need units shown both ways"
    return found


def go_to(window, unit: int) -> None:
    window.queue.jump_to_number(window.queue.numbers[unit])
    assert window.session.unit.unit_id == unit


def submit(qtbot, window) -> None:
    """Ctrl+Enter: submit, then the app moves on to the next unit to do (if any is left)."""
    unit = window.session.unit.unit_id
    window.act_submit.trigger()
    assert window.session.answer.status == "submitted"
    qtbot.waitUntil(
        lambda: (
            window.session.unit.unit_id != unit
            or "Everything in this list is done" in window.statusBar().currentMessage()
        ),
        timeout=5000,
    )


def press(qtbot, widget, *keys) -> None:
    for key in keys:
        qtbot.keyClick(widget, key)


# --- urgency pairs -------------------------------------------------------------------------


def test_pairs_judged_by_keyboard_store_the_case_not_the_side(qtbot, study, prefs):
    window = open_window(qtbot, prefs, study.path, "ava")
    assert window.kinds == ["urgency", "empathy"]
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    by_swap = units_by_swap(study, sorted(study.pairs))
    expected = {}
    for swap, unit in sorted(by_swap.items()):
        go_to(window, unit)
        a, b = study.pairs[unit]
        left, right = (b, a) if swap else (a, b)
        # the screen shows the pair in the order recorded for ava
        assert [side.case_id for side in editor.sides] == [left, right]
        ext = {v: k for k, v in study.cases.items()}
        assert ext[left] in editor.sides[0].case_panel.header.text()
        assert ext[right] in editor.sides[1].case_panel.header.text()
        editor.setFocus()
        if swap:
            # the right patient (by arrow), left patient's level 2, a hard pair
            press(qtbot, editor, Qt.Key.Key_Right, Qt.Key.Key_L, Qt.Key.Key_2, Qt.Key.Key_A)
            expected[unit] = {
                "more_urgent_case_id": right,
                "ask_second": True,
                "levels": {str(left): 2},
            }
        else:
            # the left patient (by digit), the right patient's level 5
            press(qtbot, editor, Qt.Key.Key_1, Qt.Key.Key_R, Qt.Key.Key_5)
            expected[unit] = {
                "more_urgent_case_id": left,
                "ask_second": False,
                "levels": {str(right): 5},
            }
        assert editor.sides[0 if not swap else 1].chosen
        wait_saved(qtbot, window)
        submit(qtbot, window)
    window.close()

    for unit, payload in expected.items():
        answer = stored_answer(study.path, unit, "ava")
        assert (unit, answer.payload) == (unit, payload)
        assert (unit, answer.status) == (unit, "submitted")
        # whichever side it was on, the chosen case is the one the person saw there
        assert answer.payload["more_urgent_case_id"] in study.pairs[unit]


def test_urgency_undo_walks_back_choice_level_and_hard_pair(qtbot, study, prefs):
    window = open_window(qtbot, prefs, study.path, "ben")
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    unit = window.session.unit.unit_id
    left, right = editor.case_ids
    editor.setFocus()
    press(qtbot, editor, Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_A)
    press(qtbot, editor, Qt.Key.Key_R, Qt.Key.Key_3)
    assert editor.payload() == {
        "more_urgent_case_id": right,
        "ask_second": True,
        "levels": {str(right): 3},
    }
    window.act_undo.trigger()  # the level
    window.act_undo.trigger()  # the hard-pair mark
    assert editor.payload() == {"more_urgent_case_id": right, "ask_second": False, "levels": {}}
    window.act_undo.trigger()  # right -> left again
    assert editor.payload()["more_urgent_case_id"] == left
    assert editor.sides[0].chosen and not editor.sides[1].chosen
    wait_saved(qtbot, window)
    assert stored_answer(study.path, unit, "ben").payload["more_urgent_case_id"] == left
    window.act_redo.trigger()
    assert editor.payload()["more_urgent_case_id"] == right
    # L then Escape sets nothing; a level key pressed twice is not a choice of side
    press(qtbot, editor, Qt.Key.Key_L, Qt.Key.Key_Escape, Qt.Key.Key_L, Qt.Key.Key_1)
    assert editor.payload()["more_urgent_case_id"] == right
    assert editor.payload()["levels"] == {str(left): 1}
    wait_saved(qtbot, window)
    window.close()
    assert stored_answer(study.path, unit, "ben").payload == {
        "more_urgent_case_id": right,
        "ask_second": False,
        "levels": {str(left): 1},
    }


# --- the inbox view ------------------------------------------------------------------------


def save_judgements(study: PairStudy, who: str, choose) -> list[tuple[int, int]]:
    """Save ``who``'s answer to every pair (``choose(a, b)`` returns the winner, None to leave
    it unanswered); half are left as drafts. Returns the (winner, loser) outcomes."""
    outcomes = []
    with Project.open(study.path) as project:
        svc = StudyService(project).as_viewer(who)
        for i, (unit, (a, b)) in enumerate(sorted(study.pairs.items())):
            winner = choose(a, b)
            if winner is None:
                continue
            status = "submitted" if i % 2 else "draft"
            svc.save_answer(unit, {"more_urgent_case_id": winner}, status=status)
            outcomes.append((winner, b if winner == a else a))
    return outcomes


def expected_order(case_ids, outcomes) -> list[int]:
    """Win rate (wins / comparisons), highest first; ties by case id; never compared last."""
    wins = {c: 0 for c in case_ids}
    played = {c: 0 for c in case_ids}
    for winner, loser in outcomes:
        wins[winner] += 1
        played[winner] += 1
        played[loser] += 1

    def key(c: int) -> tuple:
        if not played[c]:
            return (1, 0.0, c)
        return (0, -wins[c] / played[c], c)

    return sorted(case_ids, key=key)


def ndcg(levels_in_order, k):
    rel = [6 - lv for lv in levels_in_order]
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel[:k]))
    ideal = sorted(rel, reverse=True)
    return dcg / sum(r / math.log2(i + 2) for i, r in enumerate(ideal[:k]))


def open_inbox(qtbot, window, judge_key: str | None = None):
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: not view.loading, timeout=20000)
    if judge_key is not None:
        view.judge_box.setCurrentIndex(view.judge_box.findData(judge_key))
        view.refresh()
        qtbot.waitUntil(lambda: not view.loading, timeout=20000)
    return view


def test_inbox_view_orders_messages_as_the_win_rates_say(qtbot, study, prefs):
    level = study.levels
    m1, m2, m6 = study.cases["m1"], study.cases["m2"], study.cases["m6"]
    # ava: the reference order, except that m1 (level 1) always loses: a misplaced urgent one
    ava = save_judgements(
        study, "ava", lambda a, b: b if a == m1 else a if b == m1 else min((a, b), key=level.get)
    )
    # ben: the reverse of the reference order, and he never judged the pairs with m6
    ben = save_judgements(
        study, "ben", lambda a, b: None if m6 in (a, b) else max((a, b), key=level.get)
    )
    ids = sorted(study.cases.values())

    window = open_window(qtbot, prefs, study.path, "pat")
    view = open_inbox(qtbot, window)
    assert [view.judge_box.itemData(i) for i in range(view.judge_box.count())][:1] == ["all"]
    assert view.judge_box.currentData() == "all"
    everyone = expected_order(ids, ava + ben)
    assert view.case_order() == everyone
    # the PI sees the reference level of each message, and the live NDCG / T-NDCG
    assert not view.table.isColumnHidden(inbox_view.LEVEL_COLUMN)
    shown_levels = [
        view.table.item(row, inbox_view.LEVEL_COLUMN).text().split(" ")[0]
        for row in range(view.table.rowCount())
    ]
    assert shown_levels == [str(level[c]) for c in everyone]
    value = ndcg([level[c] for c in everyone], 10)
    assert f"NDCG@10 <b>{value:.3f}</b>" in view.scores.text()
    assert "T-NDCG@30" in view.scores.text()

    # ava alone: m1, the most urgent message, is sorted to the bottom and highlighted
    ben_key = next(
        view.judge_box.itemData(i)
        for i in range(view.judge_box.count())
        if view.judge_box.itemText(i) == "Dr. Ben"
    )
    ava_key = next(
        view.judge_box.itemData(i)
        for i in range(view.judge_box.count())
        if view.judge_box.itemText(i) == "Ava (RN)"
    )
    view = open_inbox(qtbot, window, ava_key)
    order = expected_order(ids, ava)
    assert view.case_order() == order
    assert order[-1] == m1
    last = view.table.rowCount() - 1
    assert "⚠" in view.table.item(last, inbox_view.CHECK_COLUMN).text()
    flagged = [r.case_id for r in view.result.rows if r.misplaced]
    assert flagged == [m1]
    assert "1 misplaced" in view.legend.text()

    # ben alone: reversed, and m6 (never compared by him) goes last whatever its level
    view = open_inbox(qtbot, window, ben_key)
    order = expected_order(ids, ben)
    assert view.case_order() == order
    assert order[-1] == m6
    assert {r.case_id for r in view.result.rows if r.misplaced} == {m1, m2}
    assert ndcg([level[c] for c in order], 30) < 0.8

    # closing the project (or signing in as someone else) leaves no reference level behind
    assert window.close_project()
    assert view.table.rowCount() == 0 and view.result is None
    window.close()


def test_a_clinician_sees_only_their_own_order_and_no_reference_levels(qtbot, study, prefs):
    m1, m6 = study.cases["m1"], study.cases["m6"]
    level = study.levels
    # ava has not judged the pairs with m6 yet
    ava = save_judgements(
        study, "ava", lambda a, b: None if m6 in (a, b) else min((a, b), key=level.get)
    )
    save_judgements(study, "ben", lambda a, b: b if a == m1 else a)
    window = open_window(qtbot, prefs, study.path, "ava")
    # Tools > Inbox view by its shortcut
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.findChild(inbox_view.InboxView) is not None, timeout=5000)
    view = open_inbox(qtbot, window)
    # only her own judgements can be chosen, and the order is hers (not mixed with ben's)
    assert [view.judge_box.itemText(i) for i in range(view.judge_box.count())] == ["My judgements"]
    assert view.case_order() == expected_order(sorted(study.cases.values()), ava)
    # nothing of the reference: no level column, no level in any cell, no NDCG, no marks
    assert view.table.isColumnHidden(inbox_view.LEVEL_COLUMN)
    assert view.table.isColumnHidden(inbox_view.CHECK_COLUMN)
    assert all(r.reference_level is None and not r.misplaced for r in view.result.rows)
    assert not view.result.reference_visible and view.result.scores == {}
    names = [lv.name for lv in window.service.catalogs.urgency_levels]
    for row in range(view.table.rowCount()):
        for column in range(view.table.columnCount()):
            item = view.table.item(row, column)
            assert not any(name in item.text() for name in names)
    assert "NDCG@" not in view.scores.text()
    assert not view.legend.isVisible()

    # judging one more pair in the app (one with m6), the view follows once it is saved
    show_kind(window, "urgency")
    go_to(window, next(u for u, pair in sorted(study.pairs.items()) if m6 in pair))
    editor = window.editors["urgency"]
    before = view.result.n_judgements
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Right)
    wait_saved(qtbot, window)
    qtbot.waitUntil(
        lambda: view.result is not None and view.result.n_judgements == before + 1,
        timeout=20000,
    )
    right = editor.case_ids[1]
    ava.append((right, editor.case_ids[0]))
    assert view.case_order() == expected_order(sorted(study.cases.values()), ava)
    view.close()
    window.close()


def test_saves_while_the_inbox_is_read_are_read_once_after_it_not_by_restarting_it(
    qtbot, study, prefs, monkeypatch
):
    """Each urgency save reads the inbox again in the background. Saves made while that read
    runs neither cancel nor restart it (on a large study each restart began a 13 s read
    again, so a clinician answering pairs quickly never saw it finish): they are read in one
    more read once it is done."""
    window = open_window(qtbot, prefs, study.path, "ava")
    view = open_inbox(qtbot, window)
    view._auto_timer.setInterval(10)
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    with held_off_gui_thread(monkeypatch, inbox_view, "load") as (release, reads):
        editor.setFocus()
        qtbot.keyClick(editor, Qt.Key.Key_Right)
        wait_saved(qtbot, window)
        qtbot.waitUntil(lambda: len(reads) == 1 and view.loading, timeout=5000)
        for key in (Qt.Key.Key_Left, Qt.Key.Key_Right):  # two more saves during the read
            qtbot.keyClick(editor, key)
            wait_saved(qtbot, window)
            qtbot.wait(100)  # well past the 10 ms the view waits after a save
        assert len(reads) == 1, "a save restarted the read"
        release.set()
        qtbot.waitUntil(lambda: len(reads) == 2 and not view.loading, timeout=10000)
    qtbot.wait(200)
    assert len(reads) == 2  # one more read for both saves
    assert all(thread is not threading.main_thread() for thread in reads)
    with Project.open(study.path, read_only=True) as project:  # the last save is shown
        ava = StudyService(project).as_viewer("ava")
        assert repr(view.result) == repr(load_inbox(ava, INBOX, judges(ava)[0]))
    view.close()
    window.close()


# --- empathy -------------------------------------------------------------------------------


def test_empathy_by_keyboard_stores_the_response_and_undo_works(qtbot, study, prefs):
    window = open_window(qtbot, prefs, study.path, "ava")
    show_kind(window, "empathy")
    editor = window.editors["empathy"]
    by_swap = units_by_swap(study, sorted(study.empathy))
    stored = {}
    for swap, unit in sorted(by_swap.items()):
        go_to(window, unit)
        first, second = study.empathy[unit]
        shown = (second, first) if swap else (first, second)
        assert [card.response_id for card in editor.cards] == list(shown)
        assert editor.cards[1].text.text() == window.session.unit.responses[1].text
        editor.setFocus()
        qtbot.keyClick(editor, Qt.Key.Key_2)  # "response 2 is more empathetic"
        assert editor.payload() == {"more_empathetic_response_id": shown[1]}
        qtbot.keyClick(editor, Qt.Key.Key_3)  # changed mind: equally
        assert editor.payload() == {"equal": True}
        assert all(card.chosen for card in editor.cards)
        if swap:
            window.act_undo.trigger()  # back to response 2
            assert editor.payload() == {"more_empathetic_response_id": shown[1]}
            assert editor.choice_buttons[1].isChecked()
            stored[unit] = {"more_empathetic_response_id": shown[1]}
        else:
            qtbot.keyClick(editor, Qt.Key.Key_1)
            stored[unit] = {"more_empathetic_response_id": shown[0]}
        wait_saved(qtbot, window)
        submit(qtbot, window)
    # a click does the same as the key
    go_to(window, by_swap[False])
    qtbot.mouseClick(editor.choice_buttons[2], Qt.MouseButton.LeftButton)
    assert editor.payload() == {"equal": True}
    window.act_undo.trigger()
    wait_saved(qtbot, window)
    window.close()
    for unit, payload in stored.items():
        answer = stored_answer(study.path, unit, "ava")
        assert answer.payload == payload
        assert answer.status == "submitted"
