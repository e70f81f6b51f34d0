"""Speed of the local-model engine against a bare llama-cpp-python loop, the machine's
memory-bandwidth bound, and urgency inbox scoring with and without prefix reuse.

Everything runs on models written here with random weights (``portalreview.llm.testing_model``:
llama architecture, a 32k vocabulary built from our prompt and demo texts), nothing is
downloaded. Random weights decode exactly as fast as trained ones of the same shape; only the
text is nonsense.

What it prints, per weight type (F16 and Q8_0 by default, both written by the ``gguf``
package's writer; Q8_0 is quantized by its numpy quantizer):

* decode tokens/s of ``Engine.stream`` (in this process), of ``ProcessEngine.stream`` (the model
  in its own process, what the app uses: ``llm/engines/process.py``) and of a bare
  ``Llama.generate`` loop on the same file, same threads, greedy, after a warm-up, runs
  interleaved, median of ``--repeats``; the ratios; and whether all three chose the same tokens;
* the memory-bandwidth bound: bytes read per token (the weights) divided by the copy
  bandwidth numpy measures on this machine (read + written bytes per second, best of one
  thread and ``--threads`` threads), i.e. the most tokens/s a memory-bound decoder can reach;
* inbox scoring (seed 002: all ordered pairs, YES/NO probabilities) in the pair layout
  without and with prefix reuse, and in the inbox layout (every message listed once, each
  question a short suffix; ``score_inbox(..., layout="inbox")``): seconds, prompt tokens
  evaluated, the ratios against the pair layout without reuse, how far the inbox layout's order
  is from the pair layout's (Kendall tau; with random weights this says nothing about quality),
  and the token counts a 30-message inbox (870 pairs) would need in each, counted exactly from
  the tokenizer, with the context the inbox layout would need; then the pair layout with reuse
  through the process engine: its time against the in-process one, and the largest difference
  between the two engines' YES probabilities (they must agree within 1e-5).

Usage::

    .venv/bin/python benchmarks/bench_llm.py            # 0.5B shape, F16 + Q8_0 (~5 min, 2 cores)
    .venv/bin/python benchmarks/bench_llm.py --small    # 32M shape, quick (~1 min)
    .venv/bin/python benchmarks/bench_llm.py --inbox 30 --inbox-model same   # the full inbox
    .venv/bin/python benchmarks/bench_llm.py --inbox-only --inbox 10   # inbox scoring only
    .venv/bin/python benchmarks/bench_llm.py --tiny     # the tests' tiny random model (~1 min)
    .venv/bin/python benchmarks/bench_llm.py --model FILE.gguf   # a given model, e.g. SmolLM2

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
from portalreview.llm.engines.process import ProcessEngine
from portalreview.llm.errors import PromptTooLongError
from portalreview.llm.templates import PromptTemplate, default_template
from portalreview.llm.testing_model import (
    HALF_B,
    SMALL,
    TINY,
    ModelShape,
    prompt_corpus,
    write_model,
)
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


def engine_run(engine: Engine | ProcessEngine, tokens: int) -> tuple[float, list[int]]:
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
    """Decode tokens/s of the in-process engine, the process engine and a bare loop, runs
    interleaved (so that a change of machine load hits all three alike)."""
    from llama_cpp import Llama

    gpu = gpu_offload_supported()
    options = {"n_ctx": 1024, "n_threads": threads, "hash_cache": False}
    engine = Engine.load(path, **options)
    isolated = ProcessEngine.load(path, **options)
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
        engine_run(isolated, 4)
        bare_run(bare, prompt_tokens, 4)
        ours, process, theirs, same, process_same = [], [], [], True, True
        for _ in range(repeats):
            rate, ids_a = engine_run(engine, tokens)
            ours.append(rate)
            rate, ids_p = engine_run(isolated, tokens)
            process.append(rate)
            rate, ids_b = bare_run(bare, prompt_tokens, tokens)
            theirs.append(rate)
            same = same and ids_a == ids_b
            process_same = process_same and ids_p == ids_a
        return {
            "device": engine.info.device,
            "engine": statistics.median(ours),
            "process": statistics.median(process),
            "bare": statistics.median(theirs),
            "spread": (min(ours), max(ours), min(theirs), max(theirs)),
            "process_spread": (min(process), max(process)),
            "same_tokens": same,
            "process_same": process_same,
            "weights": engine.header.weights_bytes,
        }
    finally:
        bare.close()
        isolated.close()
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


def inbox_speed(path: Path, n: int, threads: int, repeats: int = 3) -> dict:
    pair_template = default_template("urgency_pair")
    inbox_template = default_template("urgency_inbox")
    patients = inbox(n)
    first, second = patients[0], patients[1]
    pair_values = {
        "chart_a": first.chart,
        "message_a": first.message,
        "chart_b": second.chart,
        "message_b": second.message,
    }
    warm = [
        inbox_prompt(inbox_template, inbox_text(patients), 1, 2),
        pair_template.render(pair_values),
    ]
    with Engine.load(path, n_threads=threads, hash_cache=False) as engine:
        warm_up(engine, warm)
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
        bare = BareInbox(engine, pair_template, patients, threads)
        with ProcessEngine.load(path, n_threads=threads, hash_cache=False) as isolated:
            warm_up(isolated, warm)
            local, process, bare_runs = [], [], []
            for _ in range(repeats):  # interleaved: a change of load hits all alike
                local.append(score_inbox(engine, pair_template, patients))
                process.append(score_inbox(isolated, pair_template, patients))
                bare_runs.append(bare.run())
        bare.close()
    return {
        "with": with_reuse,
        "without": without,
        "inbox": whole,
        "full30": full,
        "inbox30": full_inbox,
        "same": same,
        "n_ctx": n_ctx,
        "in_process": local,
        "process": process,
        "bare": bare_runs,
    }


class BareInbox:
    """The leanest llama-cpp-python loop for the same questions (the baseline of inbox
    scoring): the engine's prompt tokens of every ordered pair in score_inbox's order, each
    evaluated after the prefix it shares with the previous one, YES against NO read from the
    last logits. Tokenizing is done beforehand and not timed."""

    def __init__(self, engine: Engine, template: PromptTemplate, patients: list[Patient], threads):
        from llama_cpp import Llama

        self.prompts = []
        for a in patients:
            for b in patients:
                if a.key != b.key:
                    values = {
                        "chart_a": a.chart,
                        "message_a": a.message,
                        "chart_b": b.chart,
                        "message_b": b.message,
                    }
                    self.prompts.append(engine.prompt_tokens(template.render(values)))
        ids = engine.choice_probabilities(template.render(values), ("YES", "NO")).token_ids
        self.yes, self.no = ids["YES"], ids["NO"]
        n_ctx = engine.info.n_ctx
        self.llm = Llama(
            str(engine.info.path),
            n_ctx=n_ctx,
            n_batch=min(512, n_ctx),
            n_threads=threads,
            n_threads_batch=max(threads, os.cpu_count() or threads),
            n_gpu_layers=-1 if engine.info.gpu_layers else 0,
            verbose=False,
        )

    def run(self) -> tuple[float, list[float]]:
        """(seconds, P(YES) of each question)."""
        llm, n_vocab = self.llm, self.llm.n_vocab()
        llm.reset()
        started = time.perf_counter()
        p_yes = []
        for tokens in self.prompts:
            common = 0
            for x, y in zip(llm.input_ids[: llm.n_tokens], tokens[:-1], strict=False):
                if x != y:
                    break
                common += 1
            llm.n_tokens = common
            llm.eval(tokens[common:])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
            yes, no = float(logits[self.yes]), float(logits[self.no])
            p_yes.append(1.0 / (1.0 + np.exp(no - yes)))
        return time.perf_counter() - started, p_yes

    def close(self) -> None:
        self.llm.close()


def yes_difference(a: object, b: object) -> float:
    """The largest |difference| between two runs' YES probabilities, over both orders of
    every pair."""
    return max(
        max(abs(x.p_yes_ab - y.p_yes_ab), abs(x.p_yes_ba - y.p_yes_ba))
        for x, y in zip(a.pairs, b.pairs, strict=True)
    )


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
    local, isolated = s["in_process"], s["process"]
    diff = max(yes_difference(a, b) for a, b in zip(isolated, local, strict=True))
    t_local = statistics.median(run.seconds for run in local)
    t_process = statistics.median(run.seconds for run in isolated)
    t_bare = statistics.median(seconds for seconds, _p in s["bare"])
    asked = [p for pair in local[0].pairs for p in (pair.p_yes_ab, pair.p_yes_ba)]
    print(
        f"  pairs with reuse, median of {len(local)} interleaved runs: in its own process "
        f"{t_process:.2f} s, in process {t_local:.2f} s, bare llama-cpp-python loop "
        f"{t_bare:.2f} s (process/in-process time {t_process / t_local:.3f}, process/bare "
        f"{t_process / t_bare:.3f}, in-process/bare {t_local / t_bare:.3f})"
    )
    print(
        f"  YES probabilities, process engine against in-process: largest difference "
        f"{diff:.2e} ({'within' if diff <= 1e-5 else 'NOT within'} 1e-5), same order: "
        f"{all(a.order == b.order for a, b in zip(isolated, local, strict=True))}; "
        f"{len(asked)} questions asked per run"
    )


def model_files(
    args: argparse.Namespace, shape: ModelShape, dtypes: list[str], folder: Path, texts: list[str]
) -> list[Path]:
    """The files to decode with: ``--model``'s, or random models of the shape (written here
    unless ``--keep`` holds them already), one per weight type."""
    if args.model:
        print(f"\n{args.model.name}: {args.model.stat().st_size / 1e9:.3f} GB (given)")
        return [args.model]
    paths = []
    for dtype in dtypes:
        path = folder / f"random-{args.label}-{dtype}.gguf"
        started = time.perf_counter()
        if not path.exists():
            write_model(path, shape, dtype=dtype, corpus=texts)
        print(
            f"{path.name}: {shape.n_params() / 1e6:.1f}M parameters, "
            f"{path.stat().st_size / 1e9:.3f} GB (written in {time.perf_counter() - started:.0f} s)"
        )
        paths.append(path)
    return paths


def decode_report(args: argparse.Namespace, paths: list[Path], tokens: int) -> None:
    """The memory bandwidth, then per model file the decode speed against the bound."""
    measured = [bandwidth(t) for t in sorted({1, args.threads})]
    copy_bw = max(m[0] for m in measured)
    read_bw = max(m[1] for m in measured)
    print(
        f"memory bandwidth (numpy, best of 1 and {args.threads} threads): copy "
        f"{copy_bw / 1e9:.1f} GB/s (read + written bytes), read-only sum {read_bw / 1e9:.1f} GB/s"
    )
    for path in paths:
        print(f"\n{path.name}, {tokens} tokens per run, {args.repeats} runs:")
        r = decode_speed(path, tokens, args.repeats, args.threads)
        bound = read_bw / r["weights"]
        lo_a, hi_a, lo_b, hi_b = r["spread"]
        lo_p, hi_p = r["process_spread"]
        print(
            f"  decode on {r['device']}: engine {r['engine']:.1f} tok/s, in its own process "
            f"{r['process']:.1f} tok/s, bare llama-cpp-python loop {r['bare']:.1f} tok/s "
            f"(engine/bare {r['engine'] / r['bare']:.3f}, process/engine "
            f"{r['process'] / r['engine']:.3f}, process/bare {r['process'] / r['bare']:.3f}); "
            f"same tokens engine/bare: {r['same_tokens']}, process/engine: "
            f"{r['process_same']}; runs {lo_a:.1f}-{hi_a:.1f} (engine), "
            f"{lo_p:.1f}-{hi_p:.1f} (process), {lo_b:.1f}-{hi_b:.1f} (bare) tok/s"
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
    parser.add_argument(
        "--tiny", action="store_true", help="the tests' tiny model shape (tests/llm), quick"
    )
    parser.add_argument(
        "--model", type=Path, help="benchmark this GGUF file instead of random models"
    )
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
        help="score the inbox with the small Q8_0 model (default) or the main one (last dtype); "
        "with --model, that file",
    )
    parser.add_argument("--keep", type=Path, help="write the models here and keep them")
    parser.add_argument(
        "--inbox-only", action="store_true", help="skip the decode and bandwidth measurements"
    )
    args = parser.parse_args(argv)
    shape: ModelShape = TINY if args.tiny else SMALL if args.small else HALF_B
    args.label = "tiny" if args.tiny else "small" if args.small else "0.5b"
    quick = args.small or args.tiny or args.model
    tokens = args.tokens or (32 if args.small else 64)
    n_inbox = args.inbox or (6 if quick else 10)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-llm-"))
    folder.mkdir(parents=True, exist_ok=True)
    texts = corpus()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} logical CPUs)")
    print(
        f"threads {args.threads}; GPU offload in this llama.cpp build: "
        f"{'yes' if gpu_offload_supported() else 'no (CPU only)'}"
    )
    dtypes = args.dtypes.split(",")
    paths: list[Path] = []
    if not args.inbox_only:
        paths = model_files(args, shape, dtypes, folder, texts)
        decode_report(args, paths, tokens)
    if args.model:
        inbox_path = args.model
    elif args.inbox_model == "same":
        inbox_path = (paths or model_files(args, shape, dtypes[-1:], folder, texts))[-1]
    else:
        inbox_path = folder / "random-small-q8_0.gguf"
        if not inbox_path.exists():
            write_model(inbox_path, SMALL, dtype="q8_0", corpus=texts)
    print_inbox(
        inbox_speed(inbox_path, n_inbox, args.threads, args.repeats), n_inbox, inbox_path.name
    )
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
