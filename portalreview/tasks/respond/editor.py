"""Respond: write a theme-guided response (one box per theme, as the REDCap form of seed 000,
Appendix G), or edit an LLM draft into the reply the clinician would send.

Which mode a unit is in follows from the unit: a respond unit that names a draft
(``UnitView.responses`` holds it) is an edit-a-draft unit; one without is theme-guided.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from portalreview.domain.catalogs import Catalogs
from portalreview.metrics.edit_f1 import editing_load
from portalreview.store.kinds.respond import compose
from portalreview.store.service import AnswerView, UnitView
from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.common.editor_base import Editor, TextBox


def _caption(title: str, question: str) -> QLabel:
    """A box's title over its question, both shown as written (a theme's come from the
    codebook)."""
    label = QLabel(
        f"<b>{html.escape(title)}</b><br>"
        f"<span style='color:palette(placeholder-text)'>{html.escape(question)}</span>"
    )
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    return label


class RespondEditor(Editor):
    """Both respond modes; the boxes shown depend on the unit."""

    kind = "respond"
    title = "Respond"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.theme_order = [t.id for t in catalogs.themes]
        self.case_panel = CasePanel()
        self.mode = "theme_guided"
        self.base_response_id: int | None = None
        self.draft_text = ""

        self.boxes: dict[str, TextBox] = {}
        self.form = self._build_form()
        self.draft_box = TextBox(self.undo_stack, "Edited draft")
        self.draft_box.setObjectName("editDraftBox")
        self.draft_box.textChanged.connect(self._on_text_changed)
        self.edit_hint = QLabel()
        self.edit_hint.setWordWrap(True)
        edit_page = QWidget()
        edit_layout = QVBoxLayout(edit_page)
        edit_layout.addWidget(
            _caption(
                "Edit the draft into the reply you would send",
                "Delete, add and rewrite freely. PortalReview records the word-level edits "
                "and your active editing time.",
            )
        )
        edit_layout.addWidget(self.draft_box, 3)
        edit_layout.addWidget(self.edit_hint)
        notes = catalogs.notes_box
        edit_layout.addWidget(_caption(notes.name, notes.question))
        self.edit_notes = TextBox(self.undo_stack, notes.name)
        self.edit_notes.setObjectName("editNotesBox")
        self.edit_notes.setPlaceholderText("Assumptions you made, notes for the PI")
        self.edit_notes.textChanged.connect(self._on_text_changed)
        edit_layout.addWidget(self.edit_notes, 1)
        self.edit_page = edit_page

        self.preview = QPlainTextEdit(readOnly=True)
        self.preview.setObjectName("composedPreview")
        self.preview.setAccessibleName("Composed response preview")
        self.preview_caption = QLabel("<b>The reply as the patient would read it</b>")
        preview_page = self.preview_page = QWidget()
        preview_layout = QVBoxLayout(preview_page)
        preview_layout.setContentsMargins(0, 0, 0, 0)
        preview_layout.addWidget(self.preview_caption)
        preview_layout.addWidget(self.preview)

        self.work = QSplitter(Qt.Orientation.Vertical)
        self.work.addWidget(self.form)
        self.work.addWidget(self.edit_page)
        self.work.addWidget(preview_page)
        self.work.setStretchFactor(0, 3)
        self.work.setStretchFactor(1, 3)
        self.work.setStretchFactor(2, 1)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.case_panel)
        splitter.addWidget(self.work)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    def _build_form(self) -> QScrollArea:
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.setSpacing(4)
        boxes = [(t.id, t.name, t.question) for t in self.catalogs.themes]
        notes = self.catalogs.notes_box
        boxes.append((notes.id, notes.name, notes.question))
        for box_id, name, question in boxes:
            layout.addWidget(_caption(name, question))
            box = TextBox(self.undo_stack, name)
            box.setObjectName(f"box_{box_id}")
            box.setAccessibleDescription(f"Your reply's part for {name}: {question}")
            box.setPlaceholderText("Leave empty if this theme is not part of your reply")
            box.grow_with_text()
            box.textChanged.connect(self._on_text_changed)
            box.cursorPositionChanged.connect(lambda b=box: self._caret_into_view(b))
            self.boxes[box_id] = box
            layout.addWidget(box)
            layout.addSpacing(6)
        self.boxes[notes.id].setPlaceholderText("Assumptions you made, notes for the PI")
        layout.addStretch(1)
        area = QScrollArea()
        area.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # its boxes take the focus; it showed none
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setWidget(inner)
        return area

    def _caret_into_view(self, box: TextBox) -> None:
        """Keep the line being typed in view: a box grows with its text (up to 16 lines), but
        the form did not scroll with it, so the last lines of a long part were typed blind
        (at 1024 x 640, from the third box on). Once the box has grown (a queued call)."""
        if box.hasFocus() and not self.loading:
            QTimer.singleShot(0, lambda: self._show_caret(box))

    def _show_caret(self, box: TextBox) -> None:
        if not isValid(box) or not box.hasFocus():
            return
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)  # the box's new size
        caret = box.cursorRect()
        centre = box.viewport().mapTo(self.form.widget(), caret.center())
        self.form.ensureVisible(centre.x(), centre.y(), 0, caret.height())

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        payload = answer.payload if answer else {}
        self.case_panel.show_case(unit.cases[0])
        draft = unit.responses[0] if unit.responses else None
        self.mode = "edit_draft" if draft is not None else "theme_guided"
        self.form.setVisible(self.mode == "theme_guided")
        self.edit_page.setVisible(self.mode == "edit_draft")
        self.preview_page.setVisible(self.mode == "theme_guided")
        notes_id = self.catalogs.notes_box.id
        if draft is not None:
            self.base_response_id = draft.id
            self.draft_text = draft.text
            final = payload.get("final_text", draft.text)
            self.draft_box.set_text_quietly(final)
            self.edit_notes.set_text_quietly(payload.get("notes", ""))
        else:
            self.base_response_id = None
            parts = payload.get("parts", {})
            for box_id, box in self.boxes.items():
                text = payload.get("notes", "") if box_id == notes_id else parts.get(box_id, "")
                box.set_text_quietly(text)
        self._refresh_preview()

    def payload(self) -> dict[str, Any]:
        """Each box's text as stored while it shows it unchanged (``TextBox.stored_text``): a
        draft from a Windows file submitted untouched is not another text than the draft (nor
        exported as an edit), and an answer only looked at is not saved changed."""
        notes_id = self.catalogs.notes_box.id
        if self.mode == "edit_draft":
            return {
                "mode": "edit_draft",
                "base_response_id": self.base_response_id,
                "final_text": self.draft_box.stored_text(),
                "notes": self.edit_notes.stored_text(),
            }
        texts = {box_id: box.stored_text() for box_id, box in self.boxes.items()}
        notes = texts.pop(notes_id)
        parts = {box_id: text for box_id, text in texts.items() if text.strip()}
        return {"mode": "theme_guided", "parts": parts, "notes": notes}

    def can_suggest(self, unit: UnitView) -> bool:
        """Model suggestions fill the theme boxes; an edit-a-draft unit has none."""
        return not unit.responses

    def focus_first(self) -> None:
        target = self.draft_box if self.mode == "edit_draft" else self.boxes[self.theme_order[0]]
        target.setFocus()

    # --- live preview -----------------------------------------------------------------------

    def _on_text_changed(self) -> None:
        if self.loading:
            return
        self._refresh_preview()
        self.emit_changed()

    def _refresh_preview(self) -> None:
        payload = self.payload()
        self.preview.setPlainText(compose(payload, self.theme_order))
        if self.mode == "edit_draft":
            self.edit_hint.setText(edit_summary(self.draft_text, payload["final_text"]))


def edit_summary(draft: str, final: str) -> str:
    """One line on the edits so far: words kept, deleted and added (``editing_load``)."""
    edits = editing_load(draft, final)
    return (
        f"Words kept {edits.kept} · deleted {edits.deleted} · added {edits.added}"
        f"  (draft-vs-final F1 {edits.f1:.2f})"
    )
