"""Text that must be read whole is shown whole on a 1280 x 720 and a 1024 x 768 screen: the
patient's message and the chart wrap to the case panel's width (read top to bottom, never
sideways) and the panel is never a sliver; the match editor's column headers, the facts
editor's "new fact" hint and the progress texts of the tool windows fit their room."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyle
from ui_support import open_window, show_kind

from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.facts.editor import FactSide
from portalreview.ui import inbox_view

# The main window's size on those screens (their available area less the window's frame).
SCREENS = {"1280x720": (1280, 690), "1024x768": (1024, 738)}


def sized(window, screen: str) -> None:
    window.resize(*SCREENS[screen])
    QTest.qWait(50)


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("kind", ["respond", "rank", "match", "empathy"])
def test_the_patient_s_message_wraps_to_the_case_panel(qtbot, gui, prefs, screen, kind):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    sized(window, screen)
    panel = window.editors[kind].findChild(CasePanel)
    assert panel.isVisible() and panel.message.text()
    viewport = panel.viewport().width()
    assert panel.widget().width() <= viewport  # nothing hidden to the right
    assert not panel.horizontalScrollBar().isVisible()
    assert panel.message.width() <= viewport
    assert viewport >= 8 * panel.fontMetrics().averageCharWidth()  # never a sliver
    for section in panel.sections.values():  # titles wrap too, never cut
        assert section.title.width() <= viewport


def header_fits(table, column: int) -> bool:
    header = table.horizontalHeader()
    margin = 2 * table.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin)
    text = table.horizontalHeaderItem(column).text()
    return header.fontMetrics().horizontalAdvance(text) + margin <= header.sectionSize(column)


@pytest.mark.parametrize("screen", SCREENS)
def test_the_match_editor_s_headers_are_whole(qtbot, gui, prefs, screen):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    sized(window, screen)
    editor = window.editors["match"]
    for table in (editor.ref_table, editor.draft_table):
        for column in range(table.columnCount()):
            assert header_fits(table, column), (table.objectName(), column)


@pytest.mark.parametrize("screen", SCREENS)
def test_the_new_fact_hint_is_whole(qtbot, gui, prefs, screen):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    sized(window, screen)
    for side in window.editors["facts"].findChildren(FactSide):
        entry = side.entry
        room = entry.contentsRect().width() - 2 * 4  # the line edit's text margins
        assert entry.fontMetrics().horizontalAdvance(entry.placeholderText()) <= room


@pytest.mark.parametrize(
    "words",
    [
        "Reading answers… %v of %m pairs",
        "Asking the model… question %v of %m",
        "Storing answers… %v of %m pairs",
    ],
)
def test_the_inbox_view_s_progress_words_are_whole(qtbot, gui, prefs, words):
    window = open_window(qtbot, prefs, gui.path, "pat")
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: not view.loading, timeout=20000)
    view.resize(1100, 700)  # as on a 1280 x 720 screen
    view.progress.setFormat(words)
    view.progress.setRange(0, 4950)
    view.progress.setValue(1200)
    view.progress.setVisible(True)
    QTest.qWait(50)
    bar = view.progress
    room = bar.contentsRect().width() - 8
    assert bar.fontMetrics().horizontalAdvance(bar.text()) <= room, bar.text()
    view.close()
    window.close()


def test_the_status_line_shows_the_unit_s_state_first_and_cuts_a_long_set_name(qtbot, gui, prefs):
    """The status line reads "not started · Unit n of N · <set> · case …": the state a
    clinician checks comes first, in view at 1280 x 720, and a 300-character set name is cut
    with "…" (whole in the tooltip). It read "Unit n of N · <set> · case … · state", and a long
    set name pushed the state out of view."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    name = (
        "Theme-guided responses for the cardiology and nephrology cohort of the spring "
        "wave, with follow-ups "
    ) * 4
    name = name[:300]
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        unit_set = svc.create_unit_set(name, "respond")
        unit = svc.add_unit(unit_set, gui.ids.case1, response_id=gui.ids.draft1)
        svc.assign(unit, gui.ids.ava)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    sized(window, "1280x720")
    assert window.queue.select_unit(unit)
    label = window.unit_label
    text = label.text()
    assert text.startswith("not started  ·  Unit "), text
    assert name not in text and "…" in text and name[:30] in text
    assert name in label.toolTip()
    state = label.fontMetrics().horizontalAdvance("not started")
    assert label.isVisible() and label.width() > 0 and state <= label.width()
    assert label.mapTo(window, label.rect().topLeft()).x() + state <= window.width()


