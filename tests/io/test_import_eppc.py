"""EPPC annotations in the model-output shape: sentences and spans located, legacy spellings
mapped and reported."""

from __future__ import annotations

import pytest
from io_support import fingerprint, write_jsonl

from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

SENTENCE = "I have had crushing chest pain since this morning."


@pytest.fixture
def study(project):
    return build_small_study(project)


def _answers(project, set_name: str):
    svc = StudyService(project)
    units = [i.unit_id for i in svc.queue("eppc", annotator_id=_id(svc, "nurse"))]
    return [svc.get_answer(u, _id(svc, "nurse")) for u in units], units


def _id(svc: StudyService, name: str) -> int:
    return next(a.id for a in svc.annotators() if a.name == name)


def test_legacy_spellings_are_mapped_and_reported(project, study, tmp_path):
    rows = [
        {
            "case_id": "c1",
            "sentence": SENTENCE,
            "annotator": "nurse",
            "results": [
                {
                    "Code": "Information Giving",
                    "Sub-code": "symptoms",
                    "Span": "crushing chest pain",
                },
                {
                    "Code": "Socioemotional",
                    "Sub-code": "ExpressConcern",
                    "Span": "since this morning",
                },
            ],
        },
        {
            "message_id": "c1",
            "sentence": "Hi Dr. Lee,",
            "annotator": "nurse",
            "results": [{"Code": "PartnershipPatient", "Sub-code": "salutation", "Span": "Hi"}],
        },
    ]
    report = import_files(project, [write_jsonl(tmp_path / "batch1.jsonl", rows)])
    assert report.added["units"] == 2 and report.added["answers"] == 2
    assert report.eppc_mappings == {
        'code "Information Giving" -> "InfoGive" (display name)': 1,
        'subcode "symptoms" -> "Symptoms" under InfoGive (case/spacing)': 1,
        'code "Socioemotional" -> "Socioemotional/Empathy" (legacy spelling)': 1,
        'subcode "ExpressConcern" -> "ExpressConcern/unease" under Socioemotional/Empathy '
        "(legacy spelling)": 1,
    }
    answers, units = _answers(project, "eppc-batch1")
    first = answers[0].payload["labels"]
    assert [(lb["code"], lb["subcode"]) for lb in first] == [
        ("InfoGive", "Symptoms"),
        ("Socioemotional/Empathy", "ExpressConcern/unease"),
    ]
    assert first[0]["spans"] == [[SENTENCE.index("crushing"), SENTENCE.index(" since")]]
    assert answers[0].status == "submitted"
    view = StudyService(project).read_unit(units[0])
    assert view.unit_set == "eppc-batch1" and view.sentence.text == SENTENCE


def test_a_span_not_in_its_sentence_is_refused(project, study, tmp_path):
    before = fingerprint(project)
    row = {
        "case_id": "c1",
        "sentence": SENTENCE,
        "annotator": "nurse",
        "results": [{"Code": "InfoGive", "Sub-code": "Symptoms", "Span": "shortness of breath"}],
    }
    with pytest.raises(ImportFailed) as err:
        import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])
    message = str(err.value)
    assert "b.jsonl, line 1, field 'results[0].Span'" in message
    assert "'shortness of breath' is not in its sentence" in message
    assert fingerprint(project) == before


def test_a_sentence_must_be_one_of_the_segmenters(project, study, tmp_path):
    row = {"case_id": "c1", "sentence": "crushing chest pain", "annotator": "n", "results": []}
    with pytest.raises(ImportFailed, match="is not one of its sentences"):
        import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])
    row["sentence"] = "I feel dizzy."
    with pytest.raises(ImportFailed, match=r"'I feel dizzy\.' does not occur"):
        import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])


def test_no_subcode_or_no_span_makes_a_draft(project, study, tmp_path):
    row = {
        "case_id": "c1",
        "sentence": "Should I come in?",
        "annotator": "nurse",
        "results": [{"Code": "InfoSeek", "Sub-code": "", "Span": "come in"}],
    }
    import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])
    answers, _ = _answers(project, "eppc-b")
    assert answers[0].status == "draft"
    assert answers[0].payload["labels"] == [
        {"code": "InfoSeek", "subcode": None, "spans": [[9, 16]]}
    ]


