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
