"""A project in a PostgreSQL database: the team-server back end.

The same tables (``models.py``), rules (``schema_sql.postgres_trigger_statements``) and service
layer as a project file; what differs lives here:

* **Who writes when.** Every write transaction first takes one transaction-level advisory lock
  (:data:`WRITE_LOCK`), so that writes run one after another as they do in an SQLite file
  (``BEGIN IMMEDIATE``). That keeps the audit log's hash chain a chain: each entry hashes the
  previous one, read inside the same locked transaction, which is READ COMMITTED (so that it
  reads the newest entry as it is once the lock is held). Reads never wait for it; a read
  session is one REPEATABLE READ snapshot; a dry run (:meth:`ServerProject.trial`) writes
  without it. No one waits for ever: see "bounded waits" below.
* **What is ours.** A database is a PortalReview study when its ``project_meta`` holds
  ``application = PortalReview``; its format is ``project_meta.schema_version``.
* **Secrets.** The URL may carry no password: libpq then finds it in ``~/.pgpass`` (or
  ``PGPASSFILE``), as hospital IT sets it up. :attr:`ServerProject.location` never shows it.
* **Who reads what**: ``postgres_security.py``; **live saves**: ``postgres_listen.py``;
  **a frozen server**: ``postgres_watchdog.py``; **schema versions**: ``server_migrations/``
  (Alembic).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shlex
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.orm import Session, sessionmaker

from portalreview import __version__
from portalreview.domain.catalogs import Catalogs
from portalreview.store import migrations
from portalreview.store.backends import server_migrations
from portalreview.store.backends.postgres_watchdog import Watchdog
from portalreview.store.claims import key_number
from portalreview.store.closing import Closing
from portalreview.store.dialects import POSTGRES_FUNCTIONS, postgres_rowid_statements
from portalreview.store.errors import SaveOutcomeUnknown
from portalreview.store.models import Base, ProjectMeta
from portalreview.store.project import ProjectError, start_study
from portalreview.store.schema_sql import postgres_trigger_statements
from portalreview.store.service import StoreError

if TYPE_CHECKING:
    from portalreview.store.backends.postgres_listen import Listener

log = logging.getLogger(__name__)

APPLICATION = "PortalReview"
# pg_advisory_xact_lock's key: "PRRV" as a number, as the file's SQLite application id.
WRITE_LOCK = 0x50525256
# The first key of a claim's advisory lock ("PRCL"); the second is claims.key_number. (Locks
# with two 32-bit keys never meet a lock with one 64-bit key such as WRITE_LOCK.)
CLAIM_SPACE = 0x5052434C
_TRY_CLAIM = text("SELECT pg_try_advisory_lock(:space, :key)")
_END_CLAIM = text("SELECT pg_advisory_unlock(:space, :key)")
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# SQLSTATEs: lock_timeout passed; statement_timeout passed (or a cancel request);
# idle_in_transaction_session_timeout passed
LOCK_NOT_AVAILABLE, QUERY_CANCELED, IDLE_TOO_LONG = "55P03", "57014", "25P03"


class ServerError(ProjectError):
    """The server cannot be reached or refused us; the message says what, without secrets."""


class ServerUnavailable(ServerError, StoreError):
    """The server went away or dropped the connection during a read or a save. A save is one
    transaction: nothing of it was kept (or, if the connection dropped during the commit
    itself, all of it: a later save of the same answer updates it, never duplicates it)."""


class ServerSaveOutcomeUnknown(ServerUnavailable, SaveOutcomeUnknown):
    """The connection was lost while a save's COMMIT was under way, and the server could not
    say whether it kept the save; :meth:`kept` asks it again (``pg_xact_status``)."""


class PasswordNeeded(ServerError):
    """The server asks for a password that neither the address nor ``~/.pgpass`` gave."""


class PasswordRefused(ServerError):
    """The server refused the user name and password."""


class ServerNotReached(ServerError):
    """No server answered at the address's host and port."""


class NoSuchDatabase(ServerError):
    """The server has no database of the address's name."""


class NotAStudy(ServerError):
    """The database is reachable but holds no PortalReview study (an empty one, say)."""


class NotAMember(ServerError):
    """The login reaches the study's database but is neither the study's owner nor a member
    set up there: not a member at all, or one whose rights and search path were given in
    another database (the study was restored or copied since). IT runs ``portalreview
    member``."""


def is_server_url(target: object) -> bool:
    """Whether a command's project argument names a server database rather than a file."""
    return isinstance(target, str) and target.split("://", 1)[0].lower() in SCHEMES


#: Address parameters (libpq's) that hold a secret: shown as *** like a password.
SECRET_PARAMETERS = ("password", "sslpassword")


