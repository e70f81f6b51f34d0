"""First steps for a newcomer, from the welcome page and the Help menu: the demo study (built
the first time in the person's Documents folder, then opened) and the user guide."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QMessageBox

from portalreview.ui.workers import run_with_progress

if TYPE_CHECKING:
    from portalreview.ui.main_window import MainWindow

DEMO_FOLDER = "PortalReview"  # in the person's Documents folder


def demo_study_path() -> Path:
    """Where the app builds and finds the demo study: a folder of its own in Documents (the
    home folder where there is none), where the person can find the file again. (``portalreview
    demo`` builds it in the current folder instead.)"""
    from portalreview.demo import FILE_NAME

    location = QStandardPaths.StandardLocation.DocumentsLocation
    documents = QStandardPaths.writableLocation(location) or str(Path.home())
    return Path(documents) / DEMO_FOLDER / FILE_NAME


def open_demo_study(window: MainWindow, finished: Callable[[], None] = lambda: None) -> None:
    """Open the demo study, building it first (in the background, with a progress dialog if it
    takes more than a moment) when it is not there yet; ``finished`` is called when the build
    is over (or at once when there was none to do)."""
    path = demo_study_path()
    damaged = _why_not_a_project(path) if path.exists() else None
    if damaged is not None and not _set_aside_to_build_again(window, path, damaged):
        finished()
        return
    if path.exists():
        finished()
        window.open_project(path)
        return

    def built(made: Path) -> None:
        finished()
        window.open_project(made)

    def failed(message: str, exc: Exception) -> None:
        finished()
        if isinstance(exc, OSError) and exc.strerror:  # not "[Errno 17] File exists: …"
            message = f"{exc.filename or path.parent}: {exc.strerror}"
        QMessageBox.critical(
            window, "PortalReview", f"Could not build the demo study in {path.parent}:\n{message}"
        )

    run_with_progress(
        window,
        f"Building the demo study in {path.parent} (a few seconds)…",
        build_demo_study,
        path,
        on_done=built,
        on_error=failed,
        cancellable=False,
    )


def _why_not_a_project(path: Path) -> str | None:
    """Why the file at ``path`` is no project at all (empty, or not an SQLite file), else
    None: what a file cut short or overwritten there would give every time it is opened."""
    from portalreview.store.project import ProjectError, read_header

    try:
        read_header(path)
    except ProjectError as exc:
        return str(exc)
    return None


def _set_aside_to_build_again(window: MainWindow, path: Path, why: str) -> bool:
    """Ask whether to build the demo again, the file at ``path`` kept beside it under
    another name; True once it is set aside."""
    kept = path.with_name(f"{path.stem}-damaged-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
    answer = QMessageBox.question(
        window,
        "PortalReview",
        f"The demo study {path} cannot be opened: {why}\n\nBuild it again? The file there now "
        f"is kept as {kept.name}.",
    )
    if answer != QMessageBox.StandardButton.Yes:
        return False
    try:
        path.rename(kept)
    except OSError as exc:
        QMessageBox.critical(
            window, "PortalReview", f"{path} could not be set aside: {exc.strerror}"
        )
        return False
    return True


def build_demo_study(path: Path) -> Path:
    """Worker thread: the demo study built at ``path``, its folder made, and the leftovers of
    a build killed there before removed."""
    from portalreview.demo import build_demo, remove_abandoned_builds

    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_builds(path.parent)
    return build_demo(path)


def open_user_guide(window: MainWindow) -> None:
    """Help > User guide: README.md and docs/, shipped with the program, in a window of their
    own; where they were not installed, say where to read them."""
    from portalreview.resources import user_guide
    from portalreview.ui.user_guide import UserGuideWindow

    readme = user_guide()
    if readme is None:
        QMessageBox.information(
            window,
            "PortalReview",
            "The user guide is not installed with this copy of PortalReview: read README.md "
            "and the docs folder of PortalReview's source.",
        )
        return
    guide = window.findChild(UserGuideWindow)
    if guide is None:
        guide = UserGuideWindow(readme, window)
    guide.show()
    guide.raise_()
    guide.activateWindow()
