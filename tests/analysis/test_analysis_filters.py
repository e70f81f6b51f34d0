"""Filtered frames (the dashboard's filters): a filtered report's figures equal those of a copy
of the project from which plain SQL deleted the answers the filter leaves out, while its
``study`` counts the whole project; bad choices are refused by name; the filtered frames have
their own memo."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from portalreview.analysis.filters import FrameFilter, filter_choices, filter_frames
from portalreview.demo import build_demo
from portalreview.reports.json_report import build_report, read_project_catalogs, report_header
from portalreview.reports.live_report import LiveReport
from portalreview.store.frames import read_frames
from portalreview.store.project import Project

RESAMPLES = 30
# A response's source label as the per-source tables give it, in SQL.
SOURCE = "COALESCE(NULLIF(TRIM(r.source), ''), NULLIF(TRIM(r.author), ''), r.author_kind)"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_demo(tmp_path_factory.mktemp("filters") / "demo.prproj")


@pytest.fixture(scope="module")
def frames(demo):
    with Project.open(demo, read_only=True) as project:
        return read_frames(project)


# Tables holding parts of answers (the audit log keeps its references: it cannot change).
ANSWER_PARTS = (
    "respond_answers",
    "respond_parts",
    "rank_entries",
    "match_decisions",
    "match_spans",
    "sentence_themes",
    "urgency_answers",
    "urgency_case_levels",
    "eppc_labels",
    "eppc_spans",
    "empathy_answers",
    "facts",
)


def _copy_without(demo: Path, folder: Path, *statements: tuple[str, list]) -> Path:
    """A copy of the demo (same file name) after the given DELETE statements, with the parts
    of the deleted answers deleted too."""
    folder.mkdir()
    copy = shutil.copy(demo, folder / demo.name)
    conn = sqlite3.connect(copy)
    try:
        for statement, params in statements:
            conn.execute(statement, params)
        for table in ANSWER_PARTS:
            conn.execute(f"DELETE FROM {table} WHERE answer_id NOT IN (SELECT id FROM answers)")
        conn.execute(
            "DELETE FROM rank_criteria WHERE NOT EXISTS (SELECT 1 FROM rank_entries e WHERE "
            "e.answer_id = rank_criteria.answer_id AND e.response_id = rank_criteria.response_id)"
        )
        conn.commit()
    finally:
        conn.close()
    return Path(copy)


def _marks(values: list) -> str:
    return ", ".join("?" * len(values))


def _not_by(names: list[str]) -> tuple[str, list]:
    return (
        "DELETE FROM answers WHERE is_gold = 0 AND annotator_id NOT IN "
        f"(SELECT id FROM annotators WHERE name IN ({_marks(names)}))",
        names,
    )


def _tagged(column: str, tags: dict[str, list[str]]) -> tuple[str, list]:
    """SQL: the case in ``column`` carries, for every key, one of its values."""
    clauses, params = [], []
    for key, values in tags.items():
        clauses.append(
            f"EXISTS (SELECT 1 FROM case_tags t WHERE t.case_id = {column} AND t.key = ? "
            f"AND t.value IN ({_marks(values)}))"
        )
        params += [key, *values]
    return " AND ".join(clauses), params


def _not_tagged(tags: dict[str, list[str]]) -> tuple[str, list]:
    first, params_a = _tagged("u.case_id", tags)
    second, params_b = _tagged("u.case_b_id", tags)
    return (
        "DELETE FROM answers WHERE unit_id IN (SELECT u.id FROM units u WHERE NOT "
        f"({first} AND (u.case_b_id IS NULL OR ({second}))))",
        params_a + params_b,
    )


def _not_about(sources: list[str]) -> list[tuple[str, list]]:
    chosen = f"SELECT r.id FROM responses r WHERE {SOURCE} IN ({_marks(sources)})"
    return [
        (f"DELETE FROM rank_entries WHERE response_id NOT IN ({chosen})", sources),
        (
            "DELETE FROM answers WHERE kind = 'rank' AND id NOT IN "
            "(SELECT answer_id FROM rank_entries)",
            [],
        ),
        (
            "DELETE FROM answers WHERE kind != 'rank' AND unit_id NOT IN (SELECT u.id FROM "
            f"units u WHERE u.response_id IN ({chosen}) OR u.response_b_id IN ({chosen}))",
            sources + sources,
        ),
    ]


def _reports(demo: Path, copy: Path, frames, **choice):
    """The report filtered as the dashboard computes it, and the copy's report. Every figure
    is the same; ``study`` counts the whole project (docs/report.md), the copy its own."""
    with Project.open(demo, read_only=True) as project:
        filtered = build_report(
            project, seed=5, n_resamples=RESAMPLES, frames=filter_frames(frames, **choice)
        )
        live = LiveReport(use_cache=False).refresh(
            project, seed=5, n_resamples=RESAMPLES, choice=FrameFilter.of(**choice)
        )
        whole = report_header(
            project,
            frames,
            read_project_catalogs(project),
            seed=5,
            n_resamples=RESAMPLES,
            include_drafts=False,
        )
    expected = build_report(copy, seed=5, n_resamples=RESAMPLES)
    assert filtered == expected  # on the filtered frames alone, study included
    assert _figures(live.report) == _figures(expected)
    assert live.report["study"] == whole["study"]
    return live.report, expected


def _figures(report: dict) -> dict:
    return {key: value for key, value in report.items() if key != "study"}


def _n_answers(report) -> int:
    return sum(a["n_answers"] for a in report["study"]["annotators"])


def test_annotator_filter_equals_deleting_the_others_answers(demo, frames, tmp_path):
    with Project.open(demo, read_only=True) as project:
        # the full report first, so that the memo of ``frames`` is filled: the filtered
        # frames must not reuse it
        whole = build_report(project, seed=5, n_resamples=RESAMPLES, frames=frames)
    assert frames.memo
    names = ["dr_ben", "nurse_ava"]
    copy = _copy_without(demo, tmp_path / "copy", _not_by(names))
    filtered, expected = _reports(demo, copy, frames, annotators=names)
    assert filtered["study"] == whole["study"]
    people = {a["name"] for a in expected["study"]["annotators"] if a["n_answers"]}
    assert people == {"dr_ben", "nurse_ava", "dr_pi"}  # dr_pi: the gold answers stay
    assert 0 < _n_answers(expected) < _n_answers(whole)
    assert filtered["eppc"]["annotators"] == names


def test_tag_filter_equals_deleting_answers_on_other_cases(demo, frames, tmp_path):
    tags = {"topic": ["lab_results", "new_symptom"], "inbox": ["demo-inbox"]}
    copy = _copy_without(demo, tmp_path / "copy", _not_tagged(tags))
    _, expected = _reports(demo, copy, frames, tags=tags)
    kinds = expected["study"]["kinds"]
    assert kinds["urgency"]["n_answers"] > 0  # pairs of two tagged messages
    assert kinds["urgency"]["n_answers"] < len(frames.answers[frames.answers.kind == "urgency"])


def test_source_filter_equals_deleting_answers_about_other_drafts(demo, frames, tmp_path):
    sources = ["local-70b-zero-shot", "local-8b-zero-shot"]
    copy = _copy_without(demo, tmp_path / "copy", *_not_about(sources))
    filtered, _ = _reports(demo, copy, frames, sources=sources)
    assert filtered["rank"]["sources"] == sources  # the win-rate matrix of the two
    assert {w["source"] for w in filtered["rank"]["win_rates"]} == set(sources)
    assert filtered["urgency"]["n_answers"] == 0  # no drafts there
    assert filtered["study"]["kinds"]["urgency"]["n_answers"] > 0  # the whole project's


def test_every_filter_at_once(demo, frames, tmp_path):
    names, sources, tags = ["np_chloe"], ["local-8b-thematic", "physician"], {"split": ["demo"]}
    copy = _copy_without(
        demo, tmp_path / "copy", _not_by(names), _not_tagged(tags), *_not_about(sources)
    )
    _, expected = _reports(demo, copy, frames, annotators=names, sources=sources, tags=tags)
    assert _n_answers(expected) > 0


def test_no_filter_keeps_everything_and_the_input_is_left_alone(frames):
    before = len(frames.answers), len(frames.rank_entries)
    same = filter_frames(frames)
    assert same.answers.answer_id.tolist() == frames.answers.answer_id.tolist()
    assert len(same.rank_entries) == len(frames.rank_entries)
    assert same.memo == {} and same is not frames
    filter_frames(frames, annotators=["dr_ben"], sources=["physician"])
    assert (len(frames.answers), len(frames.rank_entries)) == before


def test_bad_choices_are_refused_by_name(frames):
    with pytest.raises(ValueError, match=r"unknown annotator\(s\) 'dr_who'.*nurse_ava"):
        filter_frames(frames, annotators=["dr_who", "nurse_ava"])
    with pytest.raises(ValueError, match="unknown draft source"):
        filter_frames(frames, sources=["gpt-9"])
    with pytest.raises(ValueError, match="no case has a tag 'colour'"):
        filter_frames(frames, tags={"colour": ["red"]})
    with pytest.raises(ValueError, match="no case is tagged topic='astrology'"):
        filter_frames(frames, tags={"topic": ["astrology"]})
    with pytest.raises(ValueError, match="as a list"):
        filter_frames(frames, annotators="nurse_ava")


def test_choices_are_the_studys(demo, frames):
    conn = sqlite3.connect(f"file:{demo}?mode=ro", uri=True)
    try:
        people = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT p.name FROM answers a JOIN annotators p ON p.id = "
                "a.annotator_id WHERE a.is_gold = 0 AND a.status = 'submitted' ORDER BY p.name"
            )
        ]
        sources = [
            r[0] for r in conn.execute(f"SELECT DISTINCT {SOURCE} s FROM responses r ORDER BY s")
        ]
        tags: dict[str, list[str]] = {}
        for key, value in conn.execute(
            "SELECT DISTINCT key, value FROM case_tags ORDER BY key, value"
        ):
            tags.setdefault(key, []).append(value)
    finally:
        conn.close()
    choices = filter_choices(frames)
    assert choices.annotators == people == ["dr_ben", "np_chloe", "nurse_ava"]
    assert choices.sources == sources
    assert choices.tags == tags


def test_a_filter_in_words_and_as_data():
    tags = [("topic", "x"), ("split", "t"), ("topic", "w")]
    choice = FrameFilter.of(annotators=["b", "a", "a"], sources=[], tags=tags)
    assert choice == FrameFilter(("a", "b"), None, {"split": ("t",), "topic": ("w", "x")})
    assert choice.active and not FrameFilter.of().active and FrameFilter.of().describe() == ""
    assert choice.describe() == "annotators a, b; case tags split=t and topic=w or x"
    assert choice.as_json() == {
        "annotators": ["a", "b"],
        "sources": [],
        "tags": {"split": ["t"], "topic": ["w", "x"]},
    }
