"""Hand-made cases of the shapes issue 20 found missing from the import of an export:
edit-a-draft respond units, the empty presentation of an assignment that holds a gold answer,
and the ids in the numbers a suggestion keeps."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from io_support import as_earlier_export, fingerprint, write_jsonl
from sqlalchemy import select

from portalreview.store.exporters import export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.importers.ooxml import (
    excel_length,
    excel_prefix,
    ooxml_escape,
    ooxml_unescape,
)
from portalreview.store.models import (
    Annotator,
    Assignment,
    Case,
    Response,
    Suggestion,
    Unit,
    UnitSet,
)
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

SHA = "ab" * 32


def _rows(folder, table: str) -> list[dict]:
    return [json.loads(line) for line in (folder / f"{table}.jsonl").open(encoding="utf-8")]


def _copy(tmp_path, source) -> Project:
    fresh = Project.create(tmp_path / "copy.prproj", name="Copy")
    import_files(fresh, [source])
    return fresh


def test_an_edit_a_draft_unit_and_its_answer_come_back(project, tmp_path):
    study = build_small_study(project)
    svc = study.service
    edit_set = svc.create_unit_set("edit drafts", "respond")
    unit = svc.add_unit(edit_set, study.case1, response_id=study.draft2)
    svc.assign(unit, study.ava)
    payload = {"mode": "edit_draft", "base_response_id": study.draft2,
               "final_text": "I am sorry. Go to the ER now.", "notes": "shortened"}  # fmt: skip
    svc.save_answer(unit, payload, status="submitted", annotator_id=study.ava)
    export_project(project, "jsonl", tmp_path / "a")
    row = next(u for u in _rows(tmp_path / "a", "units") if u["set"] == "edit drafts")
    assert (row["kind"], row["case_id"], row["response_id"]) == ("respond", "c1", "d2")
    with _copy(tmp_path, tmp_path / "a") as copy:
        ava = StudyService(copy).as_viewer("ava")
        view = ava.read_unit(ava.queue("respond")[-1].unit_id)
        assert [r.label for r in view.responses] == ["Draft to edit"]
        assert view.responses[0].text.startswith("I am sorry you are in pain.")
        answer = ava.get_answer(view.unit_id)
        assert answer.payload["final_text"] == "I am sorry. Go to the ER now."
        assert answer.payload["base_response_id"] == view.responses[0].id


def test_a_respond_unit_still_takes_no_second_response(project, tmp_path):
    build_small_study(project)
    row = {"set": "respond set", "kind": "respond", "case_id": "c1", "response_id": "d1",
           "response_b_id": "d2"}  # fmt: skip
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as failed:
        import_files(project, [write_jsonl(tmp_path / "units.jsonl", [row])])
    assert str(failed.value) == (
        "units.jsonl, line 1, field 'response_b_id': a respond unit has no response_b_id "
        "(it takes response_id (optional))"
    )
    assert fingerprint(project) == before


@pytest.mark.parametrize("kind", ["rank", "urgency", "empathy"])
def test_a_gold_answer_of_a_unit_shown_in_an_order_comes_back(project, tmp_path, kind):
    study = build_small_study(project)
    svc = study.service
    unit = study.units[kind]
    gold = {"rank": {"entries": []}, "urgency": {"more_urgent_case_id": study.case1},
            "empathy": {"equal": True}}[kind]  # fmt: skip
    svc.save_answer(unit, gold, annotator_id=study.pi, gold=True)
    export_project(project, "jsonl", tmp_path / "a")
    held = [a for a in _rows(tmp_path / "a", "assignments") if a["annotator"] == "pat"]
    assert [a["presentation"] for a in held] == [{}]
    with _copy(tmp_path, tmp_path / "a") as copy:
        with copy.read() as s:
            shown = s.scalars(
                select(Assignment.presentation_json)
                .join(Annotator, Annotator.id == Assignment.annotator_id)
                .where(Annotator.name == "pat")
            ).all()
        assert shown == ["{}"]
        export_project(copy, "jsonl", tmp_path / "b")
        pat = StudyService(copy).as_viewer("pat")  # the PI opens the unit to adjudicate it
        with copy.read() as s:
            unit = s.scalar(
                select(Unit.id)
                .join(UnitSet, UnitSet.id == Unit.unit_set_id)
                .where(UnitSet.name == f"{kind} set")
            )
        view = pat.read_unit(unit)
        shape = {
            "rank": (1, 2, {"order"}),
            "urgency": (2, 0, {"swap"}),
            "empathy": (1, 2, {"swap"}),
        }
        assert (len(view.cases), len(view.responses), set(view.presentation)) == shape[kind]
    assert _rows(tmp_path / "b", "assignments") == _rows(tmp_path / "a", "assignments")
    assert _rows(tmp_path / "b", "answers") == _rows(tmp_path / "a", "answers")


def test_a_presentation_of_the_wrong_shape_is_still_refused(project, tmp_path):
    build_small_study(project)
    row = {"unit": {"set": "urgency set", "position": 0}, "annotator": "cleo", "position": 0,
           "presentation": {"order": ["c1"]}}  # fmt: skip
    before = fingerprint(project)
    with pytest.raises(ImportFailed, match=r"field 'presentation': expected an object with swap"):
        import_files(project, [write_jsonl(tmp_path / "assignments.jsonl", [row])])
    assert fingerprint(project) == before


def _urgency_suggestion(study) -> int:
    observed = {"a": study.case2, "b": study.case1, "p_yes_ab": 0.25, "p_yes_ba": 0.75,
                "levels": {str(study.case1): {"probs": {"1": 0.9}, "mass": 0.8}}}  # fmt: skip
    return study.service.add_suggestion(
        study.units["urgency"],
        {"more_urgent_case_id": study.case1, "ask_second": False},
        model_file="tiny.gguf",
        model_sha256=SHA,
        template_id="urgency_pair@v1",
        params={"temperature": 0.0, "observed": observed},
    )


def test_a_suggestions_observed_numbers_name_cases_and_responses(project, tmp_path):
    study = build_small_study(project)
    _urgency_suggestion(study)
    study.service.add_suggestion(
        study.units["rank"],
        {"entries": []},
        model_file="tiny.gguf",
        model_sha256=SHA,
        template_id="rank_judge@v1",
        params={"observed": {"order": [study.draft2, study.draft1]}},
    )
    export_project(project, "jsonl", tmp_path / "a")
    urgency, rank = (r["params"]["observed"] for r in _rows(tmp_path / "a", "suggestions"))
    assert (urgency["a"], urgency["b"], list(urgency["levels"])) == ("c2", "c1", ["c1"])
    assert rank["order"] == ["d2", "d1"]
    with _copy(tmp_path, tmp_path / "a") as copy, copy.read() as s:
        texts = s.scalars(select(Suggestion.params_json).order_by(Suggestion.id)).all()
        cases = dict(s.execute(select(Case.external_id, Case.id)).all())
        responses = dict(s.execute(select(Response.external_id, Response.id)).all())
    urgency, rank = (json.loads(text)["observed"] for text in texts)
    assert (urgency["a"], urgency["b"]) == (cases["c2"], cases["c1"])
    assert urgency["levels"] == {str(cases["c1"]): {"probs": {"1": 0.9}, "mass": 0.8}}
    assert rank["order"] == [responses["d2"], responses["d1"]]


def test_an_older_export_with_internal_ids_in_observed_numbers(project, tmp_path):
    """Exports written before references in parameters were translated hold the exporting
    project's ids there (numbers): the suggestion comes in without its observed numbers."""
    study = build_small_study(project)
    _urgency_suggestion(study)
    export_project(project, "jsonl", tmp_path / "a")
    as_earlier_export(tmp_path / "a")
    rows = _rows(tmp_path / "a", "suggestions")
    rows[0]["params"]["observed"].update(a=study.case2, b=study.case1)
    write_jsonl(tmp_path / "a" / "suggestions.jsonl", rows)
    fresh = Project.create(tmp_path / "copy.prproj")
    report = import_files(fresh, [tmp_path / "a"])
    assert any(
        "suggestions.jsonl: the parameters of 1 suggestion(s) name cases or responses by the "
        "exporting project's internal ids"
        in note
        and "(first: suggestions.jsonl, line 1)" in note
        for note in report.notes
    )
    with fresh.read() as s:
        assert json.loads(s.scalar(select(Suggestion.params_json))) == {"temperature": 0.0}
    fresh.close()


