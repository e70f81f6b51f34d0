"""EPPC coding and fact checks in the desktop app, driven like a person would: codes by number
keys, a subcode by Alt+number and by the mouse, evidence selected with the mouse (also in text
with accents and emoji, whose offsets Qt counts differently); facts typed and taken from a
selection, judged with Y/N and given an error category; then the file holds exactly that."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from ui_support import (
    drag_select,
    open_window,
    show_kind,
    stored_answer,
    wait_saved,
)

from portalreview.domain.spans import merge_spans
from portalreview.store.kinds.base import PayloadError
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.offsets import TextOffsets, trim_span

SENTENCE = "I have had crushing chest pain since this morning."
EMOJI_MESSAGE = "Café 😀 naïve: my stomach 🤢 hurts after the pills. Thanks!"
EMOJI_SENTENCE = "Café 😀 naïve: my stomach 🤢 hurts after the pills."


def utf16(text: str, index: int) -> int:
    """Qt's position of Python index ``index`` (counted here independently of the app)."""
    return len(text[:index].encode("utf-16-le")) // 2


def select_words(view, text: str, words: str) -> tuple[int, int]:
    """Select ``words`` of ``text`` with the mouse; returns their Python offsets."""
    start = text.index(words)
    end = start + len(words)
    drag_select(view, utf16(text, start), utf16(text, end))
    cursor = view.textCursor()
    assert (cursor.selectionStart(), cursor.selectionEnd()) == (
        utf16(text, start),
        utf16(text, end),
    )
    return start, end


# --- EPPC ----------------------------------------------------------------------------------


def test_a_coder_picks_codes_a_subcode_and_evidence_spans_with_the_mouse(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    assert editor.sentence_view.toPlainText() == SENTENCE
    assert "From the patient" in editor.sender_label.text()
    assert "Hi Dr. Lee," in editor.previous_label.text()
    assert "Should I come in?" in editor.next_label.text()

    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)  # Information giving, now current
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_9)  # Socioemotional / empathy, now current
    assert list(editor.state["labels"]) == ["InfoGive", "Socioemotional/Empathy"]
    assert editor.current == "Socioemotional/Empathy"
    # The subcode choices are the current code's own, with their definitions as tooltips.
    empathy = editor.code("Socioemotional/Empathy")
    assert list(editor.subcode_buttons) == [s.id for s in empathy.subcodes]
    assert editor.subcode_buttons["Sadness/fear"].toolTip() == empathy.subcodes[1].definition
    qtbot.mouseClick(editor.subcode_buttons["ExpressConcern/unease"], Qt.MouseButton.LeftButton)
    worry = select_words(editor.sentence_view, SENTENCE, "crushing chest pain")
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_E)

    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)  # back to Information giving (stays chosen)
    assert editor.current == "InfoGive"
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert editor.state["labels"]["InfoGive"]["subcode"] == "Symptoms"
    # Two pieces of evidence, the second with Enter: one discontinuous span.
    first = select_words(editor.sentence_view, SENTENCE, "crushing chest pain")
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_E)
    second = select_words(editor.sentence_view, SENTENCE, "since this morning")
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_Return)
    assert editor.evidence_list.count() == 2
    assert editor.evidence_list.item(1).text() == "“since this morning”"
    highlighted = [s.cursor.selectedText() for s in editor.sentence_view.extraSelections()]
    assert highlighted == ["crushing chest pain", "since this morning", "crushing chest pain"]
    # the codebook follows the current code
    assert "Information giving" in editor.label_box.title()

    wait_saved(qtbot, window)
    window.act_submit.trigger()
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["eppc"], "ava")
    assert answer.status == "submitted"
    assert answer.payload == {
        "labels": [
            {"code": "InfoGive", "subcode": "Symptoms", "spans": [list(first), list(second)]},
            {
                "code": "Socioemotional/Empathy",
                "subcode": "ExpressConcern/unease",
                "spans": [list(worry)],
            },
        ]
    }


def test_removing_evidence_and_codes_and_undo(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_2)  # Information seeking
    select_words(editor.sentence_view, SENTENCE, "chest pain")
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_E)
    assert editor.state["labels"]["InfoSeek"]["spans"] == [[20, 30]]
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_Delete)
    assert editor.state["labels"]["InfoSeek"]["spans"] == []
    window.act_undo.trigger()
    assert editor.state["labels"]["InfoSeek"]["spans"] == [[20, 30]]
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_2)  # on the current code: removes it
    assert editor.state["labels"] == {}
    window.act_undo.trigger()
    assert "InfoSeek" in editor.state["labels"]
    # W shows the whole message with the current sentence marked, and hides it again
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_W)
    assert editor.message_view.isVisible()
    assert editor.message_view.toPlainText() == window.session.unit.cases[0].message
    (marked,) = editor.message_view.extraSelections()
    assert marked.cursor.selectedText() == SENTENCE
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_W)
    assert not editor.message_view.isVisible()
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, gui.ids.units["eppc"], "ava").payload == {
        "labels": [{"code": "InfoSeek", "subcode": None, "spans": [[20, 30]]}]
    }


