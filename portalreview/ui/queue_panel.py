"""The work queue of one annotation kind: every unit assigned to the signed-in person, its
status, a filter (to do, drafts, done, flagged) and the progress ("12 of 40 done").

A list model rather than a list of widgets, so a queue of 10,000 units opens at once."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QListView,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from portalreview.store.service import QueueItem

FILTERS = (
    ("all", "All"),
    ("todo", "To do"),
    ("draft", "Started (drafts)"),
    ("submitted", "Done"),
    ("flagged", "Flagged"),
)
_MARK = {"todo": "○", "draft": "◐", "submitted": "●"}
_WORD = {"todo": "to do", "draft": "draft", "submitted": "done"}


def keep(item: QueueItem, which: str) -> bool:
    if which == "all":
        return True
    if which == "flagged":
        return item.flagged
    return item.status == which


class QueueModel(QAbstractListModel):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[QueueItem] = []
        self.numbers: dict[int, int] = {}  # unit id -> its number in the whole queue (1-based)
        self.row_of: dict[int, int] = {}  # unit id -> its row in the filtered list

    def set_items(self, items: list[QueueItem], numbers: dict[int, int]) -> None:
        self.beginResetModel()
        self.items, self.numbers = items, numbers
        self.row_of = {item.unit_id: row for row, item in enumerate(items)}
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.items)

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        item = self.items[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            flag = "  ⚑" if item.flagged else ""
            number = self.numbers[item.unit_id]
            return f"{_MARK[item.status]}  {number:>4}   {_WORD[item.status]}{flag}"
        if role == Qt.ItemDataRole.AccessibleTextRole:
            flag = ", flagged" if item.flagged else ""
            return f"Unit {self.numbers[item.unit_id]}, {_WORD[item.status]}{flag}"
        if role == Qt.ItemDataRole.UserRole:
            return item.unit_id
        return None

    def replace_item(self, row: int, item: QueueItem) -> None:
        self.items[row] = item
        index = self.index(row)
        self.dataChanged.emit(index, index)


class QueuePanel(QWidget):
    """Emits ``unit_chosen(unit_id)`` when the person picks a unit."""

    unit_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.all_items: list[QueueItem] = []
        self.numbers: dict[int, int] = {}
        self.done = 0
        self.total = 0
        self.filter = QComboBox()
        self.filter.setAccessibleName("Show")
        for key, name in FILTERS:
            self.filter.addItem(name, key)
        self.filter.currentIndexChanged.connect(lambda _i: self._apply_filter())
        self.progress_label = QLabel()
        self.progress_label.setObjectName("progressLabel")
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(8)
        self.model = QueueModel()
        self.view = QListView()
        self.view.setObjectName("queueList")
        self.view.setAccessibleName("Work queue")
        self.view.setModel(self.model)
        self.view.setUniformItemSizes(True)
        self._quiet = False
        self.view.selectionModel().currentChanged.connect(self._on_current_changed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.progress_label)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.filter)
        layout.addWidget(self.view, 1)

    # --- content ----------------------------------------------------------------------------

    def set_items(self, items: list[QueueItem], total: int | None = None) -> None:
        """Show ``items``; ``total`` counts what is to be done when it is more than the items
        listed (an adaptive inbox lists its next pair only once the previous one is done)."""
        self.all_items = list(items)
        self.total = max(total or 0, len(self.all_items))
        self.numbers = {item.unit_id: n for n, item in enumerate(self.all_items, start=1)}
        self.done = sum(i.status == "submitted" for i in self.all_items)
        self._apply_filter()

    def _apply_filter(self) -> None:
        which = self.filter.currentData()
        current = self.current_unit()
        self.model.set_items([i for i in self.all_items if keep(i, which)], self.numbers)
        self._show_progress()
        if current is not None:
            self.select_unit(current, emit=False)

    def _show_progress(self) -> None:
        done, total = self.done, self.total
        self.progress_label.setText(f"<b>{done} of {total} done</b>")
        self.progress_bar.setMaximum(max(total, 1))
        self.progress_bar.setValue(done)

    def is_adaptive(self, unit_id: int) -> bool:
        number = self.numbers.get(unit_id)
        return number is not None and self.all_items[number - 1].adaptive

    def update_unit(self, unit_id: int, status: str, flagged: bool) -> None:
        """Reflect a save without re-reading the queue (constant time: a save must stay fast
        in a queue of 10,000 units)."""
        number = self.numbers.get(unit_id)
        if number is None:
            return
        old = self.all_items[number - 1]
        self.done += (status == "submitted") - (old.status == "submitted")
        self.all_items[number - 1] = replace(old, status=status, flagged=flagged)
        row = self.model.row_of.get(unit_id)
        if row is not None:
            self.model.replace_item(row, replace(old, status=status, flagged=flagged))
        self._show_progress()

    # --- navigation -------------------------------------------------------------------------

    def current_row(self) -> int:
        index = self.view.currentIndex()
        return index.row() if index.isValid() else -1

    def current_unit(self) -> int | None:
        row = self.current_row()
        return self.model.items[row].unit_id if 0 <= row < len(self.model.items) else None

    def select_row(self, row: int, emit: bool = True) -> bool:
        if not 0 <= row < len(self.model.items):
            return False
        index = self.model.index(row)
        changed = index != self.view.currentIndex()
        self._quiet = not emit
        try:
            self.view.setCurrentIndex(index)
        finally:
            self._quiet = False
        self.view.scrollTo(index)
        if emit and not changed:
            self.unit_chosen.emit(self.model.items[row].unit_id)
        return True

    def select_none(self) -> None:
        """Highlight no unit (none is on screen), choosing none."""
        self._quiet = True
        try:
            self.view.setCurrentIndex(QModelIndex())
            self.view.clearSelection()
        finally:
            self._quiet = False

    def select_unit(self, unit_id: int, emit: bool = True) -> bool:
        row = self.model.row_of.get(unit_id)
        return False if row is None else self.select_row(row, emit)

    def step(self, delta: int) -> bool:
        return self.select_row(self.current_row() + delta)

    def next_todo(self) -> bool:
        """The next unit (after the current one, wrapping) that is not done."""
        items, start = self.model.items, self.current_row()
        for offset in range(1, len(items) + 1):
            row = (start + offset) % len(items)
            if items[row].status != "submitted":
                return self.select_row(row)
        return False

    def jump_to_number(self, number: int) -> bool:
        """Select the unit numbered ``number`` (1-based, as the list shows it), clearing the
        filter if it hides that unit."""
        if not 1 <= number <= len(self.all_items):
            return False
        unit_id = self.all_items[number - 1].unit_id
        if not self.select_unit(unit_id):
            self.filter.setCurrentIndex(0)
            return self.select_unit(unit_id)
        return True

    def _on_current_changed(self, index: QModelIndex, _previous: QModelIndex) -> None:
        if index.isValid() and not self._quiet:
            self.unit_chosen.emit(self.model.items[index.row()].unit_id)
