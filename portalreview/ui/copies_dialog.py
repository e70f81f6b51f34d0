"""Offline copies for the PI in the desktop app (Tools > Offline copies…): write a copy of the
project for a clinician to take to the ward, merge the copies back, and settle the conflicts the
merges found. A copy holds only its clinician's assignments and answers unless the PI ticks
"The whole study" and confirms, after reading what such a copy hands over (every person's
answers, the drafts' authors and sources, the reference levels, the audit log); a copy for
"anyone" is a whole-study copy and asks the same.

The same steps as ``portalreview copy / merge / conflicts`` (docs/pi-guide.md), calling
:mod:`portalreview.store.merge`: copies and merges run on a worker thread with a progress bar
and Cancel. Each copy is merged in its own transaction, so a cancel keeps what the copies
merged before it brought, and saves nothing of the copy being merged; the summary says which.
Merging a copy again changes nothing ("nothing new"). A conflict (the same answer changed
differently in the master and in a copy) keeps the master's answer until the PI takes one of
the two versions here (recorded in the audit log).

The file choosers and the whole-study confirmation are the module functions
:func:`ask_copy_path`, :func:`ask_copies_to_merge`, :func:`ask_conflicts_path` and
:func:`confirm_whole_study`, so that tests can answer them.

Keys: Ctrl+1 / Ctrl+2 the tabs; Ctrl+S save a copy; Ctrl+M merge copies; Alt+Down / Alt+Up
next / previous conflict, Alt+K keep the master's answer, Alt+T take the copy's; F5 reads the
project again.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)
from sqlalchemy import select

from portalreview.store import merge
from portalreview.store.answer_summary import summary_lines
from portalreview.store.models import AuditEntry
from portalreview.store.project import SUFFIX, Project, ProjectError
from portalreview.store.service import StoreError, StudyService
from portalreview.store.study_setup import CancelFn, Cancelled, ProgressFn
from portalreview.tasks.common import colours
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import fit_to_screen
from portalreview.ui.study_setup_dialog import (
    MessageLine,
    add_shortcut,
    fill_table,
    make_table,
    no_default_button,
    people,
    project_closed,
    project_dialog,
)
from portalreview.ui.tools import only_for_the_pi
from portalreview.ui.workers import run_with_progress

PROJECT_FILES = f"PortalReview projects (*{SUFFIX});;All files (*)"

# --- file choosers (tests replace these) ------------------------------------------------------


def ask_copy_path(parent: QWidget, suggested: Path) -> Path | None:
    """Where to write a copy (None: the PI closed the chooser)."""
    path, _ = QFileDialog.getSaveFileName(parent, "Save a copy", str(suggested), PROJECT_FILES)
    return Path(path) if path else None


def confirm_whole_study(parent: QWidget, file_name: str, holds: str) -> bool:
    """Whether the PI really wants a whole-study copy, having read what it holds (No is the
    default answer)."""
    answer = QMessageBox.warning(
        parent,
        "Copy the whole study?",
        f"{file_name} will hold the whole study: {holds}.\n\nWrite this copy?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def ask_copies_to_merge(parent: QWidget, folder: Path) -> list[Path]:
    """The copies to merge, in the order chosen (empty: none)."""
    paths, _ = QFileDialog.getOpenFileNames(parent, "Merge copies", str(folder), PROJECT_FILES)
    return [Path(p) for p in paths]


def ask_conflicts_path(parent: QWidget, suggested: Path) -> Path | None:
    path, _ = QFileDialog.getSaveFileName(
        parent, "Save the conflicts", str(suggested), "CSV (*.csv);;JSON (*.json)"
    )
    return Path(path) if path else None


# --- merging several copies, reporting each -------------------------------------------------


@dataclass
class MergeOutcome:
    """What happened to one chosen copy."""

    path: Path
    report: merge.MergeReport | None = None
    refused: str = ""
    cancelled: bool = False

    def result(self) -> str:
        if self.cancelled:
            return "cancelled: nothing of it was saved"
        if self.refused:
            return f"refused: {self.refused}"
        report = self.report
        if report.dry_run:
            return "preview only: nothing saved"
        if not report.changed and not report.new_conflicts:
            if report.settled:
                return (
                    f"settled {report.settled} earlier conflict(s): the copy's answer changed since"
                )
            if report.timed:
                return f"took the longer time on task of {len(report.timed)} answer(s)"
            on_record = ": its conflicts are already on record" if report.conflicts else ""
            return "nothing new" + on_record
        skipped = f", {len(report.skipped)} answer(s) skipped" if report.skipped else ""
        return "merged" + skipped


def merge_files(
    project: Project,
    paths: list[Path],
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> list[MergeOutcome]:
    """Merge ``paths`` one after the other (as ``merge_copies``), but go on past a copy that is
    refused, and stop at a cancel: every copy gets an outcome."""
    outcomes: list[MergeOutcome] = []
    stopped = False
    for i, path in enumerate(paths):
        if stopped or (cancel is not None and cancel()):
            stopped = True
            outcomes.append(MergeOutcome(path, cancelled=True))
            continue

        def scaled(done: int, total: int, i: int = i) -> None:
            if progress is not None:
                progress(i * 1000 + (1000 * done) // max(total, 1), 1000 * len(paths))

        try:
            report = merge.merge_copy(
                project, path, dry_run=dry_run, progress=scaled, cancel=cancel, by=by
            )
        except Cancelled:
            stopped = True
            outcomes.append(MergeOutcome(path, cancelled=True))
        except (StoreError, ProjectError, sqlite3.DatabaseError, OSError) as exc:
            outcomes.append(MergeOutcome(path, refused=str(exc) or type(exc).__name__))
        else:
            outcomes.append(MergeOutcome(path, report))
    return outcomes


def outcome_row(outcome: MergeOutcome) -> list[Any]:
    report = outcome.report
    if report is None:
        return [outcome.path.name, "", "", "", "", "", outcome.result()]
    conflicts = f"{len(report.conflicts)}" + (
        f" ({report.new_conflicts} new)" if report.conflicts else ""
    )
    return [
        outcome.path.name,
        report.copy_for,
        len(report.added),
        len(report.updated),
        report.unchanged,
        conflicts,
        outcome.result(),
    ]


def merge_message(outcomes: list[MergeOutcome]) -> tuple[str, str]:
    """One sentence about a merge of several copies, and how to show it: "error" (bad news, or
    new conflicts to resolve), "note" (a preview: nothing happened) or "done"."""
    reports = [o.report for o in outcomes if o.report is not None]
    added = sum(len(r.added) for r in reports)
    updated = sum(len(r.updated) for r in reports)
    new = sum(r.new_conflicts for r in reports)
    preview = bool(reports) and reports[0].dry_run
    parts = []
    if reports and not any(r.brought_anything for r in reports):
        parts.append("Nothing new: the master already holds everything in these copies.")
    elif reports:
        add, update = ("Would add", "would update") if preview else ("Added", "updated")
        parts.append(f"{add} {added} answer(s), {update} {updated}; {new} new conflict(s).")
        timed = sum(len(r.timed) for r in reports)
        if timed:
            take = "Would take" if preview else "Took"
            parts.append(f"{take} the longer time on task of {timed} answer(s).")
        if new and preview:
            parts.append("Merging would keep the master's answer in each, for you to settle.")
        elif new:
            parts.append("Conflicts keep the master's answer until you choose below.")
    cancelled = [o.path.name for o in outcomes if o.cancelled]
    if cancelled:
        parts.append(f"Cancelled: nothing of {', '.join(cancelled)} was saved.")
    refused = [o.path.name for o in outcomes if o.refused]
    if refused:
        parts.append(f"Refused (nothing merged from it): {', '.join(refused)}.")
    if cancelled or refused or new:
        return " ".join(parts), "error"
    return " ".join(parts), "note" if preview else "done"


# --- conflicts shown side by side --------------------------------------------------------------


def when(stamp: str) -> str:
    """A stored UTC time (ISO 8601) as a person reads it, to the second."""
    return f"{stamp[:19].replace('T', ' ')} UTC" if stamp else ""


def conflict_html(conflict: merge.Conflict, service: StudyService) -> str:
    """The master's and the copy's versions of the answer, one decision per line; lines the
    other version lacks are marked."""
    mark = colours.mark("difference").name()
    unit = service.read_unit(conflict.unit_id)
    sides = []
    for state in (conflict.master, conflict.copy):
        lines = summary_lines(conflict.kind, state.get("payload", {}), unit, service.catalogs)
        lines.append(f"status: {state.get('status')}")
        if state.get("flagged"):
            lines.append(f"flagged: {state.get('flag_note') or '(no note)'}")
        if state.get("comment"):
            lines.append(f"comment: {state['comment']}")
        sides.append(lines)

    def column(lines: list[str], other: list[str]) -> str:
        items = "".join(
            f"<li><span style='background:{mark}'>≠ {html.escape(x)}</span></li>"
            if x not in other
            else f"<li>{html.escape(x)}</li>"
            for x in lines
        )
        return f"<ul style='margin-left:-20px'>{items}</ul>"

    what = "gold answer" if conflict.is_gold else "answer"
    return (
        f"<p><b>{html.escape(conflict.annotator)}'s {what}</b> to {conflict.kind} unit "
        f"{conflict.position + 1} of {html.escape(conflict.unit_set)} "
        f"(unit {conflict.unit_id}).</p>"
        "<table width='100%' cellspacing='6'><tr>"
        f"<th align='left'>Master's (kept until you choose), changed "
        f"{when(conflict.master_updated_at)}</th>"
        f"<th align='left'>{html.escape(conflict.copy_file)}'s, changed "
        f"{when(conflict.copy_updated_at)}</th></tr>"
        f"<tr><td valign='top'>{column(sides[0], sides[1])}</td>"
        f"<td valign='top'>{column(sides[1], sides[0])}</td></tr></table>"
    )


@dataclass(frozen=True)
class SentCopy:
    file: str
    annotator: str
    only_assigned: bool
    made_at: str
    merged: bool


def copies_sent(project: Project) -> list[SentCopy]:
    """The copies the master's audit log records, and whether a merge brought one back."""
    made, merged = [], set()
    with project.read() as s:
        for action, new_json in s.execute(
            select(AuditEntry.action, AuditEntry.new_json)
            .where(AuditEntry.action.in_(("copy", "merge")))
            .order_by(AuditEntry.id)
        ):
            details = json.loads(new_json or "{}")
            if action == "copy":
                made.append(details)
            else:
                merged.add(details.get("copy_id"))
    return [
        SentCopy(
            d.get("file", ""),
            d.get("for") or "anyone",
            bool(d.get("only_assigned")),
            d.get("made_at", ""),
            d.get("copy_id") in merged,
        )
        for d in made
    ]


