"""Tour the app on a small screen, in a process of its own (the screen is fixed when Qt starts).

    QT_QPA_PLATFORM=offscreen:configfile=SCREEN.json python tests/ui/small_screen_tour.py \
        STUDY.prproj OUT.json [SHOTS_FOLDER [SCHEME]]

The screen comes from Qt's offscreen platform configuration (its size in logical pixels and its
scale factor). As a clinician, then as the PI: every kind of work in the main window, sized to
the screen, and (clinician) the keyboard shortcuts in each kind; then (PI) every tool window,
the Models dialog's server form and the keyboard shortcuts. For each it records the window's
minimum size and whether Submit and Next (or OK) are on the screen;
``tests/ui/test_ui_small_screen.py`` judges the JSON. With SHOTS_FOLDER, it saves
screenshots of the EPPC editor, the urgency editor and the dashboard.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QWidget

from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences
from portalreview.ui.tools import TOOLS

PREFIX = ""  # of the screenshots' names (the colour scheme's, when one is given)


def screen_area():
    """The screen's available area (asked each time: Qt may replace the screen object)."""
    return QApplication.primaryScreen().availableGeometry()


def on_screen(widget: QWidget, window: QWidget) -> bool:
    """The widget is shown and lies wholly inside the window and the screen."""
    if widget is None or not widget.isVisible():
        return False
    top_left = widget.mapToGlobal(widget.rect().topLeft())
    bottom_right = widget.mapToGlobal(widget.rect().bottomRight())
    area = screen_area()
    frame = window.frameGeometry()
    return all(r.contains(p) for r in (area, frame) for p in (top_left, bottom_right))


def fits(window: QWidget) -> dict:
    area = screen_area().size()
    minimum = window.minimumSizeHint().expandedTo(window.minimumSize())
    size = window.frameGeometry().size()
    return {
        "minimum": list(minimum.toTuple()),
        "size": list(size.toTuple()),
        "fits": minimum.width() <= area.width() and minimum.height() <= area.height()
        and size.width() <= area.width() and size.height() <= area.height(),
    }


def open_as(path: Path, who: str, folder: Path) -> MainWindow:
    prefs = Preferences(QSettings(str(folder / f"{who}.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs)
    window.show()
    window.open_project(path, annotator=who)
    while window.session is None:
        QTest.qWait(20)
    maximize(window)
    return window


def maximize(window: QWidget) -> None:
    """Make the window's frame fill the screen's available area (as maximizing does)."""
    area = screen_area()
    window.setGeometry(area)
    QTest.qWait(30)
    frame, inner = window.frameGeometry(), window.geometry()
    window.setGeometry(area.adjusted(inner.left() - frame.left(), inner.top() - frame.top(),
                                     inner.right() - frame.right(),
                                     inner.bottom() - frame.bottom()))
    QTest.qWait(30)


def tour_kinds(window: MainWindow, shots: Path | None) -> dict:
    found = {}
    for kind in window.kinds:
        window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
        QTest.qWait(120)
        maximize(window)
        bar = window.findChild(QWidget, "unitBar")
        found[kind] = fits(window) | {
            "submit": on_screen(bar.widgetForAction(window.act_submit), window),
            "next": on_screen(bar.widgetForAction(window.act_next), window),
        }
        if shots is not None and kind in ("eppc", "urgency"):
            window.grab().save(str(shots / f"{PREFIX}small-screen-{kind}.png"))
    return found


def tour_tools(window: MainWindow, shots: Path | None) -> dict:
    found = {}
    for tool in TOOLS:
        before = set(QApplication.topLevelWidgets())
        tool.load()(window)
        QTest.qWait(400)
        for widget in QApplication.topLevelWidgets():
            if widget in before or not widget.isVisible():
                continue
            found[tool.title] = fits(widget)
            if shots is not None and tool.title == "Agreement dashboard":
                computed(widget)
                widget.grab().save(str(shots / f"{PREFIX}small-screen-dashboard.png"))
            if tool.title == "Models…":
                found["Models… > Name a server…"] = server_form(widget)
            widget.close()
            QTest.qWait(50)
    found["File > Open server study…"] = server_study_dialog(window)
    return found


def server_study_dialog(window: MainWindow) -> dict:
    from portalreview.ui.server_dialog import ServerStudyDialog

    dialog = ServerStudyDialog("postgresql://chloe@db.hospital.org/ward5_study", window)
    dialog.show()
    QTest.qWait(50)
    result = fits(dialog)
    dialog.close()
    return result


def computed(dashboard) -> None:
    """Wait until the dashboard has its figures (an event loop, not qWait: the worker thread
    needs the GIL)."""
    from PySide6.QtCore import QEventLoop

    if dashboard.loading:
        loop = QEventLoop()
        dashboard.finished.connect(loop.quit)
        loop.exec()
    QTest.qWait(200)


def server_form(dialog) -> dict:
    from portalreview.ui.model_panel import ServerForm

    form = ServerForm(None, dialog)
    form.show()
    QTest.qWait(50)
    result = fits(form)
    form.close()
    return result


def shortcuts(window: MainWindow) -> dict:
    """The size of the window F1 opens, and whether its OK button is on the screen."""
    result: dict = {}

    def measure() -> None:
        box = QApplication.activeModalWidget()
        ok = box.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
        result.update(fits(box) | {"ok": on_screen(ok, box)})
        box.close()

    QTimer.singleShot(300, measure)
    window.show_shortcuts()
    QTest.qWait(400)  # (a window-modal dialog: show_shortcuts returns before it is measured)
    return result


def clinician_shortcuts(window: MainWindow) -> dict:
    """F1 in each kind of work (the list holds that editor's keys too)."""
    found = {}
    for kind in window.kinds:
        window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
        QTest.qWait(50)
        found[kind] = shortcuts(window)
    return found


def main() -> None:
    path, out = Path(sys.argv[1]), Path(sys.argv[2])
    shots = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    application()
    if len(sys.argv) > 4:
        from portalreview.ui.main_window import apply_color_scheme

        apply_color_scheme(sys.argv[4])
        global PREFIX
        PREFIX = sys.argv[4].replace("_", "-") + "-"
    report = {"screen": list(screen_area().size().toTuple()),
              "scale": QApplication.primaryScreen().devicePixelRatio()}
    clinician = open_as(path, "np_chloe", out.parent)
    report["clinician"] = tour_kinds(clinician, shots)
    report["clinician_shortcuts"] = clinician_shortcuts(clinician)
    clinician.close()
    pi = open_as(path, "dr_pi", out.parent)
    report["pi"] = tour_kinds(pi, None)
    report["tools"] = tour_tools(pi, shots)
    report["shortcuts"] = shortcuts(pi)
    pi.close()
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
