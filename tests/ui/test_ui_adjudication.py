"""Adjudication in the desktop app: the PI opens Tools > Adjudicate disagreements, sees the
units whose annotators disagree with their answers side by side, and saves a decision as the
gold answer with a note, either taking one answer as it is or editing it in the kind's editor.
The annotators' answers, and every agreement figure computed from them, stay as they were."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit, QMessageBox, QTextBrowser
from ui_support import make_gui_study, open_window, preferences, shown_text

from portalreview.analysis import eppc as eppc_analysis
from portalreview.analysis import facts as facts_analysis
from portalreview.analysis import match as match_analysis
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StoreError, StudyService
from portalreview.ui.adjudication import AdjudicationDialog, AnswerColumn, collect, summary_lines
from portalreview.ui.tools import TOOLS

AVA_EPPC = {
    "labels": [
        {"code": "InfoGive", "subcode": "Symptoms", "spans": [[11, 30]]},
    ]
}
BEN_EPPC = {
    "labels": [
        {"code": "InfoGive", "subcode": "Symptoms", "spans": [[11, 30]]},
        {"code": "Socioemotional/Empathy", "subcode": "Sadness/fear", "spans": [[11, 30]]},
    ]
}


def facts_payload(edit_kept: bool) -> dict:
    return {
        "facts": [
            {"side": "original", "text": "Go to the ER now", "entailed": True},
            {
                "side": "edited",
                "text": "You will be fine",
                "entailed": edit_kept,
                "error_category": None if edit_kept else "false_assurance",
            },
        ]
    }


@pytest.fixture
def study(tmp_path):
    return study_with_disagreements(tmp_path)


def study_with_disagreements(tmp_path):
    """The small study with submitted answers of ava and ben: they disagree on the EPPC and
    facts units and agree on the match unit."""
    gui = make_gui_study(tmp_path)
    ids = gui.ids
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        reference = svc.sentences(response_id=ids.reference)
        draft = svc.sentences(response_id=ids.draft1)
        no_match = [{"sentence_id": x.id, "spans": []} for x in reference]
        themes = [{"sentence_id": x.id, "theme": "other"} for x in (*reference, *draft)]
        for who, eppc, kept in ((ids.ava, AVA_EPPC, True), (ids.ben, BEN_EPPC, False)):
            svc.save_answer(ids.units["eppc"], eppc, status="submitted", annotator_id=who)
            svc.save_answer(
                ids.units["facts"], facts_payload(kept), status="submitted", annotator_id=who
            )
            svc.save_answer(
                ids.units["match"],
                {"decisions": no_match, "themes": themes},
                status="submitted",
                annotator_id=who,
            )
    return gui


def figures(path) -> dict:
    """Agreement figures that rest on the annotators' answers only."""
    with Project.open(path, read_only=True) as project:
        frames = read_frames(project)
        catalogs = StudyService(project).catalogs
        eppc = eppc_analysis.analyse(frames, n_resamples=50, catalogs=catalogs)
        facts = facts_analysis.analyse(frames, n_resamples=50, catalogs=catalogs)
        match = match_analysis.analyse(frames, n_resamples=50, catalogs=catalogs)
    eppc_between = {k: v for k, v in eppc.items() if k not in ("n_gold_units", "vs_gold")}
    return {"eppc": eppc_between, "facts": facts, "match": match}


def gold_of(path, unit_id):
    with Project.open(path, read_only=True) as project:
        return StudyService(project).as_viewer("pat").get_answer(unit_id, gold=True)


def answers_of(path, unit_id):
    with Project.open(path, read_only=True) as project:
        svc = StudyService(project).as_viewer("pat")
        return [(a.annotator_id, a.payload) for a in svc.answers_for_unit(unit_id)]