# --- the window -------------------------------------------------------------------------------


class CopiesDialog(QDialog):
    """The PI's offline-copies window (one per main window)."""

    def __init__(
        self,
        project: Project,
        parent: QWidget | None = None,
        on_changed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("copiesDialog")
        self.setWindowTitle("Offline copies — PortalReview")
        self.project = project
        self.service = StudyService(project)
        self.read_only = project.read_only
        self.on_changed = on_changed or (lambda: None)
        self.by: int | None = None  # who the audit log names: the signed-in PI (open_tool)
        self.busy = False
        self.writing = False  # long work that writes to the study (``_run``)
        self.conflicts: list[merge.Conflict] = []
        self.outcomes: list[MergeOutcome] = []
        self.loaded = False
        self.tabs = QTabWidget()
        self.tabs.addTab(self._copy_tab(), "&Make a copy")
        self.tabs.addTab(self._merge_tab(), "Merge copies &back")
        self.message = MessageLine("copiesMessage")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.message)
        add_shortcut(self, "Ctrl+1", lambda: self.tabs.setCurrentIndex(0))
        add_shortcut(self, "Ctrl+2", lambda: self.tabs.setCurrentIndex(1))
        add_shortcut(self, "Ctrl+S", self.save_copy)
        add_shortcut(self, "Ctrl+M", self.merge_copies)
        add_shortcut(self, "Alt+Down", lambda: self.step_conflict(1))
        add_shortcut(self, "Alt+Up", lambda: self.step_conflict(-1))
        add_shortcut(self, "Alt+K", lambda: self.resolve("master"))
        add_shortcut(self, "Alt+T", lambda: self.resolve("copy"))
        add_shortcut(self, "F5", self.reload)
        no_default_button(self)
        fit_to_screen(self, 1100, 760)
        self.reload()
        if self.read_only:
            self.message.note(
                f"{project.label} is open read-only: you can make whole-study copies, not "
                "copies for one person (the master keeps the key to their ids), nor merge them."
            )

    # --- building ---------------------------------------------------------------------------

    def _copy_tab(self) -> QWidget:
        self.for_box = QComboBox()
        self.for_box.setObjectName("copyFor")
        self.for_box.setAccessibleName("Who the copy is for")
        self.for_box.currentIndexChanged.connect(self._for_changed)
        # a check box's text does not wrap: the long part is a label of its own, so that a
        # large font does not make the window wider than the screen
        self.whole_study_box = QCheckBox("The &whole study")
        whole_study_means = QLabel(
            "every person's answers, the drafts' authors and sources, the reference levels, "
            "the audit log"
        )
        whole_study_means.setWordWrap(True)
        self.whole_study_box.setAccessibleDescription(whole_study_means.text())
        self.whole_study_box.setObjectName("wholeStudy")
        self.whole_study_box.setChecked(False)
        self.save_button = QPushButton("&Save a copy… (Ctrl+S)")
        self.save_button.setObjectName("saveCopy")
        self.save_button.clicked.connect(self.save_copy)
        form = QFormLayout()
        form.addRow("&For:", self.for_box)
        form.addRow("", self.whole_study_box)
        form.addRow("", whole_study_means)
        form.addRow("", self.save_button)
        explain = QLabel(
            "A copy is the project file itself, marked with who it is for and the point of the "
            "project's history it starts from. The clinician annotates it offline; merge it "
            "back in the next tab. It holds only their assignments and answers: the others' "
            "answers, the drafts' authors and sources, the reference urgency levels and the "
            "audit log are not in the file, even for someone who opens it with another tool. "
            "<i>The whole study</i> copies everything (you are asked to confirm)."
        )
        explain.setWordWrap(True)
        self.sent_table = make_table(
            ["Copy", "For", "What it holds", "Made at", "Merged back"],
            "copiesSent",
            "Copies made of this project",
        )
        narrow = QHBoxLayout()
        narrow.addLayout(form)
        narrow.addStretch(1)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(narrow)
        layout.addWidget(explain)
        layout.addWidget(QLabel("<b>Copies made of this project</b>"))
        layout.addWidget(self.sent_table, 1)
        return page

    def _merge_tab(self) -> QWidget:
        self.merge_button = QPushButton("Merge &copies… (Ctrl+M)")
        self.merge_button.setObjectName("mergeCopies")
        self.merge_button.clicked.connect(self.merge_copies)
        self.dry_run_box = QCheckBox("Only show what a merge would do (save nothing)")
        self.dry_run_box.setObjectName("mergeDryRun")
        top = QHBoxLayout()
        top.addWidget(self.merge_button)
        top.addWidget(self.dry_run_box)
        top.addStretch(1)
        self.results_table = make_table(
            ["Copy", "For", "Added", "Updated", "Unchanged", "Conflicts", "Result"],
            "mergeResults",
            "What the last merge did with each copy",
            stretch=-1,
        )
        self.conflict_table = make_table(
            ["#", "Unit set", "Unit", "Kind", "Whose answer", "Copy"],
            "openConflicts",
            "Conflicts the merges left for you",
            stretch=-1,
        )
        self.conflict_table.currentCellChanged.connect(lambda *_a: self._show_conflict())
        self.conflict_view = QTextBrowser()
        self.conflict_view.setObjectName("conflictView")
        self.keep_master_button = QPushButton("Keep the master's (Alt+K)")
        self.keep_master_button.setObjectName("keepMaster")
        self.keep_master_button.clicked.connect(lambda: self.resolve("master"))
        self.take_copy_button = QPushButton("Take the copy's (Alt+T)")
        self.take_copy_button.setObjectName("takeCopy")
        self.take_copy_button.clicked.connect(lambda: self.resolve("copy"))
        self.export_button = QPushButton("Save the list…")
        self.export_button.clicked.connect(self.export_conflicts)
        buttons = QHBoxLayout()
        buttons.addWidget(self.keep_master_button)
        buttons.addWidget(self.take_copy_button)
        buttons.addStretch(1)
        buttons.addWidget(self.export_button)
        detail = QWidget()
        detail_layout = QVBoxLayout(detail)
        detail_layout.setContentsMargins(0, 0, 0, 0)
        detail_layout.addWidget(self.conflict_view, 1)
        detail_layout.addLayout(buttons)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.conflict_table)
        split.addWidget(detail)
        split.setSizes([520, 560])
        self.conflicts_box = QGroupBox("Open conflicts")
        box_layout = QVBoxLayout(self.conflicts_box)
        box_layout.addWidget(split)
        results = QWidget()
        results_layout = QVBoxLayout(results)
        results_layout.setContentsMargins(0, 0, 0, 0)
        results_layout.addLayout(top)
        results_layout.addWidget(self.results_table, 1)
        vertical = QSplitter(Qt.Orientation.Vertical)
        vertical.addWidget(results)
        vertical.addWidget(self.conflicts_box)
        vertical.setSizes([170, 530])
        vertical.setChildrenCollapsible(False)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(vertical)
        return page

    # --- reading ----------------------------------------------------------------------------

    def reload(self) -> None:
        if project_closed(self, self.message):
            return
        chosen = self.for_box.currentData()
        self.for_box.blockSignals(True)
        self.for_box.clear()
        self.for_box.addItem("Anyone (the whole project)", None)
        for person in people(self.project):
            role = " (PI)" if person.role == "pi" else ""
            shown = f"{person.display_name} ({person.name})" if person.display_name else person.name
            self.for_box.addItem(f"{shown}{role}", person.name)
        index = self.for_box.findData(chosen) if self.loaded else min(1, self.for_box.count() - 1)
        self.for_box.setCurrentIndex(max(index, 0))
        self.loaded = True
        self.for_box.blockSignals(False)
        self._for_changed()
        self.show_sent()
        self.show_conflicts()

    def show_sent(self) -> None:
        if getattr(self.parent(), "project", None) is not self.project:
            return  # the project was closed (a work's outcome arriving as the program ends)
        fill_table(
            self.sent_table,
            [
                [
                    c.file,
                    c.annotator,
                    "their assignments" if c.only_assigned else "the whole study",
                    when(c.made_at),
                    "yes" if c.merged else "not yet",
                ]
                for c in copies_sent(self.project)
            ],
        )

    def show_conflicts(self, keep_row: int = 0) -> None:
        self.conflicts = merge.open_conflicts(self.project)
        fill_table(
            self.conflict_table,
            [
                [
                    f"#{c.number}",  # the number `portalreview conflicts --resolve` takes
                    c.unit_set,
                    f"{c.position + 1} (id {c.unit_id})",
                    c.kind,
                    c.annotator,
                    c.copy_file,
                ]
                for c in self.conflicts
            ],
        )
        self.conflicts_box.setTitle(f"Open conflicts ({len(self.conflicts)})")
        if self.conflicts:
            self.conflict_table.setCurrentCell(min(keep_row, len(self.conflicts) - 1), 0)
        self._show_conflict()

    def current_conflict(self) -> merge.Conflict | None:
        row = self.conflict_table.currentRow()
        return self.conflicts[row] if 0 <= row < len(self.conflicts) else None

    def _show_conflict(self) -> None:
        conflict = self.current_conflict()
        if conflict is None:
            self.conflict_view.setHtml(
                "<p>No open conflict. A conflict is an answer changed differently in the master "
                "and in a copy; the master keeps its answer until you choose.</p>"
            )
        else:
            self.conflict_view.setHtml(conflict_html(conflict, self.service))
        self._update_buttons()

    def step_conflict(self, delta: int) -> None:
        if self.conflicts:
            row = max(0, min(len(self.conflicts) - 1, self.conflict_table.currentRow() + delta))
            self.conflict_table.setCurrentCell(row, 0)

    # --- copies -----------------------------------------------------------------------------

    def _for_changed(self, *_args: Any) -> None:
        """A copy for anyone can only be a whole-study copy (still confirmed when saved)."""
        someone = self.for_box.currentData() is not None
        was_forced = not self.whole_study_box.isEnabled()
        self.whole_study_box.setEnabled(someone)
        if not someone:
            self.whole_study_box.setChecked(True)
        elif was_forced:  # back from "anyone": the safe copy again
            self.whole_study_box.setChecked(False)

    def suggested_copy_path(self) -> Path:
        """A free ``STUDY-WHO.prproj`` beside the study. WHO keeps the person's letters,
        digits, "." and "-" (others become "_"): a name such as "../../tmp/evil" pointed the
        Save dialog outside the study's folder."""
        who = re.sub(r"[^\w.-]", "_", self.for_box.currentData() or "copy")
        stem = f"{self.project.stem}-{who}"
        folder = self.project.folder
        path, n = folder / f"{stem}{SUFFIX}", 1
        while path.exists():
            n += 1
            path = folder / f"{stem}-{n}{SUFFIX}"
        return path

    def save_copy(self) -> None:
        if project_closed(self, self.message):
            return
        if self.busy:
            return
        who = self.for_box.currentData()
        whole = self.whole_study_box.isChecked() or who is None
        target = ask_copy_path(self, self.suggested_copy_path())
        if target is None:
            return
        if whole:
            holds = merge.whole_study_contents(self.project, who)
            if not confirm_whole_study(self, target.name, holds):
                self.message.note(
                    f"No copy written: {target.name} would have held the whole study."
                )
                return

        def work(progress, cancelled):
            return merge.make_copy(
                self.project,
                target,
                annotator=who,
                only_assigned=not whole,
                progress=progress,
                cancel=cancelled,
                by=self.by,
            )

        self._run(f"Writing {target.name}…", work, self._copied)

    def _copied(self, info: merge.CopyInfo) -> None:
        self._set_busy(False)
        scope = "their assignments and answers only" if info.only_assigned else "the whole study"
        self.message.done(
            f"Wrote {info.path} for {info.annotator or 'anyone'} ({scope}). Merge it back "
            "here when it returns."
        )
        self.show_sent()

    # --- merging ----------------------------------------------------------------------------

    def merge_copies(self) -> None:
        if project_closed(self, self.message):
            return
        if self.busy:
            return
        dry_run = self.dry_run_box.isChecked()
        if self.read_only and not dry_run:
            self.message.error(
                f"{self.project.label} is open read-only: a merge cannot be saved."
            )
            return
        paths = ask_copies_to_merge(self, self.project.folder)
        if not paths:
            return
        self.tabs.setCurrentIndex(1)

        def work(progress, cancelled):
            return merge_files(
                self.project,
                paths,
                dry_run=dry_run,
                progress=progress,
                cancel=cancelled,
                by=self.by,
            )

        names = ", ".join(p.name for p in paths)
        self._run(f"Merging {names}…", work, self._merged)

    def _merged(self, outcomes: list[MergeOutcome]) -> None:
        self._set_busy(False)
        self.outcomes = outcomes
        fill_table(self.results_table, [outcome_row(o) for o in outcomes])
        for row, outcome in enumerate(outcomes):
            details = outcome.report.summary() if outcome.report else outcome.result()
            for column in range(self.results_table.columnCount()):
                self.results_table.item(row, column).setToolTip(plain_tip(details))
        text, style = merge_message(outcomes)
        getattr(self.message, style)(text)
        self.show_sent()
        self.show_conflicts()
        if any(o.report is not None and o.report.recorded for o in outcomes):
            self.on_changed()

    # --- conflicts --------------------------------------------------------------------------

    def resolve(self, take: str) -> None:
        if project_closed(self, self.message):
            return
        conflict = self.current_conflict()
        if conflict is None or self.busy or self.read_only:
            return
        row = self.conflict_table.currentRow()
        try:
            merge.resolve_conflict(self.project, conflict, take, by=self.by)
        except (StoreError, ProjectError) as exc:
            self.message.error(f"Not resolved: {exc}.")
            self.show_conflicts(row)
            return
        kept = "the master's answer" if take == "master" else f"{conflict.copy_file}'s answer"
        self.message.done(
            f"Kept {kept} for {conflict.annotator}'s {conflict.kind} unit {conflict.position + 1} "
            f"of {conflict.unit_set!r}."
        )
        self.show_conflicts(row)
        self.on_changed()

    def export_conflicts(self) -> None:
        if not self.conflicts:
            self.message.note("There is no open conflict to save.")
            return
        target = ask_conflicts_path(self, self.project.folder / "conflicts.csv")
        if target is None:
            return
        try:
            out = merge.write_conflicts(self.conflicts, target)
        except OSError as exc:
            self.message.error(f"Could not write {target}: {exc}")
            return
        self.message.done(f"Wrote {len(self.conflicts)} conflict(s) to {out}.")

    # --- long work --------------------------------------------------------------------------

    def _run(self, label: str, work: Callable[..., Any], on_done: Callable[[Any], None]) -> None:
        self._set_busy(True)
        self.writing = True  # the study is not closed under it (MainWindow._no_tool_at_work)
        run_with_progress(self, label, work, on_done=on_done, on_error=self._failed)

    def _failed(self, message: str, exc: Exception) -> None:
        self._set_busy(False)
        if isinstance(exc, Cancelled):
            self.message.note("Cancelled: nothing was saved.")
        else:
            self.message.error(f"Not done: {message}")

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        if not busy:
            self.writing = False
        self._update_buttons()

    def _update_buttons(self) -> None:
        if not hasattr(self, "take_copy_button"):
            return
        idle, writable = not self.busy, not self.read_only
        has_conflict = self.current_conflict() is not None
        self.save_button.setEnabled(idle)
        self.merge_button.setEnabled(idle)
        self.keep_master_button.setEnabled(idle and writable and has_conflict)
        self.take_copy_button.setEnabled(idle and writable and has_conflict)
        self.export_button.setEnabled(bool(self.conflicts))


def open_tool(window) -> CopiesDialog | None:
    """Tools > Offline copies… (PI only)."""
    if not only_for_the_pi(window, "Offline copies"):
        return None
    return project_dialog(window, CopiesDialog)
