"""Small helpers shared by the metric modules (private).

Nothing here implements a paper's measure; these are the arithmetic and validation pieces the
public functions are built from. numpy and pandas are imported inside the helpers that need
them, so that a module using only the arithmetic (``edit_f1``, ``editing``) imports neither.
"""

from __future__ import annotations

import functools
import math
import numbers
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def is_missing(value: Any) -> bool:
    """True for ``None``, float NaN (numpy included), ``pd.NA`` and ``pd.NaT``; never for
    sequences or other values."""
    if value is None:
        return True
    if isinstance(value, float):  # numpy's float64 included
        return math.isnan(value)
    if isinstance(value, (str, bytes, tuple, list, set, frozenset, dict)):
        return False
    import numpy as np
    import pandas as pd

    try:
        result = pd.isna(value)
    except (TypeError, ValueError):
        return False
    return bool(result) if isinstance(result, (bool, np.bool_)) else False


def composed(text: str) -> str:
    """``text`` in Unicode's composed form (NFC), so that a letter typed with a separate accent
    is the same word as its one-code-point form. An ASCII text is returned as it is, unread
    (NFC leaves it unchanged; ``isascii`` costs nothing)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def ratio(numerator: float, denominator: float, zero_division: float) -> float:
    """``numerator / denominator``, or ``zero_division`` when the denominator is 0."""
    if denominator == 0:
        return float(zero_division)
    return float(numerator) / float(denominator)


def f1_from_counts(tp: float, fp: float, fn: float, zero_division: float) -> float:
    """F1 = 2TP / (2TP + FP + FN), the harmonic mean of precision and recall.

    Written on counts (as scikit-learn does) so that F1 stays defined, and equal to 0, when only
    one of precision or recall is undefined; ``zero_division`` only when TP = FP = FN = 0.
    """
    return ratio(2 * tp, 2 * tp + fp + fn, zero_division)


def harmonic_mean(a: float, b: float) -> float:
    """Harmonic mean of two scores in [0, 1]; 0.0 when both are 0; NaN if either is NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a + b == 0:
        return 0.0
    return 2 * a * b / (a + b)


def check_count(value: Any, name: str) -> int:
    """A non-negative integer count, or ValueError naming ``name``."""
    # numbers.Integral holds int and numpy's integer types (numpy registers them), not float
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def check_probability(value: float, name: str) -> float:
    """A number strictly between 0 and 1, or ValueError naming ``name``."""
    v = float(value)
    if not 0 < v < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) of finite values.

    The SD is NaN when fewer than two values are given; both are NaN for no values.
    """
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else math.nan
    return float(np.mean(arr)), sd


def sorted_labels(labels: Any) -> list[Any]:
    """Labels in sorted order; by ``repr`` when they are not mutually comparable."""
    unique = set(labels)
    try:
        return sorted(unique)
    except TypeError:
        return sorted(unique, key=repr)


def multilabel_counts(
    gold_sets: Sequence[Any], pred_sets: Sequence[Any], labels: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label TP, FP and FN over instances whose gold and predicted labels are sets.

    Sets are turned into multi-hot rows with scikit-learn's ``MultiLabelBinarizer`` (``labels``
    fixes the column order; labels are mapped to integer ids first so that any hashable, e.g. a
    ``(code, subcode)`` tuple, works) and the cells are counted with numpy. (scikit-learn's
    ``multilabel_confusion_matrix`` is not used: it reads a one-label indicator matrix as a
    binary problem.) The tests check the resulting scores against ``sklearn.metrics``.
    """
    import numpy as np
    from sklearn.preprocessing import MultiLabelBinarizer

    n_labels = len(labels)
    if n_labels == 0 or len(gold_sets) == 0:
        zeros = np.zeros(n_labels, dtype=int)
        return zeros, zeros.copy(), zeros.copy()
    index = {label: i for i, label in enumerate(labels)}
    binarizer = MultiLabelBinarizer(classes=list(range(n_labels)))
    y_true = binarizer.fit_transform([[index[x] for x in s] for s in gold_sets]).astype(bool)
    y_pred = binarizer.transform([[index[x] for x in s] for s in pred_sets]).astype(bool)
    tp = (y_true & y_pred).sum(axis=0).astype(int)
    fp = (~y_true & y_pred).sum(axis=0).astype(int)
    fn = (y_true & ~y_pred).sum(axis=0).astype(int)
    return tp, fp, fn


# Where Unicode puts combining marks (categories Mn, Mc, Me): the Basic Multilingual Plane,
# the Supplementary Multilingual Plane, and the variation selectors of plane 14. (A test
# checks that no mark lies elsewhere in this Python's Unicode.)
MARK_PLANES = ((0x0000, 0x20000), (0xE0000, 0xE1000))


@functools.cache
def word_character_class() -> str:
    """A regular-expression class of the characters a word is made of: ``\\w`` (letters,
    digits, underscore) and the combining marks, which ``\\w`` leaves out (the diaeresis of a
    decomposed "ï", a Devanagari vowel sign), so that a word is not cut at its accent. Built
    on first use (a 0.02 s scan): ``re`` has no ``\\p{M}``."""
    ranges: list[tuple[int, int]] = []
    for start, end in MARK_PLANES:
        for code in range(start, end):
            if unicodedata.category(chr(code))[0] == "M":
                if ranges and ranges[-1][1] == code - 1:
                    ranges[-1] = (ranges[-1][0], code)
                else:
                    ranges.append((code, code))
    marks = "".join(f"{chr(a)}-{chr(b)}" if b > a else chr(a) for a, b in ranges)
    return f"[\\w{marks}]"
