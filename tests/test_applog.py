"""The per-user log file: where it is on each platform, what it holds (ids, actions, timings,
errors with tracebacks) and what it never holds (message or answer text, passwords)."""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from portalreview import applog
from portalreview.applog import app_data_dir, log_dir, redact, setup_logging
from portalreview.cli import main

HOME = Path("/home/dana")
SECRET = "Zorblax wheezing since Tuesday"  # a message no log line may hold


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """The log sent to a folder of the test's own (closed again afterwards)."""
    folder = tmp_path / "logs"
    monkeypatch.setenv(applog.LOG_DIR_ENV, str(folder))
    yield folder
    applog.close_log()


def test_the_log_folder_on_each_platform():
    win = app_data_dir({"LOCALAPPDATA": r"C:\Users\dana\AppData\Local"}, "win32", HOME)
    assert win == Path(r"C:\Users\dana\AppData\Local") / "PortalReview" / "PortalReview"
    assert app_data_dir({}, "darwin", HOME) == Path(
        "/home/dana/Library/Application Support/PortalReview/PortalReview"
    )
    assert app_data_dir({}, "linux", HOME) == Path(
        "/home/dana/.local/share/PortalReview/PortalReview"
    )
    assert app_data_dir({"XDG_DATA_HOME": "/data/x"}, "linux", HOME) == Path(
        "/data/x/PortalReview/PortalReview"
    )
    # the XDG specification ignores a relative path
    assert app_data_dir({"XDG_DATA_HOME": "rel"}, "linux", HOME) == Path(
        "/home/dana/.local/share/PortalReview/PortalReview"
    )
    assert log_dir({"XDG_DATA_HOME": "/data/x"}) == Path("/data/x/PortalReview/PortalReview/logs")
    assert log_dir({applog.LOG_DIR_ENV: "/elsewhere", "XDG_DATA_HOME": "/x"}) == Path("/elsewhere")


@pytest.mark.skipif(sys.platform != "linux", reason="compares with Qt on this platform")
def test_the_folder_is_the_one_qt_names(tmp_path, monkeypatch):
    from PySide6.QtCore import QStandardPaths

    from portalreview.ui.app import application

    application()  # our organization and application names
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    qt = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppLocalDataLocation)
    assert Path(qt) == app_data_dir() == tmp_path / "PortalReview" / "PortalReview"


def test_redact_hides_free_text_and_passwords_but_keeps_names():
    assert redact("cases.csv, row 3, field 'message': 'my chest hurts'") == (
        "cases.csv, row 3, field 'message': '<14 chars>'"
    )
    assert redact('span "a b" not in the text') == 'span "<3 chars>" not in the text'
    assert redact("unit 5 (respond), answer 7") == "unit 5 (respond), answer 7"
    both = repr('Bob\'s wife said "he has HIV"')  # Python escapes the inner quote
    assert redact(f"got {both}") == f"got '<{len(both) - 2} chars>'"
    assert redact("postgresql://ava:s3cret@db/study") == "postgresql://ava:<hidden>@db/study"
    assert redact("password=s3cret host=db") == "password=<hidden> host=db"
    sql = "[SQL: INSERT INTO t (a) VALUES (?)]\n[parameters: ('Zorblax wheezing',)]"
    assert redact(sql) == "[SQL: INSERT INTO t (a) VALUES (?)]\n[parameters: <hidden>]"


def test_a_librarys_warning_goes_to_the_log_not_the_terminal(logs, capsys):
    """psycopg's warning about a pipeline it could not end (a team server gone mid-copy) was
    printed to the terminal before the program's own message."""
    import logging

    applog.setup_logging("cli")
    logging.getLogger("psycopg").warning("error ignored terminating <psycopg.Pipeline [BAD]>")
    assert capsys.readouterr().err == ""
    assert "error ignored terminating" in applog.log_path().read_text(encoding="utf-8")
    applog.close_log()
    assert logging.getLogger("psycopg").handlers == []


def test_the_log_is_size_capped_and_rotates(logs, monkeypatch):
    monkeypatch.setattr(applog, "MAX_BYTES", 2_000)
    path = setup_logging("cli")
    assert path == logs / "portalreview.log"
    line = logging.getLogger("portalreview.test")
    for i in range(200):
        line.info("line %d of a test that fills the log", i)
    files = sorted(p.name for p in logs.iterdir())
    assert files == [
        "portalreview.log",
        "portalreview.log.1",
        "portalreview.log.2",
        "portalreview.log.3",
    ]
    assert all((logs / f).stat().st_size <= 2_000 for f in files)
    assert "line 199 of" in path.read_text(encoding="utf-8")
    if os.name == "posix":
        assert (path.stat().st_mode & 0o777) == 0o600