def test_a_subcode_of_another_code_is_refused(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)  # Information giving
    info_give = editor.code("InfoGive")
    # The UI offers only the code's own subcodes ...
    assert list(editor.subcode_buttons) == [s.id for s in info_give.subcodes]
    assert "salutation" not in editor.subcode_buttons
    # ... refuses another code's subcode with a message naming the code's own ...
    assert editor.set_subcode("InfoGive", "salutation") is False
    assert "not a subcode of Information giving" in editor.notice_label.text()
    assert "Symptoms" in editor.notice_label.text()
    assert editor.state["labels"]["InfoGive"]["subcode"] is None
    # ... and a number past the code's subcodes (it has 8).
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_9, Qt.KeyboardModifier.AltModifier)
    assert editor.state["labels"]["InfoGive"]["subcode"] is None
    assert "has 8 subcodes" in editor.notice_label.text()
    assert "has 8 subcodes" in window.statusBar().currentMessage()  # said where it is seen
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, gui.ids.units["eppc"], "ava").payload == {
        "labels": [{"code": "InfoGive", "subcode": None, "spans": []}]
    }
    window.close()

    # The store refuses it too, whoever sends it, and keeps the answer as it was.
    with Project.open(gui.path) as project:
        svc = StudyService(project).as_viewer("ava")
        with pytest.raises(PayloadError, match="not a subcode of InfoGive"):
            svc.save_answer(
                gui.ids.units["eppc"],
                {"labels": [{"code": "InfoGive", "subcode": "salutation", "spans": []}]},
            )
        # "salutation" is a subcode of both partnership codes: under its own code it is fine
        svc.save_answer(
            gui.ids.units["eppc"],
            {"labels": [{"code": "PartnershipPatient", "subcode": "salutation", "spans": []}]},
        )
        assert svc.get_answer(gui.ids.units["eppc"]).payload["labels"][0]["subcode"] == (
            "salutation"
        )


def add_emoji_unit(path) -> int:
    with Project.open(path) as project:
        svc = StudyService(project)
        case = svc.add_case("emoji", EMOJI_MESSAGE)
        sentence = svc.sentences(case_id=case)[0]
        assert sentence.text == EMOJI_SENTENCE
        unit_set = svc.create_unit_set("accents and emoji", "eppc")
        unit = svc.add_unit(unit_set, case, sentence_id=sentence.id)
        ava = next(a.id for a in svc.annotators() if a.name == "ava")
        svc.assign(unit, ava)
    return unit


def test_span_offsets_are_characters_of_the_sentence_with_accents_and_emoji(qtbot, gui, prefs):
    unit = add_emoji_unit(gui.path)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    assert window.queue.select_unit(unit)
    editor = window.editors["eppc"]
    view = editor.sentence_view
    assert view.toPlainText() == EMOJI_SENTENCE
    # Qt counts 😀 as two positions: after it, its positions run one ahead of Python's.
    assert view.document().characterCount() - 1 == len(EMOJI_SENTENCE) + 2

    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    stomach = select_words(view, EMOJI_SENTENCE, "stomach 🤢 hurts")
    qtbot.keyClick(view, Qt.Key.Key_E)
    naive = select_words(view, EMOJI_SENTENCE, "Café 😀 naïve")
    qtbot.keyClick(view, Qt.Key.Key_E)
    assert stomach == (17, 32)
    assert naive == (0, 12)
    highlighted = {s.cursor.selectedText() for s in view.extraSelections()}
    assert highlighted == {"Café 😀 naïve", "stomach 🤢 hurts"}
    wait_saved(qtbot, window)
    window.close()

    answer = stored_answer(gui.path, unit, "ava")
    (label,) = answer.payload["labels"]
    assert label["spans"] == [[0, 12], [17, 32]]
    assert [EMOJI_SENTENCE[s:e] for s, e in label["spans"]] == [
        "Café 😀 naïve",
        "stomach 🤢 hurts",
    ]
    # reopened, the stored offsets highlight the same words again
    again = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(again, "eppc")
    assert again.queue.select_unit(unit)
    view = again.editors["eppc"].sentence_view
    highlighted = {s.cursor.selectedText() for s in view.extraSelections()}
    assert highlighted == {"Café 😀 naïve", "stomach 🤢 hurts"}


