"""The demo study: every kind has answers from 3 annotators, it is synthetic and reproducible."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portalreview import demo
from portalreview.cli import main
from portalreview.demo import CLINICIANS, build_demo
from portalreview.resources import resource
from portalreview.store.project import Project
from portalreview.store.service import StudyService


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")


def test_every_kind_has_answers_from_three_annotators(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        info = StudyService(p).info()
    assert info["cases"] >= 30
    for kind, data in info["kinds"].items():
        answering = [n for n, d in data["annotators"].items() if d["submitted"] > 0]
        expected = 3
        assert len(answering) >= expected, kind
        assert set(answering) <= set(CLINICIANS)
    assert info["kinds"]["eppc"]["gold"] == info["kinds"]["eppc"]["units"]


def test_demo_covers_the_paper_sizes(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        info = StudyService(p).info()
    levels = [json.loads(line)["urgency_level"] for line in resource("demo", "cases.jsonl").open()]
    assert all(levels.count(level) >= 5 for level in range(1, 7))
    assert info["kinds"]["eppc"]["units"] >= 60
    assert info["kinds"]["respond"]["units"] >= 12


def test_third_annotator_has_work_left_for_the_tour(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        chloe = StudyService(p).as_viewer("np_chloe")
        progress = chloe.progress("rank")
        assert 0 < progress.done < progress.total
        assert chloe.queue("rank", status="todo")


def test_demo_is_marked_synthetic(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        assert "synthetic" in p.meta("name")
    assert "synthetic" in resource("demo", "README.md").read_text().lower()


def test_demo_build_is_reproducible(demo_path, tmp_path):
    again = build_demo(tmp_path / "again.prproj")

    def answers(path):
        with Project.open(path, read_only=True) as p:
            svc = StudyService(p)
            ben = svc.as_viewer("dr_ben")
            return [ben.get_answer(i.unit_id).payload for i in ben.queue("urgency")][:30]

    assert answers(demo_path) == answers(again)


def test_the_side_an_empathy_pair_is_stored_on_does_not_tell_the_edit(demo_path):
    """Stored original first, every pair told a clinician who read her copy or the server
    with her own SQL which reply was the edit; the demo's sides are drawn (seeded)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{demo_path}?mode=ro", uri=True)
    try:
        second_is_edit = conn.execute(
            "SELECT r.production = 'edited_empathy' FROM units u "
            "JOIN responses r ON r.id = u.response_b_id WHERE u.kind = 'empathy'"
        ).fetchall()
    finally:
        conn.close()
    assert 0 < sum(edit for (edit,) in second_is_edit) < len(second_is_edit)


def test_cli_demo_create_refuses_an_existing_file(tmp_path, capsys):
    target = tmp_path / "d.prproj"
    target.write_text("keep me")
    assert main(["demo", "--create", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def _disk_full_while_creating(monkeypatch) -> None:
    import portalreview.store.project as project

    def full(*args, **kwargs) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(project, "start_study", full)


def _disk_full_while_filling(monkeypatch) -> None:
    """As a full disk fails a save (service.py words it as SaveFailed, naming the project by
    its file name: here the hidden one it is built under)."""
    from sqlalchemy.exc import OperationalError

    def full(*args, **kwargs) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorname = "SQLITE_FULL"
        raise OperationalError("INSERT", {}, error)

    monkeypatch.setattr(StudyService, "_audit", full)


@pytest.mark.parametrize(
    ("full_disk", "made"),
    [(_disk_full_while_creating, "created"), (_disk_full_while_filling, "made")],
    ids=["creating", "filling"],
)
def test_a_demo_build_on_a_full_disk_names_the_demo_asked_for(
    tmp_path, capsys, monkeypatch, full_disk, made
):
    """It named the hidden build file (".portalreview-demo-build-715-....prproj could not be
    created"), which nobody will find."""
    full_disk(monkeypatch)
    assert main(["demo", "--create", str(tmp_path / "demo.prproj"), "--no-gui"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"portalreview demo: demo.prproj could not be {made} (database or ")
    assert "Nothing was left behind." in err and ".portalreview-demo-build-" not in err, err
    assert list(tmp_path.iterdir()) == []


# --- a build cut short by a kill ---------------------------------------------------------------

KILLED_BUILD = r"""
import os, signal, sys
import portalreview.demo as demo
import portalreview.store.project as project

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # a crash, a power cut, the task manager

if sys.argv[1] == "creating":  # the new file made, its schema written, no study in it yet
    project.start_study = killed
else:  # in the middle of adding the demo's data
    demo.build_rank = killed
demo.build_demo("portalreview-demo.prproj")
"""


def _killed_build(folder, when: str) -> list[str]:
    """Run a demo build in ``folder`` that is killed at ``when``; what it left there."""
    env = dict(os.environ, PYTHONPATH=str(Path(demo.__file__).parents[1]))
    done = subprocess.run([sys.executable, "-c", KILLED_BUILD, when], cwd=folder, env=env)
    assert done.returncode == -signal.SIGKILL
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_killed_demo_build_leaves_no_demo_and_the_next_run_builds_the_whole_one(
    tmp_path, monkeypatch, capsys
):
    """A build killed half-way used to leave the half-built file under the demo's name, which
    every later `portalreview demo` opened (an empty study, nobody to sign in as)."""
    left = _killed_build(tmp_path, "adding data")
    assert "portalreview-demo.prproj" not in left
    assert left and all(name.startswith(demo.BUILD_PREFIX) for name in left), left
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-gui"]) == 0
    out = capsys.readouterr().out
    assert "np_chloe" in out and re.search(r"Cases\s+[1-9]", out), out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(demo.BUILD_PREFIX)]


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_demo_build_killed_while_creating_its_file_is_removed_by_the_next_run(tmp_path):
    """Killed in Project.create, the file used to be left under the demo's name without a
    format version ("not a PortalReview project"), and the next run refused it."""
    left = _killed_build(tmp_path, "creating")
    assert "portalreview-demo.prproj" not in left
    assert left and all(name.startswith(demo.BUILD_PREFIX) for name in left), left
    removed = demo.remove_abandoned_builds(tmp_path)
    assert [p.name for p in removed] == [n for n in left if n.endswith(".prproj")]
    assert list(tmp_path.iterdir()) == []


def _build_files(folder, pid: int, token: str) -> list[Path]:
    stem = f"{demo.BUILD_PREFIX}{pid}-{token}"
    files = [folder / f"{stem}{ending}" for ending in (".prproj", ".prproj-wal", ".prproj.lock")]
    for file in files:
        file.write_bytes(b"x")
    return files


def test_only_abandoned_demo_builds_are_removed(tmp_path):
    """A build another running program (or this one, in another thread) is making stays; so
    do files that only look alike."""
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    try:
        ours = _build_files(tmp_path, os.getpid(), "aa11")
        theirs = _build_files(tmp_path, running.pid, "bb22")
        dead = _build_files(tmp_path, gone.pid, "cc33")
        stale = _build_files(tmp_path, running.pid, "dd44")  # a reused process id
        week_ago = time.time() - 7 * 24 * 3600
        for file in stale:
            os.utime(file, (week_ago, week_ago))
        other = tmp_path / f"{demo.BUILD_PREFIX}notes.txt"
        other.write_text("not a build")
        os.utime(other, (week_ago, week_ago))
        removed = demo.remove_abandoned_builds(tmp_path)
    finally:
        running.kill()
        running.wait()
    assert sorted(removed) == sorted([dead[0], stale[0]])
    assert sorted(tmp_path.iterdir()) == sorted([*ours, *theirs, other])
