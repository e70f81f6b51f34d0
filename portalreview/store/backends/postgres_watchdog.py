"""The save watchdog: a clinician's save ends in seconds even when the server freezes.

libpq waits for an answer for as long as the TCP connection stays open, and a frozen server
(its processes stopped, its virtual machine paused, its machine swapping itself to death) keeps
it open: its kernel still acknowledges what is sent, so neither libpq's keepalives nor
``tcp_user_timeout`` fire, and its ``statement_timeout`` cannot run. The window saves on its
own thread: it would wait for as long as the server is frozen, and a person who then ends the
program loses what was typed since the last save.

So each connection taken from the pool gets a deadline (:class:`Deadline`): first for the
check that it is still alive (:func:`ping`, which would wait as long as any statement), and,
when the transaction it then begins is a clinician's save, for the whole save, up to its
commit or rollback and the connection's return to the pool. A clinician's read (the unit, the
list of units the window opens on its own thread) is bounded the same way, from its begin, by
its own bound (:meth:`Watchdog.keep`). Other transactions (the PI's dashboard, reports,
exports, imports and merges) may legitimately run long: their deadline ends when they begin.
When a deadline passes, the watchdog's timer thread shuts the connection's socket down: libpq
sees the connection closed, psycopg raises OperationalError, SQLAlchemy drops the connection,
and the person is told that the server did not answer and nothing was saved (or read), the
text kept on screen (docs/deployment.md, "When the server goes away").
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import InvalidatePoolError

log = logging.getLogger(__name__)

_KEY = "portalreview_deadline"  # where a connection's deadline is kept (its pool record's info)


class _Alarms:
    """One thread that runs actions when they fall due: a thread per deadline would cost about
    1 ms per connection taken from the pool (measured on a loaded 2-core machine). An action
    whose deadline ended in time stays queued until its time and then does nothing."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # (never compares two actions)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` on the alarms' thread at ``when`` (time.monotonic())."""
        with self._changed:
            heapq.heappush(self._due, (when, next(self._order), action))
            if self._thread is None:
                # a daemon: a pending alarm never holds up the program's exit
                self._thread = threading.Thread(target=self._run, name="save-watchdog",
                                                daemon=True)  # fmt: skip
                self._thread.start()
            if self._due[0][2] is action:  # the next one to fall due: wake up for it
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(self._due[0][0] - time.monotonic() if self._due else None)
                action = heapq.heappop(self._due)[2]
            try:
                action()
            except Exception:  # the thread must go on for the other deadlines
                log.exception("a save watchdog's action failed")


_ALARMS = _Alarms()
if hasattr(os, "register_at_fork"):  # a forked child has no alarms' thread: it starts its own
    os.register_at_fork(after_in_child=_ALARMS.__init__)


class Deadline:
    """Shuts the socket of ``dbapi_connection`` (psycopg) down after ``seconds`` unless
    :meth:`end` comes first.

    The socket is duplicated here, on the thread that uses the connection, while libpq's own
    descriptor is certainly open: the timer thread shuts down and closes only this duplicate,
    never libpq's descriptor, so it cannot touch another file or socket that reused a number
    libpq closed meanwhile. Shutting down the duplicate ends the one connection both refer to.
    :meth:`end` and the cut hold one lock: once :meth:`end` returns, the connection (which the
    pool may hand out again) is never cut by this deadline."""

    def __init__(
        self, dbapi_connection: Any, seconds: float, on_cut: Callable[[int, float], None]
    ) -> None:
        # socket.fromfd duplicates the descriptor (a SOCKET handle on Windows); shutdown ignores
        # the family given, so a Unix-domain connection is cut the same way
        self._socket = socket.fromfd(dbapi_connection.pgconn.socket, socket.AF_INET,
                                     socket.SOCK_STREAM)  # fmt: skip
        self._seconds = seconds
        self._lock = threading.Lock()  # end() and the timer's cut never overlap
        self._over = False
        self._owner = threading.get_ident()  # the thread that waits on the connection
        self._on_cut = on_cut  # (given the thread and the bound passed)
        _ALARMS.at(time.monotonic() + seconds, self._cut)

    def _cut(self) -> None:
        with self._lock:
            if self._over:
                return
            self._over = True
            self._on_cut(self._owner, self._seconds)  # before the waiting thread sees the error
            with contextlib.suppress(OSError):  # already closed by the other side
                self._socket.shutdown(socket.SHUT_RDWR)
            self._socket.close()
        log.warning("the study server did not answer for %g s: its connection was cut",
                    self._seconds)  # fmt: skip

    def end(self) -> None:
        """The connection's work ended in time (or it was dropped): no cut, now or later."""
        with self._lock:
            if self._over:
                return
            self._over = True
            self._socket.close()


