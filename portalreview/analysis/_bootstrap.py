"""Bootstrap CIs over units for many figures at once, from unit-level precomputed counts.

Every headline figure of the report is a function of *sums over units* of a few per-unit
numbers (EM, EA and ED of a unit's pairs; a unit's correct and judged answers; a unit's
category counts for Krippendorff's alpha...). A :class:`Resampler` draws the bootstrap
resamples of a kind's units once; a :class:`Population` holds the per-unit columns of one group
of those units and sums every column over every resample with one matrix product, so a
figure's CI costs one vectorised function call rather than recomputing the measure from raw
rows a thousand times.

The resamples are exactly those of :func:`portalreview.metrics.bootstrap_ci` for the same
seed, number of resamples and number of units (``numpy.random.default_rng(seed).integers(0,
n, size=(n_resamples, n))``), and the interval is the same percentile interval (quantiles
0.025 and 0.975 with numpy's linear interpolation; resamples where the figure is undefined are
dropped; no finite resample gives no interval). The tests check the two agree.

A group's figure is undefined on a resample that draws none of the group's units (a group is
resampled within its kind, so that happens to small groups): such a resample holds no data of
the group and is dropped like any undefined one, whatever value the statistic would give to
empty sums (P / R / F1 would say 0.0, Fact-Recall 1.0). Each figure reports how many resamples
its interval rests on (``n_resamples``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._common import CONFIDENCE, Deferred, figure
from portalreview.analysis._memo import Memo

Statistic = Callable[[Mapping[str, np.ndarray]], Any]


#: Bootstrap weights already drawn, as counts of one byte: (layout, n_units, seed,
#: n_resamples) -> :func:`drawn_counts` ("by resample", (n_resamples, n_units)) or
#: :func:`unit_major_counts` ("by unit", its transposed C-ordered copy); and the by-resample
#: counts widened to float32 for the matrix products (:func:`unit_weights`, "float32": widening
#: 10,000 units x 1000 resamples into a new 40 MB array took 0.01-0.05 s at every refresh of a
#: kind, most of it the fresh memory's first touch). Why: every analysis of
#: a refresh resamples its kind's units, and most refreshes draw the same numbers again (a
#: kind's units change only when a new unit gets its first answer); drawing 10,000 units x
#: 1000 resamples takes ~0.06 s, transposing them ~0.02 s. Key: the layout and the three
#: numbers the draws depend on. Bound: 192 MiB, least recently used dropped first (a
#: 10,000-unit kind at 1000 resamples takes 10 MB per layout, at 200 resamples 2 MB: every
#: kind of a 10,000-case study at both settings fits; the synthetic 10,000-case study, whose
#: kinds have two unit counts, holds 29.8 MiB of counts at 1000 resamples, and 81 MiB more of
#: float32 weights: 110.6 MiB measured; 132.8 MiB with both settings). Counts are kept in one byte
#: (a unit is drawn at most a dozen times in practice; a larger count is kept as float32): a
#: quarter of the memory of float32. A :class:`Resampler` takes the float32 by-resample
#: matrix from here (the matrix products need it) and widens only the rows of the units it
#: gathers from the by-unit one.
_DRAWN = Memo(
    "bootstrap.drawn_counts",
    max_entries=256,
    max_bytes=192 * 2**20,
    size_of=lambda value: value.nbytes,
)
# Rows of draws counted per ``np.bincount`` call: about 2**18 draws each (a few MB of offsets).
_COUNT_CHUNK = 2**18


def drawn_counts(n_units: int, seed: int, n_resamples: int) -> np.ndarray:
    """(n_resamples, n_units) array: how often each unit is drawn in each resample, as uint8
    (float32 on the impossible-in-practice count above 255); read-only, cached (see
    ``_DRAWN``).

    The draws are those of ``metrics.bootstrap_ci(units, ..., seed=seed)`` for ``n_units``
    units: ``default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))`` (asked as
    int32 when n_units allows: the same numbers, half the memory). Counted with one
    ``np.bincount`` per chunk of resamples over offset indices (resample r's draw of unit u is
    bin r * n_units + u) instead of one call per resample.
    """
    key = ("by resample", int(n_units), int(seed), int(n_resamples))
    found = _DRAWN.get(key)
    if found is not None:
        return found
    n, rows = key[1], key[3]
    draws = np.random.default_rng(key[2]).integers(
        0, n, size=(rows, n), dtype=np.int64 if n * rows >= 2**31 else np.int32
    )
    counts = _count_draws(draws, np.uint8)
    if counts is None:  # a count above 255: keep float32 (exact for any count)
        counts = _count_draws(draws, np.float32)
    counts.flags.writeable = False
    return _DRAWN.put(key, counts)


def _count_draws(draws: np.ndarray, dtype: type) -> np.ndarray | None:
    """Per row of ``draws`` (unit indices), how often each unit occurs, as ``dtype``; None
    when a count does not fit ``dtype``. One ``np.bincount`` per chunk of rows, over the
    indices offset by row (row r's unit u is bin r * n_units + u)."""
    rows, n = draws.shape
    out = np.empty((rows, n), dtype=dtype)
    limit = np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else None
    step = max(1, _COUNT_CHUNK // max(n, 1))
    for first in range(0, rows, step):
        part = draws[first : first + step]
        offsets = np.arange(part.shape[0], dtype=draws.dtype)[:, None] * n
        counts = np.bincount((part + offsets).reshape(-1), minlength=part.size)
        if limit is not None and counts.max(initial=0) > limit:
            return None
        out[first : first + part.shape[0]] = counts.reshape(part.shape)
    return out


def unit_weights(n_units: int, seed: int, n_resamples: int) -> np.ndarray:
    """(n_resamples, n_units) float32 array: how often each unit is drawn in each resample
    (:func:`drawn_counts`, widened; read-only, cached: see ``_DRAWN``).

    A group of units of the same size (and seed) would get the very same draws from
    bootstrap_ci too. Stored as float32 (exact for counts; the matrix products run twice
    as fast): a resampled sum differs from bootstrap_ci's float64 sum by ~1e-7 relative.
    """
    key = ("float32", int(n_units), int(seed), int(n_resamples))
    found = _DRAWN.get(key)
    if found is None:
        found = drawn_counts(n_units, seed, n_resamples).astype(np.float32)
        found.flags.writeable = False
        _DRAWN.put(key, found)
    return found


def unit_major_counts(n_units: int, seed: int, n_resamples: int) -> np.ndarray:
    """:func:`drawn_counts` transposed into a C-ordered (n_units, n_resamples) copy, so that
    the weights of a few units are a few contiguous rows (cheap to gather) instead of a few
    scattered entries of every resample's row; read-only, cached (see ``_DRAWN``)."""
    key = ("by unit", int(n_units), int(seed), int(n_resamples))
    found = _DRAWN.get(key)
    if found is None:
        found = np.ascontiguousarray(drawn_counts(n_units, seed, n_resamples).T)
        found.flags.writeable = False
        _DRAWN.put(key, found)
    return found


def unit_major_weights(n_units: int, seed: int, n_resamples: int) -> np.ndarray:
    """:func:`unit_weights` transposed into a C-ordered (n_units, n_resamples) float32 copy
    (:func:`unit_major_counts`, widened)."""
    weights = unit_major_counts(n_units, seed, n_resamples).astype(np.float32)
    weights.flags.writeable = False
    return weights


def percentile_interval(values: np.ndarray) -> tuple[float, float] | None:
    """The 95% percentile interval of resampled values (NaN dropped), as bootstrap_ci."""
    return interval_and_count(values)[0]


def interval_and_count(values: np.ndarray) -> tuple[tuple[float, float] | None, int]:
    """:func:`percentile_interval` of resampled values and how many finite values (resamples
    where the figure is defined) it rests on."""
    finite = np.asarray(values, dtype=float).reshape(-1)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return None, 0
    tail = (1.0 - CONFIDENCE) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return (float(low), float(high)), int(finite.size)


class Resampler:
    """One set of bootstrap resamples of a kind's units, shared by every figure of that kind.

    ``unit_ids`` are the units that are resampled (a kind's answered units). A figure over a
    subset of them (one source, one annotator...) is computed on the same resampled studies:
    its units outside the subset add nothing, so how many of its own units a resample holds
    varies, as it would when re-running the study. ``n_resamples=0``: no intervals.
    """

    def __init__(self, unit_ids: Iterable[Any], *, seed: int = 0, n_resamples: int = 1000):
        self.units = pd.Index(sorted(set(unit_ids)))
        self.seed = int(seed)
        self.n_resamples = int(n_resamples)
        self._pending: list[tuple[Population, np.ndarray, np.ndarray]] = []
        self._max_weight: float | None = None
        self._weights: np.ndarray | None = None
        self._by_unit: np.ndarray | None = None

    @property
    def weights(self) -> np.ndarray | None:
        """The (n_resamples, n_units) float32 weights of :func:`unit_weights`, made once per
        resampler (None when intervals are off or there is no unit)."""
        if self.off:
            return None
        if self._weights is None:
            self._weights = unit_weights(len(self.units), self.seed, self.n_resamples)
        return self._weights

    def _unit_rows(self, where: np.ndarray) -> np.ndarray:
        """Rows ``where`` of :func:`unit_major_weights` ((len(where), n_resamples) float32,
        C-ordered): gathered from the cached counts and widened, not the whole matrix."""
        if self._by_unit is None:
            self._by_unit = unit_major_counts(len(self.units), self.seed, self.n_resamples)
        return self._by_unit[where].astype(np.float32)

    def _where(self, unit_ids: Any) -> np.ndarray:
        where = self.units.get_indexer(pd.Index(unit_ids))
        if (where < 0).any() or len(np.unique(where)) != len(where):
            raise ValueError("a population's units must be distinct units of the resampler")
        return where

    def _small(self, where: np.ndarray) -> bool:
        return 4 * len(where) < len(self.units)

    @property
    def off(self) -> bool:
        """No intervals: no resample asked for, or no unit to resample."""
        return self.n_resamples == 0 or len(self.units) == 0

    def drawn(self, unit_ids: Any) -> np.ndarray | None:
        """How many of ``unit_ids``' units each resample draws (with repeats)."""
        if self.off:
            return None
        where = self._where(unit_ids)
        if self._small(where):
            return self._unit_rows(where).sum(axis=0, dtype=np.float64)
        return self.weights[:, where].sum(axis=1, dtype=np.float64)

    def resampled_sums(self, matrix: np.ndarray, unit_ids: Any) -> np.ndarray | None:
        """Column sums of ``matrix`` (one row per unit of ``unit_ids``) over each resample."""
        if self.off:
            return None
        where = self._where(unit_ids)
        values = matrix.astype(np.float32)
        if self._small(where):  # a small group: take its units' weights only
            # ``rows.T`` is ``weights[:, where]`` with the same (Fortran-ordered) layout, so
            # the product and its float32 rounding are the same; it is gathered from whole
            # rows instead of a few entries of every resample's row.
            rows = self._unit_rows(where)
            return (rows.T @ values).astype(float)
        full = np.zeros((len(self.units), matrix.shape[1]), dtype=np.float32)
        full[where] = values
        return (self.weights @ full).astype(float)

    # --- deferred populations, summed together ---------------------------------------------

    def exact_in_float32(self, matrix: np.ndarray) -> bool:
        """Whether every resampled sum of ``matrix`` is an integer below 2**24 (so float32
        holds it and every partial sum exactly, whatever order a product adds them in)."""
        if matrix.size == 0 or not np.array_equal(matrix, np.rint(matrix)):
            return False  # NaN, infinities and fractions fail here
        if self._max_weight is None:
            counts = drawn_counts(len(self.units), self.seed, self.n_resamples)
            self._max_weight = float(counts.max())
        return float(np.abs(matrix).sum(axis=0).max()) * self._max_weight < 2**24

    def defer(self, population: Population, matrix: np.ndarray, unit_ids: Any) -> bool:
        """Queue ``population``'s resampled sums to be computed with the others queued
        (:meth:`flush`), when that cannot change them: a large group of integer columns.
        Returns False (nothing queued) otherwise; the caller then sums it on its own."""
        where = self._where(unit_ids)
        if self.off or self._small(where) or not self.exact_in_float32(matrix):
            return False
        self._pending.append((population, matrix.astype(np.float32), where))
        return True

    def flush(self, max_columns: int = 512) -> None:
        """Compute every queued population's resampled sums, a few hundred columns per matrix
        product: one pass over the weights instead of one per population. The sums are
        exact integers, so they equal :meth:`resampled_sums`' bit for bit."""
        pending, self._pending = self._pending, []
        while pending:
            chunk, width = [], 0
            while pending and (not chunk or width + pending[0][1].shape[1] <= max_columns):
                chunk.append(pending.pop(0))
                width += chunk[-1][1].shape[1]
            full = np.zeros((len(self.units), width), dtype=np.float32)
            start = 0
            for _, values, where in chunk:
                full[where, start : start + values.shape[1]] = values
                start += values.shape[1]
            sums = (self.weights @ full).astype(float)
            start = 0
            for population, values, _ in chunk:
                population._set_boot(sums[:, start : start + values.shape[1]])
                start += values.shape[1]


class Population:
    """Per-unit columns of one group of units, summed over all units and over resamples.

    ``columns`` maps a name to one value per unit (shape (n,)) or to a block of values per
    unit (shape (n, c)); ``unit_ids`` names the n units (in row order). A statistic receives
    a mapping of the same names to the summed values - shape (r,) or (r, c), r = 1 for the
    point estimate and r = n_resamples for the bootstrap - and returns one figure per row.
    With a ``resampler`` the units are resampled as part of it; without one, the group's own
    units are resampled (``seed``, ``n_resamples``; 0 turns intervals off).

    ``deferred=True`` (the analyses' populations, see ``Settings.population``): the resampled
    sums are computed only when an interval is first needed, together with every other
    deferred population of the same resampler (:meth:`Resampler.flush`), and :meth:`figure`
    leaves its CI to be filled in when the result goes through ``jsonable``. Only integer
    columns are deferred, whose sums are exact in any order, so the CIs are the same.
    """

    def __init__(
        self,
        columns: Mapping[str, Any],
        unit_ids: Any = None,
        *,
        resampler: Resampler | None = None,
        seed: int = 0,
        n_resamples: int = 1000,
        deferred: bool = False,
    ) -> None:
        blocks = {k: _as_block(v) for k, v in columns.items()}
        sizes = {b.shape[0] for b in blocks.values()}
        if len(sizes) > 1:
            raise ValueError(f"columns differ in length: {sorted(sizes)}")
        self.n_units = sizes.pop() if sizes else 0
        self._slices: dict[str, tuple[slice, bool]] = {}
        start = 0
        for name, block in blocks.items():
            self._slices[name] = (slice(start, start + block.shape[1]), np.ndim(columns[name]) == 1)
            start += block.shape[1]
        matrix = np.hstack(list(blocks.values())) if blocks else np.zeros((self.n_units, 0))
        self._full = matrix.sum(axis=0, keepdims=True)
        if resampler is None:
            ids = np.arange(self.n_units)
            resampler = Resampler(ids, seed=seed, n_resamples=n_resamples)
            unit_ids = ids
        self._resampler = resampler
        self._boot: np.ndarray | None = None
        self._deferred = False
        # Which resamples draw none of the units (the figure is undefined there): a column
        # positive on every unit (a "witness") has a resampled sum of 0 exactly on those; an
        # integer matrix without one gets a column of ones (its integer sums are exact, so
        # the other columns' sums do not change); otherwise the draws are counted apart.
        self._witness: int | None = None
        self._drawn: np.ndarray | None = None
        if self.n_units > 0 and not resampler.off:
            matrix = self._with_witness(matrix, unit_ids)
        if self.n_units > 0:
            if deferred and resampler.defer(self, matrix, unit_ids):
                self._deferred = True
            else:
                self._boot = resampler.resampled_sums(matrix, unit_ids)

    def _with_witness(self, matrix: np.ndarray, unit_ids: Any) -> np.ndarray:
        positive = np.flatnonzero((matrix.astype(np.float32) > 0).all(axis=0))
        if len(positive):
            self._witness = int(positive[0])
        elif np.array_equal(matrix, np.rint(matrix)):
            self._witness = matrix.shape[1]
            return np.hstack([matrix, np.ones((self.n_units, 1))])
        else:
            self._drawn = self._resampler.drawn(unit_ids)
        return matrix

    def _empty_resamples(self, boot: np.ndarray) -> np.ndarray:
        """Whether each resample draws none of the population's units."""
        if self._witness is not None:
            return boot[:, self._witness] == 0
        if self._drawn is not None:
            return self._drawn == 0
        return np.zeros(boot.shape[0], dtype=bool)

    def _set_boot(self, sums: np.ndarray) -> None:
        self._boot, self._deferred = sums, False

    def _resampled_sums(self) -> np.ndarray | None:
        if self._deferred:
            self._resampler.flush()
        return self._boot

    def _view(self, sums: np.ndarray) -> dict[str, np.ndarray]:
        return {
            name: sums[:, cut][:, 0] if flat else sums[:, cut]
            for name, (cut, flat) in self._slices.items()
        }

    def totals(self) -> dict[str, Any]:
        """The column sums over all units (a number per column, an array per block)."""
        return {k: v[0] for k, v in self._view(self._full).items()}

    def value(self, statistic: Statistic) -> float:
        """The statistic on all units."""
        with np.errstate(divide="ignore", invalid="ignore"):
            result = statistic(self._view(self._full))
        return float(np.asarray(result, dtype=float).reshape(-1)[0])

    def resampled(self, statistic: Statistic) -> np.ndarray | None:
        """The statistic on each bootstrap resample (NaN where undefined, and on resamples
        that draw none of the population's units), or None when intervals are off: for a
        figure that combines several populations resample by resample (they must share one
        resampler)."""
        boot = self._resampled_sums()
        if boot is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.asarray(statistic(self._view(boot)), dtype=float).reshape(-1)
        empty = self._empty_resamples(boot)
        return np.where(empty, np.nan, values) if empty.any() else values

    def interval(self, statistic: Statistic) -> tuple[float, float] | None:
        """The 95% bootstrap CI of the statistic over units (None when off or undefined)."""
        return self.interval_and_count(statistic)[0]

    def interval_and_count(self, statistic: Statistic) -> tuple[tuple[float, float] | None, int]:
        """:meth:`interval` and the number of resamples it rests on (those where the figure
        is defined; 0 when intervals are off)."""
        values = self.resampled(statistic)
        return (None, 0) if values is None else interval_and_count(values)

    def figure(self, statistic: Statistic, n_units: int | None = None) -> dict[str, Any]:
        """``{"value", "ci", "n_units", "n_resamples"}`` of the statistic (value None with no
        units); ``n_resamples`` counts the resamples the interval rests on.

        ``n_units`` is the number of units the figure rests on when it is fewer than the
        population's (a figure over the units of one difficulty bucket, one source...)."""
        if self.n_units == 0:
            return figure(None, None, 0)
        count = self.n_units if n_units is None else n_units
        if self._deferred:
            out = figure(self.value(statistic), None, count)
            out["ci"] = interval = DeferredInterval(self, statistic)
            out["n_resamples"] = DeferredCount(interval)
            return out
        ci, used = self.interval_and_count(statistic)
        return figure(self.value(statistic), ci, count, used)


class DeferredInterval(Deferred):
    """The CI of a deferred population's figure, computed when the result is made JSON-ready
    (``jsonable``): by then every population of the analysis is queued and summed at once."""

    def __init__(self, population: Population, statistic: Statistic) -> None:
        self.population, self.statistic = population, statistic
        self._result: tuple[tuple[float, float] | None, int] | None = None

    def result(self) -> tuple[tuple[float, float] | None, int]:
        """The interval and the number of resamples it rests on (computed once)."""
        if self._result is None:
            self._result = self.population.interval_and_count(self.statistic)
        return self._result

    def json(self) -> list[float | None] | None:
        return figure(None, self.result()[0], 0)["ci"]


class DeferredCount(Deferred):
    """The ``n_resamples`` of a deferred figure: the resamples its interval rests on."""

    def __init__(self, interval: DeferredInterval) -> None:
        self.interval = interval

    def json(self) -> int:
        return self.interval.result()[1]


def _as_block(values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        return array[:, None]
    if array.ndim != 2:
        raise ValueError("a column must be one value or one row of values per unit")
    return array


# --------------------------------------------------------------------------------------------
# Vectorised statistics on summed counts (one row per resample)
# --------------------------------------------------------------------------------------------


def nominal_alpha(n_values: np.ndarray, disagreement: np.ndarray, category_totals: np.ndarray):
    """Krippendorff's alpha (nominal) from summed unit-level terms (seed 002, Table 4).

    For the pairable units (2+ values), n_values = sum of m_u (values per unit), disagreement
    = sum of (m_u^2 - sum_c n_uc^2) / (m_u - 1) and category_totals = sum of n_uc per category.
    Then alpha = 1 - (n - 1) * disagreement / (n^2 - sum_c n_c^2): Krippendorff's
    1 - D_o / D_e written on counts. NaN when every value is the same category (D_e = 0), as
    ``metrics.krippendorff_alpha``. The tests check it against the ``krippendorff`` package.
    """
    n = np.asarray(n_values, dtype=float)
    totals = np.atleast_2d(category_totals)
    expected = n**2 - (totals**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - (n - 1.0) * disagreement / expected
    return np.where(expected > 0, out, np.nan)


def alpha_terms(category_counts: np.ndarray) -> dict[str, np.ndarray]:
    """Per-unit terms of :func:`nominal_alpha` from a units x categories count table; units
    with fewer than 2 values contribute zeros (they are not pairable)."""
    counts = np.asarray(category_counts, dtype=float)
    m = counts.sum(axis=1)
    pairable = m >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pairable, (m**2 - (counts**2).sum(axis=1)) / (m - 1), 0.0)
    return {
        "alpha_n": np.where(pairable, m, 0.0),
        "alpha_d": d,
        "alpha_c": counts * pairable[:, None],
    }


def alpha_statistic(sums: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`nominal_alpha` on a population built with :func:`alpha_terms`."""
    return nominal_alpha(sums["alpha_n"], sums["alpha_d"], sums["alpha_c"])


def binary_kappa(n00: Any, n01: Any, n10: Any, n11: Any) -> np.ndarray:
    """Cohen's kappa of two raters' yes/no answers from their 2x2 table (seed 003, 3.2.2).

    n01 = first said no, second yes. kappa = (p_o - p_e) / (1 - p_e); NaN with no item or when
    both raters used a single, same category everywhere (``metrics.cohen_kappa``'s rule).
    """
    n00, n01, n10, n11 = (np.asarray(x, dtype=float) for x in (n00, n01, n10, n11))
    total = n00 + n01 + n10 + n11
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (n00 + n11) / total
        a_yes = (n10 + n11) / total
        b_yes = (n01 + n11) / total
        chance = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
        kappa = (observed - chance) / (1 - chance)
    return np.where((total > 0) & (chance < 1), kappa, np.nan)


def kappa_statistic(sums: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`binary_kappa` on summed columns n00, n01, n10, n11."""
    return binary_kappa(sums["n00"], sums["n01"], sums["n10"], sums["n11"])


def presence_alpha_blocks(raters: np.ndarray, present: np.ndarray) -> dict[str, np.ndarray]:
    """Per-unit terms of nominal alpha on yes/no presence of several labels at once.

    ``raters[u]`` is how many raters answered unit u and ``present[u, j]`` how many of them
    gave label j. Only pairable units (2+ raters) are kept. Use with :func:`presence_alpha`.
    """
    m = np.asarray(raters, dtype=float).reshape(-1, 1)
    present = np.asarray(present, dtype=float)
    keep = m[:, 0] >= 2
    m, present = m[keep], present[keep]
    absent = m - present
    return {
        "n": np.repeat(m, present.shape[1], axis=1),
        "d": (m**2 - present**2 - absent**2) / (m - 1),
        "absent": absent,
        "present": present,
    }


def presence_alpha(sums: Mapping[str, np.ndarray], label: int | None = None) -> np.ndarray:
    """Nominal alpha of label ``label``'s presence, or pooled over (unit, label) items when
    ``label`` is None, from sums of :func:`presence_alpha_blocks` columns."""

    def pick(block: np.ndarray) -> np.ndarray:
        return block.sum(axis=1) if label is None else block[:, label]

    totals = np.stack([pick(sums["absent"]), pick(sums["present"])], axis=1)
    return nominal_alpha(pick(sums["n"]), pick(sums["d"]), totals)
