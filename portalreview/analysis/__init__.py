"""The analysis layer: every table of the five papers computed live from a project's answers.

Each module reads :class:`portalreview.store.frames.StudyFrames` (``read_frames``) and has one
entry point ``analyse(frames, *, seed, n_resamples, catalogs) -> dict`` returning JSON-ready
data (numbers, strings, lists, dicts; ``None`` for an undefined value, never NaN). Every
headline figure is ``{"value", "ci", "n_units"}`` with a seeded 95% bootstrap CI over units
(:mod:`portalreview.analysis._bootstrap`). ``docs/report.md`` documents every key.

Modules, in report order: :mod:`.respond` and :mod:`.match` (seed 000, drafting),
:mod:`.rank` (seed 001, MedAlign), :mod:`.urgency` (seed 002, PMR-Bench), :mod:`.eppc`
(seed 003, EPPCMinerBen), :mod:`.empathy` and :mod:`.facts` (seed 004).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from portalreview.analysis import empathy, eppc, facts, match, rank, respond, urgency
from portalreview.domain.catalogs import Catalogs
from portalreview.store.frames import StudyFrames, paused_gc

Analysis = Callable[..., dict[str, Any]]

#: kind -> analysis function, in the order the report lists them.
ANALYSES: dict[str, Analysis] = {
    "respond": respond.analyse,
    "match": match.analyse,
    "rank": rank.analyse,
    "urgency": urgency.analyse,
    "eppc": eppc.analyse,
    "empathy": empathy.analyse,
    "facts": facts.analyse,
}


def analyse_all(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every analysis on one snapshot of the study: {kind: result}. When ``timings`` is given
    it receives the seconds each analysis took (the benchmark reads it)."""
    out = {}
    with paused_gc():  # the tables make millions of short-lived objects, none in cycles
        for kind, function in ANALYSES.items():
            started = time.perf_counter()
            out[kind] = function(frames, seed=seed, n_resamples=n_resamples, catalogs=catalogs)
            if timings is not None:
                timings[kind] = time.perf_counter() - started
    return out


__all__ = ["ANALYSES", "analyse_all"]
