"""kill -9 at random moments during a stream of saves, 200 times: every save reported as done
is in the file afterwards, and ``PRAGMA integrity_check`` says ok every time.

tests/store/test_kill9.py kills a fresh process five times on every run; this soak kills 200
children of a fork server (tests/reliability/reliability_support.py), at random moments:
while the project is being opened, in the middle of a save (an INSERT of a new answer, an
UPDATE, a submit), between saves, during WAL checkpoints. After each kill the project is
opened as the app opens it after a crash, checked, and the next child goes on saving.

``PORTALREVIEW_KILLS`` sets the number of kills (default 200).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest
from reliability_support import ForkServer, label_of, make_saving_project, payload

from portalreview.store.project import Project
from portalreview.store.service import StudyService

KILLS = int(os.environ.get("PORTALREVIEW_KILLS", "200"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="SIGKILL and fork are POSIX"),
]


def _check_round(path, units, since_id: int, reported: list[int], first: int) -> tuple[int, int]:
    """Open the killed child's project, check it; returns (last audit id, next label)."""
    with Project.open(path) as project:
        assert project.integrity_check() == "ok"
        with project.read() as s:
            rows = s.connection().exec_driver_sql(
                "SELECT id, new_json FROM audit_log WHERE id > ? ORDER BY id", (since_id,)
            )
            stored = [(row_id, label_of(new)) for row_id, new in rows]
        labels = [label for _, label in stored]
        # The saves of this round, in order, each once, starting where the round started...
        assert labels == list(range(first, first + len(labels))), labels[:20]
        # ...every reported one among them, and at most one more: the save that committed
        # just before the kill, before it could be reported.
        assert set(reported) <= set(labels)
        assert len(labels) - len(reported) in (0, 1)
        last_id = stored[-1][0] if stored else since_id
        if labels:
            ava = StudyService(project).as_viewer("ava")
            last = labels[-1]
            answer = ava.get_answer(units[last % len(units)])
            assert answer.payload["parts"] == payload(last)["parts"]
            assert answer.status == ("submitted" if last % 5 == 0 else "draft")
        return last_id, first + len(labels)


def test_200_kills_during_a_stream_of_saves(tmp_path):
    path = tmp_path / "soak.prproj"
    units = make_saving_project(path)
    with Project.open(path) as project, project.read() as s:
        since_id = s.connection().exec_driver_sql("SELECT max(id) FROM audit_log").scalar() or 0
    rng = random.Random(20240901)
    server = ForkServer(path, units, tmp_path / "server-stderr.txt")
    started = time.perf_counter()
    label = 0
    kinds_of_moment = {"while opening": 0, "after saves": 0}
    total_reported = 0
    try:
        for _ in range(KILLS):
            current = server.start(label)
            if rng.random() < 0.15:
                # Somewhere in opening the project (lock, checks, first connection) or in
                # the first saves.
                time.sleep(rng.random() * 0.03)
                kinds_of_moment["while opening"] += 1
            else:
                server.wait_for(current, saves=rng.randint(0, 25), opened=True)
                time.sleep(rng.random() * 0.004)  # a random moment into the next save
                kinds_of_moment["after saves"] += 1
            os.kill(current.pid, signal.SIGKILL)
            server.finish(current)
            assert current.status is not None and os.WIFSIGNALED(current.status), (
                "the child ended on its own: " + (tmp_path / "server-stderr.txt").read_text()
            )
            total_reported += len(current.saved)
            since_id, label = _check_round(path, units, since_id, current.saved, label)
    finally:
        server.close()
    elapsed = time.perf_counter() - started
    print(
        f"\n{KILLS} kills in {elapsed:.1f} s; {total_reported} saves reported, {label} stored; "
        f"moments: {json.dumps(kinds_of_moment)}"
    )
    assert total_reported >= KILLS  # the kills did land among saves, not only before them