def parse_url(target: str) -> URL:
    """The SQLAlchemy URL of ``postgresql://user@host[:port]/database[?sslmode=...]``; a
    password given as ``?password=`` is the URL's password, as libpq takes it."""
    try:
        url = make_url(target)
    except ArgumentError as exc:
        raise ServerError(f"{redact(target)} is not a database address: {exc}") from exc
    except ValueError:  # SQLAlchemy's int() of the port; its words name neither
        raise ServerError(
            "the database address cannot be read: its port is not a number "
            "(postgresql://user@host:PORT/database)"
        ) from None
    if not url.database:
        raise ServerError(f"{redact(target)} names no database (postgresql://host/DATABASE).")
    return _password_in_place(url).set(drivername="postgresql+psycopg")


def _password_in_place(url: URL) -> URL:
    """``url`` with a ``?password=`` parameter moved to the password's place, where every
    check and every rendering (hide_password) treats it as one."""
    given = url.query.get("password")
    if given is None:
        return url
    password = given[-1] if isinstance(given, tuple) else given
    return url.difference_update_query(["password"]).set(password=password)


def redact(target: str | URL) -> str:
    """The address as it may be shown or logged: the password, if any, as *** (given before
    the host or as a parameter, ``?password=``; so is ``?sslpassword=``)."""
    try:
        url = make_url(target) if isinstance(target, str) else target
    except (ArgumentError, ValueError):
        return "(an address that cannot be read)"
    shown = _password_in_place(url).set(drivername=url.drivername.split("+")[0])
    hidden = {key: "***" for key in SECRET_PARAMETERS if key in shown.query}
    rendered = shown.update_query_dict(hidden).render_as_string(hide_password=True)
    return rendered.replace("%2A%2A%2A", "***")


#: project_meta keys that mark a database as a server study; a file has no such keys.
SERVER_KEYS = ("application", "schema_version")
_COUNT_TABLES = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"


def _schema_statements() -> list[str]:
    """What the tables' CHECKs need first (json_valid)."""
    return list(POSTGRES_FUNCTIONS)


def _rules_statements() -> list[str]:
    """After the tables: SQLite's rowid, the rules of ``schema_sql``, the notifications."""
    from portalreview.store.backends.postgres_listen import TRIGGER_STATEMENTS

    return (
        postgres_rowid_statements(Base.metadata)
        + postgres_trigger_statements()
        + TRIGGER_STATEMENTS
    )


# --- bounded waits (docs/deployment.md, "When the server goes away") --------------------------
#: libpq's TCP settings: a link that went dead is noticed in seconds, not TCP's ~15 min. An idle
#: connection is probed after 15 s, then every 5 s, and dropped after 3 unanswered probes (45 s
#: in all, for the live-saves listener); data the server's machine does not acknowledge for
#: 15 s (a save sent over a dropped link) ends the connection: "did not answer ... Nothing was
#: saved". A hospital LAN or VPN hiccup of a few seconds (TCP resends within ~13 s) survives.
TCP_ARGS = {
    "keepalives": 1,
    "keepalives_idle": 15,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,  # ms; Linux only (libpq ignores it elsewhere)
}
#: Seconds a write waits for the team's write lock before it gives up, nothing saved: a save
#: takes milliseconds, so a longer wait means a long writer (the PI's import or merge) or a
#: workstation that stopped in the middle of a save; the person is told and the text kept.
LOCK_WAIT_S = 10
#: Seconds one statement of a clinician's save may run (each takes milliseconds).
SAVE_STATEMENT_S = 15
#: Seconds one statement of other writes may run: the PI's imports, merges and set-up run many
#: statements, none long; this only ends a runaway one.
LONG_STATEMENT_S = 600
#: Seconds a write transaction may sit idle, its workstation silent (stopped, asleep, cut off),
#: before the server ends it and frees the write lock for everyone else. Between two
#: statements of a write the program only computes: it never waits for a person there.
IDLE_IN_WRITE_S = 30
#: Seconds a clinician's save may take in all, from taking a connection (and checking it is
#: alive) to its commit, before the program cuts the connection itself (postgres_watchdog): a
#: frozen server never answers, and nothing above ends that wait. A live server ends a save
#: well within it: the lock wait (LOCK_WAIT_S) and a few statements of milliseconds; a save
#: whose server stopped answering for as long as IDLE_IN_WRITE_S would be ended by a live
#: server too. Nothing of a cut save is kept (the server rolls it back when it wakes).
SAVE_WATCHDOG_S = 30
#: Seconds a clinician's read (the unit, the list of units, the progress the window shows,
#: read on the window's own thread: ``read(quick=True)``) may take from its begin to its end
#: before the watchdog cuts it, as a save: a frozen server would freeze the window until it
#: wakes. Such a read takes milliseconds (one unit, one person's list); nothing else is
#: bounded: the PI's dashboard, reports, exports, adjudication and set-up read in the
#: background and may take as long as they need. Nothing is lost when a read is cut.
READ_WATCHDOG_S = 30

