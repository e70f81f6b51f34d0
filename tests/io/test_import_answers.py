"""Answers of every kind, units and assignments in the portable JSON Lines formats."""

from __future__ import annotations

import filecmp
import json
import re

import pytest
from io_support import fingerprint, full_study, refused, write_jsonl

from portalreview.store.exporters import export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.importers.portable import ANSWER_REFS, answer_to_internal, to_portable
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends


def _unit(kind: str) -> dict:
    return {"set": f"{kind} set", "position": 0}


def _sentence(owner: str, position: int, of: str = "response") -> dict:
    return {"owner": owner, "of": of, "position": position}


PORTABLE = {
    "respond": {"mode": "edit_draft", "base_response_id": "d1", "final_text": "Go now.",
                "notes": ""},
    "rank": {"entries": [{"response_id": "d2", "rank": 1, "correct": True, "criteria": []},
                         {"response_id": "d1", "rank": 2, "correct": False, "criteria": ["C1"]}]},
    "match": {"decisions": [{"sentence_id": _sentence("ref1", 1), "spans": [[33, 69]]}],
              "themes": [{"sentence_id": _sentence("d1", 0), "theme": "assessment"}]},
    "urgency": {"more_urgent_case_id": "c1", "ask_second": False, "levels": {"c2": 5}},
    "eppc": {"labels": [{"code": "InfoSeek", "subcode": "SchedulingAppt", "spans": [[0, 6]]}]},
    "empathy": {"equal": True},
    "facts": {"facts": [{"side": "edited", "text": "Go to the ER now.", "entailed": None,
                         "error_category": None}]},
}  # fmt: skip


@pytest.fixture
def study(project):
    return build_small_study(project)


@pytest.mark.parametrize("kind", sorted(PORTABLE))
def test_a_portable_answer_of_every_kind(project, study, tmp_path, kind):
    row = {"kind": kind, "unit": _unit(kind), "annotator": "cleo", "status": "draft",
           "active_seconds": 4.5, "answer": PORTABLE[kind]}  # fmt: skip
    report = import_files(project, [write_jsonl(tmp_path / "answers.jsonl", [row])])
    assert report.added["answers"] == 1
    assert report.added["annotators"] == 1 and report.added["assignments"] == 1
    svc = StudyService(project)
    cleo = next(a.id for a in svc.annotators() if a.name == "cleo")
    saved = svc.get_answer(study.units[kind], cleo)
    assert saved.active_seconds == 4.5
    out = tmp_path / "out"
    export_project(project, "jsonl", out)
    assert '"annotator": "cleo"' in (out / "answers.jsonl").read_text()
    names = _names(project)
    assert to_portable(saved.payload, ANSWER_REFS[kind], names) == _sorted_like(
        PORTABLE[kind], kind
    )


def _names(project):
    from portalreview.store.exporters import Names

    with project.read() as session:
        return Names(session)


def _sorted_like(payload: dict, kind: str) -> dict:
    """The payload as the codec reads it back (rank entries by response, facts by side...)."""
    if kind == "rank":
        return {"entries": sorted(payload["entries"], key=lambda e: e["response_id"])}
    return payload


def test_answers_file_of_a_study_imports_into_a_copy_of_it(project, tmp_path):
    full_study(project)
    first = tmp_path / "first"
    export_project(project, "jsonl", first)
    copy = Project.create(tmp_path / "copy.prproj", name="Test study")
    build_small_study(copy)
    import_files(copy, [first / "suggestions.jsonl", first / "answers.jsonl"])
    second = tmp_path / "second"
    export_project(copy, "jsonl", second)
    assert filecmp.cmp(first / "answers.jsonl", second / "answers.jsonl", shallow=False)
    copy.close()


