"""Reading the frames in threads (store/frames.py ``_run_readers``): the same frames as reading
them one after the other, one snapshot, and the session itself used by the calling thread only
(a ``Session`` is not shared between threads; its connection is)."""

from __future__ import annotations

import dataclasses
import threading

import pandas as pd
import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from portalreview.store import frames
from portalreview.store.errors import ReadFailed
from portalreview.store.frames import read_frames
from portalreview.store.models import Answer


def _assert_same_frames(a: frames.StudyFrames, b: frames.StudyFrames) -> None:
    for field in dataclasses.fields(a):
        if field.name != "memo":
            pd.testing.assert_frame_equal(
                getattr(a, field.name), getattr(b, field.name), check_exact=True
            )


def test_threads_read_the_same_frames_as_one_after_the_other(fresh_demo, monkeypatch):
    side_by_side = read_frames(fresh_demo)
    monkeypatch.setattr(frames, "READER_THREADS", 1)
    one_by_one = read_frames(fresh_demo)
    _assert_same_frames(side_by_side, one_by_one)
    assert len(side_by_side.answers) > 0


def test_reader_threads_never_use_the_session(fresh_demo, monkeypatch):
    callers: set[str] = set()
    for name in ("connection", "get_bind", "execute"):
        original = getattr(Session, name)

        def recorded(self, *args, _original=original, **kwargs):
            callers.add(threading.current_thread().name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Session, name, recorded)
    readers: set[str] = set()
    original_read_detail = frames.read_detail

    def read_detail(*args, **kwargs):
        readers.add(threading.current_thread().name)
        return original_read_detail(*args, **kwargs)

    monkeypatch.setattr(frames, "read_detail", read_detail)
    read_frames(fresh_demo)
    assert callers == {threading.current_thread().name}
    assert readers and all(name.startswith("read-frames") for name in readers)


def test_a_write_after_the_snapshot_began_is_not_read(fresh_demo, monkeypatch):
    # Every reader reads the snapshot the session's transaction began with: flags turned
    # over by another connection while the readers run are in no frame.
    before = read_frames(fresh_demo)
    written = threading.Event()
    original_units = frames._units

    def units_then_write(session):
        if not written.is_set():
            written.set()
            with fresh_demo.write() as s:
                s.execute(update(Answer).values(flagged=~Answer.flagged))
        return original_units(session)

    monkeypatch.setattr(frames, "_units", units_then_write)
    during = read_frames(fresh_demo)
    assert written.is_set()
    _assert_same_frames(before, during)
    monkeypatch.setattr(frames, "_units", original_units)
    after = read_frames(fresh_demo).answers
    assert after.flagged.tolist() == [not f for f in before.answers.flagged.tolist()]


def test_a_reader_that_fails_fails_the_whole_read(fresh_demo, monkeypatch):
    # One reader's error (a damaged table, a server gone) reaches the caller, after the other
    # readers have stopped: no frames are returned half read. The project words it
    # (ReadFailed), keeping the reader's error as its cause.
    def broken(session):
        raise frames.sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(frames, "_cases", broken)
    with pytest.raises(ReadFailed, match="malformed") as failed:
        read_frames(fresh_demo)
    assert isinstance(failed.value.__cause__, frames.sqlite3.DatabaseError)
    monkeypatch.undo()
    assert len(read_frames(fresh_demo).cases) > 0
