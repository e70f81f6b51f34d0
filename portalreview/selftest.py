"""``portalreview selftest``: check an installed program (a frozen build, or an install from
the source) from the inside.

A hidden verb of the ``portalreview`` command (no help line; :func:`register`), also runnable
from a checkout as ``python -m portalreview.selftest``. packaging/smoke_test.py runs it after
installing a build; hospital IT can run it on a workstation to see what the program finds there.

Steps, each reported on its own line as ``selftest: <step>: ok (...)`` or ``... FAILED``:

* **imports**: every module of the program imports (catches modules a freezer left out);
* **resources**: the bundled prompt templates and demo data are there;
* **sqlite**: the SQLite library has what the project file needs (JSON, WAL);
* **llama**: llama.cpp's shared libraries load; the CPU features and GPU support they were
  built with;
* **server** (with ``--project postgresql://...``): the server driver (psycopg, libpq) loads;
* **audit** (with ``--project``): the project's audit log is intact (its hash chain), and every
  answer matches its last entry, as ``portalreview verify`` checks them. A server study is
  connected to (the password asked at a terminal, as every command does) and checked where
  the login sees the whole log (the PI's or the owner's); a clinician's login sees only their
  own entries, so the step says it connected and read the study but did not check the log;
* **qt**: Qt starts (offscreen unless ``QT_QPA_PLATFORM`` says otherwise) and names its
  platform plugin; with ``--project``, the main window opens the project read-only, signed
  in as ``--as`` (by default the first person with a unit assigned), and shows every kind's
  editor in turn (a dialog the window opens instead fails the step with its words; so does a
  clinician with no units, while a PI with none of their own passes, as the app opens the
  study for them); a server study is not opened in the window (the step says so);
* **model** (with ``--model FILE``): the GGUF model loads in its own process (as in the app)
  and generates a few tokens.

Exit status 0 when every step passed, 1 otherwise. Nothing is written anywhere except the
``--log`` file (a project of an older format is checked and shown from an upgraded copy in the
system's temporary folder, removed afterwards), and nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from portalreview import __version__

EXIT_OK, EXIT_FAILED = 0, 1
DESCRIPTION = (  # the module's first paragraph, without its reST markup (--help)
    "portalreview selftest: check an installed program (a frozen build, or an install from "
    "the source) from the inside."
)


class _Report:
    def __init__(self, streams: list[TextIO]) -> None:
        self.streams = streams
        self.failed: list[str] = []

    def line(self, text: str) -> None:
        for stream in self.streams:
            stream.write(text + "\n")
            stream.flush()

    def step(self, name: str, work: Callable[[], str]) -> None:
        started = time.perf_counter()
        try:
            detail = work()
        except BaseException as exc:  # a selftest reports everything, then goes on
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.failed.append(name)
            self.line(f"selftest: {name}: FAILED: {type(exc).__name__}: {exc}")
            for text in traceback.format_exception(exc):
                self.line(text.rstrip("\n"))
            return
        self.line(f"selftest: {name}: ok ({detail}; {time.perf_counter() - started:.1f} s)")


def _imports() -> str:
    import portalreview

    names = [
        info.name
        for info in pkgutil.walk_packages(portalreview.__path__, "portalreview.")
        if not info.name.endswith("__main__")  # it runs the program
    ]
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(f"{name} ({type(exc).__name__}: {exc})")
    if failed:
        raise ImportError("cannot import " + "; ".join(failed))
    if len(names) < 20:
        raise ImportError(f"only {len(names)} modules found: the program is incomplete")
    return f"{len(names)} modules"


def _resources() -> str:
    from portalreview.llm import templates
    from portalreview.resources import resources_dir

    root = resources_dir()
    prompts = sorted(p.name for p in (root / "prompts").glob("*.txt"))
    demo = sorted(p.name for p in (root / "demo").glob("*.jsonl"))
    if not prompts or not demo:
        raise FileNotFoundError(f"bundled files missing in {root}")
    checked = templates.defaults()  # reads and checks every bundled template
    return f"{len(checked)} prompt templates, {len(demo)} demo files in {root}; {_source_stamp()}"


def _source_stamp() -> str:
    """A frozen build must carry the digest of its source: without it, figures the project
    kept from another build would be taken for this build's (reports/report_cache.py)."""
    from portalreview.source_digest import PACKAGE_ROOT, STAMP_NAME, source_digest

    if not getattr(sys, "frozen", False):
        return "source digest from the .py files"
    if not (PACKAGE_ROOT / STAMP_NAME).is_file() or source_digest() is None:
        raise FileNotFoundError(f"the build carries no {STAMP_NAME} in {PACKAGE_ROOT}")
    return f"source digest from the build's {STAMP_NAME}"


