"""Every malformed file is refused with a message naming the file, the row or line and the
field, and the project is left exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from io_support import refused, write_csv

from portalreview.store.importers import import_files
from portalreview.store.importers.readers import read_parts
from portalreview.store.project import Project
from tests.conftest import build_small_study

HERE = Path(__file__).parent / "bad_files"
OTHER_SEPARATORS = Path(__file__).parent / "other_separators"
COMPANIONS = {"redcap_unknown_case.csv": ["companions/redcap_dictionary.csv"]}

# file -> fragments the message must contain (the file name is always checked too)
EXPECTED: dict[str, list[str]] = {
    "answers_dangling_response.jsonl": [
        "line 1, field 'answer.entries[0].response_id'",
        "no response 'd99'",
    ],
    "answers_incomplete_submitted.jsonl": ["line 1", "cannot submit yet"],
    "answers_level_as_list.jsonl": ["line 1", "levels: [1] is not a level 1-6"],
    "answers_unknown_kind.jsonl": ["line 1, field 'kind'", "expected one of respond", "'triage'"],
    "answers_unknown_unit.jsonl": ["line 1, field 'unit'", "no unit 4 in unit set 'facts set'"],
    "answers_wrong_kind_for_unit.jsonl": ["line 1, field 'kind'", "of kind urgency, not rank"],
    "assignments_bad_presentation.jsonl": ["line 1, field 'presentation.order'", "every member"],
    "binary.csv": ["binary file"],
    "cases_array.jsonl": ["one JSON array", "one JSON object per line"],
    "cases_bad_chart.csv": ["row 2, field 'chart'", "unknown section ###Allergies###"],
    "cases_bad_tags.csv": ["row 2, field 'tags'", "key=value"],
    "cases_blank_message.csv": ["row 2, field 'message'", "blank"],
    "cases_duplicate_column.csv": ["row 1", "column 'message' appears twice"],
    "cases_duplicate_ids.csv": ["row 4, field 'case_id'", "appears twice", "row 2"],
    "cases_duplicate_of_project.jsonl": ["line 1, field 'case_id'", "already in the project"],
    "cases_level_7.csv": ["row 3, field 'urgency_level'", "a level 1-6", "got '7'"],
    "cases_level_word.jsonl": ["line 1, field 'urgency_level'", "got 'high'"],
    "cases_missing_message.csv": ["cannot be recognised", "cases: case_id, message",
                                  "Closest: cases, which also needs message"],
    "cases_mixed_encodings.csv": ["mixed encodings", "line 3", "0xE9"],
    "cases_nan.jsonl": ["line 1", "NaN is not allowed"],
    "cases_non_object.jsonl": ["line 2", "expected a JSON object", "a list"],
    "cases_ragged_row.csv": ["row 3", "4 values but the header has 3 columns"],
    "cases_semicolon_unclosed_quote.csv": ["row 3", "cannot be read as CSV"],
    "cases_surrogate.jsonl": ["line 1, field 'message'", "surrogate"],
    "cases_truncated.jsonl": ["line 2", "not valid JSON", "Unterminated string", "cut short"],
    "cases_unclosed_quote.csv": ["row 3", "cannot be read as CSV"],
    "cases_utf16.csv": ["UTF-16", "save it as UTF-8"],
    "cases_wrong_types.jsonl": ["line 1, field 'message'", "expected text, got a number"],
    "empty.csv": ["is empty"],
    "eppc_duplicate_keys.jsonl": ["line 1", "'Code' appears twice"],
    "eppc_sentence_not_in_message.jsonl": ["line 1, field 'sentence'", "does not occur"],
    "eppc_span_not_in_sentence.jsonl": [
        "line 1, field 'results[0].Span'",
        "'shortness of breath' is not in its sentence",
    ],
    "eppc_subcode_of_wrong_code.jsonl": [
        "line 1, field 'results[0].Sub-code'",
        "does not belong",
        "it is a subcode of InfoGive",
    ],
    "eppc_unknown_code.jsonl": ["line 1, field 'results[0].Code'", "unknown code"],
    "header_only.csv": ["header row but no data rows"],
    "inbox_without_level.csv": [
        "cannot be recognised",
        "Closest: PMR-Bench inbox / message pool, which also needs level",
    ],
    "not_really.xlsx": ["not an Excel workbook"],
    "cases_broken_xml.xlsx": ["is not a readable Excel workbook"],
    "notes.txt": ["unknown file type .txt"],
    "old_excel.xls": ["old Excel .xls"],
    "pairs_conflicting_levels.csv": ["row 3, field 'chosen_level'", "level 2 here but 1"],
    "pairs_same_message.csv": ["row 2, field 'rejected'", "same message"],
    "redcap_unknown_case.csv": ["row 2, field 'case_id'", "no case 'c99'"],
    "responses_bad_author_kind.csv": ["row 2, field 'author_kind'", "clinician, model, imported"],
    "responses_dangling_case.csv": ["row 2, field 'case_id'", "no case 'c77'"],
    "responses_duplicate_of_project.csv": ["row 2, field 'response_id'", "already in the project"],
    "units_gap.jsonl": ["line 2, field 'position'", "expected 1"],
}  # fmt: skip


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One small study shared by these tests: every import here must fail and change
    nothing, which each test checks."""
    with Project.create(tmp_path_factory.mktemp("bad") / "s.prproj", name="Bad") as project:
        build_small_study(project)
        yield project