def open_adjudication(qtbot, window) -> AdjudicationDialog:
    tool = next(t for t in TOOLS if t.title == "Adjudicate disagreements")
    assert tool.roles == ("pi",)
    dialog = tool.load()(window)
    assert isinstance(dialog, AdjudicationDialog)
    qtbot.waitUntil(dialog.isVisible)
    wait_loaded(qtbot, dialog)
    return dialog


def wait_loaded(qtbot, dialog: AdjudicationDialog) -> None:
    """The window reads a kind's answers in the background: wait for its list."""
    qtbot.waitUntil(lambda: not dialog.loading, timeout=10_000)


def choose_kind(qtbot, dialog: AdjudicationDialog, kind: str) -> None:
    dialog.set_kind(kind)
    wait_loaded(qtbot, dialog)


def test_the_pi_adjudicates_disagreements_into_gold(qtbot, study, tmp_path):
    ids = study.ids
    before = figures(study.path)
    answers_before = {u: answers_of(study.path, ids.units[u]) for u in ("eppc", "facts")}
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)

    # EPPC: one disagreement, both answers side by side, the differing line marked
    choose_kind(qtbot, dialog, "eppc")
    assert dialog.units.count() == 1
    assert dialog.units.item(0).data(Qt.ItemDataRole.UserRole) == ids.units["eppc"]
    assert "2 answers, 2 different" in dialog.unit_header.text()
    assert [c.title() for c in dialog.columns] == ["1. Ava (RN)", "2. Dr. Ben"]
    ben_html = dialog.columns[1].findChild(QTextBrowser).toHtml()
    assert "Sadness / fear" in ben_html and "background-color" in ben_html

    # edit Ben's answer in the EPPC editor: keep his codes, change the subcode, save as gold
    qtbot.mouseClick(dialog.columns[1].load, Qt.MouseButton.LeftButton)
    editor = dialog.editor
    assert editor is dialog.editors["eppc"]
    assert editor.payload() == BEN_EPPC
    assert "Dr. Ben's answer" in dialog.source_label.text()
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_9)  # go to Socioemotional / empathy
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert dialog.dirty
    qtbot.keyClicks(dialog.note, "Worry, not sadness: consensus meeting 3")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert not dialog.dirty
    assert "Gold answer saved" in dialog.status.text()
    assert dialog.units.item(0).text().startswith("✓")
    gold = gold_of(study.path, ids.units["eppc"])
    assert gold.is_gold and gold.status == "submitted"
    assert gold.comment == "Worry, not sadness: consensus meeting 3"
    assert gold.payload == {
        "labels": [
            {"code": "InfoGive", "subcode": "Symptoms", "spans": [[11, 30]]},
            {
                "code": "Socioemotional/Empathy",
                "subcode": "ExpressConcern/unease",
                "spans": [[11, 30]],
            },
        ]
    }

    # Facts: take Ava's answer as it is (the note says so by default)
    choose_kind(qtbot, dialog, "facts")
    assert dialog.units.count() == 1
    assert "You will be fine" in dialog.columns[1].findChild(QTextBrowser).toPlainText()
    qtbot.mouseClick(dialog.columns[0].take, Qt.MouseButton.LeftButton)
    gold = gold_of(study.path, ids.units["facts"])
    assert gold.comment == "Took Ava (RN)'s answer"
    assert gold.payload == answers_before["facts"][0][1]
    assert dialog.editor.payload() == gold.payload  # the editor shows the new gold

    # the agreed match unit is not listed; hiding adjudicated units empties the list
    choose_kind(qtbot, dialog, "match")
    assert dialog.units.count() == 0
    choose_kind(qtbot, dialog, "facts")
    dialog.hide_done.setChecked(True)
    assert dialog.units.count() == 0
    dialog.close()
    window.close()

    # the annotators' answers and the agreement figures are as they were
    for unit in ("eppc", "facts"):
        assert answers_of(study.path, ids.units[unit])[:2] == answers_before[unit]
    after = figures(study.path)
    assert after == before
    with Project.open(study.path, read_only=True) as project:
        eppc = eppc_analysis.analyse(read_frames(project), n_resamples=50)
    assert eppc["n_gold_units"] == 1  # while the figures against gold now have a gold


