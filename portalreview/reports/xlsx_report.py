"""The Excel agreement report (and its CSV twin), built from the JSON report.

``write_xlsx_report(project, "report.xlsx")`` computes :func:`json_report.build_report` once
and lays its figures out as the papers' tables: a **Summary** sheet (the headline figures,
each with its 95% interval, its n and the JSON key it comes from), one sheet per kind, native
Excel charts (Edit-F1 per draft source, a win-rate heat map, kappa per batch, the inbox's NDCG
curve...), the **raw answers** behind the figures on ``Raw ...`` sheets, and a **Provenance**
sheet (project, program version, settings, the model files and prompt templates of the
suggestions, the merges of offline copies, and the audit log's last hash: the state of the
project the figures were computed on).

Every figure cell is read from the report by its JSON path (:class:`Cell` keeps it), so the
workbook's figures are the JSON report's by construction; the tests check it cell by cell.
``workbook_model(report, ...)`` gives the same content as plain data (no openpyxl), which the
CSV writer (one file per table) and the dashboard can use. The Raw sheets' rows (ten million
values on a 10,000-case study) are made as they are written (:class:`Rows`), as plain values,
and written as the sheet's XML here (:class:`_RawCells`), not as openpyxl cells: the same
bytes, 7 to 13 times faster on that study, in less than half the memory.

Long work takes ``progress(done, total)`` and ``cancel() -> bool`` (a cancel raises
:class:`~portalreview.store.study_setup.Cancelled`; no file is left behind).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import logging
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import func, inspect, select
from sqlalchemy import text as sql

from portalreview import __version__
from portalreview.metrics.urgency import ndcg_at_k, t_ndcg_at_k
from portalreview.reports.json_report import build_report, report_and_frames
from portalreview.store.csv_cells import safe_row, safe_writer
from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.importers.ooxml import (
    EXCEL_CELL_LIMIT,
    excel_prefix,
    fits_excel_cell,
    ooxml_escape,
)
from portalreview.store.models import Annotator, Answer, AuditEntry, Suggestion
from portalreview.store.output_files import (
    make_folder,
    move_into_place,
    output_folder,
    save_workbook,
    staging_folder,
    write_staged,
    write_through_temporary,
)
from portalreview.store.project import Project, refuse_project_output
from portalreview.store.study_setup import CancelFn, ProgressFn, Steps

JsonPath = tuple[str | int, ...]

NUM = "0.000"
INT = "0"
PCT = "0.0"  # percent_correct is already 0-100
CUT_NOTE = " ... [cut: longer than an Excel cell]"
CHART_ROWS = 19  # rows of 15 points kept free below a table for its 9 cm chart
_ILLEGAL = re.compile("[\000-\010\013\014\016-\037\ufffe\uffff]")  # what XML 1.0 cannot hold
_SHEET_CHARS = re.compile(r"[\[\]:*?/\\]")
_TEXT_TO_CHANGE = re.compile("[\000-\010\013\014\016-\037\r\ufffe\uffff]|_x")  # see _text

log = logging.getLogger(__name__)


# --- the model: sheets of tables of cells --------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """A cell's value; ``path`` when it is read from the JSON report (a figure)."""

    value: Any
    path: JsonPath | None = None
    fmt: str | None = None


@dataclass
class Chart:
    """A native chart of a table: ``categories`` and ``series`` are column indices;
    ``errors[i]`` the (CI low, CI high) columns of series i, for error bars."""

    kind: str  # "bar" (vertical bars) or "line"
    title: str
    categories: int
    series: list[int]
    y_title: str = ""
    x_title: str = ""
    errors: list[tuple[int, int] | None] = field(default_factory=list)
    y_min: float | None = None
    y_max: float | None = None
    stacked: bool = False


class Rows:
    """A raw table's rows, made anew each time they are read and never all held: a big study's
    raw sheets have some ten million values, which as objects took gigabytes and left the
    garbage collector holding the interpreter (the window froze) while the workbook was built.

    A row holds plain values, each with its column's number format (:attr:`Table.formats`), or
    a :class:`Cell` where a value carries its own (a figure read from the report). ``size`` is
    the number of records the rows are made from (answers, entries, facts), read through
    :meth:`over`, so that a writer can tell how far it has got."""

    def __init__(self, size: int, make: Callable[[Rows], Iterator[list[Any]]]) -> None:
        self.size = size
        self.read = 0  # records read so far by the current pass
        self._make = make

    def __iter__(self) -> Iterator[list[Any]]:
        self.read = 0
        return self._make(self)

    def over(self, records: Iterable[Any]) -> Iterator[Any]:
        """``records``, counted in :attr:`read` as they are read."""
        for record in records:
            self.read += 1
            yield record


@dataclass
class Table:
    key: str  # unique in the workbook: the CSV file name
    title: str
    headers: list[str]
    rows: list[list[Cell]] | Rows
    note: str = ""
    chart: Chart | None = None
    heat: tuple[int, int] | None = None  # first and last column of a colour-scaled block
    heat_range: tuple[float, float, float] = (0.0, 0.5, 1.0)
    chart_rows: int | None = None  # the chart shows the first rows only
    formats: list[str | None] | None = None  # a raw table's: its plain values' number formats


@dataclass
class Sheet:
    name: str
    title: str
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    raw: bool = False  # one long table: its header row frozen, with filters


def resolve(report: Any, path: JsonPath) -> Any:
    """The value at ``path`` in the report (None where the path runs into a null)."""
    node = report
    for step in path:
        if node is None:
            return None
        node = node[step]
    return node


def path_text(path: JsonPath) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


class _Reader:
    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report

    def get(self, *path: str | int) -> Any:
        return resolve(self.report, path)

    def cell(self, *path: str | int, fmt: str | None = None) -> Cell:
        value = resolve(self.report, path)
        if fmt is None:
            fmt = INT if isinstance(value, int) and not isinstance(value, bool) else NUM
        return Cell(value, tuple(path), fmt)

    def fig(self, *path: str | int, fmt: str = NUM) -> list[Cell]:
        """A figure as three cells: value, CI low, CI high."""
        return [
            self.cell(*path, "value", fmt=fmt),
            self.cell(*path, "ci", 0, fmt=fmt),
            self.cell(*path, "ci", 1, fmt=fmt),
        ]

    def n(self, *path: str | int) -> Cell:
        return self.cell(*path, "n_units", fmt=INT)


_PLAIN_TYPES = frozenset({str, int, bool, type(None)})


def _plain(value: Any) -> Any:
    """A cell value as a plain Python value: numpy scalars unwrapped, NaN as empty."""
    if type(value) in _PLAIN_TYPES:  # most values: nothing to do (millions on raw sheets)
        return value
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _c(value: Any, fmt: str | None = None) -> Cell:
    return Cell(_plain(value), None, fmt)


def _fig_headers(name: str) -> list[str]:
    return [name, f"{name} low", f"{name} high"]


def _error_columns(rows: list[list[Cell]], value_col: int) -> list[list[Cell]]:
    """Append the distances to CI low and high of column ``value_col`` (chart error bars)."""
    out = []
    for row in rows:
        value, low, high = (row[value_col + i].value for i in range(3))
        below = value - low if None not in (value, low) else None
        above = high - value if None not in (value, high) else None
        out.append([*row, _c(below, NUM), _c(above, NUM)])
    return out


# --- summary -------------------------------------------------------------------------------------


_SUMMARY_HEADERS = ["Kind", "Figure", "Group", "Value", "95% CI low", "95% CI high", "n units"]


def _summary(r: _Reader) -> Sheet:
    rows: list[list[Cell]] = []

    def add(kind: str, figure: str, group: str, paper: str, *path: str | int, fmt=NUM) -> None:
        if r.get(*path) is None:
            return
        rows.append(
            [
                _c(kind),
                _c(figure),
                _c(group),
                *r.fig(*path, fmt=fmt),
                r.n(*path),
                _c(paper),
                _c(path_text(path)),
            ]
        )

    add(
        "respond",
        "Theme agreement: Krippendorff's alpha, pooled",
        "all themes",
        "000 Table 3",
        "respond",
        "theme_agreement",
        "alpha_pooled",
    )
    add(
        "respond",
        "Similarity between clinicians: mean TF-IDF cosine",
        "all pairs",
        "000 Table 11",
        "respond",
        "similarity",
        "mean",
    )
    add(
        "respond",
        "Edited drafts: word F1 (kept words)",
        "pooled",
        "000 Sec. 3.1",
        "respond",
        "editing_load",
        "pooled",
        "f1",
    )
    for i, row in enumerate(r.get("match", "by_source") or []):
        group = f"{row['unit_set']} / {row['source']}"
        add(
            "match",
            "Content-Level Edit-F1",
            group,
            "000 Sec. 3.1",
            "match",
            "by_source",
            i,
            "content",
            "f1",
        )
        add(
            "match",
            "Theme-Level Edit-F1",
            group,
            "000 Sec. 3.2",
            "match",
            "by_source",
            i,
            "theme",
            "f1",
        )
    add(
        "match",
        "IAP: mean content Edit-F1 over ordered pairs",
        "clinician vs clinician",
        "000 App. E.2",
        "match",
        "iap",
        "average",
        "content_f1",
    )
    add(
        "match",
        "IAP: mean theme Edit-F1 over ordered pairs",
        "clinician vs clinician",
        "000 App. E.2",
        "match",
        "iap",
        "average",
        "theme_f1",
    )
    for i, row in enumerate(r.get("rank", "by_source") or []):
        add(
            "rank",
            "Average win rate",
            row["source"],
            "001 Table 3",
            "rank",
            "by_source",
            i,
            "average_win_rate",
        )
        add("rank", "Mean rank", row["source"], "001 Table 3", "rank", "by_source", i, "mean_rank")
        add(
            "rank",
            "% correct",
            row["source"],
            "001 Table 3",
            "rank",
            "by_source",
            i,
            "percent_correct",
            fmt=PCT,
        )
    add(
        "rank",
        "Inter-rater Kendall's tau-b, mean",
        "all rater pairs",
        "001 Table 4",
        "rank",
        "rater_tau",
        "mean",
    )
    # Table S9's "Avg. Corr" (-0.79) is the mean of the rankings' coefficients
    add(
        "rank",
        "Correctness vs rank: point-biserial, mean over rankings",
        "all rankings",
        "001 Table S9 (Avg. Corr)",
        "rank",
        "correctness_vs_rank",
        "mean",
    )
    add(
        "rank",
        "Correctness vs rank: point-biserial, pooled",
        "all rankings",
        "not in 001 (one coefficient over every ranking's rows)",
        "rank",
        "correctness_vs_rank",
        "pooled",
    )
    for level in ("total", "easy", "medium", "hard"):
        add(
            "urgency",
            f"Pairwise accuracy ({level})",
            "all annotators",
            "002 Table 2",
            "urgency",
            "accuracy",
            level,
            "accuracy",
        )
    add(
        "urgency",
        "Percent agreement",
        "pairs with 2+ answers",
        "002 Table 4",
        "urgency",
        "agreement",
        "percent_agreement",
    )
    add(
        "urgency",
        "Krippendorff's alpha",
        "pairs with 2+ answers",
        "002 Table 4",
        "urgency",
        "agreement",
        "alpha",
    )
    for i, inbox in enumerate(r.get("urgency", "inboxes") or []):
        for k in ("ndcg@10", "t_ndcg@10", "ndcg@30", "t_ndcg@30"):
            add(
                "urgency",
                k.upper().replace("_", "-"),
                f"inbox {inbox['inbox']}",
                "002 Sec. 4.2",
                "urgency",
                "inboxes",
                i,
                "all",
                k,
            )
    add(
        "eppc",
        "Krippendorff's alpha, pooled",
        "all coders",
        "003 Sec. 3.2.2",
        "eppc",
        "alpha",
        "pooled",
    )
    for i, row in enumerate(r.get("eppc", "kappa") or []):
        add(
            "eppc",
            "Cohen's kappa, pooled",
            f"{row['annotator_a']} vs {row['annotator_b']}",
            "003 Sec. 3.2.2",
            "eppc",
            "kappa",
            i,
            "pooled",
        )
    for i, row in enumerate(r.get("eppc", "vs_gold") or []):
        add(
            "eppc",
            "Code F1 vs gold",
            row["annotator"],
            "003 App. B (1)",
            "eppc",
            "vs_gold",
            i,
            "codes",
            "f1",
        )
    add(
        "empathy",
        "Percent agreement",
        "units with 2+ answers",
        "004 Sec. 3.6",
        "empathy",
        "agreement",
        "percent_agreement",
    )
    add(
        "empathy",
        "Krippendorff's alpha",
        "units with 2+ answers",
        "004 Sec. 3.6",
        "empathy",
        "agreement",
        "alpha",
    )
    for i, row in enumerate(r.get("empathy", "by_source_pair") or []):
        pair = f"{row['first_source']} vs {row['second_source']}"
        add(
            "empathy",
            f"Share: {row['first_source']} more empathetic",
            pair,
            "004 Table 1, Sec. 4.1",
            "empathy",
            "by_source_pair",
            i,
            "share_first_more",
        )
        add(
            "empathy",
            "Share: equally empathetic",
            pair,
            "004 Table 1, Sec. 4.1",
            "empathy",
            "by_source_pair",
            i,
            "share_equal",
        )
    for stat in ("recall", "precision", "f1"):
        add(
            "facts",
            f"Fact-{stat.capitalize()} (micro)",
            "all pairs",
            "004 eqs. 3-4",
            "facts",
            "overall",
            "micro",
            stat,
        )
    add("facts", "Fact-F1 (macro)", "all pairs", "004 eqs. 3-4", "facts", "overall", "macro", "f1")
    add(
        "facts",
        "Loss rate",
        "all pairs",
        "004 Supp. Table 4",
        "facts",
        "overall",
        "flow",
        "loss_rate",
    )
    add(
        "facts",
        "Hallucination rate",
        "all pairs",
        "004 Supp. Table 4",
        "facts",
        "overall",
        "flow",
        "hallucination_rate",
    )
    headline = Table(
        "summary_figures",
        "Headline figures",
        [*_SUMMARY_HEADERS, "Paper", "JSON key"],
        rows,
        note="Value on all units; 95% percentile bootstrap interval over units; n = units the "
        "figure rests on. Paper: 000 drafting and Edit-F1, 001 MedAlign, 002 PMR-Bench, "
        "003 EPPCMinerBen, 004 empathy edits and MedFactChecking (docs/report.md).",
    )
    study = r.get("study")
    kinds = Table(
        "summary_kinds",
        "Units and answers per kind",
        ["Kind", "Units", "Answers", "Gold answers"],
        [
            [
                _c(kind),
                r.cell("study", "kinds", kind, "n_units"),
                r.cell("study", "kinds", kind, "n_answers"),
                r.cell("study", "kinds", kind, "n_gold_answers"),
            ]
            for kind in study["kinds"]
        ],
    )
    people = Table(
        "summary_annotators",
        "Annotators",
        ["Annotator", "Model", "Answers (every kind, gold included)"],
        [
            [
                r.cell("study", "annotators", i, "name"),
                _c("yes" if a["is_model"] else "no"),
                r.cell("study", "annotators", i, "n_answers"),
            ]
            for i, a in enumerate(study["annotators"])
        ],
    )
    settings = r.get("settings")
    note = (
        f"{r.get('project', 'name')} ({r.get('project', 'file')}): {study['n_cases']} cases, "
        f"{study['n_responses']} responses. Bootstrap: {settings['n_resamples']} resamples, "
        f"seed {settings['seed']}, {settings['ci_method']}; "
        + ("drafts included." if settings["include_drafts"] else "submitted answers only.")
        + " An empty figure is one these answers do not define: alpha or kappa when every "
        "answer holds the same value, a share or mean with nothing to count, an interval with "
        "no resamples (docs/report.md, \"Undefined values\")."
    )
    return Sheet("Summary", "Agreement report", note, [headline, kinds, people])


