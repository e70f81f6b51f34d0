"""The dashboard's Models tab on the demo study with a model pseudo-annotator whose answers are
chosen here: the PI opens the dashboard, clicks the tab and reads each model figure beside the
clinicians' with its interval and n, the same figures ``analysis.model_eval`` gives for the
file; the table is read-only; a study without a model says how to add one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QTabBar
from ui_support import open_window

from portalreview.analysis.model_eval import DIFFICULTY, evaluate
from portalreview.demo import build_demo
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.templates import unit_ids
from portalreview.ui.dashboard import QUICK_RESAMPLES, VALUE_ROLE
from portalreview.ui.model_quality import HEADERS, NO_MODEL, TAB
from tests.ui.test_ui_dashboard import open_dashboard

PI = "dr_pi"
MODEL = "smol"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_demo(tmp_path_factory.mktemp("models") / "demo.prproj")


def add_model_answers(path: Path) -> None:
    """smol answers 10 urgency pairs (always the unit's second case) and 4 empathy pairs
    (always "equally empathetic")."""
    with Project.open(path) as project:
        svc = StudyService(project)
        model = svc.add_annotator(MODEL, "SmolLM2 (model)", is_model=True)
        for kind, n in (("urgency", 10), ("empathy", 4)):
            for unit in unit_ids(svc, kind)[:n]:
                view = svc.read_unit(unit)
                payload = (
                    {"more_urgent_case_id": view.cases[1].id}
                    if kind == "urgency"
                    else {"equal": True}
                )
                svc.assign(unit, model)
                svc.save_answer(unit, payload, status="submitted", annotator_id=model)


def click_tab(qtbot, dashboard, name: str) -> None:
    bar = dashboard.tabs.findChild(QTabBar)
    names = [bar.tabText(i) for i in range(bar.count())]
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(names.index(name)).center())
    assert dashboard.tabs.tabText(dashboard.tabs.currentIndex()) == name


def test_models_tab_puts_the_model_beside_the_clinicians(qtbot, built, tmp_path, prefs):
    demo = Path(shutil.copy(built, tmp_path / built.name))
    add_model_answers(demo)
    with Project.open(demo, read_only=True) as project:
        expected = evaluate(read_frames(project), seed=0, n_resamples=QUICK_RESAMPLES)
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    click_tab(qtbot, dashboard, TAB)
    tables = {t.title.split(" (")[0]: (t, v) for _, t, v in dashboard.model_views}
    kinds = ("urgency", "eppc", "match", "rank", "empathy", "facts", "suggestions")
    assert list(tables) == [f"{MODEL}: {k}" for k in kinds]
    _, view = tables[f"{MODEL}: urgency"]
    model = view.model()
    assert [
        model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())
    ] == HEADERS
    shown = {
        tuple(model.data(model.index(r, c), VALUE_ROLE) for c in range(3)): [
            model.data(model.index(r, c), VALUE_ROLE) for c in range(3, 7)
        ]
        for r in range(model.rowCount())
    }
    rows = expected.rows_of(MODEL, "urgency")
    assert len(shown) == len(rows) > 4
    for row in rows:
        who = f"{row.who} (model)" if row.is_model else row.who
        fig = row.figure
        low, high = fig.ci if fig.ci else (None, None)
        assert shown[(row.measure, who, row.against)] == [fig.value, low, high, fig.n]
    # the model's accuracy over all pairs, with its interval and n, as a person reads it
    total = expected.find(MODEL, "urgency", DIFFICULTY["total"], MODEL, "reference levels")
    assert total.n == 10 and total.ci is not None
    first = [model.data(model.index(0, c)) for c in range(model.columnCount())]
    assert first[:3] == [
        "pair accuracy, easy (levels 4+ apart)",
        f"{MODEL} (model)",
        "reference levels",
    ]
    # kinds the model never answered say so
    _, view = tables[f"{MODEL}: eppc"]
    note = view.model().data(view.model().index(0, 7))
    assert note == "n=0 — not enough data: the model coded no sentence"
    assert view.model().data(view.model().index(0, 6)) == "0"
    _, view = tables[f"{MODEL}: suggestions"]  # its answers were saved without the model
    note = view.model().data(view.model().index(0, 7))
    assert note == "n=0 — not enough data: no stored suggestion of this model"
    # read-only: a double click edits nothing
    assert view.editTriggers() == QAbstractItemView.EditTrigger.NoEditTriggers
    index = model.index(0, 3)
    assert not model.flags(index) & Qt.ItemFlag.ItemIsEditable
    window.close()


def test_models_tab_without_a_model_says_how_to_add_one(qtbot, built, tmp_path, prefs):
    demo = Path(shutil.copy(built, tmp_path / built.name))
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    click_tab(qtbot, dashboard, TAB)
    assert dashboard.model_views == []
    assert dashboard.computed.models.note == NO_MODEL
    labels = dashboard.tabs.currentWidget().widget().findChildren(type(dashboard.info))
    assert any("evaluate-model" in label.text() for label in labels)
    window.close()


def test_the_tab_says_where_each_model_ran_and_when_runs_are_pooled():
    from portalreview.analysis.model_eval import ModelEvaluation
    from portalreview.ui.model_quality import model_sheet

    ran = ModelEvaluation(
        ["one", "two"],
        ran_on={"one": {"CPU, 8 threads; b9": 3}, "two": {"CPU; b9": 1, "GPU (CUDA); b9": 2}},
    )
    lines = model_sheet(ran).note.splitlines()
    assert "one ran on: CPU, 8 threads; b9 (3)." in lines
    assert (
        "two ran on: CPU; b9 (1); GPU (CUDA); b9 (2) - more than one device or build, pooled."
        in lines
    )
