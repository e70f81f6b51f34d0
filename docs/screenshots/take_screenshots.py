"""Screenshots of the desktop app on the demo study, for the README and docs/.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_screenshots.py

Builds the demo study in a temporary folder, signs in as the clinician who still has work to
do, and saves one PNG per screen next to this script. Look at every image after running it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from portalreview.demo import build_demo
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow, apply_color_scheme
from portalreview.ui.settings import Preferences
from portalreview.ui.sign_in import SignInDialog

HERE = Path(__file__).resolve().parent
WHO = "np_chloe"


def settle(ms: int = 150) -> None:
    QTest.qWait(ms)


def open_demo(path: Path, prefs: Preferences) -> MainWindow:
    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator=WHO)
    while window.session is None:
        QTest.qWait(20)
    settle()
    return window


def show(window: MainWindow, kind: str, number: int | None = None) -> None:
    window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
    if number is not None:
        window.queue.jump_to_number(number)
    settle()


def save(widget, name: str) -> None:
    settle()
    widget.grab().save(str(HERE / name))
    print("saved", name)


def respond_screens(window: MainWindow) -> None:
    show(window, "respond")
    editor = window.editors["respond"]
    typing = {
        "empathy": "I'm sorry the cough keeps waking you up - that is exhausting.",
        "symptom_questions": "Do you notice heartburn or a sour taste when it happens?",
        "planning": "Try raising the head of your bed and avoid eating 3 hours before bed.",
        "logistics": "I'll have the front desk offer you a visit next week.",
    }
    for box_id, text in typing.items():
        QTest.keyClicks(editor.findChild(TextBox, f"box_{box_id}"), text)
    save(window, "respond-theme-guided.png")
    edit_units = [
        i
        for i, item in enumerate(window.queue.all_items, start=1)
        if window.session.service.read_unit(item.unit_id).responses
    ]
    if edit_units:
        window.queue.jump_to_number(edit_units[-1])
        save(window, "respond-edit-draft.png")


def rank_screen(window: MainWindow) -> None:
    show(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (
        Qt.Key.Key_2,
        Qt.Key.Key_Y,
        Qt.Key.Key_Down,
        Qt.Key.Key_1,
        Qt.Key.Key_Y,
        Qt.Key.Key_Down,
        Qt.Key.Key_2,
        Qt.Key.Key_N,
    ):
        QTest.keyClick(editor, key)
    QTest.keyClick(editor, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    save(window, "rank.png")


def match_screen(window: MainWindow) -> None:
    show(window, "match")
    editor = window.editors["match"]
    first = editor.draft.sentences[1]
    cursor = editor.draft_view.textCursor()
    cursor.setPosition(first.start)
    cursor.setPosition(first.end, QTextCursor.MoveMode.KeepAnchor)
    editor.draft_view.setTextCursor(cursor)
    editor.match_selection()
    editor.mark_no_match()
    save(window, "match.png")


def facts_screens(window: MainWindow) -> None:
    """A fact check not started (unit 15), and one done (unit 2): the patient's message above
    the two replies."""
    show(window, "facts", 15)
    save(window, "facts-0-new.png")
    show(window, "facts", 2)
    save(window, "facts-1-checks.png")


def urgency_screen(window: MainWindow) -> None:
    """The first pair the clinician has not answered whose reference levels differ, answered
    as the reference would: each patient given their reference level, and the more urgent
    one (the lower level) chosen as needing care first, on whichever side the demo put them;
    not submitted yet."""
    show(window, "urgency")
    editor = window.editors["urgency"]
    levels = reference_levels(window)
    for number, item in enumerate(window.queue.all_items, start=1):
        if item.status == "submitted":
            continue
        show(window, "urgency", number)
        left, right = (levels.get(case_id) for case_id in editor.case_ids)
        if left is not None and right is not None and left != right:
            break
    else:
        raise SystemExit("no pair left to answer whose reference levels differ")
    editor.setFocus()
    first = Qt.Key.Key_Left if left < right else Qt.Key.Key_Right
    for key in (Qt.Key.Key_L, digit_key(left), Qt.Key.Key_R, digit_key(right), first):
        QTest.keyClick(editor, key)
    save(window, "urgency-1-answered.png")


def reference_levels(window: MainWindow) -> dict[int, int]:
    """The reference urgency level of each case (hidden from the clinician's screen)."""
    from sqlalchemy import select

    from portalreview.store.models import Case

    with window.project.read() as s:
        rows = s.execute(select(Case.id, Case.urgency_level)).all()
    return {case_id: level for case_id, level in rows if level is not None}


def digit_key(digit: int) -> Qt.Key:
    return Qt.Key(Qt.Key.Key_0.value + digit)


def eppc_screen(window: MainWindow) -> None:
    """A coded sentence: two codes, the current one's subcode and evidence span."""
    show(window, "eppc", 3)
    save(window, "eppc-1-coding.png")


def wait_until(done) -> None:
    while not done():
        QTest.qWait(20)


def pi_inbox_and_adjudication_screens(path: Path, prefs: Preferences) -> None:
    """The PI's inbox view (sorted by win rate, with the reference levels and NDCG) and the
    adjudication of EPPC disagreements."""
    from portalreview.ui import adjudication, inbox_view

    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator="dr_pi")
    wait_until(lambda: window.session is not None)
    inbox = inbox_view.open_tool(window)
    inbox.resize(1100, 760)
    wait_until(lambda: not inbox.loading and inbox.result is not None)
    save(inbox, "inbox-1-pi.png")
    inbox.close()
    dialog = adjudication.open_tool(window)
    dialog.resize(1400, 900)
    wait_until(lambda: not dialog.loading)
    dialog.set_kind("eppc")
    wait_until(lambda: not dialog.loading)
    save(dialog, "adjudication-1-eppc.png")
    dialog.close()
    window.close()


