"""Whether two payloads are the same answer, whatever order an editor lists its entries in.

An editor lists a unit's entries in the order it shows them (the rank cards shuffled for this
clinician, the codes in codebook order, a match's reference sentences then the draft's), while
the store reads them back in the order of their ids (each kind's ``read_many``). The same answer
so looked unchanged only if it had been stored from the very same screen: a flag on an imported
answer counted as a change, and checked by the rules of today, demoted it to a draft.

Only the order the store does not keep is ignored: the listing order of entries keyed by an id
(``response_id``, ``sentence_id``, ``code``), of reasons and of spans (sets, stored sorted). A
rank, a span, a theme or any text still has to be the same.
"""

from __future__ import annotations

from typing import Any

#: kind -> the lists of its payload whose entries are keyed by an id: list name -> key
_KEYED_LISTS: dict[str, dict[str, str]] = {
    "rank": {"entries": "response_id"},
    "match": {"decisions": "sentence_id", "themes": "sentence_id"},
    "eppc": {"labels": "code"},
}
#: lists inside those entries that the store keeps as sets (read back sorted)
_SETS_IN_ENTRIES = ("criteria", "spans")


def in_stored_order(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with its keyed entries, and the sets inside them, in the order the store
    reads them back; a payload that does not have the shape of its kind is returned as it is."""
    keyed = _KEYED_LISTS.get(kind)
    if not keyed or not isinstance(payload, dict):
        return payload
    try:
        ordered = {
            name: sorted(map(_sets_sorted, payload[name]), key=lambda entry: entry[key])
            for name, key in keyed.items()
            if name in payload
        }
    except (TypeError, KeyError, AttributeError):  # not of this kind's shape: compared as given
        return payload
    return {**payload, **ordered}


def same_answer(kind: str, first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether ``first`` and ``second`` store the same answer of ``kind``."""
    return first == second or in_stored_order(kind, first) == in_stored_order(kind, second)


def _sets_sorted(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        name: sorted(value) if name in _SETS_IN_ENTRIES and isinstance(value, list) else value
        for name, value in entry.items()
    }