def _sqlite() -> str:
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("SELECT json_valid('{}')").fetchone()
    finally:
        conn.close()
    return f"SQLite {sqlite3.sqlite_version}, JSON functions present"


def _llama() -> str:
    import llama_cpp

    library = getattr(llama_cpp.llama_cpp, "_lib", None)
    info = llama_cpp.llama_print_system_info()
    info = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    where = getattr(library, "_name", "?")
    return (
        f"llama-cpp-python {llama_cpp.__version__} from {where}; GPU offload "
        f"{'available' if gpu else 'not built in'}; {info.strip().rstrip('|').strip()}"
    )


def _qt(project: Path | str | None, annotator: str | None) -> str:
    from portalreview.store.backends import is_server_url

    if project is None:
        return _qt_window(None, annotator)
    if is_server_url(project):
        return f"{_qt_window(None, annotator)}; the server study was not opened in the window"
    from portalreview.store.merge import SELFTEST_PREFIX, open_read_only_upgraded

    # a file of an older format is shown from an upgraded temporary copy, removed afterwards
    with open_read_only_upgraded(Path(project), SELFTEST_PREFIX) as (opened, _):
        return _qt_window(opened.path, annotator or _someone_with_work(opened))


def _someone_with_work(project: Any) -> str:
    """Whom to sign in as when ``--as`` is not given: the first person (not a model) with a
    unit assigned. (Without a name the window would ask, and nobody would answer.)"""
    from sqlalchemy import select

    from portalreview.store.models import Annotator, Assignment

    with project.read() as s:
        name = s.scalar(
            select(Annotator.name)
            .join(Assignment, Assignment.annotator_id == Annotator.id)
            .where(Annotator.is_model.is_(False))
            .order_by(Annotator.id)
            .limit(1)
        )
    if name is None:
        raise RuntimeError(f"nobody in {project.label} has a unit to show (none is assigned)")
    return name


def _show_every_editor(window: Any, app: Any) -> list[str]:
    """Bring each kind's tab forward in turn; the kinds shown."""
    kinds = []
    for index in range(window.kind_tabs.count()):
        window.kind_tabs.setCurrentIndex(index)
        app.processEvents()
        kinds.append(window.kind)
    return kinds


