"""The model in its own process (``llm/engines/process.py``) against the in-process engine on
the tiny random model: the same greedy text, token ids, pieces and probabilities; cancel within
one token; close; one caller at a time; a child that is killed or crashes gives a
ModelProcessDied that says so, never a hang; and the child imports llama_cpp before numpy and
never scipy, SQLAlchemy, pandas or Qt, even when the parent's main script imported them."""

from __future__ import annotations

import hashlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from llm_testkit import tiny_model, tiny_model_file  # noqa: F401 - fixtures
from prompt_markers import Marked

from portalreview.llm import urgency
from portalreview.llm.engine import Engine, GenerationParams
from portalreview.llm.engines import load_engine
from portalreview.llm.engines import process as process_module
from portalreview.llm.engines.process import ProcessEngine, describe_exit, died_message
from portalreview.llm.errors import (
    Cancelled,
    EngineBusyError,
    EngineClosedError,
    GrammarError,
    ModelFileError,
    ModelProcessDied,
    PromptTooLongError,
)
from portalreview.llm.templates import default_template

PROMPT = ["You are a physician.\n", "Patient: my chest hurts since this morning.\nReply:"]
QUESTION = [*PROMPT, "\nIs this urgent? Answer:"]
FORBIDDEN = ("scipy", "sqlalchemy", "pandas", "PySide6", "shiboken6", "sklearn")
WAIT_S = 60
CHILD = "portalreview.llm.engines.child"


# One thread each: the same arithmetic in both engines, and quick on a shared, busy machine.
OPTIONS = {"gpu": False, "hash_cache": False, "n_threads": 1}


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    eng = ProcessEngine.load(tiny_model_file(tmp_path_factory), **OPTIONS)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """The in-process engine on the same file, with the same options."""
    eng = Engine.load(tiny_model_file(tmp_path_factory), **OPTIONS)
    yield eng
    eng.close()


@pytest.fixture
def own(tmp_path_factory):
    """A process engine of the test's own (for tests that end it)."""
    eng = ProcessEngine.load(tiny_model_file(tmp_path_factory), **OPTIONS)
    yield eng
    eng.close()


