"""The inbox view reads only the chosen inbox's pairs, their answers in bulk: on a study of
10,000 cases it read every urgency unit of the judges one by one (about six queries each) to
show 30 messages, 13-24 s, and its progress bar counted 11,200 pairs where the inbox had 149.
What it shows is exactly what that unit-by-unit read gave, for every viewer and every judge,
with drafts, choices not made yet, gold answers, pairs across two inboxes and an adaptive set,
on a file and on a server, and through a clinician's own database login (row-level security)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import pytest
from sqlalchemy import event

from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)
from portalreview.tasks.urgency.inbox import InboxResult, Judge, judges, load_inbox, sort_inbox

WARD_A = [("a1", 1), ("a2", 2), ("a3", 3), ("a4", 5), ("a5", None)]  # (id, reference level)
WARD_B = [("b1", 2), ("b2", 4), ("b3", 6), ("b4", 3)]


def unit_by_unit(service: StudyService, inbox: str, judge: Judge) -> tuple[InboxResult, int]:
    """The inbox as ``load_inbox`` read it before: every urgency unit of the judge's queues, one
    by one, kept when both its cases are the inbox's; and how many units were kept."""
    cases = service.inboxes().get(inbox, ())
    members = {c.id for c in cases}
    units: set[int] = set()
    adaptive_units: set[int] = set()
    for annotator_id in judge.annotator_ids:
        for item in service.queue("urgency", annotator_id=annotator_id):
            units.add(item.unit_id)
            if item.adaptive:
                adaptive_units.add(item.unit_id)
    wanted = set(judge.annotator_ids)
    outcomes, pairs, kept = [], set(), 0
    for unit_id in sorted(units):
        pair = [c.id for c in service.read_unit(unit_id).cases]
        if len(pair) != 2 or not set(pair) <= members:
            continue
        kept += 1
        if service.viewer.sees_all:
            answers = [
                a
                for a in service.answers_for_unit(unit_id)
                if not a.is_gold and a.annotator_id in wanted
            ]
        else:
            own = service.get_answer(unit_id)
            answers = [own] if own is not None else []
        for answer in answers:
            chosen = answer.payload.get("more_urgent_case_id")
            if chosen in pair:
                outcomes.append((chosen, pair[1] if chosen == pair[0] else pair[0]))
                pairs.add(unit_id)
    result = sort_inbox(
        inbox,
        judge,
        cases,
        outcomes,
        n_pairs=len(pairs),
        reference_visible=service.viewer.sees_all,
        adaptive=bool(pairs & adaptive_units),
    )
    return result, kept


def build_wards(project) -> None:
    """Two inboxes and a case in none; pairs within each, across them and with the untagged
    case; answers submitted, drafts, a draft without a choice, a gold answer, a PI's own work,
    a model pseudo annotator's answers and an adaptive set of the second inbox; a clinician
    given only that set, and one given no pair."""
    svc = StudyService(project)
    ava, ben = svc.add_annotator("ava", "Ava (RN)"), svc.add_annotator("ben", "Dr. Ben")
    svc.add_annotator("cal")  # given the adaptive set only
    svc.add_annotator("dee")  # given no pair
    pat = svc.add_annotator("pat", "Pat (PI)", role="pi")
    model = svc.add_annotator("llm-x", is_model=True)
    ids = {}
    for inbox, messages in (("ward-a", WARD_A), ("ward-b", WARD_B)):
        for key, level in messages:
            text = f"Message {key}."
            ids[key] = svc.add_case(key, text, urgency_level=level, tags={"inbox": inbox})
    ids["c0"] = svc.add_case("c0", "A message in no inbox.", urgency_level=1)
    pairs = svc.create_unit_set("pairs", "urgency")
    ward_a = [ids[k] for k, _ in WARD_A]
    within = [*itertools.combinations(ward_a, 2), (ids["b1"], ids["b2"]), (ids["b3"], ids["b4"])]
    across, outside = (ids["a1"], ids["b1"]), (ids["c0"], ids["a2"])
    cases_of = {svc.add_unit(pairs, a, case_b_id=b): (a, b) for a, b in [*within, across, outside]}
    for unit in cases_of:
        for person in (ava, ben):
            svc.assign(unit, person)
    ward_a_pairs = list(cases_of)[:10]
    for person in (pat, model):
        for unit in ward_a_pairs[:3]:
            svc.assign(unit, person)
    levels = {ids[k]: level for k, level in WARD_A + WARD_B} | {ids["c0"]: 1}

    def choice(unit: int, reverse: bool = False) -> dict:
        """The more urgent case by the reference (``reverse``: the less), none for none."""
        a, b = cases_of[unit]
        first = (levels[a] or 9) <= (levels[b] or 9)
        return {"more_urgent_case_id": a if first != reverse else b}

    for n, unit in enumerate(cases_of):
        status = "draft" if n % 4 == 1 else "submitted"
        svc.save_answer(unit, choice(unit), status=status, annotator_id=ava)
        if n % 3:
            svc.save_answer(unit, choice(unit, True), status="submitted", annotator_id=ben)
    svc.save_answer(ward_a_pairs[-1], {"levels": {}}, annotator_id=ben)  # no choice yet
    for unit in ward_a_pairs[:3]:
        svc.save_answer(unit, choice(unit, True), status="submitted", annotator_id=model)
    svc.save_answer(ward_a_pairs[0], choice(ward_a_pairs[0]), annotator_id=pat)
    gold = ward_a_pairs[5]
    svc.save_answer(gold, choice(gold, True), status="submitted", annotator_id=pat, gold=True)
    plan = plan_units(project, "adaptive-inbox", inbox="ward-b", judgements=4)
    made = create_unit_set(project, plan)
    assign_units(project, plan_assignment(project, made.name, ["ava", "ben", "cal"]))
    for name in ("ava", "ben"):
        person = svc.as_viewer(name)
        for _ in range(2):
            (unit,) = [q.unit_id for q in person.queue("urgency") if q.status == "todo"][-1:]
            case_ids = [c.id for c in person.read_unit(unit).cases]
            person.save_answer(unit, {"more_urgent_case_id": min(case_ids)}, status="submitted")


