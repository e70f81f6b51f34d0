"""Model suggestions in the desktop app, through the real engine with the tiny random model
(written by the test, nothing downloaded): a suggestion appears pre-filled and marked, nothing
is saved until the person accepts or edits it, the stored answer records the suggestion and
how it was used, the suggestion's provenance is stored, a corrupt model file gives a message
and the app goes on, and the model is closed with the window. Random weights give random
text, so these tests check structure, never wording."""

from __future__ import annotations

import hashlib
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPlainTextEdit
from ui_support import (
    open_window,
    preferences,
    show_kind,
    stored_answer,
    wait_saved,
)

from portalreview.llm import gates
from portalreview.store.models import Suggestion
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.model_panel import AUTOLOAD_KEY, MODEL_KEY
from portalreview.ui.suggestions import SuggestionBanner
from tests.llm.llm_testkit import PARAMS, SMALL_LIMITS, tiny_model_file

ANSWER_WAIT_MS = 60000


@pytest.fixture(autouse=True)
def gate_verdict(monkeypatch) -> dict:
    """Random weights write degenerate text by construction (the same draft span for every
    sentence, one text in most boxes), which the quality gates refuse. These tests are about
    how a suggestion is offered, so here the gates give the verdict the test sets (None: it
    passes); tests/llm/test_llm_gates.py tests the gates themselves."""
    verdict: dict = {"reason": None}
    monkeypatch.setattr(gates, "check", lambda *args, **kwargs: verdict["reason"])
    return verdict


@pytest.fixture
def model(tmp_path_factory):
    return tiny_model_file(tmp_path_factory)


@pytest.fixture
def window(qtbot, gui, tmp_path):
    win = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    ctl = win.suggestions
    ctl.host.load_options = {"gpu": False, "hash_cache": False}
    ctl.params, ctl.limits = PARAMS, SMALL_LIMITS
    return win


def wait_for_the_note(qtbot, window):
    """The banner's note once the model's answer came back and was refused."""
    qtbot.waitUntil(
        lambda: window.suggestions.job is None and banner(window).state == "note",
        timeout=ANSWER_WAIT_MS,
    )
    return banner(window).text


def banner(window) -> SuggestionBanner:
    return window.editors[window.kind].findChild(SuggestionBanner)


def load_model(qtbot, window, path) -> None:
    window.suggestions.host.load(path, show_progress=False)
    qtbot.waitUntil(lambda: window.suggestions.host.engine is not None, timeout=ANSWER_WAIT_MS)


def wait_offered(qtbot, window) -> None:
    qtbot.waitUntil(
        lambda: banner(window) is not None and banner(window).state == "offered",
        timeout=ANSWER_WAIT_MS,
    )
    assert banner(window).isVisible()
    assert window.session.suggestion_state == "offered"


def suggestion_row(path, suggestion_id: int) -> dict:
    with Project.open(path, read_only=True) as project, project.read() as s:
        row = s.get(Suggestion, suggestion_id)
        return {
            "unit_id": row.unit_id,
            "model_file": row.model_file,
            "model_sha256": row.model_sha256,
            "template_id": row.template_id,
            "template_text": row.template_text,
            "params": json.loads(row.params_json),
            "payload": json.loads(row.payload_json),
        }


