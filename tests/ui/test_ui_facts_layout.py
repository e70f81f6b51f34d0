"""The fact check's layout on a laptop's screen: each fact list keeps room for its header and
three facts under a long response (the response scrolls instead), its judgement columns'
headers are whole, and a chosen error category is whole or visibly cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QScrollArea, QStyle, QStyleOptionComboBox
from ui_support import open_window, show_kind

from portalreview.store.project import Project
from portalreview.store.service import StudyService

LONG_REPLY = (
    "Thank you for sending your readings, that's really helpful, and I know a new job can bring "
    "a lot of stress. These numbers are higher than we want, so please increase your losartan "
    "to 100 mg daily starting today. Keep checking your blood pressure and send me your "
    "readings in two weeks so we can see how the change is working. If you get a severe "
    "headache, chest pain or any change in your vision, please come in. "
) * 2
FACTS = [
    "The blood pressure readings are too high.",
    "The patient should increase losartan to 100 mg daily.",
    "The losartan increase starts today.",
    "The patient should keep checking the blood pressure.",
    "The patient should send the readings in two weeks.",
    "A severe headache, chest pain or vision change means coming in.",
]
MESSAGE = (
    "My home BP readings this week have been 162/98, 168/102, 159/100 and 171/104. I'm taking "
    "the losartan and the water pill every day. No headache, chest pain or vision changes, "
    "honestly I feel fine. I started a new job with a lot of stress and I've been eating out "
    "way more. Should I come in or can you just up the dose?"
)
SHOWN_FACTS = 3  # a fact list's least room: its header and this many facts


def long_reply_study(path: Path, message: str = MESSAGE) -> Path:
    """A fact check whose edited response runs to some ten lines (and the patient's message,
    unless given, to three or four), for the clinician "ava"."""
    with Project.create(path, name="Long reply") as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava", "Ava Moreno")
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        case = svc.add_case(
            "case-bp",
            message,
            {},
            age_band="45-64",
            gender="male",
        )
        original = svc.add_response(
            case, "o1", LONG_REPLY[:300], author_kind="clinician", author="ava"
        )
        edited = svc.add_response(
            case, "e1", LONG_REPLY, author_kind="model", author="m", production="edited_empathy"
        )
        unit_set = svc.create_unit_set("facts", "facts")
        svc.assign(svc.add_unit(unit_set, case, response_id=original, response_b_id=edited), ava)
    return path


def page_of(editor) -> QScrollArea:
    page = editor.parent()
    while not isinstance(page, QScrollArea):
        page = page.parent()
    return page


def facts_listed(qtbot, prefs, study: Path, size: tuple[int, int]):
    """The fact check of ``study`` in a window of ``size``, six facts a side."""
    window = open_window(qtbot, prefs, study, "ava")
    show_kind(window, "facts")
    window.resize(*size)
    editor = window.editors["facts"]
    for side in ("original", "edited"):
        for fact in FACTS:
            editor.add_fact(side, fact)
    wait_for_layout(editor)
    return window, editor


def wait_for_layout(editor, limit_ms: int = 5000) -> None:
    """Wait until the fact lists' rows and views keep their sizes for 100 ms (wrapped rows
    are measured after the window shows them; a loaded machine takes longer than a fixed
    wait allowed)."""

    def sizes() -> list[tuple[int, ...]]:
        rows = [
            [side.table.rowHeight(row) for row in range(side.table.rowCount())]
            for side in editor.sides.values()
        ]
        views = [
            (side.table.viewport().height(), side.text_view.height())
            for side in editor.sides.values()
        ]
        return [*views, *map(tuple, rows)]

    before = None
    for _ in range(limit_ms // 100):
        QTest.qWait(100)
        now = sizes()
        if now == before:
            return
        before = now


@pytest.mark.parametrize(("size", "page_fits"), [((1280, 690), True), ((1024, 738), False)])
def test_each_fact_list_shows_three_facts_under_a_long_response(
    qtbot, tmp_path, prefs, size, page_fits
):
    """At 1280 x 720 the edited response kept its ten lines and left its fact list a
    46-pixel view: one fact of six, with the page not scrolling to show more. (At 1024 x 768
    facts of three lines each may make the page scroll.)"""
    study = long_reply_study(tmp_path / "long.prproj", message="Should I come in?")
    window, editor = facts_listed(qtbot, prefs, study, size)
    for side in editor.sides.values():
        table = side.table
        first_rows = sum(table.rowHeight(row) for row in range(SHOWN_FACTS))
        assert table.viewport().height() >= first_rows, (side.side, size)
    edited_text = editor.sides["edited"].text_view
    assert edited_text.verticalScrollBar().maximum() > 0  # the response scrolls instead
    if page_fits:
        assert page_of(editor).verticalScrollBar().maximum() == 0  # the page does not
    window.close()


def header_lines_fit(table, column: int) -> bool:
    """Each line of the column's header is whole (in bold: a selected row's columns show
    their headers in bold)."""
    header = table.horizontalHeader()
    bold = QFont(header.font())
    bold.setBold(True)
    metrics = QFontMetrics(bold)
    margins = 2 * table.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin)
    lines = table.horizontalHeaderItem(column).text().split("\n")
    return max(map(metrics.horizontalAdvance, lines)) + margins <= header.sectionSize(column)


def chosen_category_fits(box) -> bool:
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    field = box.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, box
    )
    return box.fontMetrics().horizontalAdvance(box.currentText()) <= field.width() - 2


@pytest.mark.parametrize("point_size", [None, 14])
@pytest.mark.parametrize("size", [(1024, 738), (1280, 690), (1346, 738)])
def test_the_judgement_headers_are_whole(qtbot, gui, prefs, size, point_size):
    """The headers read "upportec" and "rror categor" at 1024 x 768, and were cut at
    1366 x 768 at 14 pt: the columns' widths were fixed pixels."""
    if point_size:
        prefs.set_point_size("ava", point_size)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    window.resize(*size)
    editor = window.editors["facts"]
    for side in ("original", "edited"):
        editor.add_fact(side, "Go to the emergency room if the pain spreads to your arm")
    QTest.qWait(80)
    for side in editor.sides.values():
        for column in (2, 3):
            assert header_lines_fit(side.table, column), (side.side, column, size, point_size)
    window.close()


