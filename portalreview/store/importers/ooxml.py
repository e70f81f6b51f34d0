"""Text in Excel workbooks: the OOXML escape ``_xHHHH_`` (ECMA-376 Part 1, ST_Xstring).

An XML reader turns a carriage return inside a cell into a line feed, so a workbook keeps one
only as ``_x000D_``; Excel reads and writes that escape, and writes a literal ``_x`` followed
by four hex digits and ``_`` as ``_x005F_x...``. openpyxl leaves both to its caller: the exporter
escapes what it writes, the importer unescapes what it reads (also from Excel's own files).

A cell holds at most 32,767 characters as Excel counts them: UTF-16 code units, so a character
beyond U+FFFF (an emoji) counts 2. Excel's LEN counts so, and a longer cell makes Excel repair
the workbook on opening, cutting the text.
"""

from __future__ import annotations

import re

_LITERAL = re.compile(r"_(?=x[0-9A-Fa-f]{4}_)")
_ESCAPED = re.compile(r"_x([0-9A-Fa-f]{4})_")
# Characters XML 1.0 does not allow that a database text may hold: the noncharacters U+FFFE and
# U+FFFF (mis-decoded pasted text). A workbook holding them raw is unreadable.
_NOT_XML = re.compile("[\ufffe\uffff]")
EXCEL_CELL_LIMIT = 32_767  # UTF-16 code units: see excel_length


def excel_length(text: str) -> int:
    """``text``'s length as Excel counts it: UTF-16 code units (an emoji counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def fits_excel_cell(text: str) -> bool:
    """Whether an Excel cell holds ``text`` (at most ``EXCEL_CELL_LIMIT`` UTF-16 units)."""
    # No character counts more than 2: a short text needs no encoding (most cells of a report).
    return len(text) <= EXCEL_CELL_LIMIT // 2 or excel_length(text) <= EXCEL_CELL_LIMIT


def excel_prefix(text: str, units: int) -> str:
    """The longest start of ``text`` of at most ``units`` UTF-16 code units, never ending
    inside a character (between the two halves of an emoji's surrogate pair)."""
    if excel_length(text) <= units:
        return text
    head = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    kept = head.decode("utf-16-le", "surrogatepass")
    if kept and kept[-1] != text[len(kept) - 1]:
        kept = kept[:-1]  # the cut fell inside a character beyond U+FFFF: left out whole
    return kept


def ooxml_escape(text: str) -> str:
    """``text`` as a workbook cell keeps it: ``_xHHHH_`` protected, carriage returns and the
    characters XML cannot hold escaped."""
    if "_x" in text:
        text = _LITERAL.sub("_x005F_", text)
    text = _NOT_XML.sub(lambda m: f"_x{ord(m.group()):04X}_", text)
    return text.replace("\r", "_x000D_")


def ooxml_unescape(text: str) -> str:
    """The text a workbook cell holds, with every ``_xHHHH_`` escape read back."""
    if "_x" not in text:
        return text
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)
