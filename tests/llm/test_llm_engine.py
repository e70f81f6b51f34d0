"""The engine on a real (tiny, random) GGUF model through llama.cpp: loading, streaming,
cancel, close, one caller at a time, grammar-constrained sampling, next-token probabilities
and prefix reuse. Random weights give random text: the assertions are about structure, token
ids and probabilities."""

from __future__ import annotations

import json
import re
import threading

import numpy as np
import pytest
from llm_testkit import engine, tiny_model, tiny_model_file  # noqa: F401 - fixtures

from portalreview.llm import grammars
from portalreview.llm.engine import Engine, GenerationParams
from portalreview.llm.errors import (
    Cancelled,
    EngineBusyError,
    EngineClosedError,
    GrammarError,
    PromptTooLongError,
)
from portalreview.llm.testing_model import TINY

PROMPT = ["You are a physician.\n", "Patient: my chest hurts since this morning.\nReply:"]


def test_load_reports_device_layers_and_context(engine):  # noqa: F811
    info = engine.info
    assert info.device == "CPU" and info.gpu_layers == 0
    assert info.n_layers == TINY.n_layer
    assert info.n_ctx == min(TINY.n_ctx_train, 8192)
    assert info.n_threads >= 1
    assert "on the CPU" in info.describe()
    assert len(engine.sha256) == 64


def test_asking_for_the_gpu_on_a_build_without_offload_loads_on_the_cpu_and_says_so(
    tmp_path_factory, monkeypatch
):
    import portalreview.llm.engine as engine_module

    monkeypatch.setattr(engine_module, "gpu_offload_supported", lambda: False)
    with Engine.load(tiny_model_file(tmp_path_factory), gpu=True, hash_cache=False) as eng:
        assert eng.info.device == "CPU" and eng.info.gpu_layers == 0
        assert "on the CPU" in eng.info.describe()


def test_streaming_yields_the_text_piece_by_piece(engine):  # noqa: F811
    gen = engine.stream(PROMPT, GenerationParams(max_tokens=12))
    pieces = list(gen)
    assert gen.finish_reason == "length"
    assert len(gen.token_ids) == 12
    assert "".join(pieces) == gen.text
    assert 0 < len(pieces) <= 12
    assert gen.prompt_tokens == len(engine.prompt_tokens(PROMPT))


def test_greedy_generation_is_reproducible_and_matches_a_bare_loop(engine):  # noqa: F811
    first = engine.complete(PROMPT, GenerationParams(max_tokens=10)).token_ids
    second = engine.complete(PROMPT, GenerationParams(max_tokens=10)).token_ids
    assert first == second
    from llama_cpp import Llama

    bare = Llama(str(engine.info.path), n_ctx=512, verbose=False, n_threads=1)
    try:
        tokens = engine.prompt_tokens(PROMPT)
        out = []
        for token in bare.generate(tokens, temp=0.0, repeat_penalty=1.0):
            out.append(token)
            if len(out) == 10:
                break
    finally:
        bare.close()
    assert out == first


def test_seeded_sampling_is_reproducible(engine):  # noqa: F811
    params = GenerationParams(max_tokens=15, temperature=1.5, seed=7, min_p=0.0, top_p=1.0)
    a = engine.complete(PROMPT, params).token_ids
    b = engine.complete(PROMPT, params).token_ids
    c = engine.complete(PROMPT, GenerationParams(**{**params.as_dict(), "seed": 8})).token_ids
    assert a == b
    assert a != c


def test_cancel_from_another_thread_stops_within_one_token(engine):  # noqa: F811
    cancel = threading.Event()
    gen = engine.stream(PROMPT, GenerationParams(max_tokens=300), cancel=cancel)
    for seen, _ in enumerate(gen, start=1):
        if seen == 5:
            threading.Thread(target=cancel.set).start()
            cancel.wait()
    assert gen.finish_reason == "cancelled"
    assert len(gen.token_ids) <= 6


def test_a_second_caller_is_refused_while_the_model_works(engine):  # noqa: F811
    gen = iter(engine.stream(PROMPT, GenerationParams(max_tokens=50)))
    next(gen)  # the generation now holds the model
    with pytest.raises(EngineBusyError, match="busy"):
        engine.next_token_logprobs(PROMPT)
    gen.close()
    engine.next_token_logprobs(PROMPT)  # free again


def test_close_during_generation_stops_it_and_frees_the_model(tmp_path_factory):
    eng = Engine.load(tiny_model_file(tmp_path_factory), gpu=False, hash_cache=False)
    gen = eng.stream(PROMPT, GenerationParams(max_tokens=5000))
    started = threading.Event()
    result = {}

    def work():
        for i, _ in enumerate(gen):
            if i == 3:
                started.set()
        result["reason"] = gen.finish_reason

    worker = threading.Thread(target=work)
    worker.start()
    assert started.wait(30)
    eng.close()  # from this (the "GUI") thread
    worker.join(30)
    assert result["reason"] == "closed"
    assert eng.closed
    with pytest.raises(EngineClosedError):
        eng.stream(PROMPT)
    eng.close()  # twice is fine


