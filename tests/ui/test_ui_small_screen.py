"""Small and scaled screens (issue 17): on a 1024 x 600 screen (logical pixels) at 100%, 125%,
150% and 200% scaling, and on a 1920 x 1080 screen at 200% (960 x 540 logical), the main window
with every kind of work, every tool window, the model-server form and the shortcut list fit the
screen, and Submit and Next are on it. Each screen is Qt's offscreen platform configured to
that size and scale, in a process of its own (tests/ui/small_screen_tour.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portalreview.demo import build_demo

HERE = Path(__file__).resolve().parent
SCREENS = [(1024, 600, 1.0), (1024, 600, 1.25), (1024, 600, 1.5), (1024, 600, 2.0),
           (960, 540, 2.0)]
KINDS = {"respond", "rank", "match", "urgency", "eppc", "empathy", "facts"}
TOOLS = {"Inbox view", "Adjudicate disagreements", "Models…", "Agreement dashboard",
         "Generate drafts…", "Study set-up…", "Offline copies…", "Models… > Name a server…",
         "File > Open server study…"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")


def tour(demo: Path, folder: Path, width: int, height: int, scale: float) -> dict:
    config = folder / "screen.json"
    config.write_text(json.dumps({"screens": [{
        "name": "Small", "x": 0, "y": 0, "width": width, "height": height,
        "logicalDpiX": 96, "logicalDpiY": 96, "dpr": scale,
    }]}))
    out = folder / "tour.json"
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}")
    done = subprocess.run([sys.executable, str(HERE / "small_screen_tour.py"), str(demo),
                           str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(("width", "height", "scale"), SCREENS)
def test_everything_fits_a_small_screen_with_submit_and_next_on_it(
    demo, tmp_path, width, height, scale
) -> None:
    report = tour(demo, tmp_path, width, height, scale)
    assert report["screen"] == [width, height] and report["scale"] == scale
    assert set(report["clinician"]) == KINDS
    for kind, seen in report["clinician"].items():
        assert seen["fits"], (kind, seen)
        assert seen["submit"] and seen["next"], (kind, seen)
    assert set(report["tools"]) == TOOLS
    for tool, seen in report["tools"].items():
        assert seen["fits"], (tool, seen)
    assert report["shortcuts"]["fits"], report["shortcuts"]
