"""EPPC annotations in the model-output shape: sentences and spans located, legacy spellings
mapped and reported."""

from __future__ import annotations

import pytest
from io_support import fingerprint, full_study, write_jsonl

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
    # SENTENCE already has the study's eppc unit; "Hi Dr. Lee," gets a new one
    assert report.added["units"] == 1 and report.added["answers"] == 2
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
    assert view.unit_set == "eppc set" and view.sentence.text == SENTENCE
    assert StudyService(project).read_unit(units[1]).unit_set == "eppc-batch1"


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


# --- one file per coder: coders meet on the sentence's unit -------------------------------


def _coding(annotator: str, sentence: str, subcode: str, span: str) -> dict:
    return {
        "case_id": "c1",
        "sentence": sentence,
        "annotator": annotator,
        "results": [{"Code": "InfoSeek", "Sub-code": subcode, "Span": span}],
    }


def _coder_file(folder, name: str, coder: str, subcode: str = "SchedulingAppt"):
    rows = [
        _coding(coder, "Should I come in?", subcode, "come in"),
        _coding(coder, "Hi Dr. Lee,", subcode, "Hi"),
    ]
    return write_jsonl(folder / name, rows)


def _eppc_agreement(project) -> dict:
    from portalreview.analysis import eppc
    from portalreview.store.frames import read_frames

    return eppc.analyse(read_frames(project), n_resamples=0)


@pytest.mark.parametrize("together", [False, True], ids=["one by one", "in one import"])
def test_coders_files_of_the_same_sentences_are_compared(project, study, tmp_path, together):
    """Each coder's file made its own set, one unit per sentence each: no sentence had two
    coders, so no agreement at all (kappa [], alpha over 0 units)."""
    first = _coder_file(tmp_path, "coder1.jsonl", "coder1")
    second = _coder_file(tmp_path, "coder2.jsonl", "coder2", subcode="Symptoms")
    if together:
        report = import_files(project, [first, second])
    else:
        import_files(project, [first])
        report = import_files(project, [second])
        assert "units" not in report.added and "unit_sets" not in report.added
    assert any("already had an eppc unit" in n and "'eppc-coder1'" in n for n in report.notes)
    result = _eppc_agreement(project)
    (pair,) = result["kappa"]
    assert (pair["annotator_a"], pair["annotator_b"], pair["n_units"]) == ("coder1", "coder2", 2)
    assert result["alpha"]["n_units"] == 2


def test_a_second_download_of_a_coders_file_is_refused_and_changes_nothing(
    project, study, tmp_path
):
    """A renamed second download ("coder1 (1).jsonl") imported the coder's answers again, in a
    second set, without a word. The same coding is 'already imported'; another coding of a
    sentence the coder coded is refused naming both; neither changes anything."""
    import_files(project, [_coder_file(tmp_path, "coder1.jsonl", "coder1")])
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, [_coder_file(tmp_path, "coder1 (1).jsonl", "coder1")])
    assert "coder1 (1).jsonl, line 1, field 'annotator'" in str(err.value)
    assert "already in unit set 'eppc-coder1', word for word: already imported" in str(err.value)
    assert fingerprint(project) == before
    rows = [
        _coding("coder2", "Should I come in?", "SchedulingAppt", "come in"),
        _coding("coder1", "Should I come in?", "Symptoms", "come in"),
    ]
    with pytest.raises(ImportFailed) as err:
        import_files(project, [write_jsonl(tmp_path / "fixed.jsonl", rows)])
    assert "fixed.jsonl, line 2, field 'annotator'" in str(err.value)
    assert (
        "'coder1' has already coded the sentence 'Should I come in?' (in unit set "
        "'eppc-coder1'), differently" in str(err.value)
    )
    assert fingerprint(project) == before


def test_a_sentence_coded_twice_in_one_import_is_refused(project, study, tmp_path):
    row = _coding("coder1", "Hi Dr. Lee,", "SchedulingAppt", "Hi")
    files = [write_jsonl(tmp_path / name, [row]) for name in ("a.jsonl", "b.jsonl")]
    with pytest.raises(ImportFailed) as err:
        import_files(project, files)
    assert "b.jsonl, line 1, field 'annotator'" in str(err.value)
    assert "a second time in this import (first: a.jsonl, line 1)" in str(err.value)


def test_a_sentence_with_several_eppc_units_is_coded_on_the_first_made(project, study, tmp_path):
    """Units made before (by hand, or by imports of one set per file) may hold a sentence
    several times: a coding goes onto the first made, and a coder who coded the sentence in
    any of them has coded it."""
    svc = study.service
    sentence = svc.read_unit(study.units["respond"]).cases[0].sentences[2]
    assert sentence.text == "Should I come in?"
    made = []
    for name in ("first", "second"):
        set_id = svc.create_unit_set(name, "eppc")
        made.append(svc.add_unit(set_id, study.case1, sentence_id=sentence.id))
    svc.assign(made[1], study.ben)
    svc.save_answer(made[1], {"labels": []}, annotator_id=study.ben)
    row = _coding("ava", "Should I come in?", "SchedulingAppt", "come in")
    report = import_files(project, [write_jsonl(tmp_path / "ava.jsonl", [row])])
    assert "units" not in report.added
    assert svc.get_answer(made[0], annotator_id=study.ava) is not None
    row = {**row, "annotator": "ben"}
    with pytest.raises(ImportFailed, match=r"'ben' has already coded .* unit set 'second'"):
        import_files(project, [write_jsonl(tmp_path / "ben.jsonl", [row])])


def test_coders_files_join_a_unit_the_pi_adjudicated(project, tmp_path):
    """The PI's gold answer is compared with every coder of its unit, and is not her own
    coding: her ordinary coding of the sentence is imported, not refused."""
    study = full_study(project)
    svc = study.service
    gold = svc.get_answer(study.units["eppc"], gold=True)
    rows = [
        {**_coding(name, SENTENCE, "Symptoms", "chest pain"), "results": []}
        for name in ("ben", "pat")
    ]
    import_files(project, [write_jsonl(tmp_path / "late.jsonl", rows)])
    for person in (study.ben, study.pi):
        assert svc.get_answer(study.units["eppc"], annotator_id=person).payload == {"labels": []}
    assert svc.get_answer(study.units["eppc"], gold=True).payload == gold.payload
    vs_gold = {row["annotator"]: row["n_units"] for row in _eppc_agreement(project)["vs_gold"]}
    assert vs_gold == {"ava": 1, "ben": 1, "pat": 1}
    again = write_jsonl(tmp_path / "pat.jsonl", [rows[1]])
    with pytest.raises(ImportFailed, match="by 'pat' is already in unit set 'eppc set'"):
        import_files(project, [again])
