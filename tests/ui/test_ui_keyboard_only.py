"""Keyboard only (issue 17, part 4): for every kind, a clinician switches to it, completes the
unit and submits it with key presses alone, every key going to whatever has the keyboard focus
(no mouse, no calls into the editor): evidence and match spans are selected in the read-only
text with the keyboard's usual selection keys. What the file holds afterwards is checked. The F1
list holds every shortcut of the window's actions."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from ui_support import (
    open_window,
    preferences,
    shortcuts_shown,
    show_kind,
    stored_answer,
    wait_saved,
)

from portalreview.tasks.common import colours
from portalreview.tasks.registry import EDITORS

K = Qt.Key
CTRL, SHIFT, ALT = (Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier,
                    Qt.KeyboardModifier.AltModifier)
NONE = Qt.KeyboardModifier.NoModifier


class Keyboard:
    """Presses keys where the keyboard focus is, as a person at the keyboard does."""

    def __init__(self, window) -> None:
        self.window = window

    def focus(self):
        return QApplication.focusWidget() or self.window

    def press(self, key, modifiers=NONE, times: int = 1) -> None:
        for _ in range(times):
            QTest.keyClick(self.focus(), key, modifiers)
            QTest.qWait(20)
            self.check_focus_shown()

    def check_focus_shown(self) -> None:
        """Whatever has the focus is on the screen (not hidden, not scrolled wholly away),
        once the window has laid it out: after a submit the next unit's widgets get their
        place a moment after they get the focus (on a busy machine, more than the 20 ms a
        key press waits), so this waits up to a second for it."""
        focused = QApplication.focusWidget()
        if focused is None:
            return
        deadline = time.monotonic() + 1.0
        while focused.visibleRegion().isEmpty() and time.monotonic() < deadline:
            QTest.qWait(10)
        assert focused.isVisible(), focused
        assert not focused.visibleRegion().isEmpty(), (focused, focused.objectName())

    def type(self, text: str) -> None:
        QTest.keyClicks(self.focus(), text)

    def select_words(self, words: int) -> None:
        """From the start of the focused text, select ``words`` words (Ctrl+Shift+Right)."""
        self.press(K.Key_Home, CTRL)
        self.press(K.Key_Right, CTRL | SHIFT, times=words)

    def theme_every_row(self, theme_key) -> None:
        """In a sentence table: to the top, then the theme's number on every row (each press
        labels the row and moves to the next)."""
        rows = self.focus().rowCount()
        self.press(K.Key_Up, times=rows)
        self.press(theme_key, times=rows)


def _respond(kb: Keyboard, ids) -> dict:
    kb.type("Please come in today.")
    kb.press(K.Key_Tab)
    kb.type("Call 911 if it gets worse.")
    return {"mode": "theme_guided", "notes": "",
            "parts": {"empathy": "Please come in today.",
                      "symptom_questions": "Call 911 if it gets worse."}}


def _rank(kb: Keyboard, ids) -> dict:
    kb.press(K.Key_1)
    kb.press(K.Key_Y)
    kb.press(K.Key_Down)
    kb.press(K.Key_2)
    kb.press(K.Key_N)
    kb.press(K.Key_1, ALT)  # reason C1
    return {}


def _match(kb: Keyboard, ids) -> dict:
    kb.press(K.Key_Home, CTRL)
    kb.press(K.Key_S)  # the draft sentence at the cursor
    kb.press(K.Key_M)  # matches the first reference sentence
    kb.press(K.Key_X, times=2)  # the other two: NO MATCH
    kb.press(K.Key_Tab, times=4)  # the draft's sentence table
    kb.theme_every_row(K.Key_1)
    # back over the buttons, the draft and the reference's three drop-downs to its table
    kb.press(K.Key_Tab, SHIFT, times=8)
    kb.theme_every_row(K.Key_1)
    return {}


def _urgency(kb: Keyboard, ids) -> dict:
    kb.press(K.Key_Right)  # the right patient needs care first
    kb.press(K.Key_L)
    kb.press(K.Key_3)  # the left patient's level
    return {}


def _eppc(kb: Keyboard, ids) -> dict:
    kb.press(K.Key_1)  # code 1
    kb.press(K.Key_1, ALT)  # its first subcode
    kb.press(K.Key_Tab, times=2)  # to the sentence
    kb.select_words(2)
    kb.press(K.Key_E)  # evidence
    return {}


def _empathy(kb: Keyboard, ids) -> dict:
    kb.press(K.Key_2)
    return {}


def _facts(kb: Keyboard, ids) -> dict:
    kb.select_words(4)  # in the original response
    kb.press(K.Key_F)
    kb.press(K.Key_Tab, times=2)  # its fact list
    kb.press(K.Key_Y)  # kept in the edit
    kb.press(K.Key_Tab, times=4)  # the edited response
    kb.select_words(3)
    kb.press(K.Key_F)
    kb.press(K.Key_Tab, times=2)
    kb.press(K.Key_N)  # not supported by the original
    kb.press(K.Key_1)  # error category 1
    return {}


STEPS = {"respond": _respond, "rank": _rank, "match": _match, "urgency": _urgency,
         "eppc": _eppc, "empathy": _empathy, "facts": _facts}


def _check(kind: str, payload: dict, ids) -> None:
    if kind == "rank":
        entries = {e["response_id"]: e for e in payload["entries"]}
        assert sorted(e["rank"] for e in entries.values()) == [1, 2]
        assert {e["correct"] for e in entries.values()} == {True, False}
        wrong = next(e for e in entries.values() if not e["correct"])
        assert wrong["criteria"] == ["C1"]
    elif kind == "match":
        spans = [d["spans"] for d in payload["decisions"]]
        assert len(spans) == 3 and spans[0] and spans[1:] == [[], []]
        assert len(payload["themes"]) == 6
    elif kind == "urgency":
        assert payload["more_urgent_case_id"] in (ids.case1, ids.case2)
        assert list(payload["levels"].values()) == [3]
    elif kind == "eppc":
        (label,) = payload["labels"]
        assert label["subcode"] is not None and len(label["spans"]) == 1
    elif kind == "empathy":
        assert payload["more_empathetic_response_id"] in (ids.original, ids.edited)
    elif kind == "facts":
        sides = {f["side"]: f for f in payload["facts"]}
        assert sides["original"]["entailed"] is True
        assert sides["edited"]["entailed"] is False
        assert sides["edited"]["error_category"] is not None


@pytest.mark.parametrize("kind", list(STEPS))
def test_a_unit_of_every_kind_is_done_and_submitted_with_the_keyboard_alone(
    qtbot, gui, tmp_path, kind
) -> None:
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    kb = Keyboard(window)
    number = list(EDITORS).index(kind) + 1
    kb.press(getattr(K, f"Key_{number}"), CTRL)  # Ctrl+number: that kind's work
    qtbot.waitUntil(lambda: window.kind == kind)
    unit = window.session.unit.unit_id
    expected = STEPS[kind](kb, gui.ids)
    assert window.session.unit.unit_id == unit  # no key went to another unit
    kb.press(K.Key_Return, CTRL)  # submit and go on
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer is not None and answer.status == "submitted", (
        kind, window.statusBar().currentMessage(), answer and answer.payload)
    if expected:
        assert answer.payload == expected
    _check(kind, answer.payload, gui.ids)
    window.close()


def test_the_f1_list_holds_every_shortcut_of_the_window(qtbot, gui, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    text = shortcuts_shown(window)
    from PySide6.QtGui import QAction, QKeySequence

    for_the_pi = {a for a in window.tools_menu.actions() if not a.isEnabled()}
    for action in set(window.findChildren(QAction)) - for_the_pi:  # (not for a clinician)
        for sequence in action.shortcuts():
            keys = sequence.toString(QKeySequence.SequenceFormat.NativeText)
            if keys and action.text():
                assert keys in text, (action.text(), keys)
    assert "EPPC coding" not in text or window.kind == "eppc"
    window.close()


def _reachable_by_tab(widget) -> bool:
    """A control a person reaches with Tab (an unchecked radio button of a group is reached
    with the arrow keys from the checked one, as everywhere)."""
    from PySide6.QtWidgets import QRadioButton

    if isinstance(widget, QRadioButton) and widget.autoExclusive() and not widget.isChecked():
        return False
    return bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)


def test_every_tool_window_is_walked_with_tab_and_closed_with_the_keyboard(
    qtbot, gui, tmp_path
) -> None:
    import shiboken6
    from PySide6.QtWidgets import (
        QAbstractButton,
        QAbstractItemView,
        QAbstractSpinBox,
        QComboBox,
        QLineEdit,
        QPlainTextEdit,
        QTabBar,
        QTextEdit,
        QWidget,
    )

    from portalreview.ui.tools import TOOLS

    controls = (QAbstractButton, QLineEdit, QComboBox, QAbstractItemView, QAbstractSpinBox,
                QTextEdit, QPlainTextEdit, QTabBar)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    unreached, still_open = {}, []
    for tool in TOOLS:
        before = set(QApplication.topLevelWidgets())
        tool.load()(window)
        qtbot.wait(400)
        (opened,) = [w for w in QApplication.topLevelWidgets()
                     if w not in before and w.isVisible()]
        opened.activateWindow()
        qtbot.wait(50)
        wanted = [c for c in opened.findChildren(QWidget)
                  if isinstance(c, controls) and c.isVisible() and c.isEnabled()
                  and _reachable_by_tab(c) and not c.objectName().startswith("qt_")]
        seen = set()
        for _ in range(2 * len(wanted) + 10):
            focused = QApplication.focusWidget()
            if focused is not None:
                seen.add(focused)
            QTest.keyClick(focused or opened, Qt.Key.Key_Tab)
        missed = [f"{type(c).__name__} {c.objectName()}" for c in wanted
                  if c not in seen and not any(c.isAncestorOf(s) for s in seen)]
        if missed:
            unreached[tool.title] = missed
        QTest.keyClick(opened, Qt.Key.Key_Escape)  # the dashboard's Esc cancels: then Ctrl+W
        qtbot.wait(100)
        if shiboken6.isValid(opened) and opened.isVisible():
            QTest.keyClick(opened, Qt.Key.Key_W, CTRL)
            qtbot.wait(100)
        if shiboken6.isValid(opened) and opened.isVisible():
            still_open.append(tool.title)
            opened.close()
    assert unreached == {}
    assert still_open == []
    window.close()


def chloe_on_the_demo(qtbot, demo, tmp_path, width=None, height=None):
    """The demo's np_chloe (work still to do) signed in, the window active, at that size."""
    window = open_window(qtbot, preferences(tmp_path), demo, "np_chloe")
    if width:
        window.resize(width, height)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    return window, Keyboard(window)