def test_there_are_enough_bad_files_and_each_has_an_expectation():
    files = sorted(p.name for p in HERE.iterdir() if p.is_file())
    assert len(files) >= 25
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_bad_file_is_refused_clearly_and_changes_nothing(base, name):
    paths = [HERE / name, *(HERE / c for c in COMPANIONS.get(name, []))]
    message = refused(base, paths)
    assert name in message
    for fragment in EXPECTED[name]:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_a_50_mb_message_in_json_lines(base, tmp_path):
    path = tmp_path / "huge.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"case_id": "ok", "message": "Fine."}) + "\n")
        fh.write('{"case_id": "huge", "message": "' + "a" * 50_000_000 + '"}\n')
    message = refused(base, [path])
    assert "huge.jsonl, line 2, field 'message'" in message
    assert "50,000,000 characters" in message and "100,000" in message


def test_a_50_mb_message_in_csv(base, tmp_path):
    path = tmp_path / "huge.csv"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("case_id,message\nok,Fine.\nhuge,")
        fh.write("a" * 50_000_000 + "\n")
    message = refused(base, [path])
    assert "huge.csv, row 3" in message and "100,000" in message


def test_a_good_file_with_a_bad_one_imports_neither(base, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("case_id,message\nfine1,All good.\n", encoding="utf-8")
    message = refused(base, [good, HERE / "cases_level_7.csv"])
    assert "cases_level_7.csv, row 3" in message


def test_a_missing_file_and_an_empty_call(base, tmp_path):
    assert "no such file" in refused(base, [tmp_path / "nope.csv"])
    assert "no files" in refused(base, [])


# files Excel saves as "CSV" on a German or French Windows: read, not refused
# file -> (what separates its columns, its rows)
SEPARATED: dict[str, tuple[str, list[list[str]]]] = {
    "cases_semicolon.csv": (
        "semicolons",
        [["case_id", "message", "urgency_level"], ["x1", "Hello there", "3"]],
    ),
    "cases_semicolon_quoted.csv": ("semicolons", [["case_id", "message"], ["c1", "Hello there."]]),
    "cases_tabs_quoted.csv": ("tabs", [["case_id", "message"], ["c1", "Hello there."]]),
}


def test_each_file_separated_otherwise_has_an_expectation():
    assert sorted(p.name for p in OTHER_SEPARATORS.iterdir()) == sorted(SEPARATED)


@pytest.mark.parametrize("name", sorted(SEPARATED))
def test_a_file_separated_otherwise_imports_as_its_comma_twin(tmp_path, name):
    separator, rows = SEPARATED[name]
    [part] = read_parts(OTHER_SEPARATORS / name)
    [twin] = read_parts(write_csv(tmp_path / name, rows))
    assert part.columns == twin.columns
    assert [r.values for r in part.records] == [r.values for r in twin.records]
    with Project.create(tmp_path / "s.prproj") as project:
        report = import_files(project, [OTHER_SEPARATORS / name])
    assert report.added["cases"] == 1
    assert report.notes == [f"{name}: columns separated by {separator}, not commas; read that way"]