#: The kinds of write transaction (the execution option ``portalreview_writes``): a clinician's
#: save, other writes (long work), and a dry run (written, checked, always rolled back; it
#: takes no write lock, so that the team's saves go on meanwhile).
SAVE, LONG, TRIAL = "save", "long", "trial"
#: The execution option that marks a clinician's read (bounded by READ_WATCHDOG_S), and its value.
READS, QUICK = "portalreview_reads", "quick"


#: Each engine's watchdog (a clinician's saves and reads).
_WATCHDOGS: weakref.WeakKeyDictionary[Engine, Watchdog] = weakref.WeakKeyDictionary()


def _signed_in(url: URL, password: str | None) -> URL:
    """The address to connect with: ``url`` and the password asked of the person, if any.
    Messages and :attr:`ServerProject.location` show ``url`` itself: no "***" where the
    person typed no password into the address."""
    return url if password is None else url.set(password=password)


def _make_engine(url: URL) -> Engine:
    engine = create_engine(
        url,
        # whatever the server's default_transaction_isolation: the audit log's guard takes an
        # entry only in a READ COMMITTED transaction (postgres_security.AUDIT_GUARD); reads
        # ask for REPEATABLE READ themselves
        isolation_level="READ COMMITTED",
        # (no pool_pre_ping: the watchdog pings each connection taken from the pool itself,
        # under its deadline; a connection the server dropped is replaced, not used)
        connect_args={"connect_timeout": 10, "application_name": "PortalReview", **TCP_ARGS},
    )

    watchdog = _WATCHDOGS[engine] = Watchdog(engine, lambda: SAVE_WATCHDOG_S)

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        options = conn.get_execution_options()
        writes = options.get("portalreview_writes")
        if options.get(READS) == QUICK:  # a clinician's read: bounded from here on
            watchdog.keep(conn.connection.dbapi_connection, conn.connection.info,
                          READ_WATCHDOG_S)  # fmt: skip
        elif writes != SAVE:  # other reads and long writes may take as long as they need
            watchdog.release(conn.connection.info)
        if writes:
            _bound_waits(conn, writes)
            if writes != TRIAL:
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")

    return engine


def _bound_waits(conn: Connection, writes: str) -> None:
    """This write transaction's time limits (SET LOCAL: they end with it)."""
    statement_s = SAVE_STATEMENT_S if writes == SAVE else LONG_STATEMENT_S
    conn.exec_driver_sql(
        "SELECT set_config('lock_timeout', %(lock)s, true), "
        "set_config('statement_timeout', %(statement)s, true), "
        "set_config('idle_in_transaction_session_timeout', %(idle)s, true)",
        {
            "lock": f"{LOCK_WAIT_S * 1000:.0f}",
            "statement": f"{statement_s * 1000:.0f}",
            "idle": f"{IDLE_IN_WRITE_S * 1000:.0f}",
        },
    )