@pytest.mark.parametrize("kind", ["match", "facts"])
def test_tab_never_rests_on_a_control_scrolled_out_of_sight(
    qtbot, demo_copy, tmp_path, kind
) -> None:
    """The demo's longer drafts do not fit match's sentence tables on a 1366 x 768 screen: Tab
    walked onto the theme drop-downs of rows scrolled away, where an arrow key changed a theme
    the clinician could not see. Now the table scrolls to the row whose drop-down takes the
    focus. (A fact list grows with its facts inside a page that follows the focus: checked
    with more facts than its first height shows.)"""
    from PySide6.QtWidgets import QComboBox

    window, kb = chloe_on_the_demo(qtbot, demo_copy, tmp_path, 1366, 768)
    QTest.keyClick(kb.focus(), getattr(K, f"Key_{list(EDITORS).index(kind) + 1}"), CTRL)
    qtbot.waitUntil(lambda: window.kind == kind)
    if kind == "facts":  # the unit has no fact yet: list more than its table shows
        from PySide6.QtWidgets import QLineEdit

        box = window.editors["facts"].findChild(QLineEdit, "originalNewFact")
        box.setFocus()
        for n in range(12):
            QTest.keyClicks(box, f"Fact number {n + 1}")
            QTest.keyClick(box, K.Key_Return)
    in_tables = []
    for _ in range(60):
        QTest.keyClick(kb.focus(), K.Key_Tab)
        QTest.qWait(20)
        focused = QApplication.focusWidget()
        if isinstance(focused, QComboBox) and focused.accessibleName().startswith(
            (
                "Theme of reference sentence",
                "Theme of draft sentence",
                "Error category",
                "Kept in the edit?",
                "Supported by",
            )
        ):
            in_tables.append(focused.accessibleName())
            kb.check_focus_shown()
    assert len(in_tables) > 3, in_tables
    window.close()


