"""Read CSV, XLSX, JSON Lines and JSON files into :class:`Part` tables.

Text files are decoded as UTF-8 (a byte-order mark is fine) and, failing that, as Windows-1252,
which is reported. A CSV file may separate its columns with semicolons, tabs or vertical bars
(as Excel saves "CSV" on a German or French Windows), told from its header row; that too is
reported. Every problem is an :class:`ImportFailed` naming the file and the row or line.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
import unicodedata
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any
from xml.etree import ElementTree
from xml.etree.ElementTree import ParseError

from portalreview.store.csv_cells import unescape_formula
from portalreview.store.importers.errors import EmptyTable, ImportFailed, json_type
from portalreview.store.importers.ooxml import ooxml_unescape
from portalreview.store.importers.records import Part, Record

TEXT_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}
XLSX_SUFFIXES = {".xlsx", ".xlsm"}
SUFFIXES = (*TEXT_SUFFIXES, *XLSX_SUFFIXES)
_UTF8_SEQUENCE = re.compile(
    rb"[\xC2-\xDF][\x80-\xBF]|[\xE0-\xEF][\x80-\xBF]{2}|[\xF0-\xF4][\x80-\xBF]{3}"
)
_ASCII = bytes(range(128))
CSV_CELL_LIMIT = 16 * 1024 * 1024  # characters in one CSV cell (texts are checked to 100,000)
_OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}
_SEP_LINE = re.compile(r'sep=([^"\r\n])[ \t]*(?:\r\n|\r|\n|\Z)')  # Excel's "sep=;" first line
# A workbook is a zip file whose parts (XML) are unpacked as they are read: a 1 MB file can
# declare a 1 GB sheet (a "zip bomb": minutes of work and all the memory). The limits are far
# above a study workbook's: PortalReview's export of bench_report's 10,000-case study (294,800
# answers) is about 480 MB unpacked, its largest sheet about 300 MB, each part packed 3-15:1;
# a sheet repeating one long text on every row packs about 110:1.
XLSX_PART_LIMIT = 1024**3  # bytes unpacked, one part
XLSX_TOTAL_LIMIT = 2 * 1024**3  # bytes unpacked, all parts together
# Deflate packs a run of one byte, what bombs are made of, about 1,030:1. Below the grace size
# a part is cheap to read whatever its ratio (a cell of 100,000 times "a" packs 1,000:1).
XLSX_RATIO_LIMIT = 250  # unpacked : packed
XLSX_RATIO_GRACE = 16 * 1024**2  # bytes unpacked


def read_parts(path: Path) -> list[Part]:
    """The tables in one file (a workbook gives one per non-empty sheet)."""
    label = path.name
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ImportFailed("there is no such file", file=str(path))
    if suffix == ".xls":
        raise ImportFailed("is an old Excel .xls file; save it as .xlsx or .csv", file=label)
    if suffix in XLSX_SUFFIXES:
        return _read_xlsx(path)
    if suffix not in TEXT_SUFFIXES:
        raise ImportFailed(
            f"unknown file type {suffix or '(none)'}; PortalReview imports "
            ".csv, .xlsx, .jsonl and .json (project.json) files",
            file=label,
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"cannot be read ({exc.strerror})", file=label) from None
    text, encoding_note = decode(label, data)
    style = TEXT_SUFFIXES[suffix]
    reader = {"csv": _csv_part, "jsonl": _jsonl_part, "json": _json_part}[style]
    part = reader(path, text)
    part.note = _joined_note(label, [encoding_note, part.note])
    return [part]


def _joined_note(label: str, notes: list[str | None]) -> str | None:
    """One note from the notes on one file, named once: "cases.csv: not UTF-8; ...; ..."."""
    said = [note.removeprefix(f"{label}: ") for note in notes if note]
    return f"{label}: {'; '.join(said)}" if said else None


def decode(label: str, data: bytes) -> tuple[str, str | None]:
    """The text of a file and a note when it was not UTF-8; refuses binary and empty files."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ImportFailed("is UTF-16 text; save it as UTF-8 (CSV UTF-8 in Excel)", file=label)
    if data.startswith(b"PK\x03\x04"):
        raise ImportFailed(
            "is a ZIP or Excel file, not text; give an Excel workbook the .xlsx extension",
            file=label,
        )
    if b"\x00" in data:
        raise ImportFailed("is a binary file, not text (it contains NUL bytes)", file=label)
    text, note = _decoded(label, data)
    if not text.strip():  # after decoding: a lone byte-order mark or Unicode spaces are empty
        raise EmptyTable("is empty", file=label)
    return text, note