def _sqlstate(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def _no_answer_words(location: str, bound: float, what: str = "") -> str:
    """The words for work the watchdog cut after ``bound`` seconds (``what``: what became of
    it, e.g. "Nothing was saved.")."""
    return (
        f"The study server {location} did not answer for {bound:g} s (it may be stopped or "
        f"overloaded). {what + ' ' if what else ''}Try again when it is back."
    )


def _reason(exc: DBAPIError) -> str:
    """The server's or libpq's own words, first line, without the driver's decorations."""
    message = str(exc.orig).strip().splitlines()
    return message[0] if message else type(exc.orig).__name__


#: The write's transaction id, once it has written (NULL when it wrote nothing), and what became
#: of a transaction (PostgreSQL 13 or newer).
_TRANSACTION_ID = text("SELECT CAST(pg_current_xact_id_if_assigned() AS text)")
_TRANSACTION_STATUS = text("SELECT pg_xact_status(CAST(:xid AS xid8))")


class _Commit:
    """A write's transaction id, known once its work is done and only its COMMIT is left: if
    the connection is lost then, the server may have kept the write or not (it may have
    received the COMMIT and not told us), so :meth:`ServerProject._unavailable` asks it."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick  # a clinician's save, which she can make again
        self.xid: str | None = None

    def unsure_words(self, outcome: str | None) -> str:
        """What to say when the server could not tell whether it kept the write."""
        why = (
            "the server had not finished it when it stopped answering"
            if outcome == "in progress"
            else "the server could not be asked afterwards"
        )
        again = (
            "Saving it again replaces it."
            if self.quick
            else "Look at the study before doing it again."
        )
        return f"It may or may not have been saved ({why}). {again}"


class ServerProject:
    """An open study on a PostgreSQL server, with the interface of
    :class:`portalreview.store.project.Project` (read, write, meta, close...)."""

    path = None  # no file: callers that need one (backups, offline copies) check for it

    def __init__(self, url: URL, engine: Engine, read_only: bool) -> None:
        self.url = url
        self.read_only = read_only
        self.automatic_backup = None  # backups of a server are IT's (pg_dump)
        self.backup_problem: str | None = None
        self._engine = engine
        self._watchdog = _WATCHDOGS[engine]
        # closed: every later session or connection is refused (see store/closing.py)
        self._life = Closing(self.location)
        event.listen(engine, "do_connect", self._life.refuse_connection)
        snapshots = engine.execution_options(isolation_level="REPEATABLE READ")
        self._reader = sessionmaker(snapshots, expire_on_commit=False)
        self._quick_reader = sessionmaker(  # a clinician's read: bounded (READ_WATCHDOG_S)
            snapshots.execution_options(**{READS: QUICK}), expire_on_commit=False
        )
        self._writers = {
            writes: sessionmaker(
                engine.execution_options(portalreview_writes=writes), expire_on_commit=False
            )
            for writes in (SAVE, LONG, TRIAL)
        }

    @property
    def location(self) -> str:
        """Where the study is, for people and logs (never with a password)."""
        return redact(self.url)

    @property
    def label(self) -> str:
        """How messages name the study (a file's name; here the address)."""
        return self.location

    @property
    def server_name(self) -> str:
        """The server and database, short, for the status bar (``dbhost/ward5_study``)."""
        return f"{self.url.host or 'localhost'}/{self.url.database}"

    @property
    def stem(self) -> str:
        """The start of names of files made from the study: the database's name."""
        return self.url.database or "study"

    @property
    def folder(self) -> Path:
        """Where files made from the study go by default: the person's home folder."""
        return Path.home()

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        target: str,
        name: str | None = None,
        catalogs: Catalogs | None = None,
        password: str | None = None,
    ) -> ServerProject:
        """Make the (empty, existing) database ``target`` a new study."""
        project = cls.create_empty(target, password=password)
        start_study(project, name or project.url.database, catalogs)
        return project

    @classmethod
    def create_empty(
        cls,
        target: str,
        fill: Callable[[Session], None] | None = None,
        password: str | None = None,
    ) -> ServerProject:
        """The schema, rules and security in the empty database ``target``, and what marks it
        ours (``application``, ``schema_version``); no identity, no catalogs. ``fill(session)``
        (:func:`portalreview.store.transfer.copy_study`) adds rows in the same transaction:
        PostgreSQL's DDL is transactional, so a failure leaves the database as empty as it was.
        ``password`` (asked of the person) is kept in memory only."""
        url = parse_url(target)
        engine = _make_engine(_signed_in(url, password))
        try:
            with engine.begin() as conn:
                _install(conn, url)
                server_migrations.stamp_head(conn)
                if fill is not None:
                    with Session(conn) as session:
                        fill(session)
                        session.flush()
        except DBAPIError as exc:
            engine.dispose()
            raise _server_error(url, exc) from exc
        except BaseException:
            engine.dispose()
            raise
        return cls(url, engine, read_only=False)

    @classmethod
    def open(
        cls, target: str, read_only: bool = False, password: str | None = None
    ) -> ServerProject:
        """Open the study in database ``target``: reachable, ours, and in a format we read.
        ``password`` (asked of the person) is kept in memory only."""
        url = parse_url(target)
        engine = _make_engine(_signed_in(url, password))
        try:
            _check_is_study(url, engine)
        except BaseException:
            engine.dispose()
            raise
        log.info("server study opened: %s (%s)", redact(url), "read-only" if read_only else "rw")
        return cls(url, engine, read_only)

    @classmethod
    def upgrade(cls, target: str, password: str | None = None) -> tuple[int, int]:
        """Bring the study at ``target`` to the current format with its Alembic steps
        (server_migrations), in one transaction; (format before, format after). For the
        study's owner; nothing changes when a step fails."""
        url = parse_url(target)
        engine = _make_engine(_signed_in(url, password))
        try:
            with engine.begin() as conn:
                before = _format_of(url, conn)
                if before > migrations.SCHEMA_VERSION:
                    raise ServerError(f"{redact(url)} is in a newer format ({before}).")
                if server_migrations.revision(conn) is None:
                    raise ServerError(
                        f"{redact(url)} records no schema revision (alembic_version): it was "
                        "not made by PortalReview, or not by a version that can upgrade it."
                    )
                server_migrations.upgrade(conn)
                after = _format_of(url, conn)
        except DBAPIError as exc:
            raise _server_error(url, exc) from exc
        finally:
            engine.dispose()
        log.info("server study upgraded: %s from format %s to %s", redact(url), before, after)
        return before, after

    def close(self) -> None:
        """Close for good: later reads and saves (from work still under way on another thread)
        are refused with ProjectClosed instead of reconnecting; the saves under way are waited
        for (a little)."""
        self._life.close()
        self._engine.dispose()

    def __enter__(self) -> ServerProject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self, quick: bool = False) -> Iterator[Session]:
        """A session for reading (one consistent snapshot); ProjectClosed once closed.
        ``quick``: a clinician's read on the window's thread (a unit, the list of units),
        cut by the watchdog after :data:`READ_WATCHDOG_S` (a frozen server); other reads
        may take as long as they need."""
        self._life.check()
        reader = self._quick_reader if quick else self._reader
        with self._unavailable("read"), reader() as session, session.begin():
            yield session

    @contextlib.contextmanager
    def write(self, quick: bool = False) -> Iterator[Session]:
        """One write transaction, after the writers before it (see :data:`WRITE_LOCK`):
        committed when the block ends, rolled back on error. ``quick``: a clinician's save,
        whose statements get a shorter time limit (:data:`SAVE_STATEMENT_S`)."""
        if self.read_only:
            raise ProjectError(f"{self.location} is open read-only; changes cannot be saved.")
        writer = self._writers[SAVE if quick else LONG]
        commit = _Commit(quick)
        with (
            self._life.writing(),
            self._unavailable("save", commit),
            writer() as session,
            session.begin(),
        ):
            yield session
            commit.xid = session.scalar(_TRANSACTION_ID)  # (the COMMIT is next)

    @contextlib.contextmanager
    def trial(self) -> Iterator[Session]:
        """A write transaction that is always rolled back, for a dry run: the database checks
        every row written as in :meth:`write`, but it takes no write lock, so the team's saves
        go on meanwhile (PostgreSQL's row locks still order two writers of the same row)."""
        if self.read_only:
            raise ProjectError(f"{self.location} is open read-only; changes cannot be saved.")
        with (
            self._life.writing(),
            self._unavailable("save"),
            self._writers[TRIAL]() as session,
        ):
            session.begin()
            try:
                yield session
            finally:
                session.rollback()

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[bool]:
        """Hold ``key`` while working on it (True), or False when another workstation or
        thread holds it (store/claims.py): a session-level advisory lock on a connection of
        its own, let go when the block ends, or by the server if this workstation's
        connection is lost first."""
        self._life.check()
        lock = {"space": CLAIM_SPACE, "key": key_number(key)}
        with self._unavailable("read"):
            conn = self._engine.connect()
            try:
                mine = bool(conn.scalar(_TRY_CLAIM, lock))
                conn.commit()  # (the lock outlives the transaction: it is the session's)
            except BaseException:
                conn.invalidate()  # never back to the pool maybe holding the lock
                conn.close()
                raise
        try:
            yield mine
        finally:
            _let_go(conn, lock if mine else None)

    @contextlib.contextmanager
    def _unavailable(self, doing: str, commit: _Commit | None = None) -> Iterator[None]:
        """A lost server or connection, or a wait past its limit, as
        :class:`ServerUnavailable`, in words. A write whose connection was lost while its
        COMMIT was under way (``commit`` holds its transaction's id) is asked about on a new
        connection: kept, it raises nothing; rolled back, nothing was saved; not known, the
        words say so. A value the server cannot store (DataError) is a StoreError in words too:
        trying the same again never helps."""
        self._watchdog.forget_here()
        try:
            yield
        except DataError as exc:
            raise StoreError(self._refused_value_words(exc, doing)) from exc
        except DBAPIError as exc:
            lost = isinstance(exc, OperationalError | InterfaceError)
            if not lost and _sqlstate(exc) != IDLE_TOO_LONG:  # (psycopg's InternalError)
                raise
            what = "Nothing was saved." if doing == "save" else "Nothing was read."
            if lost and commit is not None and commit.xid is not None:
                outcome = self._commit_outcome(commit.xid)
                if outcome == "committed":
                    log.warning("the server kept a save whose answer was lost: %s", _reason(exc))
                    return
                if outcome != "aborted":
                    words = self._unavailable_words(exc, commit.unsure_words(outcome))
                    ask = functools.partial(self._was_kept, commit.xid)
                    raise ServerSaveOutcomeUnknown(words, ask) from exc
            raise ServerUnavailable(self._unavailable_words(exc, what)) from exc

    def _was_kept(self, xid: str) -> bool | None:
        """Whether the server kept transaction ``xid`` (None: not known yet, or the study is
        closed)."""
        try:
            outcome = self._commit_outcome(xid)
        except StoreError:  # (ProjectClosed: no new connection once closed)
            return None
        return {"committed": True, "aborted": False}.get(outcome)

    def _commit_outcome(self, xid: str) -> str | None:
        """What became of transaction ``xid``: ``committed``, ``aborted`` or ``in progress``
        (``pg_xact_status``), asked on a new connection under the read watchdog's bound; None
        when the server cannot be asked."""
        try:
            with self._quick_reader() as session, session.begin():
                return session.scalar(_TRANSACTION_STATUS, {"xid": xid})
        except DBAPIError as exc:
            log.warning("could not ask the server whether a save was kept: %s", _reason(exc))
            return None

    def _refused_value_words(self, exc: DataError, doing: str) -> str:
        """The server (or its driver) refused a value as one it cannot hold: a NUL in a text, a
        number out of range."""
        if doing != "save":
            return f"The study server {self.location} refused a value ({_reason(exc)})."
        return (
            f"The study server {self.location} cannot store a value in this save "
            f"({_reason(exc)}). Nothing was saved, and saving the same again will not help: "
            "change that value, then save again."
        )

    def _unavailable_words(self, exc: DBAPIError, what: str) -> str:
        bound = self._watchdog.cut_here()
        if bound is not None:  # (libpq's words would blame the server's close)
            return _no_answer_words(self.location, bound, what)
        code = _sqlstate(exc)
        if code == LOCK_NOT_AVAILABLE:
            return (
                f"The study server {self.location} is busy: another change to the study (an "
                "import or a merge, or a workstation that stopped in the middle of a save) "
                f"held it for more than {LOCK_WAIT_S:g} s. {what} Try again in a moment."
            )
        if code == IDLE_TOO_LONG:
            return (
                f"The study server {self.location} ended this save: this computer did not go "
                f"on with it for more than {IDLE_IN_WRITE_S:g} s, and it held up everyone "
                f"else's. {what} Try again."
            )
        if code == QUERY_CANCELED:
            return (
                f"The study server {self.location} did not answer in time ({_reason(exc)}). "
                f"{what} Try again in a moment."
            )
        return (
            f"The study server {self.location} did not answer ({_reason(exc)}). {what} "
            "Try again when it is back."
        )

    def last_audit_hash(self, session: Session) -> str | None:
        """The newest audit entry's hash, which the next entry chains to. Asked of a function
        with the owner's rights: a clinician may not read the other entries."""
        return session.scalar(text("SELECT portalreview_last_audit_hash()"))

    def listen(self, on_change: Callable[[str], None]) -> Listener:
        """Call ``on_change(kind)`` (on another thread) for each change saved in the study by
        anyone (postgres_listen); stop the returned listener when done."""
        from portalreview.store.backends.postgres_listen import Listener

        self._life.check()
        return Listener(self._engine.url, on_change)  # (with a password asked of the person)

    def member(self) -> str | None:
        """The annotator this connection's database role works as (None: the study's owner
        or IT's administrator, who is no annotator)."""
        with self.read(quick=True) as session:
            return session.scalar(
                text("SELECT name FROM annotators WHERE id = portalreview_me()")
            )

    def add_member(self, role: str, annotator: str) -> str:
        """Let database role ``role`` work as ``annotator`` (postgres_security.add_member);
        that annotator's study role. For the study's owner (IT's administrator)."""
        from portalreview.store.backends.postgres_security import add_member

        with self._life.writing(), self._engine.begin() as conn:
            return add_member(conn, Base.metadata, role, annotator)

    def meta(self, key: str) -> str | None:
        """One value of ``project_meta`` (a one-row read, bounded as a clinician's: the window
        reads the study's name as she signs in)."""
        with self.read(quick=True) as session:
            row = session.get(ProjectMeta, key)
            return row.value if row else None

    def integrity_check(self) -> str:
        """ "ok", or the first rows that break a foreign key or a rule (PostgreSQL checks every
        row as it is written, so this finds only what was changed behind its back)."""
        self._life.check()
        with self._engine.connect() as conn:
            invalid = conn.execute(
                text(
                    "SELECT conrelid::regclass || '.' || conname FROM pg_constraint "
                    "WHERE NOT convalidated AND connamespace = current_schema()::regnamespace"
                )
            ).scalars().all()  # fmt: skip
        return "ok" if not invalid else "not validated: " + ", ".join(invalid[:3])

    def backup(self, reason: str = "manual") -> None:
        raise ProjectError(
            f"{self.location} is on a server: its backups are made there by IT (pg_dump, "
            "docs/deployment.md), not by PortalReview."
        )


