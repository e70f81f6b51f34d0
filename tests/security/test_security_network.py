"""Nothing phones home: the program never opens a network socket, from importing it to
writing a report.

* ``no_network``: a fixture that refuses (and records) every attempt to open an ``AF_INET`` or
  ``AF_INET6`` socket, connect, or look a name up, from Python (tests/security/network_guard.py).
* The whole program is toured in a fresh process with the guard installed before its first
  import (tests/security/security_app_tour.py): every module imported, the demo study built,
  the app opened offscreen as a clinician and as the PI with every kind's editor shown, a
  generated GGUF model loaded and run, reports written as JSON and Excel, the study exported.
* Where strace works, the same tour runs under it, so that native code (Qt, llama.cpp, SQLite),
  which the Python guard cannot see, is checked too: no ``socket(AF_INET|AF_INET6, ...)``
  system call at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import network_guard
import pytest

from portalreview.store.project import Project

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ALL_KINDS = ["respond", "rank", "match", "urgency", "eppc", "empathy", "facts"]


@pytest.fixture
def no_network():
    """Fail any attempt to use the network during the test (the list of attempts is given
    to the test; it must be empty at the end even if the code under test hid the error)."""
    attempts = network_guard.install()
    try:
        yield attempts
    finally:
        network_guard.uninstall()
    assert attempts == [], "network attempts:\n" + "\n".join(attempts)


def test_the_guard_refuses_every_way_out(no_network):
    attempts = list(no_network)
    for attempt in (
        lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
        lambda: socket.socket(),
        lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM),
        lambda: socket.create_connection(("example.org", 443)),
        lambda: socket.getaddrinfo("example.org", 443),
        lambda: urllib.request.urlopen("http://127.0.0.1:9/", timeout=1),
    ):
        with pytest.raises(OSError):
            attempt()
    assert len(no_network) == 6
    no_network.clear()  # these were ours
    if hasattr(socket, "AF_UNIX"):  # a local socket never leaves the machine: allowed
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    assert attempts == []


def test_a_report_and_an_export_in_this_process_use_no_network(no_network, study, tmp_path):
    from portalreview.reports.json_report import write_json_report
    from portalreview.reports.xlsx_report import write_xlsx_report
    from portalreview.store.exporters import export_project

    project = study.service.project
    write_json_report(project, tmp_path / "r.json", seed=0, n_resamples=20)
    write_xlsx_report(project, tmp_path / "r.xlsx", seed=0, n_resamples=20)
    export_project(project, "jsonl", tmp_path / "export")
    assert (tmp_path / "r.xlsx").stat().st_size > 0


def _strace() -> list[str] | None:
    """The strace command line, if strace is there and allowed to trace (containers often
    forbid ptrace)."""
    strace = shutil.which("strace")
    if strace is None or not sys.platform.startswith("linux"):
        return None
    probe = subprocess.run([strace, "-f", "-o", os.devnull, "true"], capture_output=True)
    if probe.returncode != 0:
        return None
    return [strace, "-f", "-qq", "-e", "trace=socket,connect,sendto,sendmsg"]


def test_the_whole_program_never_touches_the_network(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "home"),
    }
    command = [sys.executable, str(HERE / "security_app_tour.py"), str(tmp_path)]
    strace = _strace()
    trace = tmp_path / "syscalls.txt"
    if strace is not None:
        command = [*strace, "-o", str(trace), *command]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    steps = report["steps"]
    assert report["attempts"] == [], "\n".join(report["attempts"])
    assert steps["imported"] > 50
    assert steps["app"]["np_chloe"] == ALL_KINDS  # every editor shown
    assert steps["app"]["dr_pi"] == ALL_KINDS
    assert "on the CPU" in steps["model"]
    assert steps["reports"] == ["report.json", "report.xlsx", "export.xlsx"]
    with Project.open(tmp_path / "demo.prproj", read_only=True) as project:
        assert project.integrity_check() == "ok"
    if strace is None:
        pytest.skip("the Python-level guard passed; strace is not usable here for native code")
    calls = trace.read_text()
    network = [
        line for line in calls.splitlines() if re.search(r"\bAF_INET6?\b|\bPF_INET6?\b", line)
    ]
    assert network == [], "\n".join(network[:20])
    assert "socket(" in calls or calls.strip() == "" or "+++ exited" in calls
