"""The inbox view sorted by the loaded model (Ctrl+M), through the real engine with the tiny
random model: the order and scores equal those of calling ``llm.urgency.score_inbox`` directly,
the progress counts every ordered pair, Cancel stores nothing, "Keep as annotator" stores the
model's answers (with provenance) as a pseudo annotator the judge list then offers and that
sorts the inbox by the same pair decisions, and a clinician's run shows nothing of the
reference. Random weights: the tests compare routes and count, never judge the order."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from ui_support import open_window

from portalreview.llm import urgency
from portalreview.llm.templates import default_template, default_text
from portalreview.store.models import Suggestion
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import inbox_view
from tests.llm.llm_testkit import tiny_model_file

WAIT_MS = 120000
INBOX = "model-inbox"
# (external id, reference level, message), 1 = most urgent
MESSAGES = [
    ("u1", 1, "I have crushing chest pain and I am sweating."),
    ("u2", 2, "My child has a fever of 104 and is very sleepy."),
    ("u3", 3, "My ankle is still swollen three days after a fall."),
    ("u4", 5, "What can I take for a mild cold?"),
    ("u5", 6, "Please send me my vaccination record."),
]
AVA_CASES = ("u1", "u2", "u3", "u4")  # ava judges only the pairs among these


@pytest.fixture
def model(tmp_path_factory):
    return tiny_model_file(tmp_path_factory)


@pytest.fixture
def study(tmp_path) -> tuple[Path, dict[str, int], dict[int, tuple[int, int]]]:
    """Five inbox messages, every pair as an urgency unit; ava is assigned the pairs among four
    of them, ben every pair; pat is the PI."""
    path = tmp_path / "inbox.prproj"
    with Project.create(path, name="Inbox model test") as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava", "Ava (RN)")
        ben = svc.add_annotator("ben", "Dr. Ben")
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        cases = {
            key: svc.add_case(
                key,
                text,
                {"demographics": ["Age: 40"], "problems": [f"Problem {key}"]},
                urgency_level=level,
                tags={"inbox": INBOX},
            )
            for key, level, text in MESSAGES
        }
        pair_set = svc.create_unit_set("inbox pairs", "urgency")
        units = {}
        for (ka, a), (kb, b) in itertools.combinations(cases.items(), 2):
            unit = svc.add_unit(pair_set, a, case_b_id=b)
            units[unit] = (a, b)
            svc.assign(unit, ben)
            if ka in AVA_CASES and kb in AVA_CASES:
                svc.assign(unit, ava)
    return path, cases, units


def open_as(qtbot, prefs, path: Path, who: str):
    window = open_window(qtbot, prefs, path, who)
    window.suggestions.host.load_options = {"gpu": False, "hash_cache": False}
    return window


def load_model(qtbot, window, model: Path) -> None:
    window.suggestions.host.load(model, show_progress=False)
    qtbot.waitUntil(lambda: window.suggestions.host.engine is not None, timeout=WAIT_MS)


def open_inbox(qtbot, window) -> inbox_view.InboxView:
    view = inbox_view.open_tool(window)
    qtbot.waitUntil(lambda: not view.loading and view.result is not None, timeout=WAIT_MS)
    return view


def press_sort(qtbot, view) -> None:
    """Ctrl+M, the view's shortcut (a window shortcut: the view must be the active window)."""
    view.activateWindow()
    qtbot.waitUntil(view.isActiveWindow, timeout=5000)
    qtbot.keyClick(view, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)


def sort_and_wait(qtbot, view) -> None:
    press_sort(qtbot, view)
    assert view.loading
    qtbot.waitUntil(lambda: not view.loading, timeout=WAIT_MS)


def progress_values(view) -> list[int]:
    seen: list[int] = []
    view.progress.valueChanged.connect(seen.append)
    return seen


def direct_scores(window, case_ids: list[int]) -> urgency.InboxScores:
    """The independent route: the bundled urgency template and the cases as the PI's service
    reads them, straight into ``score_inbox`` with the window's engine."""
    admin = window.admin
    cases = {c.id: c for c in admin.inboxes()[INBOX]}
    patients = [urgency.Patient(c, cases[c].message, cases[c].chart_text) for c in sorted(case_ids)]
    return urgency.score_inbox(
        window.suggestions.host.engine, default_template("urgency_pair"), patients
    )


