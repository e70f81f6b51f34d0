"""The Excel agreement report: expected sheets, native charts, readable layout, and figures
equal to the JSON report's, cell by cell; the CSV twin; progress and cancel."""

from __future__ import annotations

import csv
import errno
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from openpyxl import load_workbook
from sqlalchemy import text as sql

from portalreview.cli import main
from portalreview.demo import build_demo
from portalreview.reports import xlsx_report
from portalreview.reports.json_report import build_report
from portalreview.reports.xlsx_report import (
    CHART_ROWS,
    Cell,
    figure_cells,
    path_text,
    resolve,
    workbook_model,
    write_csv_report,
    write_xlsx_report,
)
from portalreview.store import output_files
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.study_setup import Cancelled

RESAMPLES = 40


def same(got, want) -> bool:
    """Equal, floats to the 16 significant digits an .xlsx file stores (openpyxl writes
    "%.16g"; Excel shows 15)."""
    if isinstance(want, float) and isinstance(got, int | float):
        return got == pytest.approx(want, rel=1e-15, abs=0)
    return got == want


KIND_SHEETS = ["Respond", "Match", "Rank", "Urgency", "EPPC", "Empathy", "Facts"]
RAW_SHEETS = [
    f"Raw {k}" for k in ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("xlsx")
    path = build_demo(folder / "demo.prproj")
    with Project.open(path, read_only=True) as project:
        report = build_report(project, seed=0, n_resamples=RESAMPLES)
        out = write_xlsx_report(project, folder / "report.xlsx", n_resamples=RESAMPLES)
        frames = read_frames(project)
        yield project, report, load_workbook(out), frames, folder


def _tables(ws, sheet_model):
    """Each table of the model -> the row number of its first data row in the worksheet."""
    titles = {t.title: t for t in sheet_model.tables}
    found = {}
    column_a = [c.value for c in ws["A"]]
    for row_no, value in enumerate(column_a, start=1):
        if value in titles and value not in found:
            table = titles[value]
            header = row_no + (2 if table.note else 1)
            assert [c.value for c in ws[header]][: len(table.headers)] == table.headers
            found[value] = header + 1
    return found


def test_the_workbook_has_the_expected_sheets_and_charts(demo):
    _, _, book, _, _ = demo
    assert book.sheetnames == ["Summary", *KIND_SHEETS, *RAW_SHEETS, "Provenance"]
    for name in KIND_SHEETS:
        assert book[name]._charts, f"{name} has no chart"
        assert book[name].freeze_panes == "A3"
    assert len(book["Urgency"]._charts) == 2  # accuracy by difficulty and the NDCG curve
    assert book["Rank"].conditional_formatting  # the win-rate heat map
    for name in RAW_SHEETS:
        assert book[name].freeze_panes == "B3" and book[name].auto_filter.ref
    summary = book["Summary"]
    assert summary.column_dimensions["B"].width >= 30  # figure names readable
    headers = [c.value for c in summary[6]]
    assert headers[:7] == [
        "Kind",
        "Figure",
        "Group",
        "Value",
        "95% CI low",
        "95% CI high",
        "n units",
    ]
    assert summary.cell(7, 4).number_format == "0.000"


def test_every_figure_equals_the_json_report(demo):
    project, report, book, frames, _ = demo
    model = workbook_model(report, frames, project)
    cells = figure_cells(model)
    assert len(cells) > 1500
    for _, _, _, _, cell in cells:
        assert cell.value == resolve(report, cell.path)
    checked = 0
    for sheet in model:
        ws = book[sheet.name]
        starts = {sheet.tables[0].title: 3} if sheet.raw else _tables(ws, sheet)
        assert set(starts) == {t.title for t in sheet.tables}, sheet.name
        for table in sheet.tables:
            first = starts[table.title]
            for i, row in enumerate(table.rows):
                for j, cell in enumerate(row):
                    if not isinstance(cell, Cell) or cell.path is None:
                        continue  # a label, or a raw sheet's plain value
                    got = ws.cell(first + i, j + 1).value
                    want = resolve(report, cell.path)
                    assert same(got, want), (sheet.name, table.key, path_text(cell.path), got)
                    checked += 1
    assert checked == len(cells)


def test_every_sheet_reads_back_as_its_model(demo, tmp_path):
    """Every table cell of every sheet, read back: the model's value (a text as the workbook
    stores it), a number's format, a text's indent. The raw sheets' rows are written apart
    from openpyxl's cells (xlsx_report._RawCells) and their rows made as they are written."""
    from portalreview.reports.xlsx_report import _text, write_workbook

    project, report, _, frames, _ = demo
    sheets = workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00")
    book = load_workbook(write_workbook(sheets, tmp_path / "r.xlsx"))
    checked = 0
    for sheet in workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00"):
        ws = book[sheet.name]
        starts = {sheet.tables[0].title: 3} if sheet.raw else _tables(ws, sheet)
        for table in sheet.tables:
            formats = table.formats or [None] * len(table.headers)
            first = starts[table.title]
            for i, row in enumerate(table.rows):
                for j, item in enumerate(row):
                    value, fmt = (
                        (item.value, item.fmt) if isinstance(item, Cell) else (item, formats[j])
                    )
                    got = ws.cell(first + i, j + 1)
                    where = (sheet.name, table.key, i, j)
                    if isinstance(value, str):
                        assert got.value == (_text(value) or None), where  # "" reads as None
                        assert (got.alignment.horizontal, got.alignment.indent) == ("left", 1)
                    elif isinstance(value, bool) or value is None:
                        assert got.value == value and got.number_format == "General", where
                    else:
                        assert same(got.value, value), where
                        assert got.number_format == (fmt or "General"), where
                    checked += 1
            if sheet.raw:
                assert ws.max_row == first + i, sheet.name  # and nothing below
    assert checked > 10_000


def test_summary_rows_name_their_json_key(demo):
    _, report, book, _, _ = demo
    ws = book["Summary"]
    rows = list(ws.iter_rows(min_row=7, values_only=True))
    figures = [r for r in rows if r[0] and r[8] and "." in str(r[8])]
    assert len(figures) > 40
    for kind, _, _, value, low, high, n, _, key in figures:
        figure = _follow(report, key)
        assert same(value, figure["value"]) and n == figure["n_units"]
        assert all(map(same, [low, high], figure["ci"] or [None, None]))
        assert key.split(".")[0] == kind
    # A few read straight from the JSON, not through the workbook's own paths.
    by_key = {r[8]: r for r in figures}
    facts_f1 = report["facts"]["overall"]["micro"]["f1"]
    got = by_key["facts.overall.micro.f1"][3:7]
    assert all(map(same, got, [facts_f1["value"], *facts_f1["ci"], facts_f1["n_units"]]))
    source = report["match"]["by_source"][0]
    row = by_key["match.by_source[0].content.f1"]
    assert row[2].endswith(source["source"]) and same(row[3], source["content"]["f1"]["value"])


def test_summary_cites_each_figure_as_its_paper_reports_it(demo):
    """001 Table S9's "Avg. Corr" (-0.79) is the mean of the rankings' point-biserial
    coefficients: the headline was the pooled one under that label. The per-pair empathy
    shares are 004 Table 1 (Sec. 4.1); Sec. 3.6 is the metric's validation."""
    _, report, book, _, _ = demo
    rows = list(book["Summary"].iter_rows(min_row=7, values_only=True))
    by_key = {r[8]: r for r in rows if r[0] and r[8]}
    correlation = report["rank"]["correctness_vs_rank"]
    mean = by_key["rank.correctness_vs_rank.mean"]
    assert mean[1] == "Correctness vs rank: point-biserial, mean over rankings"
    assert mean[7] == "001 Table S9 (Avg. Corr)"
    assert same(mean[3], correlation["mean"]["value"])
    pooled = by_key["rank.correctness_vs_rank.pooled"]
    assert pooled[1].endswith("pooled") and pooled[7].startswith("not in 001")
    shares = [r for key, r in by_key.items() if key.startswith("empathy.by_source_pair")]
    assert shares and {r[7] for r in shares} == {"004 Table 1, Sec. 4.1"}


def _follow(report, key: str):
    node = report
    for part in key.replace("]", "").replace("[", ".").split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node


def test_heat_map_and_ndcg_curve_agree_with_the_report(demo):
    _, report, book, _, _ = demo
    ws = book["Rank"]
    sources = report["rank"]["sources"]
    column_a = [c.value for c in ws["A"]]
    top = column_a.index("Source \\ opponent") + 1
    assert [c.value for c in ws[top]][1 : 1 + len(sources)] == sources
    for w in report["rank"]["win_rates"]:
        i, j = sources.index(w["source"]), sources.index(w["opponent"])
        assert same(ws.cell(top + 1 + i, 2 + j).value, w["win_rate"]["value"])
    ws = book["Urgency"]
    column_a = [c.value for c in ws["A"]]
    start = column_a.index("k") + 2
    curve = {ws.cell(r, 1).value: ws.cell(r, 2).value for r in range(start, start + 30)}
    pooled = report["urgency"]["inboxes"][0]["all"]
    assert curve[10] == pytest.approx(pooled["ndcg@10"]["value"], abs=1e-12)
    assert curve[30] == pytest.approx(pooled["ndcg@30"]["value"], abs=1e-12)


def test_error_bars_are_the_distances_from_the_value_to_the_interval(demo):
    """Excel draws a custom error bar as a distance from the point, so each chart's error
    columns must hold value - low and high - value of its series, never the bounds."""
    _, report, _, frames, _ = demo
    checked = 0
    for sheet in workbook_model(report, frames):
        for table in sheet.tables:
            chart = table.chart
            if chart is None:
                continue
            for series, errors in zip(chart.series, chart.errors, strict=False):
                if errors is None:
                    continue
                minus, plus = errors
                for row in table.rows:
                    value, low, high = (row[series + i].value for i in range(3))
                    if None in (value, low, high):
                        continue
                    assert row[minus].value == pytest.approx(value - low), table.key
                    assert row[plus].value == pytest.approx(high - value), table.key
                    checked += 1
    assert checked > 20


def test_raw_sheets_hold_every_answer_behind_the_figures(demo):
    _, report, book, frames, _ = demo
    answers = frames.answers
    for kind in ("urgency", "empathy"):
        ws = book[f"Raw {kind}"]
        assert ws.max_row - 2 == int((answers.kind == kind).sum())
    ids = {r[0] for r in book["Raw respond"].iter_rows(min_row=3, values_only=True)}
    assert ids == set(answers.answer_id[answers.kind == "respond"])
    assert book["Raw match"].max_row - 2 == len(report["match"]["pairs"])
    who = {r[5] for r in book["Raw eppc"].iter_rows(min_row=3, values_only=True)}
    assert who == {"person", "gold"}


def test_provenance_records_project_settings_and_models(tmp_path):
    from tests.conftest import build_small_study

    with Project.create(tmp_path / "s.prproj", name="Small") as project:
        study = build_small_study(project)
        study.service.add_suggestion(
            study.units["urgency"],
            {"more_urgent_case_id": study.case1},
            model_file="tiny-q4.gguf",
            model_sha256="a" * 64,
            template_id="urgency-v1",
            template_text="Which patient is more urgent?",
        )
        with project.write() as s:  # project format 2 stores the templates themselves
            stored = s.execute(
                sql(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'prompt_templates'"
                )
            ).first()
            if stored:
                s.execute(
                    sql(
                        "INSERT INTO prompt_templates (kind, name, text, version, updated_at) "
                        "VALUES ('urgency', 'urgency-house', 'Who needs care first?', 3, '2026')"
                    )
                )
        out = write_xlsx_report(project, tmp_path / "small", n_resamples=0)
    assert out.suffix == ".xlsx"
    book = load_workbook(out)
    values = [v for row in book["Provenance"].iter_rows(values_only=True) for v in row if v]
    assert "tiny-q4.gguf" in values and "urgency-v1" in values and "Small" in values
    if stored:
        assert "urgency-house" in values and "Who needs care first?" in values
    assert "(nothing to show yet)" in [c.value for c in book["Rank"]["A"]]


def test_provenance_counts_peoples_use_of_suggestions_apart_from_a_models_answers(tmp_path):
    from portalreview.llm import suggest as sg
    from tests.conftest import build_small_study

    with Project.create(tmp_path / "s.prproj", name="Small") as project:
        study = build_small_study(project)
        service, unit = study.service, study.units["urgency"]
        payload = {"more_urgent_case_id": study.case1, "ask_second": False}
        suggestion = service.add_suggestion(
            unit, payload, model_file="m.gguf", model_sha256="a" * 64, template_id="t@v1"
        )
        model = sg.model_annotator(service, "smol")  # `suggest --as-annotator smol`
        sg.save_as_annotator(service, model, unit, payload, suggestion)
        service.save_answer(
            unit,
            payload,
            status="submitted",
            annotator_id=study.ava,
            suggestion_id=suggestion,
            suggestion_use="edited",
        )
        out = write_xlsx_report(project, tmp_path / "small", n_resamples=0)
    values = [
        v for row in load_workbook(out)["Provenance"].iter_rows(values_only=True) for v in row
    ]
    (note,) = [v for v in values if isinstance(v, str) and "used a suggestion" in v]
    assert note == (
        "People's answers that used a suggestion: edited 1. Model pseudo annotators' answers "
        "(their own suggestions, not counted above): 1."
    )


def test_csv_report_and_command_line(demo, tmp_path, capsys):
    project, report, _, _, _ = demo
    written = write_csv_report(project, tmp_path / "csv", n_resamples=RESAMPLES)
    names = {p.name for p in written}
    assert len(names) == len(written)  # one file per table, none overwritten
    assert {"summary_figures.csv", "match_by_source.csv", "raw_urgency.csv", "report.json"} <= names
    with (tmp_path / "csv" / "summary_figures.csv").open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        figure = _follow(report, row["JSON key"])
        assert float(row["Value"]) == figure["value"]
    assert json.loads((tmp_path / "csv" / "report.json").read_text()) == report

    path = str(project.path)
    out = tmp_path / "cli.xlsx"
    assert main(["report", path, "--format", "xlsx", "-o", str(out), "--resamples", "0"]) == 0
    assert out.exists() and "Wrote" in capsys.readouterr().out
    assert (
        main(["report", path, "--format", "csv", "-o", str(tmp_path / "c2"), "--resamples", "0"])
        == 0
    )
    assert (tmp_path / "c2" / "summary_figures.csv").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_command_line_tells_a_terminal_which_sheet_it_writes(demo, tmp_path, monkeypatch):
    """`report --format xlsx` (or csv) said nothing for minutes on a big study. On a terminal a
    line now tells how far it has got and which sheet (or CSV file) it writes; a log file or
    a pipe gets none of it."""
    project = demo[0]
    path = str(project.path)
    for fmt, out, parts in (
        ("xlsx", tmp_path / "r.xlsx", RAW_SHEETS),
        ("csv", tmp_path / "csv", [f"{name.lower().replace(' ', '_')}.csv" for name in RAW_SHEETS]),
    ):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main(["report", path, "--format", fmt, "-o", str(out), "--resamples", "0"]) == 0
        lines = terminal.getvalue().split("\r")[1:]
        assert all(part in "".join(lines) for part in parts), fmt
        percents = [int(re.search(r"(\d+)%", line).group(1)) for line in lines]
        assert percents == sorted(percents) and percents[-1] == 100, fmt
        assert terminal.getvalue().endswith("\n")
        for before, line in itertools.pairwise(lines):  # each covers all of the one before
            assert len(line.rstrip("\n")) >= len(before.rstrip()), (before, line)

        piped = io.StringIO()
        monkeypatch.setattr(sys, "stderr", piped)
        assert main(["report", path, "--format", fmt, "-o", str(out), "--resamples", "0"]) == 0
        assert piped.getvalue() == ""


def test_a_csv_report_failing_part_way_leaves_the_earlier_report_whole(demo, tmp_path, monkeypatch):
    """A full disk while this week's files are written: before, the folder was left holding
    this week's first tables beside last week's report.json, nothing marking it as mixed."""
    project, _, _, _, _ = demo
    folder = tmp_path / "weekly"
    write_csv_report(project, folder, seed=1, n_resamples=RESAMPLES)  # last week's
    last_week = {p.name: p.read_bytes() for p in folder.iterdir()}
    real_sync, calls = output_files.sync_file, itertools.count(1)

    def disk_full_at_the_tenth_file(path):
        if next(calls) == 10:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_sync(path)

    monkeypatch.setattr(output_files, "sync_file", disk_full_at_the_tenth_file)
    with pytest.raises(OSError) as failure:
        write_csv_report(project, folder, seed=2, n_resamples=RESAMPLES)
    # every file is last week's, and no half file or staging folder is left
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == last_week
    assert "is full" in str(failure.value) and "Make room" in str(failure.value)

    monkeypatch.setattr(output_files, "sync_file", real_sync)
    written = write_csv_report(project, folder, seed=2, n_resamples=RESAMPLES)
    shown = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert shown == sorted(p.name for p in written)  # (and the hidden list of them)
    summary = (folder / "summary_figures.csv").read_bytes()
    assert summary != last_week["summary_figures.csv"]  # other intervals with another seed


def test_a_csv_report_writes_each_file_as_its_rows_are_made(demo, tmp_path, monkeypatch):
    """The CSV report held every file in memory and wrote them together at the end (hundreds
    of megabytes of raw rows on a large study); now each file is written, in the staging
    folder, while its rows are made."""
    project, report, _, frames, _ = demo
    folder = tmp_path / "csv"
    real_read_rows, staged_sizes = xlsx_report._read_rows, []

    def rows_watched(table, steps):
        for n, row in enumerate(real_read_rows(table, steps), 1):
            if n == 400:  # well past the first buffer's worth of this file
                staged = list(folder.glob(f"{output_files.STAGING_PREFIX}*/{table.key}.csv"))
                staged_sizes.append(staged[0].stat().st_size if staged else 0)
            yield row

    monkeypatch.setattr(xlsx_report, "_read_rows", rows_watched)
    write_csv_report(project, folder, report=report, frames=frames)
    assert staged_sizes and min(staged_sizes) > 8192


def test_a_csv_report_removes_the_earlier_reports_tables_it_does_not_write(demo, tmp_path):
    """A report into the folder of an earlier one with more tables (another study, another
    inbox) left the earlier study's tables beside this study's report.json, the folder reading
    as one report (found by an explorer). The tables the earlier report listed and this one
    does not write are removed; a file the report did not write is left alone."""
    project, report, _, frames, _ = demo
    folder = tmp_path / "weekly"
    write_csv_report(project, folder, report=report, frames=frames)
    (folder / "urgency_ndcg_curve_9.csv").write_text("an earlier study's inbox\n")
    listed = folder / xlsx_report.CSV_REPORT_LIST
    listed.write_text(json.dumps([*json.loads(listed.read_text()), "urgency_ndcg_curve_9.csv"]))
    (folder / "notes.csv").write_text("the PI's own file\n")
    written = write_csv_report(project, folder, report=report, frames=frames)
    assert not (folder / "urgency_ndcg_curve_9.csv").exists()
    assert (folder / "notes.csv").exists()
    shown = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert shown == sorted([*(p.name for p in written), "notes.csv"])


def test_progress_and_cancel(demo, tmp_path):
    project, report, _, frames, _ = demo
    seen = []
    write_xlsx_report(
        project,
        tmp_path / "p.xlsx",
        report=report,
        frames=frames,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1]
    assert all(b[0] >= a[0] for a, b in itertools.pairwise(seen))
    with pytest.raises(Cancelled):
        write_xlsx_report(
            project, tmp_path / "c.xlsx", report=report, frames=frames, cancel=lambda: len(seen) > 0
        )
    assert not (tmp_path / "c.xlsx").exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_progress_moves_on_within_each_raw_sheet(demo, tmp_path, monkeypatch):
    """On a big study a raw sheet takes seconds: the bar moves while each one is written (a
    step every RECORDS_PER_STEP answers or facts read), never backwards, and ends where the
    rows end, not with a jump."""
    from portalreview.reports import xlsx_report

    project, report, _, frames, _ = demo
    monkeypatch.setattr(xlsx_report, "RECORDS_PER_STEP", 20)
    monkeypatch.setattr(xlsx_report, "_CHECK_EVERY", 1)
    events: list = []
    write_xlsx_report(
        project,
        tmp_path / "p.xlsx",
        report=report,
        frames=frames,
        progress=lambda done, total: events.append((done, total)),
        on_part=events.append,
    )
    begun = [i for i, event in enumerate(events) if isinstance(event, str)]
    assert [events[i] for i in begun] == ["Summary", *KIND_SHEETS, *RAW_SHEETS, "Provenance"]
    for start, end in itertools.pairwise(begun):
        if events[start] in RAW_SHEETS:
            assert end - start > 2, f"{events[start]}: the bar stood still while it was written"
    progress = [e for e in events if isinstance(e, tuple)]
    total = progress[-1][1]
    writing = progress[next(i for i, e in enumerate(progress) if e[1] == total) :]
    assert all(t == total for _, t in writing)  # known before the first sheet is written
    assert all(b[0] - a[0] in (0, 1) for a, b in itertools.pairwise(writing))
    assert writing[-1] == (total, total)


def test_a_cancel_while_a_raw_sheet_is_written_leaves_no_file(demo, tmp_path, monkeypatch):
    from openpyxl.worksheet._writer import ALL_TEMP_FILES

    from portalreview.reports import xlsx_report

    project, report, _, frames, _ = demo
    monkeypatch.setattr(xlsx_report, "_CHECK_EVERY", 1)
    begun: list[str] = []
    openpyxl_files = set(ALL_TEMP_FILES)
    with pytest.raises(Cancelled):
        write_xlsx_report(
            project,
            tmp_path / "c.xlsx",
            report=report,
            frames=frames,
            cancel=lambda: "Raw facts" in begun,
            on_part=begun.append,
        )
    assert begun[-1] == "Raw facts"
    assert not (tmp_path / "c.xlsx").exists()
    assert not list(tmp_path.glob("*.tmp"))
    # nor the sheets' files openpyxl was writing (they stayed until the program ended)
    assert [f for f in ALL_TEMP_FILES if f not in openpyxl_files and os.path.exists(f)] == []
    with pytest.raises(Cancelled):
        write_csv_report(
            project,
            tmp_path / "csv",
            report=report,
            frames=frames,
            cancel=lambda: "raw_facts.csv" in begun,
            on_part=begun.append,
        )
    assert not (tmp_path / "csv").exists()  # the folder it made is removed again, empty


def _soffice() -> str | None:
    """LibreOffice, if this machine has it (PORTALREVIEW_SOFFICE names one off the PATH)."""
    return (
        os.environ.get("PORTALREVIEW_SOFFICE")
        or shutil.which("soffice")
        or shutil.which("libreoffice")
    )


@pytest.mark.skipif(_soffice() is None, reason="LibreOffice is not installed")
def test_libreoffice_converts_the_workbook_to_pdf(demo, tmp_path):
    _, _, _, _, folder = demo
    profile = (tmp_path / "profile").as_uri()
    done = subprocess.run(
        [
            _soffice(),
            "--headless",
            "--norestore",
            f"-env:UserInstallation={profile}",
            "--convert-to",
            "pdf",
            "--outdir",
            str(tmp_path),
            str(folder / "report.xlsx"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    pdf = tmp_path / "report.pdf"
    assert pdf.exists(), done.stdout + done.stderr
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))
    assert pages >= 16  # the summary, a page or more per kind, raw data, provenance


def _breaks(ws) -> set[int]:
    """Rows after which the sheet starts a new printed page."""
    return {b.id for b in ws.row_breaks.brk}


def test_a_heading_stays_on_the_page_of_its_table_and_a_chart_is_never_cut(demo):
    """The sheet's own page breaks: never between a table's heading, note, header and first
    rows (the whole of a short table), never through the rows a chart covers."""
    _, report, book, _, _ = demo
    model = {s.name: s for s in workbook_model(report)}
    for name in ["Summary", *KIND_SHEETS]:
        ws, sheet = book[name], model[name]
        breaks = _breaks(ws)
        assert breaks, f"{name}: no page breaks of its own"
        for title, first_row in _tables(ws, sheet).items():
            table = next(t for t in sheet.tables if t.title == title)
            heading = first_row - 1 - (2 if table.note else 1)
            rows = len(table.rows) if len(table.rows) <= 8 else 3
            kept = range(heading - 1, first_row + rows - 1)  # the gap above, through the rows
            assert not breaks & set(kept), f"{name}: {title!r} is split from its heading"
        for chart in ws._charts:
            top = chart.anchor._from.row  # 0-based: the chart starts below row `top`
            covered = set(range(top, top + CHART_ROWS))
            assert not breaks & covered, f"{name}: a chart is cut by a page break"


def test_headers_never_break_inside_a_word_and_raw_pages_repeat_the_header(demo):
    _, _, book, _, _ = demo
    checked = 0
    for name in ["Summary", *KIND_SHEETS, *RAW_SHEETS]:
        ws = book[name]
        for row in ws.iter_rows():
            for cell in row:
                if cell.font.bold and cell.fill.fgColor.rgb == "00DDE5F0":  # a header cell
                    checked += 1
                    width = ws.column_dimensions[cell.column_letter].width
                    longest = max(len(word) for word in str(cell.value).split())
                    assert longest + 2 <= width, f"{name}: {cell.value!r} is cut mid-word"
    assert checked > 300  # every table's header cells were found
    for name in RAW_SHEETS:
        assert book[name].print_title_rows == "$2:$2"


def test_no_table_has_two_columns_of_the_same_name(demo):
    _, report, _, _, _ = demo
    for sheet in workbook_model(report):
        for table in sheet.tables:
            assert len(set(table.headers)) == len(table.headers), (sheet.name, table.title)


def test_the_summary_says_what_an_empty_figure_means(demo):
    _, _, workbook, _, _ = demo
    cells = [c.value for row in workbook["Summary"].iter_rows(max_row=5) for c in row]
    assert any(
        isinstance(v, str) and "An empty figure is one these answers do not define" in v
        for v in cells
    )


def test_every_count_in_the_report_is_a_whole_number(demo):
    """Counts (``n_...``) are JSON integers, as a strict reader of the report expects (two of
    them came out of a pandas row as 23.0)."""
    _, report, _, _, _ = demo
    counts: list[tuple[str, object]] = []

    def walk(value, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key.startswith("n_") and not isinstance(item, dict | list):
                    counts.append((f"{where}.{key}", item))
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for item in value:
                walk(item, f"{where}[]")

    walk(json.loads(json.dumps(report)), "report")
    assert len(counts) > 100
    assert [c for c in counts if not (c[1] is None or type(c[1]) is int)] == []


def test_a_text_xml_cannot_hold_leaves_a_workbook_excel_opens(tmp_path):
    """A reply holding U+FFFE (mis-decoded pasted text) used to make a workbook no XML reader
    could open; such characters are left out of the report, as control characters are."""
    from tests.conftest import build_small_study

    with Project.create(tmp_path / "s.prproj", name="Small") as project:
        study = build_small_study(project)
        study.service.save_answer(
            study.units["respond"],
            {"mode": "theme_guided", "parts": {"empathy": "So sorry \ufffe\uffff to hear."}},
            status="submitted",
            annotator_id=study.ava,
        )
        out = write_xlsx_report(project, tmp_path / "small", n_resamples=0)
    book = load_workbook(out, read_only=True)
    texts = [v for row in book["Raw respond"].iter_rows(values_only=True) for v in row]
    assert any(isinstance(v, str) and "So sorry  to hear." in v for v in texts)
    book.close()


def _raw_respond_texts_of_a_reply(tmp_path, reply: str) -> list:
    """Every value of the "Raw respond" sheet of a small study's report in which ava's
    respond answer holds ``reply``."""
    from tests.conftest import build_small_study

    with Project.create(tmp_path / "s.prproj", name="Small") as project:
        study = build_small_study(project)
        study.service.save_answer(
            study.units["respond"],
            {"mode": "theme_guided", "parts": {"empathy": reply}},
            status="submitted",
            annotator_id=study.ava,
        )
        out = write_xlsx_report(project, tmp_path / "small", n_resamples=0)
    book = load_workbook(out, read_only=True)
    texts = [v for row in book["Raw respond"].iter_rows(values_only=True) for v in row]
    book.close()
    return texts


def test_a_long_text_is_cut_to_what_an_excel_cell_holds_as_excel_counts_it(tmp_path):
    """Excel counts UTF-16 units (an emoji counts 2): a reply of 20,000 emoji used to be cut at
    32,727 characters, 40,000 units, and Excel opened the workbook only to repair it."""

    reply = "a" + "\U0001f622" * 20_000  # the cut falls inside an emoji
    texts = _raw_respond_texts_of_a_reply(tmp_path, reply)
    cut = next(v for v in texts if isinstance(v, str) and v.startswith("a\U0001f622"))
    kept, note = cut.split(" ... ")
    assert note == "[cut: longer than an Excel cell]"
    assert kept == reply[: len(kept)] and len(kept) == 1 + 16_364  # whole emoji only
    assert len(cut.encode("utf-16-le")) // 2 <= 32_767


def test_a_text_with_a_carriage_return_or_an_ooxml_escape_reads_back_as_written(tmp_path):
    """The report wrote its texts without the workbook's escapes (the data export has them):
    a reply "see file_x0041_.pdf\r\nthen call" read back as "see fileA.pdf\nthen call", in
    Excel as with openpyxl and PortalReview's importer, which read the escapes back."""
    from portalreview.store.importers.ooxml import ooxml_unescape

    reply = "see file_x0041_.pdf\r\nthen call"
    texts = _raw_respond_texts_of_a_reply(tmp_path, reply)
    stored = next(v for v in texts if isinstance(v, str) and v.startswith("see file"))
    assert ooxml_unescape(stored) == reply


def test_an_urgency_draft_with_no_patient_chosen_is_a_blank_in_the_raw_sheet(tmp_path):
    from tests.analysis.analysis_builders import new_study

    st = new_study(tmp_path)
    st.person("ava")
    st.person("ben")
    st.case("a", "Crushing chest pain.", 1)
    st.case("b", "Refill please.", 6)
    st.unit("u", "urgency", "a", who=["ava", "ben"], case_b_id=st.cases["b"])
    st.answer("u", "ben", {"more_urgent_case_id": st.cases["a"]})
    draft = {"ask_second": True}  # ava asked for a second look before choosing
    st.svc.save_answer(st.units["u"], draft, status="draft", annotator_id=st.people["ava"])
    out = write_xlsx_report(
        st.project, tmp_path / "drafts.xlsx", n_resamples=0, include_drafts=True
    )
    rows = list(load_workbook(out, read_only=True)["Raw urgency"].iter_rows(values_only=True))
    header = rows[1]
    ava = next(r for r in rows[2:] if r[header.index("Annotator")] == "ava")
    assert ava[header.index("Status")] == "draft" and ava[header.index("More urgent")] is None
    assert ava[header.index("Right")] is None


def test_provenance_names_a_second_annotator_for_hard_pairs():
    """The Provenance sheet's events say who was given which hard pairs, not an empty
    overlap and seed (the hand-out of a set's units has those)."""
    from portalreview.reports.xlsx_report import _describe_event

    details = {
        "unit_set": "Box",
        "second_annotator": "ben",
        "units": [3, 5],
        "asked_by": ["ava"],
        "counts": {"ben": 2},
    }
    assert _describe_event("assign", details) == (
        "second annotator ben for 2 hard pair(s) of 'Box', asked by ava"
    )


def _parts(path):
    """The workbook's parts, but the file's own creation time."""
    with zipfile.ZipFile(path) as book:
        return {n: book.read(n) for n in book.namelist() if n != "docProps/core.xml"}


def test_styles_worked_out_once_make_the_same_workbook_as_styling_every_cell(demo, tmp_path):
    """Each cell's style is copied from the first cell with the same style objects; the file
    is byte for byte the one openpyxl writes when every cell is styled on its own."""
    from portalreview.reports import xlsx_report

    project, report, _, frames, _ = demo
    sheets = workbook_model(report, frames, project, generated_at="2026-01-01T00:00:00")
    fast = xlsx_report.write_workbook(sheets, tmp_path / "fast.xlsx")

    class EveryCellOnItsOwn(xlsx_report._StyleArrays):
        def array(self, *styles):
            self.arrays.clear()  # nothing reused: openpyxl styles every cell
            return super().array(*styles)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(xlsx_report, "_StyleArrays", EveryCellOnItsOwn)
        slow = xlsx_report.write_workbook(sheets, tmp_path / "slow.xlsx")
    assert _parts(fast) == _parts(slow)


def test_a_long_raw_sheet_hashes_each_style_once(tmp_path, monkeypatch):
    """Setting a style object on a cell hashes it: per cell, that took most of the writing
    time of a big study's raw sheets. Now 500 rows hash no more than 10."""
    from openpyxl.descriptors.serialisable import Serialisable

    from portalreview.reports.xlsx_report import INT, Sheet, Table, write_workbook

    hashes = []
    plain_hash = Serialisable.__hash__
    monkeypatch.setattr(Serialisable, "__hash__", lambda self: hashes.append(1) or plain_hash(self))

    def hashes_writing(n_rows: int) -> int:
        rows = [
            [Cell(i, None, INT), Cell(f"text {i}"), Cell(i / 7, None, "0.00")]
            for i in range(n_rows)
        ]
        table = Table("raw_x", "t", ["A", "B", "C"], rows)
        hashes.clear()
        write_workbook([Sheet("Raw x", "Raw", "", [table], raw=True)], tmp_path / "raw.xlsx")
        return len(hashes)

    assert hashes_writing(500) == hashes_writing(10)


def test_raw_sheets_look_rows_up_without_a_loc_per_answer(demo, monkeypatch):
    """A pandas ``.loc`` per answer took half the workbook model's time on a big study."""
    from pandas.core.indexing import _LocIndexer

    from portalreview.reports.xlsx_report import _raw_sheets, _Reader

    _, report, _, frames, _ = demo
    calls = []
    plain_getitem = _LocIndexer.__getitem__
    monkeypatch.setattr(
        _LocIndexer, "__getitem__", lambda self, key: calls.append(1) or plain_getitem(self, key)
    )
    sheets = _raw_sheets(frames, _Reader(report))
    assert sum(1 for s in sheets for _ in s.tables[0].rows) > 100  # rows made as read
    assert len(calls) < 10


@pytest.mark.both_backends
def test_the_workbook_and_the_csv_report_of_a_study_on_either_back_end(fresh_demo, tmp_path):
    """Both reports read the study through either back end: on a server they once asked for
    SQLite's own list of tables and stopped there, so a team's PI could not export them."""
    from portalreview.llm.templates import PromptLibrary
    from portalreview.store.service import StudyService

    installed = PromptLibrary(StudyService(fresh_demo)).install_defaults()
    assert installed  # the templates the provenance sheet lists from the project
    report = build_report(fresh_demo, seed=0, n_resamples=0)
    book = load_workbook(write_xlsx_report(fresh_demo, tmp_path / "report.xlsx", n_resamples=0))
    assert set(KIND_SHEETS + RAW_SHEETS) <= set(book.sheetnames)
    values = [v for row in book["Provenance"].iter_rows(values_only=True) for v in row if v]
    assert set(installed) <= set(values)
    write_csv_report(fresh_demo, tmp_path / "csv", n_resamples=0)
    assert json.loads((tmp_path / "csv" / "report.json").read_text()) == report