# --- one sheet per kind --------------------------------------------------------------------------


def _respond(r: _Reader) -> Sheet:
    annotators = r.get("respond", "annotators") or []
    proportions = []
    for i, row in enumerate(r.get("respond", "theme_proportions") or []):
        proportions.append(
            [
                r.cell("respond", "theme_proportions", i, "theme"),
                r.cell("respond", "theme_proportions", i, "n_responses_including"),
                *r.fig("respond", "theme_proportions", i, "share"),
                r.n("respond", "theme_proportions", i, "share"),
                *[
                    r.cell("respond", "theme_proportions", i, "share_by_annotator", a)
                    if a in row["share_by_annotator"]
                    else _c(None)
                    for a in annotators
                ],
            ]
        )
    headers = [
        "Theme",
        "Responses including",
        *_fig_headers("Share"),
        "n cases",
        *[f"Share, {a}" for a in annotators],
        "error bar -",
        "error bar +",
    ]
    t6 = Table(
        "respond_theme_proportions",
        "Themes included in clinicians' responses (000 Table 6)",
        headers,
        _error_columns(proportions, 2),
        note="Share of theme-guided responses with the theme's box filled.",
        chart=Chart(
            "bar",
            "Share of responses including each theme",
            0,
            [2],
            y_title="share",
            errors=[(len(headers) - 2, len(headers) - 1)],  # the distances, not the bounds
            y_min=0,
            y_max=1,
        ),
    )
    agreement = []
    for i, _ in enumerate(r.get("respond", "theme_agreement", "per_theme") or []):
        base = ("respond", "theme_agreement", "per_theme", i)
        agreement.append(
            [
                r.cell(*base, "theme"),
                *r.fig(*base, "strict_inclusion"),
                *r.fig(*base, "strict_exclusion"),
                *r.fig(*base, "strict_agreement"),
                *r.fig(*base, "alpha"),
                r.n(*base, "alpha"),
            ]
        )
    t3 = Table(
        "respond_theme_agreement",
        "Agreement on themes between clinicians (000 Table 3, App. E.1)",
        [
            "Theme",
            *_fig_headers("Strict inclusion"),
            *_fig_headers("Strict exclusion"),
            *_fig_headers("Strict agreement"),
            *_fig_headers("Alpha"),
            "n cases",
        ],
        agreement,
        note="Over cases with 2+ theme-guided responses; alpha = Krippendorff's (nominal) on "
        "presence/absence.",
        heat=(10, 10),
        heat_range=(-1.0, 0.0, 1.0),
    )
    similarity = Table(
        "respond_similarity",
        "Similarity between clinicians' responses (000 Table 11 stand-in: TF-IDF cosine)",
        ["Annotator A", "Annotator B", "Mean cosine", "n cases"],
        [
            [
                r.cell("respond", "similarity", "by_pair", i, "annotator_a"),
                r.cell("respond", "similarity", "by_pair", i, "annotator_b"),
                r.cell("respond", "similarity", "by_pair", i, "mean_cosine"),
                r.cell("respond", "similarity", "by_pair", i, "n_units", fmt=INT),
            ]
            for i, _ in enumerate(r.get("respond", "similarity", "by_pair") or [])
        ],
    )
    load_rows = []
    for i, _ in enumerate(r.get("respond", "editing_load", "by_annotator") or []):
        base = ("respond", "editing_load", "by_annotator", i)
        load_rows.append(
            [
                r.cell(*base, "annotator"),
                r.cell(*base, "n_answers"),
                r.cell(*base, "draft_words"),
                r.cell(*base, "final_words"),
                r.cell(*base, "kept"),
                r.cell(*base, "deleted"),
                r.cell(*base, "added"),
                *r.fig(*base, "f1"),
                *r.fig(*base, "mean_active_seconds", fmt="0.0"),
            ]
        )
    load = Table(
        "respond_editing_load",
        "Edits of drafts, measured (000 Sec. 3.1, observed side)",
        [
            "Annotator",
            "Answers",
            "Draft words",
            "Final words",
            "Kept",
            "Deleted",
            "Added",
            *_fig_headers("Word F1"),
            *_fig_headers("Mean active seconds"),
        ],
        load_rows,
    )
    times = Table(
        "respond_time_on_task",
        "Time on task",
        ["Mode", "Answers", "Mean seconds", "Median seconds"],
        [
            [
                r.cell("respond", "time_on_task", i, "mode"),
                r.cell("respond", "time_on_task", i, "n_answers", fmt=INT),
                r.cell("respond", "time_on_task", i, "mean_seconds", fmt="0.0"),
                r.cell("respond", "time_on_task", i, "median_seconds", fmt="0.0"),
            ]
            for i, _ in enumerate(r.get("respond", "time_on_task") or [])
        ],
    )
    return Sheet(
        "Respond",
        "Clinicians' own responses (seed 000)",
        _counts_note(r, "respond"),
        [t6, t3, similarity, load, times],
    )


def _counts_note(r: _Reader, kind: str) -> str:
    section = r.get(kind) or {}
    return (
        f"{section.get('n_answers', 0)} submitted answers on {section.get('n_units', 0)} units "
        f"by {section.get('n_annotators', 0)} annotators "
        f"({', '.join(section.get('annotators', [])) or 'none'})."
    )


def _content_row(r: _Reader, base: JsonPath, labels: list[Cell]) -> list[Cell]:
    return [
        *labels,
        r.cell(*base, "n_units"),
        r.cell(*base, "n_pairs"),
        r.cell(*base, "content", "em"),
        r.cell(*base, "content", "ea"),
        r.cell(*base, "content", "ed"),
        *r.fig(*base, "content", "precision"),
        *r.fig(*base, "content", "recall"),
        *r.fig(*base, "content", "f1"),
    ]


def _theme_row(r: _Reader, base: JsonPath, labels: list[Cell]) -> list[Cell]:
    return [
        *labels,
        r.cell(*base, "theme", "tp"),
        r.cell(*base, "theme", "fp"),
        r.cell(*base, "theme", "fn"),
        *r.fig(*base, "theme", "precision"),
        *r.fig(*base, "theme", "recall"),
        *r.fig(*base, "theme", "f1"),
    ]


_CONTENT_HEADERS = [
    "Units",
    "Pairs",
    "EM",
    "EA",
    "ED",
    *_fig_headers("Precision"),
    *_fig_headers("Recall"),
    *_fig_headers("Edit-F1"),
]
_THEME_HEADERS = [
    "TP",
    "FP",
    "FN",
    *_fig_headers("Precision"),
    *_fig_headers("Recall"),
    *_fig_headers("Edit-F1"),
]
ERR = ["err -", "err +"]


def _err(name: str) -> list[str]:
    """Error-bar column headers named after their figure: a table with two charted figures
    must not have two identical pairs."""
    return [f"{name} err -", f"{name} err +"]


def _match(r: _Reader) -> Sheet:
    by_source = r.get("match", "by_source") or []
    several = len({x["unit_set"] for x in by_source}) > 1
    labels = [
        [_c(f"{row['source']} ({row['unit_set']})" if several else row["source"])]
        for row in by_source
    ]
    content = [_content_row(r, ("match", "by_source", i), labels[i]) for i in range(len(by_source))]
    t_content = Table(
        "match_by_source",
        "Content-Level Edit-F1 per draft source (000 Sec. 3.1, Algorithm 1)",
        ["Draft source", *_CONTENT_HEADERS, *ERR],
        _error_columns(content, 12),
        note="Micro over the pairs (counts summed first): P = EM/(EM+ED), R = EM/(EM+EA), "
        "F1 = 2EM/(2EM+ED+EA).",
        chart=Chart(
            "bar",
            "Content-Level Edit-F1 per draft source",
            0,
            [12],
            y_title="Edit-F1",
            errors=[(15, 16)],
            y_min=0,
            y_max=1,
        ),
    )
    theme = [_theme_row(r, ("match", "by_source", i), labels[i]) for i in range(len(by_source))]
    t_theme = Table(
        "match_by_source_theme",
        "Theme-Level Edit-F1 per draft source (000 Sec. 3.2)",
        ["Draft source", *_THEME_HEADERS, *ERR],
        _error_columns(theme, 10),
        note="Each answer's reference theme set against its draft theme set; Other left out.",
        chart=Chart(
            "bar",
            "Theme-Level Edit-F1 per draft source",
            0,
            [10],
            y_title="Edit-F1",
            errors=[(13, 14)],
            y_min=0,
            y_max=1,
        ),
    )
    pairs = r.get("match", "iap", "ordered_pairs") or []
    iap_labels = [
        [
            r.cell("match", "iap", "ordered_pairs", i, "reference_author"),
            r.cell("match", "iap", "ordered_pairs", i, "draft_author"),
        ]
        for i in range(len(pairs))
    ]
    iap_content = [
        _content_row(r, ("match", "iap", "ordered_pairs", i), iap_labels[i])
        for i in range(len(pairs))
    ]
    iap_theme = [
        _theme_row(r, ("match", "iap", "ordered_pairs", i), iap_labels[i])
        for i in range(len(pairs))
    ]
    if r.get("match", "iap", "average") is not None:
        mean = [_c("mean over ordered pairs"), _c("")]
        iap_content.append(
            [*mean, *[_c(None)] * 11, *r.fig("match", "iap", "average", "content_f1")]
        )
        iap_theme.append([*mean, *[_c(None)] * 9, *r.fig("match", "iap", "average", "theme_f1")])
    t_iap = Table(
        "match_iap",
        "Inter-annotator predictability, content: one clinician's response as the other's "
        "draft (000 App. E.2)",
        ["Reference by", "Draft by", *_CONTENT_HEADERS],
        iap_content,
        note="The last row is the paper's average: the mean of the ordered pairs' F1.",
    )
    t_iap_theme = Table(
        "match_iap_theme",
        "Inter-annotator predictability, themes (000 App. E.2)",
        ["Reference by", "Draft by", *_THEME_HEADERS],
        iap_theme,
    )
    judge = []
    for i, _ in enumerate(r.get("match", "judge_agreement") or []):
        base = ("match", "judge_agreement", i)
        judge.append(
            [
                r.cell(*base, "reference_annotator"),
                r.cell(*base, "judged_annotator"),
                _c("yes" if r.get(*base, "judged_is_model") else "no"),
                r.cell(*base, "n_sentences"),
                r.cell(*base, "n_reference_matches"),
                r.cell(*base, "n_reference_non_matches"),
                *r.fig(*base, "agreement"),
                *r.fig(*base, "non_match_agreement"),
                *r.fig(*base, "match_agreement"),
                *r.fig(*base, "match_overlap"),
            ]
        )
    t_judge = Table(
        "match_judge_agreement",
        "Agreement on match decisions, the reference annotator's as denominators "
        "(000 Table 8, App. C.1)",
        [
            "Reference",
            "Judged",
            "Model",
            "Sentences",
            "Matches",
            "NO MATCH",
            *_fig_headers("Agreement"),
            *_fig_headers("NO MATCH agr."),
            *_fig_headers("Match agr."),
            *_fig_headers("Match overlap"),
        ],
        judge,
    )
    per_theme, recall = [], []
    for i, row in enumerate(by_source):
        for j, _ in enumerate(row["per_theme"]):
            base = ("match", "by_source", i, "per_theme", j)
            per_theme.append(
                [
                    _c(row["source"]),
                    r.cell(*base, "theme"),
                    r.cell(*base, "tp"),
                    r.cell(*base, "fp"),
                    r.cell(*base, "fn"),
                    r.cell(*base, "precision"),
                    r.cell(*base, "recall"),
                    r.cell(*base, "f1"),
                    r.cell(*base, "support"),
                ]
            )
        for j, _ in enumerate(row["per_theme_content_recall"]):
            base = ("match", "by_source", i, "per_theme_content_recall", j)
            recall.append(
                [
                    _c(row["source"]),
                    r.cell(*base, "theme"),
                    r.cell(*base, "n_sentences"),
                    r.cell(*base, "n_matched"),
                    r.cell(*base, "recall"),
                ]
            )
    t15 = Table(
        "match_per_theme",
        "Theme-level scores per theme (000 Table 15)",
        ["Source", "Theme", "TP", "FP", "FN", "Precision", "Recall", "F1", "Support"],
        per_theme,
        heat=(7, 7),
    )
    t14 = Table(
        "match_per_theme_recall",
        "Content recall per theme of the reference (000 Table 14)",
        ["Source", "Theme", "Reference sentences", "Matched", "Recall"],
        recall,
    )
    return Sheet(
        "Match",
        "Drafting quality from content matching (seed 000)",
        _counts_note(r, "match"),
        [t_content, t_theme, t_iap, t_iap_theme, t_judge, t15, t14],
    )


