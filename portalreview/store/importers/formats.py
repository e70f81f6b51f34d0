"""The formats an import recognises, and how a table's format is told from its columns.

Each format lists its required columns (all must be present), its optional ones (anything else
is reported as ignored), and its place in the dependency order (cases before the responses that
answer them, units before the answers to them...). The format of a table is the one whose
required columns it has; when several fit, the one requiring the most columns wins.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from portalreview.store.importers import cases, eppc, pmr, redcap, study
from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.errors import ImportFailed
from portalreview.store.importers.records import Part


@dataclass(frozen=True)
class Format:
    """One importable format: its columns, its place in the order and its loader."""

    name: str
    title: str
    required: tuple[str, ...]
    optional: tuple[str, ...] | None  # None: any other column is fine (read by the loader)
    order: int
    load: Callable[[ImportContext, Part], None]
    prefixes: tuple[str, ...] = ()  # columns starting with these are used too (tag_<key>)
    styles: tuple[str, ...] = ("csv", "xlsx", "jsonl")
    shown: str = ""  # how :meth:`describe` lists the required columns, when not plainly

    def fits(self, part: Part) -> bool:
        """Whether a table has this format's required columns."""
        if part.style not in self.styles:
            return False
        if self.name == "redcap_records":
            return _is_redcap_records(part.columns)
        return set(self.required) <= set(part.columns)

    def describe(self) -> str:
        """ "title: required columns", for the message listing the formats."""
        return f"{self.title}: {self.shown or ', '.join(self.required)}"

    def ignored(self, columns: list[str]) -> list[str]:
        """The columns of a table this format does not use."""
        if self.optional is None:
            return []
        known = set(self.required) | set(self.optional)
        return [c for c in columns if c not in known and not c.startswith(self.prefixes)]


def _rest(columns: tuple[str, ...], required: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in columns if c not in required)


def _is_redcap_records(columns: list[str]) -> bool:
    survey = columns[:1] == ["record_id"] or redcap.SURVEY_ID in columns
    return survey and any(c.endswith("_complete") for c in columns)


def _formats() -> list[Format]:
    """The registry, in dependency order (see docs/formats.md for each format)."""
    case_req = ("case_id", "message")
    resp_req = ("response_id", "case_id", "text")
    pair_req = ("chosen", "chosen_level", "rejected", "rejected_level")
    set_req = ("name", "kind")
    unit_req = ("set", "case_id")
    ans_req = ("kind", "unit", "annotator", "answer")
    sug_req = ("unit", "kind", "payload", "model_file", "model_sha256", "template_id")
    eppc_req = ("sentence", "annotator", "results")
    return [
        Format("project", "project.json (an export's catalogs)", ("catalogs",), None, 0,
               study.load_project, styles=("json", "csv", "xlsx")),
        Format("annotators", "annotators", ("name", "role"),
               _rest(study.ANNOTATOR_COLUMNS, ("name", "role")), 1, study.load_annotators),
        Format("cases", "cases", case_req, _rest(cases.CASE_COLUMNS, case_req), 2,
               cases.load_cases, prefixes=(cases.TAG_PREFIX,)),
        Format("inbox", "PMR-Bench inbox / message pool", ("text", "level"), ("relevancy",), 3,
               pmr.load_inbox),
        Format("pmr_pairs", "PMR-Bench urgency pairs", pair_req, ("difficulty",), 4,
               pmr.load_pairs),
        Format("responses", "responses", resp_req, _rest(cases.RESPONSE_COLUMNS, resp_req), 5,
               cases.load_responses),
        Format("unit_sets", "unit sets", set_req, _rest(study.UNIT_SET_COLUMNS, set_req), 6,
               study.load_unit_sets),
        Format("units", "units", unit_req, _rest(study.UNIT_COLUMNS, unit_req), 7,
               study.load_units),
        Format("redcap_dictionary", "REDCap data dictionary", redcap.DICTIONARY_REQUIRED,
               None, 8, redcap.load_dictionary, styles=("csv", "xlsx")),
        Format("redcap_records", "REDCap records export (with its data dictionary)",
               ("record_id",), None, 9, redcap.load_records, styles=("csv", "xlsx"),
               shown="record_id (first column) or redcap_survey_identifier, <form>_complete"),
        Format("eppc", "EPPC annotations", eppc_req, _rest(eppc.EPPC_COLUMNS, eppc_req), 10,
               eppc.load_eppc,
               shown="case_id (or message_id or response_id), sentence, annotator, results"),
        Format("assignments", "assignments", ("unit", "annotator", "position"),
               ("presentation", "assigned_at", "gold_holder"), 11, study.load_assignments),
        Format("suggestions", "suggestions", sug_req, _rest(study.SUGGESTION_COLUMNS, sug_req),
               12, study.load_suggestions),
        Format("answers", "answers", ans_req, _rest(study.ANSWER_COLUMNS, ans_req), 13,
               study.load_answers),
        Format("audit", "audit log (exported; not imported)", ("action", "prev_hash", "hash"),
               None, 14, study.skip_audit),
    ]  # fmt: skip


