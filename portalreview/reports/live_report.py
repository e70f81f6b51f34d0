"""The JSON report kept live in a long-running program: after an answer lands, only what it
changed is read and computed again.

``build_report`` reads the whole study and runs every analysis: on a 10,000-case study that is
seconds of reading and seconds of computing, every time. :class:`LiveReport` keeps both between
refreshes:

* the frames, through :class:`portalreview.store.live_frames.LiveFrames`, which re-reads only
  the answers saved since the last refresh (anything else, such as new cases or units, makes it
  read everything again);
* each analysis's last result, recomputed only when the answer kinds it reads
  (``analysis.DEPENDS_ON``) changed, or when the settings (seed, resamples, filter, catalogs)
  did.

The report it returns equals ``build_report`` on the same project and settings (with the
filter applied to the frames first), key for key: the tests check that after every kind of
write. A refresh that is cancelled (``before_each`` raises) leaves the analyses it did not
reach marked stale, so the next refresh computes them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from portalreview.analysis import DEPENDS_ON, KINDS, analyse_all
from portalreview.analysis.filters import FrameFilter
from portalreview.reports.json_report import read_project_catalogs, report_header
from portalreview.store.frames import StudyFrames
from portalreview.store.live_frames import FrameChange, LiveFrames
from portalreview.store.project import Project


@dataclass(frozen=True)
class LiveResult:
    """One refresh: the report and what it rests on."""

    report: dict[str, Any]
    frames: StudyFrames  # the whole study
    filtered: StudyFrames  # the answers the figures rest on (``frames`` when no filter)
    change: FrameChange  # what the frames' refresh found
    recomputed: tuple[str, ...]  # the analyses computed in this refresh, in report order
    timings: dict[str, float] = field(default_factory=dict)  # seconds: read, each analysis


@dataclass(frozen=True)
class _Settings:
    seed: int
    n_resamples: int
    choice: str  # the filter as sorted JSON
    catalogs_version: Any


class LiveReport:
    """The report of one project, refreshed incrementally (see the module docstring).

    A refresh with another :class:`Project` object than the last starts afresh. ``refresh``
    may run on a worker thread; concurrent refreshes run one after the other.
    """

    def __init__(self, include_drafts: bool = False) -> None:
        self.include_drafts = include_drafts
        self._frames = LiveFrames(include_drafts=include_drafts)
        self._results: dict[str, dict[str, Any]] = {}
        self._stale: set[str] = set(KINDS)
        self._settings: _Settings | None = None
        self._project: Project | None = None  # the project the frames were read from
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget the frames and results: the next refresh reads and computes everything."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._frames.reset()
        self._results.clear()
        self._stale = set(KINDS)
        self._settings = None
        self._project = None

    def refresh(
        self,
        project: Project,
        *,
        seed: int = 0,
        n_resamples: int = 1000,
        choice: FrameFilter | None = None,
        before_each: Callable[[str], None] | None = None,
    ) -> LiveResult:
        """The report now: re-read what changed, recompute the analyses it touches."""
        with self._lock:
            return self._refresh(project, seed, n_resamples, choice or FrameFilter(), before_each)

    def _refresh(
        self,
        project: Project,
        seed: int,
        n_resamples: int,
        choice: FrameFilter,
        before_each: Callable[[str], None] | None,
    ) -> LiveResult:
        started = time.perf_counter()
        if project is not self._project:  # another project, or the same file opened again
            self._forget()
            self._project = project
        change = self._frames.refresh(project)
        catalogs = read_project_catalogs(project)
        settings = _Settings(
            int(seed),
            int(n_resamples),
            json.dumps(choice.as_json(), sort_keys=True),
            catalogs.version,
        )
        self._mark_stale(change, settings)
        filtered = choice.apply(change.frames) if choice.active else change.frames
        timings = {"read": time.perf_counter() - started}
        recomputed = [kind for kind in KINDS if kind in self._stale]
        for kind in recomputed:  # one at a time: a cancel keeps the results done before it
            self._results[kind] = analyse_all(
                filtered,
                seed=seed,
                n_resamples=n_resamples,
                catalogs=catalogs,
                timings=timings,
                before_each=before_each,
                kinds=(kind,),
            )[kind]
            self._stale.discard(kind)
        header = report_header(
            project,
            filtered,
            catalogs,
            seed=seed,
            n_resamples=n_resamples,
            include_drafts=self.include_drafts,
        )
        report = {**header, **{kind: self._results[kind] for kind in KINDS}}
        timings["total"] = time.perf_counter() - started
        return LiveResult(report, change.frames, filtered, change, tuple(recomputed), timings)

    def _mark_stale(self, change: FrameChange, settings: _Settings) -> None:
        """Add to the stale analyses those the change or new settings make out of date."""
        if change.full or settings != self._settings:
            self._stale = set(KINDS)
        else:
            self._stale |= {k for k in KINDS if DEPENDS_ON[k] & change.changed_kinds}
        self._settings = settings


__all__ = ["LiveReport", "LiveResult"]
