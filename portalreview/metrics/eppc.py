"""EPPC coding scores: EPPCMinerBen's measures (seed 003, Section 4 and Appendix B).

Each sentence gets a set of codes, one subcode per code, and an evidence span per
code-subcode pair. Codes and code-subcode pairs are scored as multi-label classification with
micro precision / recall / F1 (Appendix B (1)-(2), equations 4-9); evidence spans with a
relaxed token match (Appendix B (3), equations 10-12). Label sets are binarized with
scikit-learn's ``MultiLabelBinarizer`` and counted with numpy (checked against
``sklearn.metrics`` in the tests); the relaxed span match is hand-written (no library has it).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from portalreview.metrics._common import (
    f1_from_counts,
    harmonic_mean,
    multilabel_counts,
    ratio,
    sorted_labels,
    word_character_class,
)


@dataclass(frozen=True)
class PRF:
    """Micro TP/FP/FN counts and the precision, recall and F1 computed from them."""

    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True)
class SpanPRF:
    """Span-level counts (see :func:`span_prf`) and scores."""

    n_predicted: int
    n_gold: int
    tp: int
    fp: int
    fn: int
    matched_gold: int
    precision: float
    recall: float
    f1: float


def _label_sets(sets: Sequence[Collection[Hashable]], name: str) -> list[set[Hashable]]:
    if isinstance(sets, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of label collections, one per instance")
    out = []
    for i, labels in enumerate(sets):
        if isinstance(labels, (str, bytes)):
            raise ValueError(f"{name}[{i}] must be a collection of labels, got a string")
        out.append(set(labels))
    return out


def _prepare(
    gold: Sequence[Collection[Hashable]],
    predicted: Sequence[Collection[Hashable]],
    labels: Sequence[Hashable] | None,
) -> tuple[list[set[Hashable]], list[set[Hashable]], list[Hashable]]:
    g, p = _label_sets(gold, "gold"), _label_sets(predicted, "predicted")
    if len(g) != len(p):
        raise ValueError(f"gold and predicted must be parallel, got {len(g)} and {len(p)}")
    if not g:
        raise ValueError("no instances given")
    seen = set().union(*g, *p)
    if labels is None:
        return g, p, sorted_labels(seen)
    unknown = seen - set(labels)
    if unknown:
        raise ValueError(f"labels not in the label list: {sorted_labels(unknown)}")
    return g, p, list(labels)


def micro_prf(
    gold: Sequence[Collection[Hashable]],
    predicted: Sequence[Collection[Hashable]],
    *,
    labels: Sequence[Hashable] | None = None,
    zero_division: float = 0.0,
) -> PRF:
    """Micro P/R/F1 of multi-label predictions (seed 003, Appendix B (1), equations 4-6).

    Instance ``i`` (a sentence) has the gold label set ``gold[i]`` and predicted set
    ``predicted[i]``; "micro" sums TP = |gold & predicted|, FP = |predicted - gold| and
    FN = |gold - predicted| over all instances and labels before dividing - the same numbers as
    ``sklearn.metrics.f1_score(average="micro")`` on multi-hot rows. Labels may be any
    hashable (codes as strings; see :func:`code_subcode_prf` for pairs). ``labels``, if given,
    is the closed label list (anything else is a ValueError). Zero denominators take
    ``zero_division`` (0.0 as in scikit-learn); F1 = 2TP / (2TP + FP + FN).
    """
    g, p, label_list = _prepare(gold, predicted, labels)
    tp, fp, fn = (int(x.sum()) for x in multilabel_counts(g, p, label_list))
    return PRF(
        tp=tp,
        fp=fp,
        fn=fn,
        precision=ratio(tp, tp + fp, zero_division),
        recall=ratio(tp, tp + fn, zero_division),
        f1=f1_from_counts(tp, fp, fn, zero_division),
    )


def _pairs(sets: Sequence[Collection[tuple[str, str]]], name: str) -> None:
    for i, labels in enumerate(_label_sets(sets, name)):
        for pair in labels:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"{name}[{i}]: expected (code, subcode) tuples, got {pair!r}")


def code_subcode_prf(
    gold: Sequence[Collection[tuple[str, str]]],
    predicted: Sequence[Collection[tuple[str, str]]],
    *,
    labels: Sequence[tuple[str, str]] | None = None,
    zero_division: float = 0.0,
) -> PRF:
    """Micro P/R/F1 over (code, subcode) pairs (seed 003, Appendix B (2), equations 7-9).

    Subcodes are scored as labels tied to their parent code, so a pair is right only when both
    code and subcode are: ("PartnershipPatient", "salutation") and ("PartnershipProvider",
    "salutation") are different labels. Otherwise as :func:`micro_prf`.
    """
    _pairs(gold, "gold")
    _pairs(predicted, "predicted")
    return micro_prf(gold, predicted, labels=labels, zero_division=zero_division)


def per_label_prf(
    gold: Sequence[Collection[Hashable]],
    predicted: Sequence[Collection[Hashable]],
    *,
    labels: Sequence[Hashable] | None = None,
    zero_division: float = 0.0,
) -> pd.DataFrame:
    """Per-label breakdown of :func:`micro_prf` (for each code, or each code-subcode pair).

    Seed 003, Appendix B (1)-(2): the same TP/FP/FN counting, kept per label (the paper
    prints only the micro totals; the per-code view is for the PI's report).

    One row per label (``labels`` order if given, else sorted); columns tp, fp, fn, precision,
    recall, f1, support (= tp + fn, the gold count). Zero denominators take ``zero_division``.
    """
    g, p, label_list = _prepare(gold, predicted, labels)
    tp, fp, fn = multilabel_counts(g, p, label_list)
    rows = [
        {
            "label": label,
            "tp": int(t),
            "fp": int(f),
            "fn": int(n),
            "precision": ratio(t, t + f, zero_division),
            "recall": ratio(t, t + n, zero_division),
            "f1": f1_from_counts(t, f, n, zero_division),
            "support": int(t + n),
        }
        for label, t, f, n in zip(label_list, tp, fp, fn, strict=True)
    ]
    columns = ["label", "tp", "fp", "fn", "precision", "recall", "f1", "support"]
    return pd.DataFrame(rows, columns=columns).set_index("label")


# --------------------------------------------------------------------------------------------
# Relaxed span match (seed 003, Appendix B (3))
# --------------------------------------------------------------------------------------------


def span_tokens(text: str) -> frozenset[str]:
    """The set of lowercase word tokens of a span, in composed form (NFC): runs of ``\\w``
    with their combining marks; punctuation is dropped.

    Seed 003, Appendix B (3) matches spans "token-level" without defining the tokens; this
    tokenization is our choice.

    Sets, not sequences: a discontinuous evidence span ("left ... knee") compares by the words
    it holds.
    """
    if not isinstance(text, str):
        raise ValueError(f"a span must be a string, got {type(text).__name__}")
    return frozenset(_span_token().findall(unicodedata.normalize("NFC", text).lower()))


@functools.cache
def _span_token() -> re.Pattern[str]:
    return re.compile(rf"\w{word_character_class()}*")


def token_jaccard(a: str, b: str) -> float:
    """|A & B| / |A | B| of the two spans' token sets; 0.0 when both have no token.

    The Jaccard similarity of seed 003, Appendix B (3), on :func:`span_tokens`.
    """
    ta, tb = span_tokens(a), span_tokens(b)
    union = ta | tb
    return len(ta & tb) / len(union) if union else 0.0


def spans_match(predicted: str, gold: str, *, threshold: float = 0.6) -> bool:
    """Relaxed match of two evidence spans (seed 003, Appendix B (3); FACTS.md).

    True when one span's token set is wholly contained in the other's (either way) or their
    token Jaccard similarity is at least ``threshold`` (0.6 in the paper). A span with no word
    token never matches (an empty set would otherwise be "contained" in everything).
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    tp, tg = span_tokens(predicted), span_tokens(gold)
    if not tp or not tg:
        return False
    return tp <= tg or tg <= tp or len(tp & tg) / len(tp | tg) >= threshold


def span_prf(
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
    *,
    threshold: float = 0.6,
    recall_from: Literal["paper", "gold"] = "paper",
    zero_division: float = 0.0,
) -> SpanPRF:
    """Span-level micro P/R/F1 with the relaxed match (seed 003, Appendix B (3), eqs. 10-12).

    ``gold[i]`` and ``predicted[i]`` are the evidence spans of instance i (for example one
    sentence's code-subcode pair). As the paper defines it: a predicted span matching any gold
    span (:func:`spans_match`) is a TP, one matching none is an FP; a gold span matched by no
    prediction is an FN; counts are summed over instances (micro). Precision = TP / (TP + FP).
    The paper's recall TP / (TP + FN) mixes counts of predicted spans (TP) with gold spans
    (FN), so two predictions matching one gold span count twice; ``recall_from="paper"``
    (default) keeps that formula, ``recall_from="gold"`` uses matched gold / all gold instead.
    F1 = their harmonic mean (2TP / (2TP + FP + FN) in paper mode); zero denominators take
    ``zero_division``.
    """
    if recall_from not in ("paper", "gold"):
        raise ValueError(f"recall_from must be 'paper' or 'gold', got {recall_from!r}")
    if len(gold) != len(predicted):
        raise ValueError(
            f"gold and predicted must be parallel, got {len(gold)} and {len(predicted)}"
        )
    n_pred = n_gold = tp = matched_gold = 0
    for i, (gs, ps) in enumerate(zip(gold, predicted, strict=True)):
        if isinstance(gs, str) or isinstance(ps, str):
            raise ValueError(f"instance {i}: give a list of spans, not a single string")
        hits = [[spans_match(p, g, threshold=threshold) for g in gs] for p in ps]
        n_pred += len(ps)
        n_gold += len(gs)
        tp += sum(any(row) for row in hits)
        matched_gold += sum(any(row[j] for row in hits) for j in range(len(gs)))
    fp, fn = n_pred - tp, n_gold - matched_gold
    precision = ratio(tp, tp + fp, zero_division)
    if recall_from == "paper":
        recall = ratio(tp, tp + fn, zero_division)
        f1 = f1_from_counts(tp, fp, fn, zero_division)
    else:
        recall = ratio(matched_gold, n_gold, zero_division)
        f1 = harmonic_mean(precision, recall) if n_pred + n_gold else float(zero_division)
    return SpanPRF(n_pred, n_gold, tp, fp, fn, matched_gold, precision, recall, f1)