def test_evidence_in_a_message_that_starts_with_a_bom_is_stored_as_the_words_selected(
    qtbot, gui, prefs
):
    # a message read from a Notepad file (UTF-8 with BOM): Qt drops the leading U+FEFF
    message = "\ufeffMy stomach hurts since Monday. Thanks."
    with Project.open(gui.path) as project:
        svc = StudyService(project)
        case = svc.add_case("bom", message)
        sentence = svc.sentences(case_id=case)[0]
        unit = svc.add_unit(svc.create_unit_set("bom", "eppc"), case, sentence_id=sentence.id)
        svc.assign(unit, gui.ids.ava)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    assert window.queue.select_unit(unit)
    editor = window.editors["eppc"]
    view = editor.sentence_view
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)
    for words in ("stomach hurts", "My"):
        found = view.document().find(words)
        drag_select(view, found.selectionStart(), found.selectionEnd())
        assert view.textCursor().selectedText() == words
        qtbot.keyClick(view, Qt.Key.Key_E)
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_W)  # the sentence marked in the message
    (marked,) = editor.message_view.extraSelections()
    assert marked.cursor.selectedText() == "My stomach hurts since Monday."
    wait_saved(qtbot, window)
    window.close()

    (label,) = stored_answer(gui.path, unit, "ava").payload["labels"]
    assert [sentence.text[s:e] for s, e in label["spans"]] == ["My", "stomach hurts"]


def test_offsets_between_python_and_qt():
    text = "Cafe\u0301 😀 a\r\nb 🤢"  # a combining accent, emoji, a Windows line break
    offsets = TextOffsets(text)
    assert offsets.qt_length == len(text) + 2 - 1  # two emoji +1 each, "\r\n" -1
    for index in range(len(text) + 1):
        if text[index - 1 : index + 1] != "\r\n":
            assert offsets.from_qt(offsets.to_qt(index)) == index
    assert offsets.to_qt(text.index("😀") + 1) == 8
    assert offsets.from_qt(7) == 6 and offsets.from_qt(7, round_up=True) == 7  # mid-emoji
    assert offsets.span_from_qt(offsets.qt_length, 0) == (0, len(text))
    assert trim_span("  a b  ", 0, 7) == (2, 5)
    assert merge_spans([[5, 8], [0, 2], [2, 3], [7, 9]]) == [[0, 3], [5, 9]]


# --- facts ---------------------------------------------------------------------------------


