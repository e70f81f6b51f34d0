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
  did; a key of a result that reads more kinds than the rest of it (``analysis.PIECES``:
  respond's editing load reads the match answers) is recomputed alone when only those
  other kinds changed.

The report it returns equals ``build_report`` on the same project and settings (with the
filter applied to the frames first), key for key: the tests check that after every kind of
write. With a filter, only the analyses rest on the answers it keeps: ``study`` counts the
whole project (docs/report.md, ``settings``). A refresh that is cancelled (``before_each``
raises) leaves the analyses it did not reach marked stale, so the next refresh computes them.

With ``use_cache`` (the default), the results also outlive the program: an analysis out of date
here whose result the project keeps, valid for the same snapshot of the study
(``reports/report_cache``), is taken from there instead of computed; and what a refresh
computes is written there (where the project may be written) for the next start.
:func:`stored_report` gives the last report kept, without reading the study, for a window to
show at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from portalreview.analysis import (
    DEPENDS_ON,
    KINDS,
    OWN_DEPENDS_ON,
    PIECES,
    analyse_all,
    analyse_piece,
)
from portalreview.analysis._common import carry_memo
from portalreview.analysis.filters import FrameFilter, filter_choices
from portalreview.domain.catalogs import Catalogs
from portalreview.reports import report_cache
from portalreview.reports.json_report import report_header
from portalreview.reports.report_cache import STUDY, CacheSettings, Snapshot, StoredPart
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.frames import StudyFrames
from portalreview.store.live_frames import FrameChange, LiveFrames, Mark
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
    from_cache: tuple[str, ...] = ()  # the analyses taken from the project's report cache
    choice: FrameFilter = field(default_factory=FrameFilter)  # the filter applied


class LiveReport:
    """The report of one project, refreshed incrementally (see the module docstring).

    A refresh with another :class:`Project` object than the last starts afresh. ``refresh``
    may run on a worker thread; concurrent refreshes run one after the other.
    """

    def __init__(self, include_drafts: bool = False, use_cache: bool = True) -> None:
        self.include_drafts = include_drafts
        self.use_cache = use_cache
        self._frames = LiveFrames(include_drafts=include_drafts)
        self._results: dict[str, dict[str, Any]] = {}
        self._stale: set[str] = set(KINDS)
        # the whole frames of the last refresh (what carry_memo reads)
        self._last_frames: StudyFrames | None = None
        # kind -> keys of its kept result to compute again alone (analysis.PIECES)
        self._stale_pieces: dict[str, set[str]] = {}
        self._settings: CacheSettings | None = None
        # results computed but not yet written to the project: (settings, snapshot, parts)
        self._pending: list[tuple[CacheSettings, Snapshot, dict[str, Any]]] = []
        self._project: Project | None = None  # the project the frames were read from
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget the frames and results: the next refresh reads and computes everything."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._pending = []
        self._frames.reset()
        self._results.clear()
        self._last_frames = None
        self._stale = set(KINDS)
        self._stale_pieces = {}
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
        keep: bool = True,
        drop_unoffered: bool = False,
    ) -> LiveResult:
        """The report now: re-read what changed, recompute the analyses it touches. With the
        cache on, what it computed is written to the project before it returns, or, with
        ``keep=False``, when :meth:`keep_pending` is called (a window shows the figures
        first). A filter naming an annotator, source or tag value the study no longer has is
        refused (a ValueError), or, with ``drop_unoffered``, applied without it (the
        result's ``choice``: a dashboard's tick may outlive the last answer it named)."""
        with self._lock:
            result = self._refresh(
                project, seed, n_resamples, choice or FrameFilter(), before_each, drop_unoffered
            )
        if keep:
            started = time.perf_counter()
            self.keep_pending(project)
            result.timings["cache"] = time.perf_counter() - started
        return result

    def keep_pending(self, project: Project) -> bool:
        """Write to the project the results computed since the last write (each with the
        snapshot of the study it was computed on); False when nothing was written."""
        with self._lock:
            pending, self._pending = self._pending, []
        written = False
        for settings, snapshot, parts in pending:
            written = report_cache.store(project, settings, snapshot, parts) or written
        return written

    def _refresh(
        self,
        project: Project,
        seed: int,
        n_resamples: int,
        choice: FrameFilter,
        before_each: Callable[[str], None] | None,
        drop_unoffered: bool,
    ) -> LiveResult:
        started = time.perf_counter()
        if project is not self._project:  # another project, or the same file opened again
            self._forget()
            self._project = project
        opened = _Opened(self, seed, n_resamples, choice)
        change = self._frames.refresh(project, first=opened.read)
        if drop_unoffered and choice.active:
            choice = choice.within(filter_choices(change.frames))
            opened.narrowed_to(choice)
        catalogs, settings = opened.catalogs, opened.settings
        self._mark_stale(change, settings)
        from_cache = self._take_from_cache(opened.stored)
        filtered = choice.apply(change.frames) if choice.active else change.frames
        # The memo is carried from whole frames to whole frames only: filtered frames are
        # made afresh at each refresh, with their own memo (what they made holds only the
        # answers the filter kept). The whole frames' memo holds the study's counts.
        last, self._last_frames = self._last_frames, change.frames
        if last is not None and not change.full and last is not change.frames:
            carry_memo(last, change.frames, change.changed_kinds, change.reread)  # kept answers
        timings = {"read": time.perf_counter() - started}
        recomputed = [k for k in KINDS if k in self._stale or k in self._stale_pieces]
        for kind in recomputed:  # one at a time: a cancel keeps the results done before it
            if kind not in self._stale:  # only pieces of it: the rest is kept
                self._recompute_pieces(
                    kind, filtered, seed, n_resamples, catalogs, timings, before_each
                )
                continue
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
            self._stale_pieces.pop(kind, None)
        header = report_header(  # ``study`` counts the whole project, filter or not
            project,
            change.frames,
            catalogs,
            seed=seed,
            n_resamples=n_resamples,
            include_drafts=self.include_drafts,
        )
        report = {**header, **{kind: self._results[kind] for kind in KINDS}}
        if recomputed and opened.snapshot is not None:
            parts = {STUDY: header[STUDY], **{k: self._results[k] for k in recomputed}}
            self._add_pending(settings, opened.snapshot, parts)
        timings["total"] = time.perf_counter() - started
        return LiveResult(
            report,
            change.frames,
            filtered,
            change,
            tuple(recomputed),
            timings,
            tuple(from_cache),
            choice,
        )

    def _only_pieces_changed(self, kind: str, changed: frozenset[str]) -> bool:
        """Whether the answer kinds ``changed`` leave ``kind``'s kept result whole but for
        pieces of it (``analysis.PIECES``)."""
        own = OWN_DEPENDS_ON.get(kind)
        return (
            own is not None
            and not own & changed
            and kind in self._results
            and kind not in self._stale
        )

    def _recompute_pieces(
        self,
        kind: str,
        frames: StudyFrames,
        seed: int,
        n_resamples: int,
        catalogs: Catalogs,
        timings: dict[str, float],
        before_each: Callable[[str], None] | None,
    ) -> None:
        """Compute again the stale pieces of ``kind``'s kept result (``analysis.PIECES``)."""
        if before_each is not None:
            before_each(kind)
        started = time.perf_counter()
        fresh = {
            key: analyse_piece(
                frames, kind, key, seed=seed, n_resamples=n_resamples, catalogs=catalogs
            )
            for key in sorted(self._stale_pieces[kind])
        }
        self._results[kind] = {**self._results[kind], **fresh}  # (the keys keep their order)
        del self._stale_pieces[kind]
        timings[kind] = time.perf_counter() - started

    def _add_pending(
        self, settings: CacheSettings, snapshot: Snapshot, parts: dict[str, Any]
    ) -> None:
        """Remember ``parts`` to write; an older pending copy of a part is dropped."""
        for _settings, _snapshot, older in self._pending:
            if _settings == settings:
                for part in parts:
                    older.pop(part, None)
        self._pending = [entry for entry in self._pending if entry[2]]
        self._pending.append((settings, snapshot, dict(parts)))

    def _take_from_cache(self, stored: dict[str, StoredPart]) -> list[str]:
        """Take each stale analysis that the project keeps, valid now, from there; or one
        whose answers changed in its pieces only (``analysis.PIECES``), those pieces then
        marked to be computed again."""
        taken = []
        for kind in KINDS:
            part = stored.get(kind)
            if kind not in self._stale or part is None:
                continue
            pieces = _stale_pieces_of(kind, part)
            if pieces is None:
                continue
            try:
                self._results[kind] = part.result()
            except ValueError:  # a damaged entry: computed instead
                continue
            self._stale.discard(kind)
            self._stale_pieces.pop(kind, None)
            if pieces:
                self._stale_pieces[kind] = pieces
            taken.append(kind)
        return taken

    def _mark_stale(self, change: FrameChange, settings: CacheSettings) -> None:
        """Add to the stale analyses those the change or new settings make out of date."""
        if change.full or settings != self._settings:
            self._stale = set(KINDS)
            self._stale_pieces = {}
        else:
            changed = change.changed_kinds
            for kind in KINDS:
                if not DEPENDS_ON[kind] & changed:
                    continue
                if self._only_pieces_changed(kind, changed):  # the rest of the result holds
                    pieces = {k for k, kinds in PIECES[kind].items() if kinds & changed}
                    self._stale_pieces.setdefault(kind, set()).update(pieces)
                else:
                    self._stale.add(kind)
        self._settings = settings