def test_a_unit_that_does_not_exist_is_an_error(project, study, tmp_path):
    before = fingerprint(project)
    row = {"kind": "empathy", "unit": {"set": "empathy set", "position": 3},
           "annotator": "ava", "answer": {"equal": True}}  # fmt: skip
    with pytest.raises(ImportFailed) as err:
        import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row])])
    assert "a.jsonl, line 1, field 'unit': there is no unit 3 in unit set 'empathy set'" in str(
        err.value
    )
    assert fingerprint(project) == before


def test_unknown_references_name_their_field(project, study, tmp_path):
    answer = {"entries": [{"response_id": "d7", "rank": 1}]}
    row = {"kind": "rank", "unit": _unit("rank"), "annotator": "ava", "answer": answer}
    with pytest.raises(ImportFailed, match=r"field 'answer.entries\[0\].response_id': there is no"):
        import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row])])
    answer = {"decisions": [{"sentence_id": _sentence("ref1", 9), "spans": []}]}
    row = {"kind": "match", "unit": _unit("match"), "annotator": "ava", "answer": answer}
    with pytest.raises(ImportFailed, match="'ref1' has no sentence 9"):
        import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row])])


def test_a_refused_answer_names_cases_and_responses_by_the_files_ids(project, study, tmp_path):
    """The kinds' checks see the project's own ids: the refusal said "response 19 is listed
    twice", which nothing in the file is called."""
    twice = {"entries": [{"response_id": "d1", "rank": 1}, {"response_id": "d1", "rank": 2}]}
    rows = [
        {"kind": "rank", "unit": _unit("rank"), "annotator": "ava", "answer": twice},
        {"kind": "empathy", "unit": _unit("empathy"), "annotator": "ava",
         "answer": {"more_empathetic_response_id": "d1"}},
    ]  # fmt: skip
    said = []
    for row in rows:
        with pytest.raises(ImportFailed) as err:
            import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row])])
        said.append(str(err.value))
    assert "rank: entries[1]: response 'd1' is listed twice" in said[0]
    assert re.search(r"empathy: response 'd1' is not one of the pair \('\w+', '\w+'\)", said[1])


def test_a_submitted_rank_answer_with_an_unexplained_incorrect_is_refused(project, study, tmp_path):
    """Seed 001 Sec. 5: "incorrect" means meeting at least one of C1-C3. A submitted answer
    marking a response incorrect with no reason is refused naming it as the file does, like
    every other incomplete submitted answer; as a draft it is kept."""
    entries = [{"response_id": "d2", "rank": 1, "correct": True, "criteria": []},
               {"response_id": "d1", "rank": 2, "correct": False, "criteria": []}]  # fmt: skip
    row = {"kind": "rank", "unit": _unit("rank"), "annotator": "ava", "status": "submitted",
           "answer": {"entries": entries}}  # fmt: skip
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row])])
    assert "line 1" in str(err.value)
    assert "response 'd1' marked incorrect with no reason" in str(err.value)
    assert fingerprint(project) == before
    report = import_files(
        project, [write_jsonl(tmp_path / "a.jsonl", [{**row, "status": "draft"}])]
    )
    assert report.added["answers"] == 1


def test_a_second_answer_by_the_same_person_is_refused(project, study, tmp_path):
    row = {"kind": "empathy", "unit": _unit("empathy"), "annotator": "ava",
           "answer": {"equal": True}}  # fmt: skip
    with pytest.raises(ImportFailed, match="line 2, field 'annotator': already has an answer"):
        import_files(project, [write_jsonl(tmp_path / "a.jsonl", [row, row])])


