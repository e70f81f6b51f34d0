"""Many clinicians saving at once, for the concurrency test and ``benchmarks/bench_team_server.py``.

:func:`build_load_study` makes a study with one unit of every kind, assigned to every one of
``n`` clinicians. :func:`run_load` starts one process per clinician (and one for the PI's live
dashboard); each saves answers of every kind, round and round, as fast as it can for the time
given, every save carrying a token of its own in the answer's comment, and records each save
the study acknowledged (returned from ``save_answer``) with its latency. :func:`check_load`
then proves that each acknowledged save is in the audit log exactly once, that every answer
holds its clinician's last acknowledged save, and that the hash chain verifies.

Processes, not threads: each has its own connections and its own interpreter, as the
clinicians' apps do.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from portalreview.store.models import KINDS, Answer, AuditEntry

DASHBOARD = "dashboard"


@dataclass
class LoadResult:
    """What the processes reported, and what :func:`check_load` found."""

    seconds: float  # from the first clinician's first save to the last one's last
    saves: list[dict] = field(default_factory=list)  # acknowledged: worker, unit, token, ms
    errors: list[str] = field(default_factory=list)
    refreshes: int = 0

    @property
    def saves_per_second(self) -> float:
        return len(self.saves) / self.seconds if self.seconds else 0.0

    def latency_ms(self, quantile: float) -> float:
        import numpy as np

        values = [s["ms"] for s in self.saves]
        return float(np.quantile(values, quantile)) if values else float("nan")


def build_load_study(project, clinicians: int) -> dict[str, int]:
    """The small test study's cases and drafts, one unit of every kind, assigned to
    ``clinicians`` clinicians named ``c00``, ``c01``..., and a PI ``pi``. The units by kind."""
    from portalreview.store.service import StudyService

    service = StudyService(project)
    service.add_annotator("pi", role="pi")
    case1 = service.add_case("c1", "I have had chest pain since this morning. Should I come in?")
    case2 = service.add_case("c2", "Where can I get a copy of my flu shot record? Thanks!")
    draft1 = service.add_response(case1, "d1", "Please go to the emergency room now. Call 911.")
    draft2 = service.add_response(case1, "d2", "I am sorry you are in pain. Please come in today.")
    reference = service.add_response(case1, "r1", "I am sorry. Please go to the ER now.")
    units = {}
    for kind in KINDS:
        set_id = service.create_unit_set(f"{kind} set", kind)
        refs: dict = {}
        if kind == "rank":
            refs = {"members": [draft1, draft2]}
        elif kind == "match":
            refs = {"response_id": reference, "response_b_id": draft1}
        elif kind == "urgency":
            refs = {"case_b_id": case2}
        elif kind == "eppc":
            refs = {"sentence_id": service.read_unit(units["respond"]).cases[0].sentences[0].id}
        elif kind in ("empathy", "facts"):
            refs = {"response_id": draft1, "response_b_id": draft2}
        units[kind] = service.add_unit(set_id, case1, **refs)
    for i in range(clinicians):
        person = service.add_annotator(f"c{i:02d}")
        for unit in units.values():
            service.assign(unit, person)
    return units


def _views(service, units: dict[str, int]) -> dict:
    """The units a clinician answers, read once (they do not change while the load runs)."""
    return {kind: service.read_unit(units[kind]) for kind in ("rank", "match", "urgency",
                                                                "eppc", "empathy")}  # fmt: skip


def _payloads(views: dict, round_: int) -> dict[str, dict]:
    """A complete answer of every kind, varied by round (so that saves change something)."""
    reference, draft = views["match"].responses
    sentence = views["eppc"].sentence.text
    urgency, empathy = views["urgency"], views["empathy"]
    flip = round_ % 2
    eppc_span = [0, min(len(sentence), 5 + flip)]
    return {
        "respond": {"mode": "theme_guided", "parts": {"empathy": f"So sorry ({round_})."}},
        "rank": {
            "entries": [
                {"response_id": r.id, "rank": 1 + ((i + flip) % 2), "correct": True}
                for i, r in enumerate(views["rank"].responses)
            ]
        },
        "match": {
            "decisions": [
                {"sentence_id": s.id, "spans": [[0, 6]] if i == flip else []}
                for i, s in enumerate(reference.sentences)
            ],
            "themes": [
                {"sentence_id": s.id, "theme": "planning"}
                for s in (*reference.sentences, *draft.sentences)
            ],
        },
        "urgency": {"more_urgent_case_id": urgency.cases[flip].id},
        "eppc": {"labels": [{"code": "InfoGive", "subcode": "Symptoms", "spans": [eppc_span]}]},
        "empathy": {"more_empathetic_response_id": empathy.responses[flip].id},
        "facts": {"facts": [{"side": "original", "text": f"Go ({round_}).", "entailed": True}]},
    }


def _clinician(target: str, name: str, units: dict, seconds: float, out: str) -> None:
    """One clinician's process: save every kind, round and round, until the time is up."""
    from portalreview.store.backends import open_project
    from portalreview.store.service import StudyService

    saves, errors, window = [], [], [time.time(), time.time()]
    try:
        options = {} if "://" in target else {"automatic_backup": False}
        with open_project(target, **options) as project:
            service = StudyService(project).as_viewer(name)
            views = _views(service, units)
            deadline = time.monotonic() + seconds
            window[0] = time.time()
            round_ = 0
            while time.monotonic() < deadline:
                payloads = _payloads(views, round_)
                for kind in KINDS:
                    token = f"{name}-{round_}-{kind}"
                    started = time.perf_counter()
                    try:
                        service.save_answer(
                            units[kind], payloads[kind], status="submitted", comment=token
                        )
                    except Exception as exc:
                        errors.append(f"{name} {kind}: {type(exc).__name__}: {exc}")
                        continue
                    ms = (time.perf_counter() - started) * 1000
                    saves.append({"worker": name, "unit": units[kind], "token": token, "ms": ms})
                round_ += 1
            window[1] = time.time()
    except Exception:
        errors.append(f"{name}: {traceback.format_exc()}")
    Path(out).write_text(json.dumps({"saves": saves, "errors": errors, "window": window}))