def _decoded(label: str, data: bytes) -> tuple[str, str | None]:
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        # the codec counts from after a byte-order mark
        at = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
        line = data.count(b"\n", 0, at) + 1
        byte = data[at]
        if _looks_mixed(data):
            raise ImportFailed(
                f"mixed encodings: line {line} has byte 0x{byte:02X}, which is not UTF-8, "
                "while other characters are UTF-8; save the whole file as UTF-8",
                file=label,
            ) from None
        if data.startswith(codecs.BOM_UTF8):  # read as cp1252, the mark became "ï»¿"
            raise ImportFailed(
                f"mixed encodings: the file starts with the mark of UTF-8 text, but line "
                f"{line} has byte 0x{byte:02X}, which is not UTF-8; save the whole file as "
                "UTF-8",
                file=label,
            ) from None
    try:
        return data.decode("cp1252"), f"{label}: not UTF-8; read as Windows-1252 (cp1252)"
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFailed(
            f"line {line}: byte 0x{data[exc.start]:02X} is neither UTF-8 nor Windows-1252 "
            "text; save the file as UTF-8",
            file=label,
        ) from None


def _looks_mixed(data: bytes) -> bool:
    """Whether text that is not all UTF-8 is UTF-8 with some other bytes (refused) rather than
    Windows-1252: its UTF-8-looking sequences decode to characters a text plausibly holds and
    make up at least half its non-ASCII bytes. Windows-1252 text can look like UTF-8 by chance
    ("é" + no-break space + "»" reads as one CJK character)."""
    found = (m[0] for m in _UTF8_SEQUENCE.finditer(data))
    plausible = sum(len(seq) for seq in found if _plausible(seq.decode("utf-8", "replace")))
    high = len(data.translate(None, _ASCII))  # the bytes 0x80-0xFF
    return plausible > 0 and plausible * 2 >= high


def _plausible(char: str) -> bool:
    """Latin letters and symbols, Greek, Cyrillic, typographic punctuation, €, ™, emoji."""
    cp = ord(char)
    return (
        0xA0 <= cp <= 0x24F
        or 0x370 <= cp <= 0x4FF
        or 0x2010 <= cp <= 0x206F
        or cp in (0x20AC, 0x2122)
        or 0x1F300 <= cp <= 0x1FAFF
    )


# --- CSV -----------------------------------------------------------------------------------


def _csv_part(path: Path, text: str) -> Part:
    """The table of a CSV file, read with the separator its header row shows; a file not
    separated by commas says so in its note. A first line ``sep=;`` names the separator, as
    Excel reads it, and is not a row (Excel does not show it either)."""
    label = path.name
    declared = _SEP_LINE.match(text)
    if declared:
        text = text[declared.end() :]
    mark = declared[1] if declared else _separator(text)
    rows = _csv_rows(label, text, mark)
    if not rows:
        raise EmptyTable("is empty", file=label)
    part = _table_part(path, label, "csv", rows, stem=path.stem)
    if mark != ",":
        name = _OTHER_DELIMITERS.get(mark, repr(mark))
        part.note = f"{label}: columns separated by {name}, not commas; read that way"
    return part