def test_a_repeated_span_takes_the_first_occurrence(project, study, tmp_path):
    svc = StudyService(project)
    svc.add_case("c9", "It hurts and it hurts more at night.")
    row = {
        "case_id": "c9",
        "sentence": "It hurts and it hurts more at night.",
        "annotator": "nurse",
        "results": [{"Code": "InfoGive", "Sub-code": "Symptoms", "Span": "hurts"}],
    }
    report = import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])
    answers, _ = _answers(project, "eppc-b")
    assert answers[0].payload["labels"][0]["spans"] == [[3, 8]]
    assert any("more than once" in note for note in report.notes)


def test_two_subcodes_for_one_code_are_refused(project, study, tmp_path):
    row = {
        "case_id": "c1",
        "sentence": SENTENCE,
        "annotator": "nurse",
        "results": [
            {"Code": "InfoGive", "Sub-code": "Symptoms", "Span": "chest pain"},
            {"Code": "InfoGive", "Sub-code": "Drugs", "Span": "morning"},
        ],
    }
    with pytest.raises(ImportFailed, match=r"results\[1\].Sub-code.*two subcodes"):
        import_files(project, [write_jsonl(tmp_path / "b.jsonl", [row])])


def test_response_sentences_can_be_coded(project, study, tmp_path):
    row = {
        "response_id": "d1",
        "sentence": "Please go to the emergency room now.",
        "annotator": "nurse",
        "results": [{"code": "InfoGive", "subcode": "Instruction", "span": ["go to", "room now"]}],
    }
    import_files(project, [write_jsonl(tmp_path / "replies.jsonl", [row])])
    answers, units = _answers(project, "eppc-replies")
    assert answers[0].payload["labels"][0]["spans"] == [[7, 12], [27, 35]]
    assert StudyService(project).read_unit(units[0]).sender == "provider"


def test_a_dry_run_of_answers_reports_what_the_import_adds(project, study, tmp_path):
    """A dry run writes no audit entry (on a server its guard would take the team's write
    lock: tests/store/test_server_waits.py) but counts those the import adds: one per answer
    and one for the import."""
    rows = [
        {
            "case_id": "c1",
            "sentence": SENTENCE,
            "annotator": "nurse",
            "results": [{"Code": "Information Giving", "Sub-code": "symptoms", "Span": "chest"}],
        }
    ]
    path = write_jsonl(tmp_path / "batch.jsonl", rows)
    before = fingerprint(project)
    tried = import_files(project, [path], dry_run=True)
    assert fingerprint(project) == before
    assert tried.added["answers"] == 1 and tried.added["audit_log"] >= 2
    assert import_files(project, [path]).added == tried.added


def test_a_name_in_other_code_points_is_the_same_annotator_and_a_new_one_is_named(
    project, study, tmp_path
):
    """A name written decomposed (macOS) made a second annotator who looked the same, without
    a word; a new name is named in a note (a misspelling makes a new person)."""
    import unicodedata

    svc = StudyService(project)
    svc.add_annotator(unicodedata.normalize("NFC", "josé"))
    row = {"case_id": "c1", "sentence": "Should I come in?", "results": []}
    rows = [
        {**row, "annotator": unicodedata.normalize("NFD", "josé")},
        {**row, "annotator": "jose"},
    ]
    report = import_files(project, [write_jsonl(tmp_path / "names.jsonl", rows)])
    names = sorted(a.name for a in svc.annotators() if a.name.startswith("jos"))
    assert names == ["jose", unicodedata.normalize("NFC", "josé")]
    (note,) = [n for n in report.notes if "new annotator" in n]
    assert note.startswith("a new annotator, 'jose', was added (named in names.jsonl, line 2")
    # the people's own file too: the same person, already in the project
    people = [{"name": unicodedata.normalize("NFD", "josé"), "role": "clinician"}]
    report = import_files(project, [write_jsonl(tmp_path / "annotators.jsonl", people)])
    assert any("annotator 'jose\u0301' was already in the project" in n for n in report.notes)
    assert len([a for a in svc.annotators() if a.name.startswith("jos")]) == 2