def test_a_suggestion_is_marked_saved_only_when_accepted_then_edited(qtbot, window, gui, model):
    unit = gui.ids.units["respond"]
    show_kind(window, "respond")
    assert window.session.unit.unit_id == unit and window.session.answer is None
    load_model(qtbot, window, model)
    assert window.suggestions.model_label.text().endswith(model.name)
    assert "CPU" in window.suggestions.model_label.toolTip()  # engine.info.describe()
    wait_offered(qtbot, window)
    editor = window.editors["respond"]
    suggested = editor.payload()
    assert suggested["parts"], "the theme boxes are pre-filled"
    assert model.name in banner(window).text.text()

    # Shown, not accepted: nothing reaches the file, not even after the autosave delay or on
    # an explicit save.
    qtbot.wait(700)
    window.act_save.trigger()
    assert stored_answer(gui.path, unit, "ava") is None

    # One key accepts it.
    first_box = next(b for b in editor.findChildren(TextBox) if b.isVisible())
    first_box.setFocus()
    qtbot.keyClick(
        first_box,
        Qt.Key.Key_A,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    answer = stored_answer(gui.path, unit, "ava")
    assert answer is not None
    assert answer.suggestion_use == "accepted" and answer.suggestion_id is not None
    assert answer.payload["parts"] == suggested["parts"]
    assert banner(window).state == "accepted"

    row = suggestion_row(gui.path, answer.suggestion_id)
    assert row["unit_id"] == unit
    assert row["model_file"] == model.name
    assert row["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert row["template_id"] == "respond_boxes@default" and row["template_text"].strip()
    assert row["params"]["max_tokens"] == PARAMS.max_tokens
    assert row["payload"]["parts"] == suggested["parts"]

    # Editing after accepting is recorded as such.
    box = editor.boxes["planning"]
    box.setFocus()
    qtbot.keyClicks(box, " Call us.")
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.suggestion_use == "edited"
    assert answer.payload["parts"] != suggested["parts"]


def test_rank_edited_without_accepting_and_match_dismissed(qtbot, window, gui, model):
    load_model(qtbot, window, model)
    show_kind(window, "rank")
    wait_offered(qtbot, window)
    editor = window.editors["rank"]
    entries = editor.payload()["entries"]
    assert sorted(e["response_id"] for e in entries) == sorted([gui.ids.draft1, gui.ids.draft2])
    assert all(e["rank"] in (1, 2) for e in entries)
    assert stored_answer(gui.path, gui.ids.units["rank"], "ava") is None
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Down)
    # change the suggestion without accepting it: flip the focused reply's correctness (the
    # random model's verdict depends on the vocabulary, which every bundled template shapes)
    suggested_correct = editor.state["correct"][editor.current]
    qtbot.keyClick(editor, Qt.Key.Key_N if suggested_correct is True else Qt.Key.Key_Y)
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert answer.suggestion_use == "edited" and answer.suggestion_id is not None

    show_kind(window, "match")
    wait_offered(qtbot, window)
    editor = window.editors["match"]
    reference = window.session.unit.responses[0]
    assert [d["sentence_id"] for d in editor.payload()["decisions"]] == [
        s.id for s in reference.sentences
    ]
    window.act_dismiss.trigger()
    assert not banner(window).isVisible()
    assert editor.payload()["decisions"] == []
    assert stored_answer(gui.path, gui.ids.units["match"], "ava") is None
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)  # NO MATCH for the first sentence
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, gui.ids.units["match"], "ava")
    assert answer.suggestion_use == "ignored" and answer.suggestion_id is not None


def test_moving_on_cancels_and_a_stored_suggestion_needs_no_model(qtbot, window, gui, model):
    # A suggestion precomputed for the match unit (e.g. by `portalreview suggest`).
    unit = gui.ids.units["match"]
    read = window.admin.read_unit(unit)
    payload = {
        "decisions": [{"sentence_id": s.id, "spans": []} for s in read.responses[0].sentences],
        "themes": [],
    }
    stored_id = window.admin.add_suggestion(
        unit, payload, model_file="overnight.gguf", model_sha256="0" * 64, template_id="t@v1"
    )
    load_model(qtbot, window, model)
    show_kind(window, "rank")
    job = window.suggestions.job
    assert job is not None and banner(window).state == "working"
    show_kind(window, "match")  # moving on cancels the rank suggestion
    assert job.cancel.is_set()
    assert banner(window).state == "offered"
    assert "overnight.gguf" in banner(window).text.text()
    assert window.session.suggestion_id == stored_id
    window.act_accept.trigger()
    answer = stored_answer(gui.path, unit, "ava")
    assert (answer.suggestion_id, answer.suggestion_use) == (stored_id, "accepted")


def test_a_corrupt_model_gives_a_message_and_the_app_goes_on(
    qtbot, window, gui, tmp_path, monkeypatch
):
    told = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: told.append(a[2])))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 40)
    host = window.suggestions.host
    host.load(bad, show_progress=False)
    qtbot.waitUntil(lambda: not host.loading, timeout=ANSWER_WAIT_MS)
    assert host.engine is None
    assert len(told) == 1 and str(bad) in told[0]
    assert window.suggestions.model_label.text() == "No model"
    show_kind(window, "respond")
    assert banner(window) is None or not banner(window).isVisible()
    box = window.editors["respond"].boxes["empathy"]
    qtbot.keyClicks(box, "Sorry.")
    wait_saved(qtbot, window)
    answer = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert answer.payload["parts"]["empathy"] == "Sorry."
    assert answer.suggestion_id is None and answer.suggestion_use is None


