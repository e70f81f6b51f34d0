"""Who is working on what: a run of the model claims each unit (or case) before asking the
model about it, so that two runs over the same study at the same moment (two workstations on a
team study, one llama.cpp server behind both) do not make the same answer twice and store it
twice.

A claim is held only while the work is done and taken back at once after: it is not kept in
the study. On a server it is a session-level advisory lock of the claiming connection
(``ServerProject.claim``), which the server drops by itself when that workstation crashes or
its connection is lost, so a claim never outlives its holder. A project file has a single
writing program (``lock.py``), so its claims are only between that program's threads
(:class:`LocalClaims`).

:func:`in_turn` goes through a run's work in order, passing over what another run holds and
coming back to it once the rest is done; by then the other run has usually stored it, and the
run finds it done and skips it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")

#: How long a run waits before looking again when everything left is held by other runs.
RECHECK_S = 0.5


class Claimable(Protocol):
    def claim(self, key: str) -> contextlib.AbstractContextManager[bool]: ...


class LocalClaims:
    """Claims between the threads of one program."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[bool]:
        """True while this caller holds ``key``; False (and nothing held) when another does."""
        with self._lock:
            mine = key not in self._held
            self._held.add(key)
        try:
            yield mine
        finally:
            if mine:
                with self._lock:
                    self._held.discard(key)


def key_number(key: str) -> int:
    """A claim's key as a signed 32-bit number (an advisory lock's second key). Two keys that
    share a number only make one run wait for the other: never a wrong answer."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), signed=True)


def in_turn(
    project: Claimable,
    items: Iterable[T],
    key: Callable[[T], str],
    cancel: threading.Event | None = None,
) -> Iterator[T]:
    """Each item, in order, while the caller holds its claim (the claim ends when the caller
    asks for the next item). Items another run holds are passed over and tried again after
    the rest; when only such items are left, it waits :data:`RECHECK_S` between tries, and
    stops when ``cancel`` is set."""
    pending = list(items)
    while pending:
        passed: list[T] = []
        for item in pending:
            with project.claim(key(item)) as mine:
                if mine:
                    yield item
                    continue
            passed.append(item)
        if len(passed) == len(pending):  # all held elsewhere: wait for one to be let go
            if cancel is not None:
                if cancel.wait(RECHECK_S):
                    return
            else:
                time.sleep(RECHECK_S)
        pending = passed
