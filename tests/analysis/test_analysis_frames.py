"""store.frames reads the study with the driver's own cursor: the frames must hold what plain
SQL on the project file holds, with the column types SQLAlchemy would give (booleans as bool,
or True / False / None where NULLs occur), drafts left out unless asked for."""

from __future__ import annotations

import gc
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from analysis_builders import new_study

from portalreview.store.frames import paused_gc, read_frames


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("frames"))
    for name in ("x", "y"):
        st.person(name)
    for case in ("c1", "c2"):
        st.case(case, "My knee hurts. What should I do?", 3)
        for source in ("A", "B"):
            st.response(f"{case}{source}", case, f"Reply {source}.", "model", source)
    members = {case: [st.responses[f"{case}{s}"] for s in "AB"] for case in ("c1", "c2")}
    st.unit("r1", "rank", "c1", who=["x", "y"], members=members["c1"])
    st.unit("r2", "rank", "c2", who=["x"], members=members["c2"])
    st.unit("g1", "urgency", "c1", who=["x", "y"], case_b_id=st.cases["c2"])

    def entries(case, correct_b):
        reasons = ["C1"] if correct_b is False else []  # incorrect needs one (001 Sec. 5)
        return {
            "entries": [
                {"response_id": members[case][0], "rank": 1, "correct": True, "criteria": []},
                {
                    "response_id": members[case][1],
                    "rank": 2,
                    "correct": correct_b,
                    "criteria": reasons,
                },
            ]
        }

    st.answer("r1", "x", entries("c1", False))
    st.answer("r1", "y", entries("c1", True))
    # x's answer to r2 is a draft: one response not yet judged (correct NULL).
    st.svc.save_answer(
        st.units["r2"], entries("c2", None), status="draft", annotator_id=st.people["x"]
    )
    st.answer("g1", "x", {"more_urgent_case_id": st.cases["c1"]}, active_seconds=12.5)
    st.answer("g1", "y", {"more_urgent_case_id": st.cases["c2"]})
    yield st
    st.project.close()


def _sql(st, query: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{st.project.path}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_answers_hold_what_sql_holds(study):
    frames = read_frames(study.project)
    rows = _sql(
        study,
        """SELECT a.id, a.unit_id, a.kind, p.name, p.is_model, a.is_gold, a.active_seconds,
                  s.presentation_json
           FROM answers a JOIN annotators p ON p.id = a.annotator_id
           JOIN assignments s ON s.unit_id = a.unit_id AND s.annotator_id = a.annotator_id
           WHERE a.status = 'submitted' ORDER BY a.id""",
    )
    answers = frames.answers
    assert answers.answer_id.tolist() == [r[0] for r in rows]
    assert answers.annotator.tolist() == [r[3] for r in rows]
    assert answers.active_seconds.tolist() == [r[6] for r in rows]
    assert answers.presentation.tolist() == [json.loads(r[7]) for r in rows]
    for column in ("is_model", "is_gold", "flagged"):
        assert answers[column].dtype == np.dtype(bool)
    assert answers.is_gold.tolist() == [bool(r[5]) for r in rows]
    assert answers.unit_id.dtype == np.dtype("int64")
    assert pd.api.types.is_string_dtype(answers.kind)
    # suggestion_use is NULL everywhere: an object column of None, as pandas leaves it.
    assert answers.suggestion_use.dtype == object
    assert answers.suggestion_use.isna().all()


def test_drafts_and_nullable_booleans(study):
    submitted = read_frames(study.project)
    everything = read_frames(study.project, include_drafts=True)
    assert len(everything.answers) == len(submitted.answers) + 1
    # The stored column holds a NULL (the draft's unjudged entry): True / False / None in an
    # object column, which keeps its type once the draft's rows are left out.
    correct = everything.rank_entries.correct
    assert correct.dtype == object
    assert sorted(correct.tolist(), key=repr) == [False, None, True, True, True, True]
    assert len(submitted.rank_entries) == 4  # the draft's two entries are left out
    assert sorted(submitted.rank_entries.correct.tolist()) == [False, True, True, True]
    assert (
        everything.rank_entries.answer_id.isin(everything.answers.answer_id).all()
        and not submitted.rank_entries.answer_id.isin(
            set(everything.answers.answer_id) - set(submitted.answers.answer_id)
        ).any()
    )


def test_urgency_rows_and_empty_tables(study):
    frames = read_frames(study.project)
    assert frames.urgency.ask_second.dtype == np.dtype(bool)
    assert sorted(frames.urgency.more_urgent_case_id.tolist()) == sorted(
        [study.cases["c1"], study.cases["c2"]]
    )
    # No facts were given: an empty frame with its documented columns.
    assert frames.facts.empty
    assert list(frames.facts.columns) == [
        "answer_id",
        "side",
        "position",
        "text",
        "entailed",
        "error_category",
    ]


def test_paused_gc_restores_the_collector():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()
