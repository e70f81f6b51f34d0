"""Many clients, one shared model server: suggestions per second and latency with 1, 4 and 16
concurrent clients of one llama.cpp server (its parallel slots), against one local engine on
the same machine.

The workload is real: the calls our suggesters make for units of every kind (and drafts) of
the demo study, recorded once with a real model (SmolLM2, the engine's chat format, the
kinds' grammars and token limits) and then replayed call for call: a "request" is one whole
suggestion (all the calls of one unit). Replayed on another model, the calls are the same and
the answers differ; generated tokens are counted, so tokens/s is comparable across models.

Printed per client count: suggestions, wall seconds, suggestions/s, p50 and p95 latency of a
suggestion, generated tokens/s per client and in all, and the ratios against the local engine
(one client: the engine serves one call at a time). Then the largest difference between the
server's and the local engine's answer-option probabilities over the workload's choice calls
(they must agree within 1e-3; see tests/llm/test_llm_server.py).

Usage::

    .venv/bin/python benchmarks/bench_llm_server.py             # SmolLM2 on this CPU
    .venv/bin/python benchmarks/bench_llm_server.py --record W.json   # record the workload only
    python3 benchmarks/bench_llm_server.py --workload W.json --model M.gguf --gpu \\
        --server-binary build/bin/llama-server              # the GPU box (benchmarks/device/)

Needs the llama-server of packaging/build_llama_server.py (or ``--server-binary``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portalreview.llm.engine import GenerationParams
from portalreview.llm.model_server import ServerSetting

KINDS = ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")


# --- recording --------------------------------------------------------------------------------


class RecordingEngine:
    """Passes every call to a real engine and notes what was asked."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def stream(self, prompt: Any, params: Any = None, *, grammar: Any = None, cancel: Any = None):
        self.calls.append({
            "op": "generate",
            "prompt": _segments(prompt),
            "params": (params or GenerationParams()).as_dict(),
            "grammar": grammar,
        })
        return self.engine.stream(prompt, params, grammar=grammar, cancel=cancel)

    def complete(self, prompt: Any, params: Any = None, *, grammar: Any = None, cancel: Any = None):
        return self.stream(prompt, params, grammar=grammar, cancel=cancel).wait()

    def choice_probabilities(self, prompt: Any, choices: Sequence[str], **kwargs: Any):
        self.calls.append({"op": "choice", "prompt": _segments(prompt), "choices": list(choices)})
        return self.engine.choice_probabilities(prompt, choices, **kwargs)


def _segments(prompt: Any) -> list[str]:
    return [prompt] if isinstance(prompt, str) else [str(s) for s in prompt]


def record_workload(model: Path, per_kind: int, threads: int) -> list[dict[str, Any]]:
    """The calls of ``per_kind`` units of every kind and of as many drafts, on the demo."""
    from sqlalchemy import select

    from portalreview.demo import build_demo
    from portalreview.llm import suggest as sg
    from portalreview.llm.engines import load_engine
    from portalreview.llm.templates import PromptLibrary, default_template
    from portalreview.store.models import Unit
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    workload: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        project = Project.open(build_demo(Path(tmp) / "demo.prproj"))
        service = StudyService(project)
        library = PromptLibrary(service)
        with load_engine(model, isolated=False, gpu=False, n_threads=threads,
                         hash_cache=False) as engine:
            for kind in KINDS:
                with project.read() as s:
                    units = s.scalars(
                        select(Unit.id).where(Unit.kind == kind).order_by(Unit.id)
                    ).all()[:per_kind]
                ctx = sg.SuggestContext(
                    engine, service.catalogs, sg.resolve_templates(library, kind)
                )
                for unit_id in units:
                    recorder = RecordingEngine(engine)
                    ctx_r = sg.replace(ctx, engine=recorder)
                    try:
                        sg.suggest(ctx_r, service.read_unit(unit_id))
                    except Exception as exc:  # an unusable answer still counts
                        print(f"  ({kind} unit {unit_id}: {type(exc).__name__})")
                    workload.append({"kind": kind, "calls": recorder.calls})
            template = default_template("draft_zero_shot")
            with project.read() as s:
                respond_units = s.scalars(
                    select(Unit.id).where(Unit.kind == "respond").order_by(Unit.id)
                ).all()[:per_kind]
            for case in sg.cases_of_units(service, respond_units):
                recorder = RecordingEngine(engine)
                values = sg.draft_values(template, case, service.catalogs)
                sg.stream_draft(recorder, template, values, GenerationParams(max_tokens=400)).wait()
                workload.append({"kind": "draft", "calls": recorder.calls})
        project.close()
    return workload


