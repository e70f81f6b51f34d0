"""Spreadsheet-safe CSV text cells (CSV or formula injection, OWASP's advice).

Excel, LibreOffice and Google Sheets run a CSV cell that starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return as a formula: a patient message ``=HYPERLINK("http://...";"x")``
would become a live link, ``+cmd|' /C calc'!A0`` a command. Every CSV PortalReview writes puts
one single quote before such a text (spreadsheets show it as text) and quotes the cell.

The escape is reversible, so that a data export still imports to the same study: a text of
the form ``'...'X...`` (k >= 0 quotes, then a formula character X) gets one more quote, and
the reader takes one off every cell of the form ``'...'X...`` with k >= 1 quotes. A text that
is not of that form is written and read as it is. Numbers (``int``/``float`` values, not texts)
are never escaped: ``-3.5`` stays a number a spreadsheet can compute with, and a number cannot
run as a formula.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_RISKY = re.compile(r"'*[=+\-@\t\r]")  # any quotes, then a character that starts a formula
_ESCAPED = re.compile(r"'+[=+\-@\t\r]")  # the same with at least one quote


def escape_formula(text: str) -> str:
    """``text`` as a CSV cell that cannot run as a formula: ``=1+2`` -> ``'=1+2``."""
    return "'" + text if _RISKY.match(text) else text


def unescape_formula(text: str) -> str:
    """The inverse of :func:`escape_formula`: ``'=1+2`` -> ``=1+2``; other cells unchanged."""
    return text[1:] if _ESCAPED.match(text) else text


def safe_writer(fh: IO[str]) -> Any:
    """A ``csv.writer`` that quotes every text cell and leaves numbers bare (OWASP: quote the
    cell); give it rows from :func:`safe_row`."""
    return csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)


def safe_row(values: Iterable[Any]) -> list[Any]:
    """Cells for :func:`safe_writer`: texts escaped (:func:`escape_formula`), ``int`` and
    ``float`` kept as numbers, None as an empty cell, booleans as ``true``/``false``."""
    return [_safe_cell(v) for v in values]


def _safe_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    return escape_formula(str(value))