def test_a_command_line_session_is_logged_without_texts(logs, tmp_path, capsys):
    project = tmp_path / "study.prproj"
    cases = tmp_path / "cases.csv"
    cases.write_text(f'case_id,message\nc1,"{SECRET}"\n', encoding="utf-8")
    assert main(["new", str(project), "--annotator", "ava"]) == 0
    assert main(["import", str(project), str(cases)]) == 0
    assert main(["export", str(project), "--format", "csv", "-o", str(tmp_path / "out")]) == 0
    assert main(["export", str(project), "--format", "csv", "-o", str(cases)]) == 2  # a file
    capsys.readouterr()

    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    for expected in (
        "cli start: PortalReview",
        "command new done (status 0)",
        f"project opened: {project} (for writing)",
        "command import done (status 0)",
        f"export written: {tmp_path / 'out'} (csv; 1 annotators, 1 cases,",
        "WARNING",
        "command export failed: ExportFailed (message not logged: ",
    ):
        assert expected in text, expected
    for word in SECRET.split():
        assert word not in text


@pytest.mark.parametrize(
    "column, cell",
    [  # a long cell the message shortens (its closing quote lost), and a chart heading
        ("urgency_level", f"{SECRET} and then some more words to pass the cut at 57"),
        ("chart", f"###Demographics###\nAge 61\n###{SECRET}###\nfoo"),
        ("urgency_level", f'Bob\'s wife said ""{SECRET}""'),  # both quotes, escaped
    ],
)
def test_a_refused_import_logs_no_word_of_the_file(logs, tmp_path, capsys, column, cell):
    project, cases = tmp_path / "study.prproj", tmp_path / "cases.csv"
    cases.write_text(f'case_id,message,{column}\nc1,"Hi.","{cell}"\n', encoding="utf-8")
    assert main(["new", str(project), "--annotator", "ava"]) == 0
    assert main(["import", str(project), str(cases)]) == 2
    assert "Zorblax" in capsys.readouterr().err  # the person is told what is wrong
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "command import failed: ImportFailed (message not logged: " in text
    for word in SECRET.split():
        assert word not in text


def test_errors_of_files_and_the_database_keep_their_words():
    assert applog.error_text(FileNotFoundError(2, "No such file", "x.prproj")) == (
        "FileNotFoundError: [Errno 2] No such file: 'x.prproj'"
    )
    assert applog.error_text(sqlite3.OperationalError("database is locked")) == (
        "OperationalError: database is locked"
    )
    assert applog.error_text(ValueError(SECRET)) == "ValueError (message not logged: 30 characters)"
    try:
        try:
            raise KeyError(SECRET)
        except KeyError as inner:
            raise ValueError("cannot read row 2") from inner
    except ValueError as exc:
        text = applog.traceback_text(exc)
    assert "KeyError (message not logged: 32 characters)" in text
    assert "direct cause of the following exception" in text and "Zorblax" not in text


def test_loading_a_model_is_logged(logs, tmp_path):
    from portalreview.llm.engine import Engine
    from portalreview.llm.testing_model import TINY, prompt_corpus, write_model

    path = write_model(tmp_path / "tiny.gguf", TINY, corpus=prompt_corpus())
    setup_logging("gui")
    with Engine.load(path, gpu=False, hash_cache=False) as engine:
        size = engine.info.size_bytes
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert re.search(
        rf"model loaded: tiny\.gguf \({size} bytes, CPU, 0/{TINY.n_layer} layers on the GPU, "
        r"context \d+\) in \d+\.\d\d s",
        text,
    )


CRASH = """
import sys
import threading
from portalreview.applog import setup_logging
setup_logging("cli")

def save_the_answer(text):
    raise RuntimeError(f"cannot store {text!r}")

worker = threading.Thread(target=save_the_answer, args=(sys.argv[1] + "!",), name="saver")
worker.start()
worker.join()
save_the_answer(sys.argv[1])
"""


def test_uncaught_exceptions_are_logged_with_their_traceback(logs, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(CRASH, encoding="utf-8")
    env = {**os.environ, applog.LOG_DIR_ENV: str(logs)}
    run = subprocess.run(
        [sys.executable, str(script), SECRET], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1
    assert "RuntimeError" in run.stderr  # still reported as before
    text = (logs / "portalreview.log").read_text(encoding="utf-8")
    assert "CRITICAL" in text and "uncaught exception in thread saver" in text
    assert "uncaught exception\nTraceback (most recent call last):" in text
    assert 'line 8, in save_the_answer\n    raise RuntimeError(f"cannot store {text!r}")' in text
    assert "RuntimeError (message not logged: 45 characters)" in text
    assert "Zorblax" not in text


# The log file may not grow (RLIMIT_FSIZE at its size: as on a full disk, every write fails)
# once the program has started; then a command's worth of lines is logged.
LOG_FULL = """
import logging, resource, signal, sys
from portalreview import applog

applog.setup_logging("cli")
size = applog.log_path().stat().st_size
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
for i in range(20):
    logging.getLogger("portalreview.test").info("line %d", i)
print("the command's own output")
"""


def test_a_log_file_that_cannot_be_written_is_said_once_in_one_line(logs):
    env = {**os.environ, applog.LOG_DIR_ENV: str(logs)}
    run = subprocess.run(
        [sys.executable, "-c", LOG_FULL],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[1],  # this checkout's portalreview
    )
    assert run.returncode == 0 and run.stdout == "the command's own output\n"
    assert run.stderr == (
        f"PortalReview: the log file {logs / 'portalreview.log'} cannot be written (File too "
        "large); the program goes on without it.\n"
    ), run.stderr