def stored_rows(path: Path) -> list[Suggestion]:
    with Project.open(path, read_only=True) as project, project.read() as s:
        rows = s.query(Suggestion).order_by(Suggestion.id).all()
        s.expunge_all()
        return rows


def annotator_names(path: Path) -> list[str]:
    with Project.open(path, read_only=True) as project:
        return [a.name for a in StudyService(project).annotators()]


def ndcg(levels_in_order: list[int], k: int) -> float:
    rel = [6 - lv for lv in levels_in_order]
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel[:k]))
    ideal = sorted(rel, reverse=True)
    return dcg / sum(r / math.log2(i + 2) for i, r in enumerate(ideal[:k]))


def winner_of(direct: urgency.InboxScores, a: int, b: int) -> int:
    """The case the model puts first in the pair (a, b), from the direct route's pairs."""
    pair = next(p for p in direct.pairs if {p.a, p.b} == {a, b})
    p_a = pair.p_a_first if pair.a == a else 1.0 - pair.p_a_first
    return a if p_a >= 0.5 else b


def win_rate_order(case_ids: list[int], outcomes: list[tuple[int, int]]) -> list[int]:
    wins = dict.fromkeys(case_ids, 0)
    played = dict.fromkeys(case_ids, 0)
    for winner, loser in outcomes:
        wins[winner] += 1
        played[winner] += 1
        played[loser] += 1
    return sorted(case_ids, key=lambda c: (-wins[c] / played[c], c))


def test_the_pi_sorts_by_the_model_and_keeps_it_as_an_annotator(qtbot, prefs, study, model):
    path, cases, units = study
    ids = sorted(cases.values())
    levels = {cases[key]: level for key, level, _ in MESSAGES}
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    view = open_inbox(qtbot, window)
    assert not view.keep_button.isVisible()
    seen = progress_values(view)
    sort_and_wait(qtbot, view)
    result = view.result
    assert result.model is not None and result.model.model_file == model.name

    # every ordered pair was asked once: 5 x 4 = 20 questions, counted up to the end
    assert result.model.n_questions == 20
    assert max(seen) == 20 and view.progress.maximum() == 20

    # the same order and scores as score_inbox called directly with the same engine
    direct = direct_scores(window, ids)
    assert view.case_order() == direct.order
    for row in result.rows:
        assert row.score == pytest.approx(direct.scores[row.case_id], abs=1e-4)
        shown = view.table.item(row.position - 1, inbox_view.SCORE_COLUMN).text()
        assert shown == f"{row.score:.2f}"
        assert row.comparisons == 4  # every other message
        assert row.wins == sum(
            winner_of(direct, row.case_id, c) == row.case_id for c in ids if c != row.case_id
        )
    assert not view.table.isColumnHidden(inbox_view.SCORE_COLUMN)

    # the PI sees the reference levels and NDCG of the model's order
    assert not view.table.isColumnHidden(inbox_view.LEVEL_COLUMN)
    value = ndcg([levels[c] for c in direct.order], 10)
    assert f"NDCG@10 <b>{value:.3f}</b>" in view.scores.text()

    # nothing is stored by sorting
    assert stored_rows(path) == []
    assert "tiny" not in annotator_names(path)

    # Keep as annotator "tiny": one answer per urgency unit of the inbox (all 10 pairs)
    assert view.keep_button.isVisible() and "“tiny”" in view.keep_button.text()
    wins_by_model = {r.case_id: r.wins for r in result.rows}
    view.keep_button.click()
    qtbot.waitUntil(
        lambda: not view.loading and view.result is not None and view.result.model is None,
        timeout=WAIT_MS,
    )
    assert "Stored 10 answers as tiny" in view.status.text()
    rows = stored_rows(path)
    assert sorted(r.unit_id for r in rows) == sorted(units)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    outcomes = []
    with Project.open(path, read_only=True) as project:
        svc = StudyService(project)
        tiny = next(a for a in svc.annotators() if a.name == "tiny")
        assert tiny.is_model
        for row in rows:
            a, b = units[row.unit_id]
            expected = winner_of(direct, a, b)
            assert json.loads(row.payload_json)["more_urgent_case_id"] == expected
            assert (row.model_file, row.model_sha256) == (model.name, sha)
            assert row.template_id == "urgency_pair@default"
            assert row.template_text == default_text("urgency_pair")
            observed = json.loads(row.params_json)["observed"]
            runtime = json.loads(row.params_json)["runtime"]
            assert runtime["device"] == "CPU" and runtime["gpu_layers"] == 0
            assert runtime["build"].startswith("llama-cpp-python ")
            # A is the case shown first (the unit's presentation may swap the stored order)
            first, second = observed["a"], observed["b"]
            assert {first, second} == {a, b}
            pair = next(p for p in direct.pairs if {p.a, p.b} == {a, b})
            p_first = pair.p_a_first if pair.a == first else 1.0 - pair.p_a_first
            assert observed["p_a_first"] == pytest.approx(p_first, abs=1e-4)
            assert row.seed == 0 and row.seconds > 0
            answer = svc.get_answer(row.unit_id, annotator_id=tiny.id)
            assert answer.payload["more_urgent_case_id"] == expected
            assert answer.status == "submitted" and answer.suggestion_id == row.id
            outcomes.append((expected, b if expected == a else a))

    # the judge list offers the model, chosen now, and it sorts the inbox by those answers
    key = f"annotator:{tiny.id}"
    labels = {
        view.judge_box.itemData(i): view.judge_box.itemText(i)
        for i in range(view.judge_box.count())
    }
    assert labels[key] == "Model: tiny"
    assert view.judge_box.currentData() == key and view.result.judge.key == key
    assert view.case_order() == win_rate_order(ids, outcomes)
    assert {r.case_id: r.wins for r in view.result.rows} == wins_by_model
    assert not view.keep_button.isVisible()
    window.close()


