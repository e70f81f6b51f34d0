"""Study set-up: unit sets from recipes, assignment with overlap (balanced, reproducible from a
seed), progress per annotator and kind, and the CLI verbs."""

from __future__ import annotations

import json
import os
import shlex
from collections import Counter

import pytest
from sqlalchemy import func, select

from portalreview.cli import main
from portalreview.store.models import Assignment, AuditEntry, RankMember, Unit
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    Cancelled,
    CaseFilter,
    ResponseFilter,
    SetupError,
    UnitSpec,
    assign_units,
    create_unit_set,
    import_command,
    plan_assignment,
    plan_units,
    progress_by_kind,
    split_with_overlap,
    study_progress,
)
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

PEOPLE = ["ava", "ben", "cy"]


def test_overlap_gives_the_requested_counts():
    units = list(range(1, 101))
    shared, split = split_with_overlap(units, PEOPLE, overlap=40, seed=7)
    assert len(shared) == 40
    assert all(set(shared) <= set(split[p]) for p in PEOPLE)
    assert [len(split[p]) for p in PEOPLE] == [60, 60, 60]
    raters = Counter(u for p in PEOPLE for u in split[p])
    assert {u for u, n in raters.items() if n == 3} == set(shared)
    assert {n for u, n in raters.items() if u not in shared} == {1}
    assert set(raters) == set(units)  # every unit handed out

    _, uneven = split_with_overlap(list(range(101)), PEOPLE, overlap=40, seed=7)
    assert sorted(len(v) for v in uneven.values()) == [60, 60, 61]
    _, doubled = split_with_overlap(units, PEOPLE, overlap=10, raters_per_unit=2, seed=7)
    raters = Counter(u for p in PEOPLE for u in doubled[p])
    assert sorted(Counter(raters.values()).items()) == [(2, 90), (3, 10)]
    assert [len(doubled[p]) for p in PEOPLE] == [70, 70, 70]


def test_the_split_is_reproducible_from_its_seed():
    units = list(range(50))
    first = split_with_overlap(units, PEOPLE, overlap=12, seed=3)
    assert split_with_overlap(units, PEOPLE, overlap=12, seed=3) == first
    other = split_with_overlap(units, PEOPLE, overlap=12, seed=4)
    assert other != first and len(other[0]) == 12


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"overlap": 51}, "between 0 and 50"),
        ({"raters_per_unit": 4}, "between 1 and 3"),
        ({"annotators": ["ava"], "overlap": 3}, "two annotators"),
        ({"annotators": ["ava", "ava"]}, "listed twice"),
        ({"annotators": []}, "at least one"),
    ],
)
def test_impossible_splits_are_refused(kwargs, message):
    options = {"annotators": PEOPLE, **kwargs}
    with pytest.raises(SetupError, match=message):
        split_with_overlap(list(range(50)), options.pop("annotators"), **options)


def _inbox_project(path, n_cases: int = 12) -> Project:
    project = Project.create(path, name="Inbox study")
    svc = StudyService(project)
    for name in PEOPLE:
        svc.add_annotator(name)
    for i in range(n_cases):
        svc.add_case(
            f"m{i:02d}",
            f"Message number {i}. It hurts.",
            urgency_level=1 + i % 6,
            tags={"inbox": "ward-3"},
        )
    svc.add_case("other", "Not in the inbox.")
    return project


def _assignments(project: Project, set_name: str) -> dict[str, list[int]]:
    """annotator -> unit positions of the set, for comparing two projects."""
    return {r.annotator: r.assigned for r in study_progress(project) if r.unit_set == set_name} | {
        "positions": [
            (name, u.position) for name in PEOPLE for u in _units_of(project, set_name, name)
        ]
    }


def _units_of(project: Project, set_name: str, name: str) -> list[Unit]:
    svc = StudyService(project)
    person = svc.as_viewer(name)
    with project.read() as s:
        ids = [q.unit_id for q in person.queue("urgency")]
        return [s.get(Unit, i) for i in ids]


