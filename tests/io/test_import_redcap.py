"""REDCap: a theme-guided survey's records export with its data dictionary."""

from __future__ import annotations

import csv

import pytest
from io_support import fingerprint, write_csv

from portalreview.store.exports.snapshot import read_snapshot
from portalreview.store.importers import ImportFailed, import_files, propose_redcap_mapping
from portalreview.store.importers.redcap import DICTIONARY_COLUMNS
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

FORM = "message_labeling"
FIELDS = [
    ("record_id", "text", "Record ID"),
    ("case_id", "text", "Case ID"),
    ("patient_message", "descriptive", "Please refer to the following patient's message"),
    ("empathy_box", "notes", "<b>Empathetic Communication</b>"),
    ("symptom_q", "notes", "Symptom-Related Follow-up Questions"),
    ("med_q", "notes", "Medication-Related Follow-up Questions"),
    ("assess", "notes", "Medical Assessment"),
    ("plan_box", "notes", "Medical Planning and Instructions"),
    ("logistics", "notes", "Logistics: Scheduling, Billing, Operations"),
    ("coord", "notes", "Planning: Care Coordination and Communication Planning"),
    ("contingency", "notes", "Planning: Treatment Contingency Planning"),
    ("other_box", "notes", "Other"),
    ("assumptions", "notes", "Assumptions/Notes/Additional Thoughts"),
]
EXPECTED = {
    "case_id": "case_id",
    "empathy_box": "empathy",
    "symptom_q": "symptom_questions",
    "med_q": "medication_questions",
    "assess": "assessment",
    "plan_box": "planning",
    "logistics": "logistics",
    "coord": "coordination",
    "contingency": "contingency",
    "other_box": "other",
    "assumptions": "notes",
}


def dictionary(tmp_path, fields=FIELDS):
    rows = [list(DICTIONARY_COLUMNS)]
    for name, kind, label in fields:
        rows.append([name, FORM, "", kind, label] + [""] * (len(DICTIONARY_COLUMNS) - 5))
    return write_csv(tmp_path / "Survey_DataDictionary.csv", rows)


def records(tmp_path, rows, fields=FIELDS, name="survey_records.csv"):
    columns = ["record_id", "redcap_survey_identifier", f"{FORM}_timestamp"]
    columns += [n for n, kind, _ in fields[1:] if kind != "descriptive"]
    columns.append(f"{FORM}_complete")
    table = [columns]
    for i, row in enumerate(rows, start=1):
        first = [str(i), row.get("who", "nurse1"), "2024-03-01 10:00:00"]
        table.append(first + [row.get(c, "") for c in columns[3:-1]] + [row.get("complete", "2")])
    return write_csv(tmp_path / name, table)


@pytest.fixture
def study(project):
    return build_small_study(project)


def test_the_proposal_maps_the_appendix_g_form(project, study, tmp_path):
    mapping = propose_redcap_mapping(project, records(tmp_path, [{}]), dictionary(tmp_path))
    assert mapping.fields == EXPECTED
    assert mapping.complete and not mapping.ambiguous and not mapping.unmapped
    assert mapping.form == FORM
    assert "Empathetic Communication" in mapping.describe()


def test_records_become_respond_answers(project, study, tmp_path):
    rows = [
        {"case_id": "c1", "empathy_box": "So sorry.", "plan_box": "Go to the ED.",
         "assumptions": "No prior cardiac history.", "who": "nurse1"},
        {"case_id": "c2", "logistics": "Portal > Immunizations.", "who": "nurse2",
         "complete": "0"},
    ]  # fmt: skip
    report = import_files(project, [records(tmp_path, rows), dictionary(tmp_path)])
    assert report.files["survey_records.csv"] == "redcap_records"
    assert report.added["answers"] == 2 and report.added["annotators"] == 2
    assert any("proposed mapping" in note for note in report.notes)
    # the survey identifier named the annotators: it is not ignored
    assert report.ignored_columns["survey_records.csv"] == [f"{FORM}_timestamp"]
    svc = StudyService(project)
    people = {a.name: a.id for a in svc.annotators()}
    [item] = svc.queue("respond", annotator_id=people["nurse1"])
    answer = svc.get_answer(item.unit_id, people["nurse1"])
    assert answer.status == "submitted"
    assert answer.payload == {
        "mode": "theme_guided",
        "parts": {"empathy": "So sorry.", "planning": "Go to the ED."},
        "notes": "No prior cardiac history.",
    }
    assert svc.read_unit(item.unit_id).unit_set == "redcap-survey_records"
    [other] = svc.queue("respond", annotator_id=people["nurse2"])
    assert svc.get_answer(other.unit_id, people["nurse2"]).status == "draft"