def _rank(r: _Reader) -> Sheet:
    rows = []
    for i, _ in enumerate(r.get("rank", "by_source") or []):
        base = ("rank", "by_source", i)
        rows.append(
            [
                r.cell(*base, "source"),
                r.cell(*base, "n_rankings"),
                r.cell(*base, "n_judged"),
                r.cell(*base, "n_correct"),
                *r.fig(*base, "average_win_rate"),
                *r.fig(*base, "mean_rank", fmt="0.00"),
                *r.fig(*base, "percent_correct", fmt=PCT),
                r.n(*base, "average_win_rate"),
            ]
        )
    t3 = Table(
        "rank_by_source",
        "Rankings per source (001 Table 3)",
        [
            "Source",
            "Rankings",
            "Judged",
            "Correct",
            *_fig_headers("Average win rate"),
            *_fig_headers("Mean rank"),
            *_fig_headers("% correct"),
            "n units",
            "error bar -",
            "error bar +",
        ],
        _error_columns(rows, 4),
        note="WR: unweighted mean of the non-tied win rates against the opponents met. Mean "
        "rank: 1 = best, ties share their places.",
        chart=Chart(
            "bar",
            "Average win rate per source",
            0,
            [4],
            y_title="win rate",
            errors=[(14, 15)],
            y_min=0,
            y_max=1,
        ),
    )
    sources = r.get("rank", "sources") or []
    where = {
        (w["source"], w["opponent"]): i for i, w in enumerate(r.get("rank", "win_rates") or [])
    }
    matrix = []
    for source in sources:
        line = [_c(source)]
        for opponent in sources:
            i = where.get((source, opponent))
            line.append(
                r.cell("rank", "win_rates", i, "win_rate", "value") if i is not None else _c(None)
            )
        matrix.append(line)
    heat = Table(
        "rank_win_rates",
        "Win rate of the row's source against the column's (001 Figure 2)",
        ["Source \\ opponent", *sources],
        matrix,
        note="Wins / rankings holding both (ties count for neither); colours from red (0) to "
        "green (1).",
        heat=(1, len(sources)) if sources else None,
    )
    pairs = []
    for i, _ in enumerate(r.get("rank", "win_rates") or []):
        base = ("rank", "win_rates", i)
        pairs.append(
            [
                r.cell(*base, "source"),
                r.cell(*base, "opponent"),
                r.cell(*base, "n_rankings"),
                r.cell(*base, "wins"),
                r.cell(*base, "losses"),
                r.cell(*base, "ties"),
                *r.fig(*base, "win_rate"),
                *r.fig(*base, "win_rate_non_tied"),
            ]
        )
    t_pairs = Table(
        "rank_win_rate_pairs",
        "Every ordered pair of sources (001 Figure 2, Figure S8)",
        [
            "Source",
            "Opponent",
            "Rankings",
            "Wins",
            "Losses",
            "Ties",
            *_fig_headers("Win rate"),
            *_fig_headers("Win rate, non-tied"),
        ],
        pairs,
    )
    criteria_ids = sorted({c for row in r.get("rank", "criteria") or [] for c in row["counts"]})
    t_criteria = Table(
        "rank_criteria",
        "Reasons a response was marked incorrect (001 Sec. 5)",
        ["Source", "Responses", "With any reason", *criteria_ids],
        [
            [
                r.cell("rank", "criteria", i, "source"),
                r.cell("rank", "criteria", i, "n_responses"),
                r.cell("rank", "criteria", i, "n_with_any_criterion"),
                *[
                    r.cell("rank", "criteria", i, "counts", c) if c in row["counts"] else _c(0, INT)
                    for c in criteria_ids
                ],
            ]
            for i, row in enumerate(r.get("rank", "criteria") or [])
        ],
    )
    tau = [
        [
            r.cell("rank", "rater_tau", "by_pair", i, "rater_a"),
            r.cell("rank", "rater_tau", "by_pair", i, "rater_b"),
            r.cell("rank", "rater_tau", "by_pair", i, "mean_tau"),
            r.cell("rank", "rater_tau", "by_pair", i, "n"),
        ]
        for i, _ in enumerate(r.get("rank", "rater_tau", "by_pair") or [])
    ]
    tau.append(
        [
            _c("all pairs"),
            _c(""),
            r.cell("rank", "rater_tau", "mean", "value"),
            r.cell("rank", "rater_tau", "n_comparisons"),
        ]
    )
    t_tau = Table(
        "rank_rater_tau",
        "Kendall's tau-b between raters (001 Table 4, Inter-Rater)",
        ["Rater A", "Rater B", "Mean tau-b", "Comparisons"],
        tau,
    )
    cvr = ("rank", "correctness_vs_rank")
    t_cvr = Table(
        "rank_correctness_vs_rank",
        "Correctness vs rank: point-biserial correlation (001 App. L, Table S9)",
        ["Reading", *_fig_headers("r"), "n units", "Comparisons", "SD"],
        [
            [
                _c("mean over rankings"),
                *r.fig(*cvr, "mean"),
                r.n(*cvr, "mean"),
                r.cell(*cvr, "n_comparisons"),
                r.cell(*cvr, "sd"),
            ],
            [_c("pooled"), *r.fig(*cvr, "pooled"), r.n(*cvr, "pooled"), _c(None), _c(None)],
        ],
    )
    return Sheet(
        "Rank",
        "Ranking drafts (seed 001)",
        _counts_note(r, "rank"),
        [t3, heat, t_pairs, t_criteria, t_tau, t_cvr],
    )


_SORTED_BY = {"win_rate": "win rate", "bradley_terry": "Bradley-Terry strength (adaptive)"}


def _adaptive_inboxes(r: _Reader) -> Table | None:
    """The inboxes sorted adaptively, and with how many judgements (issue 19)."""
    rows = []
    for inbox in r.get("urgency", "inboxes") or []:
        adaptive = inbox.get("adaptive")
        if not adaptive:
            continue
        by = ", ".join(f"{who} {n}" for who, n in adaptive["judgements_by_annotator"].items())
        rows.append(
            [
                _c(inbox["inbox"]),
                _c("; ".join(adaptive["unit_sets"])),
                _c(adaptive["n_pairs"], INT),
                _c(adaptive["n_judgements"], INT),
                _c(by),
            ]
        )
    if not rows:
        return None
    return Table(
        "urgency_adaptive_inboxes",
        "Inboxes sorted adaptively (pairs chosen from each clinician's answers)",
        ["Inbox", "Unit sets", "Pairs in the inbox", "Judgements made", "Judgements by person"],
        rows,
        note="Each clinician judged only some pairs, each chosen after their previous answer "
        "(a Bradley-Terry fit; benchmarks/bench_adaptive_pairs.py measures the saving).",
    )


def _ndcg_curve(r: _Reader, i: int) -> Table:
    inbox = r.get("urgency", "inboxes", i)
    mapping = r.get("urgency", "relevance_mapping") or {}
    relevance = [
        float(mapping[str(row["level"])]) for row in inbox["order"] if row["level"] is not None
    ]
    rows = [
        [_c(k, INT), _c(ndcg_at_k(relevance, k), NUM), _c(t_ndcg_at_k(relevance, k), NUM)]
        for k in range(1, len(relevance) + 1)
    ]
    return Table(
        f"urgency_ndcg_curve_{i + 1}",
        f"NDCG@k of inbox {inbox['inbox']} sorted by "
        f"{_SORTED_BY.get(inbox.get('score'), 'win rate')} (002 Sec. 4.2)",
        ["k", "NDCG@k", "T-NDCG@k"],
        rows,
        note="The pooled order (all people's answers); relevance = 6 - level. k = 10 and 30 "
        "are the report's figures.",
        chart=Chart(
            "line",
            f"NDCG curve: {inbox['inbox']}",
            0,
            [1, 2],
            y_title="score",
            x_title="k (messages read)",
            y_min=-1 if relevance else None,
            y_max=1,
        ),
    )


def _agreement_rows(r, kind: str) -> list[list]:
    """Agreement between people (percent, alpha), then each model judge against each
    annotator: the same rows for urgency (002 Table 4) and empathy (004)."""
    rows = [
        [
            _c("people"),
            _c(""),
            r.cell(kind, "agreement", "n_units"),
            r.cell(kind, "agreement", "n_answers"),
            *r.fig(kind, "agreement", "percent_agreement"),
            *r.fig(kind, "agreement", "alpha"),
        ]
    ]
    for i, _ in enumerate(r.get(kind, "model_agreement") or []):
        base = (kind, "model_agreement", i)
        rows.append(
            [
                r.cell(*base, "model"),
                r.cell(*base, "annotator"),
                r.cell(*base, "n_units"),
                r.cell(*base, "n_answers"),
                *r.fig(*base, "percent_agreement"),
                *r.fig(*base, "alpha"),
            ]
        )
    return rows


