"""Blinding lives in the query layer: signed in as clinician A, the service layer gives no way
to read clinician B's answers, a draft's model (author, source), a case's reference urgency, or
the PI's gold answers, whatever is asked and however.

The check is done twice: each refusal explicitly, and a sweep that calls every read method a
clinician's session has on every unit and kind and searches everything returned for canaries
(B's answer text, the models' names).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from portalreview.store import templates
from portalreview.store.service import AccessError, StudyService
from portalreview.store.templates import TemplateService

CANARY = "BEN-PRIVATE-ANSWER-7f3a"
MODEL_NAMES = ("llama-8b", "qwen-7b", "zero-shot", "thematic")


@pytest.fixture
def blinded(study):
    """The small study with Ben's answers to every respond unit and a PI gold answer."""
    svc = study.service
    ben = svc.as_viewer("ben")
    ben.save_answer(study.units["respond"], {"parts": {"empathy": CANARY}}, comment=CANARY)
    pi = svc.as_viewer("pat")
    pi.save_answer(study.units["respond"], {"parts": {"empathy": "GOLD " + CANARY}}, gold=True)
    return study


def _everything(value) -> str:
    """All text reachable in a returned value (dataclasses, ORM rows, containers)."""
    if dataclasses.is_dataclass(value):
        return _everything(dataclasses.asdict(value))
    if hasattr(value, "__table__"):  # an ORM row
        return _everything({c.name: getattr(value, c.name) for c in value.__table__.columns})
    return json.dumps(value, default=repr, ensure_ascii=False)


def test_clinician_a_cannot_read_clinician_b_answers(blinded):
    ava = blinded.service.as_viewer("ava")
    unit, ben = blinded.units["respond"], blinded.ben
    refusals = {
        "B's answer": lambda: ava.get_answer(unit, annotator_id=ben),
        "the gold answer": lambda: ava.get_answer(unit, gold=True),
        "every answer of a unit": lambda: ava.answers_for_unit(unit),
        "B's history": lambda: ava.history(unit, annotator_id=ben),
        "B's queue": lambda: ava.queue("respond", annotator_id=ben),
        "B's progress": lambda: ava.progress_by_kind(annotator_id=ben),
        "the study overview": lambda: ava.info(),
        "sentences outside a unit": lambda: ava.sentences(case_id=blinded.case1),
        "writing as B": lambda: ava.save_answer(
            unit, {"parts": {"empathy": "overwritten"}}, annotator_id=ben
        ),
        "writing gold": lambda: ava.save_answer(unit, {"parts": {"empathy": "x"}}, gold=True),
        "every unit": lambda: templates.unit_ids(ava, "respond"),
        "model suggestions": lambda: templates.suggestions_by(ava, [unit], "0" * 64, "t"),
        "cases outside a unit": lambda: templates.read_cases(ava, [blinded.case1]),
        "responses by id": lambda: templates.response_by_external_id(ava, "d1"),
        "changing prompt templates": lambda: TemplateService(ava).save("t", "rank", "text"),
    }
    for what, call in refusals.items():
        with pytest.raises(AccessError):
            call()
            pytest.fail(f"a clinician could read or write {what}")
    # Her own answer is hers only: Ben's answer does not show through as hers.
    assert ava.get_answer(unit) is None
    assert ava.history(unit) == []
    # Ben's answer is still his, untouched.
    mine = blinded.service.as_viewer("ben").get_answer(unit)
    assert mine.payload["parts"]["empathy"] == CANARY


def test_a_clinician_never_learns_which_model_wrote_a_draft(blinded):
    ava = blinded.service.as_viewer("ava")
    for kind in ("rank", "match", "empathy", "facts"):
        view = ava.read_unit(blinded.units[kind])
        assert view.responses, kind
        for response in view.responses:
            assert response.author is None and response.source is None, (kind, response)
    for case in ava.read_unit(blinded.units["urgency"]).cases:
        assert case.reference_level is None
    for cases in ava.inboxes().values():
        assert all(case.reference_level is None for case in cases)
    # The PI sees them.
    pi = blinded.service.as_viewer("pat")
    authors = {r.author for r in pi.read_unit(blinded.units["rank"]).responses}
    assert authors == {"llama-8b", "qwen-7b"}


def test_a_clinician_sees_only_units_assigned_to_her(blinded):
    svc = blinded.service
    extra = svc.add_unit(
        svc.create_unit_set("only ben", "rank"),
        blinded.case1,
        members=[blinded.draft1, blinded.draft2],
    )
    svc.assign(extra, blinded.ben)
    ava = svc.as_viewer("ava")
    with pytest.raises(AccessError):
        ava.read_unit(extra)
    with pytest.raises(AccessError):
        templates.latest_suggestion(ava, extra)
    with pytest.raises(AccessError):
        ava.save_answer(extra, {"ranks": {}})
    assert extra not in {item.unit_id for item in ava.queue("rank")}


def test_nothing_a_clinician_session_returns_holds_another_answer_or_a_model_name(blinded):
    """The sweep: every read method of the session, on everything assigned to her."""
    ava = blinded.service.as_viewer("ava")
    returned = []
    for kind in blinded.units:
        returned.append(ava.queue(kind))
        returned.append(ava.progress(kind))
        for item in ava.queue(kind):
            returned.append(ava.read_unit(item.unit_id))
            returned.append(ava.get_answer(item.unit_id))
            returned.append(ava.history(item.unit_id))
            returned.append(templates.latest_suggestion(ava, item.unit_id))
    returned += [ava.progress_by_kind(), ava.inboxes(), ava.annotators(), ava.catalogs.to_dict()]
    returned.append(TemplateService(ava).list())
    text = "\n".join(_everything(value) for value in returned)
    assert CANARY not in text
    for name in MODEL_NAMES:
        assert name not in text, name
    # ...while the same sweep as Ben finds his own answer (the canary works).
    ben = blinded.service.as_viewer("ben")
    assert CANARY in _everything(ben.get_answer(blinded.units["respond"]))


def test_a_clinician_service_cannot_be_promoted(blinded):
    """The viewer is fixed when the session is made: signing in as a clinician gives a
    clinician's service, whatever the caller passes around."""
    ava = blinded.service.as_viewer("ava")
    assert ava.viewer.role == "clinician" and not ava.viewer.sees_all
    with pytest.raises(dataclasses.FrozenInstanceError):
        ava.viewer.role = "pi"  # type: ignore[misc]
    again = StudyService(ava.project, ava.viewer)
    with pytest.raises(AccessError):
        again.answers_for_unit(blinded.units["respond"])
