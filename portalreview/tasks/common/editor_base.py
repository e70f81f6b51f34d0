"""What every annotation editor shares: the ``Editor`` interface the shell drives, one undo
history per editor, and the text boxes whose typing goes into that history (``TextBox``;
``LineTyping`` for a one-line box, such as the comment), so that Ctrl+Z in a box and Edit >
Undo always take back the same step.

The shell (``portalreview.ui``) knows editors only through :class:`Editor`: it calls
:meth:`Editor.load` with a unit and the stored answer, reads :meth:`Editor.payload` when
:attr:`Editor.changed` fires (debounced autosave), calls :meth:`Editor.finish_editing` before
it submits or leaves a unit, and routes Edit > Undo/Redo to :attr:`Editor.undo_stack`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import (
    QAccessible,
    QAccessibleEvent,
    QKeyEvent,
    QKeySequence,
    QTextDocument,
    QUndoCommand,
    QUndoStack,
    QValidator,
)
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QApplication,
    QBoxLayout,
    QComboBox,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QWidget,
)
from shiboken6 import isValid

from portalreview.domain.catalogs import Catalogs
from portalreview.store.service import AnswerView, UnitView

#: Widgets whose Enter is their own (see ``Editor._enter_on_a_control``).
_CONTROLS = (QAbstractButton, QComboBox, QLineEdit, QAbstractSpinBox)


def _is_enter(event: QKeyEvent) -> bool:
    return event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)


class Editor(QWidget):
    """Base class of the per-kind editors (``tasks/<kind>/editor.py``)."""

    kind: str = ""
    title: str = ""
    #: Emitted whenever the answer on screen changes (never while loading).
    changed = Signal()
    #: A refusal the editor shows in its own notice, for the window's status bar too: on a
    #: small screen the notice can sit below the part of the page in view.
    said = Signal(str)

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.catalogs = catalogs
        self.undo_stack = QUndoStack(self)
        self.unit: UnitView | None = None
        self._loading = False

    # --- what the shell calls ---------------------------------------------------------------

    def load(self, unit: UnitView, answer: AnswerView | None) -> None:
        """Show ``unit`` with the stored answer (None: not answered yet). Clears undo."""
        self._loading = True
        try:
            self.unit = unit
            self.show_unit(unit, answer)
        finally:
            self._loading = False
        self.undo_stack.clear()

    def payload(self) -> dict[str, Any]:
        """The answer on screen, in the kind's payload format (``store/kinds``)."""
        raise NotImplementedError

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        raise NotImplementedError

    def finish_editing(self) -> None:
        """Take what is typed but not yet entered (an open cell editor, a box whose text is
        added with Enter) into the answer. Called before a submit, before leaving the unit
        (next unit, other kind, closing), by Save now (Ctrl+S), and by the adjudication window
        before it saves gold or drops the editor's answer; never by the autosave timer, which
        must not end an edit under the typist's fingers. Default: nothing to finish."""

    def submit_problem(self) -> str | None:
        """What the answer on screen still lacks for a clinician to submit it, beyond what the
        store's own check asks of every answer (imports and merges of older answers included);
        None: nothing. A submission with a problem is saved as a draft and the problem shown."""
        return None

    def comment_text(self) -> str | None:
        """The answer's free comment, for editors that have a comment box (None: no box)."""
        return None

    def set_comment_text(self, text: str) -> None:
        """Put ``text`` in the comment box, quietly (editors without one: nothing). Every
        editor with a comment box keeps it as ``self.comment``, a line edit."""
        if self.comment_text() is not None:
            self.comment.set_loaded(text)

    def focus_first(self) -> None:
        """Put the keyboard focus where work on a new unit starts."""
        self.setFocus()

    def set_text_zoom(self, point_size: float) -> None:
        """Apply the user's reading size to the editor's texts."""
        font = self.font()
        font.setPointSizeF(point_size)
        self.setFont(font)

    # --- the editor's own keys ---------------------------------------------------------------

    def handle_key(self, event: QKeyEvent, watched: QObject | None = None) -> bool:
        """Apply one of the editor's keys (``watched``: the widget that had the focus); False
        when the key is not the editor's. Subclasses override this one method."""
        return False

    def route_keys_from(self, *widgets: QWidget) -> None:
        """Let :meth:`handle_key` see keys typed in ``widgets`` before they do (a list or a
        scroll area would otherwise take the arrows and letters)."""
        for widget in widgets:
            widget.installEventFilter(self)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self._enter_on_a_control(event, QApplication.focusWidget()):
            event.accept()
            return
        if self.handle_key(event, self):
            event.accept()
            return
        super().keyPressEvent(event)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.KeyPress:
            return super().eventFilter(watched, event)
        if _is_enter(event) and isinstance(watched, _CONTROLS):
            return False  # the control's own (a fact's line adds it), then keyPressEvent's
        return self._enter_on_a_control(event, QApplication.focusWidget()) or self.handle_key(
            event, watched
        )

    def _enter_on_a_control(self, event: QKeyEvent, control: QWidget | None) -> bool:
        """Enter on a button of the editor presses the button and does nothing else; on a
        drop-down, a line or a spin box, nothing more than there. It reached the editor's own
        Enter (passed on to the editor, or seen by its filter on the list holding the
        drop-down), so Enter on Match's NO MATCH button, or to confirm a theme chosen with the
        arrows, saved the draft's selection as a match, and on EPPC's Whole message button
        added evidence."""
        if not _is_enter(event):
            return False
        if control is None or control is self or not self.isAncestorOf(control):
            return False
        if isinstance(control, QAbstractButton):
            control.animateClick()
            return True
        return isinstance(control, _CONTROLS)

    # --- model suggestions (``portalreview.ui.suggestions``) -------------------------------

    def can_suggest(self, unit: UnitView) -> bool:
        """Whether a model suggestion of this kind's payload fits ``unit`` in this editor."""
        return True

    def show_suggestion(self, payload: dict[str, Any]) -> None:
        """Pre-fill the editor with a model's suggested payload, without a change signal (so
        nothing is saved) and with a fresh undo history. The default loads it as if it were a
        stored draft answer, which suits every editor whose :meth:`show_unit` reads
        ``answer.payload``; override when the kind needs more."""
        if self.unit is None:
            return
        self.load(self.unit, suggested_answer(self.unit, payload))

    def add_banner(self, banner: QWidget) -> None:
        """Put ``banner`` (the suggestion banner) at the top of the editor."""
        layout = self.layout()
        if isinstance(layout, QBoxLayout):
            layout.insertWidget(0, banner)
        else:  # an editor without a box layout: the banner floats over its top edge
            banner.setParent(self)
            banner.move(0, 0)

    # --- for subclasses ---------------------------------------------------------------------

    def emit_changed(self) -> None:
        if not self._loading:
            self.changed.emit()

    def push(self, text: str, apply: Callable[[Any], None], before: Any, after: Any) -> None:
        """Record a structured change (a rank, a span...) on the undo history and apply it.

        ``apply(state)`` must put the editor into ``state`` and not push anything itself.
        """
        if self._loading or before == after:
            return
        self.undo_stack.push(_StateCommand(text, apply, before, after, self.emit_changed))

    @property
    def loading(self) -> bool:
        return self._loading

    def announce(self, text: str) -> None:
        """Make ``text`` (what the editor's keys act on now: "Response B of 3, rank 2...") the
        editor's accessible name, and tell a screen reader that it changed, so that the
        editor, which holds the keyboard focus while a clinician works with its keys, is
        announced by what it shows rather than as a nameless pane."""
        if text == self.accessibleName():
            return
        self.setAccessibleName(text)
        QAccessible.updateAccessibility(QAccessibleEvent(self, QAccessible.Event.NameChanged))


