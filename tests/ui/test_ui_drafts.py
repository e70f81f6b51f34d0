"""Tools > Generate drafts… through the real engine with the tiny random model (written by the
test, nothing downloaded): drafts are stored as model responses with their provenance, the text
the dialog streams is the text stored, Cancel keeps what was stored and stops within one token,
Run again generates only the rest, and without a model the dialog says so and stores nothing.
Random weights give random text: these tests check structure and counts, never wording."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from ui_support import open_window

from portalreview.llm import suggest as sg
from portalreview.llm.engine import GenerationParams
from portalreview.llm.errors import ModelServerError
from portalreview.llm.templates import default_text
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import drafts_dialog
from portalreview.ui.model_panel import ModelDialog
from tests.llm.llm_testkit import drafts_end_at_the_limit, tiny_model_file

WAIT_MS = 120000
MAX_TOKENS = 24  # short drafts: the test is about what is stored, not how much is written
# (external id, message, tags): three cases tagged batch=a, one without
CASES = [
    ("k1", "My blood pressure readings were 150/95 all week. Should I change my pills?", "a"),
    ("k2", "The rash on my arm is spreading and it itches a lot.", "a"),
    ("k3", "Can I take ibuprofen with my new blood thinner?", "a"),
    ("k4", "Please renew my inhaler prescription.", None),
]


@pytest.fixture(autouse=True)
def _finished_drafts(monkeypatch):
    drafts_end_at_the_limit(monkeypatch)  # the tiny model's drafts end only at the limit


@pytest.fixture
def model(tmp_path_factory):
    return tiny_model_file(tmp_path_factory)


@pytest.fixture
def study(tmp_path) -> tuple[Path, dict[str, int]]:
    """Four cases (three tagged batch=a), a rank set over k1 and k2, a PI and a clinician."""
    path = tmp_path / "drafts.prproj"
    with Project.create(path, name="Drafts test study") as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava", "Ava (RN)")
        svc.add_annotator("pat", "Pat (PI)", role="pi")
        cases = {
            key: svc.add_case(
                key,
                text,
                {"demographics": ["Age: 58"], "problems": [f"Problem of {key}"]},
                tags={"batch": tag} if tag else None,
            )
            for key, text, tag in CASES
        }
        rank_set = svc.create_unit_set("rank these", "rank")
        for key in ("k1", "k2"):
            drafts = [
                svc.add_response(
                    cases[key], f"{key}-{i}", f"Reply {i} to {key}.", author_kind="model"
                )
                for i in range(2)
            ]
            svc.assign(svc.add_unit(rank_set, cases[key], members=drafts), ava)
    return path, cases


def open_as(qtbot, prefs, path: Path, who: str):
    window = open_window(qtbot, prefs, path, who)
    window.suggestions.host.load_options = {"gpu": False, "hash_cache": False}
    return window


def load_model(qtbot, window, model: Path) -> None:
    window.suggestions.host.load(model, show_progress=False)
    qtbot.waitUntil(lambda: window.suggestions.host.engine is not None, timeout=WAIT_MS)


def tools_action(window, title: str):
    return next(a for a in window.tools_menu.actions() if a.text() == title)


def open_dialog(qtbot, window) -> drafts_dialog.DraftsDialog:
    tools_action(window, "Generate drafts…").trigger()
    dialog = window.findChild(drafts_dialog.DraftsDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.max_tokens.setValue(MAX_TOKENS)
    return dialog


def choose_tags(dialog, text: str) -> None:
    dialog.by_tags.setChecked(True)
    dialog.tags_edit.setText(text)


def run_and_wait(qtbot, dialog) -> object:
    """Press Run (its shortcut) and wait for the run's end; returns its report (None: failed)."""
    with qtbot.waitSignal(dialog.run_finished, timeout=WAIT_MS) as finished:
        dialog.activateWindow()
        qtbot.waitUntil(dialog.isActiveWindow, timeout=5000)  # the shortcut is the window's
        qtbot.keyClick(dialog, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    return finished.args[0]


def model_drafts(path: Path) -> dict[int, tuple[int, str, str, str]]:
    """case id -> (response id, text, external id, author kind) of each model draft a run made
    (external ids starting "llm:"), read from the file by a separate connection."""
    with Project.open(path, read_only=True) as project:
        svc = StudyService(project)
        out = {}
        for case_id in _all_case_ids(svc):
            for row in _responses(svc, case_id):
                if row[2].startswith("llm:"):
                    assert case_id not in out, "one draft per case"
                    out[case_id] = row
        return out


def _all_case_ids(svc: StudyService) -> list[int]:
    from portalreview.store.models import Case

    with svc.project.read() as s:
        return [c.id for c in s.query(Case).order_by(Case.id)]


def _responses(svc: StudyService, case_id: int) -> list[tuple[int, str, str, str]]:
    from portalreview.store.models import Response

    with svc.project.read() as s:
        return [
            (r.id, r.text, r.external_id, r.author_kind)
            for r in s.query(Response).filter(Response.case_id == case_id).order_by(Response.id)
        ]


def provenance(path: Path, response_id: int) -> dict:
    with Project.open(path, read_only=True) as project:
        return sg.draft_provenance(StudyService(project), response_id)


def test_the_summary_names_drafts_that_did_not_fit_by_their_case(qtbot, prefs, study):
    """The cases that got no draft are named by their external id, as while drafting."""
    path, cases = study
    dialog = open_dialog(qtbot, open_as(qtbot, prefs, path, "pat"))
    report = sg.BatchReport(2, stored=[cases["k1"]])
    report.failed = {cases["k2"]: "the model wrote an empty draft"}
    report.case_names = {cases["k1"]: "k1", cases["k2"]: "k2"}
    assert "<br>Case k2: the model wrote an empty draft" in dialog._summary(report)


def test_a_last_draft_that_was_not_stored_is_not_called_written(qtbot, prefs, study):
    """The last case's draft refused (cut off): the dialog said "The last draft written, for
    case k2, is below" under a text that was not stored."""
    path, cases = study
    dialog = open_dialog(qtbot, open_as(qtbot, prefs, path, "pat"))
    report = sg.BatchReport(2, stored=[cases["k1"]])
    report.failed = {cases["k2"]: "the draft is unfinished: cut off at 200 tokens"}
    dialog._case_id, dialog._case_name = cases["k2"], "k2"
    dialog._say_where_it_ended(report)
    said = dialog.current.text()
    assert "was not stored: the draft is unfinished: cut off at 200 tokens" in said
    assert "written" not in said


def test_the_draft_shown_starts_where_the_stored_one_does(qtbot, prefs, study):
    """SmolLM2 began its drafts with two blank lines, shown above the text; the stored draft
    is stripped of them."""
    path, cases = study
    dialog = open_dialog(qtbot, open_as(qtbot, prefs, path, "pat"))
    dialog.running, dialog._case_id = True, cases["k1"]
    for piece in ("\n", "\n  ", "Hello,", "\n\nThank you"):
        dialog._piece(cases["k1"], piece)
    assert dialog.stream_view.toPlainText() == "Hello,\n\nThank you"
    dialog.running = False


def test_drafts_stream_into_the_dialog_and_are_stored_with_provenance(qtbot, prefs, study, model):
    path, cases = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    # the first rank set is offered, and both drafting templates of the prompt library
    assert dialog.set_box.currentData() == "rank these" and dialog.by_set.isChecked()
    assert [dialog.template_box.itemData(i) for i in range(dialog.template_box.count())] == [
        "draft_zero_shot@default",
        "draft_thematic@default",
    ]

    written = []  # what the dashboard follows (main window's study_written)
    window.study_written.connect(lambda: written.append(True))
    # a tag that cannot be read: a message naming it, nothing generated
    choose_tags(dialog, "batch")
    assert run_and_wait(qtbot, dialog) is None
    assert "cannot read the tag 'batch'" in dialog.status.text()
    assert model_drafts(path) == {} and not written

    choose_tags(dialog, "batch=a")
    dialog.template_box.setCurrentIndex(1)  # thematic
    dialog.temperature.setValue(0.7)
    dialog.seed.setValue(11)
    shown: dict[int, str] = {}
    dialog.case_finished.connect(
        lambda case_id, status: (
            shown.__setitem__(case_id, dialog.stream_view.toPlainText())
            if status == "stored"
            else None
        )
    )
    report = run_and_wait(qtbot, dialog)
    tagged = [cases["k1"], cases["k2"], cases["k3"]]
    assert report.stored == tagged and not report.skipped and not report.failed
    assert not report.cancelled and written == [True]
    assert (dialog.progress.value(), dialog.progress.maximum()) == (3, 3)
    assert dialog.counts.text() == "3 new, 0 already drafted, 0 refused"
    assert "Done." in dialog.status.text() and "rank" in dialog.status.text()

    stored = model_drafts(path)
    assert sorted(stored) == tagged  # k4 (untagged) has none
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    for case_id in tagged:
        response_id, text, external_id, author_kind = stored[case_id]
        assert author_kind == "model"
        assert text and text == shown[case_id].strip()  # what was streamed is what was stored
        assert external_id.startswith(f"llm:{sha[:12]}:draft_thematic@default:")
        made = provenance(path, response_id)
        assert made["model_file"] == model.name and made["model_sha256"] == sha
        assert made["template_id"] == "draft_thematic@default"
        assert made["template_text"] == default_text("draft_thematic")
        assert (
            made["params"]
            == GenerationParams(max_tokens=MAX_TOKENS, temperature=0.7, seed=11).as_dict()
        )
        assert made["seed"] == 11 and made["seconds"] > 0
        assert made["finish_reason"] in ("stop", "length")
    # the last case's draft is still on screen
    assert dialog.stream_view.toPlainText().strip() == stored[tagged[-1]][1]
    assert "k3" in dialog.current.text()
    window.close()


def test_cancel_keeps_what_was_stored_and_run_again_does_only_the_rest(
    qtbot, prefs, study, model, monkeypatch
):
    path, cases = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    choose_tags(dialog, "")  # every case: k1..k4

    generated: list[int] = []
    real_stream = sg.stream_draft
    first_stored, go_on = threading.Event(), threading.Event()
    real_store = sg.store_draft

    def counting_stream(engine, template, values, params=None, cancel=None):
        generated.append(1)
        return real_stream(engine, template, values, params, cancel)

    def store_then_wait(*args, **kwargs):
        response_id = real_store(*args, **kwargs)
        if not first_stored.is_set():
            first_stored.set()
            assert go_on.wait(60), "the test never let the run go on"
        return response_id

    monkeypatch.setattr(sg, "stream_draft", counting_stream)
    monkeypatch.setattr(sg, "store_draft", store_then_wait)
    with qtbot.waitSignal(dialog.run_finished, timeout=WAIT_MS) as finished:
        dialog.run_button.click()
        qtbot.waitUntil(first_stored.is_set, timeout=WAIT_MS)
        assert dialog.cancel_button.isEnabled()
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
        go_on.set()
    report = finished.args[0]
    assert report.cancelled and report.stored == [cases["k1"]]
    assert len(generated) == 1  # stopped before the next case began
    assert sorted(model_drafts(path)) == [cases["k1"]]
    assert "Stopped." in dialog.status.text()
    assert dialog.run_button.isEnabled() and not dialog.cancel_button.isEnabled()

    # Run again: only the three cases without a draft are generated
    generated.clear()
    report = run_and_wait(qtbot, dialog)
    assert report.skipped == [cases["k1"]]
    assert report.stored == [cases["k2"], cases["k3"], cases["k4"]]
    assert len(generated) == 3  # 4 cases - 1 already drafted
    assert sorted(model_drafts(path)) == sorted(cases.values())
    assert dialog.counts.text() == "3 new, 1 already drafted, 0 refused"

    # a third run has nothing left to write
    generated.clear()
    report = run_and_wait(qtbot, dialog)
    assert len(report.skipped) == 4 and not report.stored and not generated
    window.close()


def test_cancel_stops_a_draft_within_one_token(qtbot, prefs, study, model, monkeypatch):
    """The cancel event the dialog's Cancel sets is set from the model thread right after the
    third piece of the first draft (where a click would land, but at an exact moment)."""
    path, _cases = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    dialog.max_tokens.setValue(200)
    generations, at_cancel = [], []
    real_stream = sg.stream_draft

    class CancelAfterThree:
        def __init__(self, gen):
            self.gen = gen

        def __iter__(self):
            for count, piece in enumerate(self.gen, start=1):
                yield piece
                if count == 3:
                    at_cancel.append(len(self.gen.token_ids))
                    dialog._cancel.set()

        def __getattr__(self, name):
            return getattr(self.gen, name)

    def spying_stream(*args, **kwargs):
        gen = real_stream(*args, **kwargs)
        generations.append(gen)
        return CancelAfterThree(gen)

    monkeypatch.setattr(sg, "stream_draft", spying_stream)
    report = run_and_wait(qtbot, dialog)  # the rank set's cases: k1, k2
    assert report.cancelled and report.stored == [] and report.done == 0
    assert len(generations) == 1
    gen = generations[0]
    assert gen.finish_reason == "cancelled"
    assert len(gen.token_ids) == at_cancel[0] >= 3  # not one token more after the cancel
    assert model_drafts(path) == {}
    assert "k1" in dialog.current.text()
    window.close()


def test_a_model_server_lost_mid_run_keeps_the_counts_and_says_why(
    qtbot, prefs, study, model, monkeypatch
):
    """The model server goes away at the 2nd case: the dialog keeps the first draft's counts
    and says the run stopped and why, not that nothing was generated."""
    path, cases = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    real_stream, calls = sg.stream_draft, []

    def lost_at_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ModelServerError("the model server http://gpu:8080 went away (reset).")
        return real_stream(*args, **kwargs)

    monkeypatch.setattr(sg, "stream_draft", lost_at_second)
    report = run_and_wait(qtbot, dialog)  # the rank set's cases: k1, k2
    assert report is not None and report.stored == [cases["k1"]]
    assert sorted(model_drafts(path)) == [cases["k1"]]
    status = dialog.status.text()
    assert "Nothing was generated" not in status
    assert "The run stopped." in status and "went away" in status and "1 drafts stored" in status
    assert dialog.counts.text() == "1 new, 0 already drafted, 0 refused"
    assert (dialog.progress.value(), dialog.progress.maximum()) == (1, 2)
    assert "k2" in dialog.current.text() and "not stored" in dialog.current.text()
    window.close()


def test_without_a_model_the_dialog_says_so_and_stores_nothing(qtbot, prefs, study, model):
    path, _cases = study
    clinician = open_as(qtbot, prefs, path, "ava")
    assert not tools_action(clinician, "Generate drafts…").isEnabled()  # PI only
    clinician.close()

    window = open_as(qtbot, prefs, path, "pat")
    dialog = open_dialog(qtbot, window)
    assert "No model is loaded" in dialog.model_label.text()
    assert not dialog.run_button.isEnabled()
    dialog.run()  # e.g. through the shortcut
    assert "No model is loaded" in dialog.status.text()
    assert not dialog.running
    assert model_drafts(path) == {}
    dialog.models_button.click()
    models = window.findChild(ModelDialog)
    assert models is not None and models.isVisible()
    # once a model is loaded (from the Models dialog), Run becomes available
    load_model(qtbot, window, model)
    assert model.name in dialog.model_label.text()
    assert dialog.run_button.isEnabled()
    models.close()
    window.close()


def test_before_a_run_the_bar_counts_the_cases_of_the_set_chosen(qtbot, prefs, study):
    path, cases = study
    with Project.open(path) as project:  # a set of three units over two cases
        svc = StudyService(project)
        pairs = svc.create_unit_set("pairs", "urgency")
        for a, b in (("k1", "k2"), ("k2", "k1"), ("k1", "k2")):
            svc.add_unit(pairs, cases[a], case_b_id=cases[b])
    window = open_as(qtbot, prefs, path, "pat")
    dialog = open_dialog(qtbot, window)
    assert dialog.by_set.isChecked()
    service = window.service
    for index in range(dialog.set_box.count()):
        dialog.set_box.setCurrentIndex(index)
        name = dialog.set_box.currentData()
        expected = len(sg.cases_for_drafts(service, unit_set=name))
        assert expected == 2
        assert (dialog.progress.minimum(), dialog.progress.maximum()) == (0, expected)
        assert dialog.progress.text() == f"0 of {expected} cases"
    dialog.by_tags.setChecked(True)  # counted when the run starts: no number yet
    assert "0 of" not in dialog.progress.text()
    window.close()


def test_closing_the_project_stops_the_run_and_nothing_more_is_stored(
    qtbot, prefs, study, model, monkeypatch, tmp_path
):
    """The PI closes the project (to open another) while a run drafts: the run stops before
    the project is closed and its lock released, nothing more is stored in it (not even while
    another program holds it for writing), and the window says so; over the next project it
    never says "Done" nor names that project."""
    from ui_support import make_gui_study

    path, cases = study
    (tmp_path / "next").mkdir()
    following = make_gui_study(tmp_path / "next")
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    choose_tags(dialog, "")  # every case: k1..k4
    second_begun = threading.Event()
    generate = sg._generate_draft  # the fixture's: a cut-off draft counts as finished

    def hold_the_second(service, engine, template, case, params, cancel, *rest):
        if case.id == cases["k2"]:
            second_begun.set()
            cancel.wait(5)  # drafting k2 while the project closes
        return generate(service, engine, template, case, params, cancel, *rest)

    monkeypatch.setattr(sg, "_generate_draft", hold_the_second)
    dialog.run_button.click()
    qtbot.waitUntil(second_begun.is_set, timeout=WAIT_MS)
    with qtbot.waitSignal(dialog.run_finished, timeout=WAIT_MS):
        assert window.close_project()
        holder = Project.open(path)  # another program takes the file for writing
    try:
        qtbot.wait(200)  # what the model thread sent before it stopped arrives
        assert sorted(model_drafts(path)) == [cases["k1"]]  # stored before the close only
    finally:
        holder.close()
    assert not dialog.running and dialog.isVisible()
    said = dialog.status.text()
    assert "drafts.prproj was closed while drafting" in said and "1 draft stored" in said
    window.open_project(following.path, annotator="pat")
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    qtbot.wait(200)
    said = dialog.status.text()
    assert "Done" not in said and following.path.name not in said
    assert "drafts.prproj was closed" in said  # what happened to the run is still said
    assert dialog.run_button.isEnabled()  # and the next project can be drafted for
    window.close()


def test_a_run_waiting_for_the_model_thread_stores_nothing_once_the_project_closed(
    qtbot, prefs, study, model
):
    """Run pressed while the model thread is busy (a suggestion, a model loading), then the
    project closed before the run began: closing does not wait for it, and when the model
    thread is free the run stores nothing."""
    path, _cases = study
    window = open_as(qtbot, prefs, path, "pat")
    load_model(qtbot, window, model)
    dialog = open_dialog(qtbot, window)
    choose_tags(dialog, "")
    busy, free = threading.Event(), threading.Event()
    window.suggestions.host.submit(lambda: (busy.set(), free.wait(30)))
    qtbot.waitUntil(busy.is_set)
    dialog.run_button.click()
    assert dialog.running
    assert window.close_project()
    assert not dialog.running and "was closed while drafting" in dialog.status.text()
    free.set()
    window.suggestions.host.pool.waitForDone(WAIT_MS)
    qtbot.wait(200)
    assert model_drafts(path) == {}
    assert "Done" not in dialog.status.text()
    window.close()
