"""Preferences kept in QSettings: recent projects, the last annotator per project, reading
size per annotator, the colour scheme, and whether the work queue is shown."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

ORGANIZATION = "PortalReview"
APPLICATION = "PortalReview"
MAX_RECENT = 8
DEFAULT_POINT_SIZE = 11.0
MIN_POINT_SIZE, MAX_POINT_SIZE = 8.0, 28.0


def default_point_size() -> float:
    """The reading size before a person chooses one (and after Ctrl+0): 11 pt, or the system's
    font size when that is larger (a person who set a large font for every program gets it in
    the editors too, not only in the menus and lists)."""
    app = QApplication.instance()
    system = app.font().pointSizeF() if isinstance(app, QApplication) else -1.0
    return clamp_point_size(max(DEFAULT_POINT_SIZE, system))


class Preferences:
    """A thin, typed layer over QSettings (tests pass their own QSettings file)."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self.qs = settings or QSettings(ORGANIZATION, APPLICATION)

    # --- recent projects --------------------------------------------------------------------

    def recent_projects(self) -> list[Path]:
        value = self.qs.value("recent_projects", []) or []
        if isinstance(value, str):  # QSettings returns a lone string for a one-item list
            value = [value]
        if not isinstance(value, list):  # a settings file written by hand or damaged:
            return []  # (a byte array, a point...) the list starts again, the program starts
        return [Path(p) for p in value if isinstance(p, str) and p]

    def add_recent(self, path: Path) -> None:
        paths = [str(path.resolve())]
        paths += [str(p) for p in self.recent_projects() if str(p) != paths[0]]
        self.qs.setValue("recent_projects", paths[:MAX_RECENT])

    def remove_recent(self, path: Path) -> None:
        paths = [str(p) for p in self.recent_projects() if p != path]
        self.qs.setValue("recent_projects", paths)

    # --- per project / per person -----------------------------------------------------------

    def last_annotator(self, project_key: str) -> str | None:
        value = self.qs.value(f"projects/{project_key}/last_annotator")
        return str(value) if value else None

    def set_last_annotator(self, project_key: str, name: str) -> None:
        self.qs.setValue(f"projects/{project_key}/last_annotator", name)

    def point_size(self, annotator: str) -> float:
        value = self.qs.value(f"people/{annotator}/point_size")
        try:
            return clamp_point_size(float(value))
        except (TypeError, ValueError):  # none chosen yet (None), or not a number
            return default_point_size()

    def set_point_size(self, annotator: str, size: float) -> None:
        self.qs.setValue(f"people/{annotator}/point_size", clamp_point_size(size))

    # --- appearance -------------------------------------------------------------------------

    def color_scheme(self) -> str:
        """ "system", "light", "dark" or "high_contrast"."""
        value = str(self.qs.value("color_scheme", "system"))
        return value if value in ("system", "light", "dark", "high_contrast") else "system"

    def set_color_scheme(self, scheme: str) -> None:
        self.qs.setValue("color_scheme", scheme)

    def queue_shown(self) -> bool:
        """Whether View > Work queue shows the queue (hidden for more room on a small screen)."""
        return str(self.qs.value("view/queue_shown", "true")).lower() != "false"

    def set_queue_shown(self, shown: bool) -> None:
        self.qs.setValue("view/queue_shown", "true" if shown else "false")

    def sync(self) -> None:
        self.qs.sync()


def clamp_point_size(size: float) -> float:
    return max(MIN_POINT_SIZE, min(MAX_POINT_SIZE, size))