def test_next_unit_to_do_from_inside_a_text_box(qtbot, demo_copy, tmp_path) -> None:
    """Ctrl+Shift+Right selects the next word in a text box, where the respond, match and facts
    screens put the focus, so "next unit to do" was out of reach there; Alt+Shift+Right (as
    Alt+Right for the next unit) works everywhere."""
    from portalreview.tasks.common.editor_base import TextBox

    window, kb = chloe_on_the_demo(qtbot, demo_copy, tmp_path)
    kb.press(K.Key_1, CTRL)  # Write responses: the focus is in a reply box
    qtbot.waitUntil(lambda: window.kind == "respond")
    window.queue.jump_to_number(1)  # done: the next to do is further on
    assert isinstance(QApplication.focusWidget(), TextBox)
    first = window.session.unit.unit_id
    assert window.session.answer is not None and window.session.answer.status == "submitted"
    kb.press(K.Key_Right, ALT | SHIFT)
    assert window.session.unit.unit_id != first
    assert window.session.answer is None or window.session.answer.status != "submitted"
    window.close()


def test_a_page_larger_than_the_view_opens_at_its_top_left(qtbot, demo_copy, tmp_path) -> None:
    """With the text 1.5x larger on a 1024 x 768 window the urgency and empathy editors, which
    take the focus themselves, are wider and taller than the page: it scrolled to centre them,
    cutting off the start of the first patient's message and the question line above it."""
    from PySide6.QtWidgets import QScrollArea

    window, kb = chloe_on_the_demo(qtbot, demo_copy, tmp_path, 1024, 768)
    for _ in range(5):
        kb.press(K.Key_Plus, CTRL)
    assert window.point_size >= 16
    scrolled = {}
    for kind in ("urgency", "empathy"):
        kb.press(getattr(K, f"Key_{list(EDITORS).index(kind) + 1}"), CTRL)
        qtbot.waitUntil(lambda k=kind: window.kind == k)
        page = window.findChild(QScrollArea, f"{kind}Page")
        bars = page.horizontalScrollBar(), page.verticalScrollBar()
        qtbot.wait(300)  # the page follows the focus once laid out
        # larger than the view: the case in point (urgency only taller now: it fits the width)
        assert max(bar.maximum() for bar in bars) > 0, kind
        scrolled[kind] = (bars[0].value(), bars[1].value())
    assert scrolled == {"urgency": (0, 0), "empathy": (0, 0)}
    window.close()


