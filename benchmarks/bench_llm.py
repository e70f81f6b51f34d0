"""Speed of the local-model engine against a bare llama-cpp-python loop, the machine's
memory-bandwidth bound, and urgency inbox scoring with and without prefix reuse.

Everything runs on models written here with random weights (``portalreview.llm.testing_model``:
llama architecture, a 32k vocabulary built from our prompt and demo texts), nothing is
downloaded. Random weights decode exactly as fast as trained ones of the same shape; only the
text is nonsense.

What it prints, per weight type (F16 and Q8_0 by default, both written by the ``gguf``
package's writer; Q8_0 is quantized by its numpy quantizer):

* decode tokens/s of ``Engine.stream`` and of a bare ``Llama.generate`` loop on the same file,
  same threads, greedy, after a warm-up, median of ``--repeats`` runs; and whether both chose
  the same tokens;
* the memory-bandwidth bound: bytes read per token (the weights) divided by the copy
  bandwidth numpy measures on this machine (read + written bytes per second, best of one
  thread and ``--threads`` threads), i.e. the most tokens/s a memory-bound decoder can reach;
* inbox scoring (seed 002: all ordered pairs, YES/NO probabilities) in the pair layout
  without and with prefix reuse, and in the inbox layout (every message listed once, each
  question a short suffix; ``score_inbox(..., layout="inbox")``): seconds, prompt tokens
  evaluated, the ratios against the pair layout without reuse, how far the inbox layout's order
  is from the pair layout's (Kendall tau; with random weights this says nothing about quality),
  and the token counts a 30-message inbox (870 pairs) would need in each, counted exactly from
  the tokenizer, with the context the inbox layout would need.

Usage::

    .venv/bin/python benchmarks/bench_llm.py            # 0.5B shape, F16 + Q8_0 (~5 min, 2 cores)
    .venv/bin/python benchmarks/bench_llm.py --small    # 32M shape, quick (~1 min)
    .venv/bin/python benchmarks/bench_llm.py --inbox 30 --inbox-model same   # the full inbox
    .venv/bin/python benchmarks/bench_llm.py --inbox-only --inbox 10   # inbox scoring only

GPU: when llama.cpp was built with GPU offload, the engine offloads every layer and the bare
loop is given ``n_gpu_layers=-1`` too; otherwise both run on the CPU (say so in the notes).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from portalreview.llm.engine import Engine, GenerationParams, default_threads, gpu_offload_supported
from portalreview.llm.errors import PromptTooLongError
from portalreview.llm.templates import PromptTemplate, default_template
from portalreview.llm.testing_model import HALF_B, SMALL, ModelShape, prompt_corpus, write_model
from portalreview.llm.urgency import (
    InboxTooLongError,
    Patient,
    inbox_prompt,
    inbox_text,
    score_inbox,
)
from portalreview.resources import resources_dir
from portalreview.store.service import chart_text_of

PROMPT = "Patient message: I have had a dry cough for six weeks. Doctor reply:"


def demo_cases() -> list[dict]:
    path = resources_dir() / "demo" / "cases.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def corpus() -> list[str]:
    texts = prompt_corpus()
    for case in demo_cases():
        texts.append(case["message"])
        texts += [" ".join(case.get(k, [])) for k in ("problems", "encounters", "medications")]
    return texts


def inbox(n: int) -> list[Patient]:
    cases = demo_cases()[:n]
    return [
        Patient(
            c["case_id"],
            c["message"],
            chart_text_of(
                {k: c.get(k, []) for k in ("demographics", "problems", "encounters", "medications")}
            ),
        )
        for c in cases
    ]


# --- memory bandwidth --------------------------------------------------------------------------


def _timed_threads(work, bounds: list[tuple[int, int]], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        workers = [threading.Thread(target=work, args=b) for b in bounds]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = min(best, time.perf_counter() - start)
    return best


def bandwidth(threads: int, megabytes: int = 512, repeats: int = 5) -> tuple[float, float]:
    """(copy, read) bandwidth in bytes/s measured with numpy over a large array split across
    threads: a copy moves read + written bytes; a sum only reads (what decoding does to the
    weights)."""
    src = np.ones(megabytes * 1024 * 1024 // 8)
    dst = np.empty_like(src)
    edges = np.linspace(0, src.size, threads + 1).astype(int)
    bounds = [(int(a), int(b)) for a, b in itertools.pairwise(edges)]

    def copy(lo: int, hi: int) -> None:
        np.copyto(dst[lo:hi], src[lo:hi])

    def read(lo: int, hi: int) -> None:
        src[lo:hi].sum()

    return (
        2 * src.nbytes / _timed_threads(copy, bounds, repeats),
        src.nbytes / _timed_threads(read, bounds, repeats),
    )


# --- decode speed ------------------------------------------------------------------------------


def _rate(stamps: Sequence[float]) -> float:
    """Tokens per second between the first and the last token (prompt time excluded)."""
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")


def engine_run(engine: Engine, tokens: int) -> tuple[float, list[int]]:
    stamps = []
    gen = engine.stream(PROMPT, GenerationParams(max_tokens=tokens))
    for _ in gen:
        stamps.append(time.perf_counter())
    # pieces can merge tokens (multi-byte characters): count tokens, not pieces
    rate = (len(gen.token_ids) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
    return rate, gen.token_ids


def bare_run(llm, prompt_tokens: list[int], tokens: int) -> tuple[float, list[int]]:
    stamps, out = [], []
    llm.reset()
    for token in llm.generate(prompt_tokens, temp=0.0, repeat_penalty=1.0):
        stamps.append(time.perf_counter())
        out.append(token)
        if len(out) == tokens:
            break
    return _rate(stamps), out


def decode_speed(path: Path, tokens: int, repeats: int, threads: int) -> dict:
    from llama_cpp import Llama

    gpu = gpu_offload_supported()
    engine = Engine.load(path, n_ctx=1024, n_threads=threads, hash_cache=False)
    bare = Llama(
        str(path),
        n_ctx=1024,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=-1 if gpu else 0,
        verbose=False,
    )
    try:
        prompt_tokens = engine.prompt_tokens(PROMPT)
        engine_run(engine, 4)
        bare_run(bare, prompt_tokens, 4)
        ours, theirs, same = [], [], True
        for _ in range(repeats):
            rate, ids_a = engine_run(engine, tokens)
            ours.append(rate)
            rate, ids_b = bare_run(bare, prompt_tokens, tokens)
            theirs.append(rate)
            same = same and ids_a == ids_b
        return {
            "device": engine.info.device,
            "engine": statistics.median(ours),
            "bare": statistics.median(theirs),
            "spread": (min(ours), max(ours), min(theirs), max(theirs)),
            "same_tokens": same,
            "weights": engine.header.weights_bytes,
        }
    finally:
        bare.close()
        engine.close()


# --- inbox scoring -------------------------------------------------------------------------------


def inbox_token_cost(
    engine: Engine, template: PromptTemplate, patients: list[Patient]
) -> tuple[int, int]:
    """(tokens a fresh evaluation of every ordered pair needs, tokens with prefix reuse in
    score_inbox's order), counted from the tokenizer alone."""
    fresh = reused = 0
    previous: list[int] = []
    for a in patients:
        for b in patients:
            if a.key == b.key:
                continue
            values = {
                "chart_a": a.chart,
                "message_a": a.message,
                "chart_b": b.chart,
                "message_b": b.message,
            }
            tokens = engine.prompt_tokens(template.render(values))
            common = 0
            for x, y in zip(previous, tokens[:-1], strict=False):
                if x != y:
                    break
                common += 1
            fresh += len(tokens)
            reused += len(tokens) - common
            previous = tokens
    return fresh, reused


def inbox_layout_token_cost(
    engine: Engine, template: PromptTemplate, patients: list[Patient]
) -> tuple[int, int, int]:
    """(prompt tokens of every question, tokens evaluated with prefix reuse in score_inbox's
    order, the longest prompt) of the inbox layout, counted from the tokenizer alone: the
    inbox need not fit the context for counting."""
    listed = inbox_text(patients)
    prefix = engine.tokenize(inbox_prompt(template, listed, 1, 2)[0], bos=True)
    total = evaluated = longest = 0
    previous: list[int] = []
    for i in range(1, len(patients) + 1):
        for j in range(1, len(patients) + 1):
            if i == j:
                continue
            tokens = prefix + engine.tokenize(inbox_prompt(template, listed, i, j)[1])
            common = 0
            for x, y in zip(previous, tokens[:-1], strict=False):
                if x != y:
                    break
                common += 1
            total += len(tokens)
            evaluated += len(tokens) - common
            longest = max(longest, len(tokens))
            previous = tokens
    return total, evaluated, longest


def order_tau(a: list, b: list) -> float:
    """Kendall's tau-b between two orders of the same items (1 = the same order)."""
    position = {key: k for k, key in enumerate(b)}
    return float(stats.kendalltau(range(len(a)), [position[key] for key in a]).statistic)


def warm_up(engine: Engine, prompts: list[list[str]]) -> None:
    """Evaluate each prompt once, untimed: on this machine llama.cpp's first evaluation of a
    prompt longer than any before was several times slower than the next one of that length,
    which would charge whichever layout runs first at a new length."""
    for prompt in prompts:
        with contextlib.suppress(PromptTooLongError):  # the inbox layout will say so
            engine.next_token_logprobs(prompt, reuse_prefix=False)


def inbox_speed(path: Path, n: int, threads: int) -> dict:
    pair_template = default_template("urgency_pair")
    inbox_template = default_template("urgency_inbox")
    patients = inbox(n)
    with Engine.load(path, n_threads=threads, hash_cache=False) as engine:
        first, second = patients[0], patients[1]
        pair_values = {
            "chart_a": first.chart,
            "message_a": first.message,
            "chart_b": second.chart,
            "message_b": second.message,
        }
        warm_up(
            engine,
            [
                inbox_prompt(inbox_template, inbox_text(patients), 1, 2),
                pair_template.render(pair_values),
            ],
        )
        without = score_inbox(engine, pair_template, patients, reuse_prefix=False)
        with_reuse = score_inbox(engine, pair_template, patients)
        try:
            whole: object = score_inbox(engine, inbox_template, patients, layout="inbox")
        except InboxTooLongError as exc:
            whole = str(exc)
        full = inbox_token_cost(engine, pair_template, inbox(30))
        full_inbox = inbox_layout_token_cost(engine, inbox_template, inbox(30))
        same = all(
            abs(a.p_a_first - b.p_a_first) < 1e-4
            for a, b in zip(with_reuse.pairs, without.pairs, strict=True)
        )
        n_ctx = engine.info.n_ctx
    return {
        "with": with_reuse,
        "without": without,
        "inbox": whole,
        "full30": full,
        "inbox30": full_inbox,
        "same": same,
        "n_ctx": n_ctx,
    }


def print_inbox(s: dict, n_inbox: int, model_name: str) -> None:
    pairs = n_inbox * (n_inbox - 1)
    base = s["without"]
    print(f"\ninbox scoring, {n_inbox} messages = {pairs} ordered pairs, on {model_name}:")
    rows = [("pairs, without prefix reuse", base), ("pairs, with prefix reuse", s["with"])]
    if not isinstance(s["inbox"], str):
        rows.append(("inbox layout", s["inbox"]))
    for label, run in rows:
        print(
            f"  {label:<28} {run.seconds:7.1f} s, {run.evaluated_tokens:>8,} prompt tokens "
            f"evaluated ({base.seconds / run.seconds:5.1f}x faster, "
            f"{base.evaluated_tokens / run.evaluated_tokens:5.1f}x fewer tokens than pairs "
            "without reuse)"
        )
    print(f"  pairs with and without reuse: same probabilities (|diff| < 1e-4): {s['same']}")
    if isinstance(s["inbox"], str):
        print(f"  inbox layout refused: {s['inbox']}")
    else:
        tau = order_tau(s["inbox"].order, s["with"].order)
        print(
            f"  Kendall tau between the inbox layout's order and the pairs layout's: {tau:.3f} "
            "(random weights: this measures nothing about quality, only that the two layouts "
            "ask different questions)"
        )
    fresh, reused = s["full30"]
    _total, layout, longest = s["inbox30"]
    print(
        f"  a 30-message inbox (870 pairs) needs {fresh:,} prompt tokens fresh, {reused:,} "
        f"with reuse ({fresh / reused:.2f}x fewer), and {layout:,} in the inbox layout "
        f"({fresh / layout:.1f}x fewer), whose longest prompt takes {longest:,} tokens "
        f"(this model's context: {s['n_ctx']:,})"
    )


def decode_report(
    args: argparse.Namespace,
    shape: ModelShape,
    dtypes: list[str],
    folder: Path,
    tokens: int,
    texts: list[str],
) -> None:
    """The memory bandwidth, then per weight type the decode speed against the bound."""
    measured = [bandwidth(t) for t in sorted({1, args.threads})]
    copy_bw = max(m[0] for m in measured)
    read_bw = max(m[1] for m in measured)
    print(
        f"memory bandwidth (numpy, best of 1 and {args.threads} threads): copy "
        f"{copy_bw / 1e9:.1f} GB/s (read + written bytes), read-only sum {read_bw / 1e9:.1f} GB/s"
    )
    for dtype in dtypes:
        path = folder / f"random-{'small' if args.small else '0.5b'}-{dtype}.gguf"
        started = time.perf_counter()
        if not path.exists():
            write_model(path, shape, dtype=dtype, corpus=texts)
        print(
            f"\n{path.name}: {shape.n_params() / 1e6:.0f}M parameters, "
            f"{path.stat().st_size / 1e9:.2f} GB (written in {time.perf_counter() - started:.0f} s)"
        )
        r = decode_speed(path, tokens, args.repeats, args.threads)
        bound = read_bw / r["weights"]
        lo_a, hi_a, lo_b, hi_b = r["spread"]
        print(
            f"  decode on {r['device']}: engine {r['engine']:.1f} tok/s, bare llama-cpp-python "
            f"loop {r['bare']:.1f} tok/s (engine/bare {r['engine'] / r['bare']:.3f}); "
            f"same tokens: {r['same_tokens']}; runs {lo_a:.1f}-{hi_a:.1f} vs "
            f"{lo_b:.1f}-{hi_b:.1f} tok/s"
        )
        print(
            f"  bandwidth bound: {r['weights'] / 1e6:.0f} MB read per token / "
            f"{read_bw / 1e9:.1f} GB/s read = {bound:.1f} tok/s at most "
            f"(engine reaches {r['engine'] / bound:.0%} of it; with the copy bandwidth the "
            f"bound would be {copy_bw / r['weights']:.1f} tok/s)"
        )


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a 32M-parameter model, fewer tokens")
    parser.add_argument("--dtypes", default="f16,q8_0", help="weight types (f32, f16, q8_0)")
    parser.add_argument("--tokens", type=int, help="tokens per decode run (default 64; 32 small)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument(
        "--inbox", type=int, help="messages in the scored inbox (default 10; 6 small)"
    )
    parser.add_argument(
        "--inbox-model",
        choices=("small", "same"),
        default="small",
        help="score the inbox with the small Q8_0 model (default) or the main one (last dtype)",
    )
    parser.add_argument("--keep", type=Path, help="write the models here and keep them")
    parser.add_argument(
        "--inbox-only", action="store_true", help="skip the decode and bandwidth measurements"
    )
    args = parser.parse_args(argv)
    shape: ModelShape = SMALL if args.small else HALF_B
    tokens = args.tokens or (32 if args.small else 64)
    n_inbox = args.inbox or (6 if args.small else 10)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-llm-"))
    folder.mkdir(parents=True, exist_ok=True)
    texts = corpus()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} logical CPUs)")
    print(
        f"threads {args.threads}; GPU offload in this llama.cpp build: "
        f"{'yes' if gpu_offload_supported() else 'no (CPU only)'}"
    )
    dtypes = args.dtypes.split(",")
    if not args.inbox_only:
        decode_report(args, shape, dtypes, folder, tokens, texts)
    same = args.inbox_model == "same"
    inbox_shape, inbox_dtype = (shape, dtypes[-1]) if same else (SMALL, "q8_0")
    name = "small" if inbox_shape == SMALL else "0.5b"
    inbox_path = folder / f"random-{name}-{inbox_dtype}.gguf"
    if not inbox_path.exists():
        write_model(inbox_path, inbox_shape, dtype=inbox_dtype, corpus=texts)
    print_inbox(inbox_speed(inbox_path, n_inbox, args.threads), n_inbox, inbox_path.name)
    print(
        f"\nload average after: {os.getloadavg()[0]:.2f} (other programs on these cores slow "
        "llama.cpp's spinning threads a lot: compare runs made under a similar load)"
    )
    if not args.keep:
        for f in folder.glob("*.gguf"):
            f.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