def test_every_kind_s_name_is_whole_in_the_kind_box(qtbot, study, tmp_path):
    """The kinds are filled in after the first read: the box was sized before them and cut
    "Code sentences (EPPC)" to "Code ser"."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    box = dialog.kind_box
    assert box.count() > 1
    longest = max(box.fontMetrics().horizontalAdvance(box.itemText(i)) for i in range(box.count()))
    qtbot.waitUntil(lambda: box.width() > longest)  # (laid out again once the kinds are in)
    options = (dialog.hide_done, dialog.only_diff, dialog.with_drafts)
    for option in options:  # the options under the kind box if the window is narrow
        assert option.width() >= option.sizeHint().width()


def test_ctrl_number_loads_an_answer_and_ctrl_s_saves_it(qtbot, study, tmp_path):
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "eppc")
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow())
    qtbot.keyClick(dialog.units, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert dialog.editor.payload() == AVA_EPPC
    qtbot.keyClick(dialog.units, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold.payload == AVA_EPPC
    assert gold.comment == "Edited from Ava (RN)'s answer"


def test_each_decision_gets_its_own_note_unless_the_pi_writes_one(qtbot, study, tmp_path):
    """The note names the answer the gold came from: taking Ben's after Ava's was taken, or
    editing Ben's, does not keep "Took Ava (RN)'s answer"; a note the PI typed is kept."""
    units = study.ids.units
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "facts")
    qtbot.mouseClick(dialog.columns[0].take, Qt.MouseButton.LeftButton)
    assert gold_of(study.path, units["facts"]).comment == "Took Ava (RN)'s answer"
    qtbot.mouseClick(dialog.columns[1].take, Qt.MouseButton.LeftButton)
    assert gold_of(study.path, units["facts"]).comment == "Took Dr. Ben's answer"
    qtbot.mouseClick(dialog.columns[0].load, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert gold_of(study.path, units["facts"]).comment == "Edited from Ava (RN)'s answer"
    dialog.note.selectAll()  # typing replaces the last decision's note
    qtbot.keyClicks(dialog.note, "Ben missed the dose")
    qtbot.mouseClick(dialog.columns[0].take, Qt.MouseButton.LeftButton)
    assert gold_of(study.path, units["facts"]).comment == "Ben missed the dose"

    # a decision made from scratch on another unit is not "Edited from" the last one's
    choose_kind(qtbot, dialog, "eppc")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert gold_of(study.path, units["eppc"]).comment == "Adjudicated"
    dialog.close()
    window.close()


def test_ctrl_s_saves_a_fact_typed_without_enter_as_gold(qtbot, study, tmp_path):
    """A new fact typed in its box, and a fact reworded in its cell (F2), neither entered."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "facts")
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow())
    qtbot.keyClick(dialog.units, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    original, edited = dialog.editor.sides["original"], dialog.editor.sides["edited"]
    qtbot.keyClicks(edited.entry, "Call 911")
    original.table.setFocus()
    original.table.setCurrentCell(0, 1)
    qtbot.keyClick(original.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    assert isinstance(cell, QLineEdit) and cell is not original.entry
    cell.selectAll()
    qtbot.keyClicks(cell, "Go to the ER now, do not drive")
    qtbot.keyClick(cell, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    gold = gold_of(study.path, study.ids.units["facts"])
    assert [(f["side"], f["text"]) for f in gold.payload["facts"]] == [
        ("original", "Go to the ER now, do not drive"),
        ("edited", "You will be fine"),
        ("edited", "Call 911"),
    ]


def test_a_fact_cell_opened_and_left_with_esc_changes_nothing(qtbot, study, tmp_path, questions):
    """F2 then Esc with nothing typed marked the decision changed (asking Save / Discard on
    leaving); typing and then Esc still puts the old wording back, as a change."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "facts")
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow())
    qtbot.keyClick(dialog.units, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    dialog.dirty = False  # the answer taken in as the decision: start from a saved state
    original = dialog.editor.sides["original"]
    before = dialog.editor.payload()
    original.table.setFocus()
    original.table.setCurrentCell(0, 1)
    qtbot.keyClick(original.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    assert isinstance(cell, QLineEdit)
    qtbot.keyClick(cell, Qt.Key.Key_Escape)
    assert not dialog.dirty and dialog.editor.payload() == before
    qtbot.keyClick(original.table, Qt.Key.Key_F2)
    cell = QApplication.focusWidget()
    qtbot.keyClicks(cell, " typed")
    assert dialog.dirty  # the rewording is a change as it is typed
    qtbot.keyClick(cell, Qt.Key.Key_Escape)
    assert dialog.editor.payload() == before  # Esc puts the old wording back
    dialog.dirty = False
    dialog.close()
    window.close()


def test_only_the_pi_can_adjudicate(qtbot, study, tmp_path, monkeypatch):
    told = []
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: told.append(a[2])))
    window = open_window(qtbot, preferences(tmp_path), study.path, "ava")
    tool = next(t for t in TOOLS if t.title == "Adjudicate disagreements")
    assert tool.load()(window) is None
    assert "principal investigator" in told[0]
    window._fill_tools_menu()
    action = next(a for a in window.tools_menu.actions() if a.text() == tool.title)
    assert not action.isEnabled()