def _let_go(conn: Connection, lock: dict[str, int] | None) -> None:
    """End a claim (``lock``, None when the claim was not had) and return its connection; a
    connection that cannot end it is dropped, which ends it on the server."""
    try:
        if lock is not None:
            conn.execute(_END_CLAIM, lock)
            conn.commit()
    except DBAPIError as exc:
        log.warning("a claim was not let go (its connection is dropped): %s", _reason(exc))
        conn.invalidate()
    except BaseException:  # (an interrupt): never back to the pool holding the lock
        conn.invalidate()
        raise
    finally:
        conn.close()


def _install(conn: Connection, url: URL) -> None:
    """Make the empty database of ``conn`` a study with no rows (see create_empty)."""
    from portalreview.store.backends.postgres_security import security_statements

    _require_supported_server(url, conn)
    if conn.execute(text(_COUNT_TABLES)).scalar():
        raise ServerError(
            f"{redact(url)} already holds tables: a new study needs an empty database "
            "(ask IT for one)."
        )
    for statement in _schema_statements():
        conn.exec_driver_sql(statement)
    Base.metadata.create_all(conn)
    for statement in _rules_statements():
        conn.exec_driver_sql(statement)
    for statement in security_statements(Base.metadata):
        conn.exec_driver_sql(statement)
    conn.execute(
        ProjectMeta.__table__.insert(),
        [
            {"key": "application", "value": APPLICATION},
            {"key": "schema_version", "value": str(migrations.SCHEMA_VERSION)},
        ],
    )