class _StateCommand(QUndoCommand):
    def __init__(self, text, apply, before, after, notify) -> None:
        super().__init__(text)
        self._apply, self._before, self._after, self._notify = apply, before, after, notify

    def redo(self) -> None:
        self._apply(self._after)
        self._notify()

    def undo(self) -> None:
        self._apply(self._before)
        self._notify()


class _TextStep(QUndoCommand):
    """One step of a text box's own undo history, replayed through the editor's stack so that
    Edit > Undo walks back over typing and structured changes in the order they happened."""

    def __init__(self, document: QTextDocument, label: str) -> None:
        super().__init__(f"typing in {label}")
        self._document = document
        self._first = True

    def redo(self) -> None:
        if self._first:  # the text box has already applied it
            self._first = False
            return
        self._document.redo()

    def undo(self) -> None:
        self._document.undo()


class LiveFigure(QLabel):
    """A label of figures that change as the clinician works (Edit-F1, Fact-Recall): each new
    text becomes its accessible name, and a screen reader is told the name changed, so the
    figures are announced as text rather than only drawn."""

    def setText(self, text: str) -> None:
        super().setText(text)
        doc = QTextDocument()
        doc.setHtml(text)
        self.setAccessibleName(doc.toPlainText())
        QAccessible.updateAccessibility(QAccessibleEvent(self, QAccessible.Event.NameChanged))