@pytest.mark.parametrize("kind", ["respond", "empathy"])
def test_tab_to_a_fold_button_scrolls_the_patient_panel_to_it(qtbot, gui, prefs, kind):
    """Tab around a page a second time put the focus on the "Patient message" fold button
    above the patient panel's view, where nothing showed it (Urgency at 1280 x 800, Empathy
    at 1024 x 640; found by an explorer, x_a11y2 casepanel_focus.py): the panel scrolls to it,
    as the page does to its controls."""
    from PySide6.QtWidgets import QToolButton

    from portalreview.tasks.common.case_panel import CasePanel

    prefs.set_point_size("ava", 18)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    window.resize(1024, 480)
    QTest.qWait(50)
    panel = window.editors[kind].findChild(CasePanel)
    scroll = panel.verticalScrollBar()
    assert scroll.maximum() > 0  # (the panel scrolls: the test means something)
    scroll.setValue(scroll.maximum())
    fold = panel.widget().findChild(QToolButton)
    fold.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: not fold.visibleRegion().isEmpty(), timeout=1000)
    window.close()


@pytest.mark.parametrize("kind", list(EDITORS))
def test_tab_never_stops_on_a_scroll_area_that_shows_nothing(qtbot, gui, prefs, kind):
    """Each page's scroll area and Respond's theme-box area took the focus on Tab and showed
    nothing (found by an explorer, x_a11y2 tabwalk.py); the patient panel stays a stop, the
    keyboard's only way to scroll a long message."""
    from PySide6.QtWidgets import QScrollArea

    from portalreview.tasks.common.case_panel import CasePanel

    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    window.editors[kind].setFocus()
    stops = []
    for _ in range(40):
        focused = QApplication.focusWidget()
        qtbot.keyClick(focused, Qt.Key.Key_Tab)
        stops.append(QApplication.focusWidget())
    blank = [w for w in stops if isinstance(w, QScrollArea) and not isinstance(w, CasePanel)]
    assert blank == [], [w.objectName() or type(w).__name__ for w in blank]
    window.close()