def test_a_model_to_load_at_start_that_was_moved_is_named_in_a_message(
    qtbot, gui, tmp_path, monkeypatch
):
    """Nothing was said: the app started without suggestions and without a word."""
    told = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: told.append(a[2])))
    gone = tmp_path / "models" / "moved.gguf"
    prefs = preferences(tmp_path)
    prefs.qs.setValue(MODEL_KEY, str(gone))
    prefs.qs.setValue(AUTOLOAD_KEY, "true")
    window = open_window(qtbot, prefs, gui.path, "ava")
    qtbot.waitUntil(lambda: bool(told), timeout=5000)
    assert len(told) == 1 and str(gone) in told[0] and "moved or deleted" in told[0]
    assert window.suggestions.host.engine is None
    assert window.suggestions.model_label.text() == "No model"


def hang_suggestions(monkeypatch, answer_from: int | None = None) -> list:
    """Suggestions asked of a model server that does not answer: each waits until it is
    cancelled (the asks' cancel flags are listed in the list returned); from ask number
    ``answer_from`` on, the real model answers."""
    from portalreview.llm import suggest as sg
    from portalreview.llm.errors import Cancelled

    real_suggest, asked = sg.suggest, []

    def hung(ctx, unit):
        asked.append(ctx.cancel)
        if answer_from is not None and len(asked) >= answer_from:
            return real_suggest(ctx, unit)
        if not ctx.cancel.wait(30):
            raise AssertionError("the suggestion was not cancelled")
        raise Cancelled("cancelled")

    monkeypatch.setattr(sg, "suggest", hung)
    return asked


def test_loading_another_model_stops_the_suggestion_in_progress(
    qtbot, window, model, monkeypatch
):
    """A suggestion waiting on a hung model server held the one model thread: the load of
    another model waited behind it (92 s with a real server)."""
    asked = hang_suggestions(monkeypatch)
    show_kind(window, "respond")
    load_model(qtbot, window, model)  # asked at once for the unit on screen
    qtbot.waitUntil(lambda: bool(asked), timeout=ANSWER_WAIT_MS)
    first = window.suggestions.host.engine
    window.suggestions.host.load(model, show_progress=False)
    assert asked[0].is_set()  # stopped before the load was queued
    qtbot.waitUntil(lambda: window.suggestions.host.engine is not first, timeout=10000)


def test_stop_says_so_and_ask_again_asks_the_model_again(qtbot, window, model, monkeypatch):
    """After Stop the banner went away as if nothing had been asked, with no way to have a
    suggestion for the unit but to leave it and come back."""
    asked = hang_suggestions(monkeypatch, answer_from=2)  # the first waits to be stopped
    show_kind(window, "respond")
    load_model(qtbot, window, model)
    qtbot.waitUntil(lambda: bool(asked), timeout=ANSWER_WAIT_MS)
    shown = banner(window)
    assert shown.state == "working" and shown.stop_button.isVisible()
    shown.stop_button.click()
    assert asked[0].is_set()
    assert shown.state == "stopped" and shown.isVisible()
    assert "Stopped" in shown.text.text() and shown.again_button.isVisible()
    assert window.session.suggestion_state is None
    assert stored_answer(window.project.path, window.session.unit.unit_id, "ava") is None
    shown.again_button.click()
    wait_offered(qtbot, window)
    assert len(asked) == 2


def test_ask_again_without_a_model_says_so(qtbot, window, model, monkeypatch):
    hang_suggestions(monkeypatch)
    show_kind(window, "respond")
    load_model(qtbot, window, model)
    qtbot.waitUntil(lambda: banner(window).state == "working", timeout=ANSWER_WAIT_MS)
    banner(window).stop_button.click()
    window.suggestions.host.engine.close()  # the model stopped (or was unloaded) since
    window.statusBar().clearMessage()
    banner(window).again_button.click()
    assert "No model is loaded" in window.statusBar().currentMessage()
    assert banner(window).state == "stopped" and banner(window).isVisible()