def _urgency(r: _Reader) -> Sheet:
    levels = ("easy", "medium", "hard", "total")
    groups: list[tuple[Cell, JsonPath]] = [(_c("all people"), ("urgency", "accuracy"))]
    for name in ("accuracy_by_annotator", "model_accuracy"):
        for i, _ in enumerate(r.get("urgency", name) or []):
            base = ("urgency", name, i)
            groups.append((r.cell(*base, "annotator"), base))
    rows = []
    for label, base in groups:
        for level in levels:
            rows.append(
                [
                    label,
                    _c(level),
                    r.cell(*base, level, "n"),
                    r.cell(*base, level, "correct"),
                    *r.fig(*base, level, "accuracy"),
                    r.cell(*base, "n_excluded_equal_levels"),
                ]
            )
    t2 = Table(
        "urgency_accuracy",
        "Pairwise accuracy against the reference levels, by difficulty (002 Table 2)",
        [
            "Answers of",
            "Difficulty",
            "Answers",
            "Correct",
            *_fig_headers("Accuracy"),
            "Left out (equal levels)",
        ],
        rows,
        note="Easy: level gap >= 4, medium 2-3, hard 1; pairs of equal levels have no right "
        "answer and are left out.",
        chart=Chart(
            "bar",
            "Pairwise accuracy by difficulty (all people)",
            1,
            [4],
            y_title="accuracy",
            errors=[(8, 9)],
            y_min=0,
            y_max=1,
        ),
        chart_rows=4,
    )
    t2.rows = _error_columns(t2.rows, 4)
    t2.headers += ERR
    agreement = _agreement_rows(r, "urgency")
    t4 = Table(
        "urgency_agreement",
        "Agreement on which patient is more urgent (002 Table 4)",
        [
            "Between",
            "and",
            "Pairs",
            "Answers",
            *_fig_headers("Percent agreement"),
            *_fig_headers("Alpha"),
        ],
        agreement,
        note="Each answer coded as 'chose the unit's first case', never by screen side.",
    )
    pb = ("urgency", "position_bias")
    t_bias = Table(
        "urgency_position_bias",
        "Position bias",
        ["Answers", "Chose the case shown first", *_fig_headers("Share")],
        [
            [
                r.cell(*pb, "n_answers"),
                r.cell(*pb, "n_chose_first_shown"),
                *r.fig(*pb, "share_chose_first_shown"),
            ]
        ],
    )
    scorers = []
    for i, inbox in enumerate(r.get("urgency", "inboxes") or []):
        who = [("all people", ("urgency", "inboxes", i, "all"))] + [
            (row["annotator"], ("urgency", "inboxes", i, "by_annotator", j))
            for j, row in enumerate(inbox["by_annotator"])
        ]
        sorted_by = _SORTED_BY.get(inbox.get("score"), inbox.get("score"))
        for name, base in who:
            for k in (10, 30):
                scorers.append(
                    [
                        _c(inbox["inbox"]),
                        _c(sorted_by),
                        _c(name),
                        _c(k, INT),
                        r.cell(*base, "n_pairs"),
                        r.cell(*base, "n_answers"),
                        *r.fig(*base, f"ndcg@{k}"),
                        *r.fig(*base, f"t_ndcg@{k}"),
                        r.cell(*base, f"expected_t_ndcg@{k}", "mean"),
                    ]
                )
    t_inbox = Table(
        "urgency_inboxes",
        "Inboxes sorted: NDCG@k and T-NDCG@k (002 Sec. 4.2-4.3)",
        [
            "Inbox",
            "Sorted by",
            "Answers of",
            "k",
            "Pairs",
            "Answers",
            *_fig_headers("NDCG@k"),
            *_fig_headers("T-NDCG@k"),
            "Expected T-NDCG@k",
        ],
        scorers,
        note="Expected T-NDCG: the mean over the random orders of messages with equal scores. "
        "An adaptive inbox (each clinician judged pairs chosen from their answers so far) is "
        "sorted by Bradley-Terry strengths, not win rates; its intervals redraw each "
        "judgement's outcome from the fitted model and fit again.",
    )
    tables = [t2, t4, t_bias, t_inbox]
    adaptive = _adaptive_inboxes(r)
    if adaptive is not None:
        tables.append(adaptive)
    for i, _ in enumerate(r.get("urgency", "inboxes") or []):
        tables.append(_ndcg_curve(r, i))
    return Sheet(
        "Urgency", "Pairwise urgency and inboxes (seed 002)", _counts_note(r, "urgency"), tables
    )


def _prf_row(r: _Reader, base: JsonPath, part: str) -> list[Cell]:
    return [
        r.cell(*base, part, "tp"),
        r.cell(*base, part, "fp"),
        r.cell(*base, part, "fn"),
        *r.fig(*base, part, "precision"),
        *r.fig(*base, part, "recall"),
        *r.fig(*base, part, "f1"),
    ]


_PRF_HEADERS = ["TP", "FP", "FN", *_fig_headers("P"), *_fig_headers("R"), *_fig_headers("F1")]


def _eppc(r: _Reader) -> Sheet:
    tables = []
    for key, title in (
        ("vs_gold", "against the adjudicated gold"),
        ("between_annotators", "between annotators (A as the reference)"),
    ):
        rows = r.get("eppc", key) or []
        for part, what, paper in (
            ("codes", "Codes", "App. B (1)"),
            ("code_subcode", "Code + subcode pairs", "App. B (2)"),
            ("spans", "Evidence spans, relaxed match", "App. B (3)"),
        ):
            body = []
            for i in range(len(rows)):
                base = ("eppc", key, i)
                who = (
                    [r.cell(*base, "annotator"), _c("gold")]
                    if key == "vs_gold"
                    else [r.cell(*base, "annotator_a"), r.cell(*base, "annotator_b")]
                )
                body.append([*who, r.cell(*base, "n_units"), *_prf_row(r, base, part)])
            tables.append(
                Table(
                    f"eppc_{key}_{part}",
                    f"{what} {title} (003 {paper})",
                    [
                        "Annotator" if key == "vs_gold" else "Annotator A",
                        "Reference" if key == "vs_gold" else "Annotator B",
                        "Sentences",
                        *_PRF_HEADERS,
                    ],
                    body,
                    note="Micro over sentences. A span matches when one's word tokens are all "
                    "in the other's, or their Jaccard >= 0.6."
                    if part == "spans" and key == "vs_gold"
                    else "",
                )
            )
    kappa_rows = r.get("eppc", "kappa") or []
    pairs = [f"{k['annotator_a']} vs {k['annotator_b']}" for k in kappa_rows]
    pooled = [
        [_c(pairs[i]), r.cell("eppc", "kappa", i, "n_units"), *r.fig("eppc", "kappa", i, "pooled")]
        for i in range(len(kappa_rows))
    ]
    t_kappa = Table(
        "eppc_kappa",
        "Cohen's kappa between annotators, pooled over (sentence, code) items (003 Sec. 3.2.2)",
        ["Pair", "Sentences", *_fig_headers("Kappa")],
        pooled,
    )
    codes = r.get("eppc", "codes") or []
    alpha_codes = r.get("eppc", "alpha", "per_code") or []
    per_code = []
    for code in codes:
        line = [_c(code)]
        for i, k in enumerate(kappa_rows):
            j = next((j for j, c in enumerate(k["per_code"]) if c["code"] == code), None)
            line.append(
                r.cell("eppc", "kappa", i, "per_code", j, "kappa", "value")
                if j is not None
                else _c(None)
            )
        j = next((j for j, c in enumerate(alpha_codes) if c["code"] == code), None)
        line.append(
            r.cell("eppc", "alpha", "per_code", j, "alpha", "value") if j is not None else _c(None)
        )
        per_code.append(line)
    t_codes = Table(
        "eppc_kappa_per_code",
        "Kappa per code and pair, and Krippendorff's alpha per code (colour: red 0, green 1)",
        ["Code", *[f"kappa {p}" for p in pairs], "alpha (all coders)"],
        per_code,
        heat=(1, len(pairs) + 1),
        heat_range=(0.0, 0.6, 1.0),
    )
    batches: list[tuple[str, str]] = []
    for k in kappa_rows:
        for b in k["per_batch"]:
            if (b["unit_set"], b["batch"]) not in batches:
                batches.append((b["unit_set"], b["batch"]))
    several = len({s for s, _ in batches}) > 1
    batch_rows = []
    for unit_set, batch in batches:
        line = [_c(f"{batch} ({unit_set})" if several else batch)]
        for i, k in enumerate(kappa_rows):
            j = next(
                (
                    j
                    for j, b in enumerate(k["per_batch"])
                    if (b["unit_set"], b["batch"]) == (unit_set, batch)
                ),
                None,
            )
            line.append(
                r.cell("eppc", "kappa", i, "per_batch", j, "kappa") if j is not None else _c(None)
            )
        batch_rows.append(line)
    t_batch = Table(
        "eppc_kappa_per_batch",
        "Kappa per batch of units, in order (003 Sec. 3.2.2)",
        ["Batch", *pairs],
        batch_rows,
        note="Pooled kappa of each pair on each batch (units.batch, or the set's messages 1-50, "
        "51-100... in order, all of a message's sentences in its batch).",
        chart=Chart(
            "line",
            "Cohen's kappa per batch",
            0,
            list(range(1, len(pairs) + 1)),
            y_title="kappa",
            x_title="batch",
            y_min=0,
            y_max=1,
        )
        if pairs and batches
        else None,
    )
    alpha = [
        [
            _c("all coders"),
            r.cell("eppc", "alpha", "n_coders"),
            r.cell("eppc", "alpha", "n_units"),
            *r.fig("eppc", "alpha", "pooled"),
        ]
    ]
    t_alpha = Table(
        "eppc_alpha",
        "Krippendorff's alpha over every coder (nominal, (sentence, code) presence)",
        ["Coders", "n coders", "Sentences", *_fig_headers("Alpha")],
        alpha,
    )
    return Sheet(
        "EPPC",
        "EPPC coding (seed 003)",
        _counts_note(r, "eppc"),
        [t_kappa, t_batch, t_codes, t_alpha, *tables],
    )


def _empathy(r: _Reader) -> Sheet:
    rows = []
    for i, _ in enumerate(r.get("empathy", "by_source_pair") or []):
        base = ("empathy", "by_source_pair", i)
        rows.append(
            [
                _c(f"{r.get(*base, 'first_source')} vs {r.get(*base, 'second_source')}"),
                r.cell(*base, "n_answers"),
                r.cell(*base, "n_units"),
                r.cell(*base, "n_first_more"),
                *r.fig(*base, "share_first_more"),
                r.cell(*base, "n_equal"),
                *r.fig(*base, "share_equal"),
                r.cell(*base, "n_second_more"),
                *r.fig(*base, "share_second_more"),
            ]
        )
    t = Table(
        "empathy_by_source_pair",
        "Which reply is more empathetic, per pair of sources (004 Table 1, Sec. 4.1)",
        [
            "First vs second source",
            "Answers",
            "Units",
            "First more",
            *_fig_headers("Share first"),
            "Equal",
            *_fig_headers("Share equal"),
            "Second more",
            *_fig_headers("Share second"),
        ],
        rows,
        chart=Chart(
            "bar",
            "Share of answers per pair of sources",
            0,
            [4, 8, 12],
            y_title="share",
            y_min=0,
            y_max=1,
            stacked=True,
        )
        if rows
        else None,
    )
    agreement = _agreement_rows(r, "empathy")
    t_agree = Table(
        "empathy_agreement",
        "Agreement between raters, and with a model judge",
        [
            "Between",
            "and",
            "Units",
            "Answers",
            *_fig_headers("Percent agreement"),
            *_fig_headers("Alpha"),
        ],
        agreement,
        note="Each answer coded as the unit's first response / second / equal, never by side.",
    )
    pb = ("empathy", "position_bias")
    t_bias = Table(
        "empathy_position_bias",
        "Position bias",
        ["Answers that chose", *_fig_headers("Share chose the one shown first")],
        [[r.cell(*pb, "n_answers"), *r.fig(*pb, "share_chose_first_shown")]],
    )
    return Sheet(
        "Empathy",
        "Empathy comparisons (seed 004)",
        _counts_note(r, "empathy"),
        [t, t_agree, t_bias],
    )


def _facts(r: _Reader) -> Sheet:
    groups: list[tuple[str, JsonPath]] = [("all pairs", ("facts", "overall"))]
    for i, _ in enumerate(r.get("facts", "by_source_pair") or []):
        base = ("facts", "by_source_pair", i)
        label = f"{r.get(*base, 'original_source')} -> {r.get(*base, 'edited_source')}"
        groups.append((label, base))
    for i, _ in enumerate(r.get("facts", "by_annotator") or []):
        base = ("facts", "by_annotator", i)
        groups.append((f"annotator {r.get(*base, 'annotator')}", base))

    def scores(kind: str) -> list[list[Cell]]:
        return [
            [
                _c(label),
                r.cell(*base, "n_pairs"),
                r.cell(*base, "n_units"),
                *r.fig(*base, kind, "recall"),
                *r.fig(*base, kind, "precision"),
                *r.fig(*base, kind, "f1"),
            ]
            for label, base in groups
        ]

    headers = [
        "Group",
        "Pairs",
        "Units",
        *_fig_headers("Fact-Recall"),
        *_fig_headers("Fact-Precision"),
        *_fig_headers("F1"),
    ]
    micro = Table(
        "facts_micro",
        "Fact-Recall and Fact-Precision, micro (004 eqs. 3-4, right-hand forms)",
        [*headers, *_err("Recall"), *_err("Precision")],
        _error_columns(_error_columns(scores("micro"), 3), 6),
        note="Counts summed over pairs; the empty-set rule of 004 Sec. 3.3.",
        chart=Chart(
            "bar",
            "Fact-Recall and Fact-Precision (micro)",
            0,
            [3, 6],
            y_title="score",
            errors=[(12, 13), (14, 15)],
            y_min=0,
            y_max=1,
        ),
    )
    macro = Table(
        "facts_macro",
        "Fact-Recall and Fact-Precision, macro (004 eqs. 3-4, left-hand forms)",
        headers,
        scores("macro"),
        note="Each pair's figures averaged; F1 the harmonic mean of the two averages. A pair "
        "with no medical fact on either side counts 1.0 and 1.0 (004 Sec. 3.3).",
    )
    flow = Table(
        "facts_flow",
        "Facts kept, lost and added (004 Supp. Table 4)",
        [
            "Group",
            "Pairs with no facts",
            "|C| original",
            "Preserved",
            "|C'| edited",
            "Grounded",
            "New facts",
            *_fig_headers("Loss rate"),
            *_fig_headers("Hallucination rate"),
        ],
        [
            [
                _c(label),
                r.cell(*base, "n_pairs_without_facts"),
                r.cell(*base, "flow", "n_original"),
                r.cell(*base, "flow", "n_preserved"),
                r.cell(*base, "flow", "n_edited"),
                r.cell(*base, "flow", "n_grounded"),
                r.cell(*base, "flow", "new_facts"),
                *r.fig(*base, "flow", "loss_rate"),
                *r.fig(*base, "flow", "hallucination_rate"),
            ]
            for label, base in groups
        ],
    )
    categories = Table(
        "facts_error_categories",
        "Facts not entailed, by error category (004 Supp. Table 3)",
        ["Side", "Category", "Facts"],
        [
            [
                r.cell("facts", "error_categories", i, "side"),
                r.cell("facts", "error_categories", i, "category")
                if row["category"] is not None
                else _c("(not categorised)"),
                r.cell("facts", "error_categories", i, "n"),
            ]
            for i, row in enumerate(r.get("facts", "error_categories") or [])
        ],
    )
    return Sheet(
        "Facts",
        "Fact preservation of edits (seed 004)",
        _counts_note(r, "facts"),
        [micro, macro, flow, categories],
    )


