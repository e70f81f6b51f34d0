"""Tables read from files, and typed access to one record's fields with located errors.

A :class:`Part` is one table: a CSV file, one sheet of a workbook, or a JSON Lines file. Each
of its :class:`Record` objects knows where it came from ("cases.csv, row 5") so that every
error names the file, the row and the field.

Cells of CSV and XLSX files are *lenient*: a number may stand for text and text for a number,
and nested values (lists, objects) are written as JSON text. JSON Lines values must have the
documented JSON type (an id may be a whole number).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, NoReturn

from portalreview.store.importers.errors import ImportFailed, json_type

MAX_TEXT = 100_000  # characters in a message, a response or any other text field
MAX_ID = 500  # characters in an id or a name
TOO_LARGE = "is a number too large to store (beyond about 1.8e308, read as infinity)"
_BIG = 2**62  # whole numbers beyond this are refused (SQLite integers are 64-bit)
_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f"}
_WHOLE = re.compile(r"[+-]?\d+(?:\.0*)?")
# Text that shows nothing: whitespace and the invisible characters that are not whitespace
# (zero-width space, non-joiner and joiner, word joiner, byte-order mark).
_BLANK = re.compile(r"[\s\u200b\u200c\u200d\u2060\ufeff]*")


def _is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only whitespace and invisible characters, or none."""
    return _BLANK.fullmatch(text) is not None


@dataclass
class Part:
    """One table of an import: its columns (in order) and records."""

    path: Path
    label: str  # how messages name it: "cases.csv" or "study.xlsx, sheet 'cases'"
    style: str  # "csv", "xlsx", "jsonl" or "json"
    columns: list[str]
    records: list[Record] = field(default_factory=list)
    stem: str = ""  # the name a unit set or an inbox tag takes from it
    obj: dict | None = None  # a JSON document (project.json)
    note: str | None = None  # e.g. "read as Windows-1252"


@dataclass
class Record:
    """One row (or JSON line) with typed, located field access."""

    values: dict[str, Any]
    file: str
    place: str  # "row 5" or "line 5"
    lenient: bool  # CSV/XLSX cell semantics (see the module docstring)

    @property
    def where(self) -> str:
        """ "cases.csv, row 5": the record's place, for messages."""
        return f"{self.file}, {self.place}"

    def fail(self, name: str | None, message: str) -> NoReturn:
        """Refuse the import at this record (and field ``name``, when given)."""
        raise ImportFailed(message, file=self.file, place=self.place, field=name)

    def raw(self, name: str) -> Any:
        """The value of a field, or None when it is absent, null or an empty string."""
        value = self.values.get(name)
        return None if value == "" else value

    def has(self, name: str) -> bool:
        """Whether the field has a value (not absent, null or empty)."""
        return self.raw(name) is not None

    # --- scalar fields ---------------------------------------------------------------------

    def text(
        self, name: str, *, required: bool = False, default: str = "", limit: int = MAX_TEXT
    ) -> str:
        """A text field, checked for length and for characters a database cannot store."""
        value = self.raw(name)
        if value is None:
            if required:
                self.fail(name, "is missing (required)")
            return default
        if isinstance(value, str):
            text = value
        elif self.lenient and isinstance(value, int | float) and not isinstance(value, bool):
            text = _number_text(value)
        elif self.lenient and isinstance(value, datetime | date):
            text = _date_text(value)
        else:
            self.fail(name, f"expected text, got {json_type(value)}")
        problem = text_problem(text, limit)
        if problem:
            self.fail(name, problem)
        if required and _is_blank(text):
            self.fail(name, "is blank (required)")
        return text

    def ident(self, name: str, *, required: bool = True) -> str | None:
        """An id or a name: text (or a whole number), stripped, at most 500 characters."""
        value = self.raw(name)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                self.fail(name, "is missing (required)")
            return None
        if not isinstance(value, str | float) or (isinstance(value, float) and not self.lenient):
            self.fail(name, f"expected an id (text), got {json_type(value)}")
        text = _number_text(value) if isinstance(value, float) else value.strip()
        problem = text_problem(text, MAX_ID)
        if problem:
            self.fail(name, problem)
        return text

    def label(self, name: str) -> str:
        """A short label that may be written as a number (a relevancy, a difficulty)."""
        value = self.raw(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _number_text(value)
        return self.text(name, limit=MAX_ID).strip()

    def integer(
        self, name: str, low: int, high: int, *, required: bool = False, what: str = ""
    ) -> int | None:
        """A whole number between ``low`` and ``high`` (text such as "3" is accepted)."""
        value = self.raw(name)
        if value is None:
            if required:
                self.fail(name, "is missing (required)")
            return None
        number = whole_number(value)
        expected = what or f"a whole number from {low} to {high}"
        if number is None or not low <= number <= high:
            self.fail(name, f"expected {expected}, got {show(value)}")
        return number

    def number(self, name: str, *, default: float = 0.0) -> float:
        """A number of zero or more (seconds)."""
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, str) and self.lenient:
            try:
                value = float(value)
            except ValueError:
                self.fail(name, f"expected a number, got {show(value)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(name, f"expected a number, got {json_type(value)}")
        if not math.isfinite(value) or value < 0 or value > 1e12:
            self.fail(name, f"expected a number of zero or more, got {value!r}")
        return float(value)

    def boolean(self, name: str, *, default: bool = False) -> bool:
        """true/false (also yes/no, 1/0)."""
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        self.fail(name, f"expected true or false, got {show(value)}")

    def choice(self, name: str, choices: tuple[str, ...], *, default: str | None = None) -> str:
        """One of a fixed set of words; required when there is no ``default``."""
        if default is None and not self.has(name):
            self.fail(name, f"is missing (required): one of {', '.join(choices)}")
        value = self.text(name, default=default or "", limit=MAX_ID).strip()
        if value not in choices:
            shown = ", ".join(c for c in choices if c) or "(none)"
            self.fail(name, f"expected one of {shown}; got {show(value)}")
        return value

    def timestamp(self, name: str) -> str | None:
        """An ISO-8601 time (kept exactly as written), or None."""
        value = self.text(name, limit=64).strip()
        if not value:
            return None
        try:
            datetime.fromisoformat(value)
        except ValueError:
            self.fail(name, f"expected an ISO-8601 time such as 2025-01-31T09:30:00, got {value!r}")
        return value

    # --- nested fields ---------------------------------------------------------------------

    def nested(self, name: str, *, required: bool = False) -> Any:
        """A JSON value: as is in JSON Lines, parsed from JSON text in a CSV/XLSX cell."""
        value = self.raw(name)
        if value is None:
            if required:
                self.fail(name, "is missing (required)")
            return None
        if self.lenient and isinstance(value, str):
            try:
                value = json.loads(value, parse_constant=_no_constant)
            except (ValueError, RecursionError) as exc:
                self.fail(name, f"is not valid JSON text ({exc})")
        found = nested_problem(value)
        if found:
            self.fail(name + found[0], found[1])
        return value

    def obj(self, name: str, *, required: bool = False) -> dict | None:
        """A JSON object (see :meth:`nested`)."""
        value = self.nested(name, required=required)
        if value is not None and not isinstance(value, dict):
            self.fail(name, f"expected an object, got {json_type(value)}")
        return value

    def items(self, name: str) -> list[str] | None:
        """A list of text items: a JSON list, or text with one item per line (or items
        separated by " - " when the text is a single line). None when absent."""
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str) and value.lstrip().startswith("[") and self.lenient:
            value = _json_list(value)
        if isinstance(value, str):
            return split_items(value)
        if not isinstance(value, list):
            self.fail(name, f"expected a list of text items or text, got {json_type(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{name}[{i}]", f"expected text, got {json_type(item)}")
            problem = text_problem(item, MAX_TEXT)
            if problem:
                self.fail(f"{name}[{i}]", problem)
        return list(value)