class Watchdog:
    """The deadlines of one engine's connections (see the module docstring); ``seconds()`` is
    the bound, read when each is armed."""

    def __init__(self, engine: Engine, seconds: Callable[[], float]) -> None:
        self._seconds = seconds
        self._dialect = engine.dialect
        self._lock = threading.Lock()
        # threads whose connection was cut, not yet told, and the bound that passed
        self._cut_threads: dict[int, float] = {}
        event.listen(engine, "checkout", self._checked_out)
        for ended in ("checkin", "invalidate", "close"):  # before the connection is closed
            event.listen(engine, ended, self._returned)

    def _checked_out(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        self._arm(dbapi_connection, record.info, self._seconds())
        self._ping(dbapi_connection)

    def _arm(self, dbapi_connection: Any, info: dict, seconds: float) -> None:
        self._end(info)
        try:
            info[_KEY] = Deadline(dbapi_connection, seconds, self._mark_cut)
        except (OSError, self._dialect.loaded_dbapi.Error):  # no socket: the ping says why
            log.debug("no deadline for a connection without a socket", exc_info=True)
        except Exception:  # a safety net that cannot be armed must not stop the work itself
            log.warning("no deadline for this connection", exc_info=True)

    def _ping(self, dbapi_connection: Any) -> None:
        """Check that a connection taken from the pool is still alive (SQLAlchemy's pre-ping,
        done here so that the deadline covers it); a dead one is replaced by a new one."""
        try:
            self._dialect.do_ping(dbapi_connection)
        except self._dialect.loaded_dbapi.Error as exc:
            # (as pre-ping: the pool's other connections are checked again too, since a server
            # that dropped one has most likely dropped all)
            raise InvalidatePoolError(f"the connection was found dead: {exc}") from exc

    def _returned(self, _dbapi_connection: Any, record: Any, *_exc: Any) -> None:
        if record is not None:
            self._end(record.info)

    def release(self, info: dict) -> None:
        """The transaction now begun on the connection (``info``: its pool record's) is no
        clinician's save: it may run as long as it needs."""
        self._end(info)

    def keep(self, dbapi_connection: Any, info: dict, seconds: float) -> None:
        """The transaction now begun on the connection (``info``: its pool record's) is a
        clinician's read: it must end within ``seconds`` from now, up to the connection's
        return to the pool."""
        self._arm(dbapi_connection, info, seconds)

    def _end(self, info: dict) -> None:
        deadline = info.pop(_KEY, None)
        if deadline is not None:
            deadline.end()

    def _mark_cut(self, thread: int, seconds: float) -> None:
        with self._lock:
            self._cut_threads[thread] = seconds

    def forget_here(self) -> None:
        """A new read or save on this thread: an earlier cut is no longer its story."""
        with self._lock:
            self._cut_threads.pop(threading.get_ident(), None)

    def cut_here(self) -> float | None:
        """The bound that passed when the watchdog cut this thread's connection since
        :meth:`forget_here` (None: it cut none)."""
        with self._lock:
            return self._cut_threads.get(threading.get_ident())