def _dashboard(target: str, seconds: float, out: str) -> None:
    """The PI's live dashboard: the live report refreshed, again and again."""
    from portalreview.reports.live_report import LiveReport
    from portalreview.store.backends import open_project

    refreshes, errors = 0, []
    try:
        with open_project(target, read_only=True) as project:
            live = LiveReport()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                live.refresh(project, seed=1, n_resamples=0)
                refreshes += 1
    except Exception:
        errors.append(f"dashboard: {traceback.format_exc()}")
    Path(out).write_text(json.dumps({"refreshes": refreshes, "errors": errors}))


def run_load(
    target: str, units: dict[str, int], clinicians: int, seconds: float, folder: Path,
    dashboard: bool = True,
) -> LoadResult:  # fmt: skip
    """Start the processes on the study at ``target`` (a file path or a server address with
    its password), wait for them, and gather what they report."""
    spawn = multiprocessing.get_context("spawn")
    jobs = []
    for i in range(clinicians):
        out = folder / f"c{i:02d}.json"
        name = f"c{i:02d}"
        process = spawn.Process(target=_clinician, args=(target, name, units, seconds, str(out)))
        jobs.append((process, out))
    if dashboard:
        out = folder / f"{DASHBOARD}.json"
        jobs.append((spawn.Process(target=_dashboard, args=(target, seconds, str(out))), out))
    started = time.monotonic()
    for process, _ in jobs:
        process.start()
    for process, _ in jobs:
        process.join(timeout=seconds + 300)
    result = LoadResult(time.monotonic() - started)
    windows = []
    for process, out in jobs:
        if not out.exists():
            result.errors.append(f"{out.stem}: ended without a report (exit {process.exitcode})")
            continue
        reported = json.loads(out.read_text())
        result.saves += reported.get("saves", [])
        result.errors += reported.get("errors", [])
        result.refreshes += reported.get("refreshes", 0)
        if "window" in reported:
            windows.append(reported["window"])
    if windows:  # the saving time, without the processes' start (imports) and end
        result.seconds = max(w[1] for w in windows) - min(w[0] for w in windows)
    return result


def check_load(project, result: LoadResult) -> list[str]:
    """What is wrong with the study after :func:`run_load` (empty: nothing): every
    acknowledged save once in the audit log, each answer at its last acknowledged save, the
    audit chain verified."""
    from portalreview.store.audit_verify import verify_project

    problems = []
    with project.read() as s:
        logged: dict[str, int] = {}
        entries = select(AuditEntry.new_json).where(AuditEntry.answer_id.isnot(None))
        for (new_json,) in s.execute(entries):
            token = json.loads(new_json or "{}").get("comment")
            if token:
                logged[token] = logged.get(token, 0) + 1
        final = {
            (unit, name): comment
            for unit, name, comment in s.execute(
                select(Answer.unit_id, Answer.annotator_id, Answer.comment)
            )
        }
    acknowledged = {save["token"] for save in result.saves}
    missing = [t for t in acknowledged if logged.get(t, 0) == 0]
    twice = [t for t, n in logged.items() if n > 1]
    unacknowledged = [t for t in logged if t not in acknowledged]
    if missing:
        problems.append(f"{len(missing)} acknowledged saves are not in the log: {missing[:3]}")
    if twice:
        problems.append(f"{len(twice)} saves are in the audit log more than once: {twice[:3]}")
    if unacknowledged:  # a save that failed (and said so) must have left nothing
        problems.append(f"{len(unacknowledged)} saves not acknowledged are in the log")
    last: dict[tuple[int, str], str] = {}
    for save in result.saves:  # in each worker's own order
        last[(save["unit"], save["worker"])] = save["token"]
    finals = set(final.values())
    wrong = [token for token in last.values() if token not in finals]
    if wrong:
        problems.append(f"{len(wrong)} answers do not hold their last acknowledged save")
    verification = verify_project(project)
    if not verification.ok:
        problems.append(f"the audit chain does not verify: {verification}")
    return problems


def cpu_count() -> int:
    return os.cpu_count() or 1