def test_a_chosen_category_is_whole_where_there_is_room_and_cut_with_dots_where_not(
    qtbot, gui, prefs
):
    """A chosen category read "3 Clinical inacc" in a 137-pixel box: cut, with no sign of it.
    Where the pane has the room the longest category is whole; where it has not, the box
    shows "…" and its tooltip the whole name."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    editor.add_fact("edited", "You will be fine.")
    categories = editor.catalogs.error_categories
    longest = max(categories, key=lambda c: len(c.name))
    editor.set_category("edited", 0, longest.id)
    box = editor.sides["edited"].category_boxes[0]
    window.resize(2560, 1400)  # the wording keeps half the pane: the longest name is long
    QTest.qWait(80)
    assert longest.name in box.currentText() and chosen_category_fits(box)
    window.resize(1024, 738)
    QTest.qWait(80)
    assert not chosen_category_fits(box)
    assert box.shown_text().endswith("…")
    assert box.currentText() in box.toolTip()
    window.close()


@pytest.mark.parametrize("point_size", [None, 14])
def test_the_message_shows_two_lines_at_least(qtbot, tmp_path, prefs, point_size):
    """At 1366 x 768 at 14 pt the page's minimum-height layout left the patient's message
    68 pixels: its title and half a line. Folded, it still gives its room to the replies."""
    if point_size:
        prefs.set_point_size("ava", point_size)
    study = long_reply_study(tmp_path / "long.prproj")
    window, editor = facts_listed(qtbot, prefs, study, (1346, 738))
    panel = editor.case_panel
    top = panel.message.mapTo(panel.viewport(), QPoint(0, 0)).y()
    shown = panel.viewport().height() - top
    assert shown >= 2 * panel.message.fontMetrics().lineSpacing(), (shown, point_size)
    message_height = editor.reading.sizes()[0]
    panel.message_section.toggle.click()  # folded
    assert editor.reading.sizes()[0] < message_height
    window.close()
