"""What the file readers make of odd but real files: encodings, empty files, Excel cells."""

from __future__ import annotations

import datetime
import io
import tracemalloc
from pathlib import Path

import pytest
from io_support import edit_part, edit_sheet_xml, refused, write_csv
from openpyxl import Workbook, load_workbook
from sqlalchemy import select

from portalreview.store.importers import ImportFailed, import_files, readers
from portalreview.store.importers.readers import read_parts
from portalreview.store.models import Case, CaseTag
from portalreview.store.project import Project


@pytest.fixture
def empty_project(tmp_path):
    with Project.create(tmp_path / "s.prproj") as project:
        yield project


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n\r\n", "\u00a0\n".encode()])
def test_a_file_of_only_a_bom_or_unicode_spaces_is_empty(empty_project, tmp_path, data):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(data)
    assert "notes.jsonl: is empty" in refused(empty_project, [path])
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "cases.csv").write_text("case_id,message\nc1,Hello there.\n")
    (folder / "notes.jsonl").write_bytes(data)
    report = import_files(empty_project, [folder])
    assert report.added["cases"] == 1
    assert "empty files skipped: notes.jsonl" in report.notes


def _book(path: Path, rows: list[list], merge: str | None = None) -> Path:
    book = Workbook()
    sheet = book.active
    sheet.title = "cases"
    for row in rows:
        sheet.append(row)
    if merge:
        sheet.merge_cells(merge)
    book.save(path)
    return path


def _cache(path: Path, cell: str, value: str, kind: str = "e") -> None:
    """Give the formula in ``cell`` the saved result ``value`` of type ``kind`` (``e``: an
    error), as Excel saves it."""
    edit_sheet_xml(
        path,
        "sheet1",
        rf'<c r="{cell}"([^>]*)><f>(.*?)</f><v\s*/?>(</v>)?</c>'.encode(),
        rf'<c r="{cell}"\1 t="{kind}"><f>\2</f><v>{value}</v></c>'.encode(),
    )


@pytest.mark.parametrize("error", ["#N/A", "#REF!", "#DIV/0!"])
def test_an_excel_error_is_refused_naming_its_cell(empty_project, tmp_path, error):
    path = _book(tmp_path / "a.xlsx", [["case_id", "message"], ["c1", "=VLOOKUP(A2,B:C,2,0)"]])
    _cache(path, "B2", error)
    message = refused(empty_project, [path])
    assert "a.xlsx, sheet 'cases', row 2, field 'message'" in message
    assert f"cell B2 holds the Excel error {error}" in message


@pytest.mark.parametrize("column", ["message", "source"])
def test_a_formula_without_a_saved_value_isrefused(empty_project, tmp_path, column):
    row = ["c1", "Hello.", "web"]
    row[1 if column == "message" else 2] = '=CONCAT("a","b")'
    path = _book(tmp_path / "b.xlsx", [["case_id", "message", "source"], row])
    message = refused(empty_project, [path])
    assert f"row 2, field '{column}'" in message
    assert "a formula without a saved value; open and save the workbook in Excel" in message


def test_a_formula_with_a_saved_value_imports_the_value(empty_project, tmp_path):
    path = _book(tmp_path / "c.xlsx", [["case_id", "message"], ["c1", '=CONCAT("Hel","lo.")']])
    _cache(path, "B2", "Hello.", kind="str")
    assert import_files(empty_project, [path]).added["cases"] == 1
    path = _book(tmp_path / "d.xlsx", [["case_id", "message", "source"], ["c2", "Hi.", "=A1"]])
    _cache(path, "C2", "", kind="str")  # a formula whose saved result is empty text
    assert import_files(empty_project, [path]).added["cases"] == 1


