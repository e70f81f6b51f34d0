"""The optional parts of a suggestion shown pre-filled in the editors: both patients' urgency
levels (asked of the tiny random model, nothing downloaded) and the error category of a fact
not entailed (a stored suggestion, as an overnight ``portalreview suggest`` run leaves it).
Accepting saves them as the clinician's own answer."""

from __future__ import annotations

import json

import pytest
from ui_support import open_window, preferences, show_kind, stored_answer

from portalreview.store.models import Suggestion
from portalreview.store.project import Project
from portalreview.ui.suggestions import SuggestionBanner
from tests.llm.llm_testkit import (
    PARAMS,
    SMALL_LIMITS,
    tiny_model_file,
    urgency_answers_clearly,
)

ANSWER_WAIT_MS = 60000


@pytest.fixture
def window(qtbot, gui, tmp_path):
    win = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    ctl = win.suggestions
    ctl.host.load_options = {"gpu": False, "hash_cache": False}
    ctl.params, ctl.limits = PARAMS, SMALL_LIMITS
    win.resize(1200, 800)
    return win


def offered(window) -> bool:
    banner = window.editors[window.kind].findChild(SuggestionBanner)
    return banner is not None and banner.state == "offered"


def test_the_urgency_suggestion_pre_fills_both_levels(
    qtbot, window, gui, tmp_path, tmp_path_factory, monkeypatch
):
    urgency_answers_clearly(monkeypatch)
    host = window.suggestions.host
    host.load(tiny_model_file(tmp_path_factory), show_progress=False)
    qtbot.waitUntil(lambda: host.engine is not None, timeout=ANSWER_WAIT_MS)
    show_kind(window, "urgency")
    qtbot.waitUntil(lambda: offered(window), timeout=ANSWER_WAIT_MS)
    unit = gui.ids.units["urgency"]
    with Project.open(gui.path, read_only=True) as project, project.read() as s:
        row = s.query(Suggestion).filter_by(unit_id=unit).one()
        suggested = json.loads(row.payload_json)["levels"]
        assert row.template_id == "urgency_pair@default+urgency_level@default"
    editor = window.editors["urgency"]
    assert editor.state["levels"] == {int(k): v for k, v in suggested.items()}
    for panel in editor.sides:
        level = suggested[str(panel.case_id)]
        assert [n for n, b in panel.level_buttons.items() if b.isChecked()] == [level]
        assert panel.level_name.text().startswith(f"<b>{level}</b>")
    window.grab().save(str(tmp_path / "urgency-levels.png"))
    window.act_accept.trigger()
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.payload["levels"] == suggested and answer.suggestion_use == "accepted"


def test_a_suggested_error_category_is_pre_filled(qtbot, window, gui, tmp_path):
    unit = gui.ids.units["facts"]
    category = window.admin.catalogs.error_categories[-1]
    payload = {
        "facts": [
            {"side": "original", "text": "Go to the ER now.", "entailed": True},
            {
                "side": "edited",
                "text": "You will be fine.",
                "entailed": False,
                "error_category": category.id,
            },
        ]
    }
    window.admin.add_suggestion(
        unit, payload, model_file="overnight.gguf", model_sha256="0" * 64, template_id="t@v1"
    )
    show_kind(window, "facts")
    assert offered(window)
    editor = window.editors["facts"]
    box = editor.sides["edited"].category_boxes[0]
    assert box.currentData() == category.id and box.isEnabled()
    assert editor.sides["original"].category_boxes[0].currentData() is None
    window.grab().save(str(tmp_path / "facts-category.png"))
    window.act_accept.trigger()
    answer = stored_answer(gui.path, unit, "ava")
    assert [f["error_category"] for f in answer.payload["facts"]] == [None, category.id]
