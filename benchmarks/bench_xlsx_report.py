"""How long the Excel report takes to write on a large synthetic study, against openpyxl's own
cell writer timed in the same run, and how long the window would stand still meanwhile.

The study is bench_report's synthetic one (4 clinicians answer a unit of every kind for every
case; at 10,000 cases some 295,000 answers and ten million values on the Raw sheets). Its
report and frames are computed once, untimed; then, alternating, ``--repeat`` times each:

- **workbook**: ``write_workbook`` as the report writes it: the Raw sheets' rows made as they
  are written and written as XML by ``xlsx_report._RawCells``;
- **reference**: the same sheets with every raw value through openpyxl's own cell writer (one
  openpyxl cell per value, serialised by et_xmlfile), as the Raw sheets were written before;
- **CSV**: the same tables as CSV files (``_write_csv``, as the CSV report writes them);
- **JSON**: the report as JSON text (what ``report --format json`` writes), for scale.

Each line gives the median seconds, the ratio to the reference, microseconds per raw value,
and the longest pause of a thread that sleeps 50 ms at a time: the export runs on a worker
thread of the app, and a long pause is the window frozen. The two workbooks are compared part
by part at the end (the same bytes but the file's creation time).

Usage::

    .venv/bin/python benchmarks/bench_xlsx_report.py                    # 2,000 cases
    .venv/bin/python benchmarks/bench_xlsx_report.py --cases 10000 --repeat 1 --keep /tmp/bench
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import kept_study

from portalreview.reports import xlsx_report
from portalreview.reports.json_report import build_report
from portalreview.reports.xlsx_report import Cell, workbook_model, write_workbook
from portalreview.store.frames import read_frames
from portalreview.store.project import Project


class OpenpyxlCells(xlsx_report._RawCells):
    """The reference: each raw row through openpyxl's own cell writer, each cell styled as the
    Raw sheets styled their cells before (tests/reports/test_xlsx_raw_rows.py has the same)."""

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
                value = xlsx_report._text(value)
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


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """Seconds ``work`` took, and the longest pause of a thread sleeping 50 ms at a time."""
    pauses: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            started = time.perf_counter()
            time.sleep(0.05)
            pauses.append(time.perf_counter() - started - 0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.perf_counter()
    try:
        work()
    finally:
        took = time.perf_counter() - started
        done.set()
        watcher.join()
    return took, max(pauses, default=0.0)


def raw_values(sheets: list) -> int:
    return sum(len(row) for s in sheets if s.raw for t in s.tables for row in t.rows)


def parts(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as book:
        return {n: book.read(n) for n in book.namelist() if n != "docProps/core.xml"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--n-resamples", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="folder to keep the study in (and reuse)")
    args = parser.parse_args(argv)

    out = Path(tempfile.mkdtemp(prefix="portalreview-bench-xlsx-"))
    path = kept_study(args.keep, args.cases)
    with Project.open(path, read_only=True) as project:
        frames = read_frames(project)
        report = build_report(project, seed=0, n_resamples=args.n_resamples, frames=frames)
        sheets = workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00")
        n_values = raw_values(sheets)

        def reference() -> None:
            plain, xlsx_report._RawCells = xlsx_report._RawCells, OpenpyxlCells
            try:
                write_workbook(sheets, out / "reference.xlsx")
            finally:
                xlsx_report._RawCells = plain

        def csv_text() -> None:
            for sheet in sheets:
                for table in sheet.tables:
                    xlsx_report._write_csv(table, out / f"{table.key}.csv")

        def json_text() -> None:
            json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False)

        runs: dict[str, list[tuple[float, float]]] = {}
        ways = {
            "workbook": lambda: write_workbook(sheets, out / "workbook.xlsx"),
            "reference (openpyxl's cells)": reference,
            "CSV tables": csv_text,
            "JSON report": json_text,
        }
        for _ in range(args.repeat):
            for name, work in ways.items():  # alternating: the machine's load falls on all
                runs.setdefault(name, []).append(timed(work))
    base = statistics.median(s for s, _ in runs["reference (openpyxl's cells)"])
    print(f"{args.cases} cases: {n_values:,} values on the Raw sheets; medians of {args.repeat}")
    for name, results in runs.items():
        seconds = statistics.median(s for s, _ in results)
        pause = max(p for _, p in results)
        print(
            f"  {name:30} {seconds:7.2f} s  {seconds / base:6.3f} of the reference  "
            f"{seconds / n_values * 1e6:6.2f} µs a raw value  longest pause {pause:.2f} s"
        )
    same = parts(out / "workbook.xlsx") == parts(out / "reference.xlsx")
    print(f"  the workbook and the reference hold the same bytes: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