def test_disagreements_and_summaries_without_widgets(study):
    with Project.open(study.path, read_only=True) as project:
        svc = StudyService(project).as_viewer("pat")
        reports = {r.unit_id: r for r in collect(svc, "eppc")}
        report = reports[study.ids.units["eppc"]]
        assert report.differs and report.gold is None
        unit = svc.read_unit(report.unit_id)
        lines = summary_lines("eppc", BEN_EPPC, unit, svc.catalogs)
        assert lines == [
            "Information giving → Symptoms: “crushing chest pain”",
            "Socioemotional / empathy → Sadness / fear: “crushing chest pain”",
        ]
        assert summary_lines("eppc", {"labels": []}, unit, svc.catalogs) == ["No EPPC code"]
        facts_unit = svc.read_unit(study.ids.units["facts"])
        assert summary_lines("facts", facts_payload(False), facts_unit, svc.catalogs) == [
            "Original: “Go to the ER now” — kept",
            "Edited: “You will be fine” — ADDED (False assurance)",
        ]
        match = {r.unit_id: r for r in collect(svc, "match")}[study.ids.units["match"]]
        assert not match.differs


# --- leaving the window over a decision not saved as gold -----------------------------------

ASKED = "not saved as gold yet"
BEN_EDITED = {  # Ben's answer with his second code's subcode changed, as the editor holds it
    "labels": [
        {"code": "InfoGive", "subcode": "Symptoms", "spans": [[11, 30]]},
        {"code": "Socioemotional/Empathy", "subcode": "ExpressConcern/unease", "spans": [[11, 30]]},
    ]
}


class Questions(list):
    """The questions asked (their text); each is answered with ``answer``."""

    answer = QMessageBox.StandardButton.Cancel


@pytest.fixture
def questions(monkeypatch):
    yield from asking(monkeypatch)


def asking(monkeypatch):
    """QMessageBox.question answered without a window, for the ``questions`` fixtures."""
    asked = Questions()

    def question(*args, **_kwargs):
        asked.append(args[2])
        return asked.answer

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    yield asked
    for widget in QApplication.allWidgets():  # a test that failed must not ask when torn down
        if isinstance(widget, AdjudicationDialog):
            widget.dirty = False


