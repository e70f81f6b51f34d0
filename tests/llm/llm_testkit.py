"""Shared helpers of the local-model tests: one tiny random GGUF model per test session
(written here with the gguf package, nothing downloaded) and small grammar limits so that
random weights finish their answers quickly."""

from __future__ import annotations

from pathlib import Path

import pytest

from portalreview.llm.engine import Engine, GenerationParams
from portalreview.llm.grammars import GrammarLimits
from portalreview.llm.testing_model import TINY, prompt_corpus, write_model

SMALL_LIMITS = GrammarLimits(box_chars=6, fact_chars=10, max_facts=2, eppc_results=2)
PARAMS = GenerationParams(max_tokens=400)
_MODELS: dict[Path, Path] = {}


def tiny_model_file(factory: pytest.TempPathFactory) -> Path:
    """The session's tiny model (written once)."""
    base = factory.getbasetemp()
    if base not in _MODELS:
        _MODELS[base] = write_model(base / "tiny.gguf", TINY, corpus=prompt_corpus())
    return _MODELS[base]


@pytest.fixture
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model_file(tmp_path_factory)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    eng = Engine.load(tiny_model_file(tmp_path_factory), gpu=False, hash_cache=False)
    yield eng
    eng.close()


def drafts_end_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny model's random weights never write its end token, so each of its drafts is cut
    off at the token limit, which a drafting run refuses to store (an unfinished reply). Tests
    about what a run stores, streams and resumes let such a draft count as finished."""
    from portalreview.llm import suggest as sg

    generate = sg._generate_draft

    def ended(*args, **kwargs):
        gen = generate(*args, **kwargs)
        if gen.finish_reason == "length":
            gen.finish_reason = "stop"
        return gen

    monkeypatch.setattr(sg, "_generate_draft", ended)


def urgency_answers_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny model's random weights put almost no probability on YES or NO, so the quality
    gates refuse its urgency answers (llm/gates.py, unusable_urgency). Tests of what happens to
    an offered urgency suggestion let the model ask as usual, then read a clear answer: A
    first, YES then NO, most of the probability on YES/NO."""
    from dataclasses import replace

    from portalreview.llm import suggest as sg

    ask = sg.pair_probability

    def clear(*args, **kwargs):
        return replace(ask(*args, **kwargs), p_yes_ab=0.9, p_yes_ba=0.1, mass=0.9)

    monkeypatch.setattr(sg, "pair_probability", clear)