def test_urgency_pairs_of_an_inbox_assigned_with_overlap(tmp_path):
    with _inbox_project(tmp_path / "a.prproj") as project:
        plan = plan_units(project, "urgency", inbox="ward-3", batch_size=20)
        assert len(plan) == 66 and plan.kind == "urgency"  # 12 choose 2
        made = create_unit_set(project, plan)
        with project.read() as s:
            units = list(s.scalars(select(Unit).where(Unit.unit_set_id == made.unit_set_id)))
        assert Counter(u.batch for u in units) == {
            "batch-1": 20,
            "batch-2": 20,
            "batch-3": 20,
            "batch-4": 6,
        }
        assignment = plan_assignment(project, made.name, PEOPLE, overlap=10, seed=5)
        assert sorted(assignment.counts().values()) == [28, 29, 29]  # 10 + 56 split
        assign_units(project, assignment)
        rows = [r for r in study_progress(project) if r.unit_set == made.name]
        assert sorted(r.assigned for r in rows) == [28, 29, 29]
        assert {r.shared for r in rows} == {10} and {r.submitted for r in rows} == {0}
        (by_kind,) = {r.kind for r in progress_by_kind(rows)}
        assert by_kind == "urgency"
        with project.read() as s:
            actions = [e.action for e in s.scalars(select(AuditEntry))]
        assert actions == ["annotator"] * 3 + ["setup", "assign"]  # 3 people added first
        with pytest.raises(SetupError, match="already assigned"):
            plan_assignment(project, made.name, PEOPLE, overlap=10, seed=5)
        first = _assignments(project, made.name)

    # The same study set up with the same seeds gets the same hand-out; another seed not.
    with _inbox_project(tmp_path / "b.prproj") as again:
        made = create_unit_set(again, plan_units(again, "urgency", inbox="ward-3", batch_size=20))
        assign_units(again, plan_assignment(again, made.name, PEOPLE, overlap=10, seed=5))
        assert _assignments(again, made.name) == first
    with _inbox_project(tmp_path / "c.prproj") as other:
        made = create_unit_set(other, plan_units(other, "urgency", inbox="ward-3", batch_size=20))
        assign_units(other, plan_assignment(other, made.name, PEOPLE, overlap=10, seed=6))
        assert _assignments(other, made.name) != first


@pytest.mark.parametrize("recipe", ["rank", "urgency"])
def test_a_project_without_cases_says_how_to_add_them(project, recipe):
    """A project just made (File > New project…) was told "no case matches (every case)",
    or, for urgency, to name an inbox: nothing said it has no cases, nor how to add them."""
    with pytest.raises(SetupError) as refused:
        plan_units(project, recipe)
    said = str(refused.value)
    assert "no cases yet" in said and "docs/formats.md" in said
    assert "portalreview import " in said and project.location in said


@pytest.mark.skipif(os.name == "nt", reason="a POSIX shell's quoting")
def test_the_import_command_given_survives_the_shell(tmp_path):
    """The hint quoted a path only when it held a space: "study(1).prproj" (a browser's name
    for a second download) gave bash a syntax error (found by an explorer)."""
    for name in ("study(1).prproj", "a & b.prproj", "$HOME's.prproj", "plain.prproj"):
        with Project.create(tmp_path / name, name="S") as project:
            words = shlex.split(import_command(project))
        assert words == ["portalreview", "import", str(tmp_path / name), "FILE"]


def _pair(unit: Unit | UnitSpec) -> tuple[int, int]:
    """An urgency or empathy unit's two sides, in the order stored (or planned)."""
    if unit.case_b_id is not None:
        return unit.case_id, unit.case_b_id
    return unit.response_id, unit.response_b_id


