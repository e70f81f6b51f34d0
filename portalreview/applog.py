"""The program's own log file: one per user, in the platform's local application-data folder,
size-capped and rotated. It holds ids, actions, timings and errors with their tracebacks, never
a message, an answer or a password (docs/deployment.md says where it is).

Only the ``portalreview`` logger writes there (libraries' loggers do not). Callers log ids,
kinds, counts, file names and seconds, never texts. An exception's message may quote a
patient's words (an import refusal names the cell it could not read, a model answer that did
not parse is quoted), and no filter can tell such words apart from ours: so the log names an
exception's type and its traceback's frames, and gives its message only for the errors of
files, the database and the project (:func:`error_text`), through :func:`redact`, which hides
quoted text, SQL parameters and passwords.

No Qt here: the command line sets the log up too, and must not load Qt.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from portalreview import __version__

LOGGER = "portalreview"
LOG_DIR_ENV = "PORTALREVIEW_LOG_DIR"  # overrides the folder (tests, locked-down machines)
LOG_FILE = "portalreview.log"
MAX_BYTES = 1_000_000  # per file; with BACKUPS old files the log never passes ~4 MB
BACKUPS = 3
ORGANIZATION = APPLICATION = "PortalReview"  # as ui/settings.py gives Qt

log = logging.getLogger(LOGGER)
_handler: logging.handlers.RotatingFileHandler | None = None
# Libraries whose warnings would otherwise reach the terminal through Python's last-resort
# handler: psycopg's "error ignored terminating <psycopg.Pipeline [BAD]>..." when a team
# server goes away mid-copy, printed before the program's own message.
_LIBRARY_LOGGERS = ("psycopg",)
_lock = threading.Lock()


# --- where ---------------------------------------------------------------------------------


def app_data_dir(
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Path:
    """The folder Qt names ``QStandardPaths.AppLocalDataLocation`` for our organization and
    application names, computed without Qt:

    * Windows: ``%LOCALAPPDATA%\\PortalReview\\PortalReview``
    * macOS: ``~/Library/Application Support/PortalReview/PortalReview``
    * Linux and other Unix: ``$XDG_DATA_HOME/PortalReview/PortalReview``
      (``~/.local/share/...`` when ``XDG_DATA_HOME`` is unset or not absolute)
    """
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    if platform.startswith("win"):
        base = Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".local" / "share"
    return base / ORGANIZATION / APPLICATION


def log_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The log folder: ``$PORTALREVIEW_LOG_DIR`` when set, else ``<app data>/logs``."""
    environ = os.environ if environ is None else environ
    override = environ.get(LOG_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else app_data_dir(environ) / "logs"


def log_path() -> Path:
    """The current log file (older ones are ``portalreview.log.1`` ... ``.3``)."""
    return log_dir() / LOG_FILE


# --- what ----------------------------------------------------------------------------------

# A quoted run of text ('...' or "..."), and an identifier-like one that stays readable
# (a column name, a kind, a file name): anything with a space or over 40 characters is hidden.
_QUOTED = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"")
_WORD = re.compile(r"[\w.\-/\\:]{0,40}")
_SQL_PARAMETERS = re.compile(r"\[parameters: .*?\](?=\n|$|\s*\(Background)", re.DOTALL)
_PASSWORD = re.compile(r"(password|passwd|pwd)(\s*[=:]\s*)\S+", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@/\s]+@")


def redact(text: str) -> str:
    """``text`` with quoted free text, SQL parameters and passwords replaced by placeholders:
    ``field 'message': 'my chest hurts'`` -> ``field 'message': '<14 chars>'``."""
    text = _SQL_PARAMETERS.sub("[parameters: <hidden>]", text)
    text = _PASSWORD.sub(r"\1\2<hidden>", text)
    text = _URL_PASSWORD.sub(r"\1<hidden>@", text)

    def hide(match: re.Match[str]) -> str:
        inner = match.group(1) if match.group(1) is not None else match.group(2)
        if _WORD.fullmatch(inner):
            return match.group(0)
        quote = match.group(0)[0]
        return f"{quote}<{len(inner)} chars>{quote}"

    return _QUOTED.sub(hide, text)


# Errors whose messages are the system's, the database's or ours about a file or a server:
# they may be logged (redacted). By the names of their classes, to load nothing here.
_WORDED_ERRORS = frozenset(
    {"ProjectError", "SaveFailed", "ReadFailed", "ProjectClosed", "ServerUnavailable"}
)
_WORDED_MODULES = ("sqlite3", "sqlalchemy", "psycopg")