def test_windows_1252_french_that_looks_like_utf8_by_chance(empty_project, tmp_path):
    """The bytes of "é", a no-break space and "»" (E9 A0 BB) also read as one UTF-8 character."""
    path = tmp_path / "cas.csv"
    text = "case_id,message\nc1,« J’ai mal au côté\u00a0» depuis hier\n"
    path.write_bytes(text.encode("cp1252"))
    report = import_files(empty_project, [path])
    assert "cas.csv: not UTF-8; read as Windows-1252 (cp1252)" in report.notes
    with empty_project.read() as session:
        assert session.scalar(select(Case.message)) == "« J’ai mal au côté\u00a0» depuis hier"


@pytest.mark.parametrize("mark", [b"", b"\xef\xbb\xbf"], ids=["no-mark", "utf8-mark"])
def test_utf8_with_a_stray_windows_1252_byte_is_still_mixed(empty_project, tmp_path, mark):
    path = tmp_path / "mixed.csv"
    text = "case_id,message\nc1,Café « ok »\nc2,Caf".encode()
    path.write_bytes(mark + text + b"\xe9 again\n")
    # (after a mark, the line and byte were counted 3 bytes off)
    assert "mixed encodings: line 3 has byte 0xE9" in refused(empty_project, [path])


def test_a_number_too_long_for_python_is_said_in_the_files_terms(empty_project, tmp_path):
    """Python's own message advised calling sys.set_int_max_str_digits()."""
    path = tmp_path / "big.jsonl"
    path.write_text('{"case_id": ' + "9" * 5000 + ', "message": "hi"}\n')
    message = refused(empty_project, [path])
    assert "line 1: is not valid JSON (a number with more than 4,300 digits)" in message
    assert "sys." not in message


def test_a_utf8_mark_before_windows_1252_text_is_mixed(empty_project, tmp_path):
    """Read as Windows-1252, the mark became "ï»¿case_id", and the refusal said the file
    lacked a case_id column that its first line plainly showed."""
    path = tmp_path / "marked.csv"
    path.write_bytes(b"\xef\xbb\xbfcase_id,message\nx1,Caf\xe9 au lait made me ill.\n")
    message = refused(empty_project, [path])
    assert "mixed encodings" in message and "line 2 has byte 0xE9" in message
    assert "ï»¿" not in message


def test_merged_cells_in_the_data_are_refused_naming_the_range(empty_project, tmp_path):
    rows = [["case_id", "message", "source"], ["m1", "One.", "A"], ["m2", "Two.", None]]
    path = _book(tmp_path / "m.xlsx", [*rows, ["m3", "Three.", None]], merge="C2:C4")
    message = refused(empty_project, [path])
    assert "m.xlsx, sheet 'cases', row 2, field 'source'" in message
    assert "unmerge cells C2:C4" in message
    rows = [["case_id", "message", None], ["m1", "One."], ["m2", "Two."]]
    path = _book(tmp_path / "title.xlsx", rows, merge="B1:C1")
    assert import_files(empty_project, [path]).added["cases"] == 2  # only the header merged


def test_a_date_cell_in_a_text_field_is_the_date(empty_project, tmp_path):
    seen = datetime.datetime(2024, 1, 3, 14, 30)
    rows = [["case_id", "message", "tag_visit", "tag_seen"], ["e1", "Hi.", seen.date(), seen]]
    import_files(empty_project, [_book(tmp_path / "d.xlsx", rows)])
    with empty_project.read() as session:
        tags = dict(session.execute(select(CaseTag.key, CaseTag.value)).all())
    assert tags == {"visit": "2024-01-03", "seen": "2024-01-03T14:30:00"}


def test_hidden_sheets_are_skipped_with_a_note(empty_project, tmp_path):
    book = Workbook()
    book.active.title = "cases"
    book.active.append(["case_id", "message", "urgency_level"])
    book.active.append(["c1", "Hello there.", 2])
    lists = book.create_sheet("lists")  # a drop-down list: no format fits it
    lists.append(["levels"])
    for level in range(1, 7):
        lists.append([level])
    old = book.create_sheet("excluded")
    old.append(["case_id", "message"])
    old.append(["x1", "Set aside by the PI."])
    lists.sheet_state, old.sheet_state = "hidden", "veryHidden"
    book.save(tmp_path / "study.xlsx")
    report = import_files(empty_project, [tmp_path / "study.xlsx"])
    assert list(report.files) == ["study.xlsx, sheet 'cases'"]
    assert "study.xlsx: hidden sheets skipped: 'lists', 'excluded'" in report.notes
    with empty_project.read() as session:
        assert session.scalars(select(Case.external_id)).all() == ["c1"]