def test_units_and_assignments(project, study, tmp_path):
    units = [
        {"set": "triage", "kind": "urgency", "position": 0, "case_id": "c2", "case_b_id": "c1"},
        {"set": "triage", "position": 1, "case_id": "c1", "case_b_id": "c2", "batch": "b2"},
        {"set": "drafts", "kind": "rank", "case_id": "c1", "members": ["d2", "d1"]},
        {"set": "coding", "kind": "eppc", "case_id": "c1",
         "sentence_id": {"owner": "c1", "position": 2}},
    ]  # fmt: skip
    assignments = [
        {"unit": {"set": "triage", "position": 0}, "annotator": "ava", "position": 5,
         "presentation": {"swap": True}},
        {"unit": {"set": "drafts", "position": 0}, "annotator": "ava", "position": 0,
         "presentation": {"order": ["d1", "d2"]}},
        {"unit": {"set": "coding", "position": 0}, "annotator": "zed", "position": 0},
    ]  # fmt: skip
    report = import_files(
        project,
        [
            write_jsonl(tmp_path / "assign.jsonl", assignments),
            write_jsonl(tmp_path / "u.jsonl", units),
        ],
    )
    assert report.added["unit_sets"] == 3 and report.added["units"] == 4
    assert report.added["rank_members"] == 2 and report.added["assignments"] == 3
    svc = StudyService(project).as_viewer("ava")
    triage = svc.queue("urgency")
    new = [i for i in triage if i.position == 5]
    view = svc.read_unit(new[0].unit_id)
    assert view.presentation == {"swap": True}
    assert [c.external_id for c in view.cases] == ["c1", "c2"]  # swapped
    rank = [i for i in svc.queue("rank") if svc.read_unit(i.unit_id).unit_set == "drafts"]
    labels = [r.id for r in svc.read_unit(rank[0].unit_id).responses]
    assert labels == [study.draft1, study.draft2]
    zed = StudyService(project).as_viewer("zed")
    assert zed.read_unit(zed.queue("eppc")[0].unit_id).sentence.text == "Should I come in?"


def test_unit_positions_follow_the_file(project, study, tmp_path):
    units = [{"set": "t", "kind": "respond", "position": 1, "case_id": "c1"}]
    with pytest.raises(ImportFailed, match="field 'position': expected 0"):
        import_files(project, [write_jsonl(tmp_path / "u.jsonl", units)])


def test_a_unit_must_have_the_shape_of_its_kind(project, study, tmp_path):
    units = [{"set": "t", "kind": "match", "case_id": "c1", "response_id": "ref1"}]
    with pytest.raises(ImportFailed, match="'response_b_id': is missing: a match unit needs"):
        import_files(project, [write_jsonl(tmp_path / "u.jsonl", units)])
    units = [{"set": "t", "kind": "respond", "case_id": "c1", "case_b_id": "c2"}]
    with pytest.raises(ImportFailed, match="a respond unit has no case_b_id"):
        import_files(project, [write_jsonl(tmp_path / "u.jsonl", units)])


def test_a_presentation_must_fit_the_unit(project, study, tmp_path):
    rows = [{"unit": _unit("rank"), "annotator": "cleo", "position": 0,
             "presentation": {"order": ["d1"]}}]  # fmt: skip
    with pytest.raises(ImportFailed, match=r"presentation\.order': expected every member"):
        import_files(project, [write_jsonl(tmp_path / "as.jsonl", rows)])


def test_the_translation_table_covers_every_kind():
    from portalreview.store.kinds import CODECS

    assert set(ANSWER_REFS) == set(CODECS)

    class Ids:
        def case(self, ref, trail):
            return {"c1": 1, "c2": 2}[ref]

        def response(self, ref, trail):
            return {"d1": 3}[ref]

        def sentence(self, ref, trail):
            return 10 + ref["position"]

    internal = answer_to_internal("urgency", {"more_urgent_case_id": "c2",
                                              "levels": {"c1": 3}}, Ids())  # fmt: skip
    assert internal == {"more_urgent_case_id": 2, "levels": {"1": 3}}
    match = {"decisions": [{"sentence_id": {"owner": "x", "position": 2}, "spans": []}]}
    assert answer_to_internal("match", match, Ids())["decisions"][0]["sentence_id"] == 12


_SURROGATE = "contains an invalid character (an unpaired UTF-16 surrogate)"
_RESPOND = {"mode": "theme_guided", "parts": {"empathy": "So sorry."}, "notes": ""}