FORMATS: dict[str, Format] = {f.name: f for f in _formats()}


def detect(part: Part, kind: str | None = None) -> Format:
    """The format of a table: forced by ``kind``, else told from its columns."""
    if kind is not None:
        return _forced(part, kind)
    fitting = [f for f in FORMATS.values() if f.fits(part)]
    if not fitting:
        raise ImportFailed(_unrecognised(part), file=part.label)
    most = max(len(f.required) for f in fitting)
    best = [f for f in fitting if len(f.required) == most]
    if len(best) > 1:
        names = " and ".join(f.title for f in best)
        raise ImportFailed(f"could be {names}; choose one with kind=", file=part.label)
    return best[0]


def _forced(part: Part, kind: str) -> Format:
    fmt = FORMATS.get(kind)
    if fmt is None:
        raise ImportFailed(f"unknown kind {kind!r}; the formats are {', '.join(FORMATS)}")
    if part.style not in fmt.styles:
        raise ImportFailed(f"a {fmt.title} file cannot be {part.style}", file=part.label)
    if fmt.name == "redcap_records":
        if not any(c.endswith("_complete") for c in part.columns):
            raise ImportFailed("has no <form>_complete column", file=part.label)
        return fmt
    missing = [c for c in fmt.required if c not in part.columns]
    if missing:
        refusal = f"is not a {fmt.title} file: it has no column(s) {', '.join(missing)}"
        renames = _renames(_matches(part.columns, fmt.required))
        raise ImportFailed(f"{refusal}. {renames}" if renames else refusal, file=part.label)
    return fmt


def _unrecognised(part: Part) -> str:
    """Which formats there are, and the closest one to this table's columns: the columns it
    lacks, and those it has under a near-miss name ('Case_ID', 'case id') to rename."""
    names = ", ".join(map(_shown, part.columns[:12])) + (" ..." if len(part.columns) > 12 else "")
    lines = [f"the format cannot be recognised from its columns ({names}). The formats are:"]
    lines += [f"  - {f.describe()}" for f in FORMATS.values()]
    near = [
        (_matches(part.columns, f.required), f)
        for f in FORMATS.values()
        if f.name != "redcap_records" and part.style in f.styles
    ]
    matches, closest = max(near, key=lambda pair: 2 * _found(pair[0]) - len(pair[1].required))
    if _found(matches):
        missing = [name for name, column in matches.items() if column is None]
        needs = f", which also needs {', '.join(missing)}" if missing else ""
        lines.append(f"Closest: {closest.title}{needs}. {_renames(matches)}".rstrip())
    return "\n".join(lines)


def _matches(columns: list[str], required: tuple[str, ...]) -> dict[str, str | None]:
    """Each required column -> the table's column standing for it (the same name, or one
    differing only as :func:`_folded` allows), or None."""
    by_fold: dict[str, str] = {}
    for column in columns:
        by_fold.setdefault(_folded(column), column)
    return {name: name if name in columns else by_fold.get(_folded(name)) for name in required}


def _found(matches: dict[str, str | None]) -> int:
    return sum(column is not None for column in matches.values())


def _folded(name: str) -> str:
    """A column name as a near miss is told: letter case, invisible characters, and spaces or
    hyphens for underscores aside."""
    visible = "".join(char for char in name if unicodedata.category(char) != "Cf")
    return re.sub(r"[\s_-]+", "_", visible.strip().casefold())


def _renames(matches: dict[str, str | None]) -> str:
    """The sentence asking to rename the near misses among ``matches`` (Case_ID, case id)."""
    renames = [
        f"'{_shown(column)}'{_hidden_note(column)} to {name}"
        for name, column in matches.items()
        if column is not None and column != name
    ]
    if not renames:
        return ""
    return f"Rename {' and '.join(renames)}: column names must be spelled exactly as listed."


def _shown(name: str) -> str:
    """A column name with the characters that cannot be seen (a byte-order mark, a zero-width
    or no-break space) written as escapes: \\ufeff, \\u200b, \\xa0."""
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in name)


def _hidden_note(name: str) -> str:
    """What hidden characters a column name holds, as " (\\u200b: a hidden character)"."""
    hidden = dict.fromkeys(_shown(char) for char in name if not char.isprintable())
    if not hidden:
        return ""
    what = "a hidden character" if len(hidden) == 1 else "hidden characters"
    return f" ({', '.join(hidden)}: {what})"