def test_an_ambiguous_field_needs_confirmation(project, study, tmp_path):
    fields = [*FIELDS, ("extra_box", "notes", "Empathy and other thoughts")]
    recs = records(tmp_path, [{"case_id": "c1", "extra_box": "Hang in there."}], fields)
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, [recs, dictionary(tmp_path, fields)])
    message = str(err.value)
    assert "survey_records.csv" in message
    assert "extra_box" in message and "one of empathy, other" in message
    assert "redcap_mapping=" in message
    assert fingerprint(project) == before
    confirmed = {**EXPECTED, "extra_box": "empathy", "empathy_box": "ignore"}
    report = import_files(project, [recs, dictionary(tmp_path, fields)], redcap_mapping=confirmed)
    assert report.added["answers"] == 1
    assert "empathy_box" in report.ignored_columns["survey_records.csv"]


def test_rich_text_labels_are_read_as_they_read(project, study, tmp_path):
    """REDCap's rich-text editor writes labels as HTML: tags removed outright glued "Planning"
    and "Please" into one word, and &nbsp; was not a space; the whole import was refused."""
    rich = {
        "coord": "<p><strong>Planning: Care Coordination and Communication Planning</strong></p>"
        "<p>Please outline who does what</p>",
        "empathy_box": "Empathetic&nbsp;Communication<br>Please write with empathy",
    }
    fields = [(n, kind, rich.get(n, label)) for n, kind, label in FIELDS]
    mapping = propose_redcap_mapping(
        project, records(tmp_path, [{}], fields), dictionary(tmp_path, fields)
    )
    assert mapping.fields == EXPECTED
    assert mapping.labels["empathy_box"] == "Empathetic Communication Please write with empathy"


def test_text_in_a_column_the_dictionary_lacks_is_refused(project, study, tmp_path):
    """A dictionary downloaded before two fields were added: their text was dropped as an
    "ignored column" and the answer stored as submitted without it."""
    older = [f for f in FIELDS if f[0] not in ("contingency", "other_box")]
    row = {"case_id": "c1", "empathy_box": "So sorry.", "contingency": "If worse, call 911."}
    recs = records(tmp_path, [row])  # every field, the two new ones too
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, [recs, dictionary(tmp_path, older)])
    assert "column contingency holds text, but the data dictionary does not describe it" in str(
        err.value
    )
    assert fingerprint(project) == before
    empty = records(tmp_path, [{**row, "contingency": ""}], name="empty_new_fields.csv")
    report = import_files(project, [empty, dictionary(tmp_path, older)])  # nothing lost: taken
    assert report.added["answers"] == 1


def test_a_gold_record_is_the_pis_gold_answer(project, study, tmp_path):
    """PortalReview's REDCap export marks the PI's adjudicated record with a yes/no field
    ``gold``: read as an ordinary record it became one more answer of the PI's (gold 1 -> 0)."""
    extra = [("gold", "yesno", "Gold (adjudicated) answer"), ("sure", "yesno", "Confident?")]
    fields = [*FIELDS, *extra]
    rows = [
        {"case_id": "c1", "empathy_box": "Adjudicated.", "who": "pat", "gold": "1"},
        {"case_id": "c1", "empathy_box": "Her own.", "who": "pat", "gold": "0"},
        {"case_id": "c1", "other_box": "Mine.", "who": "nurse1", "sure": "1"},
    ]
    recs, fields_csv = records(tmp_path, rows, fields), dictionary(tmp_path, fields)
    # a yes/no field that does not name gold is not proposed (nor left unmapped)
    assert propose_redcap_mapping(project, recs, fields_csv).fields == {**EXPECTED, "gold": "gold"}
    import_files(project, [recs, fields_csv])
    got = {
        (a["annotator"], a["gold"]): a["answer"]["parts"]
        for a in read_snapshot(project).answers
        if a["unit"]["set"] == "redcap-survey_records"
    }
    assert got == {
        ("pat", True): {"empathy": "Adjudicated."},
        ("pat", False): {"empathy": "Her own."},
        ("nurse1", False): {"other": "Mine."},
    }
    svc = StudyService(project)
    pat = next(a.id for a in svc.annotators() if a.name == "pat")
    # her own record came after her gold one: it is her work, in her queue
    assert any(
        svc.read_unit(i.unit_id).unit_set == "redcap-survey_records"
        for i in svc.queue("respond", annotator_id=pat)
    )