def _stale_pieces_of(kind: str, part: StoredPart) -> set[str] | None:
    """The pieces of a kept result of ``kind`` that answers saved since make stale (empty:
    valid whole); None when more than pieces of it changed."""
    if part.valid:
        return set()
    own = OWN_DEPENDS_ON.get(kind)
    if part.changed is None or own is None or own & part.changed:
        return None
    return {key for key, kinds in PIECES[kind].items() if kinds & part.changed}


@dataclass(frozen=True)
class StoredReport:
    """The last report the project keeps for some settings (see :func:`stored_report`)."""

    report: dict[str, Any]
    stale: tuple[str, ...]  # the parts (analyses, "study") that answers saved since change
    computed_at: str  # the newest part's time (UTC, ISO 8601)


def stored_report(
    project: Project,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    choice: FrameFilter | None = None,
    include_drafts: bool = False,
) -> StoredReport | None:
    """The report last computed with these settings, as the project keeps it, without reading
    the study: for a window to show at once while it brings the figures up to date. None when
    the project keeps no whole report for them (or an entry cannot be read)."""
    with project.read() as s:
        kept = report_cache.read_kept(s, seed, n_resamples, choice, include_drafts)
    parts = kept.parts
    if any(part not in parts for part in report_cache.PARTS):
        return None
    try:
        results = {part: parts[part].result() for part in report_cache.PARTS}
    except ValueError:
        return None
    header = report_header(
        project,
        None,
        kept.catalogs,
        seed=seed,
        n_resamples=n_resamples,
        include_drafts=include_drafts,
        study=results[STUDY],
    )
    report = {**header, **{kind: results[kind] for kind in KINDS}}
    stale = tuple(part for part in report_cache.PARTS if not parts[part].valid)
    return StoredReport(report, stale, max(part.computed_at for part in parts.values()))