def _set_dimension(path: Path, ref: str) -> None:
    """Write ``ref`` as the sheet's recorded used range, as WPS Office (A1) or a tool that
    adds rows without updating the record leaves it."""
    stale = f'<dimension ref="{ref}"/>'.encode()
    edit_sheet_xml(path, "sheet1", rb'<dimension ref="[^"]*"\s*/>', stale)


@pytest.mark.parametrize("ref", ["A1:B3", "A1"])
def test_a_stale_used_range_record_does_not_cut_the_sheet(empty_project, tmp_path, ref):
    """openpyxl's read-only sheets stopped at the recorded range: 2 of 10 cases were imported
    without their third column, and with A1 the sheet was said to have no data rows."""
    rows = [["case_id", "message", "age_band"]]
    rows += [[f"c{i}", f"Message number {i}.", "45-64"] for i in range(10)]
    path = _book(tmp_path / "wps.xlsx", rows)
    _set_dimension(path, ref)
    assert import_files(empty_project, [path]).added["cases"] == 10
    with empty_project.read() as session:
        assert session.scalars(select(Case.age_band)).all() == ["45-64"] * 10


def test_a_formatted_empty_cell_far_right_does_not_widen_every_row(empty_project, tmp_path):
    """One empty cell in column XFD with a format of its own made every row 16,384 cells wide
    (2.6 GB for 20,000 rows, found by an explorer): blank cells at a row's end are dropped."""
    from openpyxl.styles import Font

    from portalreview.store.importers.readers import _sheet_rows

    rows = [["case_id", "message"]] + [[f"c{i}", f"Message number {i}."] for i in range(3)]
    path = _book(tmp_path / "styled.xlsx", rows)
    book = load_workbook(path)
    book.active["XFD3"].font = Font(bold=True)
    book.save(path)
    read = load_workbook(path, read_only=True)
    try:
        assert [len(cells) for _, cells in _sheet_rows(read.active)] == [2, 2, 2, 2]
    finally:
        read.close()
    assert import_files(empty_project, [path]).added["cases"] == 3


def test_a_value_right_of_the_header_is_named_by_its_column_letter(empty_project, tmp_path):
    """It was refused as a CSV row is: "has 16384 values ... a separator inside a value that
    is not in quotes?", which a workbook has none of."""
    rows = [["case_id", "message"]] + [[f"c{i}", f"Message number {i}."] for i in range(3)]
    path = _book(tmp_path / "stray.xlsx", rows)
    book = load_workbook(path)
    book.active["XFD3"] = "x"
    book.save(path)
    message = refused(empty_project, [path])
    assert "row 3: column XFD has a value but no name in the header, whose last column is B" in (
        message
    )
    assert "separator" not in message


# --- damaged and hostile workbooks ---------------------------------------------------------


def _padded_book(path: Path, padding: int) -> Path:
    """A workbook whose sheet XML holds ``padding`` spaces: it packs about 1,000:1, as a zip
    bomb does (found by an explorer: a 1 MB file unpacking to 1 GB took 16 s and 2.8 GB)."""
    path = _book(path, [["case_id", "message"], ["b1", "Hello."]])
    edit_sheet_xml(path, "sheet1", rb"<sheetData>", b" " * padding + b"<sheetData>")
    return path


def test_a_workbook_packed_like_a_zip_bomb_is_refused_unread(empty_project, tmp_path):
    path = _padded_book(tmp_path / "bomb.xlsx", 17_000_000)  # (just over the 16 MiB grace)
    message = refused(empty_project, [path])
    assert message.startswith("bomb.xlsx: part xl/worksheets/sheet1.xml: 17,00")
    assert "times its packed size; at most 250 times is read: a damaged file or a zip bomb" in (
        message
    )