def _server_error(url: URL, exc: DBAPIError) -> ServerError:
    reason = _reason(exc)
    if "no password supplied" in reason:
        return PasswordNeeded(
            f"The study server {redact(url)} asks for {url.username or 'your'}'s password. Put "
            "it in ~/.pgpass (docs/deployment.md), or open the study where you can type it."
        )
    if "password authentication failed" in reason:
        return PasswordRefused(
            f"The study server {redact(url)} refused the password of {url.username}: check the "
            "user name and password (they are IT's to reset)."
        )
    if f'permission denied for database "{url.database}"' in reason:  # (no CONNECT)
        return NotAMember(_no_connect_words(url))
    if f'database "{url.database}" does not exist' in reason:
        return NoSuchDatabase(
            f"The study server at {url.host or 'localhost'} has no database {url.database}: "
            "check the database's name at the end of the address (IT gives it)."
        )
    if isinstance(exc, OperationalError):
        unreached = any(words in reason for words in _NOT_REACHED)
        return (ServerNotReached if unreached else ServerError)(
            f"The study server {redact(url)} cannot be reached or refused you: {reason}"
        )
    return ServerError(f"The study server {redact(url)} refused this: {reason}")


#: libpq's words for "nobody answered there": no such host, nothing listening, no route, silence
_NOT_REACHED = (
    "Connection refused",
    "could not translate host name",
    "failed to resolve host",
    "Name or service not known",
    "No route to host",
    "Network is unreachable",
    "timeout expired",
)