class _Opened:
    """What a refresh reads first, in the frames' own snapshot: the catalogs, the settings
    and, with the cache on, where the study stands and the results the project keeps."""

    def __init__(self, live: LiveReport, seed: int, n_resamples: int, choice: FrameFilter) -> None:
        self.live, self.seed, self.n_resamples, self.choice = live, seed, n_resamples, choice
        self.catalogs: Catalogs | None = None
        self.settings: CacheSettings | None = None
        self.snapshot: Snapshot | None = None
        self.stored: dict[str, StoredPart] = {}

    def narrowed_to(self, choice: FrameFilter) -> None:
        """The refresh applies ``choice`` instead (ticks the study no longer offers left
        out): its settings, and nothing kept for the filter asked is taken."""
        if choice == self.choice:
            return
        self.choice, self.stored = choice, {}
        self.settings = CacheSettings.of(
            self.seed, self.n_resamples, choice, self.live.include_drafts, self.catalogs
        )

    def read(self, s: Session, mark: Mark) -> None:
        self.catalogs = read_catalogs(s)
        self.settings = CacheSettings.of(
            self.seed, self.n_resamples, self.choice, self.live.include_drafts, self.catalogs
        )
        if self.live.use_cache:
            self.snapshot = Snapshot.of(mark)
            live = self.live
            if not live._results or self.settings != live._settings:  # else: kept here
                self.stored = report_cache.stored_parts(s, self.settings, self.snapshot)


__all__ = ["LiveReport", "LiveResult", "StoredReport", "stored_report"]