@pytest.mark.parametrize(
    ("limit", "what"),
    [("XLSX_PART_LIMIT", "part xl/worksheets/sheet1.xml"), ("XLSX_TOTAL_LIMIT", "all its parts")],
)
def test_a_workbook_too_large_unpacked_is_refused_unread(
    empty_project, tmp_path, monkeypatch, limit, what
):
    monkeypatch.setattr(readers, limit, 2_000_000)  # (2 GB real workbooks are not made here)
    path = _padded_book(tmp_path / "large.xlsx", 2_000_000)
    message = refused(empty_project, [path])
    assert message.startswith(f"large.xlsx: {what}: 2,0")
    assert "bytes unpacked, at most 2,000,000 are read: a damaged file or a zip bomb" in message


def test_the_flaws_of_a_large_sheet_are_found_without_holding_it(tmp_path):
    """The sheet's XML was read whole, and parsed into a tree of all its rows."""
    path = _book(tmp_path / "long.xlsx", [["case_id", "message"], ["c1", "Hello."]])
    cell = b'<c r="B%d" t="inlineStr"><is><t>' + b"Hello." * 40 + b"</t></is></c>"
    rows = b"".join(b'<row r="%d">' % i + cell % i + b"</row>" for i in range(3, 25_000))
    last = b'<row r="25000"><c r="B25000"><f>A1</f></c></row>'
    edit_sheet_xml(path, "sheet1", rb"</sheetData>", rows + last + b"</sheetData>")
    book = load_workbook(path, read_only=True)
    tracemalloc.start()
    try:
        flaws = readers._sheet_flaws(book, book.active)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        book.close()
    assert flaws == [("B25000", f"cell B25000 {readers._NO_SAVED_VALUE}")]
    assert peak < len(rows) / 2, f"{peak:,} bytes for a sheet of {len(rows):,}"


_DAMAGED_PARTS = {  # what an explorer found crashing the import with a Python traceback
    "broken workbook.xml": ("xl/workbook.xml", rb"(?s).+", b"<workbook><sheets><sheet"),
    "broken styles.xml": ("xl/styles.xml", rb"(?s).+", b"<styleSheet><numFmts"),
    "broken content types": ("[Content_Types].xml", rb"(?s).+", b"garbage"),
    "shared text past the end": (
        "xl/worksheets/sheet1.xml", rb'<c r="B2".*?</c>', b'<c r="B2" t="s"><v>999</v></c>'
    ),
    "a sheet without a name": ("xl/workbook.xml", rb' name="cases"', b""),
    "a style's font past the end": ("xl/styles.xml", rb'fontId="0"', b'fontId="99"'),
}  # fmt: skip


@pytest.mark.parametrize("damage", sorted(_DAMAGED_PARTS))
def test_a_damaged_workbook_is_refused_as_not_readable(empty_project, tmp_path, damage):
    path = _book(tmp_path / "damaged.xlsx", [["case_id", "message"], ["c1", "Hello."]])
    edit_part(path, *_DAMAGED_PARTS[damage])
    message = refused(empty_project, [path])
    assert message.startswith("damaged.xlsx: is not a readable Excel workbook (")


def test_a_row_numbered_beyond_excels_last_is_refused(empty_project, tmp_path):
    """openpyxl fills the gap up to a row's number with empty rows: a row numbered 10**20
    never ended (not tried here: it would hang the tests if this broke again)."""
    path = _book(tmp_path / "far.xlsx", [["case_id", "message"], ["c1", "Hello."]])
    edit_sheet_xml(path, "sheet1", rb'<row r="2"', b'<row r="1048577"')
    message = refused(empty_project, [path])
    assert message == (
        "far.xlsx: is not a readable Excel workbook (a row numbered beyond Excel's last row, "
        "1,048,576)"
    )


