"""Adjudication reads a kind's answers, and the labels of its list of units, in bulk: opening
the window on 1,000 units took seconds and on 10,000 minutes, one query per unit, with the
window frozen."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from PySide6.QtWidgets import QApplication
from shiboken6 import isValid
from sqlalchemy import event
from ui_support import held_off_gui_thread, make_gui_study, open_window, preferences

from portalreview.store.models import KINDS
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import adjudication, workers
from portalreview.ui.adjudication import canonical, collect, list_label, unit_brief


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


def gui_study_with_disagreements(folder, n: int):
    """The GUI study, with ``n`` more respond units that ava and ben answer differently."""
    folder.mkdir()
    gui = make_gui_study(folder)
    project = Project.open(gui.path)
    try:
        ids = gui.ids
        add_disagreements(SimpleNamespace(**{**vars(ids), "service": StudyService(project)}), n)
    finally:
        project.close()
    return gui


def wait_loaded(qtbot, dialog) -> None:
    qtbot.waitUntil(lambda: not dialog.loading, timeout=20_000)


def opening_statements(qtbot, folder, n: int) -> list[str]:
    """The SQL statements the adjudication window runs from opening to its list shown."""
    gui = gui_study_with_disagreements(folder, n)
    window = open_window(qtbot, preferences(folder), gui.path, "pat")
    with counted_statements(window.service) as statements:
        dialog = adjudication.open_tool(window)
        wait_loaded(qtbot, dialog)
        dialog.set_kind("respond")
        wait_loaded(qtbot, dialog)
    assert dialog.units.count() >= n
    window.close()
    return statements


def test_the_window_reads_as_many_statements_for_many_units_as_for_few(qtbot, tmp_path):
    few = opening_statements(qtbot, tmp_path / "few", 2)
    many = opening_statements(qtbot, tmp_path / "many", 30)
    assert len(many) == len(few), "the window's statements grow with the number of units"


def held_reads(monkeypatch):
    """``collect`` held back until the event is set, when it runs off the GUI thread; the
    threads it ran on."""
    return held_off_gui_thread(monkeypatch, adjudication, "collect")


def test_the_window_reads_in_the_background_and_says_it_is_loading(qtbot, tmp_path, monkeypatch):
    """10,000 units took 4 s to read, the window blank and the program frozen meanwhile."""
    gui = gui_study_with_disagreements(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    with held_reads(monkeypatch) as (release, threads):
        dialog = adjudication.open_tool(window)
        qtbot.waitUntil(lambda: bool(threads))
        assert threads[0] is not threading.main_thread(), "read on the GUI thread"
        assert dialog.loading and dialog.loading_bar.isVisible()
        assert "Reading" in dialog.counts.text() and not dialog.units.isEnabled()
        QApplication.processEvents()  # the window answers meanwhile
        release.set()
        wait_loaded(qtbot, dialog)
    assert not dialog.loading_bar.isVisible() and dialog.units.isEnabled()
    assert dialog.units.count() > 0 and "differ" in dialog.counts.text()
    assert dialog.kind_box.count() > 0 and dialog.unit is not None


def test_a_newer_read_replaces_the_one_under_way(qtbot, tmp_path, monkeypatch):
    gui = gui_study_with_disagreements(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    dialog = adjudication.open_tool(window)
    wait_loaded(qtbot, dialog)
    with held_reads(monkeypatch) as (release, _threads):
        dialog.set_kind("facts")
        dialog.set_kind("respond")  # before the facts were read
        release.set()
        wait_loaded(qtbot, dialog)
        qtbot.waitUntil(lambda: not workers._running, timeout=20_000)  # the stale facts
        # result has arrived too, and was dropped
    assert dialog.kind == "respond" and dialog.unit is not None and dialog.unit.kind == "respond"


def test_closing_the_window_while_it_reads_is_safe(qtbot, tmp_path, monkeypatch):
    gui = gui_study_with_disagreements(tmp_path / "study", 3)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    with held_reads(monkeypatch) as (release, threads):
        dialog = adjudication.open_tool(window)
        qtbot.waitUntil(lambda: bool(threads))
        dialog.close()
        release.set()
        wait_loaded(qtbot, dialog)
    again = adjudication.open_tool(window)  # the same window, its list read meanwhile
    assert again is dialog and dialog.units.count() > 0
    with held_reads(monkeypatch) as (release, threads):
        dialog.set_kind("facts")
        qtbot.waitUntil(lambda: bool(threads))
        dialog.deleteLater()  # as a new project's window replaces it
        qtbot.waitUntil(lambda: not isValid(dialog))
        release.set()
        qtbot.waitUntil(lambda: not workers._running, timeout=20_000)
        qtbot.wait(100)  # the result arrives for a deleted window: dropped, no error


def test_each_answer_is_compared_once_whatever_the_list_shows(qtbot, tmp_path, monkeypatch):
    """The list, its counts and each row change asked every unit whether its answers differ,
    dumping every answer to JSON each time: seconds of repeated work on 10,000 units."""
    gui = gui_study_with_disagreements(tmp_path / "study", 10)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    dialog = adjudication.open_tool(window)
    wait_loaded(qtbot, dialog)
    dumps = []

    def counted_canonical(payload):
        dumps.append(payload)
        return canonical(payload)

    monkeypatch.setattr(adjudication, "canonical", counted_canonical)
    dialog.set_kind("respond")
    wait_loaded(qtbot, dialog)
    answers = sum(len(r.answers) for r in dialog.reports)
    shown_header = len(dialog.report.answers)  # the unit shown says how many differ
    assert len(dumps) <= answers + shown_header
    dumps.clear()
    dialog.hide_done.setChecked(True)
    dialog.step(1)
    assert len(dumps) <= 2 * shown_header
