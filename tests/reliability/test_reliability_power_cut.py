"""A power cut during a stream of saves, simulated by copying the project file and its WAL at
random moments and opening the copy.

Three kinds of copy, each round, from one process saving without pause:

* **the disk at an instant**: the saving process is frozen (SIGSTOP) at a random moment and
  the file and its ``-wal`` (and, half the time, its ``-shm``) are copied. A power cut leaves
  at most this. The copy must open, pass the integrity check, and hold every save reported
  before the freeze.
* **the instant, with the unsynced tail torn**: the same copy, but the part of the WAL after
  its last complete commit (what a power cut may lose, since only commits are synced) is cut
  at a random byte and followed by random bytes, as a half-written sector would be. Same
  expectations: SQLite's frame checksums must reject the torn frames, and nothing reported as
  saved may be missing.
* **a careless copy**: the file, then after a random pause its WAL, copied while the process
  keeps saving (what a file manager or a backup tool that ignores open files does). This copy
  may be inconsistent: it must open with its integrity check ok, or be refused with a message
  that says it is damaged and where the backups are, leaving the copy and its WAL untouched.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import struct
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from reliability_support import ForkServer, label_of, make_saving_project

from portalreview.store.project import Project, ProjectError
from portalreview.store.service import StudyService

ROUNDS = int(os.environ.get("PORTALREVIEW_POWER_CUTS", "30"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="SIGSTOP and /proc/PID/stat (Linux)"
    ),
]


# --- the WAL format (https://www.sqlite.org/fileformat2.html#walformat) ---------------------

_WAL_HEADER, _FRAME_HEADER = 32, 24


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def committed_end(wal: bytes) -> tuple[int, int]:
    """(the byte offset just after the WAL's last valid commit frame, the offset after the
    last frame written since: frames of a transaction not committed yet). Everything before
    the first was synced by a commit; everything after it may be lost in a power cut.
    (0, 0) for a WAL without a valid header."""
    if len(wal) < _WAL_HEADER:
        return 0, 0
    magic, _version, page_size, _seq, salt1, salt2, c0, c1 = struct.unpack(">8I", wal[:_WAL_HEADER])
    if magic not in (0x377F0682, 0x377F0683):
        return 0, 0
    big_endian = magic & 1 == 1
    if _checksum(wal[:24], 0, 0, big_endian) != (c0, c1):
        return 0, 0
    s0, s1 = c0, c1
    end = offset = _WAL_HEADER
    valid = True
    frame = _FRAME_HEADER + page_size
    while offset + frame <= len(wal):
        _page, db_size, f_salt1, f_salt2, f0, f1 = struct.unpack(
            ">6I", wal[offset : offset + _FRAME_HEADER]
        )
        if (f_salt1, f_salt2) != (salt1, salt2):
            break
        if valid:
            s0, s1 = _checksum(wal[offset : offset + 8], s0, s1, big_endian)
            s0, s1 = _checksum(wal[offset + _FRAME_HEADER : offset + frame], s0, s1, big_endian)
            valid = (s0, s1) == (f0, f1)
        offset += frame
        if valid and db_size:
            end = offset
    return end, max(end, offset)


# --- helpers -------------------------------------------------------------------------------


def _wait_stopped(pid: int) -> None:
    """Until the process is really stopped (SIGSTOP is delivered asynchronously)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        if state in ("T", "t"):
            return
        time.sleep(0.0005)
    raise AssertionError(f"process {pid} did not stop")


