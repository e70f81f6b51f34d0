"""Study text (imported messages, names, codebook entries) is shown as written, never read as
HTML: Qt renders a tooltip, and a label not set to plain text, as rich text when it looks like
HTML, so an imported ``<img src="file:...">`` loaded and drew that local file (on Windows a
``file://host/share`` address would contact that server), a message holding a huge
``<table>`` froze the inbox view on each hover, and "Cardiology <ED> pilot" or "x < 5" lost
words."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.ui import drafts_dialog, inbox_view
from portalreview.ui.main_window import MainWindow
from portalreview.ui.model_panel import ModelDialog
from portalreview.ui.sign_in import SignInDialog
from tests.ui.ui_support import open_window, preferences, show_kind, shown_text

#: A study value as an import or a codebook extension could bring it.
VALUE = '<img src="file:///no/such/probe.png">Cardiology <ED> pilot: x < 5 & y'
CODE_ID = "X<ED>"


def shown_tip(tip: str) -> str:
    """A tooltip as Qt shows it: read as HTML where it looks like HTML."""
    if not QtGui.Qt.mightBeRichText(tip):
        return tip
    document = QTextDocument()
    document.setHtml(tip)
    return document.toPlainText()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A study whose name, people, inbox, case, texts and codebook additions are ``VALUE``."""
    path = tmp_path_factory.mktemp("hostile") / "hostile.prproj"
    with Project.create(path, name=VALUE) as project:
        svc = StudyService(project)
        svc.extend_catalogs(
            {
                "eppc_codes": [
                    {
                        "id": CODE_ID,
                        "name": "Extra code",
                        "definition": VALUE,
                        "subcodes": [{"id": "xs", "name": "Extra sub", "definition": VALUE}],
                    }
                ],
                "criteria": [{"id": "C9", "name": VALUE, "definition": VALUE}],
                "themes": [
                    {
                        "id": "t9",
                        "name": VALUE,
                        "short": "T9",
                        "definition": VALUE,
                        "question": VALUE,
                    }
                ],
                "error_categories": [{"id": "e9", "name": "Extra", "definition": VALUE}],
            }
        )
        ava = svc.add_annotator("ava", VALUE)
        svc.add_annotator("pat", "Pat", role="pi")
        tags = {"inbox": VALUE}
        case1 = svc.add_case(VALUE, f"{VALUE}\nSecond line.", tags=tags, urgency_level=1)
        case2 = svc.add_case("c2", "Where is my flu shot record?", tags=tags, urgency_level=6)
        draft1 = svc.add_response(case1, "d1", "Please come in today.", author_kind="model")
        draft2 = svc.add_response(case1, "d2", "Call us now.", author_kind="model")
        reference = svc.add_response(case1, "ref", VALUE, author_kind="clinician")
        units = {"respond": svc.add_unit(svc.create_unit_set(f"{VALUE} respond", "respond"), case1)}
        first_sentence = svc.read_unit(units["respond"]).cases[0].sentences[0]
        members = {
            "rank": {"members": [draft1, draft2]},
            "match": {"response_id": reference, "response_b_id": draft1},
            "urgency": {"case_b_id": case2},
            "eppc": {"sentence_id": first_sentence.id},
            "facts": {"response_id": draft1, "response_b_id": draft2},
        }
        for kind, parts in members.items():
            unit_set = svc.create_unit_set(f"{VALUE} {kind}", kind)
            units[kind] = svc.add_unit(unit_set, case1, **parts)
        for unit in units.values():
            svc.assign(unit, ava)
        svc.save_answer(
            units["facts"],
            {"facts": [{"side": "original", "text": VALUE, "entailed": False}]},
            annotator_id=ava,
        )
        svc.add_suggestion(
            units["respond"],
            {"parts": {"empathy": "Empathy"}},
            model_file="smol.gguf",
            model_sha256="1" * 64,
            template_id=VALUE,
            refused_reason=VALUE,
        )
    return path


def sign_in_title(qtbot, _window: MainWindow) -> list[str]:
    dialog = SignInDialog(VALUE, [SimpleNamespace(name="ava", display_name="A", role="pi")])
    qtbot.addWidget(dialog)
    return [shown_text(dialog.findChild(QLabel))]