def _format_of(url: URL, conn: Connection) -> int:
    value = conn.execute(
        text("SELECT value FROM project_meta WHERE key = 'schema_version'")
    ).scalar()
    if value is None:
        raise NotAStudy(f"{redact(url)} is a database, but not a PortalReview study.")
    return int(value)


#: The oldest PostgreSQL a study runs on: 13 has what every save asks of it
#: (``pg_current_xact_id_if_assigned``, ``pg_xact_status``: see :class:`_Commit`).
MIN_SERVER_VERSION = (13,)


def _require_supported_server(url: URL, conn: Connection) -> None:
    """A server older than :data:`MIN_SERVER_VERSION` is refused in words, before any save
    could fail on a function it lacks."""
    found = conn.dialect.server_version_info or ()
    if found < MIN_SERVER_VERSION:
        raise ServerError(
            f"{redact(url)} runs PostgreSQL {'.'.join(map(str, found[:2]))}; PortalReview needs "
            f"PostgreSQL {MIN_SERVER_VERSION[0]} or newer. Ask IT to upgrade the server."
        )


#: Who the login is in the study: its role, the annotator it works as (NULL: none), whether
#: that one is the PI, whether it has the rights of the study's tables' owner (that owner, or
#: a superuser), that owner's name, whether it may read project_meta, and whether a
#: clinician's blinded views come first on its search path (postgres_security).
_WHO_IS_THIS = text(
    "SELECT session_user, portalreview_me(), portalreview_is_pi(), "
    "pg_has_role(current_user, c.relowner, 'USAGE'), pg_get_userbyid(c.relowner), "
    "has_table_privilege('project_meta', 'SELECT'), "
    "coalesce((current_schemas(false))[1] = 'blinded' OR to_regnamespace('blinded') IS NULL,"
    " false) "
    "FROM pg_class c WHERE c.oid = to_regclass('project_meta')"
)


