"""The Raw sheets of the Excel report, written row by row as their rows are made: the same
workbook, byte for byte, as openpyxl's own cell writer makes (which took three minutes and
2.5 GB for a 10,000-case study, and froze the window); no openpyxl cell and no held row per
value. Speed: benchmarks/bench_xlsx_report.py."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from openpyxl import load_workbook

from portalreview.demo import build_demo
from portalreview.reports import xlsx_report
from portalreview.reports.json_report import build_report
from portalreview.reports.xlsx_report import (
    CUT_NOTE,
    INT,
    NUM,
    Cell,
    Sheet,
    Table,
    workbook_model,
    write_workbook,
)
from portalreview.store.frames import read_frames
from portalreview.store.importers.ooxml import (
    EXCEL_CELL_LIMIT,
    excel_prefix,
    fits_excel_cell,
    ooxml_escape,
)
from portalreview.store.project import Project


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = build_demo(tmp_path_factory.mktemp("raw") / "demo.prproj")
    with Project.open(path, read_only=True) as project:
        report = build_report(project, seed=0, n_resamples=0)
        yield project, report, read_frames(project)


def _stored_text(value: str) -> str:
    """xlsx_report._text as it was: each step on every text (it now skips those of a text
    with nothing to change)."""
    value = xlsx_report._ILLEGAL.sub("", value)
    if not fits_excel_cell(value):
        value = excel_prefix(value, EXCEL_CELL_LIMIT - len(CUT_NOTE)) + CUT_NOTE
    return ooxml_escape(value)


def _openpyxl_cells() -> type:
    """The reference: each row through openpyxl's own cell writer, each cell styled as the
    workbook styled its cells before (xlsx_report._write_sheet's ``data``)."""

    class OpenpyxlCells(xlsx_report._RawCells):
        def row(self, number, items):
            from et_xmlfile import xmlfile
            from openpyxl.cell import WriteOnlyCell
            from openpyxl.cell._writer import etree_write_cell

            cells = []
            for j, item in enumerate(items):
                if isinstance(item, Cell):
                    value, fmt = item.value, item.fmt
                else:
                    value, fmt = item, self.formats[j]
                if isinstance(value, str):
                    value = _stored_text(value)
                cell = WriteOnlyCell(self.ws, value=value)
                if isinstance(value, str):
                    cell.data_type = "s"
                if not (isinstance(value, int | float) and not isinstance(value, bool)):
                    fmt = None
                align = self.indent if isinstance(value, str) else None
                if (fmt, align) != (None, None):
                    cell._style = self.styles.array(None, fmt, None, None, align)
                cell.column, cell.row = j + 1, number
                cells.append(cell)
            out = io.StringIO()
            with xmlfile(out, encoding="unicode") as xf, xf.element("row", {"r": f"{number}"}):
                for cell in cells:
                    if cell._value is not None or cell.has_style:
                        etree_write_cell(xf, self.ws, cell, cell.has_style)
            return out.getvalue()

    return OpenpyxlCells


def _parts(path) -> dict[str, bytes]:
    """The workbook's parts, but the file's own creation time."""
    with zipfile.ZipFile(path) as book:
        return {n: book.read(n) for n in book.namelist() if n != "docProps/core.xml"}


def _both_ways(sheets, tmp_path, monkeypatch) -> tuple[dict, dict]:
    fast = write_workbook(sheets, tmp_path / "fast.xlsx")
    with monkeypatch.context() as patch:
        patch.setattr(xlsx_report, "_RawCells", _openpyxl_cells())
        reference = write_workbook(sheets, tmp_path / "reference.xlsx")
    return _parts(fast), _parts(reference)


def test_the_raw_sheets_are_byte_for_byte_what_openpyxl_writes(demo, tmp_path, monkeypatch):
    project, report, frames = demo
    sheets = workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00")
    fast, reference = _both_ways(sheets, tmp_path, monkeypatch)
    assert fast.keys() == reference.keys()
    assert [name for name in fast if fast[name] != reference[name]] == []
    facts = load_workbook(tmp_path / "fast.xlsx", read_only=True)["Raw facts"]
    assert len(list(facts.iter_rows(min_row=3))) > 10


LONE_SURROGATE = "lone \ud800 surrogate"  # written as a character reference, as openpyxl does
EDGE_VALUES = [
    "plain",
    "  leading",
    "trailing  ",
    "   ",
    "",
    "=SUM(A1:A2)",
    "#N/A",
    "a & b < c > d; \"quoted\" 'too'",
    "two\nlines",
    "windows\r\nline",
    "tab\there",
    "control\x01\x1f gone",
    "bad \ufffe\uffff gone",
    "file_x0041_.pdf",
    "emoji \U0001f622 and é",
    LONE_SURROGATE,
    "x" * 40_000,
    "\r" * 20_000,  # each escaped to 7 characters: cut by openpyxl at 32,767
    "a" + "\U0001f622" * 20_000,
    0,
    -1,
    2**53 - 1,
    2**53 + 1,
    -(2**60),
    10**20,
    1.5,
    -0.0,
    1 / 3,
    0.1 + 0.2,
    1e-300,
    1e16,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
    None,
    np.int64(7),
    np.float64(2.5),
    np.bool_(True),
    np.float32(0.1),
]


@pytest.mark.parametrize("fmt", [None, INT, NUM, "0.0"])
def test_edge_values_are_written_as_openpyxl_writes_them(fmt, tmp_path, monkeypatch):
    from openpyxl import LXML

    values = [v for v in EDGE_VALUES if not (LXML and v == LONE_SURROGATE)]  # lxml refuses it
    rows = [[value, f"row {i}", i] for i, value in enumerate(values)]
    rows.append([None, None, None])  # a row of nothing
    rows.append([Cell(3, ("a",), INT), Cell(0.25, ("b",), NUM), Cell("figure", ("c",))])
    table = Table("raw_x", "t", ["Value", "Label", "N"], rows, formats=[fmt, None, INT])
    fast, reference = _both_ways(
        [Sheet("Raw x", "Raw", "", [table], raw=True)], tmp_path, monkeypatch
    )
    assert fast == reference


def test_a_long_raw_sheet_makes_no_openpyxl_cell_per_value(tmp_path, monkeypatch):
    """openpyxl made (and serialised, at some 20 µs) a cell object per value: three minutes
    for a 10,000-case study. Now 500 rows make no more of them than 10."""
    from openpyxl.cell.cell import Cell as OpenpyxlCell

    made = []
    plain_init = OpenpyxlCell.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        plain_init(self, *args, **kwargs)

    monkeypatch.setattr(OpenpyxlCell, "__init__", counted)

    def cells_made_writing(n_rows: int) -> int:
        rows = [
            [Cell(i, None, INT), Cell(f"text {i}"), Cell(i / 7, None, "0.00")]
            for i in range(n_rows)
        ]
        table = Table("raw_x", "t", ["A", "B", "C"], rows)
        made.clear()
        write_workbook([Sheet("Raw x", "Raw", "", [table], raw=True)], tmp_path / "raw.xlsx")
        return len(made)

    assert cells_made_writing(500) == cells_made_writing(10)


def test_a_raw_sheet_is_written_without_holding_its_rows(demo, tmp_path):
    """A 10,000-case study's raw sheets were built whole before being written: ten million
    values held at once (2.5 GB), which the garbage collector went through again and again,
    freezing the window. Now each row is made, written and let go: ten times the facts take
    little more memory than once (here under 400 bytes a row of 14 values; 1.6 KB before)."""
    from portalreview.reports.xlsx_report import _raw_sheets, _Reader

    _, report, frames = demo

    def peak_writing(copies: int) -> tuple[int, int]:
        many = replace(frames, facts=pd.concat([frames.facts] * copies, ignore_index=True))
        tracemalloc.start()
        try:
            sheets = [s for s in _raw_sheets(many, _Reader(report)) if s.name == "Raw facts"]
            write_workbook(sheets, tmp_path / f"facts{copies}.xlsx")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return peak, len(many.facts)

    peak_few, rows_few = peak_writing(4)
    peak_many, rows_many = peak_writing(40)
    assert rows_many - rows_few > 1000
    assert (peak_many - peak_few) / (rows_many - rows_few) < 400


def test_raw_rows_are_made_anew_each_time_they_are_read(demo):
    from portalreview.reports.xlsx_report import Rows

    _, report, frames = demo
    for sheet in workbook_model(report, frames):
        if not sheet.raw:
            continue
        rows = sheet.tables[0].rows
        assert isinstance(rows, Rows)
        first = [[getattr(item, "value", item) for item in row] for row in rows]
        assert first == [[getattr(item, "value", item) for item in row] for row in rows]
        assert first, sheet.name


def test_the_collector_does_not_run_while_the_rows_are_written(demo, tmp_path, monkeypatch):
    """The raw rows' lookups keep hundreds of thousands of rows on a big study, and each time
    they grew the garbage collector went through every object, holding the interpreter: the
    dashboard's window stood still up to 0.33 s at a time while it exported. The rows make
    no cycle, so it is off while they are made and written, and on again after."""
    import gc

    project, report, frames = demo
    reading_rows, collections = [False], []
    plain_read_rows = xlsx_report._read_rows

    def read_rows(table, steps):
        reading_rows[0] = True
        try:
            yield from plain_read_rows(table, steps)
        finally:
            reading_rows[0] = False

    def count(phase: str, info: dict) -> None:
        if phase == "start" and reading_rows[0]:
            collections.append(info["generation"])

    monkeypatch.setattr(xlsx_report, "_read_rows", read_rows)
    sheets = workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00")
    gc.callbacks.append(count)
    try:
        write_workbook(sheets, tmp_path / "r.xlsx")
        for sheet in sheets:
            for table in sheet.tables:
                xlsx_report._write_csv(table, tmp_path / f"{table.key}.csv")  # the CSV report's
    finally:
        gc.callbacks.remove(count)
    assert collections == []
    assert gc.isenabled()
    gc.disable()  # turned off by someone else: left off
    try:
        write_workbook(sheets, tmp_path / "r.xlsx")
        assert not gc.isenabled()
    finally:
        gc.enable()