def _csv_rows(label: str, text: str, mark: str = ",") -> list[tuple[int, list[str]]]:
    """(row number, cells) of every row split at ``mark``, blank rows dropped; the header is
    row 1. A cell escaped against spreadsheet formulas (``'=...``, as PortalReview writes)
    loses its quote."""
    if csv.field_size_limit() < CSV_CELL_LIMIT:  # an exported audit log holds long cells
        csv.field_size_limit(CSV_CELL_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=mark, strict=True)
    rows: list[tuple[int, list[str]]] = []
    number = 0
    try:
        for number, cells in enumerate(reader, start=1):
            if any(c.strip() for c in cells):
                rows.append((number, [unescape_formula(c) for c in cells]))
    except csv.Error as exc:
        raise ImportFailed(
            f"the file cannot be read as CSV: {_csv_reason(exc)}",
            file=label,
            place=f"row {number + 1}",
        ) from None
    return rows


def _separator(text: str) -> str:
    """The character between the columns, decided from the header row alone: a data row
    (a quoted first cell, as Excel writes a text holding the separator) cannot mislead it.

    Commas, unless the header read with commas is one column or breaks its quotes, or is
    fewer columns than with another mark that it keeps inside its names (a semicolon
    file whose header names hold commas: a REDCap data dictionary's "Choices, Calculations,
    OR Slider Labels") -- and the header read with that mark is several clean columns."""
    comma = _header_cells(text, ",")
    for mark in _OTHER_DELIMITERS:
        other = _header_cells(text, mark)
        if other is None or len(other) < 2:
            continue
        if comma is None or len(comma) < 2:
            return mark
        if len(other) > len(comma) and any(mark in cell for cell in comma):
            return mark
    return ","


