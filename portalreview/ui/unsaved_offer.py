"""Signing in again after a save failed: the answer kept on this computer
(``portalreview.ui.unsaved_work``) is offered back, to be saved like any change."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMessageBox, QWidget

from portalreview.store.service import AnswerView, StoreError
from portalreview.tasks.registry import EDITORS
from portalreview.ui.unsaved_work import UnsavedAnswer, UnsavedWorkError

if TYPE_CHECKING:
    from portalreview.ui.main_window import MainWindow

log = logging.getLogger(__name__)
APP_NAME = "PortalReview"
_BUTTONS = (
    QMessageBox.StandardButton.Yes
    | QMessageBox.StandardButton.Discard
    | QMessageBox.StandardButton.Cancel
)


def offer_kept_answers(window: MainWindow) -> None:
    """Offer each kept answer in turn, the oldest first (:func:`offer_kept_answer`); stop
    where one put back could not be saved (its unit cannot be left until it is)."""
    session = window.session
    if session is None or session.unsaved is None:
        return
    kept, damaged = session.unsaved.read_all()
    if damaged:
        say_damaged(window, APP_NAME, "answer", damaged, others=bool(kept))
    for answer in kept:
        offer_kept_answer(window, answer)
        if session.pending:
            return


def say_damaged(
    parent: QWidget, title: str, what: str, damaged: list[UnsavedWorkError], others: bool
) -> None:
    """Name each kept file that cannot be read back (left as it is, for support); ``others``:
    the readable ones are offered next."""
    for problem in damaged:
        log.warning("kept %s not read: %s", what, problem)
    one = len(damaged) == 1
    head = (
        f"{'A' if one else len(damaged)} {what}{'' if one else 's'} kept after a failed save "
        f"could not be read:"
    )
    files = "\n".join(f"• {problem}" for problem in damaged)
    left = "The file is" if one else "The files are"
    rest = f" The other kept {what}s are offered now." if others else ""
    QMessageBox.warning(
        parent,
        title,
        f"{head}\n{files}\n\n{left} left as {'it is' if one else 'they are'}; Help > Open "
        f"log folder has the details for support.{rest}",
    )


def offer_kept_answer(window: MainWindow, kept: UnsavedAnswer) -> None:
    """Ask whether to put the kept answer back on screen (Yes: shown and saved now), to throw
    it away (Discard), or to keep it for next time (Cancel)."""
    session = window.session
    title = EDITORS[kept.kind][0] if kept.kind in EDITORS else kept.kind
    if kept.kind not in window.kinds:
        _cannot_put_back(window, kept, title, f"you have no {title} work in this study now")
        return
    try:
        listed = {item.unit_id for item in window.service.queue(kept.kind)}
        stored = window.service.get_answer(kept.unit_id)
    except StoreError as exc:
        log.warning("kept unsaved answer not offered: %s", exc)
        return  # offered again at the next sign-in
    if kept.unit_id not in listed:
        _cannot_put_back(window, kept, title, "its unit is not in your list now")
        return
    choice = QMessageBox.question(
        window,
        APP_NAME,
        _question(kept, title, stored),
        _BUTTONS,
        QMessageBox.StandardButton.Yes,
    )
    if choice == QMessageBox.StandardButton.Discard:
        log.info("kept unsaved answer of unit %s discarded by its annotator", kept.unit_id)
        session.unsaved.forget(kept.unit_id)
    elif choice == QMessageBox.StandardButton.Yes:
        _put_back(window, kept, title)


def _kept_sentence(kept: UnsavedAnswer, title: str) -> str:
    day, _, clock = kept.kept_at.partition("T")
    return (
        f"What you entered in a unit of {title} on {day} at {clock[:5]} could not be saved, and "
        f"was kept on this computer. What went wrong then: {kept.why}"
    )


def _question(kept: UnsavedAnswer, title: str, stored: AnswerView | None) -> str:
    text = _kept_sentence(kept, title)
    stored_at = stored.updated_at if stored is not None else None
    if stored_at != kept.based_on:
        text += (
            "\n\nThat unit has been saved since then (perhaps from another computer): "
            "putting yours back replaces the answer saved there."
        )
    return (
        f"{text}\n\nPut it back on screen and save it now?\n\nDiscard throws it away; Cancel "
        "keeps it on this computer and asks again the next time you open this study."
    )


def _put_back(window: MainWindow, kept: UnsavedAnswer, title: str) -> None:
    if not window.go_to_unit(kept.kind, kept.unit_id):
        _cannot_put_back(window, kept, title, "its unit is not in your list now")
        return
    window.suggestions.stop()
    window.suggestions.banner(window.session.editor).show_state("hidden", "")
    try:
        view = window.session.put_back(kept)
    except UnsavedWorkError as problem:  # not an answer its editor can show
        say_damaged(window, APP_NAME, "answer", [problem], others=False)
        return
    if view is not None:
        window.statusBar().showMessage(
            "Your kept answer is back on screen and saved"
            + (", submitted." if view.status == "submitted" else "."),
            10000,
        )


def _cannot_put_back(window: MainWindow, kept: UnsavedAnswer, title: str, why: str) -> None:
    """The kept answer has nowhere to go (the PI took the unit or the kind away): say so, and
    let the person discard it rather than be asked at every sign-in."""
    choice = QMessageBox.question(
        window,
        APP_NAME,
        f"{_kept_sentence(kept, title)}\n\nIt cannot be put back: {why}. Discard it?\n\n"
        f"Cancel keeps it on this computer ({window.session.unsaved.path_for(kept.unit_id)}) "
        "and asks again "
        "the next time you open this study.",
        QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    if choice == QMessageBox.StandardButton.Discard:
        log.info("kept unsaved answer of unit %s discarded: %s", kept.unit_id, why)
        window.session.unsaved.forget(kept.unit_id)
