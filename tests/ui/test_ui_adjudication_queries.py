"""Adjudication reads a kind's answers, and the labels of its list of units, in bulk: opening
the window on 1,000 units took seconds and on 10,000 minutes, one query per unit, with the
window frozen."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication
from sqlalchemy import event
from ui_support import make_gui_study, open_window, preferences

from portalreview.store.models import KINDS
from portalreview.store.service import StudyService
from portalreview.ui import adjudication
from portalreview.ui.adjudication import collect, list_label, unit_brief


@contextlib.contextmanager
def counted_statements(service: StudyService) -> Iterator[list[str]]:
    """The SQL statements the project runs inside the block."""
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = service.project._engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


def add_disagreements(study, n: int) -> list[int]:
    """``n`` more respond units that ava and ben answer differently."""
    svc = study.service
    set_id = svc.create_unit_set(f"respond x{n}", "respond")
    units = []
    for _ in range(n):
        unit = svc.add_unit(set_id, study.case1)
        for person, text in ((study.ava, "Go to the ED now."), (study.ben, "Call 911.")):
            svc.assign(unit, person)
            payload = {"mode": "theme_guided", "parts": {"planning": text}}
            svc.save_answer(unit, payload, status="submitted", annotator_id=person)
        units.append(unit)
    return units


def pi_service(study) -> StudyService:
    return study.service.as_viewer("pat")


@pytest.mark.both_backends
def test_collect_and_the_list_read_in_bulk_not_unit_by_unit(study):
    pi = pi_service(study)
    add_disagreements(study, 2)
    with counted_statements(pi) as few:
        reports = collect(pi, "respond")
        pi.unit_briefs([r.unit_id for r in reports])
    add_disagreements(study, 20)
    with counted_statements(pi) as many:
        reports = collect(pi, "respond")
        pi.unit_briefs([r.unit_id for r in reports])
    assert sum(r.differs for r in reports) == 22
    assert len(many) == len(few), "the statements grow with the number of units"


@pytest.mark.both_backends
def test_bulk_answers_and_labels_match_the_unit_by_unit_ones(study):
    add_disagreements(study, 3)
    pairs = study.service.create_unit_set("more pairs", "urgency")
    for _ in range(6):  # some shown swapped to the PI, as read_unit shows them
        unit = study.service.add_unit(pairs, study.case1, case_b_id=study.case2)
        study.service.assign(unit, study.ava)
    pi = pi_service(study)
    for kind in KINDS:
        ids = [r.unit_id for r in collect(pi, kind, include_drafts=True)]
        bulk = pi.answers_for_units(ids)
        briefs = pi.unit_briefs(ids)
        for unit_id in ids:
            assert bulk[unit_id] == pi.answers_for_unit(unit_id)
            unit = pi.read_unit(unit_id)
            label = f"Unit {unit.position + 1} · {unit.unit_set}\n{unit_brief(unit)}"
            assert list_label(briefs[unit_id]) == label


def test_the_window_shows_it_is_working_while_it_reads(qtbot, tmp_path, monkeypatch):
    gui = make_gui_study(tmp_path)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    dialog = adjudication.open_tool(window)
    cursors = []

    def watched_collect(*args, **kwargs):
        cursors.append(QApplication.overrideCursor())
        return collect(*args, **kwargs)

    monkeypatch.setattr(adjudication, "collect", watched_collect)
    dialog.with_drafts.setChecked(True)
    assert cursors and cursors[-1] is not None, "no wait cursor while reading"
    assert QApplication.overrideCursor() is None