@pytest.mark.parametrize(
    "xml",
    [b'<c r="A1"><f>A2</f></c>', b'<x:c r="A1"><x:f>A2</x:f>', b'<c t="e">', b"<mergeCell ref="],
)
def test_a_flaw_mark_is_found_across_the_chunks_a_sheet_is_scanned_in(xml):
    for size in range(1, len(xml) + 1):
        assert readers._mentions_flaws(io.BytesIO(b"<row>" + xml), chunk_size=size), size
    assert not readers._mentions_flaws(io.BytesIO(b'<c r="F1" t="s"><v>1</v></c>'), chunk_size=3)


# --- the separator: told from the header row ------------------------------------------------

_GERMAN_EXCEL = {  # as Excel on a German Windows saves "CSV (Trennzeichen-getrennt)"
    "quoted first cell": (
        'message;case_id\r\n"Guten Tag; ich habe ""Fieber"",\r\n38,5 °C seit gestern";101\r\n',
        [["message", "case_id"], ['Guten Tag; ich habe "Fieber",\r\n38,5 °C seit gestern', "101"]],
    ),
    "REDCap dictionary": (  # header names holding commas, separated by semicolons
        "Variable / Field Name;Form Name;Section Header;Field Type;Field Label;"
        '"Choices, Calculations, OR Slider Labels";Field Note\r\n'
        "record_id;survey;;text;Record ID;;\r\n"
        'pain;survey;;radio;"Schmerzen; seit wann?";"1, heute | 2, gestern";\r\n',
        [
            ["Variable / Field Name", "Form Name", "Section Header", "Field Type", "Field Label",
             "Choices, Calculations, OR Slider Labels", "Field Note"],
            ["record_id", "survey", "", "text", "Record ID", "", ""],
            ["pain", "survey", "", "radio", "Schmerzen; seit wann?", "1, heute | 2, gestern", ""],
        ],
    ),
    "quoted header and cells": (
        '"case_id";"message"\r\n"101";"Guten Tag; ich habe Fieber"\r\n',
        [["case_id", "message"], ["101", "Guten Tag; ich habe Fieber"]],
    ),
}  # fmt: skip


def _table(path: Path) -> tuple[list[str], list[tuple[str, dict]]]:
    """The columns and the (place, values) of each record of a one-table file."""
    [part] = read_parts(path)
    return part.columns, [(record.place, record.values) for record in part.records]


def _twins(tmp_path: Path, name: str, content: str, rows: list[list[str]]) -> tuple[Path, Path]:
    """``content`` as Excel wrote it (Windows-1252) and ``rows`` written with commas."""
    path = tmp_path / name
    path.write_bytes(content.encode("cp1252"))
    return path, write_csv(tmp_path / f"comma-{name}", rows)


@pytest.mark.parametrize("content, rows", _GERMAN_EXCEL.values(), ids=_GERMAN_EXCEL)
def test_a_semicolon_file_reads_as_its_comma_twin_whatever_its_rows_hold(tmp_path, content, rows):
    """The separator is decided from the header row: a first data cell that Excel quoted (it
    holds a ';', quotes, a line break) or header names holding commas do not hide it."""
    path, comma = _twins(tmp_path, "excel.csv", content, rows)
    assert _table(path) == _table(comma)
    [part] = read_parts(path)
    assert part.note.endswith("columns separated by semicolons, not commas; read that way")


def test_a_semicolon_file_imports_the_cases_of_its_comma_twin(tmp_path):
    """Quoted cells holding semicolons, commas, quotes and line breaks; a blank row."""
    content = (
        "case_id;message;tags\r\n"
        '101;"Guten Tag; ich habe ""Fieber"",\r\n38,5 C seit gestern";"site=Köln; ward=3"\r\n'
        ";;\r\n"
        "102;Schmerzen, seit gestern;site=Bonn\r\n"
    )
    rows = [
        ["case_id", "message", "tags"],
        ["101", 'Guten Tag; ich habe "Fieber",\r\n38,5 C seit gestern', "site=Köln; ward=3"],
        ["102", "Schmerzen, seit gestern", "site=Bonn"],
    ]
    path, comma = _twins(tmp_path, "cases.csv", content, rows)
    imported = []
    for name, file in (("semi", path), ("comma", comma)):
        with Project.create(tmp_path / f"{name}.prproj") as project:
            assert import_files(project, [file]).added["cases"] == 2
            with project.read() as session:
                cases = session.execute(select(Case.external_id, Case.message)).all()
                tags = session.execute(select(CaseTag.key, CaseTag.value)).all()
            imported.append((sorted(cases), sorted(tags)))
    assert imported[0] == imported[1]
    assert imported[0][0][0] == ("101", 'Guten Tag; ich habe "Fieber",\r\n38,5 C seit gestern')