def finishes(fn, seconds: float = WAIT_S):
    """Run ``fn`` on a thread; return what it returned or raised, failing if it hangs."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call still waits after {seconds} s"
    return out


# --- the same outputs -----------------------------------------------------------------------


def test_info_header_and_hash_are_the_in_process_ones(isolated, engine):
    ours, theirs = isolated.info, engine.info
    for name in ("path", "model_name", "device", "gpu_layers", "n_layers", "n_threads", "n_ctx"):
        assert getattr(ours, name) == getattr(theirs, name)
    assert isolated.info.describe() == engine.info.describe()
    assert isolated.header == engine.header
    assert isolated.sha256 == hashlib.sha256(Path(ours.path).read_bytes()).hexdigest()
    assert isolated.pid != os.getpid()


def test_greedy_text_pieces_and_token_ids_equal_in_process(isolated, engine):
    params = GenerationParams(max_tokens=60)
    mine = isolated.stream(PROMPT, params)
    pieces = list(mine)
    theirs = engine.stream(PROMPT, params)
    assert pieces == list(theirs)
    assert mine.token_ids == theirs.token_ids and len(mine.token_ids) == 60
    assert mine.text == theirs.text == "".join(pieces)
    assert mine.finish_reason == theirs.finish_reason == "length"
    assert mine.prompt_tokens == theirs.prompt_tokens == len(engine.prompt_tokens(PROMPT))
    assert mine.seconds > 0


def test_a_generation_cut_off_inside_a_character_ends_as_in_process(isolated, engine):
    """The token limit falls inside a character: those tokens give no piece of their own.
    The child still hands them out, so the generation ends "length" with every token, as in
    process (it used to end "cancelled", short of two tokens, and a suggestion was lost)."""
    from portalreview.domain.catalogs import DEFAULT_CATALOGS
    from portalreview.llm import grammars
    from portalreview.llm.templates import themes_text

    values = {
        "themes": themes_text(DEFAULT_CATALOGS, with_ids=True, include_other=True),
        "chart": "",
        "message": "My chest hurts when I climb the stairs since this morning.",
    }
    prompt = default_template("respond_boxes").render(values)
    grammar = grammars.respond_boxes(DEFAULT_CATALOGS, grammars.GrammarLimits())
    params = GenerationParams(max_tokens=16)  # (found: tokens 15-16 are one character's)
    ours = engine.complete(prompt, params, grammar=grammar)
    generated = b"".join(engine.piece(t) for t in ours.token_ids)
    assert ours.finish_reason == "length" and "\ufffd" not in ours.text
    assert generated.startswith(ours.text.encode()) and len(generated) > len(ours.text.encode())
    theirs = isolated.complete(prompt, params, grammar=grammar)
    assert (theirs.finish_reason, theirs.token_ids, theirs.text) == (
        ours.finish_reason,
        ours.token_ids,
        ours.text,
    )


def test_seeded_sampling_and_grammars_equal_in_process(isolated, engine):
    sampled = GenerationParams(max_tokens=20, temperature=1.2, seed=5, min_p=0.0, top_p=1.0)
    a = isolated.complete(PROMPT, sampled)
    b = engine.complete(PROMPT, sampled)
    assert a.token_ids == b.token_ids and a.text == b.text
    grammar = 'root ::= "YES" | "NO" | "MAYBE"'
    a = isolated.complete(QUESTION, GenerationParams(max_tokens=10), grammar=grammar)
    b = engine.complete(QUESTION, GenerationParams(max_tokens=10), grammar=grammar)
    assert a.text == b.text and a.text in ("YES", "NO", "MAYBE")
    assert a.finish_reason == b.finish_reason == "stop"
    with pytest.raises(GrammarError):
        isolated.stream(PROMPT, grammar='root ::= "open')
    isolated.check_grammar(grammar)  # checked before: no round trip needed


def test_tokens_and_pieces_equal_in_process(isolated, engine):
    text = "Patient: my chest hurts (since 7am) — é ü"
    assert isolated.tokenize(text) == engine.tokenize(text)
    assert isolated.tokenize(text, bos=True) == engine.tokenize(text, bos=True)
    assert isolated.prompt_tokens(PROMPT) == engine.prompt_tokens(PROMPT)
    tokens = engine.tokenize(text)
    assert [isolated.piece(t) for t in tokens] == [engine.piece(t) for t in tokens]
    assert b"".join(isolated.piece(t) for t in tokens).decode().lstrip() == text
    with pytest.raises(PromptTooLongError):
        isolated.prompt_tokens("word " * 9000)


def test_probabilities_equal_in_process_within_1e5(isolated, engine):
    mine, evaluated = isolated.next_token_logprobs(PROMPT, reuse_prefix=False)
    theirs, evaluated_too = engine.next_token_logprobs(PROMPT, reuse_prefix=False)
    assert isinstance(mine, np.ndarray) and mine.shape == theirs.shape
    assert np.max(np.abs(mine - theirs)) < 1e-5 and evaluated == evaluated_too
    for tail in ("\nAnswer:", "\nIs it urgent? Answer:", "\nShould they call 911? Answer:"):
        a = isolated.choice_probabilities([*PROMPT, tail], (" YES", " NO"), reuse_prefix=False)
        b = engine.choice_probabilities([*PROMPT, tail], (" YES", " NO"), reuse_prefix=False)
        assert a.token_ids == b.token_ids and a.prompt_tokens == b.prompt_tokens
        assert abs(a.probs[" YES"] - b.probs[" YES"]) < 1e-5
        assert abs(a.mass - b.mass) < 1e-5 * max(b.mass, 1e-30) + 1e-12
    with pytest.raises(Exception, match="start with the same token"):
        isolated.choice_probabilities(PROMPT, (" YES", " YES please"))
    assert isolated.cached_tokens > 0


def test_inbox_scoring_equals_in_process(isolated, engine):
    patients = [
        urgency.Patient(i, text, "")
        for i, text in enumerate(
            ["Crushing chest pain.", "Refill my inhaler.", "Fever of 104 and sleepy."]
        )
    ]
    template = default_template("urgency_pair")
    a = urgency.score_inbox(isolated, template, patients)
    b = urgency.score_inbox(engine, template, patients)
    assert a.order == b.order
    assert a.evaluated_tokens == b.evaluated_tokens and a.prompt_tokens == b.prompt_tokens
    for x, y in zip(a.pairs, b.pairs, strict=True):
        assert abs(x.p_a_first - y.p_a_first) < 1e-5


def test_segments_reach_the_child_as_their_own_type(isolated, engine):
    marked = [Marked(PROMPT[0]), PROMPT[1]]
    assert isolated.prompt_tokens(marked) == engine.prompt_tokens(PROMPT)
    # pickle rebuilt the subclass in the child, importing the module that defines it
    assert Marked.__module__ in isolated.child_modules()["now"]


# --- cancel, busy, close ----------------------------------------------------------------------


def test_cancel_from_the_consumer_stops_at_the_pieces_handed_out(isolated):
    cancel = threading.Event()
    gen = isolated.stream(PROMPT, GenerationParams(max_tokens=300), cancel=cancel)
    for seen, _ in enumerate(gen, start=1):
        if seen == 5:
            threading.Thread(target=cancel.set).start()
            cancel.wait()
            handed_out = len(gen.token_ids)
    assert gen.finish_reason == "cancelled"
    assert len(gen.token_ids) == handed_out <= 5  # not one token more
    isolated.complete(PROMPT, GenerationParams(max_tokens=3))  # free again


def test_cancel_set_by_another_thread_while_a_completion_runs(isolated):
    cancel = threading.Event()
    gen = isolated.stream(PROMPT, GenerationParams(max_tokens=100000), cancel=cancel)

    def cancel_once_started():
        while not gen.token_ids:
            time.sleep(0.001)
        cancel.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    out = finishes(gen.wait, seconds=20)
    assert out.get("value") is gen, out
    assert gen.finish_reason == "cancelled" and 0 < len(gen.token_ids) < 100000
    assert gen.text and gen.evaluated_prompt_tokens >= 0
    pre_set = threading.Event()
    pre_set.set()
    with pytest.raises(Cancelled):
        isolated.next_token_logprobs(PROMPT, reuse_prefix=False, cancel=pre_set)


def test_a_second_caller_is_refused_while_the_model_works(isolated):
    gen = iter(isolated.stream(PROMPT, GenerationParams(max_tokens=50)))
    next(gen)  # the generation now holds the model
    with pytest.raises(EngineBusyError, match="busy"):
        isolated.next_token_logprobs(PROMPT)
    gen.close()  # abandoning the stream stops the child's generation
    assert isolated.complete(PROMPT, GenerationParams(max_tokens=4)).finish_reason == "length"


def test_close_during_generation_stops_it_and_ends_the_process(own):
    gen = own.stream(PROMPT, GenerationParams(max_tokens=100000))
    started, result = threading.Event(), {}

    def work():
        for i, _ in enumerate(gen):
            if i == 3:
                started.set()
        result["reason"] = gen.finish_reason

    worker = threading.Thread(target=work)
    worker.start()
    assert started.wait(WAIT_S)
    own.close()  # from this (the "GUI") thread
    worker.join(WAIT_S)
    assert result["reason"] == "closed"
    assert own.closed and own.died is None
    assert not own._process.is_alive() and own._process.exitcode == 0
    with pytest.raises(EngineClosedError):
        own.stream(PROMPT)
    own.close()  # twice is fine


# --- a child that dies ------------------------------------------------------------------------


def test_killed_during_a_generation_raises_model_process_died(own):
    reported = []
    own.on_died(reported.append)
    gen = own.stream(PROMPT, GenerationParams(max_tokens=100000))

    def consume():
        for i, _ in enumerate(gen):
            if i == 0:  # at the first piece: the process has thousands of tokens still to go
                os.kill(own.pid, signal.SIGKILL)

    out = finishes(consume)
    error = out.get("error")
    assert isinstance(error, ModelProcessDied), out
    assert "SIGKILL" in str(error) and "your answers are saved" in str(error)
    assert "Load the model again" in str(error) and error.exitcode == -signal.SIGKILL
    # every later call says the same at once; the engine counts as closed
    for call in (
        lambda: own.tokenize("hello"),
        lambda: own.choice_probabilities(QUESTION, (" YES", " NO")),
        lambda: own.stream(PROMPT),
    ):
        with pytest.raises(ModelProcessDied, match="SIGKILL"):
            call()
    assert own.closed and own.died is not None
    deadline = time.monotonic() + WAIT_S
    while not reported and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [str(e) for e in reported] == [str(error)]  # the watcher told once
    own.close()  # fine on a dead process


def test_a_death_seen_first_by_a_call_is_still_told_by_a_late_watcher(
    tmp_path_factory, monkeypatch
):
    """The call that finds the pipe broken cleans up before the watcher wakes: the watcher
    must still tell (a race CI once lost, when the cleanup counted the death as our own end)."""
    watch = process_module._watch

    def late_watch(ref, sentinel):
        multiprocessing.connection.wait([sentinel])
        time.sleep(0.5)  # the call's error and clean-up are long done by now
        watch(ref, sentinel)

    monkeypatch.setattr(process_module, "_watch", late_watch)
    eng = ProcessEngine.load(tiny_model_file(tmp_path_factory), **OPTIONS)
    reported = threading.Event()
    eng.on_died(lambda _error: reported.set())
    gen = eng.stream(PROMPT, GenerationParams(max_tokens=100000))

    def consume():
        for _ in gen:
            os.kill(eng.pid, signal.SIGKILL)

    assert isinstance(finishes(consume).get("error"), ModelProcessDied)
    assert reported.wait(WAIT_S)
    eng.close()


def test_a_crash_while_idle_is_reported_and_named(own):
    reported = threading.Event()
    own.on_died(lambda _error: reported.set())
    os.kill(own.pid, signal.SIGSEGV)
    assert reported.wait(WAIT_S)
    out = finishes(lambda: own.next_token_logprobs(PROMPT))
    assert isinstance(out.get("error"), ModelProcessDied)
    assert "crashed" in str(out["error"]) and "SIGSEGV" in str(out["error"])
    late = []
    own.on_died(late.append)  # a callback set after the death hears of it at once
    assert len(late) == 1


def test_killed_while_a_call_waits_raises_instead_of_hanging(own):
    os.kill(own.pid, signal.SIGSTOP)  # the child stops answering...
    calling = threading.Event()

    def ask():
        calling.set()
        return own.choice_probabilities(QUESTION, (" YES", " NO"))

    def kill_later():
        calling.wait()
        time.sleep(0.3)
        os.kill(own.pid, signal.SIGKILL)  # ...and is then ended while the call waits

    threading.Thread(target=kill_later).start()
    out = finishes(ask)
    assert isinstance(out.get("error"), ModelProcessDied) and "SIGKILL" in str(out["error"])


def test_a_call_interrupted_while_waiting_leaves_no_pipe_out_of_step(own):
    class Interrupting:
        """A cancel event whose second look raises (as Ctrl+C would while a call waits)."""

        looks = 0

        def is_set(self) -> bool:
            self.looks += 1
            if self.looks > 1:
                raise KeyboardInterrupt
            return False

    gen = own.stream(PROMPT, GenerationParams(max_tokens=100000), cancel=Interrupting())
    with pytest.raises(KeyboardInterrupt):
        gen.wait()
    # the answers still on their way can never be read as another call's: the process is gone
    assert own.closed and not own._process.is_alive()
    with pytest.raises(EngineClosedError):
        own.tokenize("hello")


def test_exit_descriptions():
    assert describe_exit(-signal.SIGKILL) == (
        "was killed (by the system when memory ran out, or by another program) (signal SIGKILL)"
    )
    assert describe_exit(-signal.SIGABRT).startswith("aborted")
    assert describe_exit(-signal.SIGSEGV).startswith("crashed")
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "ended (its exit status could not be read)"
    message = died_message("m.gguf", -signal.SIGSEGV, loading=True)
    assert message.startswith("The model process stopped while loading it: it crashed")
    assert "(m.gguf)" in message and "your answers are saved" in message


# --- loading -------------------------------------------------------------------------------------


def test_a_bad_file_is_refused_before_any_process_starts(tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not GGUF at all" * 10)
    before = set(multiprocessing.active_children())
    with pytest.raises(ModelFileError):
        ProcessEngine.load(bad, gpu=False, hash_cache=False)
    with pytest.raises(TypeError):
        ProcessEngine.load(bad, no_such_option=1)
    assert set(multiprocessing.active_children()) == before


def test_cancel_ends_a_load_at_once(tiny_model):  # noqa: F811
    cancel = threading.Event()
    cancel.set()
    before = set(multiprocessing.active_children())
    with pytest.raises(Cancelled):
        ProcessEngine.load(tiny_model, gpu=False, hash_cache=False, cancel=cancel)
    assert set(multiprocessing.active_children()) == before


def test_load_engine_chooses_where_the_model_runs(tiny_model):  # noqa: F811
    with load_engine(tiny_model, gpu=False, hash_cache=False) as isolated:
        assert isinstance(isolated, ProcessEngine) and not isolated.closed
    assert isolated.closed
    with load_engine(tiny_model, isolated=False, gpu=False, hash_cache=False) as local:
        assert isinstance(local, Engine)


# --- what the child imports -----------------------------------------------------------------------


def _top(name: str) -> str:
    return name.split(".")[0]


def check_child_modules(modules: dict[str, tuple[str, ...]]) -> None:
    before, now = modules["before"], modules["now"]
    heavy = {"numpy", "llama_cpp", *FORBIDDEN}
    assert not [m for m in before if _top(m) in heavy], "imported before llama_cpp"
    light = {"portalreview", "portalreview.llm", "portalreview.llm.engines", CHILD}
    assert not [m for m in before if _top(m) == "portalreview" and m not in light]
    first_numpy = min(i for i, m in enumerate(now) if _top(m) == "numpy")
    # sys.modules keeps the order in which imports finished: llama.cpp's library binding
    # (which loads the shared library) finished before numpy began
    assert now.index("llama_cpp.llama_cpp") < first_numpy
    assert not [m for m in now if _top(m) in FORBIDDEN]
    assert not [m for m in now if m.startswith(("portalreview.store", "portalreview.ui"))]


def test_the_child_imports_llama_cpp_first_and_nothing_heavy(isolated):
    isolated.complete(PROMPT, GenerationParams(max_tokens=4))
    isolated.choice_probabilities(QUESTION, (" YES", " NO"))
    check_child_modules(isolated.child_modules())


def test_a_main_script_that_imports_everything_is_not_run_in_the_child(tiny_model):  # noqa: F811
    """spawn would run the parent's main script in the child first; the engine hides it."""
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy, scipy.stats, sqlalchemy, pandas
        import portalreview.store.service
        from portalreview.llm.engines.process import ProcessEngine

        if __name__ == "__main__":
            with ProcessEngine.load({str(tiny_model)!r}, gpu=False, hash_cache=False) as e:
                print(json.dumps(e.child_modules()))
        """
    )
    path = Path(tiny_model).parent / "main_script_with_imports.py"
    path.write_text(script, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    import json

    check_child_modules({k: tuple(v) for k, v in json.loads(done.stdout).items()})


@pytest.mark.real_model
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_model_process_ends_with_its_parent_even_mid_call(real_model_path):
    """A parent ended from outside (kill -9; SIGTERM from a service manager or timeout(1)
    runs no clean-up either) while its model reads a long prompt, a call that sends nothing
    back until done (about 10 s to 80 s on two cores): the child used to go on alone, at full
    speed, until the call ended and it found nobody to answer."""
    script = textwrap.dedent(
        f"""
        import sys
        from portalreview.llm.engines.process import ProcessEngine

        if __name__ == "__main__":
            engine = ProcessEngine.load({str(real_model_path)!r}, gpu=False, hash_cache=False)
            print(engine.pid, flush=True)
            engine.next_token_logprobs("A patient wrote about chest pain. " * 900)
        """
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parent_killed_mid_call.py"
        path.write_text(script, encoding="utf-8")
        parent = subprocess.Popen(
            [sys.executable, str(path)], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            child_pid = int(parent.stdout.readline())
            time.sleep(1.0)  # the long call is under way
        finally:
            parent.kill()
            parent.wait(30)
    deadline = time.monotonic() + 5
    while _running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = not _running(child_pid)
    if not gone:
        os.kill(child_pid, signal.SIGKILL)
    assert gone, "the model process went on after its parent was killed"


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.real_model
def test_the_real_model_gives_the_in_process_text_and_probabilities(real_model_path):
    prompt = [
        "<|im_start|>user\nA patient writes: 'I have crushing chest pain.' "
        "Is this urgent? Answer YES or NO.<|im_end|>\n",
        "<|im_start|>assistant\nAnswer:",
    ]
    params = GenerationParams(max_tokens=24)
    with (
        ProcessEngine.load(real_model_path, **OPTIONS) as isolated,
        Engine.load(real_model_path, **OPTIONS) as local,
    ):
        a, b = isolated.complete(prompt, params), local.complete(prompt, params)
        assert a.token_ids == b.token_ids and a.text == b.text
        x = isolated.choice_probabilities(prompt, (" YES", " NO"), reuse_prefix=False)
        y = local.choice_probabilities(prompt, (" YES", " NO"), reuse_prefix=False)
        assert abs(x.probs[" YES"] - y.probs[" YES"]) < 1e-5
        assert abs(x.mass - y.mass) < 1e-5
