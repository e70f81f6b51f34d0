"""One person's work on one unit at a time: autosave, submit, flag, and time on task.

Every change an editor reports is saved within ``AUTOSAVE_MS`` of it (one short transaction,
also while the person keeps typing). The status bar says "Saved" only after the commit
returned, so whatever it showed as saved survives closing the window or killing the process.
Saving stays on the GUI thread on purpose: a save is a few milliseconds (see
benchmarks/bench_ui.py) and doing it in order, synchronously, is what guarantees that nothing
typed is lost or saved out of order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication, QWidget

from portalreview.store.errors import SaveOutcomeUnknown
from portalreview.store.kinds.base import PayloadError
from portalreview.store.kinds.stored_order import same_answer
from portalreview.store.service import (
    UNCHECKED,
    AnswerView,
    SavedElsewhere,
    StoreError,
    StudyService,
    UnitView,
    not_saved_message,
)
from portalreview.tasks.common.editor_base import Editor, suggested_answer
from portalreview.ui.unsaved_work import UnsavedAnswer, UnsavedWork, UnsavedWorkError


class UnsavedChanges(StoreError):
    """Another unit was asked for while changes to the one shown could not be saved: it
    stays, with them."""


@dataclasses.dataclass
class _UnsureSave:
    """A save of unit ``unit_id`` that the server may or may not have kept (its connection
    lost during the COMMIT); the person was told that saving again replaces it."""

    unit_id: int
    error: SaveOutcomeUnknown
    seconds: float  # the time on task it sent: held aside, never sent twice
    kept: bool | None = None


log = logging.getLogger(__name__)
AUTOSAVE_MS = 400
IDLE_SECONDS = 60.0
_ACTIVITY = {
    QEvent.Type.KeyPress,
    QEvent.Type.MouseButtonPress,
    QEvent.Type.MouseMove,
    QEvent.Type.Wheel,
    QEvent.Type.InputMethod,
}


class ActivityClock(QObject):
    """Active time on task: the time from opening a unit through each input event, a gap
    longer than ``IDLE_SECONDS`` counting as ``IDLE_SECONDS`` (a clinician called away does
    not inflate the measure). Only input to the window the unit is shown in counts, and to a
    dialog it opens (not the PI's tool windows beside it): ``scope`` gives that window."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last: float | None = None
        self.seconds = 0.0
        self.running = False
        self.scope: Callable[[], QWidget | None] = lambda: None

    def start(self) -> None:
        """A unit was opened: counting starts now."""
        self.seconds, self._last, self.running = 0.0, self._clock(), True

    def bank(self) -> None:
        """The seconds so far were stored: start a new sum, going on from the last input (the
        gap from it to the next input belongs to the new sum; once it was lost at every
        autosave, so a steady typist was credited with half their time)."""
        self.seconds = 0.0

    def stop(self) -> None:
        self.running = False

    def touch(self) -> None:
        if not self.running:
            return
        now = self._clock()
        if self._last is not None:
            self.seconds += min(now - self._last, IDLE_SECONDS)
        self._last = now

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in _ACTIVITY and self._in_scope(watched):
            self.touch()
        return False

    def _in_scope(self, watched: QObject) -> bool:
        scope = self.scope()
        if scope is None or not isinstance(watched, QWidget):
            return scope is None
        window = watched.window()
        return window is scope or window is QApplication.activeModalWidget()


def follow_saves(
    previous: AnnotationSession | None,
    current: AnnotationSession | None,
    on_saved: Callable[[AnswerView], None],
) -> AnnotationSession | None:
    """Move ``on_saved`` from the ``saved`` signal of the session a tool window followed to the
    main window's current one (after a sign-in or a project change); returns the one followed."""
    if current is previous:
        return current
    if previous is not None:
        with contextlib.suppress(RuntimeError, TypeError):  # already gone or disconnected
            previous.saved.disconnect(on_saved)
    if current is not None:
        current.saved.connect(on_saved)
    return current


class AnnotationSession(QObject):
    """Connects the open unit's editor to the store."""

    saved = Signal(object)  # AnswerView
    save_failed = Signal(str)
    pending_changed = Signal(bool)
    notice = Signal(str)

    def __init__(self, service: StudyService, read_only: bool = False) -> None:
        super().__init__()
        self.service = service
        self.read_only = read_only
        self.read_only_why = ""  # said when a change is refused: "another annotator's work"...
        self._restore_due = False
        self.editor: Editor | None = None
        self.unit: UnitView | None = None
        self.answer: AnswerView | None = None
        self.pending = False
        self.last_failure: str | None = None  # why the last save failed, until one succeeds
        # the status a failed save asked for (a submission above all), until a save succeeds:
        # saving again asks for it again (a submission retried as a draft was lost)
        self.status_not_saved: str | None = None
        # the model suggestion behind the answer on screen (``portalreview.ui.suggestions``):
        # state None (none), "offered" (shown, not accepted), "accepted", "edited", "ignored"
        self.suggestion_id: int | None = None
        self.suggestion_state: str | None = None
        self._suggestion_base: dict | None = None
        # a flag set while a suggestion is only offered: saved with the first save that may be
        self._held_flag: dict | None = None
        # where an answer that could not be saved is kept on this computer (None: nowhere,
        # a read-only view), and the unit whose answer is kept there now
        self.unsaved: UnsavedWork | None = None
        self.kept_unit: int | None = None
        # the answer saved elsewhere since the unit was opened here (another workstation
        # signed in as the same person), while the person has not chosen which one to keep;
        # and the save it stopped (status, fields), made again if they keep theirs
        self.conflict: AnswerView | None = None
        self._stopped_save: tuple[str, dict] = ("draft", {})
        # a save the server may or may not have kept, until a save of its unit succeeds
        self._unsure_save: _UnsureSave | None = None
        # seconds on task of units left while their save failed: added to their next save
        self._time_to_add: dict[int, float] = {}
        # the units a slip left incomplete (submitted, drafts since): put right, each is
        # submitted again. Read from the answer's history when a unit is opened (the promise
        # holds on another day, at another desk), kept up to date by this session's saves
        self._slipped: set[int] = set()
        self.clock = ActivityClock()
        self.clock.scope = self._window
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self.clock)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(AUTOSAVE_MS)
        self._timer.timeout.connect(self.save)

    def _window(self) -> QWidget | None:
        """The window the open unit is shown in (None: none). A session never closed (its
        window deleted under it) keeps its clock among the application's event filters: its
        editor may be gone, and asking it for its window then crashed the program."""
        if self.editor is None or not shiboken6.isValid(self.editor):
            return None
        return self.editor.window()

    # --- opening a unit ---------------------------------------------------------------------

    def open_unit(self, editor: Editor, unit_id: int, annotator_id: int | None = None) -> None:
        """Save what is pending, then show ``unit_id`` in ``editor``. When what is pending
        cannot be saved (a study server that went away), the unit on screen stays, with what
        was typed, and :class:`StoreError` says why."""
        self.leave()
        if self.pending and self.unit is not None:
            raise UnsavedChanges(
                "Your changes to this unit are not saved yet, so it stays on screen with them"
                f" ({self.last_failure or 'the save failed'})."
            )
        # another annotator's work (the PI's view of it) in the order that annotator saw
        unit = self.service.read_unit(unit_id, as_seen_by=annotator_id)
        answer = self.service.get_answer(unit_id, annotator_id)
        if self.editor is not editor:
            if self.editor is not None:
                self.editor.changed.disconnect(self._on_changed)
            editor.changed.connect(self._on_changed)
            self.editor = editor
        self.unit, self.answer = unit, answer
        self.conflict, self.status_not_saved = None, None
        self._recall_slip(unit_id, answer)
        editor.load(unit, answer)
        self._reset_suggestion(answer)
        self.clock.start()
        self.clock.seconds = self._time_to_add.pop(unit_id, 0.0)  # left while a save failed
        self._settle_unsure_save_on_reading(unit_id)

    def _recall_slip(self, unit_id: int, answer: AnswerView | None) -> None:
        """Whether the unit opened is a submitted one a slip made a draft (its history says the
        person's own save made it one), in this session or an earlier one: "Put right, it is
        submitted again" once held only until the program was closed. Where the history cannot
        be read, what this session saw stands."""
        if self.read_only or answer is None or answer.status != "draft":
            self._slipped.discard(unit_id)
            return
        try:
            slipped = self.service.unsubmitted_by_own_save(unit_id)
        except StoreError as exc:
            log.warning("unit %s: its answer's history not read: %s", unit_id, exc)
            return
        if slipped:
            self._slipped.add(unit_id)
        else:
            self._slipped.discard(unit_id)

    def leave(self) -> None:
        """Save pending changes and the time spent on the unit being left."""
        if self.unit is None:
            return
        self.editor.finish_editing()
        if self.has_held_input():
            self._set_suggestion_aside()
            self.save()
        elif self.pending:
            self.save()
        elif self.answer is not None and self.clock.seconds >= 1 and not self.read_only:
            # made only over the answer shown (SavedElsewhere otherwise: the time waits)
            self._store(self.answer.status, time_only=True)
        self.clock.stop()

    def close(self) -> None:
        self.leave()
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self.clock)
        self.unit = self.answer = None

    # --- saving -----------------------------------------------------------------------------

    def _on_changed(self) -> None:
        if self.read_only:
            self._refuse_change()
            return
        self._set_pending(True)
        if not self._timer.isActive():  # throttle, not debounce: a fast typist is saved too
            self._timer.start()

    def read_only_notice(self) -> str:
        why = f" ({self.read_only_why})" if self.read_only_why else ""
        return f"Read-only{why}: nothing typed or chosen here is kept."

    def _refuse_change(self) -> None:
        """A read-only view keeps no change, so it shows none: the stored answer goes back on
        screen (once the editor has finished the change) and the notice says why. Before,
        the change stayed on screen unsaved and vanished on the next unit without a word."""
        self.notice.emit(self.read_only_notice())
        if not self._restore_due:
            self._restore_due = True
            QTimer.singleShot(0, self._show_stored_answer)

    def _show_stored_answer(self) -> None:
        self._restore_due = False
        if self.read_only and self.editor is not None and self.unit is not None:
            self.editor.load(self.unit, self.answer)

    def _set_pending(self, pending: bool) -> None:
        if pending != self.pending:
            self.pending = pending
            self.pending_changed.emit(pending)

    def save(self) -> AnswerView | None:
        """Save the editor's answer now, keeping it submitted if it was and still can be (a
        submission that could not be saved included)."""
        self._timer.stop()
        if self.unit is None or self.read_only:
            return None
        return self._store(self._status_to_keep())

    def _status_to_keep(self) -> str:
        """The status the next save asks for: that of a failed save not saved since, else
        submitted where a slip that left the answer incomplete made a submitted unit a draft
        (put right, by Undo say, it is submitted again), else the stored answer's."""
        if self.status_not_saved is not None:
            return self.status_not_saved
        if self.unit is not None and self.unit.unit_id in self._slipped:
            return "submitted"
        return self.answer.status if self.answer else "draft"

    def submit(self) -> AnswerView | None:
        if self.unit is None or self.read_only:
            return None
        self.editor.finish_editing()  # first: what it enters starts the autosave timer
        self._timer.stop()
        return self._store(
            "submitted", draft_if_refused=not self._nothing_entered(), explicit=True
        )

    def _nothing_entered(self) -> bool:
        """Whether the unit on screen has no answer of the person's: none stored, no change
        waiting for the autosave, no flag held and no suggestion offered. A submission
        refused then stores nothing (it stored an empty draft, counted as begun)."""
        return (
            self.answer is None
            and not self.pending
            and self._held_flag is None
            and self.suggestion_state is None
        )

    def set_flag(self, flagged: bool, note: str) -> AnswerView | None:
        if self.unit is None or self.read_only:
            return None
        self._timer.stop()
        return self._store(self._status_to_keep(), flagged=flagged, flag_note=note)

    @property
    def flag_note(self) -> str:
        """The note of the unit's flag on screen (a flag not saved yet included)."""
        if self._held_flag is not None:
            return str(self._held_flag["flag_note"] or "")
        return (self.answer.flag_note or "") if self.answer else ""

    @property
    def flagged(self) -> bool:
        """Whether the unit on screen is flagged for the PI (a flag not saved yet included)."""
        if self._held_flag is not None:
            return bool(self._held_flag["flagged"])
        return bool(self.answer and self.answer.flagged)

    def has_held_input(self) -> bool:
        """Has the person flagged the unit or written a comment while a model suggestion is
        offered on screen, neither accepted nor changed? Such input is their own, so it is
        kept, but it cannot be saved yet: the suggestion is not their answer."""
        if self.suggestion_state != "offered" or self.editor is None:
            return False
        return self._held_flag is not None or bool(self.editor.comment_text())

    def _set_suggestion_aside(self) -> None:
        """Leaving a unit whose suggestion was never taken up, with a flag or comment of the
        person's own: the suggestion is set aside (recorded as ignored) so that the flag and
        comment are saved with an answer that holds nothing of the model's."""
        comment = self.editor.comment_text() or ""
        self.editor.load(self.unit, None)
        self.editor.set_comment_text(comment)
        self.dismiss_suggestion()

    def _store(
        self,
        status: str,
        replace: bool = False,
        *,
        draft_if_refused: bool = True,
        time_only: bool = False,
        explicit: bool = False,
        **fields,
    ) -> AnswerView | None:
        """Save the editor's answer. A submission that is not complete yet is saved as a draft
        (the work is kept; with ``draft_if_refused`` False nothing is saved) and
        :attr:`notice` says what is missing. Only over the answer shown
        (:class:`SavedElsewhere` otherwise: :attr:`conflict`), unless ``replace``.
        ``explicit``: the person submitted (Ctrl+Enter), not a save keeping a submission."""
        stopped = (status, dict(fields))
        payload = self.editor.payload()
        suggestion = self._suggestion_fields(payload)
        if suggestion is None:  # an unaccepted, unchanged suggestion is never an answer
            return self._hold(fields)
        fields = {**(self._held_flag or {}), **fields}
        fields.update(suggestion)
        kept_as_it_is = self._changes_nothing_submitted(payload, time_only, explicit)
        checked = status == "submitted" and not kept_as_it_is
        held_back = self.editor.submit_problem() if checked else None
        if held_back and not draft_if_refused:
            return self._refuse_submission(held_back)
        if held_back:
            status = "draft"
        replace = self._settle_unsure_save() or replace
        kwargs = dict(
            add_seconds=self.clock.seconds,  # to the stored time: another desk's adds up too
            comment=self.editor.comment_text(),
            if_updated_at=UNCHECKED if replace else self.answer and self.answer.updated_at,
            **fields,
        )
        unit_id = self.unit.unit_id
        started = time.perf_counter()
        try:
            try:
                view = self.service.save_answer(unit_id, payload, status=status, **kwargs)
                refused = held_back
            except PayloadError as exc:
                if status != "submitted":
                    raise
                if not draft_if_refused:
                    return self._refuse_submission(str(exc))
                view = self.service.save_answer(unit_id, payload, status="draft", **kwargs)
                refused = str(exc)
        except (PayloadError, StoreError, PermissionError) as exc:
            if time_only:  # leaving a unit, nothing typed: only its time waits to be saved
                return self._time_not_saved(unit_id, exc)
            self.last_failure = str(exc)
            log.warning(
                "answer not saved: unit %s (%s): %s: %s",
                unit_id,
                self.unit.kind,
                type(exc).__name__,
                exc,
            )
            if isinstance(exc, SavedElsewhere):  # the person chooses which answer stays
                self.conflict, self._stopped_save = exc.stored, stopped
            if isinstance(exc, SaveOutcomeUnknown):
                self._hold_unsure_save(unit_id, exc)
            if "flagged" in fields:  # a flag not saved yet stays the person's, for the next save
                self._held_flag = {"flagged": fields["flagged"], "flag_note": fields["flag_note"]}
            if isinstance(exc, StoreError):  # may save later: kept for a crash meanwhile
                self._keep_unsaved(payload, status, fields, kwargs["comment"], str(exc))
                self._wait_to_save_again(status)
            self.save_failed.emit(not_saved_message(exc))
            return None
        except Exception as exc:  # a bug, or an error no one put in words: the text is kept
            self._keep_unsaved(payload, status, fields, kwargs["comment"], type(exc).__name__)
            self._wait_to_save_again(status)
            return self._unexpected_failure(unit_id, exc)
        # ids, kind, status and time only: never the answer's text
        log.info(
            "answer saved: unit %s (%s), answer %s, %s%s in %.0f ms",
            unit_id,
            view.kind,
            view.answer_id,
            view.status,
            " (submission refused: still a draft)" if refused else "",
            (time.perf_counter() - started) * 1000,
        )
        retrying = self.status_not_saved == "submitted"
        retried_submission = retrying and view.status == "submitted"
        was = self.answer.status if self.answer else None
        self.answer = view
        if view.status == "submitted":
            self._slipped.discard(unit_id)
        elif was == "submitted":
            self._slipped.add(unit_id)
        self.last_failure = None
        self.status_not_saved = None
        self._held_flag = None
        if self.kept_unit == unit_id:  # what was kept on this computer is in the study now
            self.unsaved.forget(unit_id)
            self.kept_unit = None
        if self.suggestion_id is not None:  # what this save recorded
            self.suggestion_state = view.suggestion_use or self.suggestion_state
        self.clock.bank()  # the time so far is now stored in the answer
        self._after_unsure_save(unit_id)
        self._set_pending(False)
        self.saved.emit(view)
        if refused and was == "submitted":
            self.notice.emit(
                f"Saved as a draft, no longer submitted: {refused}. Put right, it is submitted "
                "again."
            )
        elif refused and (explicit or retrying):
            self.notice.emit(f"Saved as a draft, not submitted: {refused}")
        elif refused:  # still incomplete after a slip: said once, when it stopped being submitted
            pass
        elif was == "draft" and view.status == "submitted" and not (explicit or retrying):
            self.notice.emit("Submitted again: the answer is complete again.")
        elif retried_submission:
            self.notice.emit("Submitted: the submission that could not be saved is saved now.")
        return view

    def _changes_nothing_submitted(self, payload: dict, time_only: bool, explicit: bool) -> bool:
        """Whether a save changes no part of a submitted answer (the time on it, a flag): it
        stays submitted, since looking at an answer the editor would not take now never demotes
        it (a draft, one a slip left, is checked: a flag must not submit it). The editor lists
        entries in its own order (rank cards shuffled), not the stored one: only what the
        answer says is compared."""
        stored = self.answer
        if stored is None or stored.status != "submitted":
            return False
        return time_only or (not explicit and same_answer(self.unit.kind, payload, stored.payload))

    def _wait_to_save_again(self, status: str) -> None:
        """A save that may succeed later failed: it waits, as a change not saved yet, and the
        next save (Ctrl+S, the server back) asks for its status again. A submission with
        nothing changed before it was not retried at all, and one after a change was retried
        as a draft."""
        self.status_not_saved = status
        self._set_pending(True)

    def _hold_unsure_save(self, unit_id: int, exc: SaveOutcomeUnknown) -> None:
        """A save the server may or may not have kept: the seconds on task it sent are held
        aside until that is known (kept, they are stored; sent again, they counted twice)."""
        self._set_earlier_unsure_save_aside(unit_id)
        self._unsure_save = _UnsureSave(unit_id, exc, self.clock.seconds)
        self.clock.bank()

    def _set_earlier_unsure_save_aside(self, unit_id: int) -> None:
        """Another unit's unsure save, held until now (the time-only save of a unit left): its
        seconds go with that unit's next save if the server says it was not kept (not known
        yet, they are dropped: never counted twice)."""
        earlier = self._unsure_save
        if earlier is None or earlier.unit_id == unit_id:
            return
        if earlier.kept is None and earlier.error.kept() is False:
            unit = earlier.unit_id
            self._time_to_add[unit] = self._time_to_add.get(unit, 0.0) + earlier.seconds

    def _settle_unsure_save_on_reading(self, unit_id: int) -> None:
        """The unit of an unsure save (its time-only save when it was left) was read again:
        known kept, the answer read holds it, and the next save is checked against that answer
        as any other; known not kept, its seconds go with the next save. Still not known, the
        next save settles it (:meth:`_settle_unsure_save`)."""
        unsure = self._unsure_save
        if unsure is None or unsure.unit_id != unit_id:
            return
        kept = unsure.error.kept() if unsure.kept is None else unsure.kept
        if kept is None:
            return
        self._unsure_save = None
        if kept is False:
            self.clock.seconds += unsure.seconds

    def _settle_unsure_save(self) -> bool:
        """Before a save of the unit of an unsure save: whether it replaces the stored answer
        unchecked. Kept or maybe kept, that save changed the stored answer: checked against
        the one read here, it was taken for another computer's ("saved from another computer
        or window signed in as you"), though the person was told that saving again replaces
        it. Not kept, its seconds go with this save, checked as any other."""
        unsure = self._unsure_save
        if unsure is None or unsure.unit_id != self.unit.unit_id:
            return False
        if unsure.kept is None:
            unsure.kept = unsure.error.kept()
            if unsure.kept is False:
                self.clock.seconds += unsure.seconds
                self._unsure_save = None
        return unsure.kept is not False

    def _after_unsure_save(self, unit_id: int) -> None:
        """A save of the unit of an unsure save succeeded, so the unsure one has ended (writes
        run one after another): its seconds go with the next save if it was not kept."""
        unsure = self._unsure_save
        if unsure is None or unsure.unit_id != unit_id:
            return
        self._unsure_save = None
        if unsure.kept is None and unsure.error.kept() is False:
            self.clock.seconds += unsure.seconds

    def _refuse_submission(self, problem: str) -> None:
        """A submission of nothing entered: nothing is saved, the notice says what is missing."""
        self.notice.emit(f"Not submitted, nothing saved: {problem}")
        return None

    def _time_not_saved(self, unit_id: int, exc: Exception) -> None:
        """The time spent on a unit being left (nothing typed) could not be saved: it is added
        to the unit's next save in this session, not kept as an answer on this computer (it
        was offered back at sign-in as if typing had been lost) nor shown as a failure of the
        unit opened next. A save the server may have kept holds its seconds aside until it says
        it did not (:meth:`_hold_unsure_save`): added regardless, they counted twice."""
        seconds = self.clock.seconds
        log.warning("unit %s: %.0f s on task not saved on leaving it: %s", unit_id, seconds, exc)
        if isinstance(exc, SaveOutcomeUnknown):
            self._hold_unsure_save(unit_id, exc)
            self.notice.emit(
                "The time spent on the unit just left may not have been saved (the study "
                "server stopped answering); if it was not, it is added when that unit is next "
                "saved."
            )
            return None
        self._time_to_add[unit_id] = self._time_to_add.get(unit_id, 0.0) + seconds
        self.clock.bank()  # set aside: a second leave() (a kind switched) must not add it again
        self.notice.emit(
            f"The time spent on the unit just left was not saved ({exc}); it is added when "
            "that unit is next saved."
        )
        return None

    def keep_mine(self) -> AnswerView | None:
        """After :class:`SavedElsewhere`: the answer on screen here replaces the one saved
        elsewhere (the save that was stopped is made, a submission included)."""
        if self.conflict is None or self.unit is None:
            return None
        self.conflict = None
        status, fields = self._stopped_save
        return self._store(status, replace=True, **fields)

    def take_theirs(self) -> None:
        """After :class:`SavedElsewhere`: show the answer saved elsewhere instead of what was
        typed here, which is dropped (the person chose it)."""
        stored, self.conflict = self.conflict, None
        if stored is None or self.unit is None:
            return
        log.info("unit %s: the answer saved elsewhere kept, this one dropped", stored.unit_id)
        self.answer = stored
        self.editor.load(self.unit, stored)
        self._reset_suggestion(stored)
        self.last_failure = None
        self.status_not_saved = None
        if self.kept_unit == stored.unit_id:
            self.unsaved.forget(stored.unit_id)
            self.kept_unit = None
        self._timer.stop()
        self._set_pending(False)
        self.saved.emit(stored)  # what the window shows of the unit: the answer stored now

    def _keep_unsaved(
        self, payload: dict, status: str, fields: dict, comment: str, why: str
    ) -> None:
        """Keep the answer a save could not store on this computer (``unsaved_work``), so
        that a crash before the next save that succeeds does not lose it."""
        if self.unsaved is None:
            return
        flag = {key: fields[key] for key in ("flagged", "flag_note") if key in fields}
        kept = UnsavedAnswer(
            unit_id=self.unit.unit_id,
            kind=self.unit.kind,
            payload=payload,
            comment=comment or "",
            status=status,
            flag=flag or None,
            suggestion_id=fields.get("suggestion_id"),
            suggestion_use=fields.get("suggestion_use"),
            unsaved_seconds=self.clock.seconds,
            based_on=self.answer.updated_at if self.answer else None,
            kept_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
            why=why,
        )
        self.kept_unit = self.unit.unit_id if self.unsaved.keep(kept) else None

    def keep_pending(self, why: str) -> bool:
        """Keep the change not saved on this computer, as a failed save of the store keeps
        it, for a close that cannot ask about it (the program ending unattended); ``why``
        unless a failed save said why. True when it is kept, or nothing is pending."""
        if not self.pending or self.unit is None or self.editor is None:
            return True
        payload = self.editor.payload()
        fields = {**(self._held_flag or {}), **(self._suggestion_fields(payload) or {})}
        comment = self.editor.comment_text() or ""
        reason = self.last_failure or why
        self._keep_unsaved(payload, self._status_to_keep(), fields, comment, reason)
        return self.kept_unit == self.unit.unit_id

    def put_back(self, kept: UnsavedAnswer) -> AnswerView | None:
        """Show an answer kept on this computer in the open unit (``kept.unit_id``), as the
        person's change, and save it: a save that fails again keeps it again.
        :class:`UnsavedWorkError`: its answer is not one the editor can show (a damaged file,
        left as it is); the stored answer stays on screen."""
        if self.unit is None or self.unit.unit_id != kept.unit_id or self.read_only:
            raise ValueError("the unit of the kept answer is not the one open")
        try:
            self._show_kept(kept)
        except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
            log.exception("kept answer of unit %s cannot be shown", kept.unit_id)
            self.editor.load(self.unit, self.answer)
            where = self.unsaved.path_for(kept.unit_id) if self.unsaved else "The kept answer"
            raise UnsavedWorkError(
                f"{where} is damaged: its {self.unit.kind} answer cannot be shown "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        self._held_flag = kept.flag
        if kept.suggestion_id and not self.service.suggestion_usable(kept.suggestion_id):
            # a link to a suggestion not in the study (a file edited, or kept from another
            # copy of it): every save was refused and the unit could not be left. The answer
            # is the person's own; only where it started is lost.
            log.warning("kept answer of unit %s: suggestion link dropped", kept.unit_id)
            kept = dataclasses.replace(kept, suggestion_id=None, suggestion_use=None)
        self.suggestion_id = kept.suggestion_id
        self.suggestion_state = kept.suggestion_use if kept.suggestion_id else None
        self._suggestion_base = kept.payload if kept.suggestion_use == "accepted" else None
        self.clock.seconds += kept.unsaved_seconds
        self.kept_unit = kept.unit_id
        self._set_pending(True)
        self._timer.stop()
        return self._store(kept.status)

    def _show_kept(self, kept: UnsavedAnswer) -> None:
        """Load the kept answer in the editor, and ask the editor for it back as the save
        will."""
        if kept.payload:
            unsaved = self.answer or suggested_answer(self.unit, {})  # (an answer not stored)
            shown = dataclasses.replace(unsaved, payload=kept.payload, comment=kept.comment)
            self.editor.load(self.unit, shown)
        else:  # only a flag or comment of the person's own, beside a suggestion set aside
            self.editor.load(self.unit, None)
            self.editor.set_comment_text(kept.comment)
        self.editor.payload()
        self.editor.submit_problem()

    def _hold(self, fields: dict) -> None:
        """A save refused because the answer on screen is still the offered suggestion: a
        flag (``fields``) and a comment are kept, to be saved with the answer."""
        if "flagged" in fields:
            stored = bool(self.answer and self.answer.flagged)
            # a flag taken back before it was saved leaves nothing of the person's own
            held = fields["flagged"] or stored
            self._held_flag = (
                {"flagged": fields["flagged"], "flag_note": fields["flag_note"]} if held else None
            )
        self._set_pending(False)
        if not self.has_held_input():
            if self.kept_unit == self.unit.unit_id:  # a flag taken back: nothing left to keep
                self.unsaved.forget(self.unit.unit_id)
                self.kept_unit = None
            self.notice.emit("Not saved: accept the suggestion (Ctrl+Shift+A) or edit it first.")
            return None
        # kept on this computer too, as leaving the unit would save it: a crash lost them
        aside = {
            **(self._held_flag or {}),
            "suggestion_id": self.suggestion_id,
            "suggestion_use": "ignored",
        }
        why = "a model suggestion was on screen, neither accepted nor changed"
        self._keep_unsaved({}, "draft", aside, self.editor.comment_text() or "", why)
        self.save_failed.emit(
            "Not saved yet: your flag and comment are kept and saved with your answer. Accept "
            "the suggestion (Ctrl+Shift+A), edit it or dismiss it; leaving the unit saves them "
            "and sets the suggestion aside."
        )
        return None

    def _unexpected_failure(self, unit_id: int, exc: Exception) -> None:
        """A save that failed in a way no one foresaw is still a failed save: "⚠ Not saved",
        the text stays, and the unit cannot be left until a save succeeds."""
        log.exception("answer not saved: unit %s (%s): unexpected error", unit_id, self.unit.kind)
        self.last_failure = f"an unexpected error, {type(exc).__name__}"
        self.save_failed.emit(
            f"Not saved: an unexpected error ({type(exc).__name__}); your text is kept on "
            "screen. Try again (Ctrl+S); Help > Open log folder has the details for support."
        )
        return None

    # --- model suggestions ------------------------------------------------------------------

    def _reset_suggestion(self, answer: AnswerView | None) -> None:
        """Take up the suggestion a stored answer records. Each save compares the answer with
        the suggestion as shown (:attr:`_suggestion_base`): the same is "accepted", different
        "edited". For an edited answer the controller recalls it with
        :meth:`recall_suggestion`."""
        self._held_flag = None
        self.suggestion_id = answer.suggestion_id if answer else None
        self.suggestion_state = answer.suggestion_use if self.suggestion_id else None
        if self.suggestion_id is not None and self.suggestion_state is None:
            self.suggestion_state = "edited"
        self._suggestion_base = (
            self.editor.payload() if self.suggestion_state == "accepted" else None
        )

    def offer_suggestion(self, suggestion_id: int) -> None:
        """The editor now shows suggestion ``suggestion_id`` pre-filled. Nothing is saved: a
        save before the person accepts or changes it is refused."""
        self.suggestion_id = suggestion_id
        self.suggestion_state = "offered"
        self._suggestion_base = self.editor.payload()

    def recall_suggestion(self, shown: dict) -> None:
        """The suggestion behind the reopened answer, as the editor shows it."""
        if self.suggestion_state in ("accepted", "edited"):
            self._suggestion_base = shown

    def matches_suggestion(self) -> bool:
        """Is the answer on screen the suggestion unchanged (not dismissed)?"""
        return (
            self.suggestion_state in ("offered", "accepted", "edited")
            and self._suggestion_base is not None
            and self.editor.payload() == self._suggestion_base
        )

    def accept_suggestion(self) -> AnswerView | None:
        """The person accepts the suggestion on screen: saved now, recorded as accepted (or as
        edited when they had already changed it)."""
        if self.suggestion_state not in ("offered", "accepted", "edited"):
            return None
        if self.suggestion_state == "offered":
            self.suggestion_state = "accepted"
        return self.save()

    def can_dismiss_suggestion(self) -> bool:
        """Whether the suggestion can be set aside: offered, or accepted and not changed since
        (an accept by a slip of the key is taken back, not kept as "accepted" for good)."""
        state = self.suggestion_state
        return state == "offered" or (state == "accepted" and self.matches_suggestion())

    def dismiss_suggestion(self) -> None:
        """The person set the suggestion aside (the editor was emptied): their answer records
        that it was shown and ignored."""
        if self.suggestion_id is not None:
            accepted = self.suggestion_state == "accepted"  # saved already: save it emptied
            self.suggestion_state = "ignored"
            self._suggestion_base = None
            comment = self.editor and self.editor.comment_text()
            if accepted or self._held_flag is not None or comment:
                self._set_pending(True)  # saved now: the accepted answer emptied, or their own
                # flag or comment

    def _suggestion_fields(self, payload: dict) -> dict | None:
        """``suggestion_id`` / ``suggestion_use`` for a save; None: this save must not happen."""
        state = self.suggestion_state
        if state is None or self.suggestion_id is None:
            return {}
        if state == "ignored":
            use = "ignored"
        elif payload == self._suggestion_base:  # the suggestion unchanged, however reached
            if state == "offered":  # neither accepted nor changed yet: not an answer
                return None
            use = "accepted"
        else:
            use = "edited"
        return {"suggestion_id": self.suggestion_id, "suggestion_use": use}