def _write_copy(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder / "s.prproj"


def _stored_labels(copy: Path) -> set[int]:
    """Open the copy as the app would; check it; the labels of every save in it."""
    with Project.open(copy) as project:
        assert project.integrity_check() == "ok"
        with project.read() as s:
            rows = s.connection().exec_driver_sql(
                "SELECT new_json FROM audit_log WHERE answer_id IS NOT NULL"
            )
            labels = {label_of(new) for (new,) in rows} - {None}
        # The study reads as a whole (not just the log): the queue and the answers.
        ava = StudyService(project).as_viewer("ava")
        for item in ava.queue("respond"):
            if item.status != "todo":
                assert ava.get_answer(item.unit_id) is not None
    return labels


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_copies_made_at_random_moments_open_or_are_refused_clearly(tmp_path):
    path = tmp_path / "s.prproj"
    units = make_saving_project(path)
    rng = random.Random(77)
    server = ForkServer(path, units, tmp_path / "server-stderr.txt")
    outcomes: Counter[str] = Counter()
    refusals: list[str] = []
    torn_bytes = 0
    current = server.start(0)
    try:
        server.wait_for(current, saves=1)
        for n in range(ROUNDS):
            time.sleep(rng.uniform(0.005, 0.06))

            # A careless copy while the saves go on.
            db = path.read_bytes()
            time.sleep(rng.uniform(0, 0.02))
            wal = path.with_name("s.prproj-wal").read_bytes()
            careless = _write_copy(
                tmp_path / f"careless-{n}", {"s.prproj": db, "s.prproj-wal": wal}
            )
            before = {p.name: _digest(p) for p in careless.parent.iterdir()}
            try:
                _stored_labels(careless)
                outcomes["careless copy opened"] += 1
            except ProjectError as exc:
                message = str(exc)
                assert "damaged" in message or "integrity check" in message, message
                assert "s.backups/" in message, message
                # The copy and its WAL are as they were (the read-only check may add an -shm).
                assert {name: _digest(careless.parent / name) for name in before} == before
                outcomes["careless copy refused"] += 1
                refusals.append(message)

            # The disk at an instant.
            os.kill(current.pid, signal.SIGSTOP)
            try:
                _wait_stopped(current.pid)
                server.drain(current)
                reported = set(current.saved)
                files = {
                    "s.prproj": path.read_bytes(),
                    "s.prproj-wal": path.with_name("s.prproj-wal").read_bytes(),
                }
                if rng.random() < 0.5:
                    files["s.prproj-shm"] = path.with_name("s.prproj-shm").read_bytes()
            finally:
                os.kill(current.pid, signal.SIGCONT)

            instant = _write_copy(tmp_path / f"instant-{n}", files)
            stored = _stored_labels(instant)
            assert reported <= stored, sorted(reported - stored)[:10]
            outcomes["instant opened"] += 1

            # The same instant, with what was not yet synced torn.
            wal = files["s.prproj-wal"]
            end, written = committed_end(wal)
            assert end > 0, "the WAL copy has no valid header"
            if written > end:
                outcomes["frozen in the middle of a transaction"] += 1
            # Half the time in (or just after) the uncommitted frames, else anywhere after.
            cut = rng.randint(
                end, min(len(wal), written + 4096) if rng.random() < 0.5 else len(wal)
            )
            garbage = rng.randbytes(rng.randint(0, 4096 + 24))
            torn = {**files, "s.prproj-wal": wal[:cut] + garbage}
            torn_bytes += len(wal) - cut + len(garbage)
            stored = _stored_labels(_write_copy(tmp_path / f"torn-{n}", torn))
            assert reported <= stored, sorted(reported - stored)[:10]
            outcomes["torn tail opened"] += 1

            for folder in tmp_path.glob("*-[0-9]*"):
                shutil.rmtree(folder)
        server.drain(current)
        assert current.status is None, "the saving process stopped on its own"
        os.kill(current.pid, signal.SIGKILL)
        server.finish(current)
    finally:
        if current.status is None:
            os.kill(current.pid, signal.SIGKILL)
            server.finish(current)
        server.close()
    with Project.open(path) as project:  # the original, after the last (kill -9) cut
        assert project.integrity_check() == "ok"
    print(
        f"\n{ROUNDS} rounds, {len(current.saved)} saves reported; {dict(outcomes)}; "
        f"{torn_bytes} bytes of unsynced WAL torn"
        + (f"; first refusal: {refusals[0]}" if refusals else "")
    )
    assert len(current.saved) > ROUNDS
