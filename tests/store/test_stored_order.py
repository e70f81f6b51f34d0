"""Two payloads are the same answer whatever order their keyed entries are listed in, and only
then (``portalreview.store.kinds.stored_order``)."""

from __future__ import annotations

import pytest

from portalreview.store.kinds.stored_order import same_answer

RANK = {
    "entries": [
        {"response_id": 4, "rank": 1, "correct": False, "criteria": ["C2", "C1"]},
        {"response_id": 3, "rank": 2, "correct": True, "criteria": []},
    ]
}
MATCH = {
    "decisions": [{"sentence_id": 9, "spans": [[20, 30], [0, 5]]}, {"sentence_id": 8, "spans": []}],
    "themes": [{"sentence_id": 9, "theme": "empathy"}, {"sentence_id": 2, "theme": "planning"}],
}
EPPC = {
    "labels": [
        {"code": "InfoSeek", "subcode": "Symptoms", "spans": [[7, 11]]},
        {"code": "InfoGiveSDOH", "subcode": "EconomicStability", "spans": [[0, 6]]},
    ]
}


def _reversed(payload: dict) -> dict:
    """The same answer, every list in it listed the other way round (a span's [start, end]
    kept)."""

    def turn(value):
        if isinstance(value, list) and not all(isinstance(item, int) for item in value):
            return [turn(item) for item in reversed(value)]
        if isinstance(value, dict):
            return {key: turn(item) for key, item in value.items()}
        return value

    return turn(payload)


@pytest.mark.parametrize(("kind", "payload"), [("rank", RANK), ("match", MATCH), ("eppc", EPPC)])
def test_the_listing_order_of_entries_and_sets_is_not_a_change(kind, payload):
    assert _reversed(payload) != payload
    assert same_answer(kind, payload, _reversed(payload))


def _changed(payload: dict, path: tuple, value) -> dict:
    import copy

    changed = copy.deepcopy(payload)
    *parents, last = path
    target = changed
    for key in parents:
        target = target[key]
    target[last] = value
    return changed


@pytest.mark.parametrize(
    ("kind", "payload", "path", "value"),
    [
        ("rank", RANK, ("entries", 0, "rank"), 2),  # a tie is another answer
        ("rank", RANK, ("entries", 1, "correct"), None),
        ("rank", RANK, ("entries", 0, "criteria"), ["C1"]),
        ("match", MATCH, ("decisions", 0, "spans"), [[0, 5]]),
        ("match", MATCH, ("themes", 1, "theme"), "empathy"),
        ("eppc", EPPC, ("labels", 0, "subcode"), "Diagnostics"),
        ("eppc", EPPC, ("labels", 1, "spans", 0), [0, 7]),
    ],
)
def test_any_change_of_what_an_answer_says_is_a_change(kind, payload, path, value):
    assert not same_answer(kind, payload, _changed(payload, path, value))
    assert not same_answer(kind, _reversed(payload), _changed(payload, path, value))


def test_ranks_swapped_between_responses_are_another_answer():
    entries = RANK["entries"]
    swapped = {"entries": [{**entries[0], "rank": 2}, {**entries[1], "rank": 1}]}
    assert not same_answer("rank", RANK, swapped)


def test_the_order_of_other_kinds_lists_counts():
    """A facts answer keeps its facts in order (their positions are stored)."""
    facts = {"facts": [{"side": "original", "text": "A."}, {"side": "original", "text": "B."}]}
    assert not same_answer("facts", facts, _reversed(facts))


def test_a_payload_not_of_its_kinds_shape_is_compared_as_it_is():
    odd = {"entries": [{"rank": 1}, "not an entry"]}
    assert same_answer("rank", odd, odd)
    assert not same_answer("rank", odd, RANK)