def viewers(project) -> dict[str, StudyService]:
    service = StudyService(project)
    return {"system": service} | {n: service.as_viewer(n) for n in ("pat", "ava", "ben")}


def load_telling(
    service: StudyService, inbox: str, judge: Judge
) -> tuple[InboxResult, list[tuple[int, int]]]:
    """``load_inbox``, and the progress it told."""
    told: list[tuple[int, int]] = []
    result = load_inbox(service, inbox, judge, progress=lambda *done_of: told.append(done_of))
    return result, told


def assert_as_read_unit_by_unit(service: StudyService) -> int:
    """Every inbox (and one that is not there) by every judge the viewer may choose reads as
    the unit-by-unit read did, and the progress counts the inbox's pairs; how many compared."""
    compared = 0
    for inbox in [*sorted(service.inboxes()), "nowhere"]:
        for judge in judges(service):
            result, told = load_telling(service, inbox, judge)
            expected, kept = unit_by_unit(service, inbox, judge)
            assert repr(result) == repr(expected), (inbox, judge)  # NaN win rates compare so
            assert told[-1:] == ([(kept, kept)] if kept else []), (inbox, judge)
            compared += bool(result.n_judgements)
    return compared


@pytest.mark.both_backends
def test_the_inbox_reads_as_it_did_unit_by_unit_for_every_viewer_and_judge(new_project):
    project = new_project("Wards")
    build_wards(project)
    seen = viewers(project)
    assert [j.key for j in judges(seen["pat"])][:2] == ["all", "me"]
    assert assert_as_read_unit_by_unit(seen["pat"]) >= 8  # inbox by inbox, judge by judge
    assert assert_as_read_unit_by_unit(seen["system"]) >= 8
    assert assert_as_read_unit_by_unit(seen["ava"]) == 2
    assert assert_as_read_unit_by_unit(seen["ben"]) == 2
    everyone = next(j for j in judges(seen["pat"]) if j.key == "all")
    assert load_inbox(seen["pat"], "ward-b", everyone).adaptive
    assert not load_inbox(seen["pat"], "ward-a", everyone).adaptive


@pytest.mark.both_backends
def test_the_judges_are_read_in_as_many_statements_however_many_annotators_there_are(
    new_project,
):
    """The PI's judges were every annotator whose urgency queue holds a pair, each queue read
    whole to know (0.7 s of each read of the view at 10,000 pairs a person)."""
    project = new_project("Wards")
    build_wards(project)
    svc = StudyService(project)
    pi = svc.as_viewer("pat")

    def queued() -> set[int]:
        return {p.id for p in pi.annotators() if pi.queue("urgency", annotator_id=p.id)}

    with counted_statements(pi) as few:
        chosen = judges(pi)
    assert pi.annotators_with_queue("urgency") == queued()
    assert [j.label for j in chosen] == [
        "All annotators", "My judgements", "Ava (RN)", "Dr. Ben", "cal", "Model: llm-x",
    ]  # fmt: skip
    pairs = svc.create_unit_set("more pairs", "urgency")
    a, b = sorted(c.id for c in svc.inboxes()["ward-a"])[:2]
    unit = svc.add_unit(pairs, a, case_b_id=b)
    for name in ("fay", "gus", "hal"):
        svc.assign(unit, svc.add_annotator(name))
    with counted_statements(pi) as many:
        chosen = judges(pi)
    assert pi.annotators_with_queue("urgency") == queued()
    assert [j.label for j in chosen][-4:] == ["fay", "gus", "hal", "Model: llm-x"]
    assert len(many) == len(few), "each annotator's queue was read"


