"""Text in Excel workbooks: the OOXML escape ``_xHHHH_`` (ECMA-376 Part 1, ST_Xstring).

An XML reader turns a carriage return inside a cell into a line feed, so a workbook keeps one
only as ``_x000D_``; Excel reads and writes that escape, and writes a literal ``_x`` followed
by four hex digits and ``_`` as ``_x005F_x...``. openpyxl leaves both to its caller: the exporter
escapes what it writes, the importer unescapes what it reads (also from Excel's own files).
"""

from __future__ import annotations

import re

_LITERAL = re.compile(r"_(?=x[0-9A-Fa-f]{4}_)")
_ESCAPED = re.compile(r"_x([0-9A-Fa-f]{4})_")
# Characters XML 1.0 does not allow that a database text may hold: the noncharacters U+FFFE and
# U+FFFF (mis-decoded pasted text). A workbook holding them raw is unreadable.
_NOT_XML = re.compile("[\ufffe\uffff]")


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
