"""The JSON report: every table of the analysis layer, computed live from one project.

``build_report(project)`` reads the study once (``store.frames.read_frames``), runs every
analysis (``portalreview.analysis``) and returns one JSON-ready dict; ``write_json_report``
writes it to a file. The structure is stable and documented key by key in ``docs/report.md``:
a reader can rebuild each figure from the counts the report gives beside it.

A report is reproducible: the same project, seed and number of resamples give the same report,
byte for byte, on one machine (no timestamps, no absolute paths; interval bounds built on
fractions can move in the 8th digit with the BLAS thread count, see docs/report.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from portalreview import __version__
from portalreview.analysis import KINDS, analyse_all
from portalreview.analysis._common import CONFIDENCE, jsonable, people
from portalreview.domain.catalogs import Catalogs
from portalreview.reports import report_cache
from portalreview.store.backends import AnyProject, open_project
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.frames import (
    StudyFrames,
    only_listed_answers,
    paused_gc,
    read_all,
    read_frames,
)
from portalreview.store.models import Annotator, Case, Response
from portalreview.store.output_files import output_folder, write_through_temporary
from portalreview.store.project import Project, refuse_project_output

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "portalreview-report"
FORMAT_VERSION = 3


def _open(project: AnyProject | str | os.PathLike) -> tuple[AnyProject, bool]:
    """The open project, and whether this opened it (a path or a server address)."""
    if isinstance(project, str | os.PathLike):
        return open_project(project, read_only=True), True
    return project, False


def _study(project: Project, frames: StudyFrames) -> dict[str, Any]:
    """Counts of the study the figures rest on."""
    with project.read() as s:
        n_cases = s.scalar(select(func.count()).select_from(Case))
        n_responses = s.scalar(select(func.count()).select_from(Response))
        everyone = s.execute(select(Annotator.name, Annotator.is_model)).all()
    per_person, per_kind = _answer_counts(frames)
    # everyone of the study, those who submitted nothing yet with 0: the PI sees who has not
    # contributed (the list held only annotators with answers)
    for name, is_model in everyone:
        per_person.setdefault((name, bool(is_model)), 0)
    kinds = _units_per_kind(frames)
    return {
        "n_cases": n_cases,
        "n_responses": n_responses,
        "annotators": [
            {"name": name, "is_model": bool(is_model), "n_answers": n}
            for (name, is_model), n in sorted(per_person.items())
        ],
        "kinds": {
            kind: {
                "n_units": int(kinds.get(kind, 0)),
                "n_answers": per_kind.get((kind, False), 0),
                "n_gold_answers": per_kind.get((kind, True), 0),
            }
            for kind in ("respond", "match", "rank", "urgency", "eppc", "empathy", "facts")
        },
    }


def _units_per_kind(frames: StudyFrames) -> pd.Series:
    """Units per kind, once per frames (``analysis._common.carry_memo`` carries it while the
    units stay the same: counting the kinds' texts again took about 5 ms a refresh)."""
    found = frames.memo.get("units_per_kind")
    if found is None:
        found = frames.memo["units_per_kind"] = frames.units.kind.value_counts()
    return found


def _answer_counts(frames: StudyFrames) -> tuple[dict[tuple, int], dict[tuple, int]]:
    """Answers per (annotator, is_model) and per (kind, is_gold), counted kind by kind on each
    kind's answers (``analysis._common.people``: made once per frames, and a live report
    carries the kinds that did not change), not by grouping every answer by two text columns
    again at each refresh. Every answer is of one of ``KINDS``: the schema allows no other
    (an answer's kind is its unit's, and its unit set's, checked against ``store.models.KINDS``)."""
    per_person: dict[tuple, int] = {}
    per_kind: dict[tuple, int] = {}
    for kind in KINDS:
        n, gold, who = _kind_counts(frames, kind)
        for key, count in who.items():
            per_person[key] = per_person.get(key, 0) + count
        per_kind[kind, True], per_kind[kind, False] = gold, n - gold
    return per_person, per_kind


def _kind_counts(frames: StudyFrames, kind: str) -> tuple[int, int, dict[tuple, int]]:
    """A kind's answers, gold answers, and answers per (annotator, is_model); once per frames
    (``analysis._common.carry_memo`` carries it, as the kind's ``people``)."""
    key = ("people_counts", kind)
    found = frames.memo.get(key)
    if found is None:
        answers = people(frames, kind)
        who = answers.groupby(["annotator", "is_model"]).size()
        gold = int(answers.is_gold.astype(bool).sum())
        found = len(answers), gold, dict(zip(who.index.tolist(), who.tolist(), strict=True))
        frames.memo[key] = found
    return found


def read_project_catalogs(project: Project) -> Catalogs:
    """The catalogs (themes, codes...) stored in the project."""
    with project.read() as s:
        return read_catalogs(s)


def build_report(
    project: Project | str | os.PathLike,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    include_drafts: bool = False,
    frames: StudyFrames | None = None,
    timings: dict[str, float] | None = None,
    before_each: Callable[[str], None] | None = None,
    use_cache: bool = False,
) -> dict[str, Any]:
    """Every measure of the study as one JSON-ready dict (see docs/report.md).

    ``project`` is an open :class:`Project` or the path of a project file (opened read-only
    and closed again). ``seed`` and ``n_resamples`` fix the bootstrap (``n_resamples=0``
    leaves every CI null, for a quick look). ``include_drafts`` also counts unsubmitted
    answers. ``frames`` may be passed when already read; ``timings`` receives seconds per
    analysis; ``before_each(kind)`` is called before each analysis (a caller stops the report
    by raising there). ``use_cache`` (without ``frames``) takes each part the project keeps
    valid from its report cache (``reports/report_cache``) instead of computing it, and reads
    the study only when some part is not kept.
    """
    return report_and_frames(
        project,
        seed=seed,
        n_resamples=n_resamples,
        include_drafts=include_drafts,
        frames=frames,
        timings=timings,
        before_each=before_each,
        use_cache=use_cache,
    )[0]


def report_and_frames(
    project: Project | str | os.PathLike,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    include_drafts: bool = False,
    frames: StudyFrames | None = None,
    timings: dict[str, float] | None = None,
    before_each: Callable[[str], None] | None = None,
    use_cache: bool = False,
    need_frames: bool = False,
) -> tuple[dict[str, Any], StudyFrames | None]:
    """:func:`build_report`, and the frames it rests on (None when every part came from the
    cache and ``need_frames`` is false)."""
    opened, close = _open(project)
    try:
        kept: dict[str, dict[str, Any]] = {}
        if frames is None and use_cache:
            frames, catalogs, kept = _read_with_cache(
                opened, seed, n_resamples, include_drafts, need_frames
            )
        else:
            if frames is None:
                frames = read_frames(opened, include_drafts=include_drafts)
            catalogs = read_project_catalogs(opened)
        header = report_header(
            opened,
            frames,
            catalogs,
            seed=seed,
            n_resamples=n_resamples,
            include_drafts=include_drafts,
            study=kept.get(report_cache.STUDY),
        )
        missing = [kind for kind in KINDS if kind not in kept]
        results = {}
        if missing:
            results = analyse_all(
                frames,
                seed=seed,
                n_resamples=n_resamples,
                catalogs=catalogs,
                timings=timings,
                before_each=before_each,
                kinds=missing,
            )
    finally:
        if close:
            opened.close()
    return {
        **header,
        **{kind: kept[kind] if kind in kept else results[kind] for kind in KINDS},
    }, frames


def _read_with_cache(
    project: Project, seed: int, n_resamples: int, include_drafts: bool, need_frames: bool
) -> tuple[StudyFrames | None, Catalogs, dict[str, dict[str, Any]]]:
    """In one snapshot: the catalogs, the parts the report cache keeps valid (parsed), and
    the frames unless every part is kept (and ``need_frames`` is false)."""
    with paused_gc(), project.read() as s:
        found = report_cache.read_kept(s, seed, n_resamples, None, include_drafts)
        catalogs = found.catalogs
        kept = {}
        for part, entry in found.parts.items():
            if entry.valid:
                with contextlib.suppress(ValueError):  # a damaged entry: computed instead
                    kept[part] = entry.result()
        frames = None
        if need_frames or any(part not in kept for part in report_cache.PARTS):
            frames = only_listed_answers(*read_all(s, include_drafts))
    return frames, catalogs, kept


def report_header(
    project: Project,
    frames: StudyFrames | None,
    catalogs: Catalogs,
    *,
    seed: int,
    n_resamples: int,
    include_drafts: bool,
    study: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's keys before the analyses (report, project, settings, study), JSON-ready:
    what the figures were computed from and how. ``study``: the study's counts when known
    (kept by the report cache); ``frames`` may then be None."""
    header = {
        "report": {"format": FORMAT, "version": FORMAT_VERSION, "portalreview": __version__},
        "project": {
            "name": project.meta("name"),
            "project_id": project.meta("project_id"),
            "file": project.label,
            "catalogs_version": catalogs.version,
        },
        "settings": {
            "seed": int(seed),
            "n_resamples": int(n_resamples),
            "confidence": CONFIDENCE,
            "ci_method": "percentile bootstrap over units",
            "include_drafts": bool(include_drafts),
        },
        "study": study if study is not None else _study(project, frames),
    }
    return jsonable(header)


def write_json_report(
    project: Project | str | os.PathLike, out_path: str | os.PathLike, **options: Any
) -> Path:
    """Build the report (``options`` as :func:`build_report`) and write it as UTF-8 JSON. A
    missing folder is made first, before the long work (removed again if nothing comes of it),
    as the other reports and the exports make theirs."""
    refuse_project_output(project, out_path)
    out = Path(out_path)
    with output_folder(out.parent):
        report = build_report(project, **options)
        text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False)
        write_through_temporary(out, lambda temporary: temporary.write_text(text + "\n", "utf-8"))
    logging.getLogger(__name__).info("report written: %s (json)", out)
    return out


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "build_report",
    "read_project_catalogs",
    "report_and_frames",
    "report_header",
    "write_json_report",
]