def test_a_semicolon_windows_1252_file_gets_both_notes(empty_project, tmp_path):
    path = tmp_path / "fälle.csv"
    path.write_bytes(
        "case_id;message\r\nc1;Ich habe Bauchschmerzen ä, seit Montag.\r\n".encode("cp1252")
    )
    report = import_files(empty_project, [path])
    assert report.notes == [
        "fälle.csv: not UTF-8; read as Windows-1252 (cp1252); "
        "columns separated by semicolons, not commas; read that way"
    ]
    with empty_project.read() as session:
        assert session.scalar(select(Case.message)) == "Ich habe Bauchschmerzen ä, seit Montag."


@pytest.mark.parametrize("mark, name", [("\t", "tabs"), ("|", "vertical bars")])
def test_a_tab_or_bar_file_with_a_quoted_first_cell_reads_as_its_comma_twin(
    empty_project, tmp_path, mark, name
):
    content = f'message{mark}case_id\n"Hello,{mark}there"{mark}101\n'
    path, comma = _twins(
        tmp_path, "tabs.csv", content, [["message", "case_id"], [f"Hello,{mark}there", "101"]]
    )
    assert _table(path) == _table(comma)
    report = import_files(empty_project, [path])
    assert report.notes == [f"tabs.csv: columns separated by {name}, not commas; read that way"]


