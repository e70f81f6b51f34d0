"""LiveReport: after each write, the kept report equals a report built from scratch, and only
the analyses fed by the changed answers were computed again."""

from __future__ import annotations

import pytest

from portalreview.analysis import DEPENDS_ON, KINDS
from portalreview.analysis.filters import FrameFilter, filter_choices
from portalreview.reports.json_report import build_report, read_project_catalogs, report_header
from portalreview.reports.live_report import LiveReport, stored_report
from portalreview.store.backends import open_project
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService

pytestmark = pytest.mark.both_backends

SETTINGS = {"seed": 5, "n_resamples": 50}


@pytest.fixture
def demo(fresh_demo):
    """A fresh, writable copy of the demo study for each test (a file, and a server study)."""
    return fresh_demo


def _fresh(project: Project, choice: FrameFilter | None = None) -> dict:
    """The report from scratch: with a filter, the analyses on the answers it keeps and
    ``study`` counting the whole project (docs/report.md)."""
    frames = read_frames(project)
    if choice is None or not choice.active:
        return build_report(project, frames=frames, **SETTINGS)
    report = build_report(project, frames=choice.apply(frames), **SETTINGS)
    return {**report, "study": _study(project, frames)}


def _study(project: Project, frames) -> dict:
    catalogs = read_project_catalogs(project)
    return report_header(project, frames, catalogs, include_drafts=False, **SETTINGS)["study"]


def _flag_one_answer(project: Project, kind: str) -> None:
    """Re-save one submitted answer of ``kind`` with its flag turned over: a change the audit
    log records, of an answer of exactly that kind."""
    service = StudyService(project)
    answers = read_frames(project).answers
    row = answers[(answers.kind == kind) & ~answers.is_gold.astype(bool)].iloc[0]
    annotator = next(a for a in service.annotators() if a.name == row.annotator)
    view = service.get_answer(int(row.unit_id), annotator.id)
    service.save_answer(
        view.unit_id,
        view.payload,
        status="submitted",
        flagged=not view.flagged,
        flag_note="checked by the live-report test",
        annotator_id=annotator.id,
    )


def test_first_refresh_equals_the_report_and_computes_everything(demo):
    live = LiveReport()
    result = live.refresh(demo, **SETTINGS)
    assert result.change.full
    assert result.recomputed == KINDS
    assert result.report == _fresh(demo)


def test_a_refresh_with_nothing_saved_computes_nothing(demo):
    live = LiveReport()
    first = live.refresh(demo, **SETTINGS)
    again = live.refresh(demo, **SETTINGS)
    assert again.recomputed == ()
    assert again.report == first.report


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_answer_recomputes_only_the_analyses_it_feeds(demo, kind):
    live = LiveReport()
    live.refresh(demo, **SETTINGS)
    _flag_one_answer(demo, kind)
    result = live.refresh(demo, **SETTINGS)
    assert not result.change.full
    assert result.change.changed_kinds == {kind}
    expected = tuple(k for k in KINDS if kind in DEPENDS_ON[k])
    assert kind in expected
    assert result.recomputed == expected
    assert result.report == _fresh(demo)


def test_new_settings_or_a_filter_recompute_everything(demo):
    live = LiveReport()
    live.refresh(demo, **SETTINGS)
    reseeded = live.refresh(demo, seed=6, n_resamples=50)
    assert reseeded.recomputed == KINDS
    assert reseeded.report == build_report(demo, seed=6, n_resamples=50)
    people = filter_choices(read_frames(demo)).annotators[:2]
    choice = FrameFilter.of(annotators=people)
    filtered = live.refresh(demo, choice=choice, **SETTINGS)
    assert filtered.recomputed == KINDS
    assert filtered.report == _fresh(demo, choice)
    assert len(filtered.filtered.answers) < len(filtered.frames.answers)


