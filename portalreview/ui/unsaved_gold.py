"""The PI's gold decision a save could not store, kept on this computer until it is.

A clinician's answer is kept this way (``portalreview.ui.unsaved_work``); so is the PI's
decision in the adjudication window (``portalreview.ui.adjudication``): a failed save writes
the decision and its note to a file in the PI's own program folder, the next save of that
unit that succeeds (or Discard) deletes it, and opening the adjudication window again offers
to put it back in the editor and save it. Decisions are kept under the PI's name with
``" (gold)"`` after it, apart from the answers the PI gives as an annotator to the same units.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QMessageBox

from portalreview.tasks.common.editor_base import suggested_answer
from portalreview.tasks.registry import EDITORS
from portalreview.ui.unsaved_offer import say_damaged
from portalreview.ui.unsaved_work import UnsavedAnswer, UnsavedWork, UnsavedWorkError

if TYPE_CHECKING:
    from portalreview.ui.adjudication import AdjudicationDialog, UnitAnswers
    from portalreview.ui.main_window import MainWindow

log = logging.getLogger(__name__)
TITLE = "Adjudication"
GOLD_SUFFIX = " (gold)"


def gold_work(window: MainWindow) -> UnsavedWork | None:
    """Where the signed-in PI's unsaved decisions in this study are kept (None: a read-only
    study, where nothing is saved)."""
    if window.project is None or window.project.read_only or not window.annotator_name:
        return None
    return UnsavedWork(window._study_identity(), window.annotator_name + GOLD_SUFFIX)


def keep_decision(
    dialog: AdjudicationDialog, payload: dict[str, Any], note: str, status: str, why: str
) -> bool:
    """Keep the decision a save could not store; False when there is nowhere to keep it
    (then it is only on screen, and the window says so)."""
    report = dialog.report
    if dialog.unsaved is None or report is None:
        return False
    kept = UnsavedAnswer(
        unit_id=report.unit_id,
        kind=dialog.kind or "",
        payload=payload,
        comment=note,
        status=status,
        flag=None,
        suggestion_id=None,
        suggestion_use=None,
        unsaved_seconds=0.0,
        based_on=report.gold.updated_at if report.gold else None,
        kept_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        why=why,
    )
    return dialog.unsaved.keep(kept)


def read_kept_decisions(dialog: AdjudicationDialog) -> list[UnsavedAnswer]:
    """The decisions kept before, the oldest first; a file that cannot be read is named to
    the PI and left as it is."""
    if dialog.unsaved is None:
        return []
    kept, damaged = dialog.unsaved.read_all()
    if damaged:
        say_damaged(dialog, TITLE, "gold decision", damaged, others=bool(kept))
    return kept


def offer_next(dialog: AdjudicationDialog) -> None:
    """Offer the kept decisions one at a time, each once its kind's answers are read: a
    decision of another kind switches the window to that kind first (the read in the
    background comes back here). Stops where one put back could not be saved again."""
    waiting = dialog.kept_to_offer
    kinds = [dialog.kind_box.itemData(i) for i in range(dialog.kind_box.count())]
    # (a window closed meanwhile offers nothing: opened again, it offers them all again)
    while waiting and not dialog.loading and dialog.isVisible():
        kept = waiting[0]
        if kept.kind not in kinds:
            waiting.pop(0)
            _cannot_put_back(dialog, kept, "no units of that kind are assigned now")
            continue
        if kept.kind != dialog.kind:
            dialog.offer_reading = True  # read in the background; this is called again then
            dialog.set_kind(kept.kind)
            return
        waiting.pop(0)
        _offer(dialog, kept)
        if dialog.dirty:  # put back, and its save failed again: it stays on screen
            return


def _title(kind: str) -> str:
    return EDITORS[kind][0] if kind in EDITORS else kind


def _kept_sentence(kept: UnsavedAnswer) -> str:
    """What was kept, and why. The PI's note and the error come after the first line break:
    a message box reads its text as HTML when its first line looks like HTML."""
    day, _, clock = kept.kept_at.partition("T")
    return (
        f"A gold decision you made in {_title(kept.kind)} on {day} at {clock[:5]} could not "
        f"be saved, and was kept on this computer.\nYour note: “{kept.comment}”. What went "
        f"wrong then: {kept.why}"
    )


def _offer(dialog: AdjudicationDialog, kept: UnsavedAnswer) -> None:
    report = next((r for r in dialog.reports if r.unit_id == kept.unit_id), None)
    if report is None:
        _cannot_put_back(dialog, kept, "its unit has no answers to adjudicate now")
        return
    text = _kept_sentence(kept)
    if (report.gold.updated_at if report.gold else None) != kept.based_on:
        text += (
            "\n\nThe unit's gold answer has been saved since then (perhaps from another "
            "computer): putting yours back replaces it."
        )
    choice = QMessageBox.question(
        dialog,
        TITLE,
        f"{text}\n\nPut it back in the editor and save it as gold now?\n\nDiscard throws it "
        "away; Cancel keeps it on this computer and asks again the next time this window "
        "opens.",
        QMessageBox.StandardButton.Yes
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Yes,
    )
    if choice == QMessageBox.StandardButton.Discard:
        log.info("kept gold decision of unit %s discarded by the PI", kept.unit_id)
        dialog.unsaved.forget(kept.unit_id)
    elif choice == QMessageBox.StandardButton.Yes:
        _put_back(dialog, kept, report)


def _put_back(dialog: AdjudicationDialog, kept: UnsavedAnswer, report: UnitAnswers) -> None:
    """Show the kept decision in its unit, as the PI's edit, and save it as gold."""
    if report not in dialog.shown and dialog.hide_done.isChecked():
        dialog.hide_done.setChecked(False)  # an adjudicated unit is listed again
    if not dialog.select_unit(kept.unit_id):
        why = "the annotators' answers of its unit agree now"
        if not dialog.with_drafts.isChecked():
            why = (
                "its unit is not listed: its submitted answers agree now (tick “Count "
                "unfinished (draft) answers” to list units whose drafts differ)"
            )
        _cannot_put_back(dialog, kept, why)
        return
    if dialog.editor is None:  # (every kind has one now)
        _cannot_put_back(dialog, kept, "this kind has no editor in this window")
        return
    shown = dataclasses.replace(
        report.gold or suggested_answer(dialog.unit, {}), payload=kept.payload, comment=""
    )
    try:
        dialog.show_kept(shown, kept.comment)
        dialog.editor.payload()  # as the save will ask for it
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
        log.exception("kept gold decision of unit %s cannot be shown", kept.unit_id)
        dialog.editor.load(dialog.unit, report.gold)  # what the unit showed before
        damaged = UnsavedWorkError(
            f"{dialog.unsaved.path_for(kept.unit_id)} is damaged: its {kept.kind} decision "
            f"cannot be shown ({type(exc).__name__}: {exc})"
        )
        say_damaged(dialog, TITLE, "gold decision", [damaged], others=False)
        return
    dialog.save_gold()