def edited_gold(qtbot, study, tmp_path) -> tuple:
    """The PI's window and adjudication window, Ben's EPPC answer loaded with Ctrl+2 and
    changed in the editor, not saved as gold."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "eppc")
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow())
    qtbot.keyClick(dialog.units, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    codes = dialog.editor.codes_list
    qtbot.keyClick(codes, Qt.Key.Key_9)
    qtbot.keyClick(codes, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert dialog.dirty and dialog.editor.payload() == BEN_EDITED
    return window, dialog


def test_escape_over_unsaved_gold_asks_and_cancel_keeps_it(qtbot, study, tmp_path, questions):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_Escape)
    assert len(questions) == 1 and ASKED in questions[0]
    assert dialog.isVisible() and dialog.dirty
    assert dialog.editor.payload() == BEN_EDITED
    assert not dialog.close()  # the window's close button asks the same
    assert len(questions) == 2 and ASKED in questions[1]
    assert dialog.isVisible() and dialog.dirty and dialog.editor.payload() == BEN_EDITED
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    questions.answer = QMessageBox.StandardButton.Discard  # so that the test ends asking nothing
    window.close()


def test_escape_then_discard_closes_and_drops_the_edit(qtbot, study, tmp_path, questions):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    questions.answer = QMessageBox.StandardButton.Discard
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_Escape)
    assert len(questions) == 1
    assert not dialog.isVisible() and not dialog.dirty
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    again = open_adjudication(qtbot, window)  # opened again: the stored state, not the edit
    assert again.editor.payload() != BEN_EDITED and not again.dirty
    window.close()
    assert len(questions) == 1


def test_escape_then_save_stores_the_gold(qtbot, study, tmp_path, questions):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    questions.answer = QMessageBox.StandardButton.Save
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_Escape)
    assert len(questions) == 1 and not dialog.isVisible() and not dialog.dirty
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold.payload == BEN_EDITED and gold.comment == "Edited from Dr. Ben's answer"
    window.close()


def test_escape_saves_a_fact_typed_without_enter(qtbot, study, tmp_path, questions):
    """Words typed in the new-fact box, not entered, are an edit too: Escape asks."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "facts")
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow())
    qtbot.keyClick(dialog.units, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    entry = dialog.editor.sides["edited"].entry
    qtbot.keyClicks(entry, "Call 911")
    questions.answer = QMessageBox.StandardButton.Save
    qtbot.keyClick(entry, Qt.Key.Key_Escape)
    assert len(questions) == 1 and not dialog.isVisible()
    gold = gold_of(study.path, study.ids.units["facts"])
    assert [f["text"] for f in gold.payload["facts"]][-1] == "Call 911"
    window.close()


def disk_full(monkeypatch, dialog) -> None:
    """The gold save fails, as on a full disk."""

    def refused(*_args, **_kwargs):
        raise StoreError("the disk is full")

    monkeypatch.setattr(dialog.service, "save_answer", refused)


def test_a_failed_save_on_escape_keeps_the_window_and_says_why(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    disk_full(monkeypatch, dialog)
    questions.answer = QMessageBox.StandardButton.Save
    qtbot.keyClick(dialog.editor.codes_list, Qt.Key.Key_Escape)
    assert dialog.isVisible() and dialog.dirty
    assert "Not saved: the disk is full" in dialog.status.text()
    monkeypatch.undo()
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: questions.answer))
    window.close()
    assert gold_of(study.path, study.ids.units["eppc"]).payload == BEN_EDITED


def test_closing_the_main_window_asks_about_unsaved_gold(qtbot, study, tmp_path, questions):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    assert not window.close()  # Cancel: the window, the project and the edit stay
    assert len(questions) == 1 and ASKED in questions[0]
    assert window.isVisible() and window.project is not None and window.session is not None
    assert dialog.isVisible() and dialog.dirty and dialog.editor.payload() == BEN_EDITED
    assert gold_of(study.path, study.ids.units["eppc"]) is None
    questions.answer = QMessageBox.StandardButton.Save
    assert window.close()
    assert len(questions) == 2
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold.payload == BEN_EDITED and gold.comment == "Edited from Dr. Ben's answer"


