"""Windows the main window opens from its Tools menu (inbox view, adjudication, dashboard...).

Each entry names a function ``open_tool(window: MainWindow) -> None`` by its import path, so the
main window does not import (or depend on) every tool. A new tool = its module + one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtWidgets import QMessageBox, QWidget


@dataclass(frozen=True)
class Tool:
    title: str
    target: str  # "package.module:function", called with the main window
    shortcut: str = ""
    roles: tuple[str, ...] = ("clinician", "pi")  # who sees it in the menu

    def load(self) -> Callable:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


def only_for_the_pi(window, title: str) -> bool:
    """True if the signed-in person is the PI; otherwise say so. The menu hides PI tools
    from others; this guards a tool opened another way (a shortcut, a test, a script)."""
    service = getattr(window, "service", None)
    if service is not None and service.viewer.role == "pi":
        return True
    QMessageBox.information(window, title, f"Only the principal investigator can use {title}.")
    return False


def tell_study_written(window) -> None:
    """Tell the main window (``study_written``) that a tool window wrote to its study."""
    signal = getattr(window, "study_written", None)
    if signal is not None:
        signal.emit()


def bring_forward(widget: QWidget) -> None:
    """Show a tool window, in front and focused."""
    widget.show()
    widget.raise_()
    widget.activateWindow()


TOOLS: list[Tool] = [
    Tool("Inbox view", "portalreview.ui.inbox_view:open_tool", "Ctrl+I"),
    Tool(
        "Adjudicate disagreements",
        "portalreview.ui.adjudication:open_tool",
        "Ctrl+J",
        roles=("pi",),
    ),
    Tool("Models…", "portalreview.ui.model_panel:open_tool"),
    Tool("Agreement dashboard", "portalreview.ui.dashboard:open_tool", "Ctrl+D", roles=("pi",)),
    Tool("Generate drafts…", "portalreview.ui.drafts_dialog:open_tool", roles=("pi",)),
    Tool("Study set-up…", "portalreview.ui.study_setup_dialog:open_tool", roles=("pi",)),
    Tool("Offline copies…", "portalreview.ui.copies_dialog:open_tool", roles=("pi",)),
]
