"""What merging each save into the project file costs (``Project.merge_each_save``).

Since a file renamed or moved while open must hold every save made before (store/file_place.py),
each save is followed by a passive WAL checkpoint. This times one clinician's saves on two
copies of the same small study, one with the merge (as the program runs) and one without (the
reference), alternating save by save so that whatever else the machine is doing weighs on both
alike, and prints each one's median and 95th percentile and their ratio. A benchmark, not a
test: the figures depend on the disk.

    .venv/bin/python benchmarks/bench_save.py [--saves 400] [--folder DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from portalreview.load_testing import build_load_study
from portalreview.store.project import Project
from portalreview.store.service import StudyService


def _study(path: Path) -> int:
    """The load study with one clinician; its respond unit."""
    with Project.create(path, name="bench") as project:
        return build_load_study(project, clinicians=1)["respond"]


def _save(service: StudyService, unit: int, i: int) -> float:
    payload = {"mode": "theme_guided", "parts": {"empathy": f"Reply {i}: please come in."}}
    started = time.perf_counter()
    service.save_answer(unit, payload)
    return (time.perf_counter() - started) * 1000


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--folder", help="where the two studies go (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        paths = {"merged": Path(folder, "merged.prproj"), "reference": Path(folder, "ref.prproj")}
        units = {name: _study(path) for name, path in paths.items()}
        projects = {name: Project.open(p, automatic_backup=False) for name, p in paths.items()}
        projects["reference"].merge_each_save = False
        services = {name: StudyService(p).as_viewer("c00") for name, p in projects.items()}
        times: dict[str, list[float]] = {name: [] for name in paths}
        try:
            for i in range(args.saves):
                for name in paths:
                    times[name].append(_save(services[name], units[name], i))
        finally:
            for project in projects.values():
                project.close()
    p50 = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:>9}: {len(t)} saves, p50 {p50[name]:.2f} ms, p95 {_quantile(t, 0.95):.2f} ms")
    print(f"merged / reference, p50: {p50['merged'] / p50['reference']:.2f}x")


if __name__ == "__main__":
    main()