@pytest.mark.both_backends
def test_the_inbox_is_read_in_as_many_statements_however_many_pairs_other_inboxes_hold(new_project):
    project = new_project("Wards")
    build_wards(project)
    pi = StudyService(project).as_viewer("pat")
    ava = pi.as_viewer("ava")
    everyone = next(j for j in judges(pi) if j.key == "all")
    (hers,) = judges(ava)

    def statements() -> list[int]:
        counts = []
        for service, judge in ((pi, everyone), (ava, hers)):
            with counted_statements(service) as run:
                load_inbox(service, "ward-a", judge)
            counts.append(len(run))
        return counts

    before = statements()
    svc = StudyService(project)
    others = svc.create_unit_set("more pairs", "urgency")
    ward_b = sorted(c.id for c in svc.inboxes()["ward-b"])
    for a, b in itertools.combinations(ward_b, 2):
        for _ in range(4):  # the same pairs again, a unit each time
            unit = svc.add_unit(others, a, case_b_id=b)
            for name in ("ava", "ben"):
                person = svc.as_viewer(name)
                svc.assign(unit, person.viewer.annotator_id)
                person.save_answer(unit, {"more_urgent_case_id": a}, status="submitted")
    assert statements() == before, "the other inboxes' pairs were read too"


@pytest.mark.both_backends
def test_the_inboxes_are_read_in_as_many_statements_however_many_messages_they_hold(
    new_project,
):
    """Each inbox's messages were read two queries each (20,000 for an inbox view on a study
    whose 10,000 messages are in inboxes, twice a read); they read as a unit shows them."""
    project = new_project("Wards")
    build_wards(project)
    svc = StudyService(project)
    people = {name: svc.as_viewer(name) for name in ("pat", "ava")}

    def statements() -> list[int]:
        counts = []
        for service in people.values():
            with counted_statements(service) as run:
                service.inboxes()
            counts.append(len(run))
        return counts

    before = statements()
    pairs = svc.create_unit_set("ward-c pairs", "urgency")
    ward_c = [
        svc.add_case(f"w{i}", f"Message w{i}. It hurts.", tags={"inbox": "ward-c"})
        for i in range(6)
    ]
    for a, b in itertools.pairwise(ward_c):
        unit = svc.add_unit(pairs, a, case_b_id=b)
        svc.assign(unit, people["ava"].viewer.annotator_id)
    assert statements() == before, "each message was read on its own"
    for service in people.values():
        shown = {case.id: case for cases in service.inboxes().values() for case in cases}
        assert len(shown) == 15
        for item in service.queue("urgency", annotator_id=people["ava"].viewer.annotator_id):
            for case in service.read_unit(item.unit_id).cases:
                if case.id in shown:
                    assert shown.pop(case.id) == case
        assert shown == {}  # every message of an inbox is in one of ava's pairs


@contextlib.contextmanager
def counted_statements(service: StudyService) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = service.project._engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_a_clinicians_own_login_reads_her_inbox_as_the_owner_sees_it_for_her(postgres_server):
    """On a server a clinician connects as her own database role: row-level security and the
    blinded views leave her own assignments, answers and cases only, and the inbox reads the
    same through them (the PI's login as well)."""
    from portalreview.store.backends import ServerProject

    server = postgres_server
    database = server.new_database()
    with ServerProject.create(server.url(database)) as project:
        build_wards(project)
        logins = {n: server.member_login(project, n) for n in ("ava", "pat")}
        owner = viewers(project)
        for name, (role, password) in logins.items():
            with ServerProject.open(server.url(database, role, password)) as own:
                member = StudyService(own).as_viewer(name)
                assert assert_as_read_unit_by_unit(member) == (2 if name == "ava" else 8)
                for inbox in ("ward-a", "ward-b"):
                    for judge in judges(member):
                        assert repr(load_inbox(member, inbox, judge)) == repr(
                            load_inbox(owner[name], inbox, judge)
                        )