def status_bar(_qtbot, window: MainWindow) -> list[str]:
    person = window.person_label  # its whole text (the status bar's width cuts it) and tooltip
    document = QTextDocument()
    document.setHtml(person.whole_text())
    tips = [person.toolTip(), window.unit_label.toolTip()]
    return [document.toPlainText(), *(shown_tip(tip) for tip in tips)]


def case_header(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "respond")
    return [shown_text(window.editor_for("respond").case_panel.header)]


def inbox(qtbot, window: MainWindow) -> list[str]:
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: view.table.rowCount() > 0, timeout=20000)
    message = view.table.item(0, inbox_view.COLUMNS.index("Message"))
    return [shown_text(view.summary), shown_tip(message.toolTip())]


def eppc_codes(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "eppc")
    editor = window.editor_for("eppc")
    code = editor.codes_list.item(editor.codes_list.count() - 1)
    editor.set_code(CODE_ID, True)
    subcode = editor.subcode_buttons["xs"]
    assert f"({CODE_ID})" in shown_tip(code.toolTip())
    return [shown_tip(code.toolTip()), shown_tip(subcode.toolTip())]


def respond_captions(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "respond")
    captions = [shown_text(label) for label in window.editor_for("respond").findChildren(QLabel)]
    return [next(text for text in captions if "Cardiology" in text)]


def rank_criteria(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "rank")
    names = [w for w in window.editor_for("rank").findChildren(QLabel) if w.buddy() is not None]
    name = next(w for w in names if "Cardiology" in w.text())
    return [shown_text(name), shown_tip(name.toolTip()), shown_tip(name.buddy().toolTip())]


def match_sentence(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "match")
    editor = window.editor_for("match")
    box = next(iter(editor.ref_table.theme_boxes.values()))
    tip = box.itemData(box.findData("t9"), Qt.ItemDataRole.ToolTipRole)
    return [shown_text(editor.current_label), shown_tip(tip)]


def facts(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "facts")
    side = window.editor_for("facts").sides["original"]
    category = side.category_boxes[0]
    tip = category.itemData(category.findData("e9"), Qt.ItemDataRole.ToolTipRole)
    return [shown_tip(side.table.item(0, 1).toolTip()), shown_tip(tip)]


def suggestion_banner(_qtbot, window: MainWindow) -> list[str]:
    show_kind(window, "respond")
    banner = window.suggestions.banner(window.editor_for("respond"))
    banner.show_state("note", VALUE, VALUE)
    return [shown_text(banner.text), shown_tip(banner.text.toolTip())]


def refused_suggestions(_qtbot, window: MainWindow) -> list[str]:
    dialog = ModelDialog(window.suggestions.host, window)
    dialog.refresh_gates()
    return [shown_tip(dialog.refused_list.item(0).toolTip())]


def drafting(_qtbot, window: MainWindow) -> list[str]:
    dialog = drafts_dialog.open_tool(window)
    dialog.running = True  # as while a run drafts: the case it is on is named
    dialog._case_started(1, VALUE, VALUE)
    dialog.running = False
    return [shown_text(dialog.current)]


PLACES: list[tuple[str, Callable[..., list[str]]]] = [
    ("ava", sign_in_title),
    ("ava", status_bar),
    ("ava", case_header),
    ("ava", inbox),
    ("ava", eppc_codes),
    ("ava", respond_captions),
    ("ava", rank_criteria),
    ("ava", match_sentence),
    ("ava", facts),
    ("ava", suggestion_banner),
    ("pat", refused_suggestions),
    ("pat", drafting),
]


@pytest.mark.parametrize(("who", "place"), PLACES, ids=[p.__name__ for _w, p in PLACES])
def test_study_text_is_shown_as_written(qtbot, hostile, tmp_path, who, place):
    window = open_window(qtbot, preferences(tmp_path), hostile, who)
    for shown in place(qtbot, window):
        assert VALUE in shown


def test_a_tooltip_of_plain_text_is_left_alone_unless_qt_would_read_it_as_html():
    assert plain_tip("x < 5, <ED>") == "x < 5, <ED>"  # Qt shows these as they are
    assert shown_tip(plain_tip(VALUE)) == VALUE
    assert shown_tip(plain_tip(f"{VALUE}\nnext line")) == f"{VALUE}\nnext line"
