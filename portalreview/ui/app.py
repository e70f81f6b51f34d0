"""Starting the desktop app: ``portalreview`` (no verb) or ``portalreview PATH``."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from portalreview.applog import setup_logging
from portalreview.ui.main_window import APP_NAME, MainWindow, apply_color_scheme
from portalreview.ui.settings import APPLICATION, ORGANIZATION, Preferences
from portalreview.ui.termination import closing_on_termination


def application(argv: list[str] | None = None) -> QApplication:
    """The QApplication, created once with our names (QSettings uses them)."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APP_NAME)
    return app


def run_app(
    path: Path | None = None, annotator: str | None = None, server_address: str | None = None
) -> int:
    """Show the main window (opening ``path`` if given, or the server study at
    ``server_address``, its password asked in File > Open server study…'s dialog) and run
    until it closes, or until the system ends the program (SIGTERM, SIGHUP: ``termination``),
    which closes it as a person would, asking nothing."""
    setup_logging("gui")
    app = application()
    prefs = Preferences()
    apply_color_scheme(prefs.color_scheme())
    window = MainWindow(prefs)
    window.show()
    if path is not None:
        QTimer.singleShot(0, lambda: window.open_project(Path(path), annotator=annotator))
    elif server_address is not None:
        QTimer.singleShot(0, lambda: window.choose_server_study(server_address))
    with closing_on_termination(window):  # a logout or shutdown saves what is open
        return app.exec()
