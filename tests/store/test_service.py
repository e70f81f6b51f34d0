"""The service layer: answers of every kind round-trip, blinding, submission, the audit log."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from sqlalchemy import select, text

from portalreview.store import service as service_module
from portalreview.store.kinds import PayloadError
from portalreview.store.models import AuditEntry
from portalreview.store.service import (
    AccessError,
    StoreError,
    StudyService,
    audit_hash,
    not_saved_message,
)

pytestmark = pytest.mark.both_backends


def _complete_payloads(study) -> dict[str, dict]:
    svc = study.service
    match_view = svc.read_unit(study.units["match"])
    reference, draft = match_view.responses
    eppc_view = svc.read_unit(study.units["eppc"])
    sentence = eppc_view.sentence.text
    start = sentence.index("crushing chest pain")
    return {
        "respond": {
            "mode": "theme_guided",
            "parts": {"empathy": "I am sorry you are hurting.", "planning": "Go to the ED now."},
            "notes": "Assumed no nitroglycerin at home.",
        },
        "rank": {
            "entries": [
                {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
                {"response_id": study.draft2, "rank": 1, "correct": False, "criteria": ["C3"]},
            ]
        },
        "match": {
            "decisions": [
                {
                    "sentence_id": s.id,
                    "spans": [[draft.text.index("Please"), draft.sentences[1].end]],
                }
                if "emergency room" in s.text
                else {"sentence_id": s.id, "spans": []}
                for s in reference.sentences
            ],
            "themes": [
                {"sentence_id": s.id, "theme": "planning"}
                for s in (*reference.sentences, *draft.sentences)
            ],
        },
        "urgency": {
            "more_urgent_case_id": study.case1,
            "ask_second": True,
            "levels": {str(study.case1): 1, str(study.case2): 6},
        },
        "eppc": {
            "labels": [
                {
                    "code": "InfoGive",
                    "subcode": "Symptoms",
                    "spans": [[start, start + len("crushing chest pain")]],
                },
                {"code": "InfoSeek", "subcode": "SchedulingAppt", "spans": [[0, 4], [10, 14]]},
            ]
        },
        "empathy": {"more_empathetic_response_id": study.edited},
        "facts": {
            "facts": [
                {
                    "side": "original",
                    "text": "Go to the ER now.",
                    "entailed": True,
                    "error_category": None,
                },
                {
                    "side": "edited",
                    "text": "Go to the ER now.",
                    "entailed": True,
                    "error_category": None,
                },
                {
                    "side": "edited",
                    "text": "You will be fine.",
                    "entailed": False,
                    "error_category": "false_assurance",
                },
            ]
        },
    }


def test_every_kind_round_trips_and_submits(study):
    ava = study.service.as_viewer("ava")
    for kind, payload in _complete_payloads(study).items():
        saved = ava.save_answer(study.units[kind], payload, status="submitted", active_seconds=12.5)
        assert saved.status == "submitted"
        again = ava.get_answer(study.units[kind])
        assert again.payload == saved.payload
        expected = dict(payload)
        if kind == "rank":
            expected = {"entries": sorted(payload["entries"], key=lambda e: e["response_id"])}
        if kind == "match":
            expected = {
                "decisions": sorted(payload["decisions"], key=lambda d: d["sentence_id"]),
                "themes": sorted(payload["themes"], key=lambda t: t["sentence_id"]),
            }
        if kind == "eppc":
            expected = {"labels": sorted(payload["labels"], key=lambda lb: lb["code"])}
        assert again.payload == expected, kind
        assert ava.progress(kind).done == 1


@pytest.mark.parametrize(
    ("kind", "payload", "message"),
    [
        ("respond", {"parts": {}}, "every theme box is empty"),
        ("rank", {"entries": [{"response_id": 0, "rank": 1}]}, "not in this rank set"),
        ("urgency", {}, "choose which patient"),
        ("empathy", {}, "more empathetic"),
        ("facts", {"facts": []}, "no facts"),
    ],
)
def test_incomplete_answers_cannot_be_submitted(study, kind, payload, message):
    ava = study.service.as_viewer("ava")
    with pytest.raises((PayloadError, StoreError), match=message):
        ava.save_answer(study.units[kind], payload, status="submitted")
    assert ava.get_answer(study.units[kind]) is None


def test_a_response_marked_incorrect_needs_a_reason_to_submit(study):
    """Seed 001 Sec. 5: "incorrect" means meeting at least one of C1-C3. The rank editor
    refused it without one; a save that is not the editor's (an import, a script) did not."""
    ava = study.service.as_viewer("ava")
    unit = study.units["rank"]
    entries = [
        {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
        {"response_id": study.draft2, "rank": 2, "correct": False, "criteria": []},
    ]
    unexplained = f"response {study.draft2} marked incorrect with no reason: .* C1-C3"
    with pytest.raises(PayloadError, match=unexplained):
        ava.save_answer(unit, {"entries": entries}, status="submitted")
    assert ava.save_answer(unit, {"entries": entries}, status="draft").status == "draft"
    entries[1]["criteria"] = ["C2"]
    assert ava.save_answer(unit, {"entries": entries}, status="submitted").status == "submitted"


@pytest.mark.parametrize("seconds", [math.inf, math.nan, -1.0, "12", True])
def test_time_on_task_must_be_a_finite_number_of_seconds(study, seconds):
    """Infinity passed the database's ">= 0" and then made every report fail."""
    ava = study.service.as_viewer("ava")
    unit = study.units["urgency"]
    ava.save_answer(unit, {"more_urgent_case_id": study.case1}, active_seconds=3.0)
    with pytest.raises(StoreError, match="time on task must be"):
        ava.save_answer(unit, {"more_urgent_case_id": study.case2}, active_seconds=seconds)
    kept = ava.get_answer(unit)
    assert (kept.payload["more_urgent_case_id"], kept.active_seconds) == (study.case1, 3.0)


def test_a_failed_save_keeps_the_previous_answer(study):
    ava = study.service.as_viewer("ava")
    first = {"more_urgent_case_id": study.case1}
    ava.save_answer(study.units["urgency"], first)
    with pytest.raises(PayloadError, match="levels"):
        ava.save_answer(
            study.units["urgency"],
            {"more_urgent_case_id": study.case2, "levels": {str(study.case1): 9}},
        )
    assert ava.get_answer(study.units["urgency"]).payload["more_urgent_case_id"] == study.case1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            {"labels": [{"code": "InfoGiveSDOH", "subcode": "Symptoms", "spans": []}]},
            "not a subcode of InfoGiveSDOH",
        ),
        ({"labels": [{"code": "Gossip", "subcode": None, "spans": []}]}, "not a code"),
        (
            {"labels": [{"code": "InfoGive", "subcode": "Drugs", "spans": [[0, 9999]]}]},
            "outside the text",
        ),
        (
            {"labels": [{"code": "InfoGive", "subcode": "Drugs", "spans": [[0, 5], [3, 8]]}]},
            "overlap",
        ),
        ({"labels": [{"code": "InfoGive"}, {"code": "InfoGive"}]}, "given twice"),
        ({"labels": [], "extra": 1}, "unknown field"),
    ],
)
def test_eppc_payload_errors_name_the_problem(study, payload, message):
    ava = study.service.as_viewer("ava")
    with pytest.raises(PayloadError, match=message):
        ava.save_answer(study.units["eppc"], payload)