# The C0 control characters but tab, line feed and carriage return. Text copied from a PDF or
# another program can carry them (NUL above all), invisible on screen; a study on a server
# cannot store a NUL at all, so every save of the answer failed and the unit could not be left
# until the clinician found a character she could not see. The boxes leave them out of what is
# pasted or dropped (the store refuses a NUL from anywhere else, saying so).
_CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def without_control_characters(text: str) -> str:
    """``text`` without the C0 control characters a clinician never means to type."""
    return _CONTROL_CHARACTERS.sub("", text)


class PlainTextBox(QPlainTextEdit):
    """A plain-text box that leaves control characters out of what is pasted or dropped into
    it (see :data:`_CONTROL_CHARACTERS`)."""

    def insertFromMimeData(self, source: QMimeData) -> None:
        text = source.text() if source.hasText() else ""
        if not _CONTROL_CHARACTERS.search(text):
            super().insertFromMimeData(source)
            return
        clean = QMimeData()
        clean.setText(without_control_characters(text))
        super().insertFromMimeData(clean)


class _NoControlCharacters(QValidator):
    """A line edit's validator that takes control characters out of any text put in it: a line
    edit has no one place for pasted text (keys, menu, middle click, drop) but its validator."""

    def validate(self, text: str, position: int) -> tuple[QValidator.State, str, int]:
        clean = without_control_characters(text)
        if clean != text:
            position -= len(text[:position]) - len(without_control_characters(text[:position]))
        return QValidator.State.Acceptable, clean, position


def keep_out_control_characters(line: QLineEdit) -> None:
    """Let no control character into ``line`` (a box where clinicians type free text)."""
    line.setValidator(_NoControlCharacters(line))


