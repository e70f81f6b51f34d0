"""A real instruction-tuned model (SmolLM2-135M-Instruct, Q4_1) through the program's own path on
a GPU, against the same llama.cpp build on the CPU.

Run on the lent GPU machine by ``benchmarks/device/gpu_real_model.sh`` (which builds libllama
with CUDA there). For each mode - GPU (every layer offloaded, the default of a GPU build) and CPU
(``--cpu``) - it runs ``portalreview suggest`` over the first ``--limit`` units of every kind of
a copy of the demo study, as a PI would, and then compares what the two stored: the answers
(each suggestion's payload) and the probabilities the suggesters observed on the way
(``params_json["observed"]``: YES/NO, levels, per-sentence choices). It also decodes one chat
prompt greedily in each mode through the model's own process (``load_engine``), timing tokens
per second and finding the first token where the two texts part.

Usage (on the device; the model and the demo study come from the prepare step)::

    python benchmarks/device/gpu_real_model.py --model M.gguf --demo demo.prproj --out DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")
MODES = ("gpu", "cpu")
PROMPT = (
    "A patient writes: 'My blood pressure readings at home have been 150 over 95 for a week. "
    "Should I change my losartan?' Write a short, kind reply from the clinic."
)


def run_suggestions(model: Path, demo: Path, out: Path, mode: str, limit: int) -> dict:
    """``portalreview suggest`` over ``limit`` units of every kind, on a copy of the demo."""
    study = out / f"demo-{mode}.prproj"
    shutil.copyfile(demo, study)
    seconds: dict[str, float] = {}
    for kind in KINDS:
        command = [sys.executable, "-m", "portalreview", "suggest", str(study)]
        command += ["--model", str(model), "--kind", kind, "--limit", str(limit)]
        command += ["--cpu"] if mode == "cpu" else []
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds[kind] = round(time.perf_counter() - started, 2)
        said = (done.stdout + done.stderr).splitlines()
        summary = [line for line in said if " stored, " in line] or said[-3:]
        print(f"{mode} {kind}: {seconds[kind]} s, exit {done.returncode}: {summary}", flush=True)
    return {"study": study, "seconds": seconds}


def stored(study: Path) -> dict[tuple[str, int], dict]:
    """Each suggestion of the study by (kind, unit): its payload, observations and refusal."""
    with sqlite3.connect(study) as db:
        rows = db.execute(
            "SELECT kind, unit_id, payload_json, params_json, refused_reason, seconds "
            "FROM suggestions ORDER BY id"
        ).fetchall()
    found: dict[tuple[str, int], dict] = {}
    for kind, unit, payload, params, refused, seconds in rows:
        found[(kind, unit)] = {
            "payload": json.loads(payload),
            "observed": json.loads(params).get("observed", {}),
            "refused": refused,
            "seconds": seconds,
        }
    return found


def numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every number inside a JSON value, by its path."""
    if isinstance(value, bool) or value is None:
        return {}
    if isinstance(value, int | float):
        return {path: float(value)}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return {}
    found: dict[str, float] = {}
    for key, inner in items:
        found.update(numbers(inner, f"{path}/{key}"))
    return found


def compare(gpu: dict, cpu: dict) -> dict[str, Any]:
    """Per kind: suggestions in both modes, same payloads, and the largest difference between
    two observed probabilities (same path in both)."""
    by_kind: dict[str, Any] = {}
    for kind in KINDS:
        keys = sorted(k for k in gpu.keys() & cpu.keys() if k[0] == kind)
        same = sum(gpu[k]["payload"] == cpu[k]["payload"] for k in keys)
        differences = []
        for key in keys:
            a, b = numbers(gpu[key]["observed"]), numbers(cpu[key]["observed"])
            differences += [abs(a[p] - b[p]) for p in a.keys() & b.keys()]
        by_kind[kind] = {
            "gpu": sum(k[0] == kind for k in gpu),
            "cpu": sum(k[0] == kind for k in cpu),
            "same_payload": same,
            "refused_gpu": sum(gpu[k]["refused"] is not None for k in keys),
            "refused_cpu": sum(cpu[k]["refused"] is not None for k in keys),
            "observed_numbers": len(differences),
            "max_abs_difference": max(differences, default=None),
        }
    return by_kind


def decode(model: Path, gpu: bool, repeats: int) -> dict[str, Any]:
    """Greedy decoding of one chat prompt in the model's own process: tokens/s and the tokens."""
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.engines import load_engine

    engine = load_engine(model, gpu=None if gpu else False, hash_cache=False)
    try:
        runs = []
        for _ in range(repeats):
            gen = engine.complete([PROMPT], GenerationParams(max_tokens=256))
            runs.append(len(gen.token_ids) / gen.seconds)
        return {
            "device": engine.info.describe(),
            "tokens_per_s": sorted(runs)[len(runs) // 2],
            "token_ids": list(gen.token_ids),
            "text": gen.text,
        }
    finally:
        engine.close()


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--demo", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=3, help="units per kind")
    parser.add_argument("--repeats", type=int, default=3, help="greedy decodes per mode")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    decoded = {mode: decode(args.model, mode == "gpu", args.repeats) for mode in MODES}
    for mode in MODES:
        print(f"{mode}: {decoded[mode]['device']}, {decoded[mode]['tokens_per_s']:.1f} tok/s")
    part = first_difference(decoded["gpu"]["token_ids"], decoded["cpu"]["token_ids"])
    print(f"greedy texts: {'identical' if part is None else f'part at token {part}'}")
    runs = {
        mode: run_suggestions(args.model, args.demo, args.out, mode, args.limit) for mode in MODES
    }
    by_kind = compare(stored(runs["gpu"]["study"]), stored(runs["cpu"]["study"]))
    for kind, row in by_kind.items():
        print(
            kind,
            json.dumps(row),
            "seconds gpu/cpu:",
            runs["gpu"]["seconds"][kind],
            runs["cpu"]["seconds"][kind],
        )
    summary = {
        "decode": {m: {k: v for k, v in d.items() if k != "token_ids"} for m, d in decoded.items()},
        "greedy_first_difference": part,
        "suggest_seconds": {m: r["seconds"] for m, r in runs.items()},
        "by_kind": by_kind,
    }
    (args.out / "gpu_real_model.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
