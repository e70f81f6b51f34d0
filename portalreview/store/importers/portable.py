"""Portable references: internal database ids <-> ids that mean something in another project.

Answer payloads, units, assignment presentations and the parameters of suggestions hold internal
ids (``response_id: 7``).
In files they hold *portable references* instead:

* a case -> its external id (``"c1"``);
* a response -> its external id (``"d1"``);
* a sentence -> ``{"owner": "<external id>", "of": "case" | "response", "position": n}``
  (the n-th sentence, from 0, of that case's message or that response's text);
* a unit -> ``{"set": "<unit set name>", "position": n}``.

Where the references sit is a table per kind (:data:`ANSWER_REFS`, and for units, presentations
and suggestions' parameters), not code per kind: one walker (:func:`translate`) applies a table
in either direction. A new kind adds one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

ITEMS = "[]"  # a step meaning: every item of a list
KEYS = "{}"  # a step meaning: every key of an object (must be the last step)

Convert = Callable[[str, Any, str], Any]  # (reference kind, value, field path) -> value


@dataclass(frozen=True)
class RefPath:
    """Where a reference sits in a JSON value (``steps``) and what it refers to (``ref``)."""

    steps: tuple[str, ...]
    ref: str  # "case", "response" or "sentence"


ANSWER_REFS: dict[str, tuple[RefPath, ...]] = {
    "respond": (RefPath(("base_response_id",), "response"),),
    "rank": (RefPath(("entries", ITEMS, "response_id"), "response"),),
    "match": (
        RefPath(("decisions", ITEMS, "sentence_id"), "sentence"),
        RefPath(("themes", ITEMS, "sentence_id"), "sentence"),
    ),
    "urgency": (RefPath(("more_urgent_case_id",), "case"), RefPath(("levels", KEYS), "case")),
    "eppc": (),
    "empathy": (RefPath(("more_empathetic_response_id",), "response"),),
    "facts": (),
}

UNIT_REFS: tuple[RefPath, ...] = (
    RefPath(("case_id",), "case"),
    RefPath(("case_b_id",), "case"),
    RefPath(("response_id",), "response"),
    RefPath(("response_b_id",), "response"),
    RefPath(("sentence_id",), "sentence"),
    RefPath(("members", ITEMS), "response"),
)

PRESENTATION_REFS: dict[str, tuple[RefPath, ...]] = {
    "rank": (RefPath(("order", ITEMS), "response"),),
}

# A suggestion's parameters keep the numbers behind the model's answer ("observed", see
# llm/suggest.py), which name the responses or cases they are about.
SUGGESTION_PARAM_REFS: dict[str, tuple[RefPath, ...]] = {
    "rank": (RefPath(("observed", "order", ITEMS), "response"),),
    "empathy": (RefPath(("observed", "order", ITEMS), "response"),),
    "urgency": (
        RefPath(("observed", "a"), "case"),
        RefPath(("observed", "b"), "case"),
        RefPath(("observed", "levels", KEYS), "case"),
    ),
}

# The reference columns each unit kind must have (the others are empty), besides case_id.
UNIT_SHAPES: dict[str, tuple[str, ...]] = {
    "respond": (),
    "rank": ("members",),
    "match": ("response_id", "response_b_id"),
    "urgency": ("case_b_id",),
    "eppc": ("sentence_id",),
    "empathy": ("response_id", "response_b_id"),
    "facts": ("response_id", "response_b_id"),
}
# The reference columns a unit kind may have or not: a respond unit that names a response
# asks to edit that draft (schema version 2).
UNIT_OPTIONAL: dict[str, tuple[str, ...]] = {"respond": ("response_id",)}


def translate(value: Any, paths: tuple[RefPath, ...], convert: Convert) -> Any:
    """A copy of ``value`` with every reference at ``paths`` replaced by ``convert``.

    Parts of ``value`` that do not have the expected shape are left as they are (the kind's
    own validation reports them); null references stay null. Object keys (``KEYS``) are
    converted and written back as text.
    """
    for path in paths:
        value = _walk(value, path.steps, path.ref, convert, "")
    return value


class IdsToRefs(Protocol):
    """Internal id -> portable reference (the exporter's side)."""

    def case(self, case_id: int) -> str: ...

    def response(self, response_id: int) -> str: ...

    def sentence(self, sentence_id: int) -> dict: ...


class RefsToIds(Protocol):
    """Portable reference -> internal id (the importer's side); raises with ``trail`` (the
    field path) in its message when the reference is wrong or unknown."""

    def case(self, ref: Any, trail: str) -> int: ...

    def response(self, ref: Any, trail: str) -> int: ...

    def sentence(self, ref: Any, trail: str) -> int: ...


def to_portable(value: Any, paths: tuple[RefPath, ...], names: IdsToRefs) -> Any:
    """``value`` with the internal ids at ``paths`` replaced by portable references."""
    return translate(value, paths, lambda ref, v, _trail: getattr(names, ref)(int(v)))


def to_internal(value: Any, paths: tuple[RefPath, ...], ids: RefsToIds) -> Any:
    """``value`` with the portable references at ``paths`` resolved to internal ids."""
    return translate(value, paths, lambda ref, v, trail: getattr(ids, ref)(v, trail))


def answer_to_portable(kind: str, payload: dict, names: IdsToRefs) -> dict:
    """An answer payload of ``kind`` as it is written to a file."""
    return to_portable(payload, ANSWER_REFS[kind], names)


def answer_to_internal(kind: str, payload: dict, ids: RefsToIds) -> dict:
    """An answer payload of ``kind`` read from a file, ready for the kind's codec."""
    return to_internal(payload, ANSWER_REFS[kind], ids)


def presentation_refs(kind: str) -> tuple[RefPath, ...]:
    """Where an assignment's presentation of a ``kind`` unit holds references."""
    return PRESENTATION_REFS.get(kind, ())


def params_refs(kind: str) -> tuple[RefPath, ...]:
    """Where the parameters of a ``kind`` suggestion hold references."""
    return SUGGESTION_PARAM_REFS.get(kind, ())


def params_to_portable(kind: str, params: Any, names: IdsToRefs) -> Any:
    """A suggestion's parameters as written to a file. They are provenance, not an answer:
    a value that is not the id of anything in the project (a file imported before references
    in parameters were translated) is written as it is, and the importer leaves it out."""

    def convert(ref: str, value: Any, _trail: str) -> Any:
        try:
            return getattr(names, ref)(int(value))
        except (KeyError, TypeError, ValueError):
            return value

    return translate(params, params_refs(kind), convert)


def _walk(value: Any, steps: tuple[str, ...], ref: str, convert: Convert, trail: str) -> Any:
    if not steps:
        return None if value is None else convert(ref, value, trail)
    step, rest = steps[0], steps[1:]
    if step == ITEMS:
        if not isinstance(value, list):
            return value
        return [_walk(v, rest, ref, convert, f"{trail}[{i}]") for i, v in enumerate(value)]
    if step == KEYS:
        if not isinstance(value, dict):
            return value
        return {str(convert(ref, k, f"{trail}.{k}")): v for k, v in value.items()}
    if not isinstance(value, dict) or step not in value:
        return value
    copy = dict(value)
    copy[step] = _walk(value[step], rest, ref, convert, f"{trail}.{step}" if trail else step)
    return copy


def sorted_json(value: Any) -> Any:
    """``value`` with every object's keys in sorted order (stable files)."""
    if isinstance(value, dict):
        return {k: sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(v) for v in value]
    return value
