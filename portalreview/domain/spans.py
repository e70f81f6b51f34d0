"""Character spans ``[start, end)`` of a text: the one place they are merged."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def merge_spans(spans: Iterable[Sequence[int]]) -> list[list[int]]:
    """The spans sorted, with overlapping or touching spans joined (``[[0, 2], [2, 5]]`` ->
    ``[[0, 5]]``)."""
    merged: list[list[int]] = []
    for start, end in sorted((int(s), int(e)) for s, e in spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
