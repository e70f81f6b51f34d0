"""The analysis layer: every table of the five papers computed live from a project's answers.

Each module reads :class:`portalreview.store.frames.StudyFrames` (``read_frames``) and has one
entry point ``analyse(frames, *, seed, n_resamples, catalogs) -> dict`` returning JSON-ready
data (numbers, strings, lists, dicts; ``None`` for an undefined value, never NaN). Every
headline figure is ``{"value", "ci", "n_units", "n_resamples"}`` with a seeded 95% bootstrap
CI over units (:mod:`portalreview.analysis._bootstrap`). ``docs/report.md`` documents every
key.

Modules, in report order: :mod:`.respond` and :mod:`.match` (seed 000, drafting),
:mod:`.rank` (seed 001, MedAlign), :mod:`.urgency` (seed 002, PMR-Bench), :mod:`.eppc`
(seed 003, EPPCMinerBen), :mod:`.empathy` and :mod:`.facts` (seed 004). They are imported
when first needed (``ANALYSES`` or :func:`analyse_all`), not with the package, so importing
one helper module does not load them all (PEP 562).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portalreview.domain.catalogs import Catalogs
    from portalreview.store.frames import StudyFrames

Analysis = Callable[..., dict[str, Any]]

#: The analysis modules, in the order the report lists them (one per kind).
KINDS = ("respond", "match", "rank", "urgency", "eppc", "empathy", "facts")


def _analyses() -> dict[str, Analysis]:
    """kind -> analysis function, in the order the report lists them."""
    return {kind: importlib.import_module(f"{__name__}.{kind}").analyse for kind in KINDS}


def __getattr__(name: str) -> Any:
    if name == "ANALYSES":  # kind -> analysis function, in report order
        value = globals()["ANALYSES"] = _analyses()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def analyse_all(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
    timings: dict[str, float] | None = None,
    before_each: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every analysis on one snapshot of the study: {kind: result}. When ``timings`` is given
    it receives the seconds each analysis took (the benchmark reads it). ``before_each(kind)``
    is called before each analysis: a caller that wants to stop (a cancelled dashboard
    refresh) raises its own exception there."""
    from portalreview.store.frames import paused_gc

    analyses = globals().get("ANALYSES") or __getattr__("ANALYSES")
    out = {}
    with paused_gc():  # the tables make millions of short-lived objects, none in cycles
        for kind, function in analyses.items():
            if before_each is not None:
                before_each(kind)
            started = time.perf_counter()
            out[kind] = function(frames, seed=seed, n_resamples=n_resamples, catalogs=catalogs)
            if timings is not None:
                timings[kind] = time.perf_counter() - started
    return out


__all__ = ["ANALYSES", "KINDS", "analyse_all"]