# --- raw answers ---------------------------------------------------------------------------------


def _source(row: Any) -> str:
    return row.source or row.author or row.author_kind


def _rows_by(frame: Any, key: str) -> dict[Any, Any]:
    """The frame's rows (``itertuples`` rows, without the key) by their ``key``: looked up per
    answer, a ``.loc`` each took most of the raw sheets' time on a big study."""
    with _no_collection():
        return {row.Index: row for row in frame.set_index(key).itertuples()}


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while the raw rows are made and written: their lookups keep
    hundreds of thousands of rows, and each time they grew the collector went through every
    object, holding the interpreter (the window stood still up to 0.33 s at a time on a
    10,000-case study). The rows themselves make no cycle: freed as soon as written."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _column_by(frame: Any, key: str, column: str) -> dict[Any, Any]:
    return dict(zip(frame[key], frame[column], strict=True))


_HEAD_COLUMNS = [
    ("Answer", INT),
    ("Unit", INT),
    ("Unit set", None),
    ("Position", INT),
    ("Annotator", None),
    ("Who", None),
    ("Status", None),
]


def _raw_sheets(frames: StudyFrames, r: _Reader) -> list[Sheet]:
    """The Raw sheets, one a kind; their rows are made as they are read (:class:`Rows`)."""
    answers = frames.answers
    units = _rows_by(frames.units, "unit_id")
    case_ext = _column_by(frames.cases, "case_id", "external_id")
    case_level = _column_by(frames.cases, "case_id", "urgency_level")
    responses = _rows_by(frames.responses, "response_id")
    sentence_text = _column_by(frames.sentences, "sentence_id", "text")

    def ext_case(case_id: Any) -> str | None:
        return None if case_id is None or case_id != case_id else case_ext[int(case_id)]

    def ext_resp(response_id: Any) -> str | None:
        if response_id is None or response_id != response_id:
            return None
        return responses[int(response_id)].external_id

    def src(response_id: Any) -> str | None:
        if response_id is None or response_id != response_id:
            return None
        return _source(responses[int(response_id)])

    def head(a: Any) -> list[Any]:
        unit = units[a.unit_id]
        return [
            int(a.answer_id),
            int(a.unit_id),
            _plain(unit.unit_set),
            int(unit.position),
            _plain(a.annotator),
            "gold" if a.is_gold else ("model" if a.is_model else "person"),
            _plain(a.status),
        ]

    by_kind = {k: answers[answers.kind == k] for k in answers.kind.unique()}
    by_answer = _rows_by(answers, "answer_id")
    sheets: list[Sheet] = []

    def of_kind(kind: str) -> Any:
        return by_kind.get(kind, answers.iloc[:0])

    def sheet(
        kind: str,
        title: str,
        columns: list[tuple[str, str | None]],
        size: int,
        make: Callable[[Rows], Iterator[list[Any]]],
    ) -> None:
        columns = _HEAD_COLUMNS + columns
        headers, formats = [h for h, _ in columns], [f for _, f in columns]
        table = Table(f"raw_{kind}", title, headers, Rows(size, make), formats=formats)
        sheets.append(Sheet(f"Raw {kind}", title, "", [table], raw=True))

    # respond: one row per filled theme box (in catalog order), edited draft or note
    def respond_rows(rows: Rows) -> Iterator[list[Any]]:
        themes = r.get("respond", "theme_proportions") or []
        order = {row["theme"]: k for k, row in enumerate(themes)}
        parts: dict[int, list[tuple[str, str]]] = {}
        for p in frames.respond_parts.itertuples():
            parts.setdefault(p.answer_id, []).append((p.theme, p.text))
        modes = _rows_by(frames.respond_answers, "answer_id")
        for a in rows.over(of_kind("respond").itertuples()):
            unit = units[a.unit_id]
            info = modes.get(a.answer_id)
            mode = None if info is None else info.mode
            pieces = sorted(parts.get(a.answer_id, []), key=lambda x: order.get(x[0], len(order)))
            if info is not None and _plain(info.final_text) is not None:
                pieces.append(("(edited draft)", info.final_text))
            if info is not None and _plain(info.notes):
                pieces.append(("(notes)", info.notes))
            for box, text in pieces or [(None, None)]:
                yield [
                    *head(a),
                    _plain(ext_case(unit.case_id)),
                    _plain(mode),
                    _plain(float(a.active_seconds)),
                    _plain(box),
                    _plain(text),
                    None if text is None else len(text),
                ]

    sheet(
        "respond",
        "Raw answers: theme-guided responses and edited drafts, one row per filled box",
        [
            ("Case", None),
            ("Mode", None),
            ("Active seconds", "0.0"),
            ("Theme box", None),
            ("Text", None),
            ("Characters", INT),
        ],
        len(of_kind("respond")),
        respond_rows,
    )

    # rank: one row per ranked response
    ranked = frames.rank_entries.merge(answers[["answer_id"]], on="answer_id")

    def rank_rows(rows: Rows) -> Iterator[list[Any]]:
        for e in rows.over(ranked.itertuples()):
            a = by_answer[e.answer_id]
            unit = units[a.unit_id]
            yield [
                *head(_Row(e.answer_id, a)),
                _plain(ext_case(unit.case_id)),
                _plain(ext_resp(e.response_id)),
                _plain(src(e.response_id)),
                _plain(None if e.rank != e.rank else e.rank),
                None if e.correct is None or e.correct != e.correct else bool(e.correct),
                ", ".join(e.criteria),
            ]

    sheet(
        "rank",
        "Raw answers: rankings, one row per ranked response",
        [
            ("Case", None),
            ("Response", None),
            ("Source", None),
            ("Rank", INT),
            ("Correct", None),
            ("Reasons", None),
        ],
        len(ranked),
        rank_rows,
    )

    # match: the report's own per-answer counts (the figures are sums of these)
    pairs = r.get("match", "pairs") or []

    def match_rows(rows: Rows) -> Iterator[list[Any]]:
        not_gold: dict[tuple[Any, Any], Any] = {}  # (unit, annotator) -> the first such answer
        for a in by_answer.values():
            if not a.is_gold:
                not_gold.setdefault((a.unit_id, a.annotator), a)
        for i, p in enumerate(rows.over(pairs)):
            base = ("match", "pairs", i)
            a = not_gold.get((p["unit_id"], p["annotator"]))
            yield [
                None if a is None else int(a.Index),
                r.cell(*base, "unit_id"),
                r.cell(*base, "unit_set"),
                int(units[p["unit_id"]].position),
                r.cell(*base, "annotator"),
                "model" if a is not None and a.is_model else "person",
                "submitted",
                _plain(ext_resp(p["reference_id"])),
                _plain(ext_resp(p["draft_id"])),
                r.cell(*base, "source"),
                r.cell(*base, "em"),
                r.cell(*base, "ea"),
                r.cell(*base, "ed"),
                r.cell(*base, "precision"),
                r.cell(*base, "recall"),
                r.cell(*base, "f1"),
            ]

    sheet(
        "match",
        "Raw answers: content matching, counted per answer (Algorithm 1)",
        _text_columns(
            ["Reference", "Draft", "Source", "EM", "EA", "ED", "Precision", "Recall", "F1"]
        ),
        len(pairs),
        match_rows,
    )

    # urgency
    def urgency_rows(rows: Rows) -> Iterator[list[Any]]:
        more_urgent = _column_by(frames.urgency, "answer_id", "more_urgent_case_id")
        ask_second = _column_by(frames.urgency, "answer_id", "ask_second")
        for a in rows.over(of_kind("urgency").itertuples()):
            unit = units[a.unit_id]
            level_a = case_level[int(unit.case_id)]
            level_b = case_level[int(unit.case_b_id)]
            picked = more_urgent.get(a.answer_id)
            if picked is not None and picked != picked:  # NaN: a draft with no patient chosen
                picked = None
            right = None
            if (
                picked is not None
                and level_a == level_a
                and level_b == level_b
                and level_a != level_b
            ):
                right = int(picked) == int(unit.case_id if level_a < level_b else unit.case_b_id)
            yield [
                *head(a),
                _plain(unit.batch),
                _plain(ext_case(unit.case_id)),
                _lvl(level_a),
                _plain(ext_case(unit.case_b_id)),
                _lvl(level_b),
                _plain(ext_case(picked)),
                right,
                bool(ask_second.get(a.answer_id, False)),
                bool(a.presentation.get("swap", False)),
            ]

    sheet(
        "urgency",
        "Raw answers: which patient needs care first",
        [
            ("Batch", None),
            ("Case A", None),
            ("Level A", INT),
            ("Case B", None),
            ("Level B", INT),
            ("More urgent", None),
            ("Right", None),
            ("Ask a second annotator", None),
            ("Sides swapped", None),
        ],
        len(of_kind("urgency")),
        urgency_rows,
    )

    # eppc: one row per label (an answer without labels: one empty row)
    def eppc_rows(rows: Rows) -> Iterator[list[Any]]:
        labels: dict[int, list[Any]] = {}
        for lab in frames.eppc_labels.itertuples():
            labels.setdefault(lab.answer_id, []).append(lab)
        for a in rows.over(of_kind("eppc").itertuples()):
            unit = units[a.unit_id]
            text = sentence_text[int(unit.sentence_id)]
            for lab in labels.get(a.answer_id, [None]):
                evidence = None if lab is None else " ".join(text[s:e] for s, e in lab.spans)
                yield [
                    *head(a),
                    _plain(unit.batch),
                    _plain(text),
                    None if lab is None else _plain(lab.code),
                    None if lab is None else _plain(lab.subcode),
                    evidence,
                ]

    sheet(
        "eppc",
        "Raw answers: EPPC codes, one row per code given",
        _text_columns(["Batch", "Sentence", "Code", "Subcode", "Evidence"]),
        len(of_kind("eppc")),
        eppc_rows,
    )

    # empathy
    def empathy_rows(rows: Rows) -> Iterator[list[Any]]:
        chosen = _column_by(frames.empathy, "answer_id", "more_empathetic_response_id")
        for a in rows.over(of_kind("empathy").itertuples()):
            unit = units[a.unit_id]
            pick = chosen.get(a.answer_id)
            verdict = (
                None
                if a.answer_id not in chosen
                else "equal"
                if pick != pick or pick is None
                else "first"
                if int(pick) == int(unit.response_id)
                else "second"
            )
            yield [
                *head(a),
                _plain(ext_case(unit.case_id)),
                _plain(ext_resp(unit.response_id)),
                _plain(src(unit.response_id)),
                _plain(ext_resp(unit.response_b_id)),
                _plain(src(unit.response_b_id)),
                verdict,
            ]

    sheet(
        "empathy",
        "Raw answers: which reply is more empathetic",
        _text_columns(
            [
                "Case",
                "First response",
                "First source",
                "Second response",
                "Second source",
                "More empathetic",
            ]
        ),
        len(of_kind("empathy")),
        empathy_rows,
    )

    # facts: one row per fact, then one row per check that lists no fact
    facts = frames.facts.merge(answers[["answer_id"]], on="answer_id")
    said = frames.fact_checks[frames.fact_checks.no_facts.astype(bool)]
    said_ids = said.answer_id[said.answer_id.isin(list(by_answer))]

    def facts_rows(rows: Rows) -> Iterator[list[Any]]:
        for f in rows.over(facts.itertuples()):
            a = by_answer[f.answer_id]
            unit = units[a.unit_id]
            yield [
                *head(_Row(f.answer_id, a)),
                _plain(src(unit.response_id)),
                _plain(src(unit.response_b_id)),
                _plain(f.side),
                int(f.position),
                _plain(f.text),
                None if f.entailed is None or f.entailed != f.entailed else bool(f.entailed),
                _plain(f.error_category),
            ]
        for answer_id in rows.over(said_ids):
            a = by_answer[answer_id]  # one row saying so, where a check lists no fact
            unit = units[a.unit_id]
            yield [
                *head(_Row(answer_id, a)),
                _plain(src(unit.response_id)),
                _plain(src(unit.response_b_id)),
                None,
                None,
                "(no medical facts on either side)",
                None,
                None,
            ]

    sheet(
        "facts",
        "Raw answers: facts of each side and whether the other side entails them",
        [
            ("Original source", None),
            ("Edited source", None),
            ("Side", None),
            ("#", INT),
            ("Fact", None),
            ("Entailed", None),
            ("Error category", None),
        ],
        len(facts) + len(said_ids),
        facts_rows,
    )
    return sheets


