"""A random model of study set-up with the PI taking part (a colleague's model, kept as a
test): sets made, handed out to clinicians and the PI, answered, and adjudicated by the PI at
any point; after each step every queue, progress and the study's progress agree with a plain
model in which a gold answer is never anyone's work."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlalchemy import select

from portalreview.store.models import Answer, AuditEntry, Unit
from portalreview.store.service import StudyService
from portalreview.store.study_setup import (
    CaseFilter,
    SetupError,
    add_annotators,
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
    study_progress,
)

pytestmark = pytest.mark.both_backends


class Model:
    """What the study should hold: sets, real assignments, own answers, gold answers."""

    def __init__(self, project, rng: random.Random) -> None:
        self.project, self.rng = project, rng
        self.svc = StudyService(project)
        self.ids = {n: self.svc.add_annotator(n) for n in ("c0", "c1")}
        self.ids["pat"] = self.svc.add_annotator("pat", role="pi")
        self.people = ["c0", "c1"]
        self.n_cases = rng.randint(4, 9)
        for i in range(self.n_cases):
            self.svc.add_case(f"m{i:02d}", f"Message {i}.", urgency_level=1 + i % 6)
        self.theme = self.svc.catalogs.themes[0].id
        self.sets: dict[str, dict] = {}  # name -> kind, units, adaptive judgements (0: none)
        self.assigned: set[tuple[int, str]] = set()
        self.answers: dict[tuple[int, str], str] = {}
        self.gold: dict[int, str] = {}
        self.units: dict[int, tuple[str, int, int | None]] = {}  # id -> kind, case, case b
        self.audit = Counter()

    def assignees(self) -> list[str]:
        return [*self.people, "pat"]

    def payload(self, unit_id: int) -> dict:
        kind, a, b = self.units[unit_id]
        if kind == "respond":
            return {"parts": {self.theme: "text"}}
        return {"more_urgent_case_id": self.rng.choice([a, b])}

    # --- steps ----------------------------------------------------------------------------

    def add(self) -> None:
        if len(self.people) < 5:
            name = f"c{len(self.people)}"
            self.ids[name] = add_annotators(self.project, [name])[0]
            self.people.append(name)

    def create(self) -> None:
        rng, name = self.rng, f"S{len(self.sets) + 1}"
        recipe = rng.choice(["respond", "urgency", "adaptive-inbox"])
        picked = rng.sample(
            [f"m{i:02d}" for i in range(self.n_cases)], rng.randint(2, self.n_cases)
        )
        extra = {}
        if recipe == "adaptive-inbox" and rng.random() < 0.5:
            extra["judgements"] = rng.randint(1, len(picked) * (len(picked) - 1) // 2)
        plan = plan_units(
            self.project, recipe, cases=CaseFilter(external_ids=tuple(picked)), name=name, **extra
        )
        made = create_unit_set(self.project, plan)
        self.audit["setup"] += 1
        with self.project.read() as s:
            rows = s.scalars(
                select(Unit).where(Unit.unit_set_id == made.unit_set_id).order_by(Unit.position)
            ).all()
            self.units |= {u.id: (u.kind, u.case_id, u.case_b_id) for u in rows}
        adaptive = plan.options.get("judgements", 0) if recipe == "adaptive-inbox" else 0
        self.sets[name] = {"kind": made.kind, "units": [u.id for u in rows], "adapt": adaptive}

    def assign(self) -> None:
        if not self.sets:
            return
        rng = self.rng
        name = rng.choice(sorted(self.sets))
        st = self.sets[name]
        who = rng.sample(self.assignees(), rng.randint(1, len(self.assignees())))
        free = [u for u in st["units"] if not any((u, x) in self.assigned for x in self.ids)]
        overlap = rng.randint(0, len(free)) if len(who) > 1 and free else 0
        per_unit = rng.randint(1, len(who))
        try:
            plan = plan_assignment(
                self.project, name, who, overlap=overlap, raters_per_unit=per_unit, seed=7
            )
        except SetupError:
            having = any((st["units"][0], x) in self.assigned for x in who)
            assert having if st["adapt"] else not free
            return
        if not st["adapt"]:
            raters = Counter(u for units in plan.by_annotator.values() for u in units)
            assert set(raters) == set(free)
            for u in free:
                assert raters[u] == (len(who) if u in plan.shared_units else per_unit)
        self.assigned |= {(u, x) for x, units in plan.by_annotator.items() for u in units}
        assign_units(self.project, plan, shuffle_order=rng.random() < 0.5)
        self.audit["assign"] += 1

    def answer(self) -> None:
        person = self.rng.choice(self.assignees())
        queue = self.svc.as_viewer(person).queue(self.rng.choice(["respond", "urgency"]))
        if queue:
            unit_id = self.rng.choice(queue).unit_id
            status = self.rng.choice(["draft", "submitted", "submitted"])
            self.svc.as_viewer(person).save_answer(unit_id, self.payload(unit_id), status=status)
            self.answers[(unit_id, person)] = status

    def adjudicate(self) -> None:
        if self.units:
            unit_id = self.rng.choice(sorted(self.units))
            status = self.rng.choice(["draft", "submitted"])
            pat = self.svc.as_viewer("pat")
            pat.save_answer(unit_id, self.payload(unit_id), status=status, gold=True)
            self.gold[unit_id] = status

    # --- checks ---------------------------------------------------------------------------

    def check(self) -> None:
        names = {v: k for k, v in self.ids.items()}
        with self.project.read() as s:
            rows = s.execute(
                select(Answer.unit_id, Answer.annotator_id, Answer.status, Answer.is_gold)
            )
            stored = [(u, names[a], st, gold) for u, a, st, gold in rows]
            actions = Counter(s.scalars(select(AuditEntry.action)))
        assert {(u, a): st for u, a, st, gold in stored if not gold} == self.answers
        assert {u: st for u, _a, st, gold in stored if gold} == self.gold
        assert (actions["setup"], actions["assign"]) == (self.audit["setup"], self.audit["assign"])
        for person in self.assignees():
            for kind in ("respond", "urgency"):
                self._check_queue(person, kind)
        self._check_study_progress()

    def _check_queue(self, person: str, kind: str) -> None:
        viewer = self.svc.as_viewer(person)
        queue = viewer.queue(kind)
        shown = [q.unit_id for q in queue]
        assert len(shown) == len(set(shown))
        done = total = 0
        expected: set[int] = set()
        for st in self.sets.values():
            mine = [u for u in st["units"] if (u, person) in self.assigned]
            if st["kind"] != kind or not mine:
                continue
            answered = [u for u in mine if (u, person) in self.answers]
            done += sum(self.answers.get((u, person)) == "submitted" for u in mine)
            if not st["adapt"]:
                expected |= set(mine)
                total += len(mine)
                continue
            total += max(st["adapt"], len(answered))
            offered = [q for q in queue if q.status == "todo" and q.unit_id in st["units"]]
            drafts = any(self.answers[(u, person)] == "draft" for u in answered)
            wanted = not drafts and len(answered) < st["adapt"] and len(answered) < len(mine)
            assert len(offered) == int(wanted), (person, st, offered)
            expected |= set(answered) | {q.unit_id for q in offered}
        assert set(shown) == expected, (person, kind)
        assert all(q.status == self.answers.get((q.unit_id, person), "todo") for q in queue)
        progress = viewer.progress(kind)
        if total:
            assert (progress.done, progress.total) == (done, total), (person, kind)

    def _check_study_progress(self) -> None:
        expected = {}
        for name, st in self.sets.items():
            counted = {
                x: [
                    u
                    for u in st["units"]
                    if (u, x) in self.assigned and (not st["adapt"] or (u, x) in self.answers)
                ]
                for x in self.assignees()
            }
            raters = Counter(u for units in counted.values() for u in units)
            for x, units in counted.items():
                if not any((u, x) in self.assigned for u in st["units"]):
                    continue
                statuses = [self.answers.get((u, x)) for u in units]
                expected[(name, x)] = (
                    max(len(units), st["adapt"]),
                    sum(raters[u] > 1 for u in units),
                    statuses.count("draft"),
                    statuses.count("submitted"),
                )
        got = {
            (r.unit_set, r.annotator): (r.assigned, r.shared, r.drafts, r.submitted)
            for r in study_progress(self.project)
        }
        assert got == expected


@pytest.mark.parametrize("seed", [1, 2])
def test_set_up_hand_out_and_adjudication_at_random(new_project, seed):
    rng = random.Random(seed)
    model = Model(new_project(), rng)
    steps = ["add", "create", "create", "assign", "assign", "assign"]
    steps += ["answer"] * 4 + ["adjudicate"]
    for _ in range(60):
        getattr(model, rng.choice(steps))()
        model.check()