def test_clinician_sees_only_own_answers_and_no_model_names(study):
    ava = study.service.as_viewer("ava")
    ben = study.service.as_viewer("ben")
    ava.save_answer(study.units["rank"], {"entries": [{"response_id": study.draft1, "rank": 1}]})
    with pytest.raises(AccessError):
        ben.get_answer(study.units["rank"], annotator_id=study.ava)
    with pytest.raises(AccessError):
        ben.history(study.units["rank"], annotator_id=study.ava)
    assert ben.get_answer(study.units["rank"]) is None
    view = ben.read_unit(study.units["rank"])
    assert all(r.author is None and r.source is None for r in view.responses)
    assert all(c.reference_level is None for c in view.cases)
    pi = study.service.as_viewer("pat")
    assert {r.author for r in pi.read_unit(study.units["rank"]).responses} == {
        "llama-8b",
        "qwen-7b",
    }
    assert pi.get_answer(study.units["rank"], annotator_id=study.ava) is not None


def test_clinician_cannot_read_units_not_assigned_or_set_up_the_study(study):
    outsider = study.service.add_annotator("cara")
    cara = StudyService(study.service.project, study.service.as_viewer("cara").viewer)
    assert outsider
    with pytest.raises(AccessError):
        cara.read_unit(study.units["rank"])
    with pytest.raises(AccessError):
        cara.save_answer(study.units["rank"], {"entries": []})
    with pytest.raises(AccessError):
        cara.add_case("zz", "hello")
    with pytest.raises(AccessError):
        cara.info()


