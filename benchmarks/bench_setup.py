"""How long the Study set-up window (PI) takes to read its Progress and Hard pairs tabs on a
large study: the old way (a copy of the code before 2026-11-28, kept below) and the new one,
measured in the same run, with their ratio.

The read is what the window runs in the background on opening
(``portalreview.ui.study_setup_dialog.read_tallies``): ``study_progress`` (each annotator's
assigned, shared, drafts and submitted units per unit set) and ``hard_pairs`` (the urgency pairs
waiting for a second annotator). The command line's ``portalreview progress`` and
``portalreview hard-pairs`` run the same functions (timed here whole, opening the study
included). The old way read every assignment and answer of the study into Python to count
them, and scanned every answer for those asking for a second annotator; the new one has the
database count them per set and annotator, and finds the asking answers through the urgency
answers that ask. Both ways' results are compared (printed "same: yes" or "NO"). The
window's other reads on opening (people, inboxes, unit sets' sizes), unchanged, are timed once.

The study is ``bench_report.py``'s synthetic one (4 annotators answer a unit of every kind for
every case; EPPC units carry the PI's gold answer; some urgency answers ask for a second
annotator, but every pair is handed to all four, so no pair is waiting); it is opened
read-only.

Usage::

    .venv/bin/python benchmarks/bench_setup.py                      # 10,000 cases
    .venv/bin/python benchmarks/bench_setup.py --cases 1000 --keep /tmp/bench

``--keep FOLDER`` keeps the study there (``synthetic-<cases>.prproj``) and reuses it; building
the 10,000-case one takes about 40 s. Each way is timed ``--repeats`` times, the two ways
alternating; the fastest of each is printed. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adjudication import fastest
from bench_report import kept_study

from portalreview.cli import main as cli
from portalreview.store import study_setup
from portalreview.store.adaptive import adaptive_settings
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    Case,
    Unit,
    UnitSet,
    UrgencyAnswer,
)
from portalreview.store.project import Project
from portalreview.store.study_setup import HardPair, ProgressRow
from portalreview.ui import study_setup_dialog as dialog

# --- the old way: a copy of the code before 2026-11-28 --------------------------------------


def old_study_progress(project: Project) -> list[ProgressRow]:
    with project.read() as s:
        gold = set(
            s.execute(
                select(Assignment.unit_id, Assignment.annotator_id).where(
                    Assignment.is_gold_holder.is_(True)
                )
            )
        )
        settings = adaptive_settings(s)
        adaptive = {
            name: settings[set_id].judgements
            for set_id, name in s.execute(select(UnitSet.id, UnitSet.name))
            if set_id in settings
        }
        rows = [
            (u, a, name, set_name, kind)
            for u, a, name, set_name, kind in s.execute(
                select(
                    Assignment.unit_id,
                    Assignment.annotator_id,
                    Annotator.name,
                    UnitSet.name,
                    UnitSet.kind,
                )
                .join(Annotator, Annotator.id == Assignment.annotator_id)
                .join(Unit, Unit.id == Assignment.unit_id)
                .join(UnitSet, UnitSet.id == Unit.unit_set_id)
            )
            if (u, a) not in gold
        ]
        status = {
            (u, a): st
            for u, a, st in s.execute(
                select(Answer.unit_id, Answer.annotator_id, Answer.status).where(
                    Answer.is_gold.is_(False)
                )
            )
        }
        set_order = {
            n: i for i, n in enumerate(s.scalars(select(UnitSet.name).order_by(UnitSet.id)))
        }
    raters: dict[int, int] = {}
    for u, a, _name, set_name, _kind in rows:
        if set_name not in adaptive or (u, a) in status:
            raters[u] = raters.get(u, 0) + 1
    table: dict[tuple[str, str, str], list[int]] = {}
    for u, a, name, set_name, kind in rows:
        counts = table.setdefault((set_name, kind, name), [0, 0, 0, 0])
        st = status.get((u, a))
        if set_name in adaptive and st is None:
            continue
        counts[0] += 1
        counts[1] += raters.get(u, 0) > 1
        counts[2] += st == "draft"
        counts[3] += st == "submitted"
    for (set_name, _kind, _name), counts in table.items():
        if set_name in adaptive:
            counts[0] = max(counts[0], adaptive[set_name])
    return [
        ProgressRow(set_name, kind, name, *counts)
        for (set_name, kind, name), counts in sorted(
            table.items(), key=lambda item: (set_order[item[0][0]], item[0][2])
        )
    ]


def old_hard_pairs(project: Project) -> list[HardPair]:
    with project.read() as s:
        asking: dict[int, set[str]] = {}
        for unit_id, name in s.execute(
            select(Answer.unit_id, Annotator.name)
            .join(UrgencyAnswer, UrgencyAnswer.answer_id == Answer.id)
            .join(Annotator, Annotator.id == Answer.annotator_id)
            .where(
                UrgencyAnswer.ask_second.is_(True),
                Answer.is_gold.is_(False),
                Answer.status == "submitted",
                Annotator.is_model.is_(False),
            )
        ):
            asking.setdefault(unit_id, set()).add(name)
        workers: dict[int, set[int]] = {}
        for unit_id, annotator_id in s.execute(
            select(Assignment.unit_id, Assignment.annotator_id)
            .join(Annotator, Annotator.id == Assignment.annotator_id)
            .where(
                Assignment.unit_id.in_(list(asking)),
                Assignment.is_gold_holder.is_(False),
                Annotator.is_model.is_(False),
            )
        ):
            workers.setdefault(unit_id, set()).add(annotator_id)
        adaptive = set(adaptive_settings(s))
        names = dict(s.execute(select(Case.id, Case.external_id)).all())
        sets = dict(s.execute(select(UnitSet.id, UnitSet.name)).all())
        units = s.scalars(
            select(Unit)
            .where(Unit.id.in_(list(asking)), Unit.kind == "urgency")
            .order_by(Unit.unit_set_id, Unit.position, Unit.id)
        )
        return [
            HardPair(
                unit_id=u.id,
                unit_set=sets[u.unit_set_id],
                cases=(names[u.case_id], names.get(u.case_b_id, "?")),
                asked_by=", ".join(sorted(asking[u.id])),
            )
            for u in units
            if u.unit_set_id not in adaptive and len(workers.get(u.id, ())) == 1
        ]


def old_read_tallies(project: Project) -> dialog.Tallies:
    return dialog.Tallies(old_study_progress(project), old_hard_pairs(project))


# --- the command line, whole ------------------------------------------------------------------


@contextlib.contextmanager
def old_functions() -> Iterator[None]:
    """The command line running the old functions (it looks them up when it runs)."""
    new = study_setup.study_progress, study_setup.hard_pairs
    study_setup.study_progress, study_setup.hard_pairs = old_study_progress, old_hard_pairs
    try:
        yield
    finally:
        study_setup.study_progress, study_setup.hard_pairs = new


def run_cli(args: list[str], old: bool) -> str:
    """What ``portalreview ARGS`` prints, run in this process."""
    out = io.StringIO()
    with old_functions() if old else contextlib.nullcontext(), contextlib.redirect_stdout(out):
        assert cli(args) == 0
    return out.getvalue()


# --- timing ---------------------------------------------------------------------------------


def compare(
    repeats: int, label: str, old: Callable[[], Any], new: Callable[[], Any], shown=repr
) -> None:
    both = fastest(repeats, {"old": old, "new": new})
    old_s, new_s = both["old"][0], both["new"][0]
    same = shown(both["old"][1]) == shown(both["new"][1])
    print(f"{label:30} {old_s:7.2f} {new_s:7.2f} {old_s / new_s:7.1f}x  {'yes' if same else 'NO'}")


def once(label: str, read: Callable[[], Any]) -> None:
    started = time.perf_counter()
    read()
    print(f"{label:30} {'':>7} {time.perf_counter() - started:7.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="folder to keep the study in (and reuse)")
    args = parser.parse_args(argv)
    path = kept_study(args.keep, args.cases)
    project = Project.open(path, automatic_backup=False, read_only=True)
    try:
        progress = study_setup.study_progress(project)
        hard = study_setup.hard_pairs(project)
        print(f"{path.name}: {len(progress)} progress rows, {len(hard)} hard pairs")
        print(f"{args.repeats} runs each, the fastest")
        print(f"{'':30} {'old s':>7} {'new s':>7} {'old/new':>8}  same")
        n = args.repeats
        compare(
            n,
            "tallies (the window's read)",
            lambda: old_read_tallies(project),
            lambda: dialog.read_tallies(project),
        )
        compare(
            n,
            "  study_progress",
            lambda: old_study_progress(project),
            lambda: study_setup.study_progress(project),
        )
        compare(
            n,
            "  hard_pairs",
            lambda: old_hard_pairs(project),
            lambda: study_setup.hard_pairs(project),
        )
        once("people (on opening)", lambda: dialog.people(project))
        once("inboxes (on opening)", lambda: dialog.inboxes(project))
        once("unit sets (on opening)", lambda: dialog.unit_sets(project))
    finally:
        project.close()
    for verb in (["progress"], ["progress", "--by-kind"], ["hard-pairs"]):
        args_ = [*verb[:1], str(path), *verb[1:]]
        compare(
            n,
            f"portalreview {' '.join(verb)}",
            lambda a=args_: run_cli(a, old=True),
            lambda a=args_: run_cli(a, old=False),
            shown=str,
        )


if __name__ == "__main__":
    main()
