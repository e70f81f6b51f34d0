"""Helpers of the reliability tests: a project with a few units to save into, and a *fork
server* that starts saving processes in milliseconds.

A fresh Python process needs about half a second to import SQLAlchemy and the store; two
hundred kills would spend most of their time there. The fork server imports everything once
and then, for each round, forks a child that opens the project and saves in a loop, writing
``saved N`` to the shared pipe after each committed transaction. The test kills the child
(the server's child) with SIGKILL; the server reaps it and writes ``reaped PID STATUS``, so
when the test reads that line every ``saved`` line the child managed to write is already in
the pipe before it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from portalreview.store.project import Project
from portalreview.store.service import StudyService

REPO = Path(__file__).resolve().parents[2]
LABEL = "save "


def make_saving_project(path: Path, n_units: int = 3) -> list[int]:
    """A project with one clinician ("ava") and ``n_units`` respond units assigned to her."""
    with Project.create(path) as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava")
        unit_set = svc.create_unit_set("r", "respond")
        units = []
        for i in range(n_units):
            case = svc.add_case(f"c{i}", f"Message number {i}. Is this urgent?")
            unit = svc.add_unit(unit_set, case)
            svc.assign(unit, ava)
            units.append(unit)
    return units


def payload(i: int) -> dict:
    """The answer of save ``i``: its label, plus text that grows and shrinks so that pages are
    split and freed as the saves go on."""
    return {"parts": {"empathy": f"{LABEL}{i}", "planning": "x" * ((i * 37) % 3000)}}


def label_of(new_json: str | None) -> int | None:
    if not new_json:
        return None
    text = json.loads(new_json)["payload"]["parts"].get("empathy", "")
    return int(text[len(LABEL) :]) if text.startswith(LABEL) else None


_SERVER = textwrap.dedent(
    """
    import os, sys, traceback
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService
    sys.path.insert(0, sys.argv[3])
    from reliability_support import payload

    path, units = sys.argv[1], [int(u) for u in sys.argv[2].split(",")]

    def say(text):
        os.write(1, (text + "\\n").encode())

    def save_forever(start):
        project = Project.open(path)
        ava = StudyService(project).as_viewer("ava")
        say("opened")
        i = start
        while True:
            unit = units[i % len(units)]
            status = "submitted" if i % 5 == 0 else "draft"
            ava.save_answer(unit, payload(i), status=status, active_seconds=float(i))
            say(f"saved {i}")  # only after the transaction committed
            i += 1

    say("ready")
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        pid = os.fork()
        if pid == 0:
            try:
                save_forever(int(words[1]))
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(3)
        say(f"child {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"reaped {pid} {status}")
    """
)


@dataclass
class Round:
    pid: int = 0
    opened: bool = False
    saved: list[int] = field(default_factory=list)
    status: int | None = None


class ForkServer:
    """Starts saving children on request; see the module docstring."""

    def __init__(self, path: Path, units: list[int], stderr_path: Path) -> None:
        self._stderr = stderr_path.open("wb")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(Path(__file__).parent)])}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _SERVER,
                str(path),
                ",".join(map(str, units)),
                str(Path(__file__).parent),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=0,
        )
        self._buffer = b""
        first = self._next_line()
        assert first == "ready", first

    def _next_line(self, block: bool = True) -> str | None:
        """The next line the server or a child wrote; None when ``block`` is False and no
        whole line is there yet."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            if not block and not select.select([fd], [], [], 0)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError("the fork server ended (see its stderr)")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def start(self, first_label: int) -> Round:
        """Fork a saving child; returns once its pid is known."""
        self.process.stdin.write(f"go {first_label}\n".encode())
        self.process.stdin.flush()
        current = Round()
        while current.pid == 0:
            self._take(current, self._next_line())
        return current

    def _take(self, current: Round, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word == "saved":
            current.saved.append(int(rest))
        elif word == "opened":
            current.opened = True
        elif word == "child":
            current.pid = int(rest)
        elif word == "reaped":
            current.status = int(rest.split()[1])
        else:
            raise AssertionError(f"unexpected line from the fork server: {line!r}")

    def wait_for(self, current: Round, saves: int = 0, opened: bool = False) -> None:
        """Read until the child reported ``saves`` saves (or opened the project)."""
        while (len(current.saved) < saves or (opened and not current.opened)) and (
            current.status is None
        ):
            self._take(current, self._next_line())
        assert current.status is None, "the saving process stopped on its own (see stderr)"

    def drain(self, current: Round) -> None:
        """Take every report already written, without waiting for more."""
        while (line := self._next_line(block=False)) is not None:
            self._take(current, line)

    def finish(self, current: Round) -> None:
        """After the kill: read the rest of the child's reports, up to the server's reap."""
        while current.status is None:
            self._take(current, self._next_line())

    def close(self) -> None:
        try:
            self.process.stdin.write(b"quit\n")
            self.process.stdin.flush()
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            self._stderr.close()
