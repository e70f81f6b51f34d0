"""Cases (patient messages with their chart) and responses, from CSV, XLSX or JSON Lines.

See docs/formats.md for the columns. The chart comes either as four item-list columns or as one
``chart`` column holding the sectioned text of the public datasets, which is parsed here.
"""

from __future__ import annotations

import re

from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.errors import json_type
from portalreview.store.importers.records import (
    MAX_ID,
    Part,
    Record,
    show,
    split_items,
    text_problem,
)
from portalreview.store.models import AUTHOR_KINDS, PRODUCTIONS, Case, Response
from portalreview.store.service import CHART_SECTIONS, chart_text_of

CASE_COLUMNS = (
    "case_id",
    "message",
    *CHART_SECTIONS,
    "chart",
    "age_band",
    "gender",
    "source",
    "urgency_level",
    "tags",
    "created_at",
)
RESPONSE_COLUMNS = (
    "response_id",
    "case_id",
    "text",
    "author_kind",
    "author",
    "source",
    "production",
    "created_at",
)
TAG_PREFIX = "tag_"
URGENCY_FILTERS = ("UNCLEAR", "SUPPORTIVE CARE")

_HEADING = re.compile(r"^[ \t]*###[ \t]*(?P<name>[^#\r\n]*?)[ \t]*###[ \t]*:?[ \t]*$", re.M)
_SECTION_NAMES = {
    "demographics": "demographics",
    "full active problem list": "problems",
    "active problem list": "problems",
    "problem list": "problems",
    "problems": "problems",
    "recent encounters (max 10)": "encounters",
    "recent encounters": "encounters",
    "encounters": "encounters",
    "medications (outpatient)": "medications",
    "medications": "medications",
}


# --- the sectioned chart text ------------------------------------------------------------------


def parse_chart_text(text: str) -> dict[str, list[str]]:
    """The four item lists of a sectioned chart text (``###Demographics###``...).

    Problems are separated by " - " (or line breaks), the other sections' items by line
    breaks (Windows or old Mac line ends too). A missing section is an empty list. Raises
    ValueError for text before the first heading, an unknown heading or a section given twice.
    """
    text = unix_line_ends(text)
    headings = list(_HEADING.finditer(text))
    if not headings:
        raise ValueError("has no section heading such as ###Demographics###")
    if text[: headings[0].start()].strip():
        raise ValueError("has text before its first ###Section### heading")
    chart: dict[str, list[str]] = {section: [] for section in CHART_SECTIONS}
    seen: set[str] = set()
    for i, heading in enumerate(headings):
        name = heading["name"].strip().rstrip(":").strip()
        section = _SECTION_NAMES.get(name.lower())
        if section is None:
            known = "Demographics, Full Active Problem List, Recent Encounters (Max 10), "
            raise ValueError(f"has an unknown section ###{name}###; known: {known}Medications")
        if section in seen:
            raise ValueError(f"has the section ###{name}### twice")
        seen.add(section)
        end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
        body = text[heading.end() : end]
        chart[section] = _section_items(section, body)
    return chart