def _require_member(url: URL, conn: Connection) -> None:
    """Refuse, in words (:class:`NotAMember`), a login that is neither the study's owner nor a
    member set up in this database, before a read it may not make fails while she signs in.
    ``portalreview member`` gives a member's rights and search path in one database: a study
    restored or copied into another (pg_restore, CREATE DATABASE ... TEMPLATE) keeps its
    ``study_members`` but not those until IT runs it again."""
    if conn.execute(text("SELECT to_regprocedure('portalreview_me()')")).scalar() is None:
        return  # not a study of ours: _check_is_study says so
    role, me, pi, owns, owner, reads_meta, blinded_first = conn.execute(_WHO_IS_THIS).one()
    if owns:
        return  # the study's owner (IT), or a superuser
    if me is None:
        raise NotAMember(_not_a_member_words(url, role, owner))
    if not reads_meta or not (pi or blinded_first):
        name = _annotator_name(conn, me)
        raise NotAMember(_set_up_elsewhere_words(url, role, owner, name))


def _annotator_name(conn: Connection, annotator_id: int) -> str | None:
    """The annotator's name; None where the login may not read it (no rights here either)."""
    if not conn.execute(text("SELECT has_table_privilege('annotators', 'SELECT')")).scalar():
        return None
    query = text("SELECT name FROM annotators WHERE id = :id")
    return conn.execute(query, {"id": annotator_id}).scalar()


def _member_command(url: URL, role: str, owner: str | None, annotator: str | None) -> str:
    """The ``portalreview member`` command IT runs to set ``role`` up in this database."""
    address = f'"{redact(_as_account(url, owner))}"' if owner else "ADDRESS"
    name = shlex.quote(annotator) if annotator else "NAME"
    return f"portalreview member {address} {role} --as {name}"


def _as_account(url: URL, user: str) -> URL:
    """The same database and options for ``user``, with no password (``URL.set`` keeps one)."""
    return URL.create(url.drivername, user, None, url.host, url.port, url.database, url.query)


def _not_a_member_words(url: URL, role: str, owner: str) -> str:
    return (
        f"The database account {role} may connect to {redact(url)}, but is not a member of "
        "the study there. IT sets it up, with the study owner's account: "
        f"{_member_command(url, role, owner, None)} (NAME: the person's name in the study; "
        "docs/deployment.md, set-up step 3). Nothing was changed."
    )


def _set_up_elsewhere_words(url: URL, role: str, owner: str, annotator: str | None) -> str:
    works_as = f" as {annotator}" if annotator else ""
    return (
        f"The database account {role} works{works_as} in the study at {redact(url)}, but is no "
        "longer set up as a member there: the study was restored or copied into this database "
        "since IT set the account up (a member's rights and search path stay with the database "
        "they were given in). IT sets it up again, with the study owner's account: "
        f"{_member_command(url, role, owner, annotator)} (docs/deployment.md, Backups). "
        "Nothing was changed."
    )


def _no_connect_words(url: URL) -> str:
    account = f"the database account {url.username}" if url.username else "your database account"
    command = _member_command(url, url.username or "ROLE", None, None)
    return (
        f"The study server {redact(url)} does not let {account} connect to {url.database}: "
        "it is not set up as a member of the study there (or no longer: a study restored or "
        "copied into another database needs its members set up again). IT sets it up, with "
        f"the study owner's account: {command} (ADDRESS: the study's, with the owner's "
        "account; NAME: the person's name in the study; docs/deployment.md). Nothing was changed."
    )


def _check_is_study(url: URL, engine: Engine) -> None:
    watchdog = _WATCHDOGS[engine]
    watchdog.forget_here()
    try:
        with engine.connect() as conn:
            conn.execution_options(**{READS: QUICK})  # bounded: a frozen server ends the open
            _require_supported_server(url, conn)
            has_meta = conn.execute(text("SELECT to_regclass('project_meta') IS NOT NULL")).scalar()
            meta = {}
            if has_meta:
                _require_member(url, conn)
                rows = conn.execute(
                    text(
                        "SELECT key, value FROM project_meta "
                        "WHERE key IN ('application', 'schema_version')"
                    )
                )
                meta = dict(rows.all())
    except DBAPIError as exc:
        bound = watchdog.cut_here()
        if bound is not None:
            raise ServerUnavailable(_no_answer_words(redact(url), bound)) from exc
        raise _server_error(url, exc) from exc
    if meta.get("application") != APPLICATION:
        raise NotAStudy(f"{redact(url)} is a database, but not a PortalReview study.")
    version = int(meta.get("schema_version") or 0)
    if version > migrations.SCHEMA_VERSION:
        raise ServerError(
            f"{redact(url)} was written by a newer PortalReview (study format {version}; this "
            f"version {__version__} reads up to {migrations.SCHEMA_VERSION}). Install the newer "
            "version to open it."
        )
    if version < migrations.SCHEMA_VERSION:
        raise ServerError(
            f"{redact(url)} is in an older study format ({version}). IT upgrades it once for "
            f"everyone, as the study's owner, after a pg_dump: portalreview upgrade ADDRESS."
        )
