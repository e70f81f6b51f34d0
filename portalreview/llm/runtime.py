"""A suggestion's ``runtime`` (where its model ran, :attr:`EngineInfo.runtime`) in words.

Kept apart from the engine so that the PI's read-only tools (the prompt dialog, the model
evaluation) can say it without importing llama.cpp.
"""

from __future__ import annotations

from typing import Any

NOT_RECORDED = "not recorded (a suggestion stored before this was recorded)"


def where_it_ran(runtime: dict[str, Any] | None) -> str:
    """The device, its layers or threads, and the llama.cpp build: the same model can answer
    otherwise on a GPU than on a CPU (docs/llm.md, "On a GPU")."""
    if not runtime:
        return NOT_RECORDED
    device = runtime.get("device", "?")
    if runtime.get("gpu_layers"):
        device += f", {runtime['gpu_layers']} of {runtime.get('n_layers', '?')} layers"
    elif device == "CPU" and runtime.get("n_threads"):
        device += f", {runtime['n_threads']} thread{'s' * (runtime['n_threads'] != 1)}"
    return f"{device}; {runtime.get('build') or 'build not known'}"
