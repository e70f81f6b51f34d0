"""Figures of a group of units kept for the process, by the content they are computed from
(private).

Why: a live refresh after one saved answer recomputes every figure of the answer's kind, but
the answer changes the per-unit columns of one unit only: the groups it is not in (other
draft sources, other annotators, other pairs of annotators) give the very same columns, and
so the very same figures and intervals. A group's figures are a function of its per-unit
columns, its units, the kind's resampler (its units, seed and number of resamples) and the
code that computes them (named by the caller); :func:`kept_figures` keeps them under a digest
of all of these and computes only the groups it has not met, so their bootstrap sums and
intervals are skipped (the skipped populations are not summed in the analysis's deferred
matrix product either).

The values kept are JSON-ready (``jsonable``): a group computed afresh returns its figures
with their intervals still deferred, and keeps them once the analysis's result is made
JSON-ready (when every deferred population of the analysis has been summed together).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from portalreview.analysis._common import Deferred, Settings, jsonable
from portalreview.analysis._memo import Memo

#: A group's figures (``make(population)``, JSON-ready), kept for the process. Key: the
#: caller's name for ``make`` and what it reads besides the population (``extra``), the
#: resampler's seed, resample count and units, and a BLAKE2b digest of the population's
#: column names, shapes and values (as the float64 the population sums) and unit ids - all the
#: figures depend on. Bound: 4,096 groups, least recently used dropped first (a 10,000-case
#: study's match, respond and editing-load tables have about 30 groups, a few KB each).
_KEPT = Memo("figures.kept_groups", max_entries=4_096)

_RESAMPLER_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

Make = Callable[[Any], Mapping[str, Any]]


def kept_figures(
    name: str,
    settings: Settings,
    columns: Mapping[str, Any],
    unit_ids: Any,
    make: Make,
    extra: Hashable = (),
) -> dict[str, Any]:
    """``make(settings.population(columns, unit_ids))``: kept, or computed and then kept.

    ``name`` names ``make``'s code (one name, one function); ``extra`` holds whatever else
    ``make`` reads. Read the result, never change it in place: a kept value is shared."""
    key = (name, extra, _resampler_key(settings), _digest(columns, unit_ids))
    found = _KEPT.get(key)
    if found is not None:
        return found
    made = make(settings.population(columns, unit_ids))
    return _Keeping(key, made).values()


class _Keeping:
    """A group's freshly made figures: kept in ``_KEPT`` once each is JSON-ready."""

    def __init__(self, key: Hashable, made: Mapping[str, Any]) -> None:
        self.key, self.made = key, dict(made)
        self.ready: dict[str, Any] = {}

    def values(self) -> dict[str, Any]:
        """The figures, each one that waits on the bootstrap sums as a :class:`_KeptValue`."""
        out = {}
        for name, value in self.made.items():
            if value is None or type(value) in (int, float, str, bool):
                out[name] = self.ready[name] = jsonable(value)
            else:
                out[name] = _KeptValue(self, name)
        self._keep_when_done()
        return out

    def resolve(self, name: str) -> Any:
        self.ready[name] = value = jsonable(self.made[name])
        self._keep_when_done()
        return value

    def _keep_when_done(self) -> None:
        if len(self.ready) == len(self.made):
            _KEPT.put(self.key, {name: self.ready[name] for name in self.made})


class _KeptValue(Deferred):
    """One figure of a :class:`_Keeping`, made JSON-ready with the analysis's result."""

    def __init__(self, keeping: _Keeping, name: str) -> None:
        self.keeping, self.name = keeping, name

    def json(self) -> Any:
        return self.keeping.resolve(self.name)


def _resampler_key(settings: Settings) -> tuple:
    resampler = settings.resampler
    if resampler is None:
        return (settings.seed, settings.n_resamples, None)
    found = _RESAMPLER_KEYS.get(resampler)
    if found is None:
        units = _digest({}, resampler.units.to_numpy())
        found = _RESAMPLER_KEYS[resampler] = (resampler.seed, resampler.n_resamples, units)
    return found


def _digest(columns: Mapping[str, Any], unit_ids: Any) -> bytes:
    """BLAKE2b of the columns (names, shapes, float64 values) and the unit ids."""
    h = hashlib.blake2b(digest_size=32)
    for column, values in columns.items():
        array = np.ascontiguousarray(np.asarray(values, dtype=float))
        h.update(repr((column, array.shape)).encode())
        h.update(array.tobytes())
    ids = np.asarray(unit_ids)
    if ids.dtype.kind in "iu":
        h.update(b"ids")
        h.update(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    else:
        h.update(repr(ids.tolist()).encode())
    return h.digest()
