"""Live without polling: a server study tells its listeners of every saved change.

Each audit entry committed in a server study sends a PostgreSQL notification on
:data:`CHANNEL`, whose payload is the kind of the unit the entry names (``urgency``...), or
``study`` for a change of the study itself. PostgreSQL delivers notifications only when the
transaction commits, once per distinct payload per transaction, to every connection of the same
database that LISTENs. A notification says only that something of that kind changed, never
what: a listener reads what it may see as usual (row-level security applies).

:class:`Listener` holds its own connection on a thread and calls ``on_change(kind)`` there
(the app hands it to the GUI thread). When the server goes away it tries again every few
seconds and, once back, reports ``study`` (it cannot know what it missed).
A project file has no such thing: its app learns of its own saves directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.engine import URL

from portalreview.store.backends.postgres import TCP_ARGS
from portalreview.store.schema_sql import PG_SEARCH_PATH

log = logging.getLogger(__name__)

CHANNEL = "portalreview_saved"
RETRY_SECONDS = 3.0
WAIT_SECONDS = 0.5  # how long one wait for notifications lasts (how soon stop() is seen)

TRIGGER_STATEMENTS = [
    f"""
    CREATE FUNCTION notify_saved() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = {PG_SEARCH_PATH} AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', coalesce(
            (SELECT kind FROM units WHERE id = NEW.unit_id), 'study'));
        RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER notify_saved AFTER INSERT ON audit_log FOR EACH ROW "
    "EXECUTE FUNCTION notify_saved()",
]


class Listener:
    """Calls ``on_change(kind)`` on its own thread for each change committed in the study at
    ``url`` (see the module docstring). Stop it with :meth:`stop`."""

    def __init__(self, url: URL, on_change: Callable[[str], None]) -> None:
        self._connect_args = listener_connect_args(url)
        self._on_change = on_change
        self._stop = threading.Event()
        self.listening = threading.Event()  # set while connected and listening
        self._thread = threading.Thread(target=self._run, name="study-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT_SECONDS * 4 + RETRY_SECONDS)

    def _run(self) -> None:
        missed = False
        while not self._stop.is_set():
            try:
                self._listen(report_missed=missed)
            except Exception as exc:  # the server went away, or refused us
                if self._stop.is_set():
                    break
                log.warning("study listener lost its connection (%s); trying again", type(exc))
            self.listening.clear()
            missed = True
            self._stop.wait(RETRY_SECONDS)

    def _listen(self, report_missed: bool) -> None:
        import psycopg

        # keepalives: a dead link is noticed (and the listener starts again) within a minute
        with psycopg.connect(autocommit=True, **self._connect_args) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.listening.set()
            if report_missed:
                self._on_change("study")
            while not self._stop.is_set():
                for note in conn.notifies(timeout=WAIT_SECONDS, stop_after=100):
                    self._on_change(note.payload)


def listener_connect_args(url: URL) -> dict[str, str | int]:
    """libpq's keywords for the study at ``url``, the password included: a URL written back
    as text drops a password that has no user name before it (an address without one, the
    password typed in its own box), so the listener never connected."""
    given = {
        key: value[-1] if isinstance(value, tuple) else value for key, value in url.query.items()
    }
    named = url.translate_connect_args(username="user", database="dbname")
    return {"connect_timeout": 10, **TCP_ARGS, **given, **named}