def _text_columns(headers: list[str]) -> list[tuple[str, str | None]]:
    """Columns with no number format of their own (a figure cell there carries its own)."""
    return [(header, None) for header in headers]


def _lvl(level: Any) -> Any:
    return None if level is None or level != level else int(level)


class _Row:
    """An answers-frame row looked up by id, shaped like an ``itertuples`` row."""

    def __init__(self, answer_id: Any, row: Any) -> None:
        self.answer_id = int(answer_id)
        self.unit_id = int(row.unit_id)
        self.annotator = row.annotator
        self.is_gold = bool(row.is_gold)
        self.is_model = bool(row.is_model)
        self.status = row.status


# --- provenance ----------------------------------------------------------------------------------


def _suggestion_use(s, *, by_model: bool) -> dict[str | None, int]:
    """Answers linked to a suggestion, counted by how they used it: people's answers, or
    (``by_model``) a model pseudo annotator's, which store its suggestion as its own answer."""
    return dict(
        s.execute(
            select(Answer.suggestion_use, func.count())
            .join(Annotator, Annotator.id == Answer.annotator_id)
            .where(Answer.suggestion_id.is_not(None), Annotator.is_model.is_(by_model))
            .group_by(Answer.suggestion_use)
        ).all()
    )


def _provenance(project: Project, r: _Reader, generated_at: str) -> Sheet:
    import hashlib

    with project.read() as s:
        models = s.execute(
            select(
                Suggestion.model_file,
                Suggestion.model_sha256,
                func.count(),
                func.min(Suggestion.created_at),
                func.max(Suggestion.created_at),
            )
            .group_by(Suggestion.model_file, Suggestion.model_sha256)
            .order_by(Suggestion.model_file)
        ).all()
        kinds_of = {}
        for model_sha, kind in s.execute(
            select(Suggestion.model_sha256, Suggestion.kind).distinct()
        ):
            kinds_of.setdefault(model_sha, set()).add(kind)
        templates: dict[tuple[str, str], list] = {}
        for template_id, text, kind in s.execute(
            select(Suggestion.template_id, Suggestion.template_text, Suggestion.kind)
        ):
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            entry = templates.setdefault((template_id, digest), [0, set(), text])
            entry[0] += 1
            entry[1].add(kind)
        use = _suggestion_use(s, by_model=False)
        model_use = sum(_suggestion_use(s, by_model=True).values())
        n_audit = s.scalar(select(func.count()).select_from(AuditEntry))
        stored = []
        # project format 2 keeps the templates themselves (asked of either back end)
        if inspect(s.connection()).has_table("prompt_templates"):
            stored = s.execute(
                sql(
                    "SELECT name, kind, version, updated_at, text FROM prompt_templates "
                    "ORDER BY kind, name"
                )
            ).all()
        head = s.scalar(select(AuditEntry.hash).order_by(AuditEntry.id.desc()).limit(1))
        events = [
            (e.at, e.action, json.loads(e.new_json or "{}"))
            for e in s.scalars(
                select(AuditEntry)
                .where(AuditEntry.action.in_(("merge", "copy", "setup", "assign", "import")))
                .order_by(AuditEntry.id)
            )
        ]
    settings = r.get("settings")
    facts = Table(
        "provenance",
        "What these figures were computed from",
        ["Item", "Value"],
        [
            [_c("Project"), r.cell("project", "name")],
            [_c("Project id"), r.cell("project", "project_id")],
            [_c("File"), r.cell("project", "file")],
            [_c("Codebook (catalogs) version"), r.cell("project", "catalogs_version")],
            [_c("PortalReview version"), r.cell("report", "portalreview")],
            [_c("Report format"), _c(f"{r.get('report', 'format')} v{r.get('report', 'version')}")],
            [_c("Workbook written by"), _c(f"PortalReview {__version__}")],
            [_c("Generated at (UTC)"), _c(generated_at)],
            [_c("Bootstrap seed"), r.cell("settings", "seed")],
            [_c("Bootstrap resamples"), r.cell("settings", "n_resamples")],
            [_c("Confidence"), r.cell("settings", "confidence", fmt="0.00")],
            [_c("Interval method"), r.cell("settings", "ci_method")],
            [
                _c("Answers counted"),
                _c("submitted and drafts" if settings["include_drafts"] else "submitted only"),
            ],
            [_c("Audit log entries"), _c(n_audit, INT)],
            [_c("Audit log last hash"), _c(head or "(empty)")],
        ],
        note="The audit log's last hash identifies the exact state of the project: a report "
        "made later from the same hash has the same figures.",
    )
    model_table = Table(
        "provenance_models",
        "Model files used for suggestions",
        ["Model file", "SHA-256", "Suggestions", "Kinds", "First used", "Last used"],
        [
            [
                _c(m),
                _c(sha),
                _c(n, INT),
                _c(", ".join(sorted(kinds_of.get(sha, ())))),
                _c(first),
                _c(last),
            ]
            for m, sha, n, first, last in models
        ],
        note="People's answers that used a suggestion: "
        + (", ".join(f"{k or 'unrecorded'} {v}" for k, v in sorted(use.items(), key=str)) or "none")
        + f". Model pseudo annotators' answers (their own suggestions, not counted above): "
        f"{model_use}.",
    )
    template_table = Table(
        "provenance_templates",
        "Prompt templates used for suggestions",
        ["Template", "SHA-256 of its text", "Suggestions", "Kinds", "Text"],
        [
            [_c(tid), _c(digest), _c(v[0], INT), _c(", ".join(sorted(v[1]))), _c(v[2])]
            for (tid, digest), v in sorted(templates.items())
        ],
    )
    event_table = Table(
        "provenance_events",
        "Study set-up, imports, offline copies and merges (from the audit log)",
        ["When (UTC)", "Action", "Details"],
        [[_c(at), _c(action), _c(_describe_event(action, d))] for at, action, d in events],
    )
    stored_table = Table(
        "provenance_stored_templates",
        "Prompt templates stored in the project (their current versions)",
        ["Template", "Kind", "Version", "Updated (UTC)", "SHA-256 of its text", "Text"],
        [
            [
                _c(name),
                _c(kind),
                _c(version, INT),
                _c(updated),
                _c(hashlib.sha256(body.encode("utf-8")).hexdigest()),
                _c(body),
            ]
            for name, kind, version, updated, body in stored
        ],
    )
    return Sheet(
        "Provenance",
        "Provenance",
        "",
        [facts, model_table, template_table, stored_table, event_table],
    )


def _describe_event(action: str, d: dict[str, Any]) -> str:
    if action == "merge":
        return (
            f"{d.get('copy_file')} (for {d.get('copy_for') or '?'}): {d.get('added', 0)} added, "
            f"{d.get('updated', 0)} updated, {len(d.get('conflicts', []))} conflict(s)"
        )
    if action == "copy":
        return f"{d.get('file')} for {d.get('for') or 'anyone'}" + (
            ", own assignments only" if d.get("only_assigned") else ""
        )
    if action == "setup":
        return f"unit set {d.get('unit_set')!r}: {d.get('n_units')} {d.get('kind')} unit(s)"
    if action == "assign" and d.get("second_annotator"):
        return (
            f"second annotator {d['second_annotator']} for {len(d.get('units', []))} hard "
            f"pair(s) of {d.get('unit_set')!r}, asked by {', '.join(d.get('asked_by', []))}"
        )
    if action == "assign":
        counts = ", ".join(f"{k} {v}" for k, v in (d.get("counts") or {}).items())
        return f"{d.get('unit_set')!r}: overlap {d.get('overlap')}, seed {d.get('seed')}: {counts}"
    text = json.dumps(d, ensure_ascii=False, sort_keys=True)
    return text if len(text) < 300 else text[:297] + "..."


# --- the whole model -----------------------------------------------------------------------------

KIND_SHEETS = {
    "respond": _respond,
    "match": _match,
    "rank": _rank,
    "urgency": _urgency,
    "eppc": _eppc,
    "empathy": _empathy,
    "facts": _facts,
}


def workbook_model(
    report: dict[str, Any],
    frames: StudyFrames | None = None,
    project: Project | None = None,
    *,
    generated_at: str = "",
    steps: Steps | None = None,
) -> list[Sheet]:
    """The workbook as data: Summary, one sheet per kind, Raw sheets (with ``frames``; their
    rows are made as they are written: :class:`Rows`) and Provenance (with ``project``)."""
    r = _Reader(report)
    sheets = [_summary(r)]
    for build in KIND_SHEETS.values():
        sheets.append(build(r))
        if steps:
            steps.step()
    if frames is not None:
        sheets += _raw_sheets(frames, r)
    if project is not None:
        sheets.append(_provenance(project, r, generated_at))
    return sheets


def figure_cells(sheets: Sequence[Sheet]) -> list[tuple[str, str, int, int, Cell]]:
    """Every cell read from the report: (sheet, table key, row, column, cell)."""
    return [
        (sheet.name, table.key, i, j, cell)
        for sheet in sheets
        for table in sheet.tables
        for i, row in enumerate(table.rows)
        for j, cell in enumerate(row)
        if isinstance(cell, Cell) and cell.path is not None
    ]


def cell_value(item: Any) -> Any:
    """The value of an item of a table's row: a :class:`Cell`'s, or the plain value itself."""
    return item.value if type(item) is Cell else item


RECORDS_PER_STEP = 10_000  # progress on a raw sheet: a step every so many answers (or facts)
_CHECK_EVERY = 1_000  # rows: a cancel is seen within a few milliseconds


def _raw_steps(table: Table) -> int:
    """The progress steps that reading ``table``'s raw rows takes (none for a short one)."""
    return table.rows.size // RECORDS_PER_STEP if isinstance(table.rows, Rows) else 0


def writing_steps(sheets: Sequence[Sheet]) -> int:
    """The progress steps :func:`write_workbook` takes: one a sheet, and the raw rows'."""
    return len(sheets) + sum(_raw_steps(t) for sheet in sheets for t in sheet.tables)


def _read_rows(table: Table, steps: Steps | None) -> Iterator[Sequence[Any]]:
    """``table``'s rows; raw rows with progress as their records are read, and a cancel
    checked every thousand rows."""
    rows = table.rows
    if not isinstance(rows, Rows) or steps is None:
        yield from rows
        return
    planned, stepped = _raw_steps(table), 0
    for n, row in enumerate(rows, 1):
        yield row
        if n % _CHECK_EVERY == 0:
            due = planned * rows.read // max(rows.size, 1)
            if due > stepped:
                steps.step(due - stepped)
                stepped = due
            steps.check()
    if planned > stepped:
        steps.step(planned - stepped)


# --- writing -------------------------------------------------------------------------------------


def _text(value: str) -> str:
    """A cell's text as the workbook stores it: what XML cannot hold left out, cut to what a
    cell holds, and OOXML-escaped (a carriage return and a literal ``_xHHHH_`` come back as
    written, as in the data export; ooxml.py)."""
    if len(value) <= EXCEL_CELL_LIMIT // 2 and not _TEXT_TO_CHANGE.search(value):
        return value  # most texts: nothing to leave out, cut or escape
    value = _ILLEGAL.sub("", value)
    if not fits_excel_cell(value):  # counted as Excel counts: UTF-16 units
        value = excel_prefix(value, EXCEL_CELL_LIMIT - len(CUT_NOTE)) + CUT_NOTE
    return ooxml_escape(value)


def _width(value: Any, fmt: str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, float):
        return 7 if fmt in (NUM, "0.00", PCT, "0.0") else len(f"{value:.6g}")
    return min(len(str(value)), 60)


# The printed page (the sheets' page set-up: landscape, one page wide, openpyxl's default
# margins of 0.75 inch left and right, 1 inch top and bottom): (width, height) in points that
# can be printed on, on US letter and on A4. The page breaks suit the smaller of the two.
PRINTABLE_POINTS = (((11 - 1.5) * 72, (8.5 - 2) * 72), ((11.69 - 1.5) * 72, (8.27 - 2) * 72))
ROW_POINTS = 15  # a default row (11-point font)
TITLE_POINTS = 19  # a row holding a 12- or 14-point heading


class _Pages:
    """The sheet's own page breaks, so that a table's heading is never printed alone at the
    foot of a page and a chart is never cut in two.

    Fitting the sheet one page wide scales everything by the same factor, so a page holds
    more rows when the columns are wide; the page height in the sheet's points is estimated
    from the column widths as Excel draws them (a width w is 7w + 5 pixels, 0.75 point a
    pixel). LibreOffice draws columns wider, so it scales more and its pages hold more rows:
    with a break on every page, set before either program would break on its own, both print
    the same pages, at worst a little short (on letter or A4 paper).
    """

    def __init__(self, widths: list[float]) -> None:
        width = sum(0.75 * (7 * w + 5) for w in widths)
        self.height = min(high / min(1.0, wide / width) for wide, high in PRINTABLE_POINTS)
        self.used = 0.0  # points of the current page taken

    def breaks_before(self, points: float) -> bool:
        """True (and a new page begun) when ``points`` more do not fit on the current page;
        never on an empty page (a block taller than a page then spills over)."""
        if self.used == 0 or self.used + points <= self.height:
            return False
        self.used = 0.0
        return True