def test_ask_again_puts_nothing_over_work_begun(qtbot, window, model, monkeypatch):
    asked = hang_suggestions(monkeypatch)
    show_kind(window, "respond")
    load_model(qtbot, window, model)
    qtbot.waitUntil(lambda: bool(asked), timeout=ANSWER_WAIT_MS)
    banner(window).stop_button.click()
    box = window.session.editor.findChild(TextBox)
    qtbot.keyClicks(box, "My own words")
    banner(window).again_button.click()
    assert len(asked) == 1 and not banner(window).isVisible()
    assert "started this unit yourself" in window.statusBar().currentMessage()
    assert "My own words" in box.toPlainText()


def test_the_model_is_closed_with_the_window(qtbot, window, model):
    load_model(qtbot, window, model)
    engine = window.suggestions.host.engine
    assert not engine.closed
    window.close()
    assert engine.closed
    assert window.suggestions.host.engine is None


def test_the_models_panel_lists_the_models_folder(qtbot, window, model, tmp_path, monkeypatch):
    from portalreview.ui.model_panel import ModelDialog

    monkeypatch.setenv("PORTALREVIEW_MODEL_CACHE", str(tmp_path / "no-small-model"))
    from portalreview.ui.tools import TOOLS

    assert any(t.target == "portalreview.ui.model_panel:open_tool" for t in TOOLS)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / model.name).write_bytes(model.read_bytes())
    (folder / "notes.gguf").write_bytes(b"PK\x03\x04 not a model")
    host = window.suggestions.host
    host.set_models_folder(folder)
    dialog = ModelDialog(host, window)
    qtbot.addWidget(dialog)
    rows = [dialog.list.item(i) for i in range(dialog.list.count())]
    usable = [r for r in rows if r.flags() & Qt.ItemFlag.ItemIsEnabled]
    assert len(rows) == 2 and len(usable) == 1
    dialog.list.setCurrentItem(usable[0])
    dialog.load_button.click()
    qtbot.waitUntil(lambda: host.engine is not None, timeout=ANSWER_WAIT_MS)
    assert host.remembered_model() == folder / model.name
    assert model.name in dialog.current.text()


def test_the_models_panel_offers_the_small_model_installed_with_the_program(
    qtbot, window, model, tmp_path, monkeypatch
):
    from portalreview.llm.model_file import SMALL_MODEL_NAME
    from portalreview.ui.model_panel import ModelDialog

    cache = tmp_path / "model-cache"
    cache.mkdir()
    installed = cache / SMALL_MODEL_NAME  # the tiny model stands in for SmolLM2 here
    installed.write_bytes(model.read_bytes())
    monkeypatch.setenv("PORTALREVIEW_MODEL_CACHE", str(cache))
    host = window.suggestions.host
    assert host.models_folder() is None  # a new user has chosen nothing yet
    dialog = ModelDialog(host, window)
    qtbot.addWidget(dialog)
    assert dialog.list.count() == 1
    item = dialog.list.currentItem()
    assert item is not None and "small model installed with PortalReview" in item.text()
    dialog.load_button.click()
    qtbot.waitUntil(lambda: host.engine is not None, timeout=ANSWER_WAIT_MS)
    assert host.remembered_model() == installed


def test_only_the_pi_sees_the_prompts_behind_a_suggestion(qtbot, window, gui, model, tmp_path):
    show_kind(window, "respond")
    load_model(qtbot, window, model)
    wait_offered(qtbot, window)
    assert not banner(window).prompt_button.isVisible()  # ava is a clinician
    suggestion_id = window.session.suggestion_id
    row = suggestion_row(gui.path, suggestion_id)
    assert row["params"]["prompt_format"]["format"] == "completion"  # the tiny model has none
    assert len(row["params"]["prompts"]) == 1
    window.close()  # one window holds the project at a time

    pi_window = open_window(qtbot, preferences(tmp_path / "pi"), gui.path, "pat")
    controller = pi_window.suggestions
    pi_window.session.suggestion_id = suggestion_id  # as when the PI opens the suggestion
    assert controller.reads_prompts()
    controller.show_prompt()
    text = controller.prompt_dialog.findChild(QPlainTextEdit, "suggestionPromptText")
    assert "Prompt format: plain completion" in text.toPlainText()
    threads = row["params"]["runtime"]["n_threads"]
    build = row["params"]["runtime"]["build"]
    assert f"Ran on: CPU, {threads} thread" in text.toPlainText() and build in text.toPlainText()
    assert row["params"]["prompts"][0] in text.toPlainText()
    assert text.isReadOnly()