def test_a_broken_quote_in_a_semicolon_file_names_its_row(empty_project, tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text('case_id;message\nc1;Fine.\nc2;"Never closed; at all\nc3;Lost.\n')
    message = refused(empty_project, [path])
    assert message.startswith("cases.csv, row 3: the file cannot be read as CSV")


def test_a_workbook_with_a_csv_pasted_into_one_column_is_still_refused(empty_project, tmp_path):
    path = _book(tmp_path / "w.xlsx", [["case_id;message"], ["c1;Hello."]])
    assert refused(empty_project, [path]) == (
        "w.xlsx, sheet 'cases', row 1: the header is a single column 'case_id;message': the "
        "file separates columns with semicolons; save it as comma-separated CSV or as an Excel "
        "workbook (.xlsx)"
    )


@pytest.mark.parametrize(
    "header",
    [
        "case_id,message,age_band",
        'case_id,message,"age_band; note"',  # a name holding a semicolon, quoted
        "case_id,message,age_band;note",  # and not quoted: fewer columns with ';'
    ],
)
def test_a_comma_file_stays_comma_whatever_semicolons_it_holds(empty_project, tmp_path, header):
    path = tmp_path / "cases.csv"
    rows = (
        '101,"Guten Tag; ich habe ""Fieber"";\r\nseit gestern",45-64\r\n'
        "102;x,Schmerzen; seit gestern;;,18-44\r\n"
    )
    path.write_bytes(f"{header}\r\n{rows}".encode("cp1252"))
    report = import_files(empty_project, [path])
    assert report.added["cases"] == 2
    with empty_project.read() as session:
        messages = dict(session.execute(select(Case.external_id, Case.message)).all())
    assert messages == {
        "101": 'Guten Tag; ich habe "Fieber";\r\nseit gestern',
        "102;x": "Schmerzen; seit gestern;;",
    }


@pytest.mark.parametrize(
    "sep_line, content",
    [
        ("sep=;\r\n", 'case_id;message\r\n101;"Hello, there"\r\n102;Hi\r\n'),
        ("sep=,\n", 'case_id,message\n101,"Hello, there"\n102,Hi\n'),
        ("\ufeffsep=\t\n", 'case_id\tmessage\n101\t"Hello, there"\n102\tHi\n'),
    ],
    ids=["semicolon", "comma", "tab-after-bom"],
)
def test_an_excel_sep_line_names_the_separator_and_is_not_a_row(tmp_path, sep_line, content):
    """Excel honours a first line "sep=;" and hides it; it was taken for a one-column header
    ('save it as comma-separated CSV', though semicolon files are read)."""
    path = tmp_path / "excel.csv"
    path.write_text(sep_line + content, encoding="utf-8")
    comma = write_csv(
        tmp_path / "comma.csv", [["case_id", "message"], ["101", "Hello, there"], ["102", "Hi"]]
    )
    assert _table(path) == _table(comma)  # rows counted as Excel shows them


def test_a_bad_row_after_a_sep_line_is_named_as_excel_shows_it(empty_project, tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("sep=;\ncase_id;message\nc1;Fine.\nc2;Too;many\n")
    assert refused(empty_project, [path]).startswith("cases.csv, row 3: has 3 values")


# --- header names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    ["\ufeffcase_id", "\u200bcase_id", "case_id\u200b", " \u2060case_id"],
    ids=["second-bom", "zero-width-space", "after", "word-joiner"],
)
def test_hidden_characters_around_a_header_name_are_dropped(empty_project, tmp_path, first):
    """A second byte-order mark or a zero-width space before case_id cannot be seen in a
    spreadsheet; it was refused with "Closest: cases, which also needs case_id" under a
    column list that showed case_id."""
    path = tmp_path / "cases.csv"
    path.write_bytes(f"\ufeff{first},message\nx1,Hello.\n".encode())
    assert import_files(empty_project, [path]).added["cases"] == 1


@pytest.mark.parametrize(
    "header, advice",
    [
        ("Case_ID,Message", "Rename 'Case_ID' to case_id and 'Message' to message: "),
        ("case id,message", "Rename 'case id' to case_id: "),
        ("Case-Id,body", "Closest: cases, which also needs message. Rename 'Case-Id' to case_id"),
        ("case\u200b_id,message", "Rename 'case\\u200b_id' (\\u200b: a hidden character) to"),
    ],
)
def test_a_near_miss_header_name_is_named_with_its_rename(empty_project, tmp_path, header, advice):
    """Letter case, a space or hyphen for the underscore, a hidden character inside: such a
    table got no 'Closest' hint, or one asking for a column its list seemed to show."""
    path = tmp_path / "cases.csv"
    path.write_text(f"{header}\nx1,Hello.\n", encoding="utf-8")
    message = refused(empty_project, [path])
    assert "cannot be recognised" in message and advice in message
    assert message.endswith("column names must be spelled exactly as listed.")
    assert "\u200b" not in message  # shown as an escape, in the column list too
    with pytest.raises(ImportFailed) as forced:
        import_files(empty_project, [path], kind="cases")
    assert advice.removeprefix("Closest: cases, which also needs message. ") in str(forced.value)


def test_verify_refuses_a_zip_bomb_or_a_damaged_workbook_in_words(tmp_path, capsys):
    """`portalreview verify export.xlsx` opened the workbook with openpyxl directly: no size
    check before unpacking, and a damaged part was a traceback (left by the helper that
    guarded the import)."""
    from portalreview.cli import main

    bomb = _padded_book(tmp_path / "bomb.xlsx", 17_000_000)
    assert main(["verify", str(bomb)]) == 2
    assert "a damaged file or a zip bomb" in capsys.readouterr().err
    damaged = _book(tmp_path / "damaged.xlsx", [["case_id"], ["c1"]])
    edit_part(damaged, "xl/workbook.xml", rb"<sheets>", b"<sheets><", times=1)
    assert main(["verify", str(damaged)]) == 2
    assert "is not a readable Excel workbook" in capsys.readouterr().err