def test_a_saved_pair_does_not_tell_its_reference_by_its_sides(tmp_path):
    """Planned, urgency pairs list the inbox's cases in the order they were imported and
    empathy pairs the original reply first: stored so, a clinician who read her copy or the
    server with her own SQL knew which reply was the edit (or, from an inbox imported sorted by
    urgency, which patient was the more urgent). The sides are drawn as the set is saved (all
    one way by chance: 2**-65 for the 66 urgency pairs, 2**-39 for the 40 empathy pairs)."""
    with _inbox_project(tmp_path / "s.prproj") as project:
        svc = StudyService(project)
        for i in range(40):
            case = svc.add_case(f"e{i}", f"Is my rash number {i} normal?")
            svc.add_response(case, f"o{i}", "It is.", production="real_time")
            svc.add_response(case, f"x{i}", "I am sorry. It is.", production="edited_empathy")
        plans = [plan_units(project, "urgency", inbox="ward-3"), plan_units(project, "empathy")]
        for plan in plans:
            made = create_unit_set(project, plan)
            with project.read() as s:
                saved = s.scalars(
                    select(Unit).where(Unit.unit_set_id == made.unit_set_id).order_by(Unit.position)
                ).all()
                saved = [_pair(u) for u in saved]
            planned = [_pair(u) for u in plan.units]
            assert [set(p) for p in saved] == [set(p) for p in planned]
            swapped = sum(s != p for s, p in zip(saved, planned, strict=True))
            assert 0 < swapped < len(planned), plan.kind


def test_recipes_on_a_small_study(project):
    study = build_small_study(project)
    rank = plan_units(project, "rank", name="Rank them")
    assert len(rank) == 1 and set(rank.units[0].members) == {
        study.draft1,
        study.draft2,
        study.edited,
    }
    match = plan_units(project, "match")
    assert {(u.response_id, u.response_b_id) for u in match.units} == {
        (ref, draft)
        for ref in (study.reference, study.original)
        for draft in (study.draft1, study.draft2, study.edited)
    }
    with pytest.raises(SetupError, match="makes no unit"):
        plan_units(project, "iap")  # one theme-guided clinician response only
    empathy = plan_units(
        project,
        "empathy",
        first=ResponseFilter.parse(["author=ben"]),
        second=ResponseFilter.parse(["production=edited_empathy"]),
    )
    assert [(u.response_id, u.response_b_id) for u in empathy.units] == [
        (study.original, study.edited)
    ]
    eppc = plan_units(project, "eppc", cases=CaseFilter.parse(external_ids=["c1"]))
    assert len(eppc) == len(study.service.sentences(case_id=study.case1))
    with pytest.raises(SetupError, match="no case"):
        plan_units(project, "respond", cases=CaseFilter.parse(tags=["split=train"]))
    with pytest.raises(SetupError, match="unknown production"):
        ResponseFilter.parse(["production=poem"])
    made = create_unit_set(project, rank)
    with project.read() as s:
        (unit,) = s.scalars(select(Unit).where(Unit.unit_set_id == made.unit_set_id))
        members = set(
            s.scalars(select(RankMember.response_id).where(RankMember.unit_id == unit.id))
        )
    assert members == {study.draft1, study.draft2, study.edited}
    with pytest.raises(SetupError, match="already a unit set"):
        create_unit_set(project, rank)


@pytest.mark.parametrize("seed", [None, 3])
def test_eppc_batches_count_messages_and_keep_a_message_whole(project, seed):
    """003 Sec. 3.2.2 tracks kappa per sample of 50 messages: an eppc batch holds N messages
    (the case's and each response's sentences), never part of one."""
    study = build_small_study(project)
    svc = study.service
    drafts = [study.draft1, study.draft2, study.edited]
    message_of = {x.id: ("case", study.case1) for x in svc.sentences(case_id=study.case1)}
    for draft in drafts:
        message_of |= {x.id: ("response", draft) for x in svc.sentences(response_id=draft)}
    plan = plan_units(
        project,
        "eppc",
        cases=CaseFilter.parse(external_ids=["c1"]),
        first=ResponseFilter.parse(["author_kind=model"]),
        batch_size=2,
        seed=seed,
    )
    assert len(plan) == len(message_of) > 4  # 4 messages, several sentences each
    batch_of: dict[tuple[str, int], set[str]] = {}
    for unit in plan.units:
        batch_of.setdefault(message_of[unit.sentence_id], set()).add(unit.batch)
    assert all(len(batches) == 1 for batches in batch_of.values())  # no message split
    messages_per_batch = Counter(batch for (batch,) in batch_of.values())
    assert messages_per_batch == {"batch-1": 2, "batch-2": 2}
    assert any("2 batch(es) of up to 2 messages" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("recipe", "option", "takes"),
    [
        ("respond", "second", "no responses"),
        ("respond", "first", "no responses"),
        ("urgency", "first", "no responses"),
        ("adaptive-inbox", "second", "no responses"),
        ("rank", "second", "only --first"),
        ("eppc", "second", "only --first"),
    ],
)
def test_a_response_filter_the_recipe_does_not_read_is_refused(project, recipe, option, takes):
    """Ignored, it would make units other than the ones asked for (respond units over no
    draft) without a word."""
    build_small_study(project)
    given = {option: ResponseFilter.parse(["author_kind=model"])}
    with pytest.raises(SetupError, match=f"{recipe} recipe takes {takes}: leave out --{option}"):
        plan_units(project, recipe, inbox="x", **given)


