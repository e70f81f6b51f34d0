"""Laptop screens, in a process of its own (the screen is fixed when Qt starts):

    QT_QPA_PLATFORM=offscreen:configfile=SCREEN.json python tests/ui/laptop_screen_tour.py \
        DEMO.prproj LONG.prproj OUT.json [SHOTS_FOLDER]

On a 1366 x 768 screen, and on 1280 x 720 (a 1920 x 1080 laptop at 150%), the main window
maximized: the EPPC editor with each code chosen in turn, and the fact check (the demo's, and
one with a 5,000-character patient message): how far its page scrolls each way, and which of
the controls a clinician needs are wholly in view. As the PI: the agreement dashboard's minimum
width and the buttons off the screen (a 1366 x 768 screen at 150% leaves 911 x 512).
``tests/ui/test_ui_small_screen.py`` judges the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QPushButton, QWidget
from small_screen_tour import computed, open_as, screen_area  # (this script's folder)

from portalreview.ui.app import application
from portalreview.ui.tools import TOOLS


def in_view(window, widget: QWidget) -> bool:
    """The widget is shown and wholly inside the page's view (not scrolled away)."""
    page = window._page_of(window.session.editor)
    view = page.viewport()
    if not widget.isVisible():
        return False
    corners = (widget.rect().topLeft(), widget.rect().bottomRight())
    return all(view.rect().contains(widget.mapTo(view, corner)) for corner in corners)


def scrolled(window) -> dict:
    page = window._page_of(window.session.editor)
    return {
        "sideways": page.horizontalScrollBar().maximum(),
        "down": page.verticalScrollBar().maximum(),
    }


def eppc(window, shots: Path | None) -> dict:
    window.kind_tabs.setCurrentIndex(window.kinds.index("eppc"))
    QTest.qWait(200)
    editor = window.session.editor
    found = {}
    for number in range(1, len(editor.codes) + 1):
        key = getattr(Qt.Key, f"Key_{number}")
        QTest.keyClick(editor.codes_list, key)  # chosen, the current code
        QTest.qWait(150)
        parts = {
            "sentence": editor.sentence_view,
            "codes": editor.codes_list,
            "codebook": editor.codebook,
            "evidence": editor.evidence_list,
            "add evidence": editor.add_button,
            "summary": editor.summary_label,
            "comment": editor.comment,
        }
        parts |= {f"subcode {i}": b for i, b in enumerate(editor.subcode_buttons.values(), 1)}
        found[number] = scrolled(window) | {
            "hidden": sorted(name for name, w in parts.items() if not in_view(window, w)),
            "codebook_width": editor.codebook.width(),
        }
        if shots is not None and number == 1:
            window.grab().save(str(shots / "laptop-eppc.png"))
        QTest.keyClick(editor.codes_list, key)  # removed again
        QTest.qWait(50)
    return found


def facts(window, shots: Path | None, name: str) -> dict:
    window.kind_tabs.setCurrentIndex(window.kinds.index("facts"))
    QTest.qWait(300)
    editor = window.session.editor
    parts = {
        "no facts box": editor.no_facts_box,
        "scores": editor.scores,
        "keyboard help": editor.findChild(QWidget, "keyHelp"),
        "comment": editor.comment,
    }
    for side in editor.sides.values():
        parts[f"{side.side} new fact"] = side.entry
        parts[f"{side.side} add"] = next(
            b for b in side.findChildren(QPushButton) if b.text() == "Add"
        )
        parts[f"{side.side} facts"] = side.table
    if shots is not None:
        window.grab().save(str(shots / f"laptop-facts-{name}.png"))
    return scrolled(window) | {
        "hidden": sorted(name for name, w in parts.items() if not in_view(window, w)),
        "tables": [side.table.height() for side in editor.sides.values()],
    }


def dashboard(window, shots: Path | None) -> dict:
    tool = next(t for t in TOOLS if t.title == "Agreement dashboard")
    before = set(QApplication.topLevelWidgets())
    tool.load()(window)
    QTest.qWait(300)
    board = next(w for w in QApplication.topLevelWidgets() if w not in before and w.isVisible())
    computed(board)
    area = screen_area()
    off = [
        b.text()
        for b in board.findChildren(QPushButton)
        if b.isVisible()
        and not all(
            area.contains(b.mapToGlobal(p)) for p in (b.rect().topLeft(), b.rect().bottomRight())
        )
    ]
    if shots is not None:
        board.grab().save(str(shots / "laptop-dashboard.png"))
    result = {
        "minimum_width": board.minimumSizeHint().expandedTo(board.minimumSize()).width(),
        "width": board.frameGeometry().width(),
        "off_screen": off,
    }
    board.close()
    return result


def main() -> None:
    demo, long, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    shots = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    application()
    report = {"screen": list(screen_area().size().toTuple())}
    clinician = open_as(demo, "np_chloe", out.parent)
    report["eppc"] = eppc(clinician, shots)
    report["facts"] = {"demo": facts(clinician, shots, "demo")}
    clinician.close()
    reader = open_as(long, "ava", out.parent)
    report["facts"]["long message"] = facts(reader, shots, "long")
    reader.close()
    pi = open_as(demo, "dr_pi", out.parent)
    report["dashboard"] = dashboard(pi, shots)
    pi.close()
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
