"""Two workstations run the same model over the same units of a team study at the same moment
(``portalreview suggest`` on each, one llama.cpp server behind both): each answer is made once
and stored once. A run claims a unit before asking the model (``ServerProject.claim``: a
session-level advisory lock) and passes over a unit another run holds, coming back to it at
the end, when it is done.

The two runs are made to overlap for certain: each run's first model call waits until the
other run has made its first one too (a barrier). Without claims both runs then answer the
first unit, having read "nothing done yet" before either stored anything."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from llm_testkit import PARAMS, SMALL_LIMITS, drafts_end_at_the_limit, tiny_model_file
from sqlalchemy import func, select

from portalreview.llm import suggest as sg
from portalreview.llm.engine import Engine
from portalreview.llm.templates import default_template
from portalreview.store.backends import ServerProject
from portalreview.store.models import Annotator, Response, Suggestion
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


@pytest.fixture
def empathy_study(postgres_server):
    """A server study with four empathy units (the small study's and three more): its address
    and the units."""
    address = postgres_server.url(postgres_server.new_database())
    with ServerProject.create(address) as project:
        study = build_small_study(project)
        service = study.service
        more = service.create_unit_set("more empathy", "empathy")
        units = [study.units["empathy"]] + [
            service.add_unit(more, study.case1, response_id=r, response_b_id=study.edited)
            for r in (study.original, study.reference, study.draft1)
        ]
    return address, units


def _at_once(monkeypatch, name: str, work) -> tuple[list, Counter]:
    """Run ``work(service, engine)`` on two threads, each with its own connection to the study
    and its own engine, the first model call of each (``sg.<name>``) held until both made
    one; returns both results and how often the model was asked about each unit or case."""
    asked: Counter = Counter()
    first_call = threading.Barrier(2, timeout=60)
    started: set[int] = set()
    real = getattr(sg, name)

    def counted(*args, **kwargs):
        # a unit's id; a draft's case's id
        asked[args[1].unit_id if name == "suggest" else args[3].id] += 1
        if threading.get_ident() not in started:
            started.add(threading.get_ident())
            first_call.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(sg, name, counted)
    results: list = [None, None]
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            first_call.abort()

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results, asked


def _engine(tmp_path_factory) -> Engine:
    return Engine.load(tiny_model_file(tmp_path_factory), gpu=False, hash_cache=False)


def test_two_suggest_runs_at_once_answer_and_store_each_unit_once(
    empathy_study, tmp_path_factory, monkeypatch
):
    address, units = empathy_study

    def run(i: int) -> sg.BatchReport:
        with ServerProject.open(address) as project, _engine(tmp_path_factory) as engine:
            return sg.run_batch(
                StudyService(project),
                engine,
                "empathy",
                units,
                params=PARAMS,
                limits=SMALL_LIMITS,
                annotator="tiny-judge",
            )

    reports, asked = _at_once(monkeypatch, "suggest", run)
    assert asked == Counter(units)  # each unit asked about once, by one run or the other
    stored = reports[0].stored + reports[1].stored
    assert sorted(stored) == sorted(units)
    assert sorted(reports[0].skipped) == sorted(reports[1].stored)
    assert sorted(reports[1].skipped) == sorted(reports[0].stored)
    with ServerProject.open(address) as project, project.read() as s:
        per_unit = s.execute(select(Suggestion.unit_id, func.count()).group_by(Suggestion.unit_id))
        assert dict(per_unit.all()) == dict.fromkeys(units, 1)
        judges = s.scalars(select(Annotator.name).where(Annotator.is_model.is_(True))).all()
        assert judges == ["tiny-judge"]
        judge = StudyService(project).as_viewer("tiny-judge")
        assert all(judge.get_answer(u).status == "submitted" for u in units)


def test_two_drafting_runs_at_once_write_each_draft_once(
    empathy_study, tmp_path_factory, monkeypatch
):
    address, _ = empathy_study
    template = default_template("draft_zero_shot")
    drafts_end_at_the_limit(monkeypatch)  # (so that each draft is stored)

    def run(i: int) -> sg.BatchReport:
        with ServerProject.open(address) as project, _engine(tmp_path_factory) as engine:
            service = StudyService(project)
            cases = sg.cases_for_drafts(service)
            return sg.run_drafts(
                service, engine, cases, template, params=PARAMS.__class__(max_tokens=4)
            )

    reports, asked = _at_once(monkeypatch, "_generate_draft", run)
    assert asked == Counter(dict.fromkeys(asked, 1)) and len(asked) == 2  # both cases, once
    assert sorted(reports[0].stored + reports[1].stored) == sorted(asked)
    assert not reports[0].failed and not reports[1].failed
    with ServerProject.open(address) as project, project.read() as s:
        drafts = s.scalars(select(Response.case_id).where(Response.external_id.like("llm:%")))
        assert sorted(drafts.all()) == sorted(asked)