def test_a_refused_suggestion_is_never_offered_nor_asked_for_again(qtbot, window, gui, model):
    from portalreview.llm import suggest as sg
    from portalreview.llm.templates import PromptLibrary

    unit = gui.ids.units["match"]
    read = window.admin.read_unit(unit)
    echo = {"decisions": [{"sentence_id": s.id, "spans": []} for s in read.responses[0].sentences]}
    # refused for another model: with no model loaded, nothing is shown
    window.admin.add_suggestion(
        unit,
        echo,
        model_file="overnight.gguf",
        model_sha256="0" * 64,
        template_id="t@v1",
        refused_reason="same text: the same draft span for every sentence",
    )
    show_kind(window, "match")
    assert banner(window) is None or banner(window).state == "hidden"
    assert window.session.suggestion_state != "offered"
    # refused for the loaded model and its templates: the model is not asked again
    load_model(qtbot, window, model)
    engine = window.suggestions.host.engine
    templates = sg.resolve_templates(PromptLibrary(window.admin), "match")
    window.admin.add_suggestion(
        unit,
        echo,
        model_file=engine.info.file_name,
        model_sha256=engine.sha256,
        template_id="+".join(t.key for t in templates.values()),
        refused_reason="same text: the same draft span for every sentence",
    )
    show_kind(window, "rank")
    show_kind(window, "match")
    assert window.suggestions.job is None
    note = banner(window).text
    assert banner(window).state == "note" and "no usable suggestion" in note.text()
    # the kind of fault in words, never the gate's reason (the model's own spans or words)
    assert "(it gave the same text in several places)" in note.text()
    assert "draft span" not in note.text() + note.toolTip()
    assert window.session.suggestion_state != "offered"


def test_the_models_panel_lists_refused_suggestions_for_the_pi(qtbot, gui, tmp_path):
    from portalreview.ui.model_panel import ModelDialog

    reason = "echo: 9 of 9 boxes repeat the prompt's own words"
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    for refused in (None, reason):
        window.admin.add_suggestion(
            gui.ids.units["respond"],
            {"parts": {"empathy": "Empathy"}},
            model_file="smol.gguf",
            model_sha256="1" * 64,
            template_id="respond_boxes@default",
            refused_reason=refused,
        )
    dialog = ModelDialog(window.suggestions.host, window)
    qtbot.addWidget(dialog)
    dialog.show()
    summary = dialog.gate_summary.text()
    assert "1 stored suggestion(s) can be offered; 1 refused" in summary
    assert dialog.refused_list.isVisible() and dialog.refused_list.count() == 1
    row = dialog.refused_list.item(0).text()
    assert reason in row and "smol.gguf" in row and "respond" in row
    window.close()
    clinician = open_window(qtbot, preferences(tmp_path / "ava"), gui.path, "ava")
    dialog = ModelDialog(clinician.suggestions.host, clinician)
    qtbot.addWidget(dialog)
    dialog.show()
    assert "1 refused" in dialog.gate_summary.text()
    assert not dialog.refused_list.isVisible() and dialog.refused_list.count() == 0


def test_a_live_answer_the_gates_refuse_is_stored_for_the_pi_only(
    qtbot, window, gui, model, gate_verdict
):
    gate_verdict["reason"] = "echo: 9 of 9 boxes repeat the prompt's own words"
    load_model(qtbot, window, model)
    show_kind(window, "rank")
    note = wait_for_the_note(qtbot, window)
    assert "(it repeated the form's own words)" in note.text()
    assert "9 of 9 boxes" not in note.text() + note.toolTip()
    assert window.session.suggestion_state != "offered"
    with Project.open(gui.path, read_only=True) as project, project.read() as s:
        row = s.query(Suggestion).one()
        assert (row.unit_id, row.refused_reason) == (gui.ids.units["rank"], gate_verdict["reason"])
    assert stored_answer(gui.path, gui.ids.units["rank"], "ava") is None


