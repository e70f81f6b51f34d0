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

A long-running program (the dashboard's live report) recomputes only the analyses whose
answers changed (``DEPENDS_ON``), and each recomputation reuses what did not change: the
expensive pure per-item steps (segmenting leftover drafts, TF-IDF term counts, word
alignments of edited drafts, evidence tokens, inbox scorers, bootstrap weights) are kept in
bounded process-wide caches keyed by the content they depend on (:mod:`._memo`;
``clear_caches`` empties them, ``cache_stats`` reports them).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from portalreview.analysis._memo import cache_stats, clear_caches

if TYPE_CHECKING:
    from portalreview.domain.catalogs import Catalogs
    from portalreview.store.frames import StudyFrames

Analysis = Callable[..., dict[str, Any]]

#: The analysis modules, in the order the report lists them (one per kind).
KINDS = ("respond", "match", "rank", "urgency", "eppc", "empathy", "facts")

#: analysis kind -> the answer kinds (``answers.kind``) whose answers it reads: their rows of
#: ``frames.answers`` and of the detail frames (respond_parts, respond_answers, rank_entries,
#: match_decisions, sentence_themes, urgency, eppc_labels, empathy, facts). An analysis's
#: result changes only when the answers of these kinds change (or the settings: seed,
#: resamples, catalogs); a long-running program (the dashboard's live report) recomputes only
#: those analyses. Every analysis may also read the frames that are not answers - units, cases,
#: responses, sentences - so a change there (a new case, a response's source, a unit) can
#: change any analysis.
#:
#: * respond also reads the match answers: its editing-load table puts the Edit-F1 estimate of
#:   the edited drafts (``editing.estimated_edit_f1``: ``match.people_pair_counts``) beside the
#:   measured load, with CIs over the answered match units;
#: * every other analysis reads its own kind only (urgency reads ``cases`` for the reference
#:   levels and inboxes, eppc ``units`` for the batches, match ``sentences`` for the theme
#:   sides: none of them answers).
#:
#: ``StudyFrames.memo`` does not widen this: each memo entry is made from the frames object it
#: sits on, and what an analysis reads from it depends on its own kinds only (``people`` and
#: ``answers_of_kind`` of one kind, the responses' sources, match's pair counts and theme
#: recall from match answers: read by match and respond, both depending on match). A memo is
#: never carried from one frames object into another (a refreshed or filtered copy has an empty
#: one). tests/analysis/test_analysis_depends_on.py checks each entry: the analysis on frames
#: holding only these kinds' answers gives exactly the result on the whole study.
DEPENDS_ON: dict[str, frozenset[str]] = {
    "respond": frozenset({"respond", "match"}),
    "match": frozenset({"match"}),
    "rank": frozenset({"rank"}),
    "urgency": frozenset({"urgency"}),
    "eppc": frozenset({"eppc"}),
    "empathy": frozenset({"empathy"}),
    "facts": frozenset({"facts"}),
}


#: analysis kind -> the keys of its result that read answer kinds the rest of it does not,
#: with the kinds each reads: a long-running program recomputes such a key alone
#: (:func:`analyse_piece`) when only those other kinds changed. respond's ``editing_load``
#: reads the match answers (its Edit-F1 estimate); the rest of respond reads respond answers
#: only. tests/analysis/test_analysis_depends_on.py checks that each piece equals the key
#: of the whole analysis, and that the rest does not change with the other kinds.
PIECES: dict[str, dict[str, frozenset[str]]] = {
    "respond": {"editing_load": frozenset({"respond", "match"})},
}
#: analysis kind -> the answer kinds the result reads outside its ``PIECES``.
OWN_DEPENDS_ON: dict[str, frozenset[str]] = {
    "respond": frozenset({"respond"}),
}


def analyse_piece(
    frames: StudyFrames,
    kind: str,
    key: str,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> Any:
    """The value of ``key`` (one of ``PIECES[kind]``) of ``kind``'s analysis, alone: equal to
    ``analyse_all(frames, ...)[kind][key]``."""
    from portalreview.store.frames import paused_gc

    module = importlib.import_module(f"{__name__}.{kind}")
    with paused_gc():
        return module.analyse_piece(
            frames, key, seed=seed, n_resamples=n_resamples, catalogs=catalogs
        )


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
    kinds: Collection[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every analysis (or those of ``kinds``, in report order) on one snapshot of the study:
    {kind: result}. When ``timings`` is given
    it receives the seconds each analysis took (the benchmark reads it). ``before_each(kind)``
    is called before each analysis: a caller that wants to stop (a cancelled dashboard
    refresh) raises its own exception there."""
    from portalreview.store.frames import paused_gc

    analyses = globals().get("ANALYSES") or __getattr__("ANALYSES")
    out = {}
    with paused_gc():  # the tables make millions of short-lived objects, none in cycles
        for kind, function in analyses.items():
            if kinds is not None and kind not in kinds:
                continue
            if before_each is not None:
                before_each(kind)
            started = time.perf_counter()
            out[kind] = function(frames, seed=seed, n_resamples=n_resamples, catalogs=catalogs)
            if timings is not None:
                timings[kind] = time.perf_counter() - started
    return out


__all__ = [
    "ANALYSES",
    "DEPENDS_ON",
    "KINDS",
    "OWN_DEPENDS_ON",
    "PIECES",
    "analyse_all",
    "analyse_piece",
    "cache_stats",
    "clear_caches",
]
