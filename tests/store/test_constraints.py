"""Every integrity rule of a study, attempted with raw SQL and refused by the database: SQLite
for a project file, PostgreSQL for a server study (the same rules, ``schema_sql``).

The service layer checks payloads first; these tests go around it, as a buggy importer or a
hand-edited file would, to prove the database itself makes impossible states impossible.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from portalreview.store.service import readable_integrity
from tests.conftest import SmallStudy

pytestmark = pytest.mark.both_backends


def _refused(project, sql: str, match: str, **params) -> None:
    # Case-blind: SQLite says "UNIQUE constraint failed", PostgreSQL "violates unique constraint".
    with pytest.raises(IntegrityError, match=f"(?i){match}"), project.write() as s:
        s.execute(text(sql), params)


def _answer_ids(study: SmallStudy) -> dict[str, int]:
    """A valid answer by ava for every kind, through the service; their ids by kind."""
    svc = study.service
    ava = svc.as_viewer("ava")
    u = study.units
    match_view = svc.read_unit(u["match"])
    ref_sentence = match_view.responses[0].sentences[0].id
    payloads = {
        "respond": {"parts": {"empathy": "I am sorry you are in pain."}},
        "rank": {"entries": [{"response_id": study.draft1, "rank": 1, "correct": True}]},
        "match": {"decisions": [{"sentence_id": ref_sentence, "spans": [[0, 10]]}]},
        "urgency": {"more_urgent_case_id": study.case1},
        "eppc": {"labels": [{"code": "InfoGive", "subcode": "Symptoms", "spans": [[0, 5]]}]},
        "empathy": {"equal": True},
        "facts": {"facts": [{"side": "original", "text": "Go to the ER.", "entailed": True}]},
    }
    return {k: ava.save_answer(u[k], p).answer_id for k, p in payloads.items()}


@pytest.fixture
def ids(study):
    return _answer_ids(study)


def test_valid_answers_of_every_kind_are_accepted(study, ids):
    assert set(ids) == {"respond", "rank", "match", "urgency", "eppc", "empathy", "facts"}
    assert study.service.project.integrity_check() == "ok"


def test_two_answers_by_one_annotator_for_one_unit(study, ids):
    _refused(
        study.service.project,
        "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
        " flagged, flag_note, comment, created_at, updated_at)"
        " VALUES (:u, 'rank', :a, false, 'draft', 0, false, '', '', '', '')",
        "UNIQUE",
        u=study.units["rank"],
        a=study.ava,
    )


def test_answer_needs_an_assignment(study):
    _refused(
        study.service.project,
        "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
        " flagged, flag_note, comment, created_at, updated_at)"
        " VALUES (:u, 'rank', :a, false, 'draft', 0, false, '', '', '', '')",
        "FOREIGN KEY",
        u=study.units["rank"],
        a=study.pi,
    )


def test_answer_kind_must_be_the_units_kind(study):
    _refused(
        study.service.project,
        "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
        " flagged, flag_note, comment, created_at, updated_at)"
        " VALUES (:u, 'match', :a, false, 'draft', 0, false, '', '', '', '')",
        "FOREIGN KEY",
        u=study.units["rank"],
        a=study.ben,
    )


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [("status", "'done'", "status_known"), ("active_seconds", "-1", "time_not_negative")],
)
def test_answer_row_checks(study, ids, column, value, match):
    _refused(
        study.service.project,
        f"UPDATE answers SET {column} = {value} WHERE id = :a",
        match,
        a=ids["rank"],
    )


def test_one_gold_answer_per_unit(study, ids):
    project = study.service.project
    with project.write() as s:
        s.execute(text("UPDATE answers SET is_gold = true WHERE id = :a"), {"a": ids["rank"]})
        s.execute(
            text("INSERT INTO assignments VALUES (:u, :p, 0, '{}', '', true)"),
            {"u": study.units["rank"], "p": study.pi},
        )
    _refused(
        project,
        "INSERT INTO answers (unit_id, kind, annotator_id, is_gold, status, active_seconds,"
        " flagged, flag_note, comment, created_at, updated_at)"
        " VALUES (:u, 'rank', :p, true, 'draft', 0, false, '', '', '', '')",
        "UNIQUE",
        u=study.units["rank"],
        p=study.pi,
    )


def test_sentence_must_be_the_text_between_its_offsets(study):
    project = study.service.project
    _refused(
        project,
        'INSERT INTO sentences (case_id, position, start, "end", text)'
        " VALUES (:c, 99, 0, 5, 'Hello')",
        "exact text between its offsets",
        c=study.case2,
    )
    _refused(
        project,
        'INSERT INTO sentences (case_id, position, start, "end", text)'
        " VALUES (:c, 99, 50, 60, 'xxxxxxxxxx')",
        "exact text between its offsets",
        c=study.case2,
    )
    _refused(
        project,
        'INSERT INTO sentences (case_id, position, start, "end", text)'
        " VALUES (:c, 99, 0, 3, 'W')",
        "exact text|text_matches_span_length",
        c=study.case2,
    )


def test_texts_with_sentences_cannot_change(study):
    _refused(
        study.service.project,
        "UPDATE cases SET message = 'changed' WHERE id = :c",
        "has sentences",
        c=study.case1,
    )
    _refused(study.service.project, "UPDATE sentences SET start = 1", "fixed once made")


def test_unit_shape_must_fit_its_kind(study):
    project = study.service.project
    with project.read() as s:
        urgency_set = s.execute(text("SELECT id FROM unit_sets WHERE kind='urgency'")).scalar()
    _refused(
        project,
        "INSERT INTO units (unit_set_id, kind, position, case_id, batch)"
        " VALUES (:s, 'urgency', 5, :c, '')",
        "references_fit_kind",
        s=urgency_set,
        c=study.case1,
    )
    _refused(
        project,
        "INSERT INTO units (unit_set_id, kind, position, case_id, case_b_id, batch)"
        " VALUES (:s, 'urgency', 5, :c, :c, '')",
        "two_different_cases",
        s=urgency_set,
        c=study.case1,
    )
    _refused(
        project,
        "INSERT INTO units (unit_set_id, kind, position, case_id, case_b_id, batch)"
        " VALUES (:s, 'rank', 5, :c, :d, '')",
        "FOREIGN KEY|references_fit_kind",
        s=urgency_set,
        c=study.case1,
        d=study.case2,
    )


def test_unit_responses_must_answer_its_case(study):
    project = study.service.project
    with project.read() as s:
        match_set = s.execute(text("SELECT id FROM unit_sets WHERE kind='match'")).scalar()
    _refused(
        project,
        "INSERT INTO units (unit_set_id, kind, position, case_id, response_id, response_b_id,"
        " batch) VALUES (:s, 'match', 5, :c, :r, :d, '')",
        "answer the unit's case",
        s=match_set,
        c=study.case2,
        r=study.reference,
        d=study.draft1,
    )


def test_rank_member_must_answer_the_units_case(study):
    other = study.service.add_response(study.case2, "x", "You can find it online.")
    _refused(
        study.service.project,
        "INSERT INTO rank_members VALUES (:u, :r)",
        "its own case",
        u=study.units["rank"],
        r=other,
    )


def test_rank_only_for_a_member_and_within_the_set(study, ids):
    project = study.service.project
    _refused(
        project,
        "INSERT INTO rank_entries (answer_id, kind, response_id, rank) VALUES (:a,'rank',:r,1)",
        "of the unit's rank set",
        a=ids["rank"],
        r=study.reference,
    )
    _refused(
        project,
        "INSERT INTO rank_entries (answer_id, kind, response_id, rank) VALUES (:a,'rank',:r,3)",
        "cannot exceed",
        a=ids["rank"],
        r=study.draft2,
    )
    _refused(
        project,
        "INSERT INTO rank_entries (answer_id, kind, response_id, rank) VALUES (:a,'rank',:r,0)",
        "rank_positive",
        a=ids["rank"],
        r=study.draft2,
    )


def test_reason_only_for_an_incorrect_response(study, ids):
    _refused(
        study.service.project,
        "INSERT INTO rank_criteria VALUES (:a, :r, 'C1')",
        "marked incorrect",
        a=ids["rank"],
        r=study.draft1,
    )


def test_detail_row_must_match_the_answers_kind(study, ids):
    _refused(
        study.service.project,
        "INSERT INTO eppc_labels (answer_id, kind, code_id, subcode_id)"
        " VALUES (:a, 'eppc', 'InfoSeek', 'Symptoms')",
        "FOREIGN KEY",
        a=ids["rank"],
    )
    _refused(
        study.service.project,
        "INSERT INTO eppc_labels (answer_id, kind, code_id, subcode_id)"
        " VALUES (:a, 'rank', 'InfoSeek', 'Symptoms')",
        "answer_of_this_kind",
        a=ids["rank"],
    )


def test_subcode_must_belong_to_its_code(study, ids):
    project = study.service.project
    with project.write() as s:
        s.execute(text("DELETE FROM eppc_labels WHERE answer_id = :a"), {"a": ids["eppc"]})
    _refused(
        project,
        "INSERT INTO eppc_labels (answer_id, kind, code_id, subcode_id)"
        " VALUES (:a, 'eppc', 'InfoGiveSDOH', 'Symptoms')",
        "FOREIGN KEY",
        a=ids["eppc"],
    )
    _refused(
        project,
        "INSERT INTO eppc_labels (answer_id, kind, code_id, subcode_id)"
        " VALUES (:a, 'eppc', 'NoSuchCode', NULL)",
        "FOREIGN KEY",
        a=ids["eppc"],
    )


def test_evidence_span_inside_its_sentence(study, ids):
    _refused(
        study.service.project,
        "INSERT INTO eppc_spans VALUES (:a, 'InfoGive', 10, 5000)",
        "inside the sentence",
        a=ids["eppc"],
    )
    _refused(
        study.service.project,
        "INSERT INTO eppc_spans VALUES (:a, 'InfoGive', 7, 7)",
        "span_ordered",
        a=ids["eppc"],
    )


def test_match_rules(study, ids):
    project = study.service.project
    draft_sentence = study.service.read_unit(study.units["match"]).responses[1].sentences[0].id
    reference_sentence = study.service.read_unit(study.units["match"]).responses[0].sentences[0]
    _refused(
        project,
        "INSERT INTO match_decisions VALUES (:a, 'match', :s)",
        "reference response",
        a=ids["match"],
        s=draft_sentence,
    )
    _refused(
        project,
        "INSERT INTO match_spans VALUES (:a, :s, 20, 4000)",
        "inside the draft",
        a=ids["match"],
        s=reference_sentence.id,
    )
    case_sentence = study.service.read_unit(study.units["match"]).cases[0].sentences[0].id
    _refused(
        project,
        "INSERT INTO sentence_themes VALUES (:a, 'match', :s, 'empathy')",
        "one of the unit's two responses",
        a=ids["match"],
        s=case_sentence,
    )
    _refused(
        project,
        "INSERT INTO sentence_themes VALUES (:a, 'match', :s, 'not_a_theme')",
        "FOREIGN KEY",
        a=ids["match"],
        s=draft_sentence,
    )


def test_urgency_rules(study, ids):
    project = study.service.project
    third = study.service.add_case("c3", "Another message.")
    _refused(
        project,
        "UPDATE urgency_answers SET more_urgent_case_id = :c WHERE answer_id = :a",
        "one of the pair",
        a=ids["urgency"],
        c=third,
    )
    _refused(
        project,
        "INSERT INTO urgency_case_levels VALUES (:a, 'urgency', :c, 7)",
        "FOREIGN KEY",
        a=ids["urgency"],
        c=study.case1,
    )
    _refused(
        project,
        "INSERT INTO urgency_case_levels VALUES (:a, 'urgency', :c, 2)",
        "case of the pair",
        a=ids["urgency"],
        c=third,
    )


def test_case_level_and_filter_rules(study):
    _refused(study.service.project, "UPDATE cases SET urgency_level = 7", "FOREIGN KEY")
    _refused(
        study.service.project,
        "UPDATE cases SET urgency_level = NULL, urgency_filter = 'MAYBE'",
        "filter_known",
    )
    _refused(study.service.project, "UPDATE cases SET chart_json = '{oops'", "chart_is_json")


def test_empathy_choice_must_be_of_the_pair(study, ids):
    _refused(
        study.service.project,
        "UPDATE empathy_answers SET more_empathetic_response_id = :r WHERE answer_id = :a",
        "one of the pair",
        a=ids["empathy"],
        r=study.draft1,
    )


def test_error_category_only_on_a_fact_not_entailed(study, ids):
    _refused(
        study.service.project,
        "UPDATE facts SET error_category_id = 'false_assurance' WHERE answer_id = :a",
        "category_only_when_not_entailed",
        a=ids["facts"],
    )


def test_respond_rules(study, ids):
    project = study.service.project
    _refused(
        project,
        "INSERT INTO respond_parts VALUES (:a, 'planning', '   ')",
        "box_not_blank",
        a=ids["respond"],
    )
    _refused(
        project,
        "UPDATE respond_answers SET mode = 'edit_draft' WHERE answer_id = :a",
        "mode_fits_fields",
        a=ids["respond"],
    )
    other = study.service.add_response(study.case2, "x2", "Online.")
    _refused(
        project,
        "UPDATE respond_answers SET mode = 'edit_draft', base_response_id = :r,"
        " final_text = 'x' WHERE answer_id = :a",
        "response to the unit's case",
        a=ids["respond"],
        r=other,
    )


def test_audit_log_cannot_be_edited_or_deleted(study, ids, backend):
    _refused(study.service.project, "UPDATE audit_log SET action = 'x'", "cannot be changed")
    _refused(study.service.project, "DELETE FROM audit_log", "cannot be changed")
    if backend == "server":  # TRUNCATE skips PostgreSQL's row triggers: refused on its own
        _refused(study.service.project, "TRUNCATE audit_log", "cannot be changed")


def test_suggestion_use_needs_a_suggestion(study, ids):
    _refused(
        study.service.project,
        "UPDATE answers SET suggestion_use = 'accepted' WHERE id = :a",
        "suggestion_use_known",
        a=ids["rank"],
    )


def test_refused_statements_leave_the_study_unchanged(study, ids):
    project = study.service.project
    with project.read() as s:
        before = s.execute(text("SELECT count(*) FROM eppc_spans")).scalar()
    _refused(
        project, "INSERT INTO eppc_spans VALUES (:a, 'InfoGive', 0, 9999)", "inside", a=ids["eppc"]
    )
    with project.read() as s:
        assert s.execute(text("SELECT count(*) FROM eppc_spans")).scalar() == before
    assert project.integrity_check() == "ok"


def test_a_refusal_reads_the_same_and_shows_no_row(study):
    """The person sees the rule, in the same words on both databases; PostgreSQL's DETAIL,
    which repeats the refused row (a patient's message, say), is never shown."""
    project = study.service.project
    with pytest.raises(IntegrityError) as caught, project.write() as s:
        s.execute(
            text("INSERT INTO cases (external_id, source_dataset, message, chart_json,"
                 " chart_text, created_at) SELECT external_id, source_dataset,"
                 " 'SECRET ' || message, chart_json, chart_text, created_at"
                 " FROM cases WHERE id = :c"),
            {"c": study.case1},
        )  # fmt: skip
    said = readable_integrity(caught.value)
    assert said.startswith("it already exists (") and "SECRET" not in said
    with pytest.raises(IntegrityError) as caught, project.write() as s:
        s.execute(text("UPDATE cases SET chart_json = 'SECRET {'"))
    said = readable_integrity(caught.value)
    assert said == "a value breaks the rule chart_is_json"
    with pytest.raises(IntegrityError) as caught, project.write() as s:  # a rule with words
        s.execute(
            text("INSERT INTO units (unit_set_id, kind, position, case_id, case_b_id, batch)"
                 " SELECT unit_set_id, kind, position + 1000, case_id, case_id, batch"
                 " FROM units WHERE kind = 'urgency'")
        )  # fmt: skip
    said = readable_integrity(caught.value)
    assert said == (
        "a pair needs two different cases (case_b_id is the unit's case) "
        "(rule two_different_cases)"
    )
