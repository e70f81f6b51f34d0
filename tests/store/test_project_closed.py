"""A closed project stays closed: work still under way on another thread when it closed (a
drafting run, figures being kept) is refused, in words, instead of reconnecting and writing into
a file whose lock is released (another program may hold it by then); closing waits for the
saves already under way."""

from __future__ import annotations

import re
import threading
import time

import pytest
from sqlalchemy import text

from portalreview.store.backends import ServerProject
from portalreview.store.errors import ProjectClosed
from portalreview.store.models import ProjectMeta
from portalreview.store.project import Project
from portalreview.store.service import StoreError, StudyService

pytestmark = pytest.mark.both_backends


def test_a_closed_project_refuses_reads_and_saves(new_project):
    project = new_project()
    service = StudyService(project)  # as a tool window or a background run holds it
    service.add_annotator("ava")
    session = project._reader()  # a session made before the close, used after it
    project.close()
    for attempt in (
        lambda: service.add_annotator("bob"),
        lambda: service.annotators(),
        lambda: project.meta("name"),
        lambda: project.integrity_check(),
        lambda: session.execute(text("SELECT 1")),
    ):
        with pytest.raises(ProjectClosed, match=f"{re.escape(project.label)} was closed"):
            attempt()
    assert issubclass(ProjectClosed, StoreError)  # the windows show a StoreError's words
    project.close()  # closing again does nothing


def test_closing_waits_for_a_save_under_way(new_project):
    """A save on another thread when the project closes ends (committed) before close()
    returns, and so before the lock is released; nothing is saved after."""
    project = new_project()
    inside, gate = threading.Event(), threading.Event()

    def save() -> None:
        with project.write() as s:
            s.add(ProjectMeta(key="kept", value="yes"))
            s.flush()
            inside.set()
            gate.wait(10)

    saver = threading.Thread(target=save)
    saver.start()
    assert inside.wait(10)
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (project.close(), closed.set()))
    closer.start()
    # the closing thread may start late on a loaded machine: the write below must come once
    # closing began (before, it waits for the save's lock instead of being refused)
    began = time.monotonic()
    while not project._life.closed and time.monotonic() - began < 10:
        time.sleep(0.01)
    time.sleep(0.3)  # time for close() to end, were it not waiting for the save
    assert not closed.is_set()  # waiting for the save
    with pytest.raises(ProjectClosed), project.write():  # and refusing new ones meanwhile
        pass
    gate.set()
    saver.join(10)
    closer.join(10)
    assert closed.is_set()
    # a file: for writing (its lock released)
    again = ServerProject.open(project.url) if project.path is None else Project.open(project.path)
    with again:
        assert again.meta("kept") == "yes"
