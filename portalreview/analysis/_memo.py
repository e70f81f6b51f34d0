"""Bounded, process-wide memo caches for the analyses' pure per-item computations (private).

Why: a long-running program - the dashboard's live report - analyses the same study again
after every answer that lands. Most of an analysis's cost on a large study is spent on items
that did not change: segmenting the same leftover drafts, tokenising the same responses for
TF-IDF, aligning the same edited drafts, drawing the same bootstrap weights. Each such
computation is a pure function of a few values, so its result is kept here, keyed by those
values, and the next refresh pays only for what is new.

Rules every cache follows (each cache's docstring at its definition names its key and bound):

* **The key is everything the value depends on**, by content - the texts, spans, parameters
  themselves, never a database id or a frame's row number - so a hit is exactly what the
  computation would return now: the cache can never hand back a value of another study,
  another catalog or other settings. (The code of the function itself is the only thing a key
  does not hold; :func:`clear_caches` empties every cache, e.g. between tests.)
* **Bounded**: at most ``max_entries`` entries (and ``max_bytes`` for caches of arrays), least
  recently used dropped first. Each bound is sized so a 10,000-case study's working set fits
  with room to spare (the bound and the measured memory are given where each cache is made).
* **Thread-safe**: one lock per cache; an analysis may run on a worker thread while another
  builds a report. Two threads missing the same key both compute it (the same value).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

_MISSING = object()


class Memo:
    """One bounded least-recently-used cache (see the module docstring).

    ``size_of(value)`` (with ``max_bytes``) gives a value's size in bytes, for caches of large
    arrays; entries are dropped, oldest first, until both bounds hold. A single value larger
    than ``max_bytes`` is returned but not kept.
    """

    def __init__(
        self,
        name: str,
        max_entries: int,
        *,
        max_bytes: int | None = None,
        size_of: Callable[[Any], int] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"a cache holds at least one entry, got max_entries={max_entries}")
        if (max_bytes is None) != (size_of is None):
            raise ValueError("give max_bytes and size_of together")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        _REGISTRY[name] = self

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held, by ``size_of`` (0 for caches without a byte bound)."""
        return self._bytes

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value kept for ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            value = self._entries.get(key, _MISSING)
            if value is _MISSING:
                self.misses += 1
                return default
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def get_many(self, keys: Iterable[Hashable], default: Any = None) -> list[Any]:
        """:meth:`get` of each key, in order, under one lock (``default`` for a miss)."""
        out = []
        entries = self._entries
        with self._lock:
            for key in keys:
                value = entries.get(key, _MISSING)
                if value is _MISSING:
                    self.misses += 1
                    out.append(default)
                else:
                    entries.move_to_end(key)
                    self.hits += 1
                    out.append(value)
        return out

    def put(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` for ``key`` (dropping the least recently used past the bounds);
        returns ``value``."""
        self.put_many([(key, value)])
        return value

    def put_many(self, items: Iterable[tuple[Hashable, Any]]) -> None:
        """:meth:`put` of each (key, value), under one lock."""
        size_of = self._size_of
        entries = self._entries
        with self._lock:
            for key, value in items:
                size = 0 if size_of is None else size_of(value)
                if self.max_bytes is not None and size > self.max_bytes:
                    continue  # larger than the whole cache: returned, not kept
                old = entries.pop(key, _MISSING)
                if old is not _MISSING and size_of is not None:
                    self._bytes -= size_of(old)
                entries[key] = value
                self._bytes += size
            self._trim()

    def fill(
        self, found: list[Any], keys: Sequence[Hashable], make: Callable[[Any], Any]
    ) -> list[Any]:
        """``found`` (lookups of ``keys``, None for a miss) with each miss made by
        ``make(key)`` (once per distinct key) and kept; returns ``found``, filled in place."""
        return self.fill_all(found, keys, lambda missing: [make(key) for key in missing])

    def fill_all(
        self,
        found: list[Any],
        keys: Sequence[Hashable],
        make_all: Callable[[list[Any]], Sequence[Any]],
    ) -> list[Any]:
        """:meth:`fill`, the misses made in one call: ``make_all(missing)`` gives the value
        of each distinct missing key, in the order they are first met in ``keys``."""
        slots: dict[Hashable, list[int]] = {}
        for i, value in enumerate(found):
            if value is None:
                slots.setdefault(keys[i], []).append(i)
        if not slots:
            return found
        made = make_all(list(slots))
        for where, value in zip(slots.values(), made, strict=True):
            for i in where:
                found[i] = value
        self.put_many(zip(slots, made, strict=True))
        return found

    def _trim(self) -> None:
        entries = self._entries
        while len(entries) > self.max_entries or (
            self.max_bytes is not None and self._bytes > self.max_bytes
        ):
            _, dropped = entries.popitem(last=False)
            if self._size_of is not None:
                self._bytes -= self._size_of(dropped)

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept for ``key``, else ``make()`` kept and returned."""
        value = self.get(key, _MISSING)
        return self.put(key, make()) if value is _MISSING else value

    def clear(self) -> None:
        """Forget every entry (and the hit / miss counts)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self.hits = self.misses = 0


_REGISTRY: dict[str, Memo] = {}


def clear_caches() -> None:
    """Empty every analysis cache (a cold start without a new process: tests, benchmarks)."""
    for memo in _REGISTRY.values():
        memo.clear()


def cache_stats() -> dict[str, dict[str, int]]:
    """Per cache: entries kept, its bound, bytes held (array caches), hits and misses."""
    return {
        name: {
            "entries": len(memo),
            "max_entries": memo.max_entries,
            "bytes": memo.nbytes,
            "hits": memo.hits,
            "misses": memo.misses,
        }
        for name, memo in sorted(_REGISTRY.items())
    }