@pytest.mark.parametrize("scheme", ["light", "high_contrast"])
def test_the_patient_panel_shows_it_has_the_focus(qtbot, gui, prefs, scheme):
    """The patient panel is a Tab stop (arrow keys scroll a long message) and drew nothing to
    say it had the focus: a ring in the selection colour shows it, and goes with the focus.
    Round a panel whose long message scrolls too (the scroll bar hid the ring's right side)."""
    from portalreview.tasks.common.case_panel import CasePanel
    from portalreview.ui import main_window as mw

    def edges(window, panel) -> list:
        """The colours shown at the middle of the panel's left, right and top edges."""
        shown = window.grab().toImage()
        corner = panel.mapTo(window, QPoint(0, 0))
        width, height = panel.width(), panel.height()
        points = (QPoint(0, height // 2), QPoint(width - 1, height // 2), QPoint(width // 2, 0))
        return [shown.pixelColor(corner + point) for point in points]

    app = QApplication.instance()
    saved_palette, saved_style = app.palette(), mw._style_name(app.style())
    mw.apply_color_scheme(scheme)
    try:
        for size, window_size in ((None, (1280, 800)), (18, (1024, 480))):
            if size:
                prefs.set_point_size("ava", size)
            window = open_window(qtbot, prefs, gui.path, "ava")
            show_kind(window, "respond")
            window.resize(*window_size)
            panel = window.editors["respond"].findChild(CasePanel)
            if size:
                qtbot.waitUntil(lambda p=panel: p.verticalScrollBar().maximum() > 0, timeout=2000)
            panel.setFocus(Qt.FocusReason.TabFocusReason)
            qtbot.waitUntil(panel.hasFocus, timeout=1000)
            qtbot.wait(30)
            highlight = panel.palette().color(QPalette.ColorRole.Highlight)
            assert panel.focus_ring.isVisible()
            assert edges(window, panel) == [highlight] * 3, size
            qtbot.keyClick(panel, Qt.Key.Key_Tab)
            qtbot.waitUntil(lambda p=panel: not p.hasFocus(), timeout=1000)
            assert not panel.focus_ring.isVisible()
            assert edges(window, panel)[0] != highlight
            window.close()
    finally:
        mw.apply_color_scheme("light")
        app.setStyle(saved_style)
        app.setPalette(saved_palette)
        colours.set_scheme("")