def _header_cells(text: str, mark: str) -> list[str] | None:
    """The header's cells when split at ``mark``; None where its quotes show that ``mark`` is
    not the separator (a quote left inside a cell, or no valid CSV)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=mark, strict=True)
    try:
        cells = next(reader, [])
    except csv.Error:
        return None
    if any('"' in cell for cell in cells):
        return None
    while cells and not cells[-1].strip():
        cells.pop()
    return cells


def _separator_error(label: str, name: str, header: str, place: str) -> ImportFailed:
    """The refusal of a table whose header is one cell holding ``name`` (a workbook with a
    CSV file pasted into its first column, or a CSV header quoted whole)."""
    header = header.split("\n", 1)[0].rstrip("\r")
    return ImportFailed(
        f"the header is a single column {header[:80]!r}: the file separates columns with "
        f"{name}; save it as comma-separated CSV or as an Excel workbook (.xlsx)",
        file=label,
        place=place,
    )


def _csv_reason(exc: csv.Error) -> str:
    text = str(exc)
    if "field larger than field limit" in text:
        return f"a cell holds more than {CSV_CELL_LIMIT:,} characters (texts: at most 100,000)"
    return text


# --- XLSX ----------------------------------------------------------------------------------


def _read_xlsx(path: Path) -> list[Part]:
    """One part per sheet that has anything in it."""
    label = path.name
    try:
        with path.open("rb") as fh:
            signature = fh.read(4)
    except OSError as exc:
        raise ImportFailed(f"cannot be read ({exc.strerror})", file=label) from None
    if signature != b"PK\x03\x04":
        raise ImportFailed("is not an Excel workbook (.xlsx); is it a CSV file?", file=label)
    book = open_workbook(path, label, data_only=True)
    try:
        with _readable(label):
            # hidden sheets (drop-down lists, set-aside rows) are not part of what the user sees
            hidden = [name for name in book.sheetnames if book[name].sheet_state != "visible"]
        parts = [_sheet_part(path, book, n) for n in book.sheetnames if n not in hidden]
    finally:
        book.close()
    parts = [p for p in parts if p is not None]
    skipped = f"hidden sheets skipped: {', '.join(map(repr, hidden))}" if hidden else ""
    if not parts:
        where = f"any visible sheet ({skipped})" if hidden else "any sheet"
        raise EmptyTable(f"has no data rows in {where}", file=label)
    if len(parts) == 1:
        parts[0].stem = path.stem
    if hidden:
        parts[0].note = f"{label}: {skipped}"
    return parts


def open_workbook(path: Path, label: str, data_only: bool = False) -> Any:
    """openpyxl's read-only workbook of ``path``, once its parts' declared sizes are within
    the limits (:func:`_check_unpacked_sizes`); a damaged file is refused as not readable
    (:class:`ImportFailed`, naming ``label``)."""
    from openpyxl import load_workbook

    with _readable(label):
        with zipfile.ZipFile(path) as archive:
            _check_unpacked_sizes(label, archive.infolist())
        return load_workbook(path, read_only=True, data_only=data_only)


# what openpyxl and the XML parser raise on a damaged workbook: broken XML in any part, a cell
# or a style pointing past the end of its list (a shared text, a font), a value of the wrong
# type where openpyxl checks types (a sheet without a name), a missing part
_DAMAGED = (ParseError, zipfile.BadZipFile, KeyError, IndexError, TypeError, OSError, ValueError)


@contextmanager
def _readable(label: str) -> Iterator[None]:
    """Refuse a damaged workbook as not readable, whatever reading it raised."""
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        yield
    except ImportFailed:
        raise
    except (InvalidFileException, *_DAMAGED) as exc:
        raise ImportFailed(f"is not a readable Excel workbook ({exc})", file=label) from None


def _check_unpacked_sizes(label: str, parts: list[zipfile.ZipInfo]) -> None:
    """Refuse a workbook whose parts declare more than XLSX_PART_LIMIT or XLSX_TOTAL_LIMIT
    unpacked, or more than XLSX_RATIO_LIMIT times their packed size. The declared sizes bind:
    Python's zipfile stops a part there (and then fails its checksum)."""
    for part in parts:
        size, packed = part.file_size, part.compress_size
        _check_unpacked(label, f"part {part.filename}", size, packed, XLSX_PART_LIMIT)
    unpacked = sum(part.file_size for part in parts)
    packed = sum(part.compress_size for part in parts)
    _check_unpacked(label, "all its parts", unpacked, packed, XLSX_TOTAL_LIMIT)


def _check_unpacked(label: str, what: str, unpacked: int, packed: int, limit: int) -> None:
    if unpacked > limit:
        beyond = f"at most {limit:,} are read"
    elif unpacked > XLSX_RATIO_GRACE and unpacked > packed * XLSX_RATIO_LIMIT:
        ratio = unpacked // max(packed, 1)
        beyond = f"{ratio:,} times its packed size; at most {XLSX_RATIO_LIMIT} times is read"
    else:
        return
    raise ImportFailed(
        f"{what}: {unpacked:,} bytes unpacked, {beyond}: a damaged file or a zip bomb, "
        "not a study workbook",
        file=label,
    )


EXCEL_LAST_ROW = 1_048_576
_CELL_RE = re.compile(r"([A-Z]+)(\d+)")
_MERGED_RANGE_RE = re.compile(r"[A-Z]+\d+:[A-Z]+\d+")
_FORMULA_RE = re.compile(rb"<(?:\w+:)?f[ >/]")  # (a namespace prefix: <x:f>)
_MARK_OVERLAP = 64  # bytes of one chunk scanned again with the next: a mark may straddle them
_NO_SAVED_VALUE = "is a formula without a saved value; open and save the workbook in Excel first"


