"""Write small or realistic-size GGUF models with random weights, for tests and benchmarks.

Nothing is downloaded: the file is written locally with the ``gguf`` package's writer (a test
dependency, imported lazily). The model has the ``llama`` architecture with the keys llama.cpp
requires, a SentencePiece-style (``llama``) vocabulary that holds all 256 ``<0xXX>`` byte
tokens (so any text tokenizes), single characters, and word pieces whose every prefix is also a
piece (the SPM tokenizer reaches a piece only by merging pieces it already has), and the
standard tensors. Random weights produce random text: test structure and probabilities, never
wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPACE = "\u2581"  # SentencePiece's visible space

# The token types of the GGUF tokenizer arrays (gguf.TokenType): normal, unknown, control, byte.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a llama-architecture model."""

    n_vocab: int = 512
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx_train: int = 2048

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def n_params(self) -> int:
        kv = self.head_dim * self.n_head_kv
        per_layer = (
            2 * self.n_embd * self.n_embd + 2 * self.n_embd * kv + 3 * self.n_embd * self.n_ff
        )
        return self.n_layer * per_layer + 2 * self.n_vocab * self.n_embd


TINY = ModelShape(n_vocab=4096, n_ctx_train=8192)
# Roughly the shape of a 0.5B-parameter chat model (Qwen2-0.5B's layers; a 32k vocabulary).
HALF_B = ModelShape(
    n_vocab=32000, n_embd=896, n_layer=24, n_head=14, n_head_kv=2, n_ff=4864, n_ctx_train=4096
)
# A ~32M-parameter model for quick benchmark runs.
SMALL = ModelShape(
    n_vocab=8000, n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1408, n_ctx_train=4096
)

_BASE_WORDS = (
    "YES NO Yes No yes no Response Equally empathetic MATCH NO MATCH Patient Answer Doctor "
    "the a of to and in is for you your with have has I we it this that on be are not can "
    "pain chest fever cough medication appointment please call thank thanks hello doctor "
    "results"
)


def _words(corpus: Iterable[str]) -> list[str]:
    """Distinct words of the corpus, most frequent first (ties in order of appearance)."""
    counts: dict[str, int] = {}
    for text in corpus:
        for word in re.findall(r"[A-Za-z]+|[0-9]+", text):
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda w: -counts[w])


def build_vocab(
    n_vocab: int, corpus: Iterable[str] = ()
) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of a llama (SPM) vocabulary of exactly ``n_vocab`` entries.

    Order: ``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens, the space piece and printable
    ASCII characters, then word pieces (``▁word`` and all its prefixes) from ``corpus`` and a
    few answer words, then filler pieces if the corpus runs out. Longer pieces score higher so
    the tokenizer prefers them.
    """
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256
    if n_vocab < len(tokens) + 96:
        raise ValueError(f"n_vocab must be at least {len(tokens) + 96}")
    pieces: list[str] = [SPACE] + [chr(c) for c in range(33, 127)]
    seen = set(pieces)

    def add(piece: str) -> None:
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)

    budget = n_vocab - len(tokens)
    for word in _words([_BASE_WORDS, *corpus]):
        for stem in (SPACE + word, word):
            for end in range(2, len(stem) + 1):
                add(stem[:end])
        if len(pieces) >= budget:
            break
    filler = 0
    while len(pieces) < budget:
        add(f"{SPACE}x{filler}")
        filler += 1
    pieces = pieces[:budget]
    tokens += pieces
    types += [_NORMAL] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [float(len(p)) for p in pieces]
    return tokens, scores, types


def prompt_corpus() -> list[str]:
    """The texts our prompts are made of (bundled templates, catalog descriptions): words from
    them make a random model's vocabulary tokenize prompts about as compactly as a real one."""
    from portalreview.domain.catalogs import DEFAULT_CATALOGS
    from portalreview.llm.templates import (
        TEMPLATE_KINDS,
        codebook_text,
        criteria_text,
        default_text,
        themes_text,
    )

    # respond_own_examples is respond_boxes plus one paragraph: left out, so that adding it
    # did not make a different random model (tests read that model's answers' shapes)
    texts = [default_text(kind) for kind in TEMPLATE_KINDS if kind != "respond_own_examples"]
    texts += [
        themes_text(DEFAULT_CATALOGS, with_ids=True, include_other=True),
        codebook_text(DEFAULT_CATALOGS),
        criteria_text(DEFAULT_CATALOGS),
    ]
    return texts


def _weights(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)


def _tensor_plan(shape: ModelShape) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) of every tensor; numpy shapes are ggml's dimensions reversed."""
    kv = shape.head_dim * shape.n_head_kv
    plan = [("token_embd.weight", (shape.n_vocab, shape.n_embd))]
    for i in range(shape.n_layer):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (shape.n_embd,)),
            (p + "attn_q.weight", (shape.n_embd, shape.n_embd)),
            (p + "attn_k.weight", (kv, shape.n_embd)),
            (p + "attn_v.weight", (kv, shape.n_embd)),
            (p + "attn_output.weight", (shape.n_embd, shape.n_embd)),
            (p + "ffn_norm.weight", (shape.n_embd,)),
            (p + "ffn_gate.weight", (shape.n_ff, shape.n_embd)),
            (p + "ffn_up.weight", (shape.n_ff, shape.n_embd)),
            (p + "ffn_down.weight", (shape.n_embd, shape.n_ff)),
        ]
    plan += [
        ("output_norm.weight", (shape.n_embd,)),
        ("output.weight", (shape.n_vocab, shape.n_embd)),
    ]
    return plan


def write_model(
    path: str | Path,
    shape: ModelShape = TINY,
    *,
    dtype: str = "f32",
    seed: int = 0,
    corpus: Sequence[str] = (),
    name: str = "portalreview-random",
    chat_template: str | None = None,
) -> Path:
    """Write a random-weight llama GGUF to ``path`` and return it.

    ``dtype``: ``"f32"``, ``"f16"`` or ``"q8_0"`` for the matrices (norms stay F32, as llama.cpp
    expects). ``corpus``: texts whose words become vocabulary pieces, so that those texts
    tokenize about as compactly as with a trained tokenizer. ``chat_template``: a Jinja2 chat
    template to store as ``tokenizer.chat_template`` (none by default: plain completion).
    """
    import gguf  # a test/benchmark dependency

    dtype = dtype.lower()
    file_types = {"f32": 0, "f16": 1, "q8_0": 7}
    if dtype not in file_types:
        raise ValueError(f"dtype must be one of {', '.join(file_types)}, not {dtype!r}")
    path = Path(path)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_file_type(file_types[dtype])
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    tokens, scores, types = build_vocab(shape.n_vocab, corpus)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for tensor_name, tshape in _tensor_plan(shape):
        if len(tshape) == 1:
            writer.add_tensor(tensor_name, np.ones(tshape, dtype=np.float32))
            continue
        # Embeddings get a larger scale so that different tokens give clearly different logits.
        scale = 1.0 if tensor_name == "token_embd.weight" else 1.0 / np.sqrt(tshape[1])
        data = _weights(rng, tshape, scale)
        if dtype == "f16":
            writer.add_tensor(tensor_name, data.astype(np.float16))
        elif dtype == "q8_0":
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(tensor_name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(tensor_name, data)
        del data
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
