"""``analysis.DEPENDS_ON``: each analysis reads the answers of the kinds it names and of no
other kind. On frames holding only those kinds' answers (every other kind's rows dropped from
``answers`` and from every detail frame, as ``analysis.filters`` trims them) each analysis gives
exactly its result on the whole study - on the demo study and on a synthetic study of the
benchmark's builder - and the memo an analysis shares with the others cannot carry one kind's
answers into another kind's result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from portalreview.analysis import ANALYSES, DEPENDS_ON, KINDS, OWN_DEPENDS_ON, PIECES, analyse_piece
from portalreview.analysis.filters import DETAIL_TABLES
from portalreview.demo import build_demo
from portalreview.domain.catalogs import DEFAULT_CATALOGS
from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.project import Project
from tests.bench_support import bench_report

SETTINGS = {"seed": 4, "n_resamples": 60}


def _bench():
    return bench_report("portalreview_bench_report_depends")


def _frames_of(path: Path) -> StudyFrames:
    with Project.open(path, read_only=True) as project:
        return read_frames(project)


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, StudyFrames]:
    folder = tmp_path_factory.mktemp("depends_on")
    demo = build_demo(folder / "demo.prproj")
    _bench().build_synthetic_study(folder / "synthetic.prproj", 60)
    return {"demo": _frames_of(demo), "synthetic": _frames_of(folder / "synthetic.prproj")}


def only_kinds(frames: StudyFrames, kinds: frozenset[str] | set[str]) -> StudyFrames:
    """The frames with the answers of ``kinds`` only: other kinds' rows leave ``answers`` and
    every detail frame (a fresh frames object: its memo is empty)."""
    answers = frames.answers[frames.answers.kind.isin(sorted(kinds))].reset_index(drop=True)
    kept = set(answers.answer_id.tolist())
    details = {
        name: getattr(frames, name)[getattr(frames, name).answer_id.isin(kept)].reset_index(
            drop=True
        )
        for name in DETAIL_TABLES
    }
    return dataclasses.replace(frames, answers=answers, **details)


def test_every_kind_names_itself_and_only_known_kinds():
    assert tuple(DEPENDS_ON) == KINDS
    for kind, kinds in DEPENDS_ON.items():
        assert isinstance(kinds, frozenset)
        assert kind in kinds
        assert kinds <= set(KINDS)


@pytest.mark.parametrize("study", ["demo", "synthetic"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_analysis_on_its_kinds_answers_only_equals_it_on_the_whole_study(studies, study, kind):
    frames = studies[study]
    restricted = only_kinds(frames, DEPENDS_ON[kind])
    # The restriction leaves answers out (every study has answers of every kind) and keeps
    # each named kind's answers whole.
    assert len(restricted.answers) < len(frames.answers)
    for name in DEPENDS_ON[kind]:
        assert (restricted.answers.kind == name).sum() == (frames.answers.kind == name).sum() > 0
    whole = ANALYSES[kind](frames, **SETTINGS)
    assert whole["n_answers"] > 0
    assert ANALYSES[kind](restricted, **SETTINGS) == whole


@pytest.mark.parametrize("study", ["demo", "synthetic"])
def test_the_check_fails_when_a_kind_read_is_left_out(studies, study):
    # respond reads the match answers too (the Edit-F1 estimate beside the editing load):
    # without them the estimate is gone, so DEPENDS_ON["respond"] = {"respond"} would fail.
    frames = studies[study]
    whole = ANALYSES["respond"](frames, **SETTINGS)
    without_match = ANALYSES["respond"](only_kinds(frames, {"respond"}), **SETTINGS)
    assert without_match != whole
    estimates = [row["edit_f1_estimate"] for row in whole["editing_load"]["by_source"]]
    assert any(e is not None for e in estimates)
    assert all(
        row["edit_f1_estimate"] is None for row in without_match["editing_load"]["by_source"]
    )
    # The rest of the respond tables do not read the match answers.
    for key in ("theme_proportions", "theme_agreement", "similarity", "time_on_task"):
        assert without_match[key] == whole[key]


@pytest.mark.parametrize("kind", KINDS)
def test_a_memo_filled_by_the_other_analyses_does_not_change_a_result(studies, kind):
    # A report runs the analyses on one frames object, which memoises what several of them
    # read (answers split by kind, each kind's answers with their units, the responses'
    # sources, match's pair counts): every other analysis run first - with other settings -
    # leaves the result of this one as on fresh frames.
    frames = studies["demo"]
    shared = dataclasses.replace(frames)  # the same frames, an empty memo of its own
    assert shared.memo == {}
    themes = DEFAULT_CATALOGS.themes  # Other stays last, as a catalog requires
    other_catalogs = dataclasses.replace(DEFAULT_CATALOGS, themes=(*themes[-2::-1], themes[-1]))
    for other in KINDS:
        if other != kind:
            ANALYSES[other](shared, seed=9, n_resamples=20, catalogs=other_catalogs)
    assert shared.memo  # the other analyses did fill it
    fresh = dataclasses.replace(frames)
    assert ANALYSES[kind](shared, **SETTINGS) == ANALYSES[kind](fresh, **SETTINGS)


@pytest.mark.parametrize("study", ["demo", "synthetic"])
@pytest.mark.parametrize(("kind", "key"), [(k, p) for k, ps in PIECES.items() for p in ps])
def test_a_piece_alone_equals_its_key_and_the_rest_reads_its_own_kinds_only(
    studies, study, kind, key
):
    """``PIECES``: the piece computed alone is the whole analysis's key; on frames holding only
    the kinds of ``OWN_DEPENDS_ON`` every other key is the same, and the piece's kinds are
    those of DEPENDS_ON (the whole analysis's)."""
    frames = studies[study]
    whole = ANALYSES[kind](frames, **SETTINGS)
    assert analyse_piece(dataclasses.replace(frames), kind, key, **SETTINGS) == whole[key]
    assert OWN_DEPENDS_ON[kind] | PIECES[kind][key] == DEPENDS_ON[kind]
    own = ANALYSES[kind](only_kinds(frames, OWN_DEPENDS_ON[kind]), **SETTINGS)
    assert own[key] != whole[key]  # the piece reads more than the rest
    assert {k: v for k, v in own.items() if k not in PIECES[kind]} == {
        k: v for k, v in whole.items() if k not in PIECES[kind]
    }
