"""The analyses' shortcuts (values made once per frames and shared, lookups done with numpy)
give what the straightforward computation gives, on a seeded synthetic study of every kind
(the benchmark's builder, 60 cases, 4 annotators).

Each test recomputes a shortcut's result by the plain route it replaced and compares them
exactly; the report as a whole is compared with itself on fresh frames.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from portalreview import metrics
from portalreview.analysis import ANALYSES, eppc, match
from portalreview.analysis import editing as edits
from portalreview.analysis._common import (
    Settings,
    answered_units,
    answers_of_kind,
    humans,
    jsonable,
    people,
)
from portalreview.reports.json_report import build_report
from portalreview.store.frames import _parsed_json, read_frames
from portalreview.store.project import Project
from tests.bench_support import bench_report


def _bench():
    return bench_report("portalreview_bench_report_shortcuts")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    path = tmp_path_factory.mktemp("shortcuts") / "synthetic.prproj"
    _bench().build_synthetic_study(path, 60, n_annotators=4, seed=11)
    project = Project.open(path, read_only=True)
    yield project, read_frames(project)
    project.close()


def _fresh(frames):
    """The same frames with an empty memo (nothing made yet)."""
    return dataclasses.replace(frames)


def test_answers_of_a_kind_and_people_equal_the_plain_filter_and_merge(study):
    _, frames = study
    frames = _fresh(frames)
    units = frames.units.drop(columns=["kind"])
    for kind in (*ANALYSES, "no-such-kind"):
        plain = frames.answers[frames.answers.kind == kind]
        pd.testing.assert_frame_equal(answers_of_kind(frames, kind), plain)
        merged = plain.merge(units, on="unit_id", how="left", validate="many_to_one")
        pd.testing.assert_frame_equal(people(frames, kind), merged)
        assert people(frames, kind) is people(frames, kind)  # made once
        assert answered_units(frames, kind) == sorted(plain.unit_id.unique().tolist())


def _plain_theme_recall(pairs, frames, themes):
    """Table 14 counts as the match tables computed them per group (report version 2)."""
    decisions = frames.match_decisions.merge(pairs[["answer_id"]], on="answer_id")
    rows = decisions.merge(frames.sentence_themes, on=["answer_id", "sentence_id"])
    rows = rows.assign(matched=rows.spans.map(len) > 0)
    grouped = rows.groupby("theme").matched.agg(["size", "sum"])
    out = []
    for theme in themes:
        n = int(grouped["size"].get(theme, 0))
        hit = int(grouped["sum"].get(theme, 0))
        out.append(
            {"theme": theme, "n_sentences": n, "n_matched": hit, "recall": hit / n if n else None}
        )
    return out


def test_per_theme_recall_from_shared_counts_equals_the_per_group_merge(study):
    _, frames = study
    frames = _fresh(frames)
    s = Settings.of(None, 0, 0)
    themes = [t.id for t in s.catalogs.themes]
    pairs = match._with_labels(
        match.people_pair_counts(frames), humans(people(frames, "match")), frames
    )
    groups = [pairs, *(g for _, g in pairs.groupby("source")), pairs.iloc[:0]]
    groups += [g for _, g in pairs.groupby("annotator")]
    for group in groups:
        assert match.per_theme_recall(group, frames, s) == _plain_theme_recall(
            group, frames, themes
        )


def test_edit_f1_estimate_uses_the_match_pairs_as_pair_counts_gives_them(study):
    _, frames = study
    frames = _fresh(frames)
    answers = humans(people(frames, "match"))
    drafts = set(frames.respond_answers.base_response_id.dropna().astype(int).tolist())
    assert drafts
    # The plain route: pair_counts on the answers whose draft is one of the edited drafts.
    plain = match.pair_counts(answers[answers.response_b_id.isin(list(drafts))], frames)
    shared = edits.estimated_edit_f1(frames, drafts)
    assert len(shared) > 0
    pd.testing.assert_frame_equal(shared, plain)
    # And pair_counts on every people's answer is what the match tables use.
    pd.testing.assert_frame_equal(
        match.people_pair_counts(frames), match.pair_counts(answers, frames)
    )


@pytest.mark.parametrize("made_of", ["rows", "the frames' evidence texts"])
def test_relaxed_matcher_decides_each_pair_as_metrics_spans_match(study, made_of):
    _, frames = study
    answers = people(frames, "eppc")
    codes = [c.id for c in Settings.of(None, 0, 0).catalogs.eppc_codes]
    rows = eppc.label_rows(answers, frames, codes)
    numbering = eppc.evidence_texts(frames)
    again = eppc.label_rows(answers, frames, codes)  # the same texts: the same numbers
    assert again.evidence_id.tolist() == rows.evidence_id.tolist()
    assert numbering.tokens_of(rows.evidence_id.to_numpy()) == [
        metrics.span_tokens(text) for text in rows.evidence.tolist()
    ]
    rows = rows[rows.has_evidence]
    matcher = eppc.RelaxedMatcher(rows) if made_of == "rows" else numbering
    texts = dict(zip(rows.evidence_id.tolist(), rows.evidence.tolist(), strict=False))
    ids = np.array(sorted(texts))
    rng = np.random.default_rng(0)
    for size in (50, 400, 400, 5):  # later calls meet pairs already decided and new ones
        a, b = rng.choice(ids, size), rng.choice(ids, size)
        b[: size // 5] = a[: size // 5]  # some pairs of a text with itself
        got = matcher(a, b)
        expected = [metrics.spans_match(texts[x], texts[y]) for x, y in zip(a, b, strict=True)]
        assert got.tolist() == expected
        assert size < 100 or (any(expected) and not all(expected))


def test_parsed_json_parses_each_text_and_shares_equal_ones():
    texts = ('{"swap": true}', "{}", '{"swap": true}', "[1, [2, 3]]", '{"order": [3, 1]}', "{}")
    parsed = _parsed_json(texts)
    assert list(parsed) == [json.loads(t) for t in texts]
    assert parsed[0] is parsed[2] and parsed[1] is parsed[5]
    assert parsed[3] == [1, [2, 3]]  # a JSON list stays one value


def test_jsonable_fast_paths():
    value = {
        1: [np.int64(2), 3.5, float("nan"), {"a": (np.float32(0.5), None)}],
        "b": {np.str_("c"): [True, np.bool_(False), pd.NA]},
    }
    assert jsonable(value) == {
        "1": [2, 3.5, None, {"a": [0.5, None]}],
        "b": {"c": [True, False, None]},
    }


def test_the_report_is_the_same_on_fresh_frames_and_when_read_again(study):
    project, frames = study
    first = build_report(project, seed=2, n_resamples=40, frames=_fresh(frames))
    again = build_report(project, seed=2, n_resamples=40)
    assert json.dumps(first, allow_nan=False) == json.dumps(again, allow_nan=False)