def test_a_cancelled_set_up_saves_nothing(tmp_path):
    with _inbox_project(tmp_path / "a.prproj") as project:
        plan = plan_units(project, "urgency", inbox="ward-3")
        calls = []
        with pytest.raises(Cancelled):
            create_unit_set(
                project,
                plan,
                progress=lambda d, t: calls.append((d, t)),
                cancel=lambda: len(calls) > 3,
            )
        with project.read() as s:
            assert s.scalar(select(Unit.id)) is None
        made = create_unit_set(project, plan, progress=lambda d, t: calls.append((d, t)))
        assert calls[-1] == (66, 66)
        with pytest.raises(Cancelled):
            assign_units(project, plan_assignment(project, made.name, PEOPLE), cancel=lambda: True)
        assert all(r.unit_set != made.name for r in study_progress(project))


def test_setup_assign_and_progress_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "a.prproj"
    _inbox_project(path).close()
    assert main(["setup", str(path), "--add-annotator", "dee"]) == 0
    assert main(["setup", str(path), "urgency", "--inbox", "ward-3", "--dry-run"]) == 0
    assert "66 urgency unit(s)" in capsys.readouterr().out
    assert main(["setup", str(path), "urgency", "--inbox", "ward-3", "--name", "Ward 3"]) == 0
    args = ["assign", str(path), "Ward 3", "--overlap", "6", "--seed", "2"]
    for name in ["ava", "ben", "cy", "dee"]:
        args += ["--annotator", name]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "6 answered by all of ava, ben, cy, dee" in out and "dee: 21 unit(s)" in out
    assert main(["progress", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sum(r["assigned"] for r in rows) == 6 * 4 + 60 and {r["shared"] for r in rows} == {6}
    assert main(["progress", str(path), "--by-kind"]) == 0
    assert "urgency" in capsys.readouterr().out
    assert main(["progress", str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["unit", "set", "annotator", "assigned", "shared", "drafts", "done"]
    assert len({len(line) for line in table}) == 1  # the columns line up
    assert any(line.startswith("Ward 3 (urgency)  dee ") for line in table)


def test_progress_names_every_unit_set_whole(tmp_path, capsys):
    """A long unit set's name was cut at 33 characters ("Match drafts to the reference (ma"),
    which could leave two sets looking the same."""
    path = tmp_path / "a.prproj"
    _inbox_project(path).close()
    long_name = "Ward 3 urgency pairs, second round after the audit"
    assert main(["setup", str(path), "urgency", "--inbox", "ward-3", "--name", long_name]) == 0
    assert main(["assign", str(path), long_name, "--annotator", "ava"]) == 0
    capsys.readouterr()
    assert main(["progress", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{long_name} (urgency)  ava " in out
    assert main(["assign", str(path), "Nope", "--annotator", "ava"]) == 2
    assert "there is no unit set 'Nope'" in capsys.readouterr().err


@pytest.mark.parametrize(("n", "k"), [(30, 4), (30, 5), (10, 2), (9, 4), (12, 7)])
def test_balanced_pairs_compare_every_message_k_times(n, k):
    from collections import Counter

    from portalreview.store.study_setup import balanced_pairs

    ids = list(range(100, 100 + n))
    pairs = balanced_pairs(ids, k, seed=3)
    assert len(set(pairs)) == len(pairs)
    assert all(a != b and a in ids and b in ids for a, b in pairs)
    counts = Counter(x for pair in pairs for x in pair)
    assert set(counts.values()) == {k}  # k even, or an even inbox
    assert len(pairs) == n * k // 2
    assert balanced_pairs(ids, k, seed=3) == pairs
    assert balanced_pairs(ids, k, seed=4) != pairs


def test_balanced_pairs_with_an_odd_count_on_an_odd_inbox_and_bad_counts():
    from collections import Counter

    from portalreview.store.study_setup import SetupError, balanced_pairs

    counts = Counter(x for pair in balanced_pairs(list(range(9)), 3) for x in pair)
    assert set(counts.values()) == {4}  # one more each, as documented
    with pytest.raises(SetupError, match="between 1 and 8"):
        balanced_pairs(list(range(9)), 9)


def test_an_inbox_sample_with_four_comparisons_per_message(tmp_path, capsys):
    from portalreview.cli import main

    with _inbox_project(tmp_path / "s.prproj") as project:
        plan = plan_units(project, "urgency", inbox="ward-3", comparisons_per_message=4)
        assert len(plan) == 12 * 4 // 2
        per_case = Counter(c for u in plan.units for c in (u.case_id, u.case_b_id))
        assert set(per_case.values()) == {4}
        assert plan.options["comparisons_per_message"] == 4
    argv = ["setup", str(tmp_path / "s.prproj"), "urgency", "--inbox", "ward-3"]
    assert main([*argv, "--comparisons-per-message", "4", "--dry-run"]) == 0
    assert "24" in capsys.readouterr().out


def test_an_odd_count_in_an_odd_inbox_says_how_often_each_message_is_compared(tmp_path):
    """Three comparisons asked for in an inbox of 11: each message is compared 4 times, which
    the note said of "some" only."""
    with _inbox_project(tmp_path / "s.prproj", n_cases=11) as project:
        plan = plan_units(project, "urgency", inbox="ward-3", comparisons_per_message=3)
    per_case = Counter(c for u in plan.units for c in (u.case_id, u.case_b_id))
    assert len(per_case) == 11 and set(per_case.values()) == {4}
    assert "each message compared 4 times (3 asked for: an odd count needs an even" in (
        plan.summary()
    )


def test_assign_reads_a_set_name_made_of_digits_as_the_name(tmp_path, capsys):
    """A set named "1" is handed out by `assign 1`, not the set whose id is 1; an id still
    works where no set has that name."""
    path = tmp_path / "a.prproj"
    with _inbox_project(path) as project:
        for name in ["Pilot", "1", "Later"]:  # ids 1, 2, 3
            create_unit_set(project, plan_units(project, "urgency", inbox="ward-3", name=name))
    assert main(["assign", str(path), "1", "--annotator", "ava"]) == 0
    assert main(["assign", str(path), "3", "--annotator", "ben"]) == 0  # no set "3": id 3
    with Project.open(path) as project:
        handed = {(r.unit_set, r.annotator) for r in study_progress(project) if r.assigned}
    assert handed == {("1", "ava"), ("Later", "ben")}
    assert main(["assign", str(path), "4", "--annotator", "cy"]) == 2
    assert "there is no unit set '4'" in capsys.readouterr().err


def _respond_study(project: Project, n_cases: int = 6) -> tuple[StudyService, str]:
    """ava, ben and the PI pat; a respond set "R" of ``n_cases`` units; (service, a theme id)."""
    svc = StudyService(project)
    for name in ["ava", "ben"]:
        svc.add_annotator(name)
    svc.add_annotator("pat", role="pi")
    for i in range(n_cases):
        svc.add_case(f"m{i}", f"Message {i}. Please help.")
    create_unit_set(project, plan_units(project, "respond", name="R"))
    return svc, svc.catalogs.themes[0].id


def _counts(project: Project) -> dict[str, tuple[int, int]]:
    return {r.annotator: (r.assigned, r.submitted) for r in study_progress(project)}


def test_a_pi_who_adjudicates_their_own_unit_keeps_it(new_project):
    """A unit handed to the PI stays their work when they also save a gold answer on it: in
    their queue and progress, in the study's progress, and not free to hand out again."""
    project = new_project()
    svc, theme = _respond_study(project, n_cases=4)
    assign_units(project, plan_assignment(project, "R", ["ava", "pat"], seed=1))
    pat = svc.as_viewer("pat")
    mine = [q.unit_id for q in pat.queue("respond")]
    pat.save_answer(mine[0], {"parts": {theme: "mine"}}, status="submitted")
    before = _counts(project)
    assert str(pat.progress("respond")) == "1 of 2 done" and before["pat"] == (2, 1)
    pat.save_answer(mine[0], {"parts": {theme: "gold"}}, status="submitted", gold=True)
    assert [q.unit_id for q in pat.queue("respond")] == mine
    assert str(pat.progress("respond")) == "1 of 2 done" and _counts(project) == before
    with pytest.raises(SetupError, match="already assigned"):
        plan_assignment(project, "R", ["ben"])


def test_gold_saved_before_the_hand_out_becomes_the_pis_work(new_project):
    """Units the PI adjudicated before handing the set out with themself included are given
    to them as planned (the gold answer's holder becomes their work), none to nobody."""
    project = new_project()
    svc, theme = _respond_study(project)
    pat = svc.as_viewer("pat")
    for unit_id in (1, 2):
        pat.save_answer(unit_id, {"parts": {theme: "gold"}}, status="submitted", gold=True)
    assert pat.queue("respond") == [] and _counts(project) == {}
    plan = plan_assignment(project, "R", ["ava", "ben", "pat"], overlap=6)
    assert plan.counts() == {"ava": 6, "ben": 6, "pat": 6}
    assign_units(project, plan)
    assert len(pat.queue("respond")) == 6 and _counts(project)["pat"] == (6, 0)
    assert pat.get_answer(1, gold=True) is not None  # the gold answers stay as they were

    other = new_project()
    svc, theme = _respond_study(other)
    pat = svc.as_viewer("pat")
    for unit_id in range(1, 7):
        pat.save_answer(unit_id, {"parts": {theme: "gold"}}, status="submitted", gold=True)
    plan = plan_assignment(other, "R", ["ava", "pat"])
    assign_units(other, plan)
    assert sorted(q.unit_id for q in pat.queue("respond")) == sorted(plan.by_annotator["pat"])
    assert sum(n for n, _ in _counts(other).values()) == 6  # every unit to someone


# --- a second annotator for hard pairs (seed 002 App. A.5.1) ---------------------------------


def _flagged_pair(project: Project) -> tuple[StudyService, int]:
    """An inbox of four messages, its pairs handed to ava alone; ava answers one pair and asks
    for a second annotator (and answers another without asking); (service, the flagged unit)."""
    svc = StudyService(project)
    for name in PEOPLE:
        svc.add_annotator(name)
    svc.add_annotator("pat", role="pi")
    for i in range(4):
        svc.add_case(f"m{i}", f"Message {i}.", urgency_level=i + 1, tags={"inbox": "box"})
    create_unit_set(project, plan_units(project, "urgency", inbox="box", name="Box"))
    assign_units(project, plan_assignment(project, "Box", ["ava"]))
    ava = svc.as_viewer("ava")
    flagged, plain = (q.unit_id for q in ava.queue("urgency")[:2])
    for unit_id, ask in ((flagged, True), (plain, False)):
        first = ava.read_unit(unit_id).cases[0].id
        answer = {"more_urgent_case_id": first, "ask_second": ask}
        ava.save_answer(unit_id, answer, status="submitted")
    return svc, flagged


def _second_events(project: Project) -> list[tuple[int | None, dict]]:
    with project.read() as s:
        rows = s.scalars(select(AuditEntry).where(AuditEntry.action == "assign"))
        events = [(e.actor_id, json.loads(e.new_json)) for e in rows]
    return [(actor, d) for actor, d in events if "second_annotator" in d]


def test_a_pair_asking_for_a_second_annotator_goes_to_a_second_person(new_project):
    """The pair ava asked about is listed, goes to ben as the same unit (recorded, naming the
    PI), is no longer listed, and ben's answer joins ava's in the agreement figures."""
    from portalreview.analysis import urgency
    from portalreview.store.frames import read_frames
    from portalreview.store.study_setup import assign_second_annotator, hard_pairs

    project = new_project()
    svc, flagged = _flagged_pair(project)
    (pair,) = hard_pairs(project)
    assert (pair.unit_id, pair.unit_set, pair.asked_by) == (flagged, "Box", "ava")
    pat = next(a.id for a in svc.annotators() if a.name == "pat")

    done = assign_second_annotator(project, [flagged], "ben", by=pat)
    assert (done.assigned, done.already) == ((flagged,), ())
    ben = svc.as_viewer("ben")
    assert [q.unit_id for q in ben.queue("urgency")] == [flagged]
    assert hard_pairs(project) == []
    assert _second_events(project) == [
        (
            pat,
            {
                "unit_set": "Box",
                "second_annotator": "ben",
                "units": [flagged],
                "asked_by": ["ava"],
                "counts": {"ben": 1},
            },
        )
    ]
    assert {r.annotator: r.shared for r in study_progress(project)} == {"ava": 1, "ben": 1}

    second = ben.read_unit(flagged).cases[1].id
    ben.save_answer(flagged, {"more_urgent_case_id": second}, status="submitted")
    figures = urgency.analyse(read_frames(project), seed=3, n_resamples=50)["agreement"]
    assert (figures["n_units"], figures["n_answers"], figures["n_annotators"]) == (1, 2, 2)


def test_a_second_annotator_is_refused_when_it_cannot_be_one(new_project):
    """The one who asked, a model, an unknown name, a pair nobody asked about and a unit that
    is no pair are refused with a message, and nothing is saved."""
    from portalreview.store.study_setup import assign_second_annotator, hard_pairs

    project = new_project()
    svc, flagged = _flagged_pair(project)
    svc.add_annotator("gpt", is_model=True)
    plain = next(q.unit_id for q in svc.as_viewer("ava").queue("urgency") if q.unit_id != flagged)
    with project.read() as s:
        before = (s.scalar(select(func.count()).select_from(Assignment)), _audit_count(s))
    refused = [
        ([flagged], "ava", "ava answered unit .* asked for a second annotator: choose someone"),
        ([flagged], "gpt", "gpt is a model"),
        ([flagged], "zed", "no annotator called 'zed'"),
        ([flagged, plain], "ben", f"no submitted answer to unit {plain} asks for a second"),
        ([999], "ben", "there is no unit 999"),
        ([], "ben", "choose at least one hard pair"),
    ]
    for units, name, message in refused:
        with pytest.raises(SetupError, match=message):
            assign_second_annotator(project, units, name)
    with project.read() as s:
        assert (s.scalar(select(func.count()).select_from(Assignment)), _audit_count(s)) == before
    assert [p.unit_id for p in hard_pairs(project)] == [flagged]

    assign_second_annotator(project, [flagged], "cy")
    with pytest.raises(SetupError, match=f"unit {flagged} has 2 annotators already"):
        assign_second_annotator(project, [flagged], "ben")


def test_a_second_annotator_twice_changes_nothing_the_second_time(new_project):
    """Idempotent: the same pair to the same person again is left as it is, and not recorded
    again; the PI may be the second annotator (a gold answer's holder becomes their work)."""
    from portalreview.store.study_setup import assign_second_annotator

    project = new_project()
    svc, flagged = _flagged_pair(project)
    pat = svc.as_viewer("pat")
    gold = pat.read_unit(flagged).cases[0].id
    pat.save_answer(flagged, {"more_urgent_case_id": gold}, status="submitted", gold=True)
    first = assign_second_annotator(project, [flagged], "pat")
    again = assign_second_annotator(project, [flagged, flagged], "pat")
    assert (first.assigned, again.assigned, again.already) == ((flagged,), (), (flagged,))
    assert "1 they had already" in again.summary()
    assert len(_second_events(project)) == 1
    assert [q.unit_id for q in pat.queue("urgency")] == [flagged]
    assert pat.get_answer(flagged, gold=True) is not None


def _audit_count(s) -> int:
    return s.scalar(select(func.count()).select_from(AuditEntry))


def test_hard_pairs_listed_and_handed_out_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "a.prproj"
    with Project.create(path, name="t") as project:
        svc, flagged = _flagged_pair(project)
        svc.add_annotator("llama", is_model=True)
    assert main(["hard-pairs", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"unit {flagged} of 'Box'" in out and "asked by ava" in out
    assert main(["hard-pairs", str(path), "--to", "ava"]) == 2
    assert "ava asked for a second annotator on every pair listed" in capsys.readouterr().err
    assert main(["hard-pairs", str(path), "--to", "ben", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Would give 1 hard pair(s) to ben. Dry run: nothing was saved." in out
    # a dry run refuses what the hand-out refuses (it once said yes to anyone)
    for who, why in [("nobody", "there is no annotator called 'nobody'"),
                     ("llama", "llama is a model, not a person")]:  # fmt: skip
        assert main(["hard-pairs", str(path), "--to", who, "--dry-run"]) == 2
        assert why in capsys.readouterr().err
    assert main(["hard-pairs", str(path), "--to", "ben", "--unit", str(flagged)]) == 0
    assert "1 hard pair(s) given to ben" in capsys.readouterr().out
    assert main(["hard-pairs", str(path)]) == 0
    assert "No pair is waiting for a second annotator" in capsys.readouterr().out
    # repeated, as the guide says it may be: nothing new, no error, dry run or not
    unit = ["--unit", str(flagged)]
    assert main(["hard-pairs", str(path), "--to", "ben", *unit, "--dry-run"]) == 0
    assert "Would give 0 hard pair(s) to ben (1 they have already" in capsys.readouterr().out
    assert main(["hard-pairs", str(path), "--to", "ben", *unit]) == 0
    assert "0 hard pair(s) given to ben (1 they had already" in capsys.readouterr().out
    assert main(["hard-pairs", str(path), "--to", "ben"]) == 0
    assert "nothing was given" in capsys.readouterr().out
    assert main(["hard-pairs", str(path), "--to", "bem"]) == 2  # misspelt: said, not "nothing"
    assert "there is no annotator called 'bem'" in capsys.readouterr().err
    with Project.open(path, read_only=True) as project:
        ben = StudyService(project).as_viewer("ben")
        assert [q.unit_id for q in ben.queue("urgency")] == [flagged]


def test_added_names_lose_their_outer_spaces_and_a_name_twice_is_refused(tmp_path, capsys):
    """`new --annotator " ava "` and `setup --add-annotator " ben"` stored the names with their
    spaces (an export and an import made them "ava" and "ben"); " ava" once "ava" exists was a
    second person with the same name as an import reads it."""
    path = tmp_path / "a.prproj"
    assert main(["new", str(path), "--annotator", " ava "]) == 0
    assert main(["setup", str(path), "--add-annotator", " ben"]) == 0
    assert "Added ben\n" in capsys.readouterr().out
    assert main(["setup", str(path), "--add-annotator", "ava\t"]) != 0
    assert "there is already an annotator called 'ava'" in capsys.readouterr().err
    assert main(["setup", str(path), "--add-annotator", "cy", "--add-annotator", "cy "]) != 0
    assert "there is already an annotator called 'cy'" in capsys.readouterr().err
    assert main(["setup", str(path), "--add-annotator", "jos\u00e9"]) == 0
    assert main(["setup", str(path), "--add-annotator", "jose\u0301"]) != 0  # (macOS' é)
    assert "there is already an annotator called 'jos\u00e9'" in capsys.readouterr().err
    with Project.open(path) as project:
        names = [a.name for a in StudyService(project).annotators()]
        assert names == ["ava", "ben", "jos\u00e9"]