def sign_in_screen(path: Path, prefs: Preferences) -> None:
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    with Project.open(path, read_only=True) as project:
        people = [a for a in StudyService(project).annotators() if not a.is_model]
    dialog = SignInDialog("PortalReview demo study (synthetic)", people, WHO)
    dialog.show()
    save(dialog, "sign-in.png")
    dialog.close()


def pi_setup_and_copies_screens(demo: Path, prefs: Preferences) -> None:
    """The PI's Study set-up (an urgency sample handed out with an overlap) and Offline copies
    (two copies for one clinician merged back, one answer changed differently in each), on a
    copy of the demo so that the other screens are unchanged."""
    import shutil

    from portalreview.store.project import Project
    from portalreview.store.service import StudyService
    from portalreview.ui import copies_dialog, study_setup_dialog

    apply_color_scheme("system")
    folder = Path(tempfile.mkdtemp(prefix="pi_screens_"))
    path = folder / "study.prproj"
    shutil.copy(demo, path)
    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator="dr_pi")
    while window.session is None:
        QTest.qWait(20)

    def idle(dialog) -> None:
        while dialog.busy:
            QTest.qWait(20)
        settle()

    setup = study_setup_dialog.open_tool(window)
    setup.tabs.setCurrentIndex(1)
    setup.recipe_box.setCurrentIndex(setup.recipe_box.findData("urgency"))
    setup.inbox_box.setCurrentText("demo-inbox")
    setup.comparisons_spin.setValue(6)
    setup.set_name_edit.setText("Ward pairs")
    setup.preview_units()
    idle(setup)
    setup.create_units()
    idle(setup)
    setup.tabs.setCurrentIndex(2)
    for row in range(setup.people_list.count()):
        item = setup.people_list.item(row)
        if item.data(Qt.ItemDataRole.UserRole) != "dr_pi":
            item.setCheckState(Qt.CheckState.Checked)
    setup.overlap_spin.setValue(30)
    setup.assign_seed_spin.setValue(7)
    setup.preview_assignment()
    idle(setup)
    save(setup, "setup-1-assign.png")
    setup.assign()
    idle(setup)
    setup.close()

    copies = copies_dialog.open_tool(window)
    ward, laptop = folder / "chloe-ward.prproj", folder / "chloe-laptop.prproj"
    copies_dialog.confirm_whole_study = lambda parent, name, holds: True
    for target, whole in ((ward, False), (laptop, True)):
        copies.for_box.setCurrentIndex(copies.for_box.findData("np_chloe"))
        copies.whole_study_box.setChecked(whole)
        copies_dialog.ask_copy_path = lambda parent, suggested, t=target: t
        copies.save_copy()
        idle(copies)
    with Project.open(ward) as project:
        chloe = StudyService(project).as_viewer("np_chloe")
        todo = [i.unit_id for i in chloe.queue("urgency") if i.status != "submitted"][:3]
        cases = {u: [c.id for c in chloe.read_unit(u).cases] for u in todo}
        for unit in todo:
            chloe.save_answer(unit, {"more_urgent_case_id": cases[unit][0]}, status="submitted")
    with Project.open(laptop) as project:
        chloe = StudyService(project).as_viewer("np_chloe")
        chloe.save_answer(todo[0], {"more_urgent_case_id": cases[todo[0]][1]}, status="draft")
    copies_dialog.ask_copies_to_merge = lambda parent, folder: [ward, laptop]
    copies.merge_copies()
    idle(copies)
    save(copies, "copies-1-merge.png")
    copies.close()
    window.close()


