"""``portalreview suggest``: a progress bar on stderr, resume on a second run, clear refusals,
and Ctrl-C stops cleanly with everything finished kept."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from llm_testkit import drafts_end_at_the_limit, tiny_model  # noqa: F401 - fixture
from sqlalchemy import func, select

from portalreview.cli import main
from portalreview.store.models import AuditEntry, Suggestion
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.templates import unit_ids
from tests.conftest import build_small_study


@pytest.fixture(autouse=True)
def private_hash_cache(tmp_path, monkeypatch):
    """Model hashes are remembered in the user's cache folder: keep the tests' apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def project_file(tmp_path) -> Path:
    path = tmp_path / "study.prproj"
    with Project.create(path) as project:
        build_small_study(project)
    return path


def test_suggest_runs_then_resumes(project_file, tiny_model, capsys):  # noqa: F811
    args = [
        "suggest",
        str(project_file),
        "--model",
        str(tiny_model),
        "--kind",
        "empathy",
        "--as-annotator",
        "tiny",
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "on the CPU" in err and "SHA-256 " in err
    assert "[" in err and "1/1 units" in err
    assert "1 stored, 0 refused by the quality gates, 0 already done, 0 did not fit" in err
    assert main(args) == 0
    assert "0 stored, 0 refused by the quality gates, 1 already done" in capsys.readouterr().err
    with Project.open(project_file, read_only=True) as project:
        info = StudyService(project).info()
    assert {"name": "tiny", "role": "clinician", "is_model": True} in info["annotators"]
    assert info["kinds"]["empathy"]["annotators"]["tiny"]["submitted"] == 1


def test_suggest_for_a_named_unit_set_and_drafts(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
):
    base = ["suggest", str(project_file), "--model", str(tiny_model)]
    # the tiny model's random weights put almost no probability on YES/NO: refused, status 1
    assert main([*base, "--kind", "urgency", "--units", "urgency set"]) == 1
    assert "1 stored" not in (err := capsys.readouterr().err)
    assert "1 refused by the quality gates (1 could not be used)" in err
    assert main([*base, "--kind", "urgency", "--units", "rank set"]) == 2
    assert "holds rank units, not urgency" in capsys.readouterr().err
    drafts = [*base, "--kind", "drafts", "--units", "rank set", "--max-tokens", "5"]
    assert main(drafts) == 1  # the tiny model's draft is cut off at the limit: not stored
    err = capsys.readouterr().err
    assert "0 stored" in err and "1 did not fit" in err
    assert "the draft is unfinished: it was cut off at 5 tokens (raise the token limit)" in err
    drafts_end_at_the_limit(monkeypatch)
    assert main(drafts) == 0
    assert "1 stored" in capsys.readouterr().err
    assert main([*base, "--kind", "drafts"]) == 2
    assert "drafts need --units" in capsys.readouterr().err


def test_suggest_refuses_a_bad_model_file(project_file, tmp_path, capsys):
    bad = tmp_path / "broken.gguf"
    bad.write_text("not a model")
    code = main(["suggest", str(project_file), "--model", str(bad), "--kind", "eppc"])
    assert code == 2
    assert "broken.gguf is not a GGUF model file" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["suggest", "evaluate-model"])
@pytest.mark.parametrize(
    ("option", "value"),
    [("--limit", "0"), ("--max-tokens", "-1"), ("--ctx", "0"), ("--threads", "x")],
)
def test_counting_options_must_be_one_or_more(project_file, capsys, verb, option, value):
    """--limit 0 ran every unit, --ctx 0 a 256-token context: refused before anything opens."""
    before = project_file.read_bytes()
    more = ["--model", "m.gguf", "--kind", "eppc"] if verb == "suggest" else []
    with pytest.raises(SystemExit) as stopped:
        main([verb, str(project_file), *more, option, value])
    assert stopped.value.code == 2
    assert f"argument {option}:" in capsys.readouterr().err
    assert project_file.read_bytes() == before


def test_ctrl_c_stops_and_keeps_what_was_finished(project_file, tiny_model):  # noqa: F811
    with Project.open(project_file) as project:
        service = StudyService(project)
        case_id = service.read_unit(unit_ids(service, "respond")[0]).cases[0].id
        set_id = service.create_unit_set("many", "respond")
        for _ in range(4):
            service.add_unit(set_id, case_id)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "portalreview",
            "suggest",
            str(project_file),
            "--model",
            str(tiny_model),
            "--kind",
            "respond",
            "--units",
            "many",
            "--max-tokens",
            "3000",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "units:" in line or not line:
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    output = "".join(lines) + rest
    assert proc.returncode == 130, output
    assert "Stopped. Run the same command again" in output
    stored, gated, failed = map(int, re.search(SUMMARY, output).groups())
    assert 1 <= stored + gated + failed < 4


