"""How long the inbox view (Tools > Inbox view, Ctrl+I) takes to read an inbox of a large study:
the old way (a copy of the code before 2026-11-29, kept below) and the new one, measured in the
same run, with their ratio.

The read is what the view runs in the background when it opens, when a box changes and after
each urgency save (``portalreview.ui.inbox_view.load``): the inboxes (``StudyService.inboxes``),
the judges the viewer may choose (``tasks.urgency.inbox.judges``), and the chosen inbox sorted by
the chosen judge's answers (``load_inbox``). The old way read each inbox message with two
queries, every annotator's whole urgency queue to find the PI's judges, and every urgency unit
of the judge's queues one by one (``read_unit``, about six queries) before keeping those of the
inbox, each unit's answers on their own. Each part is timed, and the whole read, for the PI
("All annotators") and for a clinician (her own judgements); both ways' results are compared
(printed "same: yes" or "NO").

The study is ``bench_report.py``'s synthetic one (4 clinicians answer an urgency pair of every
case: 11,200 pairs each; 10 inboxes of 30 messages, 149 pairs each); it is opened read-only.

Usage::

    .venv/bin/python benchmarks/bench_inbox.py                      # 10,000 cases
    .venv/bin/python benchmarks/bench_inbox.py --cases 1000 --keep /tmp/bench

``--keep FOLDER`` keeps the study there (``synthetic-<cases>.prproj``) and reuses it; building
the 10,000-case one takes about 40 s. Each way is timed ``--repeats`` times, the two ways
alternating; the fastest of each is printed. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import kept_study

from portalreview.store.models import Assignment, Case, CaseTag, Sentence, Unit
from portalreview.store.project import Project
from portalreview.store.service import AnswerView, CaseView, StudyService, _sentence_view
from portalreview.tasks.urgency.inbox import InboxResult, Judge, judges, load_inbox, sort_inbox
from portalreview.ui import inbox_view

KIND = "urgency"


# --- the old way (before 2026-11-29) --------------------------------------------------------


def old_case_view(service: StudyService, s, case_id: int) -> CaseView:
    row = s.get(Case, case_id)
    sentences = s.scalars(
        select(Sentence).where(Sentence.case_id == case_id).order_by(Sentence.position)
    )
    return CaseView(
        id=row.id,
        external_id=row.external_id,
        message=row.message,
        chart=json.loads(row.chart_json),
        chart_text=row.chart_text,
        age_band=row.age_band,
        gender=row.gender,
        sentences=tuple(_sentence_view(x) for x in sentences),
        reference_level=row.urgency_level if service.viewer.sees_all else None,
    )


def old_inboxes(service: StudyService) -> dict[str, tuple[CaseView, ...]]:
    with service.project.read() as s:
        rows = s.execute(
            select(CaseTag.value, CaseTag.case_id)
            .where(CaseTag.key == "inbox")
            .order_by(CaseTag.value, CaseTag.case_id)
        ).all()
        if not service.viewer.sees_all:
            pairs = s.execute(
                select(Unit.case_id, Unit.case_b_id)
                .join(Assignment, Assignment.unit_id == Unit.id)
                .where(
                    Assignment.annotator_id == service.viewer.annotator_id,
                    Unit.kind == "urgency",
                )
            ).all()
            visible = {c for pair in pairs for c in pair if c is not None}
            rows = [r for r in rows if r[1] in visible]
        out: dict[str, list[CaseView]] = {}
        for name, case_id in rows:
            out.setdefault(name, []).append(old_case_view(service, s, case_id))
        return {name: tuple(cases) for name, cases in out.items()}


def old_judges(service: StudyService) -> list[Judge]:
    viewer = service.viewer
    me = viewer.annotator_id
    if not viewer.sees_all:
        return [Judge("me", "My judgements", (me,))] if me is not None else []
    people, models = [], []
    for person in service.annotators():
        if not service.queue(KIND, annotator_id=person.id):
            continue
        name = person.display_name or person.name
        if person.is_model:
            models.append(Judge(f"annotator:{person.id}", f"Model: {person.name}", (person.id,)))
        elif person.id == me:
            people.insert(0, Judge("me", "My judgements", (person.id,)))
        else:
            people.append(Judge(f"annotator:{person.id}", name, (person.id,)))
    everyone = tuple(j.annotator_ids[0] for j in people)
    out = [Judge("all", "All annotators", everyone)] if everyone else []
    return out + people + models


def old_answers(service: StudyService, unit_id: int, wanted: set[int]) -> list[AnswerView]:
    if service.viewer.sees_all:
        return [
            a
            for a in service.answers_for_unit(unit_id)
            if not a.is_gold and a.annotator_id in wanted
        ]
    own = service.get_answer(unit_id)
    return [own] if own is not None else []


def old_load_inbox(service: StudyService, inbox: str, judge: Judge) -> InboxResult:
    cases = old_inboxes(service).get(inbox, ())
    members = {c.id for c in cases}
    units: set[int] = set()
    adaptive_units: set[int] = set()
    for annotator_id in judge.annotator_ids:
        for item in service.queue(KIND, annotator_id=annotator_id):
            units.add(item.unit_id)
            if item.adaptive:
                adaptive_units.add(item.unit_id)
    wanted = set(judge.annotator_ids)
    outcomes: list[tuple[int, int]] = []
    pairs: set[int] = set()
    for unit_id in sorted(units):
        view = service.read_unit(unit_id)
        pair = [c.id for c in view.cases]
        if len(pair) == 2 and set(pair) <= members:
            for answer in old_answers(service, unit_id, wanted):
                chosen = answer.payload.get("more_urgent_case_id")
                if chosen in pair:
                    loser = pair[1] if chosen == pair[0] else pair[0]
                    outcomes.append((chosen, loser))
                    pairs.add(unit_id)
    return sort_inbox(
        inbox,
        judge,
        cases,
        outcomes,
        n_pairs=len(pairs),
        reference_visible=service.viewer.sees_all,
        adaptive=bool(pairs & adaptive_units),
    )


def old_view_read(service: StudyService) -> InboxResult:
    """The view's background read on opening (``ui.inbox_view.load``): the inboxes, the judges,
    and the first inbox sorted by the first judge."""
    names = sorted(old_inboxes(service))
    return old_load_inbox(service, names[0], old_judges(service)[0])


def new_view_read(service: StudyService) -> InboxResult:
    return inbox_view.load(service, None, None).result


# --- timing ---------------------------------------------------------------------------------


def fastest(repeats: int, ways: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Each way's fastest of ``repeats`` runs (the ways alternating) and its last result."""
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, run in ways.items():
            gc.collect()  # neither way pays for the other's garbage
            started = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - started
            best[name] = (min(seconds, best.get(name, (seconds,))[0]), result)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--clinician", default="ann_0")
    parser.add_argument("--keep", type=Path, help="folder to keep the study in (and reuse)")
    args = parser.parse_args(argv)
    path = kept_study(args.keep, args.cases)
    project = Project.open(path, automatic_backup=False, read_only=True)
    try:
        pi, clinician = StudyService(project), StudyService(project).as_viewer(args.clinician)
        inbox = sorted(pi.inboxes())[0]
        print(f"{path.name}, {inbox}, {args.repeats} runs each, the fastest")
        print(f"{'':34} {'old s':>7} {'new s':>7} {'old/new':>8}  same")
        for label, service in (("PI", pi), (args.clinician, clinician)):
            both = fastest(
                args.repeats,
                {"old": lambda s=service: old_inboxes(s), "new": lambda s=service: s.inboxes()},
            )
            _line(f"inboxes ({label})", both, both["old"][1] == both["new"][1])
        both = fastest(args.repeats, {"old": lambda: old_judges(pi), "new": lambda: judges(pi)})
        _line("judges (PI)", both, both["old"][1] == both["new"][1])
        for label, service in (("PI, all annotators", pi), (args.clinician, clinician)):
            judge = judges(service)[0]
            both = fastest(
                args.repeats,
                {
                    "old": lambda s=service, j=judge: old_load_inbox(s, inbox, j),
                    "new": lambda s=service, j=judge: load_inbox(s, inbox, j),
                },
            )
            _line(f"load_inbox ({label})", both, repr(both["old"][1]) == repr(both["new"][1]))
        for label, service in (("PI", pi), (args.clinician, clinician)):
            both = fastest(
                args.repeats,
                {
                    "old": lambda s=service: old_view_read(s),
                    "new": lambda s=service: new_view_read(s),
                },
            )
            _line(f"the view's read ({label})", both, repr(both["old"][1]) == repr(both["new"][1]))
    finally:
        project.close()


def _line(label: str, both: dict[str, tuple[float, Any]], same: bool) -> None:
    old, new = both["old"][0], both["new"][0]
    print(f"{label:34} {old:7.2f} {new:7.2f} {old / new:7.1f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