def test_the_pi_reads_why_a_suggestion_was_refused_in_the_banner(
    qtbot, gui, model, tmp_path, gate_verdict
):
    gate_verdict["reason"] = "could not be used: P(A first) 0.51, within 0.1 of 0.5"
    with Project.open(gui.path) as project:  # the PI answers units too
        for kind in ("rank", "match"):
            StudyService(project).assign(gui.ids.units[kind], gui.ids.pi)
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    window.suggestions.host.load_options = {"gpu": False, "hash_cache": False}
    window.suggestions.params, window.suggestions.limits = PARAMS, SMALL_LIMITS
    load_model(qtbot, window, model)
    show_kind(window, "rank")
    note = wait_for_the_note(qtbot, window)
    assert "(its answer could not be told from a guess)" in note.text()
    assert note.toolTip().endswith(
        "Refused by the quality gates: could not be used: P(A first) 0.51, within 0.1 of 0.5"
    )
    show_kind(window, "match")
    show_kind(window, "rank")  # not asked again: the stored refusal, with its reason
    assert window.suggestions.job is None
    assert "P(A first) 0.51" in banner(window).text.toolTip()


def test_with_own_examples_on_the_suggestion_is_made_from_her_replies(qtbot, gui, model, tmp_path):
    """The PI turned own examples on; ava answered a similar message before: the model's
    prompt holds her reply, the banner says so, and the suggestion is stored as hers alone."""
    from portalreview.store.service import StudyService

    unit = gui.ids.units["respond"]
    with Project.open(gui.path) as project:
        service = StudyService(project)
        service.set_own_examples(2)
        message = service.read_unit(unit).cases[0].message
        earlier = service.add_case("earlier", message + " Again today.")
        set_id = service.create_unit_set("Earlier replies", "respond")
        earlier_unit = service.add_unit(set_id, earlier)
        ava_id = next(a.id for a in service.annotators() if a.name == "ava")
        service.assign(earlier_unit, ava_id)
        reply = "Thank you for writing; I will call you this afternoon. Ava"
        service.as_viewer("ava").save_answer(
            earlier_unit, {"mode": "theme_guided", "parts": {"empathy": reply}}, status="submitted"
        )
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    ctl = window.suggestions
    ctl.host.load_options = {"gpu": False, "hash_cache": False}
    ctl.params, ctl.limits = PARAMS, SMALL_LIMITS
    show_kind(window, "respond")
    window.queue.select_unit(unit)
    assert window.session.unit.unit_id == unit
    load_model(qtbot, window, model)
    wait_offered(qtbot, window)
    assert "with your 1 most similar earlier reply as examples" in banner(window).text.text()
    suggestion_id = window.session.suggestion_id
    row = suggestion_row(gui.path, suggestion_id)
    assert row["template_id"] == "respond_own_examples@default"
    assert any(reply in prompt for prompt in row["params"]["prompts"])
    assert [e["case_id"] for e in row["params"]["own_examples"]] == [earlier]
    with Project.open(gui.path, read_only=True) as project, project.read() as s:
        assert s.get(Suggestion, suggestion_id).for_annotator_id == ava_id
    window.close()


@pytest.mark.parametrize("refused", [True, False])
def test_with_own_examples_on_and_none_yet_the_model_is_asked_once(
    qtbot, gui, model, tmp_path, gate_verdict, refused
):
    """Own examples on, but ava has no earlier reply: her suggestion is the generic one. Coming
    back to the unit offers it again (or, refused by the gates, says so) without asking the
    model again and storing one more suggestion each visit."""
    from portalreview.store.service import StudyService

    with Project.open(gui.path) as project:
        StudyService(project).set_own_examples(2)
    gate_verdict["reason"] = "same text: the same text in every box" if refused else None
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    ctl = window.suggestions
    ctl.host.load_options = {"gpu": False, "hash_cache": False}
    ctl.params, ctl.limits = PARAMS, SMALL_LIMITS
    load_model(qtbot, window, model)
    unit = gui.ids.units["respond"]
    for _visit in range(3):
        show_kind(window, "rank")
        show_kind(window, "respond")
        window.show_unit(unit)
        qtbot.waitUntil(lambda: ctl.job is None, timeout=ANSWER_WAIT_MS)
        assert banner(window).state == ("note" if refused else "offered")
    with Project.open(gui.path, read_only=True) as project, project.read() as s:
        rows = s.query(Suggestion).filter(Suggestion.unit_id == unit).all()
        assert [(r.template_id, r.for_annotator_id) for r in rows] == [
            ("respond_boxes@default", None)
        ]
    window.close()


