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
    import portalreview

    env = dict(  # the tour imports the portalreview these tests import (a worktree's)
        os.environ,
        QT_QPA_PLATFORM=f"offscreen:configfile={config}",
        PYTHONPATH=str(Path(portalreview.__file__).resolve().parents[1]),
    )
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
    assert set(report["clinician_shortcuts"]) == KINDS
    for kind, seen in report["clinician_shortcuts"].items():
        assert seen["fits"] and seen["ok"], (kind, seen)


# --- laptop screens: 1366 x 768, 1280 x 720 (1920 x 1080 at 150%), 911 x 512 (1366 x 768 at 150%)

LAPTOPS = [(1366, 768), (1280, 720), (911, 512)]
_LAPTOP_REPORTS: dict[tuple[int, int], dict] = {}
LONG_MESSAGE = " ".join(
    f"Day {day}: the pain in my lower back got worse after I lifted groceries, and I took two "
    "ibuprofen which helped a little."
    for day in range(1, 45)
)[:5200]


def long_study(path: Path) -> Path:
    """A fact check whose patient's message is 5,000 characters long, in a set with a
    300-character name, for the clinician "ava"."""
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    with Project.create(path, name="Long texts") as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava", "Ava Moreno")
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        case = svc.add_case("case-long", LONG_MESSAGE, {}, age_band="45-64", gender="male")
        original = svc.add_response(
            case, "o1", "Go to the ER now.", author_kind="clinician", author="ava"
        )
        edited = svc.add_response(
            case,
            "e1",
            "I am so sorry to hear that. " * 20,
            author_kind="model",
            author="m",
            production="edited_empathy",
        )
        name = (
            "Theme-guided responses for the cardiology and nephrology cohort of the spring "
            "wave, with follow-ups "
        ) * 4
        unit_set = svc.create_unit_set(name[:300], "facts")
        svc.assign(svc.add_unit(unit_set, case, response_id=original, response_b_id=edited), ava)
    return path


def laptop_report(demo: Path, folder: Path, width: int, height: int) -> dict:
    """What tests/ui/laptop_screen_tour.py saw on a screen of ``width`` x ``height`` (at 100%),
    run once per screen for the tests below. The tour imports portalreview from the checkout
    these tests import it from (a worktree's, not an installed copy's)."""
    if (width, height) not in _LAPTOP_REPORTS:
        config = folder / "screen.json"
        config.write_text(
            json.dumps(
                {
                    "screens": [
                        {
                            "name": "Laptop",
                            "x": 0,
                            "y": 0,
                            "width": width,
                            "height": height,
                            "logicalDpiX": 96,
                            "logicalDpiY": 96,
                            "dpr": 1.0,
                        }
                    ]
                }
            )
        )
        out = folder / "laptop.json"
        import portalreview

        env = dict(
            os.environ,
            QT_QPA_PLATFORM=f"offscreen:configfile={config}",
            PYTHONPATH=str(Path(portalreview.__file__).resolve().parents[1]),
        )
        long = long_study(folder / "long.prproj")
        done = subprocess.run(
            [sys.executable, str(HERE / "laptop_screen_tour.py"), str(demo), str(long), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        _LAPTOP_REPORTS[width, height] = json.loads(out.read_text())
    report = _LAPTOP_REPORTS[width, height]
    assert report["screen"] == [width, height]
    return report


@pytest.mark.parametrize(("width", "height"), LAPTOPS[:2])
def test_eppc_with_a_code_chosen_fits_a_laptop_screen(demo, tmp_path, width, height) -> None:
    """Whichever code is chosen, the EPPC page does not scroll sideways or down: the sentence,
    every subcode, the evidence, the codebook (not squeezed), the "still to do" line and the
    comment box are all in view (the Subcode and Evidence panels side by side needed 1,143 to
    1,221 px of the 1,092 at 1366 x 768)."""
    report = laptop_report(demo, tmp_path, width, height)
    assert len(report["eppc"]) == 9
    for code, seen in report["eppc"].items():
        assert seen["sideways"] == 0 and seen["down"] == 0, (code, seen)
        assert seen["hidden"] == [], (code, seen)
        assert seen["codebook_width"] >= 220, (code, seen)


@pytest.mark.parametrize(("width", "height"), LAPTOPS[:2])
def test_fact_check_fits_a_laptop_screen(demo, tmp_path, width, height) -> None:
    """The fact check's page does not scroll: the no-facts box (which the empty-submit message
    asks for), Fact-Recall, the keyboard help, the comment box and each side's new-fact box,
    Add and fact list are in view, also under a 5,000-character patient message (the fact
    tables took the page's spare height and pushed them below the screen)."""
    report = laptop_report(demo, tmp_path, width, height)
    for study, seen in report["facts"].items():
        assert seen["sideways"] == 0 and seen["down"] == 0, (study, seen)
        assert seen["hidden"] == [], (study, seen)
        assert min(seen["tables"]) >= 60, (study, seen)  # a header and a fact at least


@pytest.mark.parametrize(("width", "height"), LAPTOPS)
def test_dashboard_fits_a_laptop_screen_at_150_percent(demo, tmp_path, width, height) -> None:
    """The agreement dashboard is no wider than the screen, down to 911 px (1366 x 768 at
    150%), and every button, Export JSON… included, is on it (its minimum width was 943)."""
    report = laptop_report(demo, tmp_path, width, height)
    assert report["dashboard"]["minimum_width"] <= width, report["dashboard"]
    assert report["dashboard"]["off_screen"] == [], report["dashboard"]
