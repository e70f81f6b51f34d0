"""How fast the desktop app feels on a big project: opening it to a usable window, moving to the
next unit, and saving an answer, on a study of 10,000 cases (the aims of issue 5: next unit and
save well under 50 ms, opening under 2 s).

The study is bench_report's synthetic one (4 clinicians answer a unit of every kind for every
case), so every queue holds 10,000 answered units. The same steps are timed in the same run on
a 100-case study, as a reference: the ratio shows what the project's size costs, free of how
busy this machine is. A bare SQLite INSERT + COMMIT with the project's pragmas (WAL,
synchronous=FULL) is timed too: the floor under any save.

Usage::

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_ui.py
    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_ui.py --cases 2000 --keep /tmp/b
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import build_synthetic_study
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences

WHO = "ann_0"


def summary(seconds: list[float]) -> tuple[float, float]:
    """Median and 95th percentile, in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return statistics.median(ms), p95


def wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    app = QApplication.instance()
    end = time.perf_counter() + timeout
    while not condition():
        app.processEvents()
        if time.perf_counter() > end:
            raise TimeoutError("the window did not become usable")


def time_opening(path: Path, prefs: Preferences, runs: int) -> list[float]:
    """From asking to open the project to the first unit shown in its editor."""
    times = []
    for _ in range(runs):
        window = MainWindow(prefs)
        window.show()
        started = time.perf_counter()
        window.open_project(path, annotator=WHO)
        wait(lambda w=window: w.session is not None and w.session.unit is not None)
        QApplication.instance().processEvents()
        times.append(time.perf_counter() - started)
        window.close()
        window.deleteLater()
    return times


def time_steps(path: Path, prefs: Preferences, steps: int) -> tuple[list[float], list[float]]:
    """Next unit (save what is pending, read the unit, show it) and save (one typed character
    in a theme box, saved in its own transaction)."""
    window = MainWindow(prefs)
    window.show()
    window.open_project(path, annotator=WHO)
    wait(lambda: window.session is not None and window.session.unit is not None)
    app = QApplication.instance()
    nexts, saves = [], []
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    for i in range(steps):
        started = time.perf_counter()
        window.step(1)
        app.processEvents()
        nexts.append(time.perf_counter() - started)
        box.insertPlainText("x")  # a change, as typing makes it
        started = time.perf_counter()
        window.session.save()
        saves.append(time.perf_counter() - started)
        if i % 50 == 49:
            app.processEvents()
    window.close()
    return nexts, saves


def time_bare_commit(folder: Path, runs: int) -> list[float]:
    path = folder / "bare.sqlite"
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT)")
    times = []
    for i in range(runs):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (text) VALUES (?)", (f"row {i}",))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - started)
    conn.close()
    return times


def measure(path: Path, folder: Path, opens: int, steps: int) -> dict[str, tuple[float, float]]:
    prefs = Preferences(QSettings(str(folder / f"{path.stem}.ini"), QSettings.Format.IniFormat))
    opening = time_opening(path, prefs, opens)
    nexts, saves = time_steps(path, prefs, steps)
    return {"open": summary(opening), "next": summary(nexts), "save": summary(saves)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--reference-cases", type=int, default=100)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="build the studies here and keep them")
    args = parser.parse_args(argv)
    application()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_ui_"))
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for n in (args.reference_cases, args.cases):
        path = folder / f"ui-{n}.prproj"
        if not path.exists():
            started = time.perf_counter()
            build_synthetic_study(path, n)
            print(f"built {n} cases in {time.perf_counter() - started:.1f} s", flush=True)
        results[n] = measure(path, folder, args.opens, args.steps)
    bare = summary(time_bare_commit(folder, args.steps))
    print(f"\n{'':<38}{'median ms':>10}{'p95 ms':>10}   ratio of medians to {args.reference_cases}")
    for what, label in (
        ("open", "open to usable window"),
        ("next", "next unit"),
        ("save", "save an answer"),
    ):
        for n, result in results.items():
            median, p95 = result[what]
            ratio = median / results[args.reference_cases][what][0]
            print(f"{label + f' ({n} cases)':<38}{median:>10.1f}{p95:>10.1f}   {ratio:.2f}x")
    print(f"{'bare SQLite insert+commit':<38}{bare[0]:>10.1f}{bare[1]:>10.1f}")
    big = results[args.cases]
    print(
        f"\nsave / bare commit (medians): {big['save'][0] / bare[0]:.1f}x;  aims: next and save "
        f"< 50 ms, open < 2000 ms"
    )


if __name__ == "__main__":
    main()