class LineTyping(QObject):
    """Puts what is typed in a one-line box (a comment, a new fact, a fact's wording) on an
    editor's undo history, about a word at a time, as :class:`TextBox` does: Ctrl+Z there and
    Edit > Undo take back the same step. The line edit kept its own undo, which Ctrl+Z reached
    (nothing, in an empty box) while Edit > Undo undid the rank or choice made before.

    An undone or redone step emits the box's ``textEdited``, as the line's own undo did, so
    the answer's change is saved."""

    def __init__(self, line: QLineEdit, stack: QUndoStack, label: str) -> None:
        super().__init__(line)
        self.line, self.stack, self.label = line, stack, label
        self._text = self._previous = line.text()
        self._restoring = False
        line.textChanged.connect(self._on_changed)
        line.textEdited.connect(self._on_edited)
        line.installEventFilter(self)

    def _on_changed(self, text: str) -> None:
        self._previous, self._text = self._text, text

    def _on_edited(self, text: str) -> None:
        if self._restoring:
            return
        before = self._previous if text == self._text else self._text  # (either signal first)
        self.stack.push(_LineStep(self, before, text))

    def show(self, text: str, cursor: int) -> None:
        """Put ``text`` in the box, the cursor at ``cursor``: a step undone or redone."""
        self._restoring = True
        try:
            self.line.setText(text)
            self.line.setCursorPosition(cursor)
            self.line.setModified(True)  # typed, for whoever asks (a fact's cell keeps it)
            self.line.textEdited.emit(text)
        finally:
            self._restoring = False

    def drop_steps(self) -> None:
        """Take this box's steps off the top of the history: what was typed there has been
        entered, a step of its own (a fact added, or reworded), or left (Esc in a fact's cell,
        which then closes)."""
        while isinstance(top := self.stack.command(self.stack.index() - 1), _LineStep):
            if top.typing is not self:
                return
            top.setObsolete(True)
            self.stack.undo()  # an obsolete step is taken off, not undone

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and _is_undo_key(event):
            event.ignore()  # the window's Edit > Undo / Redo take the keys, not the line
            return True
        if event.type() == QEvent.Type.KeyPress and _is_undo_key(event):
            return True  # never the line's own undo (the history had nothing to undo)
        if event.type() == QEvent.Type.ContextMenu:
            menu = self.line.createStandardContextMenu()
            without_undo_actions(menu)
            menu.exec(event.globalPos())
            return True
        return False


_LINE_STEP = 0x4C494E45  # the id of a one-line box's steps: only they merge with one another


class _LineStep(QUndoCommand):
    """A run of typing (or of Backspace, or of Delete) in a one-line box, or one paste or
    other edit of it; see :class:`LineTyping`."""

    def __init__(self, typing: LineTyping, before: str, after: str) -> None:
        super().__init__(f"typing in {typing.label}")
        self.typing = typing
        self._before, self._after = before, after
        self._edit = _one_character_edit(before, after, typing.line.cursorPosition())
        self._word_typed = self._typed_a_word_character()
        self._made = True  # by the box itself, before the step was pushed

    def id(self) -> int:
        return _LINE_STEP

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not self._continues_with(other):
            return False
        self._after, self._edit = other._after, other._edit
        self._word_typed = self._word_typed or other._word_typed
        return True

    def _continues_with(self, other: QUndoCommand) -> bool:
        """Whether ``other`` follows on from this step: the next character typed, unless it
        begins a word after a word typed here, or the next one deleted; never a paste."""
        if not isinstance(other, _LineStep) or other.typing is not self.typing:
            return False
        if self._edit is None or other._edit is None or other._before != self._after:
            return False
        (kind, at), (next_kind, next_at) = self._edit, other._edit
        if kind == next_kind == "deleted":
            return next_at in (at, at - 1)  # Delete, Backspace
        if kind == "deleted" or next_kind != "typed":
            return False
        before = self._after[next_at - 1] if next_at else ""
        new_word = self._word_typed and starts_a_word(other._after[next_at], before)
        return next_at == at + 1 and not new_word

    def _typed_a_word_character(self) -> bool:
        if self._edit is None or self._edit[0] == "deleted":
            return False
        return is_word_character(self._after[self._edit[1]])

    def redo(self) -> None:
        if self._made:
            self._made = False
            return
        self._show(self._after, expected=self._before)

    def undo(self) -> None:
        self._show(self._before, expected=self._after)

    def _show(self, text: str, expected: str) -> None:
        """Put ``text`` in the box if it still shows ``expected``; otherwise the step is gone
        (a fact's cell closed, a new fact entered): nothing to take back."""
        typing = self.typing
        if not isValid(typing) or typing.line.text() != expected:
            self.setObsolete(True)
            return
        typing.show(text, _end_of_change(expected, text))