def _sheet_title(name: str) -> str:
    return _SHEET_CHARS.sub("-", name)[:31]


class _StyleArrays:
    """The style of a cell, worked out once per combination of style objects and copied to
    every cell that has it: setting ``cell.font`` and the like hashes the style object each
    time, which on a raw sheet of many thousands of rows took most of the writing time.

    Keyed by the objects' identity: ``_write_sheet`` builds each style object once per sheet."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.arrays: dict[tuple, Any] = {}

    def array(self, font: Any, fmt: str | None, fill: Any, border: Any, align: Any) -> Any:
        """A fresh copy of the style array a cell with these styles gets from openpyxl."""
        from openpyxl.cell import WriteOnlyCell
        from openpyxl.styles.cell_style import StyleArray

        key = (id(font), fmt, id(fill), id(border), id(align))
        if key not in self.arrays:
            cell = WriteOnlyCell(self.ws)
            for name, style in (
                ("font", font),
                ("number_format", fmt),
                ("fill", fill),
                ("border", border),
                ("alignment", align),
            ):
                if style is not None:
                    setattr(cell, name, style)
            # the objects are kept with it: their ids stay theirs while the cache lives
            self.arrays[key] = (cell._style, (font, fill, border, align))
        return StyleArray(self.arrays[key][0])


class _RawCells:
    """A raw sheet's data rows as the worksheet's XML, made here and not cell by cell through
    openpyxl, whose writer took some 20 µs a value (three minutes for the ten million values
    of a 10,000-case study; lxml's, when installed, no less). The text is byte for byte the
    one openpyxl writes for the same cells (tests/reports/test_xlsx_report.py). A raw cell's
    style is its number format (a number's) or the indent (a text's): each worked out once,
    when first used (so numbered as openpyxl numbers them)."""

    def __init__(self, ws: Any, styles: _StyleArrays, formats: list[str | None], indent: Any):
        from openpyxl.utils import get_column_letter

        self.ws, self.styles, self.indent = ws, styles, indent
        self.formats = formats
        self.letters = [get_column_letter(j + 1) for j in range(len(formats))]
        self._styles: dict[tuple[str | None, bool], str] = {}
        self._text_style = ""  # the indent's ``s`` attribute, once first used
        self._number_styles: dict[str | None, str] = {None: ""}  # by number format
        self._texts: dict[str, str] = {}  # a text -> its cell's XML after the style

    def _style(self, fmt: str | None, text: bool) -> str:
        """The ``s`` attribute of a cell with this number format or, ``text``, the indent."""
        found = self._styles.get((fmt, text))
        if found is None:
            from openpyxl.cell import WriteOnlyCell

            cell = WriteOnlyCell(self.ws)
            cell._style = self.styles.array(None, fmt, None, None, self.indent if text else None)
            found = self._styles[fmt, text] = f' s="{cell.style_id}"'
            if text:
                self._text_style = found
            else:
                self._number_styles[fmt] = found
        return found

    def row(self, number: int, items: Sequence[Any]) -> str:
        """Row ``number`` of the sheet holding ``items`` (plain values or :class:`Cell`)."""
        out = [f'<row r="{number}">']
        letters, formats, texts = self.letters, self.formats, self._texts
        for j, item in enumerate(items):
            value, fmt = (item.value, item.fmt) if type(item) is Cell else (item, formats[j])
            if value is None:  # an empty cell is left out, as openpyxl leaves it
                continue
            kind = type(value)
            # The most common values first, inline: a big study has millions of them.
            if kind is str:
                style = self._text_style or self._style(None, True)
                xml = texts.get(value) or self._text(value)
                out.append(f'<c r="{letters[j]}{number}"{style}{xml}')
            elif kind is int and -_EXACT_INT < value < _EXACT_INT:
                style = self._number_styles.get(fmt)
                if style is None:
                    style = self._style(fmt, False)
                out.append(f'<c r="{letters[j]}{number}"{style} t="n"><v>{value}</v></c>')
            else:
                out.append(self._cell(f"{letters[j]}{number}", value, fmt))
        out.append("</row>")
        return "".join(out)

    def _text(self, value: str) -> str:
        """A text cell's XML after its style attribute (kept for a text met again)."""
        text = _text(value)[:EXCEL_CELL_LIMIT]  # openpyxl cuts at 32,767 characters
        if not text:
            xml = ' t="inlineStr" />'
        else:
            stripped = text.strip()
            space = ' xml:space="preserve"' if stripped and stripped != text else ""
            xml = f' t="inlineStr"><is><t{space}>{_xml_text(text)}</t></is></c>'
        if len(value) <= _KEPT_TEXT_LENGTH and len(self._texts) < _KEPT_TEXTS:
            self._texts[value] = xml
        return xml

    def _cell(self, ref: str, value: Any, fmt: str | None) -> str:
        """A cell holding anything but a text."""
        if isinstance(value, str):
            return f'<c r="{ref}"{self._style(None, True)}{self._text(value)}'
        if isinstance(value, bool):
            return f'<c r="{ref}" t="b"><v>{int(value)}</v></c>'
        if isinstance(value, int | float):
            style = "" if fmt is None else self._style(fmt, False)
            if value != value or value in (math.inf, -math.inf):
                return f'<c r="{ref}"{style} t="n"><v /></c>'  # as openpyxl: no number
            return f'<c r="{ref}"{style} t="n"><v>{value:.16g}</v></c>'
        if hasattr(value, "item"):  # a numpy scalar: openpyxl writes it as a number, unstyled
            return self._cell(ref, value.item() + 0, None)
        raise TypeError(f"Cannot convert {value!r} to Excel")


_EXACT_INT = 2**53  # an int below it in size is a float exactly: openpyxl's "%.16g" is its digits
_KEPT_TEXT_LENGTH = 200  # texts up to this long are kept once made: most repeat (names, ids)
_KEPT_TEXTS = 100_000  # ... up to so many a sheet


def _xml_text(text: str) -> str:
    """``text`` escaped as an XML element's content."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


_ROWS_GO_HERE = "(PortalReview: the raw rows go here)"
_FIRST_RAW_ROW = 3  # below the sheet's title and header


def _write_raw_rows(ws: Any, table: Table, rows: Iterator[Sequence[Any]], cells: _RawCells) -> None:
    """Write ``rows`` from row 3 on and close the sheet. openpyxl writes the sheet (its top,
    its title and header, the tail with the filter) with a row marking where the rows go;
    the rows' XML, made meanwhile in a file of its own, then takes that row's place."""
    ws.append([_ROWS_GO_HERE])
    # Opened as openpyxl opens a sheet's file (et_xmlfile): the same bytes on every system.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="xmlcharrefreplace") as made:
        count, batch = 0, []
        for count, row in enumerate(rows, 1):
            batch.append(cells.row(_FIRST_RAW_ROW + count - 1, row))
            if len(batch) == _CHECK_EVERY:
                made.write("".join(batch))
                batch.clear()
        made.write("".join(batch))
        if count:
            last_column = cells.letters[len(table.headers) - 1]
            ws.auto_filter.ref = f"A2:{last_column}{count + 2}"
        ws.close()
        made.seek(0)
        _put_rows_in_place(Path(ws._writer.out), made.buffer)


def _put_rows_in_place(sheet_file: Path, rows: Any) -> None:
    """Replace the marked row of the sheet's file by the content of ``rows`` (binary)."""
    written = sheet_file.read_bytes()
    start = written.find(f'<row r="{_FIRST_RAW_ROW}"'.encode())
    end = written.find(b"</row>", start) + len(b"</row>")
    if start < 0 or _ROWS_GO_HERE.encode() not in written[start:end]:
        raise RuntimeError(f"openpyxl wrote no row where the raw rows go in {sheet_file}")
    with sheet_file.open("wb") as out:
        out.write(written[:start])
        shutil.copyfileobj(rows, out)
        out.write(written[end:])


_WIDTH_ROWS = 2000  # a column is as wide as its widest value among the first rows


def _column_widths(sheet: Sheet, first_raw_rows: list[Sequence[Any]]) -> list[float]:
    """The sheet's column widths, in characters: each column's widest header word and value
    (of a table's first rows; ``first_raw_rows`` a raw sheet's)."""
    n_cols = max((len(t.headers) for t in sheet.tables), default=1)
    widths = [8] * n_cols
    for table in sheet.tables:
        for j, header in enumerate(table.headers):
            # Headers wrap (stacked tables): a long one need not widen a column of numbers.
            # ... but never narrower than its longest word (bold): no word broken mid-way.
            longest_word = max((len(word) for word in header.split()), default=0)
            widths[j] = max(widths[j], min(len(header) + 2, 30 if sheet.raw else 11))
            widths[j] = max(widths[j], longest_word + 3)
        rows = first_raw_rows if sheet.raw else table.rows[:_WIDTH_ROWS]
        formats = table.formats or [None] * len(table.headers)
        for row in rows:
            for j, item in enumerate(row):
                value, fmt = (item.value, item.fmt) if type(item) is Cell else (item, formats[j])
                widths[j] = max(widths[j], _width(value, fmt) + 2)
    return [min(width, 50) for width in widths]


def _write_sheet(book: Any, sheet: Sheet, steps: Steps | None) -> None:
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.formatting.rule import ColorScaleRule
    from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.pagebreak import Break

    ws = book.create_sheet(_sheet_title(sheet.name))
    ws.page_setup.orientation = "landscape"
    ws.sheet_properties.pageSetUpPr.fitToPage = True  # printed one page wide
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    title_font = Font(bold=True, size=14)
    table_font = Font(bold=True, size=12)
    note_font = Font(italic=True, color="595959")
    header_font = Font(bold=True)
    header_fill = PatternFill("solid", fgColor="DDE5F0")
    header_border = Border(bottom=Side(style="thin", color="7F7F7F"))
    wrap = Alignment(wrap_text=True, vertical="top", horizontal="center")

    # Column widths first (write-only sheets write them before the rows), from the first
    # rows: a raw sheet's are read once, these kept for writing and the rest read on.
    raw_rows = _read_rows(sheet.tables[0], steps) if sheet.raw else iter(())
    first_rows = list(itertools.islice(raw_rows, _WIDTH_ROWS))
    widths = _column_widths(sheet, first_rows)
    for j, width in enumerate(widths):
        ws.column_dimensions[get_column_letter(j + 1)].width = width

    styles = _StyleArrays(ws)

    def styled(
        value: Any,
        font: Font | None = None,
        fmt: str | None = None,
        fill=None,
        border=None,
        align=None,
    ) -> Any:
        if isinstance(value, str):
            value = _text(value)
        cell = WriteOnlyCell(ws, value=value)
        if isinstance(value, str):
            cell.data_type = "s"  # text, never a formula ("=...") or an error code ("#N/A")
        if fmt is not None and not (isinstance(value, int | float) and not isinstance(value, bool)):
            fmt = None  # a number format only on a number
        if (font, fmt, fill, border, align) != (None, None, None, None, None):
            cell._style = styles.array(font, fmt, fill, border, align)
        return cell

    indented = Alignment(horizontal="left", indent=1)

    def data(c: Cell) -> Any:
        # Text one character in from its left edge: not glued to a number on its left.
        return styled(c.value, fmt=c.fmt, align=indented if isinstance(c.value, str) else None)

    row_no = 0

    def append(cells: list[Any]) -> None:
        nonlocal row_no
        ws.append(cells)
        row_no += 1

    if sheet.raw:
        table = sheet.tables[0]
        ws.freeze_panes = "B3"
        ws.print_title_rows = "2:2"  # the header row on every printed page
        append([styled(sheet.title, table_font)])
        append(
            [styled(h, header_font, fill=header_fill, border=header_border) for h in table.headers]
        )
        formats = table.formats or [None] * len(table.headers)
        cells = _RawCells(ws, styles, formats, indented)
        _write_raw_rows(ws, table, itertools.chain(first_rows, raw_rows), cells)
        return

    ws.freeze_panes = "A3"
    pages = _Pages(widths)

    def new_page_unless(points: float) -> None:
        """Start a new page unless the next ``points`` fit on this one."""
        if pages.breaks_before(points):
            ws.row_breaks.append(Break(id=row_no))

    def printed(cells: list[Any], points: float = ROW_POINTS) -> None:
        new_page_unless(points)
        pages.used += points
        append(cells)

    printed([styled(sheet.title, title_font)], TITLE_POINTS)
    printed([styled(sheet.note, note_font)])
    for table in sheet.tables:
        # Wrapped headers get the height they need (LibreOffice does not grow the row).
        lines = max(
            (
                -(-len(h) * 6 // (5 * max(int(widths[j]) - 2, 1)))
                for j, h in enumerate(table.headers)
            ),
            default=1,
        )
        header_points = 15 * max(1, min(lines, 4))
        # The heading, note and header stay with the first rows (a short table whole).
        head = ROW_POINTS + TITLE_POINTS + (ROW_POINTS if table.note else 0) + header_points
        rows = max(len(table.rows), 1) * ROW_POINTS
        new_page_unless(head + (rows if head + rows <= pages.height / 2 else 3 * ROW_POINTS))
        printed([])
        printed([styled(table.title, table_font)], TITLE_POINTS)
        if table.note:
            printed([styled(table.note, note_font)])
        ws.row_dimensions[row_no + 1].height = header_points
        printed(
            [
                styled(h, header_font, fill=header_fill, border=header_border, align=wrap)
                for h in table.headers
            ],
            header_points,
        )
        header_row = row_no
        if not table.rows:
            printed([styled("(nothing to show yet)", note_font)])
        for row in table.rows:
            printed([data(c) for c in row])
        first, last = header_row + 1, header_row + len(table.rows)
        if table.heat and table.rows:
            a, b = table.heat
            low, mid, high = table.heat_range
            ws.conditional_formatting.add(
                f"{get_column_letter(a + 1)}{first}:{get_column_letter(b + 1)}{last}",
                ColorScaleRule(
                    start_type="num",
                    start_value=low,
                    start_color="F8696B",
                    mid_type="num",
                    mid_value=mid,
                    mid_color="FFEB84",
                    end_type="num",
                    end_value=high,
                    end_color="63BE7B",
                ),
            )
        if table.chart and table.rows:
            if table.chart_rows:
                last = min(last, first + table.chart_rows - 1)
            new_page_unless((1 + CHART_ROWS) * ROW_POINTS)  # a chart is never cut in two
            printed([])
            ws.add_chart(_chart(ws, table, first, last, header_row), f"B{row_no + 1}")
            for _ in range(CHART_ROWS):  # the chart's place, below its table
                printed([])
    if steps:
        steps.check()


def _chart(ws: Any, table: Table, first: int, last: int, header_row: int) -> Any:
    from openpyxl.chart import BarChart, LineChart, Reference
    from openpyxl.chart.axis import ChartLines
    from openpyxl.chart.data_source import AxDataSource, NumDataSource, NumRef, StrRef
    from openpyxl.chart.error_bar import ErrorBars
    from openpyxl.utils import get_column_letter, quote_sheetname

    spec = table.chart
    chart = BarChart() if spec.kind == "bar" else LineChart()
    if spec.kind == "bar":
        chart.type = "col"
        if spec.stacked:
            chart.grouping = "percentStacked"
            chart.overlap = 100
    chart.title = spec.title
    chart.y_axis.title = spec.y_title
    chart.x_axis.title = spec.x_title or None
    chart.height, chart.width = 9, 16
    if len(spec.series) == 1:
        chart.legend = None
    chart.y_axis.number_format = "0.0#"
    chart.y_axis.majorGridlines = ChartLines()
    # Axes shown (openpyxl 3.1 hides them unless told).
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    if spec.y_min is not None:
        chart.y_axis.scaling.min = spec.y_min
    if spec.y_max is not None:
        chart.y_axis.scaling.max = spec.y_max
    for k, col in enumerate(spec.series):
        data = Reference(ws, min_col=col + 1, min_row=header_row, max_row=last)
        chart.add_data(data, titles_from_data=True)
        errors = spec.errors[k] if k < len(spec.errors) else None
        if errors is not None:
            minus_col, plus_col = (get_column_letter(c + 1) for c in errors)
            sheet = quote_sheetname(ws.title)
            chart.series[-1].errBars = ErrorBars(
                errDir="y",
                errBarType="both",
                errValType="cust",
                noEndCap=False,
                minus=NumDataSource(
                    numRef=NumRef(f=f"{sheet}!${minus_col}${first}:${minus_col}${last}")
                ),
                plus=NumDataSource(
                    numRef=NumRef(f=f"{sheet}!${plus_col}${first}:${plus_col}${last}")
                ),
            )
    categories = Reference(ws, min_col=spec.categories + 1, min_row=first, max_row=last)
    if spec.kind == "line" and all(isinstance(r[spec.categories].value, int) for r in table.rows):
        chart.set_categories(categories)
    else:  # text labels: a string reference, as Excel writes them
        for series in chart.series:
            series.cat = AxDataSource(strRef=StrRef(f=str(categories)))
    if spec.kind == "line":
        for series in chart.series:
            series.smooth = False
        chart.x_axis.crosses = "min"  # labels below the plot, also for negative values
        if last - first > 12:
            chart.x_axis.tickLblSkip = 5
    return chart


PartFn = Callable[[str], None]  # told the name of each sheet (or CSV file) as it is begun


def write_workbook(
    sheets: Sequence[Sheet], out: Path, steps: Steps | None = None, on_part: PartFn | None = None
) -> Path:
    """Write ``sheets`` as an .xlsx file (through a temporary file: no half file on error);
    ``steps`` takes :func:`writing_steps` steps."""
    from openpyxl import Workbook

    make_folder(out.parent)  # before openpyxl starts: it fails on the temporary file's name
    book = Workbook(write_only=True)
    book.properties.creator = f"PortalReview {__version__}"
    book.properties.title = "Agreement report"
    try:
        with _no_collection():
            for sheet in sheets:
                if on_part:
                    on_part(sheet.name)
                _write_sheet(book, sheet, steps)
                if steps:
                    steps.step()
    except BaseException:  # a cancel, mostly: the sheets' files go, not at the program's end
        _abandon_sheets(book)
        raise
    write_through_temporary(out, lambda temporary: save_workbook(book, temporary))
    log.info("report written: %s (xlsx, %d sheets)", out, len(sheets))
    return out


def _abandon_sheets(book: Any) -> None:
    """Close the write-only sheets of ``book`` and delete the files openpyxl writes them to."""
    for ws in book.worksheets:
        with contextlib.suppress(Exception):  # already failing: that error is the one told
            if not ws.closed:
                ws.close()
            ws._writer.cleanup()


def _prepare(
    project: Project,
    seed: int,
    n_resamples: int,
    include_drafts: bool,
    report: dict[str, Any] | None,
    frames: StudyFrames | None,
    steps: Steps,
    use_cache: bool = False,
) -> tuple[dict[str, Any], StudyFrames]:
    steps.start()
    if report is None and frames is None and use_cache:  # one snapshot for both
        report, frames = report_and_frames(
            project,
            seed=seed,
            n_resamples=n_resamples,
            include_drafts=include_drafts,
            use_cache=True,
            need_frames=True,
        )
        assert frames is not None  # need_frames
        steps.step()
        steps.step()
        return report, frames
    if frames is None:
        frames = read_frames(project, include_drafts=include_drafts)
    steps.step()
    if report is None:
        report = build_report(
            project,
            seed=seed,
            n_resamples=n_resamples,
            include_drafts=include_drafts,
            frames=frames,
        )
    steps.step()
    return report, frames


def _n_steps() -> int:
    # frames, report, 7 kind sheets, then one per written sheet (~16): a guess, until the
    # workbook's model tells how many records its raw sheets are made from (_the_rest_is)
    return 2 + len(KIND_SHEETS) + 16


def _the_rest_is(steps: Steps, remaining: int) -> None:
    """Make ``remaining`` steps the rest of ``steps``, whose total was a guess: the bar stays
    where it stood (never back) and moves on evenly to its end."""
    shown = min(steps.done / steps.total, 0.99) if steps.total else 0.0
    steps.total = max(steps.done + remaining, math.ceil(remaining / (1 - shown)))
    steps.done = steps.total - remaining


def write_xlsx_report(
    project: Project,
    out: str | os.PathLike,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    include_drafts: bool = False,
    report: dict[str, Any] | None = None,
    frames: StudyFrames | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    use_cache: bool = False,
    on_part: PartFn | None = None,
) -> Path:
    """Compute the report (or use ``report``, from :func:`build_report` with the same
    settings) and write the workbook to ``out``. ``use_cache``: as :func:`build_report`'s;
    ``on_part`` is told each sheet's name as it is begun. A missing folder is made first,
    before the long work, as for the CSV report."""
    from portalreview.store.models import utc_now

    out = Path(out)
    if not out.suffix:
        out = out.with_suffix(".xlsx")
    refuse_project_output(project, out)
    with output_folder(out.parent):
        steps = Steps(_n_steps(), progress, cancel)
        report, frames = _prepare(
            project, seed, n_resamples, include_drafts, report, frames, steps, use_cache
        )
        sheets = workbook_model(report, frames, project, generated_at=utc_now(), steps=steps)
        _the_rest_is(steps, writing_steps(sheets))
        write_workbook(sheets, out, steps, on_part)
    steps.finish()
    return out


def _write_csv(table: Table, path: Path, steps: Steps | None = None) -> None:
    """``table`` as a CSV file at ``path``, UTF-8 with a byte-order mark; the rows written as
    they are made (the raw tables of a large study run to hundreds of megabytes)."""
    with open(path, "w", encoding="utf-8-sig", newline="") as out:
        writer = safe_writer(out)  # no text runs as a formula (store/csv_cells.py)
        writer.writerow(safe_row(table.headers))
        with _no_collection():
            rows = _read_rows(table, steps)
            writer.writerows(safe_row([cell_value(item) for item in row]) for row in rows)


def write_csv_report(
    project: Project,
    out_dir: str | os.PathLike,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    include_drafts: bool = False,
    report: dict[str, Any] | None = None,
    frames: StudyFrames | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    use_cache: bool = False,
    on_part: PartFn | None = None,
) -> list[Path]:
    """The same tables as the workbook, one CSV file per table in the folder ``out_dir``
    (UTF-8 with a byte-order mark, so that Excel reads accents), plus ``report.json``. Texts
    are quoted and a text that a spreadsheet would run as a formula gets a leading ``'``;
    numbers (negative ones too) stay numbers (docs/formats.md). Each file is written whole
    into a staging folder as its rows are made, and the files then replace the folder's
    earlier report together (:func:`~portalreview.store.output_files.move_into_place`): a
    failure or a kill while they are written leaves the earlier report whole. ``on_part`` is
    told each file's name as it is begun."""
    from portalreview.store.models import utc_now

    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file; the CSV report needs a folder")
    # The folder is made before the long work, so that a read-only disk is told at once.
    with output_folder(folder):
        steps = Steps(_n_steps(), progress, cancel)
        report, frames = _prepare(
            project, seed, n_resamples, include_drafts, report, frames, steps, use_cache
        )
        sheets = workbook_model(report, frames, project, generated_at=utc_now(), steps=steps)
        names = _write_csv_files(folder, report, sheets, steps, on_part)
    log.info("report written: %s (csv, %d tables)", folder, len(names) - 1)
    return [folder / name for name in names]


def _write_csv_files(
    folder: Path, report: dict[str, Any], sheets: list[Sheet], steps: Steps, on_part: PartFn | None
) -> list[str]:
    """Each table of ``sheets`` as a CSV file in ``folder``, and ``report.json``: the files'
    names."""
    tables = [t for sheet in sheets for t in sheet.tables]
    _the_rest_is(steps, len(tables) + sum(map(_raw_steps, tables)) + 2)
    names = [f"{table.key}.csv" for table in tables] + ["report.json"]
    earlier = _earlier_csv_report(folder)
    # All or nothing: every file is written whole in a staging folder before any replaces
    # the folder's, so a full disk, Cancel or a kill part-way leaves last week's report whole,
    # never some of this week's tables beside last week's report.json.
    with staging_folder(folder) as staging:
        for table in tables:
            name = f"{table.key}.csv"
            if on_part:
                on_part(name)
            write_staged(staging / name, folder / name, partial(_write_csv, table, steps=steps))
            steps.step()
        text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        write_staged(
            staging / "report.json",
            folder / "report.json",
            lambda path: path.write_bytes(text.encode("utf-8")),
        )
        listed = json.dumps(names, indent=1) + "\n"
        write_staged(
            staging / CSV_REPORT_LIST,
            folder / CSV_REPORT_LIST,
            lambda path: path.write_bytes(listed.encode("utf-8")),
        )
        steps.step()
        move_into_place(staging, folder, [*names, CSV_REPORT_LIST])
    for name in set(earlier) - set(names):  # an earlier report's table this one has not
        with contextlib.suppress(OSError):
            (folder / name).unlink()
    steps.step()
    steps.finish()
    return names


#: The CSV report's list of the files it wrote, kept (hidden) in its folder: the next report
#: into the folder removes the tables it does not write again, so an earlier study's inbox
#: curve is not left beside this study's report.json.
CSV_REPORT_LIST = ".portalreview-report-files.json"


def _earlier_csv_report(folder: Path) -> list[str]:
    """The table files the earlier CSV report in ``folder`` listed (none: no list, or one
    that cannot be read); plain ``.csv`` names only, never a path."""
    try:
        listed = json.loads((folder / CSV_REPORT_LIST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(listed, list):
        return []
    return [name for name in listed if _plain_csv_name(name)]


def _plain_csv_name(name: object) -> bool:
    return isinstance(name, str) and name.endswith(".csv") and Path(name).name == name


__all__ = [
    "Cell",
    "Chart",
    "Rows",
    "Sheet",
    "Table",
    "cell_value",
    "figure_cells",
    "path_text",
    "resolve",
    "workbook_model",
    "write_csv_report",
    "write_workbook",
    "write_xlsx_report",
    "writing_steps",
]