def _respond(**changes) -> dict:
    return {**_RESPOND, **changes}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_respond(parts={"empathy": "x\ud800"}), f"field 'answer.parts.empathy': {_SURROGATE}"),
        (_respond(parts={"empathy": "a\x00b"}), "field 'answer.parts.empathy': contains a NUL"),
        (
            _respond(notes="n" * 200_000),
            "field 'answer.notes': is 200,000 characters long; at most 100,000 are allowed",
        ),
        (_respond(parts={"empathy\ud800": "x"}), f"field 'answer.parts': a key {_SURROGATE}"),
    ],
    ids=["surrogate", "nul", "too-long", "surrogate-key"],
)
def test_a_text_inside_an_answer_is_checked_as_any_text(project, study, tmp_path, answer, expected):
    """A lone surrogate inside an answer's payload crashed in the database's flush (no file,
    line or field named); a NUL or 200,000 characters there were imported, though any other
    text with them is refused."""
    row = {"kind": "respond", "unit": _unit("respond"), "annotator": "cleo", "answer": answer}
    message = refused(project, [write_jsonl(tmp_path / "answers.jsonl", [row])])
    assert f"answers.jsonl, line 1, {expected}" in message


_SUGGESTION = {
    "unit": _unit("respond"),
    "kind": "respond",
    "model_file": "tiny.gguf",
    "model_sha256": "ab" * 32,
    "template_id": "respond-v1",
    "payload": {"parts": {"empathy": "Empathy"}},
    "params": {"temperature": 0.2},
}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"payload": {"parts": {"empathy": "x\ud800"}}}, f"'payload.parts.empathy': {_SURROGATE}"),
        ({"params": {"stop": ["ok", "\ud800"]}}, f"'params.stop[1]': {_SURROGATE}"),
        ({"payload": {"parts": {"empathy": "\x00"}}}, "'payload.parts.empathy': contains a NUL"),
    ],
    ids=["payload", "params", "nul"],
)
def test_a_text_inside_a_suggestion_is_checked_as_any_text(
    project, study, tmp_path, changes, expected
):
    """A lone surrogate in a suggestion's payload or parameters was imported, and every later
    export as JSON Lines or CSV then failed with a UnicodeEncodeError."""
    row = {**_SUGGESTION, **changes}
    message = refused(project, [write_jsonl(tmp_path / "suggestions.jsonl", [row])])
    assert f"suggestions.jsonl, line 1, field {expected}" in message


def test_a_suggestion_with_good_texts_is_imported(project, study, tmp_path):
    """The rows the refusals above start from are good ones."""
    import_files(project, [write_jsonl(tmp_path / "suggestions.jsonl", [_SUGGESTION])])
    row = {"kind": "respond", "unit": _unit("respond"), "annotator": "cleo", "answer": _RESPOND}
    import_files(project, [write_jsonl(tmp_path / "answers.jsonl", [row])])


def test_a_number_too_large_inside_a_nested_value_is_named(project, study, tmp_path):
    """1e400 is valid JSON that reads as infinity: in a suggestion's params it was refused by
    the database as "a value breaks the rule params_is_json", naming no field."""
    row = json.dumps(_SUGGESTION).replace('"temperature": 0.2', '"temperature": 1e400')
    path = tmp_path / "suggestions.jsonl"
    path.write_text(row + "\n", encoding="utf-8")
    message = refused(project, [path])
    assert "suggestions.jsonl, line 1, field 'params.temperature': is a number too large" in message
    answer = {"more_urgent_case_id": "c1", "levels": {"c2": 5}}
    row = json.dumps({"kind": "urgency", "unit": _unit("urgency"), "annotator": "cleo",
                      "answer": answer}).replace('"c2": 5', '"c2": -1e400')  # fmt: skip
    path = tmp_path / "answers.jsonl"
    path.write_text(row + "\n", encoding="utf-8")
    assert "line 1, field 'answer.levels.c2': is a number too large" in refused(project, [path])