def test_the_pi_turns_own_examples_on_in_the_models_dialog(qtbot, gui, tmp_path):
    from PySide6.QtWidgets import QLabel, QSpinBox

    from portalreview.store.service import StudyService
    from portalreview.ui.model_panel import ModelDialog

    clinician = open_window(qtbot, preferences(tmp_path / "ava"), gui.path, "ava")
    dialog = ModelDialog(clinician.suggestions.host, clinician)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.findChild(QSpinBox, "ownExamples").isVisible()
    assert "no one's own replies" in dialog.findChild(QLabel, "ownExamplesLabel").text()
    clinician.close()

    window = open_window(qtbot, preferences(tmp_path / "pat"), gui.path, "pat")
    dialog = ModelDialog(window.suggestions.host, window)
    qtbot.addWidget(dialog)
    dialog.show()
    spin = dialog.findChild(QSpinBox, "ownExamples")
    assert spin.isVisible() and spin.text() == "off"
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, "3")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert "their 3 most similar earlier replies" in dialog.findChild(
        QLabel, "ownExamplesLabel"
    ).text()
    window.close()
    with Project.open(gui.path, read_only=True) as project:
        assert StudyService(project).own_examples() == 3


@pytest.fixture
def written_over(tmp_path, model):
    """A copy of the tiny model to load, and ``write()``, which does to it what
    ``cp other.gguf model.gguf`` does (other weights, the same name and file)."""
    import shutil

    from portalreview.llm.testing_model import TINY, prompt_corpus, write_model

    copy = tmp_path / "model.gguf"
    shutil.copyfile(model, copy)
    other = write_model(tmp_path / "other.gguf", TINY, seed=7, corpus=prompt_corpus())
    return copy, lambda: shutil.copyfile(other, copy)


def suggestions_for(path, unit: int) -> list[str]:
    with Project.open(path, read_only=True) as project, project.read() as s:
        return [r.model_sha256 for r in s.query(Suggestion).filter_by(unit_id=unit)]


def test_a_model_file_written_over_since_it_was_loaded_gives_no_suggestion(
    qtbot, window, gui, written_over
):
    copy, write = written_over
    load_model(qtbot, window, copy)
    # the unit on screen is asked at once: let that finish, as a file truncated under a
    # generation kills the model process (SIGBUS), a case of its own (a model gone)
    qtbot.waitUntil(lambda: window.suggestions.job is None, timeout=ANSWER_WAIT_MS)
    write()
    show_kind(window, "rank")
    assert window.suggestions.job is None  # not asked: its answers are no longer the file's
    assert banner(window).state == "note"
    assert "changed on disk since it was loaded" in banner(window).text.text()
    assert suggestions_for(gui.path, gui.ids.units["rank"]) == []


def test_a_suggestion_made_while_the_file_was_written_over_is_not_offered(
    qtbot, window, gui, written_over, monkeypatch
):
    from portalreview.llm import suggest as sg

    copy, write = written_over
    gated = sg.gated

    def written_while_asked(*args, **kwargs):
        write()
        return gated(*args, **kwargs)

    monkeypatch.setattr(sg, "gated", written_while_asked)
    load_model(qtbot, window, copy)
    show_kind(window, "respond")
    qtbot.waitUntil(lambda: banner(window).state == "note", timeout=ANSWER_WAIT_MS)
    assert "changed on disk since it was loaded" in banner(window).text.text()
    assert window.session.suggestion_state != "offered"
    assert suggestions_for(gui.path, gui.ids.units["respond"]) == []
