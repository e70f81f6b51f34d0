"""A process killed with SIGKILL in the middle of a stream of saves loses nothing it reported
as saved, and leaves a file that passes SQLite's integrity check.

(The 200-kill soak belongs to tests/reliability; this runs a handful of kills at random
moments on every CI run.)
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sqlalchemy import select

from portalreview.store.models import AuditEntry
from portalreview.store.project import Project
from portalreview.store.service import StudyService

_SAVER = textwrap.dedent(
    """
    import sys
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService
    project = Project.open(sys.argv[1])
    ava = StudyService(project).as_viewer("ava")
    unit, start = int(sys.argv[2]), int(sys.argv[3])
    i = start
    while True:
        ava.save_answer(unit, {"parts": {"empathy": f"save {i}"}}, active_seconds=float(i))
        print(i, flush=True)  # reported only after the transaction committed
        i += 1
    """
)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("round_", range(5))
def test_saves_reported_before_kill_9_are_all_there(tmp_path, round_):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        svc = StudyService(p)
        ava = svc.add_annotator("ava")
        case = svc.add_case("c1", "Message.")
        unit = svc.add_unit(svc.create_unit_set("r", "respond"), case)
        svc.assign(unit, ava)
    rng = random.Random(round_)
    child = subprocess.Popen(
        [sys.executable, "-c", _SAVER, str(path), str(unit), "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    reported: list[int] = []
    wanted = rng.randint(3, 60)  # kill after a random number of saves...
    while len(reported) < wanted:
        line = child.stdout.readline()
        assert line, "the saving process stopped on its own"
        reported.append(int(line))
    time.sleep(rng.random() * 0.05)  # ...and a random moment into the next ones
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    reported += [int(x) for x in child.stdout.read().split()]

    with Project.open(path) as p:
        assert p.integrity_check() == "ok"
        with p.read() as s:
            saved = {
                json.loads(e.new_json)["payload"]["parts"]["empathy"]
                for e in s.scalars(select(AuditEntry).where(AuditEntry.answer_id.is_not(None)))
            }
        current = StudyService(p).get_answer(unit, annotator_id=ava)
    assert {f"save {i}" for i in reported} <= saved
    last = max(int(x.split()[1]) for x in saved)
    assert last >= reported[-1]
    assert current.payload["parts"]["empathy"] == f"save {last}"