def _one_character_edit(before: str, after: str, cursor: int) -> tuple[str, int] | None:
    """("typed", where) or ("deleted", where) when ``after`` is ``before`` with one character
    typed in or deleted, ("typed over", where) when one typed replaced a selection
    (``cursor``: the box's cursor after the edit); None for anything else (a paste, a cut)."""
    head, tail = after[: max(cursor - 1, 0)], after[cursor:]
    if len(after) == len(before) + 1 and head + tail == before:
        return ("typed", cursor - 1)
    if len(before) == len(after) + 1 and before[:cursor] + before[cursor + 1 :] == after:
        return ("deleted", cursor)
    replaced = len(before) - len(head) - len(tail)
    if cursor >= 1 and replaced > 0 and before.startswith(head) and before.endswith(tail):
        return ("typed over", cursor - 1)
    return None


def _end_of_change(old: str, new: str) -> int:
    """The end of what differs in ``new`` from ``old``: where the cursor goes."""
    start = _same_start(old, new)
    return len(new) - _same_start(old[start:][::-1], new[start:][::-1])


def _same_start(one: str, other: str) -> int:
    """How many characters ``one`` and ``other`` share at their start."""
    pairs = zip(one, other, strict=False)
    return next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(one), len(other)))


class CommentBox(QLineEdit):
    """An editor's free comment for the PI (``Editor.comment``); no control characters; its
    typing on the editor's undo history (``stack``). Read it with :meth:`stored_text`, which
    keeps the comment as loaded (see :class:`AsLoaded`)."""

    def __init__(self, stack: QUndoStack, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("Optional comment for the PI")
        self.setAccessibleName("Comment")
        keep_out_control_characters(self)
        LineTyping(self, stack, "the comment")
        self._loaded = AsLoaded()

    def set_loaded(self, text: str) -> None:
        """Show the stored comment ``text`` (no change signal: only typing emits one)."""
        self.setText(text)
        self._loaded = AsLoaded(text, self.text())

    def stored_text(self) -> str:
        return self._loaded.given_back(self.text())


class AsLoaded:
    """A stored text as loaded into a box, and as the box showed it then.

    A box does not give every text back as it was given: a text box turns "\\r\\n", a lone
    "\\r" and U+2028 into "\\n", a box (a line too) drops a leading U+FEFF and leaves control
    characters out. A stored answer only looked at would then be saved as another text, with an
    audit entry for a change no one made (the leave-save stores what the box gives). While the
    box shows the text unchanged, the text as loaded is the answer's, unless it holds a NUL,
    which the store refuses (a project file from before kept one): then it is the text shown,
    without it, or every save of the unit would be refused over a character no one can see."""

    def __init__(self, loaded: str = "", shown: str = "") -> None:
        self.loaded = shown.replace("\x00", "") if "\x00" in loaded else loaded
        self.shown = shown

    def given_back(self, current: str) -> str:
        """``current`` (the box's text now), or the text as loaded while it is unchanged."""
        return self.loaded if current == self.shown else current


class TextBox(PlainTextBox):
    """A plain-text box whose undo steps go into an editor's :class:`QUndoStack`.

    Ctrl+Z / Ctrl+Shift+Z are left to the window's Edit menu (which drives the stack), so the
    box never undoes behind the stack's back. One step is about a word (see
    :func:`starts_a_word`), or a paste.
    """

    def __init__(self, stack: QUndoStack, label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._stack = stack
        self._label = label
        self._word_in_step = False  # a word character typed in the document's last step
        self.setTabChangesFocus(True)
        self._loaded = AsLoaded()
        self.document().undoCommandAdded.connect(self._record)
        self.setAccessibleName(label)

    def _record(self) -> None:
        self._word_in_step = False
        self._stack.push(_TextStep(self.document(), self._label))

    def _end_step_at_a_new_word(self, typed: str) -> None:
        """Called before ``typed`` goes in: a word begun after a word's step ends that step.
        Qt merged all typing that follows on into one step, so one Ctrl+Z emptied a box
        typed in pauses, sentences long."""
        start = self.textCursor().selectionStart()
        before = self.document().characterAt(start - 1) if start else ""
        if self._word_in_step and starts_a_word(typed, before):
            self._end_step()

    def _end_step(self) -> None:
        """Make the next edit a step of its own (the document merges only while modified)."""
        self.document().setModified(False)
        self._word_in_step = False

    def _note_typed(self, typed: str) -> None:
        if any(map(is_word_character, typed)):
            self._word_in_step = True

    def insertFromMimeData(self, source: QMimeData) -> None:
        """A paste (or a drop) is a step of its own: Qt merged it with the typing before and
        after it, and one Ctrl+Z took them all."""
        self._end_step()
        super().insertFromMimeData(source)
        self._end_step()

    def _end_typing_run_unless_on_top(self) -> None:
        """Called before each typed key: when another step tops the stack, this typing is a
        step of its own. Qt merges typing that follows on into the document's last undo
        command, which then lay under the other box's step: Ctrl+Z emptied the other box, and
        the later typing went with the earlier. The document merges only while "modified"."""
        top = self._stack.command(self._stack.index() - 1)
        if getattr(top, "_document", None) is not self.document():
            self._end_step()

    def grow_with_text(self, min_lines: int = 3, max_lines: int = 16) -> None:
        """Let the box grow with its text (between ``min_lines`` and ``max_lines``), so a form
        of many boxes reads like a form rather than a stack of scroll bars."""
        self._lines = (min_lines, max_lines)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self._fit_height()

    def _fit_height(self, *_args) -> None:
        low, high = getattr(self, "_lines", (3, 16))
        lines = max(low, min(high, int(self.document().size().height()) + 1))
        margins = self.contentsMargins()
        frame = 2 * self.frameWidth() + margins.top() + margins.bottom()
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + frame + 8)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "_lines"):
            self._fit_height()

    def set_text_quietly(self, text: str) -> None:
        """Replace the text without an undo step or a change signal: a stored text, which
        :meth:`stored_text` gives back as loaded while the box shows it unchanged."""
        self.blockSignals(True)
        self.document().blockSignals(True)
        try:
            self.setPlainText(text)
        finally:
            self.document().blockSignals(False)
            self.blockSignals(False)
        self.document().clearUndoRedoStacks()
        self._loaded = AsLoaded(text, self.toPlainText())

    def stored_text(self) -> str:
        """The text to store: the box's, or the text as loaded while it is unchanged."""
        return self._loaded.given_back(self.toPlainText())

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and _is_undo_key(event):
            event.ignore()
            return False
        return super().event(event)

    def keyPressEvent(self, event) -> None:
        if _is_undo_key(event):
            event.ignore()
            return
        self._end_typing_run_unless_on_top()
        self._end_step_at_a_new_word(event.text())
        super().keyPressEvent(event)
        self._note_typed(event.text())

    def inputMethodEvent(self, event) -> None:
        self._end_typing_run_unless_on_top()
        self._end_step_at_a_new_word(event.commitString())
        super().inputMethodEvent(event)
        self._note_typed(event.commitString())

    def contextMenuEvent(self, event) -> None:
        menu = self.createStandardContextMenu()
        without_undo_actions(menu)
        menu.exec(event.globalPos())