def test_a_gold_record_of_a_clinician_is_refused(project, study, tmp_path):
    fields = [*FIELDS, ("gold", "yesno", "Gold (adjudicated) answer")]
    recs = records(tmp_path, [{"case_id": "c1", "other_box": "x", "gold": "1"}], fields)
    before = fingerprint(project)
    with pytest.raises(ImportFailed, match="a gold answer is the PI's decision; nurse1 is a"):
        import_files(project, [recs, dictionary(tmp_path, fields)])
    assert fingerprint(project) == before


def test_a_repeating_instrument_is_refused_as_such(project, study, tmp_path):
    columns = ["record_id", "redcap_repeat_instrument", "redcap_repeat_instance", "who"]
    columns += [n for n, kind, _ in FIELDS[1:] if kind != "descriptive"]
    columns.append(f"{FORM}_complete")
    blank = [""] * (len(columns) - 5)
    rows = [
        columns,
        ["1", "", "", "nurse1", *blank, ""],  # the record's base row: the clinician
        ["1", FORM, "1", "", "c1", "So sorry.", *blank[2:], "2"],  # one repeat per case
    ]
    recs = write_csv(tmp_path / "repeats.csv", rows)
    before = fingerprint(project)
    with pytest.raises(ImportFailed, match="is an export of a repeating instrument"):
        import_files(project, [recs, dictionary(tmp_path)])
    assert fingerprint(project) == before