def _sheet_flaws(book: Any, sheet: Any) -> list[tuple[str, str]]:
    """(cell or range, problem) for what cannot be imported as it reads: an Excel error, a
    formula without a saved value (openpyxl reads both as plain values), merged cells (openpyxl
    gives the value to the first cell only). Read from the sheet's XML, which openpyxl's
    read-only sheets do not expose, streamed from the archive: a sheet can be large."""
    with book._archive.open(sheet._worksheet_path) as xml:
        if not _mentions_flaws(xml):
            return []  # the usual case: a fast scan, no second parse
    with book._archive.open(sheet._worksheet_path) as xml:
        return _parsed_flaws(xml)


def _mentions_flaws(xml: IO[bytes], chunk_size: int = 256 * 1024) -> bool:
    """Whether the XML holds a merged range, an error cell or a formula, scanned a chunk at a
    time (each with the end of the one before, where a mark may start)."""
    before = b""
    while chunk := xml.read(chunk_size):
        text = before + chunk
        if b"mergeCell" in text or b't="e"' in text or _FORMULA_RE.search(text):
            return True
        before = text[-_MARK_OVERLAP:]
    return False


def _parsed_flaws(xml: IO[bytes]) -> list[tuple[str, str]]:
    """The merged ranges, then the cell flaws, of a sheet's XML, parsed as a stream: each row
    is dropped once read, so memory does not grow with the sheet."""
    merged: list[tuple[str, str]] = []
    cells: list[tuple[str, str]] = []
    rows_parent = None
    for event, element in ElementTree.iterparse(xml, events=("start", "end")):
        tag = element.tag.rpartition("}")[2]
        if event == "start":
            if tag == "sheetData":
                rows_parent = element
        elif tag == "c":
            flaw = _cell_flaw(element)
            if flaw:
                cells.append(flaw)
        elif tag == "row" and rows_parent is not None:
            rows_parent.clear()  # the rows read so far: only this one
        elif tag == "mergeCell" and _MERGED_RANGE_RE.fullmatch(ref := element.get("ref", "")):
            problem = (
                f"cells {ref} are merged (the value is in the first only); unmerge cells {ref}"
            )
            merged.append((ref, problem))
    return merged + cells


def _cell_flaw(element: ElementTree.Element) -> tuple[str, str] | None:
    """(cell, problem) for a cell holding an Excel error or a formula without a saved value."""
    parts = {child.tag.rpartition("}")[2]: child for child in element}
    value = parts["v"].text if "v" in parts else None
    kind, ref = element.get("t"), element.get("r", "")
    if kind == "e" and value:
        return ref, f"cell {ref} holds the Excel error {value}"
    if "f" in parts and not value and not (kind == "str" and "v" in parts):
        return ref, f"cell {ref} {_NO_SAVED_VALUE}"  # "str" + <v/>: saved ""
    return None


def _refuse_flaws(label: str, flaws: list[tuple[str, str]], header: tuple[int, list]) -> None:
    """Refuse the first flaw in the table (a cell at or below the header row, a merged range
    reaching below it), naming its row and column."""
    from openpyxl.utils import column_index_from_string

    header_number, names = header
    for ref, problem in flaws:
        first, _, last = ref.partition(":")
        start, end = _CELL_RE.fullmatch(first), _CELL_RE.fullmatch(last or first)
        if not start or not end or int(end[2]) < header_number + (1 if last else 0):
            continue
        index = column_index_from_string(start[1]) - 1
        name = str(names[index]).strip() if index < len(names) else ""
        raise ImportFailed(
            problem, file=label, place=f"row {start[2]}", field=name or f"column {start[1]}"
        )


def _cell(value: Any) -> Any:
    """A cell's value: empty text for an empty cell, text with its OOXML escapes read."""
    if value is None:
        return ""
    return ooxml_unescape(value) if isinstance(value, str) else value