def test_the_status_line_at_18_pt_leaves_out_whole_parts_never_half_a_number(
    qtbot, gui, prefs, font_size
):
    """At 18 pt on a 1024 px screen the unit line was cut at its edge, "not started · Unit
    13 of 2" for "of 22", and the person's "Signed in as Chloe Lindq", with no sign of more:
    what does not fit is left out a part at a time and "…" says so; the state and "Unit n of
    N" stay in view, and the whole text is in the tooltip."""
    font_size(18)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.resize(1024, 640)
    QTest.qWait(50)
    unit = window.unit_label
    whole = unit.toolTip().split("  ·  ")
    shown = unit.text().split("  ·  ")
    assert unit.fontMetrics().horizontalAdvance(unit.text()) <= unit.contentsRect().width()
    assert shown[-1] == "…" and shown[:-1] == whole[: len(shown) - 1], (shown, whole)
    assert any(part.startswith("Unit ") for part in shown), shown
    person = window.person_label
    assert "Signed in as" in person.toolTip() and person.text().endswith("…"), person.text()
    window.resize(1800, 640)
    QTest.qWait(50)
    assert unit.text() == unit.toolTip() and "…" not in person.text()
    window.close()


@pytest.mark.parametrize("size", [(1440, 870), (1280, 690), (1024, 570)])
def test_the_urgency_level_s_name_is_whole(qtbot, gui, prefs, size):
    """Beside the level buttons where it fits, else under them: at 1024 x 600 "no level given"
    was cut to "no le" and "4 · Routine visit" to "4 ·"."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    window.resize(*size)
    editor = window.editors["urgency"]
    levels = [None] + [entry.level for entry in editor.sides[0].catalogs.urgency_levels]
    for level in levels:
        for side in editor.sides:
            if level is not None:
                editor.toggle_level(side.side, level)
            QTest.qWait(30)
            name = side.level_name
            assert name.isVisible() and name.text()
            assert name.width() >= name.sizeHint().width(), (size, level, name.text())
            assert name.mapTo(side, name.rect().topRight()).x() < side.contentsRect().right()


@pytest.mark.parametrize("screen", SCREENS)
def test_an_empathy_choice_never_widens_the_page(qtbot, gui, prefs, screen):
    """"Response 2 (key 2) = equally empathetic" did not wrap: choosing "both equally" made the
    page wider than a laptop's window, and the second response went behind a scroll bar."""
    from PySide6.QtWidgets import QScrollArea

    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "empathy")
    sized(window, screen)
    editor = window.editors["empathy"]
    page = editor.parent()
    while not isinstance(page, QScrollArea):
        page = page.parent()
    for choice in (0, 1, 2):
        editor.choose(choice)
        QTest.qWait(80)
        assert page.horizontalScrollBar().maximum() == 0, (screen, choice)


@pytest.mark.parametrize("screen", SCREENS)
def test_a_fact_s_wording_has_room_in_its_list(qtbot, gui, prefs, screen):
    """At 1024 x 768 the judgement columns kept 120 + 190 pixels and left the wording 32: one
    word a line, cut off."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    sized(window, screen)
    editor = window.editors["facts"]
    editor.add_fact("original", "Go to the emergency room if the pain spreads to your arm")
    QTest.qWait(80)
    for side in editor.sides.values():
        table = side.table
        assert table.columnWidth(1) >= 14 * table.fontMetrics().averageCharWidth(), screen
        assert table.columnWidth(1) >= table.viewport().width() * 0.3


def test_both_urgency_patients_fit_a_small_window_at_18_pt(qtbot, gui, prefs):
    """At 18 pt (Preferences' text size) in a 1024 x 640 window the one-line choice buttons
    and level rows made each side over 500 pixels wide: the right patient was off screen.
    The level buttons go under their caption and the choice says "Needs care first" there;
    choosing a side (the title says it) does not widen the page either."""
    from PySide6.QtWidgets import QScrollArea

    prefs.set_point_size("ava", 18)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    window.resize(1024, 640)
    editor = window.editors["urgency"]
    page = editor.parent()
    while not isinstance(page, QScrollArea):
        page = page.parent()
    for step in (None, Qt.Key.Key_Right, Qt.Key.Key_L):
        if step is not None:
            qtbot.keyClick(editor, step)  # the right one first, then wait for a level
        QTest.qWait(80)
        assert page.horizontalScrollBar().maximum() == 0, step
        for side in editor.sides:
            right = side.mapTo(page.viewport(), side.rect().topRight()).x()
            assert right < page.viewport().width(), (step, side.side)
            button = side.choose
            words = button.fontMetrics().horizontalAdvance(button.text())
            assert words < button.width(), button.text()  # whole, not cut
    assert editor.sides[1].choose.accessibleName().startswith("The right patient needs")
    window.close()
