"""A model of a realistic size with random weights and a real tokenizer, for speed figures.

Speed depends on the model's shape and weight type, not on what its weights say, so the GPU
figures in docs/llm.md were measured on a file of an 8B model's shape (Llama-3-8B's layers)
whose Q8_0 weights are random, with SmolLM2's real tokenizer and chat template (so prompts
tokenize as they would for a real chat model). Random weights write random text: the figures
are about tokens per second, never wording.

    python benchmarks/shaped_model.py tokenizer SMOLLM2.gguf tokenizer.json.gz
    python benchmarks/shaped_model.py write --tokenizer tokenizer.json.gz --shape 8b OUT.gguf

Writing is fast because a few random blocks are reused for every tensor of one shape (the
file is as large as a real one; the GPU reads every byte of it at every token either way).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

SHAPES = {  # n_embd, n_layer, n_head, n_head_kv, n_ff
    "8b": (4096, 32, 32, 8, 14336),
    "1b": (2048, 16, 32, 8, 8192),
    "tiny": (256, 2, 4, 2, 512),
}
Q8_BLOCK = 32  # values per Q8_0 block: one float16 scale, then 32 int8
Q8_BYTES = 34


def save_tokenizer(model: Path, out: Path) -> None:
    """Copy every ``tokenizer.*`` key of a GGUF file (with its type) to a JSON file."""
    import gguf

    reader = gguf.GGUFReader(str(model))
    keys = {}
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            item = field.types[1]
            values = [_scalar(field.parts[i], item) for i in field.data]
            keys[name] = {"array": int(item), "values": values}
        else:
            keys[name] = {"type": int(kind), "value": _scalar(field.parts[field.data[0]], kind)}
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(keys, f)


def _scalar(part: np.ndarray, kind: int):
    import gguf

    if kind == gguf.GGUFValueType.STRING:
        return bytes(part).decode("utf-8")
    return part.tolist()[0]


def write(out: Path, tokenizer: Path, shape: str, seed: int = 0) -> Path:
    import gguf

    n_embd, n_layer, n_head, n_head_kv, n_ff = SHAPES[shape]
    with gzip.open(tokenizer, "rt", encoding="utf-8") as f:
        keys = json.load(f)
    n_vocab = len(keys["tokenizer.ggml.tokens"]["values"])
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(f"random-{shape}-q8_0")
    writer.add_file_type(7)  # mostly Q8_0
    writer.add_context_length(8192)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    for name, spec in keys.items():
        if "array" in spec:
            writer.add_array(name, spec["values"]) if spec["array"] == gguf.GGUFValueType.STRING \
                else writer.add_key_value(name, spec["values"], gguf.GGUFValueType.ARRAY,
                                          sub_type=gguf.GGUFValueType(spec["array"]))
        else:
            writer.add_key_value(name, spec["value"], gguf.GGUFValueType(spec["type"]))
    rng = np.random.default_rng(seed)
    blocks: dict[tuple[int, int], np.ndarray] = {}
    kv = n_embd // n_head * n_head_kv
    plan = [("token_embd.weight", (n_vocab, n_embd))]
    for i in range(n_layer):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (n_embd,)),
            (p + "attn_q.weight", (n_embd, n_embd)),
            (p + "attn_k.weight", (kv, n_embd)),
            (p + "attn_v.weight", (kv, n_embd)),
            (p + "attn_output.weight", (n_embd, n_embd)),
            (p + "ffn_norm.weight", (n_embd,)),
            (p + "ffn_gate.weight", (n_ff, n_embd)),
            (p + "ffn_up.weight", (n_ff, n_embd)),
            (p + "ffn_down.weight", (n_embd, n_ff)),
        ]
    plan += [("output_norm.weight", (n_embd,)), ("output.weight", (n_vocab, n_embd))]
    for name, dims in plan:
        if len(dims) == 1:
            writer.add_tensor(name, np.ones(dims, dtype=np.float32))
            continue
        if dims not in blocks:
            blocks[dims] = _random_q8(rng, dims)
        writer.add_tensor(name, blocks[dims], raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _random_q8(rng: np.random.Generator, dims: tuple[int, int]) -> np.ndarray:
    """Q8_0 bytes for a (rows, cols) matrix: scales so that the weights have a standard
    deviation of about 1/sqrt(cols) (activations stay finite through every layer)."""
    rows, cols = dims
    n_blocks = cols // Q8_BLOCK
    data = np.empty((rows, n_blocks, Q8_BYTES), dtype=np.uint8)
    scale = np.float16(np.sqrt(3.0 / cols) / 127.0)
    data[:, :, :2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
    data[:, :, 2:] = rng.integers(-127, 128, size=(rows, n_blocks, Q8_BLOCK), dtype=np.int8).view(
        np.uint8
    )
    return data.reshape(rows, n_blocks * Q8_BYTES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenizer", help="save a GGUF file's tokenizer keys as JSON")
    tok.add_argument("model", type=Path)
    tok.add_argument("out", type=Path)
    wr = sub.add_parser("write", help="write a random-weight model of a named shape")
    wr.add_argument("out", type=Path)
    wr.add_argument("--tokenizer", type=Path, required=True)
    wr.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    args = parser.parse_args(argv)
    if args.command == "tokenizer":
        save_tokenizer(args.model, args.out)
    else:
        write(args.out, args.tokenizer, args.shape)
    print(args.out, f"{args.out.stat().st_size / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
