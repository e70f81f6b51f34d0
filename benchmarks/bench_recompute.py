"""How long each analysis takes to recompute after one answer changed, with warm caches, as
the dashboard's live report recomputes it, against a cold run in the same process.

Reads a study once (by default the 10,000-case study ``bench_report.py --keep /tmp/bench``
keeps; opened read-only, never written), then for each number of resamples and each analysis
kind:

* **cold**: every analysis cache emptied (``analysis._memo.clear_caches``) and fresh frames
  (an empty memo): what the first refresh of a new process pays;
* **warm**: the same analysis again on frames from which one answer of that kind was taken
  out (each repeat another answer; fresh frames, so nothing of the cold run's memo is
  reused): what a refresh pays after an answer landed. The minimum and the median of the
  repeats are printed, with their ratio to the cold run;
* **respond + match**: a match answer taken out changes both (``analysis.DEPENDS_ON``); the
  two analyses run on the same frames, as a refresh runs them.

Timings run with the cyclic garbage collector paused, as ``analyse_all`` and the live report
run the analyses. Then, with caches emptied again and every analysis run once, the memory each
cache holds (``tracemalloc``: what clearing that cache gives back).

Usage::

    .venv/bin/python benchmarks/bench_recompute.py
    .venv/bin/python benchmarks/bench_recompute.py --study /tmp/bench/synthetic-10000.prproj \\
        --n-resamples 1000 200 --repeats 5

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import time
import tracemalloc
from pathlib import Path

from portalreview import analysis
from portalreview.analysis import DEPENDS_ON, KINDS, _memo
from portalreview.analysis.filters import DETAIL_TABLES
from portalreview.store.frames import StudyFrames, paused_gc, read_frames
from portalreview.store.project import Project

DEFAULT_STUDY = Path("/tmp/bench/synthetic-10000.prproj")


def without_answer(frames: StudyFrames, answer_id: int) -> StudyFrames:
    """New frames without one answer (and its detail rows): a refresh's frames after the
    answer was taken back. Its memo is empty."""
    details = {
        name: getattr(frames, name)[getattr(frames, name).answer_id != answer_id].reset_index(
            drop=True
        )
        for name in DETAIL_TABLES
    }
    answers = frames.answers[frames.answers.answer_id != answer_id].reset_index(drop=True)
    return dataclasses.replace(frames, answers=answers, **details)


def answer_of(frames: StudyFrames, kind: str, repeat: int) -> int:
    """A different ordinary answer of ``kind`` for each repeat."""
    answers = frames.answers
    ids = answers.answer_id[(answers.kind == kind) & ~answers.is_gold.astype(bool)]
    return int(ids.iloc[(len(ids) // 3 + 101 * repeat) % len(ids)])


def timed(
    kinds: tuple[str, ...], frames: StudyFrames, n_resamples: int, seed: int
) -> tuple[float, float]:
    """Seconds (wall clock, and CPU time of the process: steadier on a shared machine) to run
    the analyses of ``kinds`` on ``frames``, one after the other."""
    analyses = analysis.ANALYSES
    started, cpu = time.perf_counter(), time.process_time()
    with paused_gc():
        for kind in kinds:
            analyses[kind](frames, seed=seed, n_resamples=n_resamples)
    return time.perf_counter() - started, time.process_time() - cpu


def measure(frames: StudyFrames, n_resamples: int, repeats: int, seed: int = 0) -> list[dict]:
    """Cold and warm seconds per kind (and for respond + match after a match answer)."""
    rows = []
    cases = [(kind, (kind,)) for kind in KINDS] + [("respond+match", ("respond", "match"))]
    for label, kinds in cases:
        changed = "match" if len(kinds) > 1 else kinds[0]
        assert all(changed in DEPENDS_ON[k] for k in kinds)
        _memo.clear_caches()
        cold, cold_cpu = timed(kinds, dataclasses.replace(frames), n_resamples, seed)
        warm = [
            timed(kinds, without_answer(frames, answer_of(frames, changed, r)), n_resamples, seed)
            for r in range(repeats)
        ]
        rows.append(
            {
                "kind": label,
                "cold": cold,
                "warm_min": min(w for w, _ in warm),
                "warm_median": statistics.median(w for w, _ in warm),
                "cold_cpu": cold_cpu,
                "warm_cpu_median": statistics.median(c for _, c in warm),
            }
        )
        print(_row(rows[-1]), flush=True)
    return rows


def _row(row: dict) -> str:
    return (
        f"  {row['kind']:<14} cold {row['cold']:5.2f} s   warm min {row['warm_min']:5.2f} s"
        f" (x{row['warm_min'] / row['cold']:.2f}) median {row['warm_median']:5.2f} s"
        f" (x{row['warm_median'] / row['cold']:.2f})   CPU: cold {row['cold_cpu']:5.2f} s,"
        f" warm median {row['warm_cpu_median']:5.2f} s"
    )


def cache_memory(frames: StudyFrames, n_resamples: int, seed: int = 0) -> dict[str, int]:
    """Bytes each cache holds after every analysis ran once from empty caches: what clearing
    that cache alone gives back (tracemalloc)."""
    _memo.clear_caches()
    gc.collect()
    tracemalloc.start()
    try:
        timed(KINDS, dataclasses.replace(frames), n_resamples, seed)
        gc.collect()
        out = {}
        for name, memo in sorted(_memo._REGISTRY.items()):
            before = tracemalloc.get_traced_memory()[0]
            memo.clear()
            gc.collect()
            out[name] = before - tracemalloc.get_traced_memory()[0]
        return out
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=DEFAULT_STUDY)
    parser.add_argument("--n-resamples", type=int, nargs="+", default=[1000, 200])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.study.exists():
        raise SystemExit(
            f"{args.study} not found: build it with "
            "`.venv/bin/python benchmarks/bench_report.py --sizes 10000 --keep /tmp/bench`"
        )
    started = time.perf_counter()
    import sklearn.feature_extraction.text  # noqa: F401  (imported once, as bench_report)

    _ = analysis.ANALYSES
    with Project.open(args.study, read_only=True) as project:
        frames = read_frames(project)
    print(
        f"{args.study.name}: {len(frames.answers):,} answers, read with imports in"
        f" {time.perf_counter() - started:.1f} s"
    )
    for n_resamples in args.n_resamples:
        print(f"n_resamples={n_resamples} (warm: {args.repeats} repeats, one answer taken out)")
        measure(frames, n_resamples, args.repeats)
    memory = cache_memory(frames, args.n_resamples[0])
    stats = _memo.cache_stats()
    print(f"cache memory after one run of every analysis (n_resamples={args.n_resamples[0]}):")
    for name, size in memory.items():
        bound = stats[name]["max_entries"]
        print(f"  {name:<28} {size / 2**20:7.1f} MiB  (bound {bound:,} entries)")


if __name__ == "__main__":
    main()