def test_a_filtered_report_follows_saved_answers(demo):
    people = filter_choices(read_frames(demo)).annotators[:2]
    choice = FrameFilter.of(annotators=people)
    live = LiveReport()
    live.refresh(demo, choice=choice, **SETTINGS)
    _flag_one_answer(demo, "rank")
    result = live.refresh(demo, choice=choice, **SETTINGS)
    assert result.recomputed == tuple(k for k in KINDS if "rank" in DEPENDS_ON[k])
    assert result.report == _fresh(demo, choice)


def test_a_filtered_reports_study_counts_the_whole_project(demo):
    """docs/report.md: with a filter, the figures rest on the answers it keeps while
    ``study`` counts the whole project, also after a save and when the figures are kept in
    the project. It counted the kept answers only (two annotators and the gold one)."""
    live = LiveReport()
    whole = live.refresh(demo, **SETTINGS).report["study"]
    choice = FrameFilter.of(annotators=filter_choices(read_frames(demo)).annotators[:1])
    filtered = live.refresh(demo, choice=choice, **SETTINGS)
    assert filtered.report["study"] == whole
    assert filtered.report["urgency"]["n_answers"] < whole["kinds"]["urgency"]["n_answers"]
    _flag_one_answer(demo, "urgency")
    again = live.refresh(demo, choice=choice, **SETTINGS)
    assert again.report["study"] == _fresh(demo)["study"]
    kept = stored_report(demo, choice=choice, **SETTINGS)
    assert kept is not None and kept.report["study"] == again.report["study"]


