"""The screen the screenshots are taken on: Qt's offscreen platform with a 1920 x 1080 screen.

Qt's offscreen screen is 800 x 600 unless told otherwise, and a tool window opens no larger
than the screen (``tasks/common/screen.fit_to_screen``), so on it the README's pictures of
tool windows came out squeezed to 784 pixels. Import this before PySide6.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

WIDTH, HEIGHT = 1920, 1080


def use_desktop_screen() -> None:
    """Take the pictures offscreen on a desktop-sized screen, unless a display or a screen of
    one's own is set (``QT_QPA_PLATFORM`` other than plain ``offscreen``)."""
    if os.environ.get("QT_QPA_PLATFORM", "offscreen") != "offscreen":
        return
    screen = {
        "name": "Desktop",
        "x": 0,
        "y": 0,
        "width": WIDTH,
        "height": HEIGHT,
        "logicalDpiX": 96,
        "logicalDpiY": 96,
        "dpr": 1,
    }
    config = Path(tempfile.mkdtemp(prefix="screen_")) / "screen.json"
    config.write_text(json.dumps({"screens": [screen]}))
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={config}"


use_desktop_screen()
