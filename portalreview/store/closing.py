"""Whether a project is still open, shared by its sessions and its connections.

Closing a project must end its use for good: work still under way on another thread when the
person closes it (a drafting run, figures being kept) would otherwise reconnect (SQLAlchemy
makes a new connection for a disposed engine) and write into a file whose lock is released,
which another program may hold by then. So a closed project refuses every later session and
connection with :class:`ProjectClosed`, in words, and closing waits (a little) for the writes
already under way to end before the lock is released.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterator

from portalreview.store.errors import ProjectClosed

log = logging.getLogger(__name__)

WRITES_WAIT_S = 30.0  # how long closing waits for the writes under way (each is short)


class Closing:
    """A project's open state: refuses to read or write once closed, and counts the writes
    under way so that closing can wait for them."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._closed = False
        self._writing: Counter[int] = Counter()  # thread -> writes under way on it
        self._changed = threading.Condition()

    @property
    def closed(self) -> bool:
        return self._closed

    def check(self, doing: str = "read") -> None:
        """ProjectClosed if the project was closed (``doing``: "read" or "save")."""
        if self._closed:
            what = "Nothing was saved." if doing == "save" else "Nothing was read."
            raise ProjectClosed(
                f"The project {self.label} was closed. {what} Open it again to go on."
            )

    def refuse_connection(self, *_args: object) -> None:
        """For the engine: no new connection once closed (a disposed engine reconnects)."""
        self.check()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around one write transaction: refused once closed, waited for by :meth:`close`."""
        me = threading.get_ident()
        with self._changed:
            self.check("save")
            self._writing[me] += 1
        try:
            yield
        finally:
            with self._changed:
                self._writing[me] -= 1
                if not self._writing[me]:
                    del self._writing[me]
                self._changed.notify_all()

    def close(self, wait_s: float = WRITES_WAIT_S) -> bool:
        """Refuse from now on and wait up to ``wait_s`` for the writes under way on other
        threads to end (one on this thread, the one closing, cannot end meanwhile); False if
        some did not end in time."""
        me = threading.get_ident()
        with self._changed:
            self._closed = True
            ended = self._changed.wait_for(lambda: not (set(self._writing) - {me}), timeout=wait_s)
        if not ended:
            log.warning("%s closed with a write still under way on another thread", self.label)
        return ended