def test_draft_order_is_stable_per_annotator_and_differs_between_annotators(project):
    svc = StudyService(project)
    people = [svc.add_annotator(f"rater{i}") for i in range(6)]
    case = svc.add_case("c", "Message.")
    drafts = [svc.add_response(case, f"d{i}", f"Draft number {i}.") for i in range(5)]
    unit = svc.add_unit(svc.create_unit_set("r", "rank"), case, members=drafts)
    for p in people:
        svc.assign(unit, p)
    orders = []
    for i in range(6):
        viewer = svc.as_viewer(f"rater{i}")
        first = [r.id for r in viewer.read_unit(unit).responses]
        assert [r.id for r in viewer.read_unit(unit).responses] == first
        assert sorted(first) == sorted(drafts)
        orders.append(tuple(first))
    assert len(set(orders)) > 1


def test_audit_log_records_every_change_with_old_and_new(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["empathy"]
    ava.save_answer(unit, {"equal": True})
    ava.save_answer(unit, {"equal": True}, active_seconds=30)  # time only: not a change
    ava.save_answer(unit, {"more_empathetic_response_id": study.edited}, status="submitted")
    history = ava.history(unit)
    assert [h.action for h in history] == ["create", "update"]
    assert history[0].old is None and history[0].new["payload"] == {"equal": True}
    assert history[1].old["payload"] == {"equal": True}
    assert history[1].new["payload"] == {"more_empathetic_response_id": study.edited}
    assert history[1].new["status"] == "submitted"
    assert all(h.actor_id == study.ava for h in history)


def test_a_draft_its_annotator_made_of_a_submitted_answer_is_known_from_the_log(study):
    """What lets "Put right, it is submitted again" hold on another day: her own save made her
    submitted answer a draft (a slip); an import or the PI doing so is not hers."""
    ava = study.service.as_viewer("ava")
    unit = study.units["empathy"]
    assert not ava.unsubmitted_by_own_save(unit)  # no answer
    ava.save_answer(unit, {"equal": True})
    assert not ava.unsubmitted_by_own_save(unit)  # a draft never submitted
    ava.save_answer(unit, {"equal": True}, status="submitted", flagged=True)
    ava.save_answer(unit, {"equal": True}, status="submitted", flagged=False)
    assert not ava.unsubmitted_by_own_save(unit)
    ava.save_answer(unit, {}, status="draft")  # the slip
    ava.save_answer(unit, {}, status="draft", comment="Not sure.")  # and a change since
    assert ava.unsubmitted_by_own_save(unit)
    ava.save_answer(unit, {"equal": True}, status="submitted")  # put right
    assert not ava.unsubmitted_by_own_save(unit)
    system = study.service  # an import's
    system.save_answer(unit, {}, status="draft", annotator_id=study.ava)
    assert not ava.unsubmitted_by_own_save(unit)


def test_audit_hash_chain_detects_tampering(study):
    ava = study.service.as_viewer("ava")
    for value in (True, False):
        ava.save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1, "ask_second": value}
        )
    project = study.service.project
    with project.read() as s:
        rows = list(s.scalars(select(AuditEntry).order_by(AuditEntry.id)))
    prev = "0" * 64
    for row in rows:
        assert row.prev_hash == prev and row.hash == audit_hash(row)
        prev = row.hash
    # Edit a row behind the app's back (dropping the guard trigger first): the chain breaks.
    with project.write() as s:
        if project.path is None:  # a server study: PostgreSQL names the table, and ours a stage
            s.execute(text("DROP TRIGGER freeze_audit_no_update ON audit_log"))
        else:
            s.execute(text("DROP TRIGGER audit_no_update"))
        s.execute(text("UPDATE audit_log SET new_json = '{}' WHERE id = :i"), {"i": rows[0].id})
    with project.read() as s:
        tampered = s.get(AuditEntry, rows[0].id)
        assert audit_hash(tampered) != tampered.hash
    assert hashlib.sha256(b"x").hexdigest() != rows[0].hash


def test_flag_and_comment_are_kept(study):
    ava = study.service.as_viewer("ava")
    ava.save_answer(
        study.units["respond"],
        {"parts": {}},
        flagged=True,
        flag_note="Chart seems to be for another patient",
    )
    assert ava.queue("respond", flagged=True)[0].unit_id == study.units["respond"]
    answer = ava.get_answer(study.units["respond"])
    assert answer.flagged and "another patient" in answer.flag_note
    assert ava.queue("respond", status="draft")[0].status == "draft"
    assert ava.queue("respond", status="submitted") == []