def without_undo_actions(menu: QMenu) -> None:
    """Take Undo and Redo out of a text box's own menu: undo goes through the editor's
    history only."""
    for action in menu.actions():
        if action.text().replace("&", "").lower().startswith(("undo", "redo")):
            menu.removeAction(action)


def suggested_answer(unit: UnitView, payload: dict[str, Any]) -> AnswerView:
    """A model's payload dressed as an unsaved draft answer (id 0), for :meth:`Editor.load`."""
    return AnswerView(
        answer_id=0,
        unit_id=unit.unit_id,
        kind=unit.kind,
        annotator_id=0,
        is_gold=False,
        status="draft",
        payload=payload,
        active_seconds=0.0,
        flagged=False,
        flag_note="",
        comment="",
        suggestion_id=None,
        suggestion_use=None,
        updated_at="",
    )


def is_word_character(character: str) -> bool:
    """A letter, a digit or an apostrophe (inside "don't"): a character of a word."""
    return character.isalnum() or character in "_'’"


def starts_a_word(typed: str, before: str) -> bool:
    """Whether ``typed``, put in after the character ``before`` ("" at the start), begins a
    word: where an undo step of typing ends, as in a word processor ("Stop " then "the")."""
    return bool(typed) and is_word_character(typed[0]) and not is_word_character(before)