def test_a_filter_value_the_study_no_longer_has(demo):
    """Refused by default (a typo must not silently keep nothing); with ``drop_unoffered``
    (the dashboard) left out of the filter applied, which the result gives."""
    people = filter_choices(read_frames(demo)).annotators
    choice = FrameFilter.of(annotators=[people[0], "dr_gone"], tags={"topic": ["astrology"]})
    live = LiveReport()
    with pytest.raises(ValueError, match=r"unknown annotator.*'dr_gone'"):
        live.refresh(demo, choice=choice, **SETTINGS)
    result = live.refresh(demo, choice=choice, drop_unoffered=True, **SETTINGS)
    assert result.choice == FrameFilter.of(annotators=people[:1])
    assert result.report == _fresh(demo, result.choice)
    assert choice.left_out_of(result.choice) == [
        "dr_gone has no submitted answer any more",
        "no case is tagged topic=astrology any more",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_the_filter_taken_off_after_a_save_gives_the_whole_report(demo, kind):
    """Unfiltered, filtered, an answer saved, unfiltered again: nothing the filtered refresh
    made (from the two annotators' answers only) is carried into the whole report. It was:
    the refresh failed ("All arrays must be of the same length") or its tables held the
    filtered answers only."""
    people = filter_choices(read_frames(demo)).annotators[:2]
    live = LiveReport(use_cache=False)
    live.refresh(demo, **SETTINGS)
    live.refresh(demo, choice=FrameFilter.of(annotators=people), **SETTINGS)
    _flag_one_answer(demo, kind)
    assert live.refresh(demo, **SETTINGS).report == _fresh(demo)


def test_a_cancelled_refresh_leaves_the_rest_for_the_next(demo):
    """Cancel (``before_each`` raising) after two analyses: the next refresh computes the
    analyses the cancelled one did not reach, though no answer changed since."""

    class Stop(Exception):
        pass

    def stop_at_rank(kind: str) -> None:
        if kind == "rank":
            raise Stop

    live = LiveReport()
    with pytest.raises(Stop):
        live.refresh(demo, before_each=stop_at_rank, **SETTINGS)
    result = live.refresh(demo, **SETTINGS)
    assert result.recomputed == KINDS[KINDS.index("rank") :]
    assert result.report == _fresh(demo)


def test_a_new_case_reads_everything_again(demo):
    live = LiveReport()
    live.refresh(demo, **SETTINGS)
    StudyService(demo).add_case("live-report-new-case", "A new message about my knee.")
    result = live.refresh(demo, **SETTINGS)
    assert result.change.full and result.recomputed == KINDS
    assert result.report["study"]["n_cases"] == _fresh(demo)["study"]["n_cases"]
    assert result.report == _fresh(demo)


def test_another_project_object_starts_afresh(demo, tmp_path):
    live = LiveReport(use_cache=False)  # (with it, the results the project keeps are taken)
    live.refresh(demo, **SETTINGS)
    where = demo.path or demo.url.render_as_string(hide_password=False)
    other = open_project(where, read_only=True)
    try:
        result = live.refresh(other, **SETTINGS)
    finally:
        other.close()
    assert result.change.full and result.recomputed == KINDS


def test_a_match_answer_recomputes_respond_s_editing_load_alone(demo, monkeypatch):
    """respond reads the match answers in its editing load only (analysis.PIECES): after a
    match answer the rest of the respond result is kept and that key computed again alone."""
    from portalreview import analysis

    live = LiveReport(use_cache=False)
    live.refresh(demo, **SETTINGS)
    _flag_one_answer(demo, "match")

    def respond_whole(*_args, **_kwargs):
        raise AssertionError("the respond analysis was computed whole")

    monkeypatch.setitem(analysis.ANALYSES, "respond", respond_whole)
    result = live.refresh(demo, **SETTINGS)
    assert result.recomputed == ("respond", "match")
    monkeypatch.undo()
    assert result.report == _fresh(demo)

    _flag_one_answer(demo, "respond")  # a respond answer: respond computed whole
    monkeypatch.setitem(analysis.ANALYSES, "respond", respond_whole)
    with pytest.raises(AssertionError, match="computed whole"):
        live.refresh(demo, **SETTINGS)
    monkeypatch.undo()
    assert live.refresh(demo, **SETTINGS).report == _fresh(demo)


def test_what_unchanged_answers_made_is_carried_to_the_next_refresh(demo, monkeypatch):
    """After a respond answer the match answers' pair counts (read by respond's editing load)
    are taken from the last refresh's frames (analysis._common.carry_memo), not made again;
    after a match answer they are made again. The report equals a fresh one each time."""
    from portalreview.analysis import match

    live = LiveReport(use_cache=False)
    live.refresh(demo, **SETTINGS)
    made = []
    pair_counts = match.pair_counts
    monkeypatch.setattr(match, "pair_counts", lambda *a: made.append(1) or pair_counts(*a))
    _flag_one_answer(demo, "respond")
    result = live.refresh(demo, **SETTINGS)
    assert result.recomputed == ("respond",) and made == []
    assert "match_pair_counts" in result.filtered.memo
    assert result.report == _fresh(demo)
    _flag_one_answer(demo, "match")
    made.clear()
    result = live.refresh(demo, **SETTINGS)
    assert made == [1]  # made once, shared by match and respond's editing load
    assert result.report == _fresh(demo)


def test_nothing_is_carried_when_the_answers_column_types_changed(demo):
    from dataclasses import replace

    from portalreview.analysis._common import carry_memo, people, sources_of

    frames = read_frames(demo)
    people(frames, "rank")
    sources_of(frames)
    same = replace(frames)
    assert carry_memo(frames, same, frozenset({"eppc"})) == 2
    assert carry_memo(frames, replace(frames), frozenset({"rank"})) == 1  # only the sources
    retyped = replace(frames, answers=frames.answers.astype({"active_seconds": object}))
    assert carry_memo(frames, retyped, frozenset({"eppc"})) == 1  # only the sources
    other_units = replace(frames, units=frames.units.copy())
    assert carry_memo(frames, other_units, frozenset({"eppc"})) == 1  # only the sources


def test_what_no_answer_makes_is_carried_while_its_frames_stay(demo):
    """The cases indexed by id (urgency's inboxes) and the units per kind (the study's
    counts) are carried while their frame is the same object, whatever answers changed."""
    from dataclasses import replace

    from portalreview.analysis._common import carry_memo
    from portalreview.analysis.urgency import cases_by_id
    from portalreview.reports.json_report import _units_per_kind

    frames = read_frames(demo)
    cases_by_id(frames), _units_per_kind(frames)
    every = frozenset(KINDS)
    assert carry_memo(frames, replace(frames), every) == 2
    assert carry_memo(frames, replace(frames, cases=frames.cases.copy()), every) == 1
    assert carry_memo(frames, replace(frames, units=frames.units.copy()), every) == 1
    live = LiveReport(use_cache=False)
    first = live.refresh(demo, **SETTINGS).frames
    _flag_one_answer(demo, "urgency")
    result = live.refresh(demo, **SETTINGS)
    assert result.frames.memo["cases_by_id"] is first.memo["cases_by_id"]
    assert result.frames.memo["cases_by_id"].equals(result.frames.cases.set_index("case_id"))
    assert result.report == _fresh(demo)


def _per_answer_tables(frames, project) -> dict:
    """Every :data:`analysis._common.PER_ANSWER` table of ``frames``, by its key's name."""
    from portalreview.analysis import _common, eppc, match, respond
    from portalreview.reports.json_report import read_project_catalogs

    catalogs = read_project_catalogs(project)
    themes = [t.id for t in catalogs.themes]
    texts = respond.people_composed_texts(frames, themes)
    codes = [c.id for c in catalogs.eppc_codes]
    return {
        "match_pair_counts": match.people_pair_counts(frames),
        "match_theme_recall": match.theme_recall_counts(frames),
        "match_theme_presence": match.people_theme_presence(frames),
        "match_span_columns": match.span_columns(frames),
        "respond_composed_texts": texts.rename_axis("answer_id").reset_index(name="text"),
        "respond_term_counts": respond.people_term_counts(frames, themes),
        "match_pair_records": _pair_records(frames),
        "respond_edit_rows": _edit_rows(frames),
        "eppc_compared_rows": eppc.compared_rows(_common.people(frames, "eppc"), frames, codes),
    }


def _edit_rows(frames):
    """The table behind respond's editing load (kept in the frames' memo)."""
    from portalreview.analysis import editing, respond

    answers = respond.respond_answers(frames)
    editing._kept_edit_rows(answers[answers["mode"] == editing.MODE], frames)
    return frames.memo["respond_edit_rows"]


def _pair_records(frames):
    """The table behind the match result's ``pairs`` (kept in the frames' memo)."""
    from portalreview.analysis import _common, match

    answers = _common.humans(_common.people(frames, "match"))
    match._pair_records(
        match._with_labels(match.people_pair_counts(frames), answers, frames), frames
    )
    return frames.memo["match_pair_records"]


@pytest.mark.parametrize("kind", ["match", "respond", "eppc"])
def test_per_answer_tables_are_made_again_only_for_the_answers_saved(demo, kind, monkeypatch):
    """After answers of a kind change (a new one, another answer saved over one, one taken
    back to a draft), its per-answer tables (analysis._common.PER_ANSWER) are the last
    refresh's with only the saved answers' rows made again (analysis._common.spliced): each
    equals the table made from scratch, row for row and type for type, and the report equals
    a fresh one."""
    import random

    import pandas as pd

    from portalreview.analysis import _common, eppc, match, respond
    from tests.store.test_store_live_frames import payload, resave, stored, todo

    svc = StudyService(demo)
    live = LiveReport(use_cache=False)
    live.refresh(demo, **SETTINGS)
    sizes: list[int] = []
    module, name = {
        "match": (match, "pair_counts"),
        "respond": (respond, "composed_texts"),
        "eppc": (eppc, "_label_rows_of"),
    }[kind]
    made = getattr(module, name)
    monkeypatch.setattr(module, name, lambda a, *rest: sizes.append(len(a)) or made(a, *rest))
    rng = random.Random(7)
    first, second = stored(demo, kind, "submitted")[:2]
    unit, person = todo(demo, kind)

    def new_answer() -> None:
        svc.save_answer(unit, payload(svc, unit, rng), status="submitted", annotator_id=person)

    def another_answer() -> None:
        resave(svc, first, payload(svc, first[1], rng))

    def back_to_draft() -> None:
        resave(svc, second, status="draft")

    for write in (new_answer, another_answer, back_to_draft):
        write()
        sizes.clear()
        result = live.refresh(demo, **SETTINGS)
        assert result.change.changed_kinds == {kind}
        assert sizes in ([1], [])  # only the saved answer's rows (none when it left)
        tables = _per_answer_tables(result.filtered, demo)
        assert set(tables) == set(_common.PER_ANSWER)
        # The eppc ids are numbers of the live report's evidence texts: the same numbering.
        fresh_frames = read_frames(demo)
        fresh_frames.memo["eppc_evidence"] = result.filtered.memo["eppc_evidence"]
        fresh = _per_answer_tables(fresh_frames, demo)
        for key, table in tables.items():
            pd.testing.assert_frame_equal(table, fresh[key], obj=key)
        assert result.report == _fresh(demo)


@pytest.mark.parametrize("kind", ["match", "respond"])
def test_kept_group_figures_equal_figures_computed_with_every_cache_emptied(demo, kind):
    """A group's figures kept by content (``analysis._kept``: match's per-source and judge
    agreement groups, respond's tables and the editing load's groups) are taken again by a
    refresh after a new answer, an answer saved over and one taken back to a draft only where
    they are still right: the report equals one built with every cache emptied first."""
    import random

    from portalreview.analysis import _memo
    from tests.store.test_store_live_frames import payload, resave, stored, todo

    svc = StudyService(demo)
    live = LiveReport(use_cache=False)
    live.refresh(demo, **SETTINGS)
    rng = random.Random(11)
    first, second = stored(demo, kind, "submitted")[:2]
    unit, person = todo(demo, kind)
    writes = (
        lambda: svc.save_answer(
            unit, payload(svc, unit, rng), status="submitted", annotator_id=person
        ),
        lambda: resave(svc, first, payload(svc, first[1], rng)),
        lambda: resave(svc, second, status="draft"),
    )
    for write in writes:
        write()
        before = _memo.cache_stats()["figures.kept_groups"]
        result = live.refresh(demo, **SETTINGS)
        after = _memo.cache_stats()["figures.kept_groups"]
        assert after["hits"] > before["hits"]  # some groups kept, not computed again
        _memo.clear_caches()
        assert result.report == _fresh(demo)


def test_a_per_answer_table_is_made_whole_when_its_types_changed(demo):
    """spliced gives up (None: made from scratch) when the re-read rows' column types are not
    the old table's, rather than mix two types in one column."""
    from dataclasses import replace

    import pandas as pd

    from portalreview.analysis._common import spliced

    frames = read_frames(demo)
    table = frames.match_decisions[["answer_id"]].assign(n=1)
    ids = pd.Series(sorted(set(table.answer_id.tolist())))
    later = replace(frames)
    later.memo[("previous", "t")] = (table, frozenset(ids[:1]))
    assert spliced(later, "t", ids, lambda i: table[table.answer_id.isin(i)].astype(float)) is None
    later.memo[("previous", "t")] = (table, frozenset(ids[:1]))
    same = spliced(later, "t", ids, lambda i: table[table.answer_id.isin(i)])
    assert same.equals(table.reset_index(drop=True))


def test_the_evidence_texts_and_their_decisions_are_carried(demo):
    """The eppc evidence texts' numbers and the relaxed-match decisions made of them
    (analysis.eppc.EvidenceTexts) are carried to the next refresh after an eppc answer; the
    report equals a fresh one."""
    live = LiveReport(use_cache=False)
    first = live.refresh(demo, **SETTINGS)
    evidence = first.filtered.memo["eppc_evidence"]
    decided = len(evidence._keys)
    assert decided > 0 and len(evidence) > 0
    _flag_one_answer(demo, "eppc")
    result = live.refresh(demo, **SETTINGS)
    assert result.recomputed == ("eppc",)
    assert result.filtered.memo["eppc_evidence"] is evidence
    assert len(evidence._keys) == decided  # a flag changes no text: no pair to decide again
    assert result.report == _fresh(demo)


def test_eppc_compares_again_only_the_pairs_of_the_coder_who_saved(demo, monkeypatch):
    """After one person's eppc answer is saved over, the results of the pairs of coders
    without that person are the last refresh's (analysis.eppc.KeptPairs): only that person's
    comparisons and kappas are made again, and the report equals a fresh one."""
    import random

    from portalreview.analysis import eppc
    from tests.store.test_store_live_frames import payload, resave, stored

    svc = StudyService(demo)
    live = LiveReport(use_cache=False)
    first = live.refresh(demo, **SETTINGS)
    made: list[tuple] = []
    result_of = eppc.KeptPairs.result

    def spy(self, place, make, extra=b""):
        return result_of(self, place, lambda: made.append(place) or make(), extra)

    monkeypatch.setattr(eppc.KeptPairs, "result", spy)
    answer = next(a for a in stored(demo, "eppc", "submitted") if not a[3])
    answers = first.frames.answers
    person = answers.annotator[answers.answer_id == answer[0]].item()
    resave(svc, answer, payload(svc, answer[1], random.Random(4)))
    result = live.refresh(demo, **SETTINGS)
    assert result.recomputed == ("eppc",)
    assert made and all(person in place[2:4] for place in made)
    sections = ("vs_gold", "between_annotators", "kappa")
    assert sum(len(result.report["eppc"][k]) for k in sections) > len(made)
    assert result.report == _fresh(demo)


def test_eppc_rows_of_evidence_texts_not_carried_are_made_whole(demo, monkeypatch):
    """The eppc compared rows hold numbers of the evidence texts that numbered them: when
    those are not carried (too many texts), the next refresh numbers afresh and makes the
    rows whole, not spliced from the last refresh's; the report equals a fresh one."""
    import random

    import pandas as pd

    from portalreview.analysis import eppc
    from tests.store.test_store_live_frames import payload, todo

    svc = StudyService(demo)
    live = LiveReport(use_cache=False)
    first = live.refresh(demo, **SETTINGS)
    evidence = first.filtered.memo["eppc_evidence"]
    monkeypatch.setattr(eppc.EvidenceTexts, "MAX_TEXTS", 0)  # carried no more
    unit, person = todo(demo, "eppc")
    answer = payload(svc, unit, random.Random(3))
    svc.save_answer(unit, answer, status="submitted", annotator_id=person)
    result = live.refresh(demo, **SETTINGS)
    numbering = result.filtered.memo["eppc_evidence"]
    assert numbering is not evidence and result.change.changed_kinds == {"eppc"}
    tables = _per_answer_tables(result.filtered, demo)
    fresh = read_frames(demo)
    fresh.memo["eppc_evidence"] = numbering
    expected = _per_answer_tables(fresh, demo)["eppc_compared_rows"]
    pd.testing.assert_frame_equal(tables["eppc_compared_rows"], expected)
    assert result.report == _fresh(demo)


@pytest.mark.parametrize("kind", ["match", "respond", "eppc"])
def test_drafts_included_the_spliced_tables_follow_a_draft_and_its_submission(demo, kind):
    """With drafts in the report, a new draft and then its submission are spliced into the
    per-answer tables like any other save: the report equals a fresh one with drafts."""
    import random

    from tests.store.test_store_live_frames import payload, todo

    svc = StudyService(demo)
    live = LiveReport(include_drafts=True, use_cache=False)
    live.refresh(demo, **SETTINGS)
    unit, person = todo(demo, kind)
    answer = payload(svc, unit, random.Random(3))
    for status in ("draft", "submitted"):
        svc.save_answer(unit, answer, status=status, annotator_id=person)
        result = live.refresh(demo, **SETTINGS)
        assert not result.change.full and result.change.changed_kinds == {kind}
        fresh = build_report(demo, include_drafts=True, **SETTINGS)
        assert result.report == fresh