def _sheet_rows(sheet: Any) -> list[tuple[int, list]]:
    """(row number, cells) of every non-blank row of a read-only sheet, without the blank
    cells at its end; the header row (the first) as wide as the widest, so that a value with
    no column name above it is named as such. The sheet's recorded used range (``<dimension
    ref=...>``) is ignored, as Excel ignores it: some programs write it stale or as A1, and
    openpyxl would stop there. (A formatted empty cell in column XFD made every row 16,384
    cells wide: 2.6 GB for 20,000 rows.)"""
    sheet.reset_dimensions()
    rows = []
    for number, cells in enumerate(sheet.iter_rows(values_only=True), start=1):
        if number > EXCEL_LAST_ROW:  # openpyxl fills the gap to any row number a file gives
            raise ValueError(f"a row numbered beyond Excel's last row, {EXCEL_LAST_ROW:,}")
        values = [_cell(c) for c in cells]
        while values and not str(values[-1]).strip():
            values.pop()
        if values:
            rows.append((number, values))
    if rows:
        width = max(len(values) for _, values in rows)
        number, header = rows[0]
        rows[0] = (number, header + [""] * (width - len(header)))
    return rows


def _sheet_part(path: Path, book: Any, name: str) -> Part | None:
    label = f"{path.name}, sheet {name!r}"
    with _readable(path.name):  # a read-only workbook parses a sheet only as its rows are read
        rows = _sheet_rows(book[name])
        if not rows:
            return None
        _refuse_flaws(label, _sheet_flaws(book, book[name]), rows[0])
    if len(rows) == 1:
        return None  # a header and nothing else: an empty table of an exported workbook
    return _table_part(path, label, "xlsx", rows, stem=f"{path.stem}-{name}")


# --- rows to records (CSV and XLSX) --------------------------------------------------------


def _table_part(
    path: Path, label: str, style: str, rows: list[tuple[int, list]], stem: str
) -> Part:
    """A table from its rows (the first is the header): (row number, cells) each."""
    header_number, header = rows[0]
    columns = _header(label, [_header_name(h) for h in header], f"row {header_number}")
    if len(rows) < 2:
        raise EmptyTable("has a header row but no data rows", file=label)
    part = Part(path, label, style, [c for c in columns if c], stem=stem)
    for number, cells in rows[1:]:
        part.records.append(_row_record(label, columns, number, cells, style))
    return part


def _header_name(cell: Any) -> str:
    """A header cell's column name, without the spaces and invisible characters around it: a
    second byte-order mark or a zero-width space that a copy left before ``case_id`` cannot
    be seen in a spreadsheet, nor meant."""
    name = str(cell)
    start, end = 0, len(name)
    while start < end and _blank(name[start]):
        start += 1
    while end > start and _blank(name[end - 1]):
        end -= 1
    return name[start:end]


def _blank(char: str) -> bool:
    """A space or an invisible formatting character (byte-order mark, zero-width space)."""
    return char.isspace() or unicodedata.category(char) == "Cf"


def _header(label: str, columns: list[str], place: str) -> list[str]:
    """Check the header row: distinct columns, not one cell holding another separator."""
    while columns and not columns[-1]:
        columns.pop()
    if len(columns) == 1:
        for mark, name in _OTHER_DELIMITERS.items():
            if mark in columns[0]:
                raise _separator_error(label, name, columns[0], place=place)
    named = [c for c in columns if c]
    for name in named:
        if named.count(name) > 1:
            raise ImportFailed(f"column {name!r} appears twice", file=label, place=place)
    return columns  # an unnamed column may only be empty (checked per row)


def _column_name(index: int, style: str) -> str:
    """A column as the person sees it: its letter in a workbook, its number in a CSV file."""
    if style != "xlsx":
        return str(index + 1)
    from openpyxl.utils import get_column_letter

    return get_column_letter(index + 1)