def test_an_unknown_reference_in_observed_numbers_is_refused(project, tmp_path):
    study = build_small_study(project)
    _urgency_suggestion(study)
    export_project(project, "jsonl", tmp_path / "a")
    as_earlier_export(tmp_path / "a")
    rows = _rows(tmp_path / "a", "suggestions")
    rows[0]["params"]["observed"]["b"] = "c9"
    write_jsonl(tmp_path / "a" / "suggestions.jsonl", rows)
    fresh = Project.create(tmp_path / "copy.prproj")
    before = fingerprint(fresh)
    with pytest.raises(ImportFailed, match=r"line 1, field 'params.observed.b': there is no case"):
        import_files(fresh, [tmp_path / "a"])
    assert fingerprint(fresh) == before
    fresh.close()


@given(st.text(alphabet=st.sampled_from(["_", "x", "0", "D", "5", "F", "\r", "\n", "a"])))
def test_workbook_text_escapes_read_back(text):
    assert ooxml_unescape(ooxml_escape(text)) == text
    assert "\r" not in ooxml_escape(text)


def test_workbook_text_as_excel_writes_it():
    assert ooxml_escape("a\r\nb") == "a_x000D_\nb"
    assert ooxml_escape("see _x0041_") == "see _x005F_x0041_"
    assert ooxml_unescape("a_x000D_\nb _x005F_x0041_ _x00e9_") == "a\r\nb _x0041_ é"


def test_excel_counts_a_character_beyond_the_basic_plane_twice():
    assert excel_length("ok \U0001f64f") == 5
    assert excel_length("é\u4e2d") == 2


@given(
    st.text(alphabet=st.sampled_from(["a", "é", "\U0001f622", "\U00020000"])), st.integers(0, 12)
)
def test_a_cut_never_splits_a_character(text, units):
    head = excel_prefix(text, units)
    assert text.startswith(head) and excel_length(head) <= units
    rest = text[len(head) :]
    assert not rest or excel_length(head + rest[0]) > units  # the longest that fits


def test_a_carriage_return_and_a_17_digit_time_survive_a_workbook(project, tmp_path):
    study = build_small_study(project)
    note = "line 1\r\nline 2 _x000D_ stays"
    seconds = 0.1 + 0.2  # 0.30000000000000004: openpyxl writes numbers with 16 digits
    study.service.save_answer(
        study.units["empathy"], {}, comment=note, active_seconds=seconds, annotator_id=study.ava
    )
    export_project(project, "xlsx", tmp_path / "study.xlsx")
    with _copy(tmp_path, tmp_path / "study.xlsx") as copy:
        export_project(copy, "jsonl", tmp_path / "b")
    (answer,) = _rows(tmp_path / "b", "answers")
    assert (answer["comment"], answer["active_seconds"]) == (note, seconds)
