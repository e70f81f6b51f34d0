"""Would a second process bring the cold report down? The analyses computed in one process,
against the same analyses split over two (issue 18's "use both cores").

Python's lock lets one thread run Python at a time, so two threads compute the report no
faster than one (docs/report.md, "Speed"). Two processes are not bound by it. This script
reads the study once, then computes every analysis cold (the process's caches and the
frames' memo emptied before each run):

* **one process**: ``analyse_all`` on the frames, as ``build_report`` does;
* **two processes**: a child forked after reading (it shares the frames copy-on-write, so
  nothing is copied to it up front) computes respond and match - about half of the work, and
  the two share their per-answer tables - while this process computes the rest; the child
  sends its results back pickled.

Each is repeated; the two-process results are compared with the one-process ones as JSON
(printed "equal" or "DIFFERENT"). Printed: each run's seconds, each side's share, and the
ratio two / one of the medians.

Usage::

    .venv/bin/python benchmarks/bench_report_processes.py
    .venv/bin/python benchmarks/bench_report_processes.py --study /tmp/bench/synthetic-10000.prproj

The study is the one ``bench_report.py --keep /tmp/bench`` keeps (opened read-only). Linux
only (fork). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import statistics
import time
from pathlib import Path
from typing import Any

from portalreview import analysis
from portalreview.reports.json_report import read_project_catalogs
from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.project import Project

DEFAULT_STUDY = Path("/tmp/bench/synthetic-10000.prproj")
CHILD_KINDS = ("respond", "match")


def cold(frames: StudyFrames) -> None:
    """Forget what an earlier run computed: the process-wide caches and the frames' memo."""
    analysis.clear_caches()
    frames.memo.clear()


def in_one_process(frames: StudyFrames, **settings: Any) -> tuple[float, dict]:
    """Seconds to compute every analysis here, and the results."""
    cold(frames)
    started = time.perf_counter()
    results = analysis.analyse_all(frames, **settings)
    return time.perf_counter() - started, results


def in_two_processes(frames: StudyFrames, **settings: Any) -> tuple[float, dict, dict]:
    """Seconds to compute every analysis with ``CHILD_KINDS`` in a forked child, the results,
    and each side's own seconds."""
    cold(frames)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)

    def child() -> None:
        started = time.perf_counter()
        results = analysis.analyse_all(frames, kinds=CHILD_KINDS, **settings)
        seconds = time.perf_counter() - started
        sender.send_bytes(pickle.dumps((seconds, results), protocol=pickle.HIGHEST_PROTOCOL))

    started = time.perf_counter()
    process = context.Process(target=child)
    process.start()
    rest = [kind for kind in analysis.KINDS if kind not in CHILD_KINDS]
    results = analysis.analyse_all(frames, kinds=rest, **settings)
    own = time.perf_counter() - started
    child_seconds, child_results = pickle.loads(receiver.recv_bytes())
    process.join()
    results.update(child_results)
    ordered = {kind: results[kind] for kind in analysis.KINDS}
    sides = {"this process": own, "child": child_seconds}
    return time.perf_counter() - started, ordered, sides


def as_json(results: dict) -> str:
    return json.dumps(results, sort_keys=True, default=str)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=DEFAULT_STUDY)
    parser.add_argument("--n-resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    project = Project.open(args.study, read_only=True)
    settings = {"n_resamples": args.n_resamples, "catalogs": read_project_catalogs(project)}
    started = time.perf_counter()
    frames = read_frames(project)
    print(f"{args.study.name}: read in {time.perf_counter() - started:.2f} s")
    in_one_process(frames, **settings)  # the lazy imports, paid once, timed by neither

    one, two = [], []
    for _ in range(args.repeats):
        seconds, reference = in_one_process(frames, **settings)
        one.append(seconds)
        seconds, results, sides = in_two_processes(frames, **settings)
        two.append(seconds)
        shares = ", ".join(f"{name} {value:.2f} s" for name, value in sides.items())
        same = "equal" if as_json(results) == as_json(reference) else "DIFFERENT"
        print(f"one process {one[-1]:.2f} s | two processes {two[-1]:.2f} s ({shares}) {same}")
    ratio = statistics.median(two) / statistics.median(one)
    print(f"medians: one {statistics.median(one):.2f} s, two {statistics.median(two):.2f} s")
    print(f"two / one = {ratio:.2f}")
    project.close()


if __name__ == "__main__":
    main()