def _row_record(label: str, columns: list[str], number: int, cells: list, style: str) -> Record:
    place = f"row {number}"
    while len(cells) > len(columns) and (cells[-1] is None or str(cells[-1]).strip() == ""):
        cells = cells[:-1]
    if len(cells) > len(columns) and style == "xlsx":  # (no separators in a workbook)
        raise ImportFailed(
            f"column {_column_name(len(cells) - 1, style)} has a value but no name in the "
            f"header, whose last column is {_column_name(len(columns) - 1, style)}",
            file=label,
            place=place,
        )
    if len(cells) > len(columns):
        raise ImportFailed(
            f"has {len(cells)} values but the header has {len(columns)} columns "
            "(a separator inside a value that is not in quotes?)",
            file=label,
            place=place,
        )
    if style == "csv" and len(cells) < len(columns):
        raise ImportFailed(
            f"has {len(cells)} values but the header has {len(columns)} columns",
            file=label,
            place=place,
        )
    values: dict[str, Any] = {}
    for i, value in enumerate(cells):
        if not columns[i]:
            if str(value).strip():
                raise ImportFailed(
                    f"column {_column_name(i, style)} has a value but no name in the header",
                    file=label,
                    place=place,
                )
            continue
        values[columns[i]] = value
    return Record(values, label, place, lenient=True)


# --- JSON Lines and JSON -------------------------------------------------------------------


def _jsonl_part(path: Path, text: str) -> Part:
    label = path.name
    if text.lstrip().startswith("["):
        try:
            whole = json.loads(text)
        except (ValueError, RecursionError):
            whole = None
        if isinstance(whole, list):
            raise ImportFailed(
                "is one JSON array, not JSON Lines: write one JSON object per line", file=label
            )
    part = Part(path, label, "jsonl", [], stem=path.stem)
    columns: dict[str, None] = {}
    lines = text.split("\n")
    last = max(i for i, line in enumerate(lines, start=1) if line.strip())
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        values = _json_line(label, number, line, number == last)
        columns.update(dict.fromkeys(values))
        part.records.append(Record(values, label, f"line {number}", lenient=False))
    part.columns = list(columns)
    return part


def _json_line(label: str, number: int, line: str, last: bool) -> dict:
    """One line of JSON Lines: an object (the last line may have been cut short)."""
    place = f"line {number}"
    try:
        value = json.loads(line, object_pairs_hook=_unique_keys, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        reason = _json_reason(exc)
        hint = "; is the file cut short?" if last and "Unterminated" in reason else ""
        raise ImportFailed(f"is not valid JSON ({reason}){hint}", file=label, place=place) from None
    if not isinstance(value, dict):
        raise ImportFailed(
            f"expected a JSON object {{...}}, got {json_type(value)}", file=label, place=place
        )
    return value


def _json_reason(exc: Exception) -> str:
    """Why JSON did not parse, in the file's terms (Python's own words name a Python call for
    a number of over 4,300 digits)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "int_max_str_digits" in str(exc):
        return "a number with more than 4,300 digits"
    return str(exc)


def _looks_like_label_studio(value: list) -> bool:
    """Label Studio's JSON export: a list of tasks, each with ``data`` and ``annotations``."""
    return bool(value) and all(
        isinstance(task, dict) and "data" in task and "annotations" in task for task in value[:20]
    )


def _json_part(path: Path, text: str) -> Part:
    label = path.name
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise ImportFailed(f"is not valid JSON ({_json_reason(exc)})", file=label) from None
    if isinstance(value, list):
        if _looks_like_label_studio(value):
            raise ImportFailed(
                "is a Label Studio export (tasks with data and annotations): PortalReview "
                "writes these for Label Studio but does not read them back; import the study's "
                "own export (portalreview export, JSON Lines or CSV) instead",
                file=label,
            )
        raise ImportFailed(
            "is a JSON array: tables are imported from JSON Lines (.jsonl), one object per line",
            file=label,
        )
    if not isinstance(value, dict):
        raise ImportFailed(f"expected a JSON object, got {json_type(value)}", file=label)
    return Part(path, label, "json", list(value), stem=path.stem, obj=value)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")