@pytest.mark.parametrize(
    ("kind", "payload", "fields", "place"),
    [
        ("respond", {"parts": {"empathy": "Copied from a PDF:\x00 rest."}}, {}, "parts.empathy"),
        ("respond", {"parts": {}, "notes": "n\x00"}, {}, "notes"),
        (
            "facts",
            {"facts": [{"side": "original", "text": "Go\x00 now.", "entailed": None}]},
            {},
            r"facts\[0\].text",
        ),
        ("urgency", {"more_urgent_case_id": None}, {"comment": "see\x00 chart"}, "comment"),
        ("urgency", {}, {"flagged": True, "flag_note": "\x00"}, "flag_note"),
    ],
)
def test_a_nul_character_is_refused_by_name_on_either_back_end(
    study, kind, payload, fields, place
):
    """PostgreSQL cannot store a NUL: a server study failed every save with "an unexpected
    error (DataError)" while a project file kept it. Both now refuse it, naming the text."""
    ava = study.service.as_viewer("ava")
    unit = study.units[kind]
    if kind == "urgency" and "more_urgent_case_id" in payload:
        payload = {"more_urgent_case_id": study.case1}
    with pytest.raises(PayloadError, match=rf"{kind}: {place} contains a NUL character"):
        ava.save_answer(unit, payload, **fields)
    assert ava.get_answer(unit) is None


def test_an_unpaired_surrogate_is_refused_by_name(study):
    ava = study.service.as_viewer("ava")
    with pytest.raises(PayloadError, match=r"parts\.planning contains an invalid character"):
        ava.save_answer(study.units["respond"], {"parts": {"planning": "x\ud800"}})


def test_gold_answer_by_pi_keeps_annotator_answers(study):
    ava = study.service.as_viewer("ava")
    ben = study.service.as_viewer("ben")
    unit = study.units["urgency"]
    ava.save_answer(unit, {"more_urgent_case_id": study.case1}, status="submitted")
    ben.save_answer(unit, {"more_urgent_case_id": study.case2}, status="submitted")
    pi = study.service.as_viewer("pat")
    with pytest.raises(AccessError):
        ava.save_answer(unit, {"more_urgent_case_id": study.case1}, gold=True)
    pi.save_answer(unit, {"more_urgent_case_id": study.case1}, status="submitted", gold=True)
    assert pi.get_answer(unit, gold=True).payload["more_urgent_case_id"] == study.case1
    assert ben.get_answer(unit).payload["more_urgent_case_id"] == study.case2
    assert len(pi.answers_for_unit(unit)) == 3


def test_a_second_pis_gold_answer_names_the_pi_who_decided_first(study, monkeypatch):
    """Two PIs adjudicate one unit at once: the second is told who saved the unit's gold
    answer and to reopen it, in words said once ("Not saved: ...", never twice)."""
    study.service.add_annotator("lee", "Dr. Lee (PI)", role="pi")
    pat, lee = study.service.as_viewer("pat"), study.service.as_viewer("lee")
    unit = study.units["urgency"]
    pat.save_answer(unit, {"more_urgent_case_id": study.case1}, status="submitted", gold=True)
    with pytest.raises(StoreError) as refused:
        lee.save_answer(unit, {"more_urgent_case_id": study.case2}, status="submitted", gold=True)
    assert not_saved_message(refused.value) == (
        "Not saved: pat already saved the gold answer for this unit (a unit has one): reopen "
        "the unit to see it"
    )
    # past the service's check (an import, a merge), the database's rule says the same
    monkeypatch.setattr(service_module, "_check_no_other_gold", lambda *args: None)
    with pytest.raises(StoreError) as rule:
        lee.save_answer(unit, {"more_urgent_case_id": study.case2}, status="submitted", gold=True)
    assert not_saved_message(rule.value) == (
        "Not saved: this unit already has a gold answer (a unit has one)"
    )
    assert pat.get_answer(unit, gold=True).payload["more_urgent_case_id"] == study.case1


def test_extending_the_codebook_adds_a_subcode_usable_in_answers(study):
    svc = study.service
    svc.extend_catalogs(
        {
            "version": "site-2",
            "eppc_codes": [
                {
                    "id": "InfoSeek",
                    "subcodes": [
                        {"id": "Billing", "name": "Billing", "definition": "Asks about a bill."}
                    ],
                }
            ],
        }
    )
    assert svc.catalogs.version == "site-2"
    ava = StudyService(svc.project, svc.as_viewer("ava").viewer)
    saved = ava.save_answer(
        study.units["eppc"], {"labels": [{"code": "InfoSeek", "subcode": "Billing", "spans": []}]}
    )
    assert saved.payload["labels"][0]["subcode"] == "Billing"
    with svc.project.read() as s:
        stored = json.loads(
            s.execute(text("SELECT value FROM project_meta WHERE key='catalogs'")).scalar()
        )
    assert stored["version"] == "site-2"