def test_facts_are_stored_with_entailment_and_error_categories(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    original, edited = editor.sides["original"], editor.sides["edited"]
    assert original.text_view.toPlainText() == "Go to the ER now."
    assert "Fact-Recall" in editor.scores.text()

    # a typed fact of the original, and two facts of the edit taken from a selection
    qtbot.keyClicks(original.entry, "Go to the ER now")
    qtbot.keyClick(original.entry, Qt.Key.Key_Return)
    text = edited.text_view.toPlainText()
    select_words(edited.text_view, text, "Please go to the ER now")
    qtbot.keyClick(edited.text_view, Qt.Key.Key_F)
    select_words(edited.text_view, text, "You will be fine")
    qtbot.keyClick(edited.text_view, Qt.Key.Key_F)
    qtbot.keyClicks(edited.entry, "The patient is going through something hard")
    qtbot.keyClick(edited.entry, Qt.Key.Key_Return)
    assert [f["text"] for f in editor.state["edited"]] == [
        "Please go to the ER now",
        "You will be fine",
        "The patient is going through something hard",
    ]
    assert "not judged yet" in editor.scores.text()

    # judge by keyboard: Y kept / supported, 6 = the 6th error category (not entailed)
    original.table.setCurrentCell(0, 1)
    qtbot.keyClick(original.table, Qt.Key.Key_Y)
    edited.table.setCurrentCell(0, 1)
    qtbot.keyClick(edited.table, Qt.Key.Key_Y)  # moves on to the next fact
    qtbot.keyClick(edited.table, Qt.Key.Key_6)
    qtbot.keyClick(edited.table, Qt.Key.Key_N)
    # and one error category with the mouse's drop-down
    box = edited.category_boxes[2]
    assert box.isEnabled()
    box.setCurrentIndex(box.findData("clinical_assumption"))
    categories = editor.catalogs.error_categories
    assert categories[5].id == "false_assurance"
    assert "Fact-Recall 1.00" in editor.scores.text()
    assert "Fact-Precision 0.33" in editor.scores.text()
    assert "2 added" in editor.scores.text()
    # a category can be cleared by marking the fact entailed after all; undo brings it back
    edited.table.setCurrentCell(1, 1)
    qtbot.keyClick(edited.table, Qt.Key.Key_Y)
    assert editor.state["edited"][1]["error_category"] is None
    window.act_undo.trigger()
    assert editor.state["edited"][1]["error_category"] == "false_assurance"

    wait_saved(qtbot, window)
    window.act_submit.trigger()
    window.close()
    answer = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert answer.status == "submitted"
    assert answer.payload == {
        "facts": [
            {
                "side": "original",
                "text": "Go to the ER now",
                "entailed": True,
                "error_category": None,
            },
            {
                "side": "edited",
                "text": "Please go to the ER now",
                "entailed": True,
                "error_category": None,
            },
            {
                "side": "edited",
                "text": "You will be fine",
                "entailed": False,
                "error_category": "false_assurance",
            },
            {
                "side": "edited",
                "text": "The patient is going through something hard",
                "entailed": False,
                "error_category": "clinical_assumption",
            },
        ]
    }


def test_facts_are_edited_and_removed_and_shown_again(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    side = editor.sides["original"]
    for fact in ("Go to the ER", "Now"):
        qtbot.keyClicks(side.entry, fact)
        qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    side.table.item(0, 1).setText("Go to the ER now")  # as the cell editor does
    side.table.setCurrentCell(1, 1)
    qtbot.keyClick(side.table, Qt.Key.Key_Delete)
    assert [f["text"] for f in editor.state["original"]] == ["Go to the ER now"]
    side.table.setCurrentCell(0, 1)
    qtbot.keyClick(side.table, Qt.Key.Key_N)
    qtbot.keyClick(side.table, Qt.Key.Key_3)
    wait_saved(qtbot, window)
    window.close()

    again = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(again, "facts")
    side = again.editors["facts"].sides["original"]
    assert side.table.rowCount() == 1
    assert side.table.item(0, 1).text() == "Go to the ER now"
    assert side.entailed_boxes[0].currentText() == "No"
    assert side.category_boxes[0].currentData() == "clinical_inaccuracy"
    assert "Fact-Recall 0.00" in again.editors["facts"].scores.text()


def test_a_code_added_without_subcodes_is_coded_and_submitted(qtbot, gui, prefs):
    """A code the PI added with no subcodes: its row says there is none to choose (not "no
    subcode yet"), and a sentence coded with it and its evidence is submitted."""
    with Project.open(gui.path, automatic_backup=False) as project:
        StudyService(project).extend_catalogs(
            {
                "version": "site-2",
                "eppc_codes": [
                    {"id": "Humor", "name": "Humor", "definition": "A joke.", "subcodes": []}
                ],
            }
        )
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    item = editor.codes_list.item(editor.codes_list.count() - 1)
    item.setCheckState(Qt.CheckState.Checked)
    drag_select(editor.sentence_view, 0, 8)
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_E)
    assert "Humor\n→ no subcodes to choose · 1 span" in item.text()
    qtbot.keyClick(window, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["eppc"], "ava")
    assert stored.status == "submitted"
    assert stored.payload["labels"] == [{"code": "Humor", "subcode": None, "spans": [[0, 8]]}]


def test_a_subcode_chosen_keeps_the_focus_and_tab_reaches_the_subcodes_in_place(
    qtbot, gui, prefs
):
    """The subcode buttons are made anew on each change: the focused one was deleted and the
    focus went to the work queue's filter (the next arrow key emptied the queue), and Tab
    reached the subcodes last, after the comment box."""
    from PySide6.QtWidgets import QApplication

    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    window.activateWindow()
    editor = window.editors["eppc"]
    editor.codes_list.setFocus()
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)
    drugs = editor.subcode_buttons["Drugs"]
    drugs.setFocus(Qt.FocusReason.TabFocusReason)  # reached by Tab, chosen with Space
    qtbot.keyClick(drugs, Qt.Key.Key_Space)
    assert editor.state["labels"]["InfoGive"]["subcode"] == "Drugs"
    focus = QApplication.focusWidget()
    assert focus is editor.subcode_buttons["Drugs"]
    qtbot.keyClick(focus, Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)  # the editor's keys
    assert editor.state["labels"]["InfoGive"]["subcode"] == editor.code("InfoGive").subcodes[1].id
    editor.sentence_view.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(editor.sentence_view, Qt.Key.Key_Tab)  # the subcodes, where they are
    assert QApplication.focusWidget() in editor.subcode_buttons.values()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)  # then the evidence
    assert QApplication.focusWidget() is editor.evidence_list
    window.close()
