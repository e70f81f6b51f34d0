"""The inbox view's "Ask with the whole inbox in view (faster)" (the inbox layout of urgency
scoring), through the real engine with the tiny random model: ticked, Ctrl+M asks every
ordered pair with the inbox listed once and shows the order of ``score_inbox(...,
layout="inbox")`` called directly; when the inbox does not fit the model's context it is asked
pair by pair and the status line says so with both sizes. Random weights: the tests compare
routes, never judge the order."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from ui_support import open_window

from portalreview.llm import urgency
from portalreview.llm.templates import default_template
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.urgency.inbox import inbox_patients
from portalreview.ui import inbox_view
from tests.llm.llm_testkit import tiny_model_file

WAIT_MS = 120000
INBOX = "layout-inbox"
MESSAGES = [
    "I have crushing chest pain and I am sweating.",
    "My child has a fever of 104 and is very sleepy.",
    "My ankle is still swollen three days after a fall.",
    "Please send me my vaccination record.",
]


@pytest.fixture
def study(tmp_path) -> Path:
    """Four inbox messages, every pair an urgency unit; pat is the PI."""
    path = tmp_path / "layout.prproj"
    with Project.create(path, name="Inbox layout test") as project:
        svc = StudyService(project)
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        ben = svc.add_annotator("ben", "Dr. Ben")
        cases = [
            svc.add_case(
                f"m{k}",
                text + " It has been like this since yesterday, and it is getting worse." * 3,
                {"demographics": [f"Age: {30 + k}"], "problems": [f"Problem {k}"]},
                urgency_level=k + 1,
                tags={"inbox": INBOX},
            )
            for k, text in enumerate(MESSAGES)
        ]
        pair_set = svc.create_unit_set("layout pairs", "urgency")
        for a, b in itertools.combinations(cases, 2):
            svc.assign(svc.add_unit(pair_set, a, case_b_id=b), ben)
    return path


def sorted_by_model(qtbot, prefs, path: Path, model: Path, load_options: dict):
    """The PI's inbox view after Ctrl+M with the whole-inbox box ticked."""
    window = open_window(qtbot, prefs, path, "pat")
    window.suggestions.host.load_options = {"gpu": False, "hash_cache": False, **load_options}
    window.suggestions.host.load(model, show_progress=False)
    qtbot.waitUntil(lambda: window.suggestions.host.engine is not None, timeout=WAIT_MS)
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: not view.loading and view.result is not None, timeout=WAIT_MS)
    assert not view.whole_inbox.isChecked()  # opt-in: seed 002's pair layout by default
    view.whole_inbox.setChecked(True)
    seen: list[int] = []
    view.progress.valueChanged.connect(seen.append)
    view.activateWindow()
    qtbot.waitUntil(view.isActiveWindow, timeout=5000)
    qtbot.keyClick(view, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    assert view.loading
    qtbot.waitUntil(lambda: not view.loading, timeout=WAIT_MS)
    return window, view, seen


def direct(window, layout: str) -> urgency.InboxScores:
    """The independent route: the PI's service's inbox straight into ``score_inbox``."""
    patients = inbox_patients(window.admin.inboxes()[INBOX])
    template = default_template(urgency.LAYOUT_TEMPLATES[layout])
    return urgency.score_inbox(window.suggestions.host.engine, template, patients, layout=layout)


def test_the_whole_inbox_in_view_gives_the_inbox_layouts_order(
    qtbot, prefs, study, tmp_path_factory
):
    model = tiny_model_file(tmp_path_factory)
    window, view, seen = sorted_by_model(qtbot, prefs, study, model, {})
    assert view.result.model is not None, view.status.text()
    assert max(seen) == 12 == view.result.model.n_questions  # 4 x 3 ordered questions
    assert view.model_run.template.kind == "urgency_inbox"
    expected = direct(window, "inbox")
    assert view.case_order() == expected.order
    for row in view.result.rows:
        assert row.score == pytest.approx(expected.scores[row.case_id], abs=1e-4)
    assert "with the whole inbox in view" in view.status.text()
    assert f"of {expected.prompt_tokens} prompt tokens evaluated" in view.status.text()
    view.grab().save(str(Path("/tmp") / "inbox_layout_view.png"))


def test_an_inbox_too_long_for_the_context_is_asked_pair_by_pair(
    qtbot, prefs, study, tmp_path_factory
):
    model = tiny_model_file(tmp_path_factory)
    window, view, _ = sorted_by_model(qtbot, prefs, study, model, {"n_ctx": 512})
    engine = window.suggestions.host.engine
    patients = inbox_patients(window.admin.inboxes()[INBOX])
    needed = urgency.inbox_context_tokens(engine, default_template("urgency_inbox"), patients)
    assert needed >= engine.info.n_ctx  # the case under test: the inbox cannot fit
    assert view.result.model is not None, view.status.text()
    assert view.model_run.template.kind == "urgency_pair"
    assert view.case_order() == direct(window, "pairs").order
    status = view.status.text()
    assert f"takes {needed} tokens and the model's context holds {engine.info.n_ctx}" in status
    assert "asked pair by pair" in status and ", pair by pair:" in status
    view.grab().save(str(Path("/tmp") / "inbox_layout_fallback.png"))