def _message_may_be_logged(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    return any(
        c.__name__ in _WORDED_ERRORS or c.__module__.startswith(_WORDED_MODULES)
        for c in type(exc).__mro__
    )


def error_text(exc: BaseException) -> str:
    """What the log says of an exception: its type, with its message (redacted) only where
    the message is about a file, the database or a server; otherwise only its length."""
    name = type(exc).__name__
    message = str(exc)
    if not message:
        return name
    if _message_may_be_logged(exc):
        return f"{name}: {redact(message)}"
    return f"{name} (message not logged: {len(message)} characters)"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, oldest first."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain[::-1]


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n"


def traceback_text(exc: BaseException) -> str:
    """A traceback as Python prints it, each exception's line replaced by :func:`error_text`
    (notes left out: they may hold a message too)."""
    lines: list[str] = []
    chain = _chain(exc)
    for i, item in enumerate(chain):
        if i:
            lines.append(_CAUSE if item.__cause__ is chain[i - 1] else _CONTEXT)
        if item.__traceback__ is not None:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(traceback.format_tb(item.__traceback__))
        lines.append(error_text(item) + "\n")
    return "".join(lines).rstrip("\n")


class _Formatter(logging.Formatter):
    """UTC times; a traceback keeps its frames (file, line, function, source line: our code)
    and redacts everything else (exception messages, which may quote data)."""

    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s.%(msecs)03dZ %(levelname)-7s %(process)d %(threadName)s "
            "%(name)s: %(message)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )

    def format(self, record: logging.LogRecord) -> str:
        cached = record.exc_text  # another handler's formatter may have cached it unredacted
        args = record.args
        record.exc_text = None
        if isinstance(args, tuple):  # an exception given as an argument: as error_text says
            record.args = tuple(error_text(a) if isinstance(a, BaseException) else a for a in args)
        try:
            return super().format(record)
        finally:
            record.exc_text, record.args = cached, args

    def formatMessage(self, record: logging.LogRecord) -> str:
        return redact(super().formatMessage(record))

    def formatException(self, ei) -> str:
        kind, value, tb = ei
        if value is None:
            return kind.__name__ if kind is not None else ""
        if tb is not None and value.__traceback__ is None:
            value = value.with_traceback(tb)
        return traceback_text(value)


# --- set-up --------------------------------------------------------------------------------


def setup_logging(where: str) -> Path | None:
    """Send the ``portalreview`` logger to the user's log file (again, harmlessly, when it is
    already set up; to the new folder when ``PORTALREVIEW_LOG_DIR`` changed) and log uncaught
    exceptions there. ``where``: "gui" or "cli", written in the start line.

    Returns the log file, or None when the folder cannot be written: the program then runs
    without a log rather than not at all."""
    global _handler
    path = log_path()
    with _lock:
        if _handler is None or Path(_handler.baseFilename) != path.absolute():
            try:
                handler = _open_handler(path)
            except OSError as exc:
                print(f"PortalReview: no log file ({path}: {exc.strerror})", file=sys.stderr)
                return None
            if _handler is not None:
                _detach(_handler)
            _handler = handler
            for logger in _loggers():
                logger.addHandler(handler)
        if log.level == logging.NOTSET or log.level > logging.INFO:
            log.setLevel(logging.INFO)
    _install_excepthooks()
    log.info(
        "%s start: PortalReview %s, Python %s, %s",
        where,
        __version__,
        sys.version.split()[0],
        sys.platform,
    )
    return path


class _PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """Every log file (the first, and each one after a rotation) readable by its user only:
    other people on a shared workstation cannot read it."""

    #: Set once a line could not be written: nothing more is written to the file.
    stopped = False

    def _open(self):
        if os.name == "posix":
            os.close(os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            os.chmod(self.baseFilename, 0o600)
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        if not self.stopped:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """A line the file cannot take (its disk full, its folder gone read-only): said once,
        in one line, and the file left alone from then on; not Python's "--- Logging error
        ---" traceback on the terminal for each line after it, burying the program's output."""
        if self.stopped:
            return
        self.stopped = True
        error = sys.exc_info()[1]
        why = "unknown" if error is None else getattr(error, "strerror", None) or error_text(error)
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # what it holds cannot be written
                stream.close()
        with contextlib.suppress(OSError, ValueError):  # no terminal to say it on either
            print(
                f"PortalReview: the log file {self.baseFilename} cannot be written ({why}); "
                "the program goes on without it.",
                file=sys.stderr,
            )


def _open_handler(path: Path) -> logging.handlers.RotatingFileHandler:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handler = _PrivateFileHandler(
        path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=False
    )
    handler.setFormatter(_Formatter())
    return handler


def _install_excepthooks() -> None:
    """Log an uncaught exception (main thread, Qt slots, threads) with its traceback, then let
    the previous hook report it as before."""
    if getattr(sys.excepthook, "_portalreview", False):
        return
    previous = sys.excepthook
    previous_thread = threading.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            log.critical("uncaught exception", exc_info=(kind, exc, tb))
        previous(kind, exc, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit and args.exc_value is not None:
            name = args.thread.name if args.thread is not None else "?"
            log.critical(
                "uncaught exception in thread %s",
                name,
                exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
            )
        previous_thread(args)

    hook._portalreview = True  # type: ignore[attr-defined]
    sys.excepthook = hook
    threading.excepthook = thread_hook


def close_log() -> None:
    """Detach and close the log file (tests; the program keeps it until it exits)."""
    global _handler
    with _lock:
        if _handler is not None:
            _detach(_handler)
            _handler = None


def _loggers() -> list[logging.Logger]:
    """The program's logger and the libraries' that write to the same file."""
    return [log, *map(logging.getLogger, _LIBRARY_LOGGERS)]


def _detach(handler: logging.Handler) -> None:
    for logger in _loggers():
        logger.removeHandler(handler)
    handler.close()
