"""How long a whole-study export takes on a large study, and how much memory it needs:
``portalreview export PATH --format jsonl|csv|xlsx|preferences`` on bench_report's synthetic
study of 10,000 cases (4 clinicians answer a unit of every kind for every case: 294,800
answers).

Each export runs in a process of its own (its peak memory is its own), timed from the
project opened to the files written. The same exports of a study a tenth the size are timed
in the same run as a reference: the ratio shows how the time grows with the study, free of how
busy this machine is (10 is linear). ``--before REV`` also times the exports of the program
as it was at git revision ``REV`` (taken with ``git archive``), alternating with today's, and
prints today's time and memory as a ratio of that revision's; the files of both are compared
(byte for byte; a workbook's, every part but ``docProps/core.xml``, which holds the time it
was written).

Usage::

    .venv/bin/python benchmarks/bench_export.py --keep /tmp/bench
    .venv/bin/python benchmarks/bench_export.py --keep /tmp/bench --before 5a94e45 --formats jsonl

``--keep FOLDER`` keeps the studies there and reuses them (bench_report.py's ``--keep``
folder holds them too; the studies are only read). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import kept_study

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("jsonl", "csv", "xlsx", "preferences")
# The child: open the study read-only, export it, print the seconds and the peak memory (the
# process's own high-water mark, VmHWM: ru_maxrss keeps the benchmark's, inherited across fork
# and exec).
CHILD = r"""
import json, re, resource, sys, time
from pathlib import Path
from portalreview.store.project import Project
study, fmt, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with Project.open(study, read_only=True) as project:
    started = time.perf_counter()
    if fmt == "preferences":
        from portalreview.store.exports import export_external
        export_external(project, fmt, out)
    else:
        from portalreview.store.exporters import export_project
        export_project(project, fmt, out)
    seconds = time.perf_counter() - started
try:
    status = Path("/proc/self/status").read_text()
    peak = int(re.search(r"VmHWM:\s*(\d+) kB", status).group(1)) / 1024
except (OSError, AttributeError):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak}))
"""


def export_once(code: Path, study: Path, fmt: str, out: Path) -> dict[str, float]:
    """Seconds and peak MB of one export by the program in ``code``, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(study), fmt, str(out)],
        env=env,
        cwd=out.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def program_at(revision: str, folder: Path) -> Path:
    """The package as it was at git ``revision``, unpacked under ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "portalreview"],
        capture_output=True,
        check=True,
    ).stdout
    folder.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def output_parts(out: Path) -> dict[str, str]:
    """What an export wrote: each file's SHA-256 (a workbook's parts but the time it was
    written)."""
    if out.is_file():
        with zipfile.ZipFile(out) as book:
            names = [n for n in book.namelist() if n != "docProps/core.xml"]
            return {n: _digest(book.open(n)) for n in names}
    return {p.name: _digest(p.open("rb")) for p in sorted(out.iterdir())}


def _digest(stream: BinaryIO) -> str:
    with stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _target(folder: Path, fmt: str) -> Path:
    return folder / ("export.xlsx" if fmt == "xlsx" else "export")


def measure(study: Path, fmt: str, work: Path, before: Path | None, rounds: int) -> dict:
    """The best of ``rounds`` exports by today's program (and by ``before``'s, alternating)."""
    found: dict[str, list[dict[str, float]]] = {"now": [], "before": []}
    same = None
    for round_ in range(rounds):
        programs = {"before": before, "now": ROOT} if before else {"now": ROOT}
        outs = {}
        for name, code in programs.items():
            folder = work / f"{study.stem}-{fmt}-{name}-{round_}"
            folder.mkdir()
            outs[name] = _target(folder, fmt)
            found[name].append(export_once(code, study, fmt, outs[name]))
        if before and same is None:
            same = output_parts(outs["before"]) == output_parts(outs["now"])
        for out in outs.values():
            shutil.rmtree(out.parent)  # an export of 10,000 cases is hundreds of MB
    best = {name: min(runs, key=lambda r: r["seconds"]) for name, runs in found.items() if runs}
    return {**best, "same": same}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--before", metavar="REV", help="also time the program at this revision")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="folder to keep the studies in")
    args = parser.parse_args(argv)
    sizes = (args.cases // 10, args.cases)
    studies = {n: kept_study(args.keep, n) for n in sizes}
    with tempfile.TemporaryDirectory(prefix="portalreview-bench-export-") as folder:
        work = Path(folder)
        before = program_at(args.before, work / "before") if args.before else None
        for fmt in args.formats:
            results = {n: measure(studies[n], fmt, work, before, args.rounds) for n in sizes}
            _print(fmt, sizes, results, args.before)


def _print(fmt: str, sizes: tuple[int, int], results: dict[int, dict], revision: str | None):
    small, large = sizes
    growth = results[large]["now"]["seconds"] / results[small]["now"]["seconds"]
    print(f"{fmt}: {large:,} cases / {small:,} cases = {growth:.1f}x the time")
    for n in sizes:
        now = results[n]["now"]
        line = f"  {n:>6,} cases: {now['seconds']:7.1f} s, {now['peak_mb']:6.0f} MB peak"
        if revision:
            then = results[n]["before"]
            line += (
                f"; at {revision}: {then['seconds']:7.1f} s, {then['peak_mb']:6.0f} MB "
                f"-> {then['seconds'] / now['seconds']:.1f}x faster, "
                f"{now['peak_mb'] / then['peak_mb']:.2f}x the memory; "
                f"same files: {'yes' if results[n]['same'] else 'NO'}"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