def _qt_window(path: Path | None, annotator: str | None) -> str:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import QSettings, QStandardPaths

    from portalreview.ui.app import application

    app = application(["portalreview"])
    detail = f"PySide6 {pyside_version}, platform {app.platformName()}"
    if path is None:
        return detail
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences

    # Our own settings file, so that the person's recent files and preferences are untouched.
    temp = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.TempLocation))
    settings = QSettings(
        str(temp / f"portalreview-selftest-{os.getpid()}.ini"), QSettings.Format.IniFormat
    )
    window = MainWindow(Preferences(settings))
    window.show()
    asked = _DismissedQuestions(app)
    try:
        # read-only, as the audit step: opening for writing would make an automatic backup
        # beside the project, and upgrade a file of an older format
        window.open_project(path, annotator=annotator, read_only=True)
        deadline = time.monotonic() + 60
        while window.session is None:
            if asked.words:
                raise RuntimeError(f"the window asked instead of opening {path.name}: "
                                   f"{asked.words[0]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise TimeoutError(f"the window did not open {path.name}")
            app.processEvents()
            time.sleep(0.01)
        kinds = _show_every_editor(window, app)
        opened = f"{detail}; opened {path.name} read-only"
        if kinds:
            return f"{opened}, editors shown: {', '.join(kinds)} (signed in as {annotator})"
        if window.service is not None and window.service.viewer.role == "pi":
            # a PI need not annotate: the study opened for them, as it does in the app
            return f"{opened}; no units of their own (signed in as {annotator}, the PI)"
        raise RuntimeError(f"{annotator or 'the person'} has no work in {path.name}")
    finally:
        asked.stop()
        window.close()
        app.processEvents()
        Path(settings.fileName()).unlink(missing_ok=True)


class _DismissedQuestions:
    """Closes any dialog the window opens and keeps its words: nobody is there to answer, and
    a modal dialog would hold the self-test for ever (its own event loop runs inside the
    wait for the window)."""

    def __init__(self, app: Any) -> None:
        from PySide6.QtCore import QTimer

        self.words: list[str] = []
        self._app = app
        self._timer = QTimer()
        self._timer.timeout.connect(self._dismiss)
        self._timer.start(200)

    def _dismiss(self) -> None:
        from PySide6.QtWidgets import QDialog, QMessageBox

        dialog = self._app.activeModalWidget()
        if dialog is None:
            return
        words = dialog.text() if isinstance(dialog, QMessageBox) else dialog.windowTitle()
        self.words.append(" ".join(words.split()) or type(dialog).__name__)
        if isinstance(dialog, QDialog):
            dialog.reject()
        else:
            dialog.close()

    def stop(self) -> None:
        self._timer.stop()


def _audit(project: Path) -> str:
    """As ``portalreview verify``: a file of an older format is checked in an upgraded
    temporary copy; the file itself is never changed."""
    from portalreview.store.audit_verify import verify_file

    result = verify_file(project)
    if not result.ok:
        raise ValueError(result.describe())
    return result.describe()


def _server_driver() -> str:
    import psycopg

    libpq = psycopg.pq.version()  # major * 10000 + minor
    return f"psycopg {psycopg.__version__}, libpq {libpq // 10000}.{libpq % 10000}"


def _server_audit(address: str) -> str:
    """A server study, read-only: connected to, and its audit log checked as ``portalreview
    verify`` checks it where this login sees all of it (the PI's, the owner's)."""
    from portalreview.cli import ask_server_passwords_at_terminal
    from portalreview.store.audit_verify import sees_everything, verify_project
    from portalreview.store.backends import open_project

    ask_server_passwords_at_terminal()
    with open_project(address, read_only=True) as project:
        with project.read() as session:
            whole = sees_everything(session)
        if not whole:
            return (
                f"connected to {project.location} and read the study; its audit log NOT "
                "checked: this login is a clinician's, which sees only their own entries (the "
                "PI or the study's owner can check it)"
            )
        result = verify_project(project)
        if not result.ok:
            raise ValueError(result.describe())
        return f"connected to {project.location}; {result.describe()}"


def _model(path: Path, cpu: bool) -> str:
    """As the app runs it: in a process of its own (which a frozen build must be able to
    start)."""
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.engines import load_engine

    with load_engine(path, gpu=False if cpu else None, hash_cache=False) as engine:
        generation = engine.complete("Hello, how are you?", GenerationParams(max_tokens=8))
        return (
            f"{engine.info.describe()}, in its own process; "
            f"generated {len(generation.token_ids)} tokens"
        )


def run(
    model: Path | None = None,
    project: Path | str | None = None,
    annotator: str | None = None,
    cpu: bool = False,
    log: Path | None = None,
    skip_qt: bool = False,
) -> int:
    """Run every step; returns the exit status. ``project``: a file, or a server study's
    address."""
    from portalreview.store.backends.postgres import is_server_url

    streams: list[TextIO] = [sys.stdout] if sys.stdout is not None else []
    log_file = Path(log).open("w", encoding="utf-8") if log else None  # noqa: SIM115
    if log_file is not None:
        streams.append(log_file)
    report = _Report(streams)
    try:
        frozen = getattr(sys, "frozen", False)
        report.line(
            f"selftest: PortalReview {__version__} "
            f"({'frozen build in ' + str(getattr(sys, '_MEIPASS', '?')) if frozen else 'Python'}"
            f"), Python {platform.python_version()}, {platform.platform()}"
        )
        report.step("imports", _imports)
        report.step("resources", _resources)
        report.step("sqlite", _sqlite)
        report.step("llama", _llama)
        if is_server_url(project):
            report.step("server", _server_driver)
            report.step("audit", lambda: _server_audit(str(project)))
        elif project is not None:
            report.step("audit", lambda: _audit(Path(project)))
        if not skip_qt:
            report.step("qt", lambda: _qt(project, annotator))
        if model is not None:
            report.step("model", lambda: _model(Path(model), cpu))
        if report.failed:
            report.line(f"selftest: FAILED ({', '.join(report.failed)})")
            return EXIT_FAILED
        report.line("selftest: all steps passed")
        return EXIT_OK
    finally:
        if log_file is not None:
            log_file.close()


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, metavar="FILE", help="also load this GGUF model")
    parser.add_argument("--cpu", action="store_true", help="load the model on the CPU only")
    parser.add_argument(  # (a string: Path would make "postgresql://" "postgresql:/")
        "--project",
        metavar="PATH",
        help="check this project (a file, or a server study's postgresql:// address)",
    )
    parser.add_argument("--as", dest="annotator", metavar="NAME", help="sign in as NAME")
    parser.add_argument("--no-qt", action="store_true", help="skip the Qt step")
    parser.add_argument("--log", type=Path, metavar="FILE", help="also write the report here")


def _from_args(args: argparse.Namespace) -> int:
    return run(args.model, args.project, args.annotator, args.cpu, args.log, args.no_qt)


def register(verbs: argparse._SubParsersAction) -> None:
    """Add the (hidden: no help line) ``selftest`` verb to the ``portalreview`` command."""
    parser = verbs.add_parser("selftest", description=DESCRIPTION)
    _add_arguments(parser)
    parser.set_defaults(func=_from_args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m portalreview.selftest", description=DESCRIPTION
    )
    _add_arguments(parser)
    return _from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