def unix_line_ends(text: str) -> str:
    """``text`` with CRLF and lone CR line ends made LF (a file or cell from Windows)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _section_items(section: str, body: str) -> list[str]:
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if section != "problems":
        return lines
    return [item for line in lines for item in split_items(line)]


# --- cases ---------------------------------------------------------------------------------


def load_cases(ctx: ImportContext, part: Part) -> None:
    """Add one case per record."""
    for rec in part.records:
        with ctx.guard(rec):
            _add_case(ctx, rec)


def _add_case(ctx: ImportContext, rec: Record) -> None:
    external = rec.ident("case_id")
    ctx.claim("case", external, rec, "case_id", external in ctx.ids("cases"))
    message = rec.text("message", required=True)
    chart, chart_text = _chart(rec)
    level, label = urgency(rec, "urgency_level", ctx)
    case_id = ctx.svc.add_case(
        external,
        message,
        chart,
        chart_text=chart_text,
        age_band=rec.text("age_band", limit=MAX_ID) or None,
        gender=rec.text("gender", limit=MAX_ID) or None,
        source_dataset=rec.text("source", limit=MAX_ID),
        urgency_level=level,
        urgency_filter=label,
        tags=_tags(rec),
        session=ctx.session,
    )
    ctx.ids("cases")[external] = case_id
    ctx.set_times(ctx.session.get(Case, case_id), rec, created_at="created_at")


def _chart(rec: Record) -> tuple[dict[str, list[str]] | None, str | None]:
    """(chart lists, chart text): from the four columns, else parsed from ``chart``."""
    lists = {section: rec.items(section) for section in CHART_SECTIONS}
    text = unix_line_ends(rec.text("chart")) or None  # LF, as chart_text_of writes it
    if any(items is not None for items in lists.values()):
        chart = {section: items or [] for section, items in lists.items()}
        return chart, text if text and text != chart_text_of(chart) else None
    if text is None:
        return None, None
    try:
        chart = parse_chart_text(text)
    except ValueError as exc:
        rec.fail("chart", f"the chart text {exc}")
    return chart, None if text == chart_text_of(chart) else text


def urgency(rec: Record, name: str, ctx: ImportContext) -> tuple[int | None, str | None]:
    """(level, filter label) from a level 1-6, UNCLEAR or SUPPORTIVE CARE."""
    value = rec.raw(name)
    if value is None:
        return None, None
    if isinstance(value, str) and value.strip().upper().replace("_", " ") in URGENCY_FILTERS:
        return None, value.strip().upper().replace("_", " ")
    levels = sorted(lv.level for lv in ctx.catalogs.urgency_levels)
    level = rec.integer(
        name,
        levels[0],
        levels[-1],
        what=f"a level {levels[0]}-{levels[-1]}, UNCLEAR or SUPPORTIVE CARE",
    )
    return level, None


def _tags(rec: Record) -> dict[str, list[str]]:
    """Tags from ``tags`` (an object, JSON text or ``key=value;key=value``) and ``tag_<key>``
    columns; each key -> its distinct values."""
    tags: dict[str, list[str]] = {}
    value = rec.raw("tags")
    if isinstance(value, str) and not value.lstrip().startswith("{"):
        pairs = _tag_pairs(rec, value)
    elif value is not None:
        pairs = _object_tags(rec, rec.obj("tags"))
    else:
        pairs = []
    for column in rec.values:
        if column.startswith(TAG_PREFIX) and rec.has(column):
            pairs.append((column[len(TAG_PREFIX) :], rec.text(column, limit=MAX_ID)))
    for key, tag in pairs:
        key, tag = key.strip(), tag.strip()
        if not key:
            rec.fail("tags", "a tag has no key")
        problem = text_problem(key, MAX_ID) or text_problem(tag, MAX_ID)
        if problem:
            rec.fail(f"tags.{key[:40]}", problem)
        if tag and tag not in tags.setdefault(key, []):
            tags[key].append(tag)
    return {k: v for k, v in tags.items() if v}


def _tag_pairs(rec: Record, text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(";"):
        if not item.strip():
            continue
        if "=" not in item:
            rec.fail("tags", f"expected key=value;key=value, got {show(item.strip())}")
        key, value = item.split("=", 1)
        pairs.append((key, value))
    return pairs


def _object_tags(rec: Record, tags: dict) -> list[tuple[str, str]]:
    pairs = []
    for key, value in tags.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, int | float) and not isinstance(item, bool):
                item = str(item)
            if not isinstance(item, str):
                rec.fail(f"tags.{key}", f"expected text or a list of texts, got {json_type(item)}")
            pairs.append((key, item))
    return pairs


# --- responses ------------------------------------------------------------------------------


def load_responses(ctx: ImportContext, part: Part) -> None:
    """Add one response per record; its case must exist (in the project or this import)."""
    for rec in part.records:
        with ctx.guard(rec):
            _add_response(ctx, rec)


def _add_response(ctx: ImportContext, rec: Record) -> None:
    external = rec.ident("response_id")
    ctx.claim("response", external, rec, "response_id", external in ctx.ids("responses"))
    case_id = ctx.case_ref(rec, "case_id", rec.ident("case_id"))
    response_id = ctx.svc.add_response(
        case_id,
        external,
        rec.text("text", required=True),
        author_kind=rec.choice("author_kind", AUTHOR_KINDS, default="imported"),
        author=rec.text("author", limit=MAX_ID),
        source=rec.text("source", limit=MAX_ID),
        production=rec.choice("production", PRODUCTIONS, default="other"),
        session=ctx.session,
    )
    ctx.ids("responses")[external] = response_id
    ctx.set_times(ctx.session.get(Response, response_id), rec, created_at="created_at")