def dashboard_screens(path: Path, prefs: Preferences) -> None:
    """The PI's agreement dashboard: summary, the rank heat map, the NDCG curve, a filter."""
    from PySide6.QtCore import QEventLoop, QPoint

    from portalreview.ui import dashboard as dashboard_tool

    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator="dr_pi")
    while window.session is None:
        QTest.qWait(20)
    board = dashboard_tool.open_tool(window)
    board.resize(1440, 940)

    def computed() -> None:  # an event loop, not qWait: the worker thread needs the GIL
        if board.loading:
            loop = QEventLoop()
            board.finished.connect(loop.quit)
            loop.exec()
        settle()

    def shot(tab: str, name: str, table_key: str | None = None) -> None:
        names = [board.tabs.tabText(i) for i in range(board.tabs.count())]
        board.tabs.setCurrentIndex(names.index(tab))
        page = board.tabs.currentWidget()
        page.verticalScrollBar().setValue(0)
        if table_key is not None:
            view = next(v for _, t, v in board.views if t.key == table_key)
            top = view.mapTo(page.widget(), QPoint(0, 0)).y()
            page.verticalScrollBar().setValue(top - 60)
        save(board, name)

    computed()
    shot("Summary", "dashboard-1-summary.png")
    shot("Rank", "dashboard-2-rank-heat-map.png", "rank_by_source")
    shot("Urgency", "dashboard-3-urgency-ndcg.png", "urgency_inboxes")
    board.annotator_button.set_chosen(["nurse_ava", "np_chloe"])
    board.refresh()
    computed()
    shot("Match", "dashboard-4-match-filtered.png")
    board.close()
    window.close()


def small_high_contrast_screens(path: Path, prefs: Preferences) -> None:
    """EPPC and urgency on a 1024 x 600 window (a small laptop) in high contrast."""
    apply_color_scheme("high_contrast")
    window = open_demo(path, prefs)
    window.resize(1024, 600)
    show(window, "eppc", 3)
    save(window, "high-contrast-small-screen-eppc.png")
    show(window, "urgency", 103)
    save(window, "high-contrast-small-screen-urgency.png")
    window.close()


def main() -> None:
    application()
    apply_color_scheme("system")  # as the app starts (the default preference), placeholder and all
    folder = Path(tempfile.mkdtemp(prefix="screens_"))
    prefs = Preferences(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
    path = build_demo(folder / "demo.prproj")
    sign_in_screen(path, prefs)
    window = open_demo(path, prefs)
    respond_screens(window)
    rank_screen(window)
    match_screen(window)
    urgency_screen(window)
    eppc_screen(window)
    facts_screens(window)
    window.close()
    dashboard_screens(path, prefs)
    pi_inbox_and_adjudication_screens(path, prefs)
    apply_color_scheme("dark")
    dark = open_demo(path, prefs)
    show(dark, "match")
    save(dark, "match-dark.png")
    dark.close()
    pi_setup_and_copies_screens(path, prefs)
    small_high_contrast_screens(path, prefs)
    QTimer.singleShot(0, QApplication.instance().quit)


if __name__ == "__main__":
    sys.exit(main())
