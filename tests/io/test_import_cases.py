"""Cases and responses from CSV, XLSX and JSON Lines; the sectioned chart text; encodings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from io_support import fingerprint, refused, write_csv, write_jsonl
from openpyxl import Workbook
from sqlalchemy import select

from portalreview.store.importers import ImportFailed, import_files, parse_chart_text
from portalreview.store.models import Case, CaseTag, Response
from portalreview.store.service import StudyService, chart_text_of

pytestmark = pytest.mark.both_backends

CHART_TEXT = (
    "###Demographics###\nAge: 54\nSex: Female\n\n"
    "###Full Active Problem List###\nHypertension - Type 2 diabetes - Asthma\n\n"
    "###Recent Encounters (Max 10)###\n2024-01-03 Office visit\n2024-02-11 Telephone\n\n"
    "###Medications (Outpatient)###\nMetformin 500 mg\nLisinopril 10 mg"
)


def _case(project, external: str) -> Case:
    with project.read() as s:
        return s.scalar(select(Case).where(Case.external_id == external))


def _chart(project, external: str) -> dict:
    return json.loads(_case(project, external).chart_json)


def test_csv_cases_and_responses_in_any_order(project, tmp_path):
    cases = write_csv(
        tmp_path / "cases.csv",
        [
            ["case_id", "message", "demographics", "problems", "urgency_level", "tags", "colour"],
            ["m1", "My chest hurts.", "Age: 61\nSex: Male", "CAD - HTN", "1", "split=test", "red"],
            ["m2", "Refill please.", "", "", "UNCLEAR", "inbox=a;inbox=b", "blue"],
        ],
    )
    responses = write_csv(
        tmp_path / "replies.csv",
        [
            ["response_id", "case_id", "text", "author_kind", "production"],
            ["r1", "m1", "Call 911 now.", "clinician", "real_time"],
        ],
    )
    report = import_files(project, [responses, cases])  # responses first: order is by format
    assert report.files == {"replies.csv": "responses", "cases.csv": "cases"}
    assert report.added["cases"] == 2 and report.added["responses"] == 1
    assert report.ignored_columns == {"cases.csv": ["colour"]}
    assert _chart(project, "m1")["demographics"] == ["Age: 61", "Sex: Male"]
    assert _chart(project, "m1")["problems"] == ["CAD", "HTN"]
    assert _case(project, "m1").urgency_level == 1
    assert _case(project, "m2").urgency_filter == "UNCLEAR"
    with project.read() as s:
        tags = sorted(s.execute(select(CaseTag.key, CaseTag.value)).all())
        reply = s.scalar(select(Response))
    assert tags == [("inbox", "a"), ("inbox", "b"), ("split", "test")]
    assert (reply.external_id, reply.author_kind, reply.production) == (
        "r1",
        "clinician",
        "real_time",
    )


def test_xlsx_cases_with_numbers_in_cells(project, tmp_path):
    book = Workbook()
    sheet = book.active
    sheet.append(["case_id", "message", "urgency_level", "tag_site", "age_band"])
    sheet.append([101, "Is my rash contagious?", 4, "north", "18-44"])
    sheet.append([102, "Can I get a note for work?", 6.0, None, None])
    book.save(tmp_path / "book.xlsx")
    report = import_files(project, [tmp_path / "book.xlsx"])
    assert report.files == {"book.xlsx, sheet 'Sheet'": "cases"}
    assert _case(project, "101").urgency_level == 4
    assert _case(project, "102").urgency_level == 6
    with project.read() as s:
        assert s.execute(select(CaseTag.key, CaseTag.value)).all() == [("site", "north")]


def test_jsonl_cases_in_the_demo_shape(project, tmp_path):
    demo = {
        "case_id": "demo-01",
        "message": "Hi, my knee is swollen after a fall. Should I get an X-ray?",
        "demographics": ["Age: 47", "Sex: Male"],
        "problems": ["Osteoarthritis"],
        "encounters": [],
        "medications": ["Ibuprofen 400 mg"],
        "age_band": "45-64",
        "gender": "male",
        "urgency_level": 4,
        "tags": {"inbox": "demo", "topic": ["injury", "ortho"]},
    }
    report = import_files(project, [write_jsonl(tmp_path / "cases.jsonl", [demo])])
    assert report.ignored_columns == {}
    case = _case(project, "demo-01")
    assert json.loads(case.chart_json)["medications"] == ["Ibuprofen 400 mg"]
    assert case.chart_text == chart_text_of(json.loads(case.chart_json))
    assert (case.age_band, case.gender, case.urgency_level) == ("45-64", "male", 4)
    assert report.added["case_tags"] == 3


def test_sectioned_chart_text_is_parsed(project, tmp_path):
    path = write_jsonl(
        tmp_path / "cases.jsonl", [{"case_id": "s1", "message": "Hello.", "chart": CHART_TEXT}]
    )
    import_files(project, [path])
    chart = _chart(project, "s1")
    assert chart["demographics"] == ["Age: 54", "Sex: Female"]
    assert chart["problems"] == ["Hypertension", "Type 2 diabetes", "Asthma"]
    assert chart["encounters"] == ["2024-01-03 Office visit", "2024-02-11 Telephone"]
    assert chart["medications"] == ["Metformin 500 mg", "Lisinopril 10 mg"]
    assert _case(project, "s1").chart_text == CHART_TEXT


@pytest.mark.parametrize("line_end", ["\r\n", "\r"], ids=["crlf", "cr"])
@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_a_chart_text_with_windows_line_ends_reads_as_with_lf(project, tmp_path, line_end, suffix):
    """The headings' pattern did not take a CR before the line's end: "has no section heading"."""
    chart = CHART_TEXT.replace("\n", line_end)
    path = tmp_path / f"cases.{suffix}"
    if suffix == "jsonl":
        write_jsonl(path, [{"case_id": "w1", "message": "Hello.", "chart": chart}])
    else:
        write_csv(path, [["case_id", "message", "chart"], ["w1", "Hello.", chart]])
    import_files(project, [path])
    assert _chart(project, "w1")["problems"] == ["Hypertension", "Type 2 diabetes", "Asthma"]
    assert _case(project, "w1").chart_text == CHART_TEXT
    assert parse_chart_text(chart) == parse_chart_text(CHART_TEXT)


def test_chart_text_parse_inverts_chart_text_of():
    chart = {
        "demographics": ["Age: 3"],
        "problems": ["Otitis media", "Eczema"],
        "encounters": [],
        "medications": ["Amoxicillin"],
    }
    assert parse_chart_text(chart_text_of(chart)) == chart


def test_chart_text_variants_and_refusals():
    colon = "###Full Active Problem List###:\nA - B\n###Demographics###\nAge: 9"
    assert parse_chart_text(colon)["problems"] == ["A", "B"]
    with pytest.raises(ValueError, match="unknown section ###Allergies###"):
        parse_chart_text("###Allergies###\nPenicillin")
    with pytest.raises(ValueError, match="before its first"):
        parse_chart_text("Patient chart\n###Demographics###\nAge: 9")
    with pytest.raises(ValueError, match="twice"):
        parse_chart_text("###Demographics###\nA\n###Demographics###\nB")


def test_a_chart_text_that_differs_from_the_standard_layout_is_kept(project, tmp_path):
    text = "###Demographics###:\nAge: 54\n###Medications###\nAspirin"
    import_files(project, [write_jsonl(tmp_path / "c.jsonl", [{"case_id": "k", "message": "x",
                                                                "chart": text}])])  # fmt: skip
    assert _case(project, "k").chart_text == text
    assert _chart(project, "k")["medications"] == ["Aspirin"]


def test_bom_crlf_and_quoted_newlines(project, tmp_path):
    data = '\ufeffcase_id,message\r\nq1,"Line one\r\nline two, with a comma"\r\nq2,Plain\r\n'
    (tmp_path / "bom.csv").write_bytes(data.encode("utf-8"))
    report = import_files(project, [tmp_path / "bom.csv"])
    assert report.added["cases"] == 2
    assert _case(project, "q1").message == "Line one\r\nline two, with a comma"
    assert not report.notes


def test_windows_1252_is_read_and_reported(project, tmp_path):
    data = "case_id,message\nw1,Caf\xe9 visit \u2013 fever\n".encode("cp1252")
    (tmp_path / "win.csv").write_bytes(data)
    report = import_files(project, [tmp_path / "win.csv"])
    assert _case(project, "w1").message == "Café visit – fever"
    assert any("Windows-1252" in note for note in report.notes)


def test_message_length_limit(project, tmp_path):
    ok = write_jsonl(tmp_path / "ok.jsonl", [{"case_id": "big", "message": "a" * 100_000}])
    import_files(project, [ok])
    too_long = write_jsonl(
        tmp_path / "long.jsonl", [{"case_id": "bigger", "message": "a" * 100_001}]
    )
    with pytest.raises(ImportFailed, match=r"long.jsonl, line 1, field 'message': .*100,000"):
        import_files(project, [too_long])
    csv_long = write_csv(tmp_path / "long.csv", [["case_id", "message"], ["x", "b" * 200_000]])
    with pytest.raises(ImportFailed, match=r"long.csv, row 2, field 'message': is 200,000"):
        import_files(project, [csv_long])


@pytest.mark.parametrize(
    "message",
    ["\u00a0\u3000", "\u200b", "\ufeff", "\u200b \u200c\u200d\u2060\n"],
    ids=["unicode-spaces", "zero-width-space", "byte-order-mark", "invisible-mix"],
)
def test_a_message_that_shows_nothing_is_blank(project, tmp_path, message):
    """Invisible characters show as an empty message (and an invisible sentence no one can
    code), as spaces do: refused alike."""
    path = write_jsonl(tmp_path / "cases.jsonl", [{"case_id": "z1", "message": message}])
    assert "line 1, field 'message': is blank (required)" in refused(project, [path])
    shown = write_jsonl(tmp_path / "shown.jsonl", [{"case_id": "z2", "message": "\u200bHi"}])
    assert import_files(project, [shown]).added["cases"] == 1


def test_dry_run_reports_and_saves_nothing(project, tmp_path):
    before = fingerprint(project)
    path = write_csv(tmp_path / "c.csv", [["case_id", "message"], ["d1", "Hi."], ["d2", "Yo."]])
    report = import_files(project, [path], dry_run=True)
    assert report.dry_run and report.added["cases"] == 2
    assert "Dry run" in report.summary()
    assert fingerprint(project) == before


def test_a_folder_is_imported_in_dependency_order(project, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_csv(folder / "a_responses.csv", [["response_id", "case_id", "text"], ["r", "z", "Ok."]])
    write_csv(folder / "b_cases.csv", [["case_id", "message"], ["z", "Help?"]])
    (folder / "README.txt").write_text("not imported")
    report = import_files(project, [folder])
    assert report.added["cases"] == 1 and report.added["responses"] == 1


def test_forcing_a_format_needs_its_columns(project, tmp_path):
    path = write_csv(tmp_path / "c.csv", [["case_id", "message"], ["x", "Hi."]])
    with pytest.raises(ImportFailed, match="not a responses file: it has no column"):
        import_files(project, [path], kind="responses")
    with pytest.raises(ImportFailed, match="unknown kind 'cats'"):
        import_files(project, [path], kind="cats")
    assert import_files(project, [path], kind="cases").added["cases"] == 1


def test_the_cases_of_the_project_count_for_responses(project, tmp_path):
    StudyService(project).add_case("old", "Earlier case.")
    path = write_csv(tmp_path / "r.csv", [["response_id", "case_id", "text"], ["r1", "old", "Hi"]])
    assert import_files(project, [path]).added["responses"] == 1


DEMO = Path(__file__).parents[2] / "resources" / "demo" / "cases.jsonl"


@pytest.mark.skipif(not DEMO.exists(), reason="the demo study is not in this checkout")
def test_the_demo_cases_import_unchanged(project):
    report = import_files(project, [DEMO])
    assert report.files == {"cases.jsonl": "cases"}
    assert report.ignored_columns == {} and report.added["cases"] == 40
