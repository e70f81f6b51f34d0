"""How long finding a clinician's most similar earlier replies takes, the step the desktop
program runs on opening a respond unit when the study asks for own examples
(``llm/own_examples.py``): reading the clinician's replies, and the TF-IDF similarity of the
message at hand to each earlier message, against the reference of the whole similarity matrix
(what it computed before, quadratic in the number of replies) in the same run.

Reads a study read-only (by default the 10,000-case study ``bench_report.py --keep /tmp/bench``
keeps, where each annotator has 10,000 replies) and times the first annotator's replies, all
of them and the first 100, 1,000 and 3,000.

Usage::

    .venv/bin/python benchmarks/bench_own_examples.py [--study PATH] [--repeats 3]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from portalreview.llm import own_examples
from portalreview.metrics.agreement import tfidf_cosine_matrix, tfidf_cosine_to_first
from portalreview.store.project import Project
from portalreview.store.service import StudyService


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=Path("/tmp/bench/synthetic-10000.prproj"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with Project.open(args.study, read_only=True) as project:
        service = StudyService(project)
        annotator = min(a.id for a in service.annotators())
        tfidf_cosine_to_first(["warm up the imports", "once"])
        read = _median_time(lambda: own_examples.own_replies(service, annotator), args.repeats)
        replies = own_examples.own_replies(service, annotator)
    count = len(replies)
    print(f"{args.study.name}: reading annotator {annotator}'s {count:,} replies {read:.3f} s")
    message = replies[0].message
    for n in sorted({100, 1000, 3000, len(replies)}):
        texts = [message, *(r.message for r in replies[:n])]
        assert np.array_equal(
            tfidf_cosine_to_first(texts), tfidf_cosine_matrix(texts)[0], equal_nan=True
        )
        now = _median_time(lambda t=texts: tfidf_cosine_to_first(t), args.repeats)
        before = _median_time(lambda t=texts: tfidf_cosine_matrix(t)[0], args.repeats)
        print(
            f"  {n:>6,} replies: similarity row {now:.3f} s, whole matrix (reference) "
            f"{before:.3f} s, ratio {now / before:.2f}x (same values)"
        )


if __name__ == "__main__":
    main()