# --- replaying --------------------------------------------------------------------------------


def replay(engine: Any, request: dict[str, Any], max_tokens: int) -> int:
    """Make one recorded suggestion's calls; returns the tokens generated."""
    generated = 0
    for call in request["calls"]:
        if call["op"] == "choice":
            engine.choice_probabilities(call["prompt"], call["choices"])
            continue
        params = dict(call["params"])
        params["max_tokens"] = min(params["max_tokens"], max_tokens)
        gen = engine.complete(call["prompt"], GenerationParams(**params), grammar=call["grammar"])
        generated += len(gen.token_ids)
    return generated


def run_clients(
    make_engine: Any, workload: list[dict], clients: int, per_client: int, max_tokens: int
) -> dict[str, Any]:
    """``clients`` threads, each with its own engine (a workstation), each making
    ``per_client`` suggestions from its own place in the workload."""
    latencies: list[float] = []
    tokens = [0] * clients
    busy = [0.0] * clients
    errors: list[str] = []
    lock = threading.Lock()
    engines = [make_engine() for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        barrier.wait()
        started = time.perf_counter()
        for n in range(per_client):
            request = workload[(i * per_client + n) % len(workload)]
            t0 = time.perf_counter()
            try:
                tokens[i] += replay(engines[i], request, max_tokens)
            except Exception as exc:  # counted and printed, never hidden
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                latencies.append(time.perf_counter() - t0)
        busy[i] = time.perf_counter() - started

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for e in engines:
        e.close()
    ordered = sorted(latencies)
    return {
        "clients": clients,
        "suggestions": len(latencies),
        "errors": errors,
        "wall_s": wall,
        "per_s": len(latencies) / wall if wall else 0.0,
        "p50_s": statistics.median(ordered) if ordered else float("nan"),
        "p95_s": _percentile(ordered, 0.95),
        "tok_s_per_client": statistics.mean(t / b for t, b in zip(tokens, busy, strict=True) if b),
        "tok_s_all": sum(tokens) / wall if wall else 0.0,
        "tokens": sum(tokens),
    }


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def probability_difference(server: Any, local: Any, workload: list[dict], limit: int) -> float:
    """The largest |P_server - P_local| over the workload's first ``limit`` choice calls."""
    worst = 0.0
    calls = [c for r in workload for c in r["calls"] if c["op"] == "choice"][:limit]
    for call in calls:
        a = server.choice_probabilities(call["prompt"], call["choices"]).probs
        b = local.choice_probabilities(call["prompt"], call["choices"]).probs
        worst = max(worst, *(abs(a[k] - b[k]) for k in a))
    return worst


# --- main -------------------------------------------------------------------------------------


def print_table(rows: list[dict], local: dict | None) -> None:
    print(f"\n{'where':<16}{'clients':>8}{'sugg.':>7}{'wall s':>8}{'sugg/s':>8}{'x local':>8}"
          f"{'p50 s':>8}{'p95 s':>8}{'p95 x':>7}{'tok/s/cl':>10}{'tok/s all':>10}{'err':>5}")
    listed = ([("local engine", local)] if local else []) + [(r["where"], r) for r in rows]
    for where, row in listed:
        ratio = f"{row['per_s'] / local['per_s']:>8.2f}" if local else f"{'-':>8}"
        p95 = f"{row['p95_s'] / local['p95_s']:>7.2f}" if local else f"{'-':>7}"
        print(
            f"{where:<16}{row['clients']:>8}{row['suggestions']:>7}{row['wall_s']:>8.1f}"
            f"{row['per_s']:>8.2f}{ratio}{row['p50_s']:>8.2f}{row['p95_s']:>8.2f}{p95}"
            f"{row['tok_s_per_client']:>10.1f}{row['tok_s_all']:>10.1f}{len(row['errors']):>5}"
        )
    for _where, row in listed:
        for error in row["errors"][:3]:
            print("  error:", error)


def server_rows(args, binary, model, workload, counts, per_client, flash_attn, local_engine,
                figures) -> list[dict]:
    """Start the server with as many slots as the most clients, check its probabilities
    against the local engine's, then run each client count."""
    from portalreview.llm import testing_server
    from portalreview.llm.engines.server import ServerEngine

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        t0 = time.perf_counter()
        server = testing_server.start(
            binary, model, slots=max(counts), ctx_per_slot=args.ctx_per_slot,
            threads=args.threads, gpu=args.gpu, flash_attn=flash_attn, log=log,
            ready_seconds=600,
        )
        try:
            print(f"server started in {time.perf_counter() - t0:.1f} s with {max(counts)} "
                  f"slots, flash attention {flash_attn}")
            setting = ServerSetting(url=server.url, sha256="0" * 64)
            probe = ServerEngine.connect(setting)
            if local_engine is not None:
                worst = probability_difference(probe, local_engine, workload, 24)
                figures[f"max_probability_difference_fa_{flash_attn}"] = worst
                print(f"largest |P(server) - P(local)| over the workload's choice calls: "
                      f"{worst:.2e}")
            replay(probe, workload[0], args.max_tokens)  # warm-up
            for clients in counts:
                row = run_clients(lambda: ServerEngine.connect(setting), workload, clients,
                                  per_client(clients), args.max_tokens)
                row["where"] = f"server fa={flash_attn}"
                rows.append(row)
                print(f"  {clients} client(s): {row['per_s']:.2f} suggestions/s, p95 "
                      f"{row['p95_s']:.2f} s, {len(row['errors'])} errors", flush=True)
        finally:
            server.stop()
            if args.json:
                logs = args.json.parent / f"server-fa-{flash_attn}.log"
                logs.write_bytes(log.read_bytes()[-200_000:])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model file (default: SmolLM2)")
    parser.add_argument("--workload", type=Path, help="a recorded workload (JSON)")
    parser.add_argument("--record", type=Path, help="record the workload to this file and stop")
    parser.add_argument("--per-kind", type=int, default=2)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--per-client", default="",
                        help="suggestions per client, one number or one per client count "
                        "(default: the workload's size / clients, at least 2)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (server and local)")
    parser.add_argument("--gpu", action="store_true", help="server and local engine on the GPU")
    parser.add_argument("--flash-attn", default="off",
                        help="the server's flash attention: off, on, or both (off,on)")
    parser.add_argument("--server-binary", type=Path)
    parser.add_argument("--ctx-per-slot", type=int, default=4096)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)

    from portalreview.llm import testing_server
    from portalreview.llm.engines import load_engine

    model = args.model
    if model is None:
        from portalreview.llm.model_file import small_model_path

        model = small_model_path()
        if model is None:
            sys.exit("no model: run packaging/fetch_small_model.py or give --model")
    if args.workload:
        workload = json.loads(args.workload.read_text())
    else:
        print("recording the workload with", model.name, "...")
        workload = record_workload(model, args.per_kind, args.threads)
    if args.record:
        args.record.write_text(json.dumps(workload))
        print(f"{len(workload)} suggestions recorded in {args.record}")
        return 0
    counts = [int(c) for c in args.clients.split(",")]
    binary = args.server_binary or testing_server.find_binary()
    if binary is None:
        sys.exit("no llama-server: run packaging/build_llama_server.py or give --server-binary")
    n_calls = sum(len(r["calls"]) for r in workload)
    print(f"workload: {len(workload)} suggestions, {n_calls} model calls; model {model.name}; "
          f"{'GPU' if args.gpu else f'CPU, {args.threads} thread(s)'}; max {args.max_tokens} "
          "tokens per answer")

    given = [int(n) for n in args.per_client.split(",") if n]

    def per_client(clients: int) -> int:
        if len(given) == len(counts):
            return given[counts.index(clients)]
        return given[0] if given else max(2, len(workload) // clients)

    figures: dict[str, Any] = {"model": model.name, "gpu": args.gpu}
    t0 = time.perf_counter()
    try:
        local_engine = load_engine(model, isolated=True, gpu=args.gpu, n_threads=args.threads,
                                   hash_cache=False)
    except Exception as exc:  # the server's figures are still worth having
        print(f"THE LOCAL ENGINE DID NOT LOAD: {type(exc).__name__}: {exc}")
        local_engine, local = None, None
    else:
        print(f"local engine loaded in {time.perf_counter() - t0:.1f} s: "
              f"{local_engine.info.describe()}")

        class _Borrowed:  # the one local engine, lent to the client without being closed by it
            def __getattr__(self, name: str) -> Any:
                return getattr(local_engine, name)

            def close(self) -> None:
                pass

        replay(local_engine, workload[0], args.max_tokens)  # warm-up
        local = run_clients(_Borrowed, workload, 1, per_client(1), args.max_tokens)
    figures["local"] = local
    save(args.json, figures)
    rows: list[dict] = []
    figures["server"] = rows
    for flash_attn in args.flash_attn.split(","):
        rows += server_rows(args, binary, model, workload, counts, per_client, flash_attn,
                            local_engine, figures)
        save(args.json, figures)
    if local_engine is not None:
        local_engine.close()
    print_table(rows, local)
    return 0


def save(path: Path | None, figures: dict) -> None:
    if path is not None:
        path.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    sys.exit(main())