def _is_undo_key(event) -> bool:
    return event.matches(QKeySequence.StandardKey.Undo) or event.matches(
        QKeySequence.StandardKey.Redo
    )


_SELECTION_KEYS = tuple(
    getattr(QKeySequence.StandardKey, name)
    for name in (
        "SelectNextWord", "SelectPreviousWord", "SelectNextChar", "SelectPreviousChar",
        "SelectStartOfLine", "SelectEndOfLine", "SelectStartOfDocument", "SelectEndOfDocument",
        "MoveToNextWord", "MoveToPreviousWord", "SelectAll", "Copy",
    )
)


class _SelectionKeys(QObject):
    """Keeps the keys that select text for a read-only text view (a sentence in which an
    evidence or match span is chosen with the keyboard): without it, Ctrl+Shift+Right there
    would go to the next unit (the window's shortcut) instead of selecting the next word."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and any(
            event.matches(key) for key in _SELECTION_KEYS
        ):
            event.accept()
            return True
        return False


def keep_selection_keys(view: QWidget) -> None:
    """Let ``view`` (a read-only text view) select text with the keyboard's usual keys."""
    keeper = _SelectionKeys(view)
    view.installEventFilter(keeper)


class _CellInView(QObject):
    """Scrolls a table to the cell of one of its cell widgets when that widget takes the
    keyboard focus: Tab reaches the widgets of rows scrolled out of sight, where a key press
    would change what the clinician cannot see."""

    def __init__(self, table: QAbstractItemView, row: int, column: int, parent: QObject) -> None:
        super().__init__(parent)
        self.table, self.row, self.column = table, row, column

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.FocusIn:
            self.table.scrollTo(self.table.model().index(self.row, self.column))
        return False


def keep_in_view_when_focused(
    table: QAbstractItemView, row: int, column: int, widget: QWidget
) -> None:
    """Scroll ``table`` to (``row``, ``column``) whenever ``widget`` (a control in that cell,
    or inside it) takes the keyboard focus."""
    widget.installEventFilter(_CellInView(table, row, column, widget))


class _WheelOnlyWhenFocused(QObject):
    """A drop-down in a list turned by the mouse wheel as the pointer passed over it while
    the person scrolled the list: a theme or a judgement changed, unseen, and was saved. The
    wheel turns it only once it has the focus (clicked or tabbed to); otherwise the event goes
    on to the list under it, which scrolls."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget):
            return False
        if watched.hasFocus():
            return False
        event.ignore()  # handled here, not accepted: Qt hands it to the parent, which scrolls
        return True


@functools.cache
def _wheel_guard() -> _WheelOnlyWhenFocused:
    return _WheelOnlyWhenFocused()  # one for every drop-down


def wheel_only_when_focused(box: QComboBox) -> None:
    """Let the mouse wheel turn ``box`` only while it has the keyboard focus."""
    box.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # a wheel gives it no focus
    box.installEventFilter(_wheel_guard())


def clear_layout(layout) -> None:
    """Remove and delete every widget of a layout (used when an editor shows a new unit)."""
    while layout.count():
        item = layout.takeAt(0)
        widget = item.widget()
        if widget is not None:
            # Hidden first: a widget taken from its parent while shown becomes a window of its
            # own for a moment, which takes the keyboard focus away from the editor (pressing a
            # code key in the EPPC editor did that).
            widget.hide()
            widget.setParent(None)
            widget.deleteLater()
        elif item.layout() is not None:
            clear_layout(item.layout())