def _lose_the_server_at_store(monkeypatch, nth: int):
    """Model runs whose ``nth`` store fails as when a team server goes away; the real store."""
    from portalreview.llm import suggest as sg
    from portalreview.store.errors import StoreError

    real_store, calls = sg.store, []

    def store_then_lose_the_server(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            raise StoreError("The study server did not answer. Nothing was saved.")
        return real_store(*args, **kwargs)

    monkeypatch.setattr(sg, "store", store_then_lose_the_server)
    return real_store


def _three_empathy_units_named_many(project_file) -> None:
    """A unit set "many" of three empathy units (copies of the first one's case and pair)."""
    with Project.open(project_file) as project:
        service = StudyService(project)
        unit = service.read_unit(unit_ids(service, "empathy")[0])
        case_id, (first, second) = unit.cases[0].id, [r.id for r in unit.responses]
        set_id = service.create_unit_set("many", "empathy")
        for _ in range(3):
            service.add_unit(set_id, case_id, response_id=first, response_b_id=second)


def test_a_save_the_study_cannot_take_stops_the_run_and_says_what_was_stored(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
):
    """A team server that goes away part-way: the run once ended with the failed save's
    "Nothing was saved" alone, after it had stored suggestions (found on a real server)."""
    from portalreview.llm import suggest as sg

    _three_empathy_units_named_many(project_file)
    real_store = _lose_the_server_at_store(monkeypatch, 2)
    args = ["suggest", str(project_file), "--model", str(tiny_model), "--kind", "empathy"]
    args += ["--units", "many", "--as-annotator", "tiny"]
    assert main(args) == 130
    err = capsys.readouterr().err
    stored, gated, _ = map(int, re.search(SUMMARY, err).groups())
    assert stored + gated == 1
    assert "Stopped: a save failed: The study server did not answer. Nothing was saved." in err
    assert "What the run stored before it is kept. Run the same command again" in err
    monkeypatch.setattr(sg, "store", real_store)
    assert main(args) in (0, 1)  # (1: the tiny model's answers refused by the gates)
    assert re.search(r", 1 already done", capsys.readouterr().err)


def _lose_the_model_at_suggest(monkeypatch, nth: int, gone: Exception) -> None:
    """Model runs whose ``nth`` suggestion finds the model gone (``gone`` raised)."""
    from portalreview.llm import suggest as sg

    real_suggest, calls = sg.suggest, []

    def suggest_then_lose_the_model(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            raise gone
        return real_suggest(*args, **kwargs)

    monkeypatch.setattr(sg, "suggest", suggest_then_lose_the_model)


def _gone(kind: str) -> tuple[Exception, str]:
    """A model that went away, and the reason a command-line run gives."""
    from portalreview.llm.engines.process import died_message
    from portalreview.llm.errors import ModelProcessDied, ModelServerError

    if kind == "process":
        killed = ModelProcessDied(died_message("tiny.gguf", -signal.SIGKILL), -signal.SIGKILL)
        return killed, "Stopped: the model process was killed (by the system when memory ran out"
    server = "the model server http://127.0.0.1:9 answered 502 Bad Gateway."
    return ModelServerError(server), f"Stopped: {server}\n"


@pytest.mark.parametrize("kind", ["process", "server"])
def test_a_model_that_goes_away_stops_the_run_as_a_drafts_run(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
    kind,
):
    """It ended with exit 2 (bad input), no summary and the app's "Load the model again"."""
    _three_empathy_units_named_many(project_file)
    gone, why = _gone(kind)
    _lose_the_model_at_suggest(monkeypatch, 2, gone)
    args = ["suggest", str(project_file), "--model", str(tiny_model), "--kind", "empathy"]
    assert main([*args, "--units", "many"]) == 130
    err = capsys.readouterr().err
    stored, gated, _ = map(int, re.search(SUMMARY, err).groups())
    assert stored + gated == 1
    assert why in err and "Load the model again" not in err
    assert "What the run stored before it is kept. Run the same command again" in err


def test_evaluate_model_stopped_by_a_model_gone_keeps_what_it_stored(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
):
    gone, why = _gone("process")
    _lose_the_model_at_suggest(monkeypatch, 3, gone)
    args = ["evaluate-model", str(project_file), "--model", str(tiny_model), "--limit", "1"]
    assert main(args) == 130
    err = capsys.readouterr().err
    assert why in err and "Load the model again" not in err
    assert "What the run stored before it is kept. Run the same command again" in err
    with Project.open(project_file, read_only=True) as project, project.read() as s:
        assert s.scalar(select(func.count()).select_from(Suggestion)) == 2


def test_a_drafts_run_says_why_it_stopped_in_a_sentence(capsys):
    from portalreview.llm.cli import _summary
    from portalreview.llm.suggest import BatchReport

    report = BatchReport(2, stored=[1], stopped="the model server answered 502 Bad Gateway")
    assert _summary(report) == 130
    assert (
        "Stopped: the model server answered 502 Bad Gateway. Run the same command again"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "options, why",
    [
        (["--kind", "eppc", "--units", "EPPC codng"], "there is no unit set 'EPPC codng'"),
        (["--kind", "eppc", "--units", "rank set"], "holds rank units, not eppc"),
        (["--kind", "drafts"], "drafts need --units SET"),
        (
            ["--kind", "drafts", "--units", "rank set", "--template", "draft_thematc"],
            "'draft_thematc' is not a drafting template",
        ),
    ],
)
def test_bad_units_or_template_are_refused_before_the_model_loads(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    options,
    why,
):
    """They were refused only after the model was loaded and hashed and the 16 default prompt
    templates were written into the study (its audit log grew by 16)."""
    with Project.open(project_file, read_only=True) as project, project.read() as s:
        logged = s.scalar(select(func.count()).select_from(AuditEntry))
    args = ["suggest", str(project_file), "--model", str(tiny_model), *options]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert why in err and "Loading" not in err and "Stored the default" not in err
    with Project.open(project_file, read_only=True) as project, project.read() as s:
        assert s.scalar(select(func.count()).select_from(AuditEntry)) == logged


def test_a_persons_account_is_refused_before_the_model_loads(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
):
    """Bad input, not a save cut short: exit 2 and no "run the same command again"."""
    args = ["suggest", str(project_file), "--model", str(tiny_model), "--kind", "empathy"]
    assert main([*args, "--as-annotator", "ava"]) == 2
    err = capsys.readouterr().err
    assert "'ava' is a person's account; choose another name for the model" in err
    assert "Loading" not in err and "Run the same command again" not in err


def test_evaluate_model_stopped_by_a_failed_save_keeps_what_it_stored(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
):
    """The same for the model run of evaluate-model: it said only the failed save's words."""

    _lose_the_server_at_store(monkeypatch, 3)
    args = ["evaluate-model", str(project_file), "--model", str(tiny_model), "--limit", "1"]
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "Stopped: a save failed: The study server did not answer." in err
    assert "What the run stored before it is kept. Run the same command again" in err
    with Project.open(project_file, read_only=True) as project, project.read() as s:
        assert s.scalar(select(func.count()).select_from(Suggestion)) == 2


SUMMARY = (
    r"(\d+) stored, (\d+) refused by the quality gates.*?, \d+ already done, (\d+) did not fit"
)


def test_the_prompts_say_where_the_model_ran_and_when_that_was_not_recorded() -> None:
    from portalreview.llm.cli import describe_prompts
    from portalreview.store.templates import SuggestionPrompts

    def described(runtime: dict) -> str:
        found = SuggestionPrompts(7, "m.gguf", "urgency_pair@default", "", {}, ["P"], runtime)
        return describe_prompts(found).splitlines()[1]

    gpu = {"device": "GPU (CUDA)", "gpu_layers": 30, "n_layers": 30, "n_threads": 8}
    assert described({**gpu, "build": "llama-cpp-python 0.3.36"}) == (
        "Ran on: GPU (CUDA), 30 of 30 layers; llama-cpp-python 0.3.36"
    )
    cpu = {"device": "CPU", "gpu_layers": 0, "n_layers": 30, "n_threads": 1, "build": "b1"}
    assert described(cpu) == "Ran on: CPU, 1 thread; b1"
    assert described({}) == "Ran on: not recorded (a suggestion stored before this was recorded)"


def test_the_model_file_is_said_to_be_hashed_only_when_it_is(
    project_file,
    tiny_model,  # noqa: F811
    capsys,
    monkeypatch,
):
    """The second run took the hash remembered in the cache folder, yet said "Hashing the
    model file (once per file)..." as the first did."""
    from portalreview.llm import model_file

    args = ["suggest", str(project_file), "--model", str(tiny_model), "--kind", "empathy"]
    args += ["--as-annotator", "tiny"]
    monkeypatch.setattr(model_file, "_hash_memo", {})  # a run of its own: nothing hashed yet
    assert main(args) == 0
    assert "Hashing the model file" in capsys.readouterr().err
    monkeypatch.setattr(model_file, "_hash_memo", {})  # the next run: the cache file only
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Hashing the model file" not in err and "SHA-256 " in err
