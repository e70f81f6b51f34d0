"""How long ``portalreview verify`` takes on a large study: the audit log's hash chain alone,
and the chain with every answer compared against the newest entry naming it
(``store/audit_verify.py``).

The synthetic studies of ``bench_report.py`` are written row by row, without an audit log; this
copies one (by default the 10,000-case study ``bench_report.py --keep /tmp/bench`` keeps; the
original is only read) and first gives each answer the ``create`` entry a save would have
written, built with the service's own code, so that every answer has an entry to be compared
with. Then it times verification of the copy, and checks that one answer changed with SQL in
the copy is reported.

Usage::

    .venv/bin/python benchmarks/bench_verify.py [--study PATH] [--work FOLDER]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from sqlalchemy import select

from portalreview.store.audit_verify import verify_project
from portalreview.store.models import Answer, AuditEntry, utc_now
from portalreview.store.project import Project
from portalreview.store.service import GENESIS_HASH, StudyService, audit_hash


def add_entries(path: Path) -> int:
    """A ``create`` entry for every answer of the study at ``path``, as its save would have
    written (set-up only: the program writes entries only through ``StudyService._audit``)."""
    with Project.open(path, automatic_backup=False) as project, project.write() as s:
        previous = project.last_audit_hash(s) or GENESIS_HASH
        answers = s.scalars(select(Answer).order_by(Answer.id)).all()
        for view in StudyService._answer_views(s, answers):
            entry = AuditEntry(
                at=utc_now(),
                actor_id=view.annotator_id,
                action="create",
                answer_id=view.answer_id,
                unit_id=view.unit_id,
                old_json=None,
                new_json=json.dumps(StudyService._audit_state(view), sort_keys=True),
                prev_hash=previous,
            )
            entry.hash = previous = audit_hash(entry)
            s.add(entry)
        return len(answers)


def timed_verify(path: Path, answers: bool) -> tuple[float, object]:
    with Project.open(path, read_only=True) as project:
        started = time.perf_counter()
        result = verify_project(project, answers=answers)
        return time.perf_counter() - started, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=Path("/tmp/bench/synthetic-10000.prproj"))
    parser.add_argument("--work", type=Path, help="folder for the copy (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="portalreview-bench-verify-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{args.study.stem}-logged.prproj"
    if not path.exists():
        source = sqlite3.connect(f"file:{args.study.resolve()}?mode=ro", uri=True)
        target = sqlite3.connect(path)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        started = time.perf_counter()
        n = add_entries(path)
        print(f"set-up: {n:,} entries added in {time.perf_counter() - started:.1f} s")
    seconds, result = timed_verify(path, answers=False)
    print(f"chain only:        {seconds:6.1f} s  ({result.entries:,} entries)")
    seconds, result = timed_verify(path, answers=True)
    print(f"chain and answers: {seconds:6.1f} s  ({result.answers:,} answers); ok: {result.ok}")
    changed = work / "changed.prproj"
    shutil.copy(path, changed)
    conn = sqlite3.connect(changed)
    try:
        conn.execute("UPDATE answers SET comment = 'changed' WHERE id = 1000")
        conn.commit()
    finally:
        conn.close()
    _, result = timed_verify(changed, answers=True)
    print("one answer changed with SQL:", "; ".join(result.answer_problems) or "NOT REPORTED")


if __name__ == "__main__":
    main()