def test_grammar_constrains_the_answer(engine):  # noqa: F811
    grammar = 'root ::= " "? "{\\"n\\":" [0-9]{1,3} ",\\"ok\\":" ("true" | "false") "}"\n'
    for seed in range(3):
        params = GenerationParams(max_tokens=60, temperature=1.0, seed=seed)
        gen = engine.complete(["Give JSON.\n", "Answer:"], params, grammar=grammar)
        assert gen.finish_reason == "stop"
        assert re.fullmatch(r' ?\{"n":[0-9]{1,3},"ok":(true|false)\}', gen.text), gen.text


def test_the_rank_grammar_gives_every_incorrect_reply_a_reason(engine):  # noqa: F811
    """001 Sec. 5: incorrect means meeting at least one criterion. The grammar let a model
    mark a reply incorrect with no reason, a ranking the store keeps as a draft only; now an
    incorrect reply has one or more reasons, a correct one none (a random-weights model
    samples both verdicts over these seeds)."""
    grammar = grammars.rank_judge(["A", "B", "C"], ["C1", "C2", "C3"])
    verdicts = []
    for seed in range(8):
        params = GenerationParams(max_tokens=400, temperature=1.0, seed=seed)
        gen = engine.complete(["Rank the replies.\n", "Answer:"], params, grammar=grammar)
        assert gen.finish_reason == "stop", gen.text
        for entry in json.loads(gen.text)["ranking"]:
            verdicts.append(entry["correct"])
            assert bool(entry["criteria"]) != entry["correct"], gen.text
    assert set(verdicts) == {True, False}
    assert "C1" not in grammars.rank_judge(["A", "B"], [])  # no criteria: no reason at all


def test_an_invalid_grammar_never_reaches_llama_cpp(engine, monkeypatch):  # noqa: F811
    import llama_cpp

    calls = []
    real = llama_cpp.llama_sampler_init_grammar
    monkeypatch.setattr(
        llama_cpp, "llama_sampler_init_grammar", lambda *a: calls.append(a) or real(*a)
    )
    for bad in ('root ::= "a" missing', 'root ::= ("a"', 'root ::= "a', "x ::= [a-z]"):
        with pytest.raises(GrammarError, match="invalid grammar"):
            engine.stream(PROMPT, grammar=bad)
    assert calls == []
    engine.check_grammar('root ::= "ok"')
    assert len(calls) == 1  # a valid one is checked by llama.cpp too


def test_a_prompt_longer_than_the_context_is_refused(engine):  # noqa: F811
    with pytest.raises(PromptTooLongError, match="context holds"):
        engine.prompt_tokens(["word " * 20_000])
    assert engine.prompt_tokens([""]) == [1]  # just the BOS token: never an empty prompt


def test_next_token_logprobs_are_a_distribution(engine):  # noqa: F811
    logprobs, evaluated = engine.next_token_logprobs(PROMPT, reuse_prefix=False)
    assert logprobs.shape == (TINY.n_vocab,)
    assert np.isclose(np.exp(logprobs).sum(), 1.0)
    assert evaluated == len(engine.prompt_tokens(PROMPT))


def test_yes_no_probabilities(engine):  # noqa: F811
    result = engine.choice_probabilities([*PROMPT, "\nAnswer:"], (" YES", " NO"))
    assert set(result.probs) == {" YES", " NO"}
    assert all(0.0 <= p <= 1.0 for p in result.probs.values())
    assert np.isclose(sum(result.probs.values()), 1.0)
    assert 0.0 < result.mass <= 1.0
    assert result.token_ids[" YES"] != result.token_ids[" NO"]
    with pytest.raises(Exception, match="start with the same token"):
        engine.choice_probabilities(PROMPT, (" YES", " YES please"))


def test_prefix_reuse_gives_the_numbers_of_a_fresh_evaluation(engine):  # noqa: F811
    shared = ["Instructions shared by every pair.\n", "Patient A: chest pain since noon.\n"]
    tails = [f"Patient B: question number {i} about a refill.\nAnswer:" for i in range(4)]
    engine.choice_probabilities([*shared, "warm the cache\nAnswer:"], (" YES", " NO"))
    for tail in tails:
        reused = engine.choice_probabilities([*shared, tail], (" YES", " NO"))
        fresh = engine.choice_probabilities([*shared, tail], (" YES", " NO"), reuse_prefix=False)
        assert reused.evaluated_tokens < fresh.evaluated_tokens == fresh.prompt_tokens
        assert reused.evaluated_tokens <= len(engine.tokenize(tail))  # the rest is cached
        assert reused.probs[" YES"] == pytest.approx(fresh.probs[" YES"], abs=1e-5)
        assert reused.mass == pytest.approx(fresh.mass, rel=1e-4)


def test_cancel_before_reading_probabilities(engine):  # noqa: F811
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        engine.next_token_logprobs(PROMPT, reuse_prefix=False, cancel=cancel)