def _cannot_put_back(dialog: AdjudicationDialog, kept: UnsavedAnswer, why: str) -> None:
    """The kept decision has nowhere to go: say so, and let the PI discard it rather than be
    asked every time the window opens."""
    choice = QMessageBox.question(
        dialog,
        TITLE,
        f"{_kept_sentence(kept)}\n\nIt cannot be put back: {why}. Discard it?\n\nCancel "
        f"keeps it on this computer ({dialog.unsaved.path_for(kept.unit_id)}) and asks again "
        "the next time this window opens.",
        QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    if choice == QMessageBox.StandardButton.Discard:
        log.info("kept gold decision of unit %s discarded: %s", kept.unit_id, why)
        dialog.unsaved.forget(kept.unit_id)


def remind_of_kept_decisions(window: MainWindow) -> None:
    """At the PI's sign-in: decisions kept after a failed save are put back from the
    adjudication window; offer to open it now."""
    if window.service is None or window.service.viewer.role != "pi":
        return
    work = gold_work(window)
    # a file that cannot be read counts too: the window names it
    count = sum(map(len, work.read_all())) if work is not None else 0
    if not count:
        return
    decisions = "A gold decision" if count == 1 else f"{count} gold decisions"
    choice = QMessageBox.question(
        window,
        TITLE,
        f"{decisions} you made in the adjudication window could not be saved and "
        f"{'was' if count == 1 else 'were'} kept on this computer.\n\nOpen the adjudication "
        "window now to put them back? (No: they are offered the next time it opens.)",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.Yes,
    )
    if choice == QMessageBox.StandardButton.Yes:
        from portalreview.ui.adjudication import open_tool  # (it imports this module)

        open_tool(window)