def test_cancel_stops_the_model_and_stores_nothing(qtbot, prefs, study, model, monkeypatch):
    path, _cases, _units = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    view = open_inbox(qtbot, window)
    before = view.case_order()
    asked, reached, go_on = [], threading.Event(), threading.Event()
    real_ask = urgency.ask

    def ask_then_wait(*args, **kwargs):
        asked.append(1)
        if len(asked) == 3:
            reached.set()
            assert go_on.wait(60), "the test never let the model go on"
        return real_ask(*args, **kwargs)

    monkeypatch.setattr(urgency, "ask", ask_then_wait)
    seen = progress_values(view)
    press_sort(qtbot, view)
    qtbot.waitUntil(reached.is_set, timeout=WAIT_MS)
    assert view.cancel_button.isVisible()
    qtbot.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    go_on.set()
    qtbot.waitUntil(lambda: not view.loading, timeout=WAIT_MS)
    assert len(asked) == 3  # the pair in progress finished; no pair was asked after Cancel
    assert max(seen, default=0) <= 3
    assert "Cancelled" in view.status.text() and "nothing was stored" in view.status.text()
    assert view.result.model is None and view.case_order() == before  # the judgements stay
    assert not view.keep_button.isVisible()
    assert stored_rows(path) == []
    assert "tiny" not in annotator_names(path)
    window.close()


def test_a_clinician_sorts_their_own_inbox_without_the_reference(qtbot, prefs, study, model):
    path, cases, _units = study
    window = open_as(qtbot, prefs, path, "ava")
    view = open_inbox(qtbot, window)
    press_sort(qtbot, view)
    assert "No model is loaded" in view.status.text() and not view.loading
    load_model(qtbot, window, model)
    seen = progress_values(view)
    sort_and_wait(qtbot, view)
    result = view.result
    assert result.model is not None
    # only the messages of her own pairs: 4 messages, 4 x 3 = 12 questions
    own = sorted(cases[key] for key in AVA_CASES)
    assert sorted(view.case_order()) == own
    assert max(seen) == 12 and result.model.n_questions == 12
    assert view.case_order() == direct_scores(window, own).order
    # nothing of the reference: no level, no NDCG, no misplaced mark, no keeping
    assert not result.reference_visible and result.scores == {}
    assert all(r.reference_level is None and not r.misplaced for r in result.rows)
    assert view.table.isColumnHidden(inbox_view.LEVEL_COLUMN)
    assert view.table.isColumnHidden(inbox_view.CHECK_COLUMN)
    assert "NDCG@" not in view.scores.text() and "model gives" in view.scores.text()
    assert not view.keep_button.isVisible()
    window.close()