def test_closing_the_project_asks_about_unsaved_gold(qtbot, study, tmp_path, questions):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    project, session = window.project, window.session
    assert not window.close_project()
    assert len(questions) == 1 and ASKED in questions[0]
    assert window.project is project and window.session is session  # nothing closed
    assert dialog.isVisible() and dialog.dirty and dialog.editor.payload() == BEN_EDITED
    questions.answer = QMessageBox.StandardButton.Save
    assert window.close_project()
    assert window.project is None
    assert not dialog.isVisible()  # the closed project's adjudication window goes with it
    gold = gold_of(study.path, study.ids.units["eppc"])
    assert gold.payload == BEN_EDITED


def test_a_failed_save_on_closing_the_project_keeps_it_open(
    qtbot, study, tmp_path, questions, monkeypatch
):
    window, dialog = edited_gold(qtbot, study, tmp_path)
    disk_full(monkeypatch, dialog)
    questions.answer = QMessageBox.StandardButton.Save
    assert not window.close()
    assert window.isVisible() and window.project is not None
    assert dialog.isVisible() and dialog.dirty
    assert "Not saved: the disk is full" in dialog.status.text()
    questions.answer = QMessageBox.StandardButton.Discard
    assert window.close()
    assert gold_of(study.path, study.ids.units["eppc"]) is None


def test_gold_with_a_response_marked_incorrect_without_a_reason_is_kept_as_a_draft(
    qtbot, study, tmp_path
):
    """As for a clinician (seed 001 Sec. 5: "incorrect" means meeting one of C1-C3): the PI's
    edited gold with an unexplained incorrect mark is saved as a draft, and the status says
    which response lacks its reason."""
    ids, unit = study.ids, study.ids.units["rank"]
    with Project.open(study.path) as project:
        svc = StudyService(project)
        members = svc.read_unit(unit).responses
        for who, flip in ((ids.ava, False), (ids.ben, True)):
            entries = [
                {"response_id": r.id, "rank": 1 + (i ^ flip), "correct": True, "criteria": []}
                for i, r in enumerate(members)
            ]
            svc.save_answer(unit, {"entries": entries}, status="submitted", annotator_id=who)
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "rank")
    assert dialog.units.count() == 1
    qtbot.mouseClick(dialog.columns[0].load, Qt.MouseButton.LeftButton)
    editor = dialog.editor
    editor.set_correct(editor.order[1], False)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    gold = gold_of(study.path, unit)
    assert gold.status == "draft"
    assert "Response B marked incorrect with no reason" in dialog.status.text()
    assert "kept as a draft" in dialog.status.text()

    editor.toggle_criterion(editor.order[1], "C2")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    gold = gold_of(study.path, unit)
    assert gold.status == "submitted"
    assert [e["criteria"] for e in gold.payload["entries"] if e["correct"] is False] == [["C2"]]


def save_an_unfinished_eppc_decision(qtbot, dialog: AdjudicationDialog) -> None:
    """Ctrl+S on an EPPC decision with a code but not its subcode: kept as a draft."""
    choose_kind(qtbot, dialog, "eppc")
    unfinished = {"labels": [*AVA_EPPC["labels"], {**BEN_EPPC["labels"][1], "subcode": None}]}
    dialog._load(replace(dialog.report.answers[0], payload=unfinished), "an unfinished decision")
    assert dialog.save_gold()