def test_a_code_added_without_subcodes_is_submitted_without_one(study):
    """A code the PI adds with no subcodes (``codebook --extend`` takes it) leaves nothing to
    choose: its labels are complete without a subcode; a code with subcodes still needs one."""
    svc = study.service
    svc.extend_catalogs(
        {
            "version": "site-2",
            "eppc_codes": [
                {"id": "Humor", "name": "Humor", "definition": "Jokes.", "subcodes": []}
            ],
        }
    )
    ava = StudyService(svc.project, svc.as_viewer("ava").viewer)
    unit = study.units["eppc"]
    humor = {"labels": [{"code": "Humor", "subcode": None, "spans": [[0, 3]]}]}
    assert ava.save_answer(unit, humor, status="submitted").status == "submitted"
    both = {"labels": [*humor["labels"], {"code": "InfoSeek", "subcode": None, "spans": [[0, 3]]}]}
    # in the codebook's words, as the clinician sees it (it once named the code's id)
    with pytest.raises(PayloadError, match="the code 'Information seeking' has no subcode yet"):
        ava.save_answer(unit, both, status="submitted")
    seek = next(c for c in ava.catalogs.eppc_codes if c.id == "InfoSeek")
    no_span = {"labels": [{"code": "InfoSeek", "subcode": seek.subcodes[0].id, "spans": []}]}
    with pytest.raises(PayloadError, match="'Information seeking' has no evidence yet: select"):
        ava.save_answer(unit, no_span, status="submitted")


def test_eppc_unit_shows_previous_and_next_sentence_and_sender(study):
    view = study.service.read_unit(study.units["eppc"])
    assert view.sender == "patient"
    assert view.previous_sentence.text == "Hi Dr. Lee,"
    assert view.sentence.text.startswith("I have had crushing chest pain")
    assert view.next_sentence.text == "Should I come in?"


def test_unknown_ids_give_clear_errors(study):
    with pytest.raises(StoreError, match="no unit 9999"):
        study.service.read_unit(9999)
    with pytest.raises(StoreError, match="no annotator"):
        study.service.as_viewer("nobody")
    with pytest.raises(StoreError, match="already exists"):
        study.service.add_case("c1", "duplicate id")


def test_adjudicating_does_not_put_the_unit_in_the_pis_queue(study):
    pi = study.service.as_viewer("pat")
    unit = study.units["urgency"]
    pi.save_answer(unit, {"more_urgent_case_id": study.case1}, status="submitted", gold=True)
    assert pi.queue("urgency") == []
    assert pi.progress_by_kind() == {}
    ava = study.service.as_viewer("ava")
    assert [i.unit_id for i in ava.queue("urgency")] == [unit]
    assert ava.progress_by_kind()["urgency"].total == 1


def test_a_gold_answer_is_saved_under_a_pi_only(study):
    """Gold is the PI's decision: stored under a clinician's name it would leave her queue
    (a gold holder) and travel with her offline copy. Refused, nothing saved."""
    payload = {"more_urgent_case_id": study.case1}
    with pytest.raises(StoreError, match="gold answer is the PI's decision; ava is a clinician"):
        study.service.save_answer(study.units["urgency"], payload, gold=True,
                                  annotator_id=study.ava)
    assert study.service.get_answer(study.units["urgency"], study.ava, gold=True) is None
    assert [u.unit_id for u in study.service.as_viewer("ava").queue("urgency")] == [
        study.units["urgency"]
    ]
    saved = study.service.save_answer(study.units["urgency"], payload, gold=True,
                                      annotator_id=study.pi)
    assert saved.is_gold


def test_a_name_is_one_person_however_its_letters_are_written(study):
    """macOS writes "é" as "e" and a combining accent: a name typed there once made a second
    person who looked the same, and signing in from Windows did not find her."""
    import unicodedata

    from sqlalchemy import text

    svc = study.service
    nfc, nfd = (unicodedata.normalize(form, "josé") for form in ("NFC", "NFD"))
    person = svc.add_annotator(nfd)
    assert [a.name for a in svc.annotators() if a.id == person] == [nfc]  # one form stored
    assert svc.as_viewer(nfd).viewer.annotator_id == person
    with pytest.raises(StoreError):
        svc.add_annotator(nfc)  # the same person: taken
    with svc.project.write() as s:  # a name stored decomposed by an earlier version
        s.execute(text("UPDATE annotators SET name = :n WHERE id = :i"), {"n": nfd, "i": person})
    assert svc.as_viewer(nfc).viewer.annotator_id == person