def _with_redcap_columns(path, extra, values):
    """The records file with REDCap's columns ``extra`` after the record id; ``values``: one
    list per row, its record id and then the values of ``extra``."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    table = [[rows[0][0], *extra, *rows[0][1:]]]
    table += [[*first, *row[1:]] for row, first in zip(rows[1:], values, strict=True)]
    return write_csv(path, table)


def test_a_repeating_event_or_a_record_in_several_events_is_refused_as_such(
    project, study, tmp_path
):
    """A repeating event (redcap_repeat_instance without an instrument) and a longitudinal
    project's record with a row per event were refused as "row 2, field 'case_id': is missing"
    for the row without the survey."""
    rows = [{"who": "nurse1"}, {"case_id": "c1", "empathy_box": "So sorry.", "who": ""}]
    before = fingerprint(project)
    repeats = _with_redcap_columns(
        records(tmp_path, rows, name="repeats.csv"),
        ["redcap_event_name", "redcap_repeat_instrument", "redcap_repeat_instance"],
        [["1", "enrolment_arm_1", "", ""], ["1", "cases_arm_1", "", "1"]],
    )
    with pytest.raises(ImportFailed, match="is an export of a repeating instrument or event"):
        import_files(project, [repeats, dictionary(tmp_path)])
    events = _with_redcap_columns(
        records(tmp_path, rows, name="events.csv"),
        ["redcap_event_name"],
        [["1", "enrolment_arm_1"], ["1", "case_1_arm_1"]],
    )
    with pytest.raises(ImportFailed, match="record 1 has 2 rows, in events enrolment_arm_1, "):
        import_files(project, [events, dictionary(tmp_path)])
    assert fingerprint(project) == before
    one_each = _with_redcap_columns(  # a longitudinal project, each record in one event
        records(tmp_path, [rows[1] | {"who": "nurse1"}], name="one_event.csv"),
        ["redcap_event_name"],
        [["1", "case_1_arm_1"]],
    )
    assert import_files(project, [one_each, dictionary(tmp_path)]).added["answers"] == 1


def test_a_record_for_an_unknown_case_is_refused(project, study, tmp_path):
    recs = records(tmp_path, [{"case_id": "c1", "other_box": "x"}, {"case_id": "c404"}])
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, [recs, dictionary(tmp_path)])
    assert "survey_records.csv, row 3, field 'case_id': there is no case 'c404'" in str(err.value)
    assert fingerprint(project) == before


def test_a_confirmed_mapping_is_checked(project, study, tmp_path):
    recs = records(tmp_path, [{"case_id": "c1"}])
    with pytest.raises(ImportFailed, match="maps 'assess' to 'diagnosis'"):
        import_files(project, [recs, dictionary(tmp_path)],
                     redcap_mapping={**EXPECTED, "assess": "diagnosis"})  # fmt: skip
    with pytest.raises(ImportFailed, match="names no case_id field"):
        import_files(project, [recs, dictionary(tmp_path)], redcap_mapping={"assess": "notes"})
    for odd in (["notes"], {"to": "notes"}, 3):  # a list or an object was a TypeError
        with pytest.raises(ImportFailed, match=r"maps 'assess' to .*targets are theme ids"):
            import_files(project, [recs, dictionary(tmp_path)],
                         redcap_mapping={**EXPECTED, "assess": odd})  # fmt: skip


def test_records_without_their_dictionary_are_refused(project, study, tmp_path):
    with pytest.raises(ImportFailed, match="together with its data dictionary"):
        import_files(project, [records(tmp_path, [{"case_id": "c1"}])])
    with pytest.raises(ImportFailed, match="together with the records export"):
        import_files(project, [dictionary(tmp_path)])


def test_a_second_record_of_the_same_person_and_case_is_refused(project, study, tmp_path):
    recs = records(tmp_path, [{"case_id": "c1", "other_box": "a"}, {"case_id": "c1"}])
    with pytest.raises(ImportFailed, match=r"row 3.*already has a response to this case"):
        import_files(project, [recs, dictionary(tmp_path)])


def test_a_second_download_of_the_same_records_is_refused_and_changes_nothing(
    project, study, tmp_path
):
    """REDCap names each download anew (Study_DATA_<date>_<time>.csv): the same records
    imported again under the new name came in as a second unit set, counting every answer
    twice in the report. A record word for word the same as one imported before is refused;
    a new round (other words, same case) is imported."""
    rows = [
        {"case_id": "c1", "empathy_box": "So sorry.", "who": "nurse1"},
        {"case_id": "c2", "logistics": "Portal > Immunizations.", "who": "nurse1"},
    ]
    first = records(tmp_path, rows, name="Study_DATA_2025-01-03_1430.csv")
    import_files(project, [first, dictionary(tmp_path)])
    before = fingerprint(project)
    again = records(tmp_path, rows, name="Study_DATA_2025-02-10_0910.csv")
    with pytest.raises(
        ImportFailed, match=r"row 2.*already in unit set 'redcap-Study_DATA_2025-01-03_1430'"
    ):
        import_files(project, [again, dictionary(tmp_path)])
    assert fingerprint(project) == before
    round_two = [{**row, "other_box": "Asked again a month later."} for row in rows]
    later = records(tmp_path, round_two, name="Study_DATA_2025-03-01_0900.csv")
    assert import_files(project, [later, dictionary(tmp_path)]).added["answers"] == 2


def _as_german_excel(path):
    """The CSV file re-saved as Excel on a German Windows saves "CSV": semicolons, cp1252."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    with path.open("w", encoding="cp1252", newline="") as fh:
        csv.writer(fh, delimiter=";").writerows(rows)
    return path


def test_a_german_excel_export_is_read_as_the_comma_one(project, study, tmp_path):
    """The dictionary's header names hold commas ("Choices, Calculations, OR Slider Labels"):
    its semicolons still separate the columns."""
    row = {"case_id": "c1", "empathy_box": "Das tut mir leid, gute Besserung; bis bald."}
    recs = _as_german_excel(records(tmp_path, [row]))
    fields = _as_german_excel(dictionary(tmp_path))
    assert propose_redcap_mapping(project, recs, fields).fields == EXPECTED
    report = import_files(project, [recs, fields])
    assert report.added["answers"] == 1
    for name in ("survey_records.csv", "Survey_DataDictionary.csv"):
        assert f"{name}: columns separated by semicolons, not commas; read that way" in report.notes
    svc = StudyService(project)
    nurse = next(a.id for a in svc.annotators() if a.name == "nurse1")
    [item] = svc.queue("respond", annotator_id=nurse)
    assert svc.get_answer(item.unit_id, nurse).payload["parts"] == {"empathy": row["empathy_box"]}