def test_a_gold_answer_kept_as_a_draft_is_not_counted_as_adjudicated(qtbot, study, tmp_path):
    """A decision saved before it is complete (a code without its subcode) is kept as a draft
    gold answer, which the report does not use: the unit is marked ✎, not ✓, is not counted
    as adjudicated, and stays listed with "Hide units already adjudicated"."""
    ids = study.ids
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    save_an_unfinished_eppc_decision(qtbot, dialog)
    assert gold_of(study.path, ids.units["eppc"]).status == "draft"
    assert dialog.status.text().startswith("✎ Gold answer saved")
    assert dialog.units.item(0).text().startswith("✎")
    assert "0 of them adjudicated, 1 with a gold answer kept as a draft" in dialog.counts.text()
    dialog.hide_done.setChecked(True)
    assert dialog.units.count() == 1
    assert dialog.units.item(0).text().startswith("✎")

    assert dialog.take_as_gold(dialog.report.answers[1])  # a complete decision
    assert dialog.units.item(0).text().startswith("✓")
    assert "1 of them adjudicated." in dialog.counts.text()
    dialog.hide_done.setChecked(False)
    dialog.hide_done.setChecked(True)
    assert dialog.units.count() == 0


def test_the_status_shows_quotes_in_the_reason_as_quotes(qtbot, study, tmp_path):
    """The reason a decision is kept as a draft names the code in quotes, escaped for rich
    text: the status showed "&#x27;Socioemotional / empathy&#x27;" as it was written."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    save_an_unfinished_eppc_decision(qtbot, dialog)
    shown = shown_text(dialog.status)
    assert "the code 'Socioemotional / empathy' has no subcode" in shown
    assert "&#x27;" not in shown


def test_each_column_s_buttons_name_whose_answer_they_take(qtbot, study, tmp_path):
    """A screen reader heard "Take as gold" for every column: the buttons name the person."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, "eppc")
    ava, ben = dialog.columns
    assert ava.take.accessibleName() == "Take Ava (RN)'s answer as gold"
    assert ben.take.accessibleName() == "Take Dr. Ben's answer as gold"
    assert ben.load.accessibleName() == "Edit from Dr. Ben's answer (Ctrl+2)"
    assert ben.take.text() == "Take as gold"  # what is shown stays short

    assert dialog.take_as_gold(ben.answer)
    gold = dialog.findChild(AnswerColumn, "goldColumn")
    assert gold.load.accessibleName() == "Edit from the current gold answer"


def tab_regions(qtbot, dialog: AdjudicationDialog) -> list[str]:
    """Where Tab goes from the list of units until Save as gold, by region of the window."""
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    dialog.units.setFocus()
    columns = [
        dialog.answers_layout.itemAt(i).widget() for i in range(dialog.answers_layout.count())
    ]
    qtbot.waitUntil(lambda: all(c.isVisible() for c in columns))  # shown by the event loop

    def region(widget) -> str:
        for number, column in enumerate(columns, start=1):
            if column.isAncestorOf(widget):
                return f"answer {number}"
        if dialog.editor.isAncestorOf(widget) or widget is dialog.editor:
            return "gold editor"
        names = {dialog.units: "list", dialog.note: "note", dialog.save_button: "save"}
        return names.get(widget, f"{type(widget).__name__} {widget.objectName()}")

    regions = [region(QApplication.focusWidget())]
    while QApplication.focusWidget() is not dialog.save_button and len(regions) < 100:
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        regions.append(region(QApplication.focusWidget()))
    return [r for i, r in enumerate(regions) if i == 0 or regions[i - 1] != r]


@pytest.mark.parametrize("kind", ["eppc", "facts"])
def test_tab_goes_from_the_list_through_the_answers_to_the_editor_then_save(
    qtbot, study, tmp_path, kind
):
    """Tab went from the list to two scroll areas that show nothing, then to the note and
    Save at the bottom, and only then back up to the answers and the gold editor."""
    window = open_window(qtbot, preferences(tmp_path), study.path, "pat")
    dialog = open_adjudication(qtbot, window)
    choose_kind(qtbot, dialog, kind)
    order = ["list", "answer 1", "answer 2", "gold editor", "note", "save"]
    assert tab_regions(qtbot, dialog) == order

    assert dialog.take_as_gold(dialog.columns[0].answer)  # the columns are made again
    assert tab_regions(qtbot, dialog) == [*order[:3], "answer 3", *order[3:]]
