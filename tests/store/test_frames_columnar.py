"""Reading column-wise (store/frames.py ``_columnar``) gives exactly the frames that reading
row by row gives: the same values, types and order, NULLs, awkward text and real numbers
included; and it steps aside (row by row) where it cannot be exact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    literal_column,
    select,
)
from sqlalchemy.orm import Session

from portalreview.store import frames
from portalreview.store.frames import read_frames

metadata = MetaData()
things = Table(
    "things",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("n", Integer, nullable=True),
    Column("flag", Boolean, nullable=True),
    Column("seconds", Float, nullable=True),
    Column("label", String, nullable=True),
    Column("always_null", Integer, nullable=True),
)
AWKWARD = [
    'a "quoted" word, and a comma',
    "two\nlines\tand a tab",
    "\x1f\x1e unit and record separators",
    "émoji 🙂 and 中文",
    "nan",
    "",
    "\\ backslash \\\\",
    None,
]
SECONDS = [0.1 + 0.2, 1 / 3, 2.0**52 + 0.5, -1e15 - 0.25, 123.456, None, -0.0, 2.5, 0.001]
#: Real numbers the two integers of ``frames._real_aggregates`` cannot carry: bits below 2**-62,
#: beyond the integers' range, infinity.
UNCARRIED = [5e-324, 1e-5, 1.7976931348623157e308, -(2.0**63) - 2048.0, float("inf")]


def _session(rows: list[dict]) -> Session:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(things), rows)
    return Session(engine)


def _rows() -> list[dict]:
    return [
        {
            "id": i + 1,
            "n": None if i % 3 == 0 else i * 7 - 20,
            "flag": None if i % 4 == 1 else bool(i % 2),
            "seconds": SECONDS[i % len(SECONDS)],
            "label": AWKWARD[i % len(AWKWARD)],
            "always_null": None,
        }
        for i in range(40)
    ]


COLUMNS = ["id", "n", "flag", "seconds", "label", "always_null"]


def _both(session: Session, query) -> tuple[pd.DataFrame, pd.DataFrame]:
    columnar = frames._frame(session, query, COLUMNS)
    original = frames._columnar
    try:
        frames._columnar = lambda *_args: None
        by_rows = frames._frame(session, query, COLUMNS)
    finally:
        frames._columnar = original
    return columnar, by_rows


def _assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert list(a.dtypes) == list(b.dtypes)
    for column in a.columns:  # object columns: the same Python values (None, not NaN)
        if a[column].dtype == object:
            assert [type(v) for v in a[column]] == [type(v) for v in b[column]], column


def test_awkward_values_read_the_same_both_ways():
    session = _session(_rows())
    query = select(*things.c).order_by(things.c.id.desc())
    assert frames._columnar(session, query) is not None  # read column-wise indeed
    columnar, by_rows = _both(session, query)
    _assert_same(columnar, by_rows)
    assert columnar.label.tolist()[::-1][: len(AWKWARD) - 1] == AWKWARD[:-1]
    seconds = columnar.seconds.to_numpy()[::-1][: len(SECONDS)]
    assert [float(v) for v in seconds[:5]] == SECONDS[:5]  # real numbers exactly
    assert float(seconds[-1]) == SECONDS[-1]
    assert columnar.always_null.tolist() == [None] * 40


def test_no_nulls_and_no_rows_read_the_same_both_ways():
    rows = [
        {**row, "n": i, "flag": i % 2 == 0, "label": f"x{i}", "seconds": i / 7}
        for i, row in enumerate(_rows())
    ]
    session = _session(rows)
    _assert_same(*_both(session, select(*things.c).order_by(things.c.id)))
    _assert_same(*_both(session, select(*things.c).where(things.c.id < 0).order_by(things.c.id)))
    rowid = literal_column("things.rowid")
    _assert_same(*_both(session, select(*things.c).order_by(rowid)))


def test_a_value_equal_to_the_null_stand_in_is_read_row_by_row():
    rows = _rows()
    rows[2]["n"] = frames._NULL_INT
    session = _session(rows)
    query = select(*things.c).order_by(things.c.id)
    assert frames._columnar(session, query) is None
    columnar, by_rows = _both(session, query)
    _assert_same(columnar, by_rows)
    assert columnar.n[2] == frames._NULL_INT


def test_random_real_numbers_read_column_wise_bit_for_bit(monkeypatch):
    def no_fetch(*_args):
        raise AssertionError("the real column was fetched row by row")

    monkeypatch.setattr(frames._ColumnarRead, "_fetched", no_fetch)
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [rng.uniform(0, 1e5, 3000), rng.exponential(30, 3000), rng.uniform(-1, 1, 3000) * 1e12]
    )
    rows = [{**row, "seconds": None} for row in _rows()]
    blank = dict.fromkeys(COLUMNS)
    rows += [{**blank, "id": 100 + i, "seconds": float(v)} for i, v in enumerate(values)]
    session = _session(rows)
    query = select(*things.c).order_by(things.c.id)
    assert frames._columnar(session, query) is not None  # and the reals not fetched
    columnar, by_rows = _both(session, query)
    _assert_same(columnar, by_rows)
    read = columnar.seconds.to_numpy()[40:]
    assert read.tobytes() == values.tobytes()  # the same bits


@pytest.mark.parametrize("value", UNCARRIED)
def test_a_real_number_two_integers_cannot_carry_is_fetched_row_by_row(value, monkeypatch):
    rows = _rows()
    rows[4]["seconds"] = value
    session = _session(rows)
    query = select(*things.c).order_by(things.c.id)
    fetched = []
    original = frames._ColumnarRead._fetched
    monkeypatch.setattr(
        frames._ColumnarRead,
        "_fetched",
        lambda self, i, n: fetched.append(i) or original(self, i, n),
    )
    assert frames._columnar(session, query) is not None  # the other columns column-wise
    assert fetched == [COLUMNS.index("seconds")]  # that column alone row by row
    columnar, by_rows = _both(session, query)
    _assert_same(columnar, by_rows)
    assert columnar.seconds[4] == value


def test_rows_out_of_the_querys_order_are_read_row_by_row(monkeypatch):
    session = _session(_rows())
    monkeypatch.setattr(frames, "_in_order", lambda *_args: False)
    assert frames._columnar(session, select(*things.c).order_by(things.c.id)) is None


@pytest.mark.both_backends
def test_the_study_frames_are_the_same_both_ways(fresh_demo, monkeypatch):
    columnar = read_frames(fresh_demo)
    monkeypatch.setattr(frames, "_columnar", lambda *_args: None)
    by_rows = read_frames(fresh_demo)
    for field in dataclasses.fields(columnar):
        if field.name != "memo":
            _assert_same(getattr(columnar, field.name), getattr(by_rows, field.name))
    assert not np.array_equal(columnar.answers.answer_id, [])