def split_items(text: str) -> list[str]:
    """Items of a cell: one per line, or separated by " - " when there is a single line."""
    pieces = text.splitlines() if "\n" in text or "\r" in text else text.split(" - ")
    return [p.strip() for p in pieces if p.strip()]


def text_problem(text: str, limit: int) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if len(text) > limit:
        return f"is {len(text):,} characters long; at most {limit:,} are allowed"
    if "\x00" in text:
        return "contains a NUL character (binary data?)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an invalid character (an unpaired UTF-16 surrogate)"
    return None


def nested_problem(value: Any, limit: int = MAX_TEXT) -> tuple[str, str] | None:
    """The first text (or key) inside a nested value that cannot be stored, by the rule of
    :func:`text_problem`, or number that JSON read as infinity (1e400): ``(".parts.empathy",
    why)``, its place after the field's name; or None. Keys and list items are walked in order,
    without recursion (a file may nest deeply)."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            problem = text_problem(item, limit)
            if problem:
                return path, problem
        elif isinstance(item, float) and not math.isfinite(item):
            return path, TOO_LARGE
        elif isinstance(item, dict):
            for key in item:
                problem = text_problem(key, limit) if isinstance(key, str) else None
                if problem:
                    return path, f"a key {problem}"
            todo.extend((f"{path}.{_key_shown(k)}", v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            todo.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def _key_shown(key: Any) -> str:
    """A key as a field's name shows it (a long one cut short)."""
    text = str(key)
    return text if len(text) <= 60 else text[:57] + "..."


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (3, 3.0, "3"), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        value = int(value.strip().split(".")[0])
    if isinstance(value, int) and -_BIG < value < _BIG:
        return value
    return None


def show(value: Any) -> str:
    """A short quoted form of a value for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number_text(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < _BIG:
        return str(int(value))
    return str(value)


def _json_list(text: str) -> list | str:
    """A cell holding a JSON list, parsed; any other text as it is."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, list) else text


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _date_text(value: datetime | date) -> str:
    """A date cell as text: a workbook stores a date as a datetime at midnight, which is the
    date (2024-01-03), not 2024-01-03T00:00:00."""
    if isinstance(value, datetime) and value.time() == time() and value.tzinfo is None:
        return value.date().isoformat()
    return value.isoformat()
