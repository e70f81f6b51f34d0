"""Adaptive urgency pairs (issue 19): an inbox sorted with a fraction of its pairs.

Seed 002 asks every pair of an inbox (435 for 30 messages). An *adaptive* unit set holds the
same pairs, assigned whole to each clinician, but a clinician's queue shows only the pairs
they answered and the one chosen for them next (:func:`next_unit`), until they have made the
set's number of judgements (``judgements``; by default n log2 n, what a comparison sort of n
messages needs, :func:`default_judgements`):

1. first a chain through the inbox in a random order (seeded by the set and the clinician), so
   that every message is met once: n - 1 pairs;
2. then, after each judgement, a Bradley-Terry fit of the clinician's judgements so far and
   the unasked pair it is least sure of, weighted toward both ends of its order
   (``metrics/bradley_terry.py``).

The choice reads only the set's units and the clinician's own answers, so an offline copy
chooses exactly as the master would from what the copy knows, and a merge (answers to the same
units) keeps every answer; the pair shown next is simply worked out again. Sides stay those of
the assignment (randomised per clinician), and a pair once answered is never offered again.

The setting lives in ``project_meta`` under ``adaptive_set:<unit set id>`` (JSON), written with
the set (``study_setup.create_unit_set``); the report reads it to say which inboxes were sorted
adaptively. An export carries it as the unit set's ``adaptive_judgements``.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from portalreview.store.models import Answer, ProjectMeta, Unit, UrgencyAnswer

KEY_PREFIX = "adaptive_set:"


@dataclass(frozen=True)
class AdaptiveSetting:
    """How many judgements each clinician makes in one adaptive set."""

    judgements: int

    def to_json(self) -> str:
        return json.dumps({"judgements": self.judgements})

    @classmethod
    def from_json(cls, text: str) -> AdaptiveSetting:
        try:
            value = int(json.loads(text)["judgements"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"an unreadable adaptive-set setting: {text!r}") from exc
        if value < 1:
            raise ValueError(f"an adaptive set needs at least one judgement, not {value}")
        return cls(value)


def meta_key(unit_set_id: int) -> str:
    return f"{KEY_PREFIX}{unit_set_id}"


def default_judgements(n_messages: int) -> int:
    """ceil(n log2 n), at most every pair: 148 of 435 for 30 messages, 665 of 4,950 for 100
    (``benchmarks/bench_adaptive_pairs.py`` measures how close that comes to all pairs)."""
    pairs = n_messages * (n_messages - 1) // 2
    if n_messages < 2:
        return 0
    return min(pairs, math.ceil(n_messages * math.log2(n_messages)))


def adaptive_settings(s: Session) -> dict[int, AdaptiveSetting]:
    """Unit set id -> its setting, for every adaptive set of the project."""
    rows = s.execute(
        select(ProjectMeta.key, ProjectMeta.value).where(ProjectMeta.key.like(f"{KEY_PREFIX}%"))
    )
    return {int(key[len(KEY_PREFIX) :]): AdaptiveSetting.from_json(value) for key, value in rows}


@dataclass(frozen=True)
class _Pairs:
    """One set's pairs as item indices, and the unit of each pair."""

    items: list[int]  # case ids, sorted
    unit_of: dict[tuple[int, int], int]  # (i, j), i < j item indices -> unit id


def _pairs(s: Session, unit_set_id: int) -> _Pairs:
    rows = s.execute(
        select(Unit.id, Unit.case_id, Unit.case_b_id)
        .where(Unit.unit_set_id == unit_set_id)
        .order_by(Unit.id)
    ).all()
    items = sorted({c for _, a, b in rows for c in (a, b) if c is not None})
    index = {case_id: i for i, case_id in enumerate(items)}
    unit_of = {}
    for unit_id, a, b in rows:
        if b is not None:
            unit_of[tuple(sorted((index[a], index[b])))] = unit_id
    return _Pairs(items, unit_of)


def next_unit(
    s: Session, unit_set_id: int, annotator_id: int, setting: AdaptiveSetting
) -> int | None:
    """The unit the clinician should judge next in an adaptive set, or None: when they have
    made the set's judgements, when an answer of theirs in it is still a draft (one pair at a
    time), or when no pair is left."""
    answers = s.execute(
        select(Unit.case_id, Unit.case_b_id, Answer.status, UrgencyAnswer.more_urgent_case_id)
        .join(Answer, and_(Answer.unit_id == Unit.id, Answer.is_gold.is_(False)))
        .outerjoin(UrgencyAnswer, UrgencyAnswer.answer_id == Answer.id)
        .where(Unit.unit_set_id == unit_set_id, Answer.annotator_id == annotator_id)
        .order_by(Answer.id)
    ).all()
    if any(status != "submitted" for _, _, status, _ in answers):
        return None
    if len(answers) >= setting.judgements:
        return None
    pairs = _pairs(s, unit_set_id)
    n = len(pairs.items)
    index = {case_id: i for i, case_id in enumerate(pairs.items)}
    open_pairs = np.zeros((n, n), dtype=bool)
    for i, j in pairs.unit_of:
        open_pairs[i, j] = open_pairs[j, i] = True  # only pairs with a unit can be asked
    first = np.array([index[a] for a, _, _, _ in answers], dtype=np.int64)
    second = np.array([index[b] for _, b, _, _ in answers], dtype=np.int64)
    won = np.array([1.0 if chosen == a else 0.0 for a, _, _, chosen in answers])
    open_pairs[first, second] = open_pairs[second, first] = False
    pair = choose_pair(first, second, won, open_pairs, (unit_set_id, annotator_id))
    return None if pair is None else pairs.unit_of[pair]


def choose_pair(
    first: np.ndarray,
    second: np.ndarray,
    won: np.ndarray,
    open_pairs: np.ndarray,
    seed: tuple[int, ...],
) -> tuple[int, int] | None:
    """The next pair (i < j, item indices) for one clinician from their judgements so far
    (``first[k]`` against ``second[k]``, ``won[k]`` 1 when the first was chosen), among
    ``open_pairs`` (a symmetric n x n mask of the pairs that may still be asked); None when
    none is left. ``seed`` makes the start's chain and the tie-breaks reproducible. Pure, so
    that ``benchmarks/bench_adaptive_pairs.py`` replays exactly what the app does."""
    n = open_pairs.shape[0]
    chain = np.random.default_rng(list(seed)).permutation(n)
    for i, j in itertools.pairwise(chain.tolist()):  # 1. every message met once
        if open_pairs[i, j]:
            return min(i, j), max(i, j)
    from portalreview.metrics.bradley_terry import bradley_terry, most_informative_pair

    theta = bradley_terry(n, first, second, won)  # 2. the most informative open pair
    rng = np.random.default_rng([*seed, len(first)])
    return most_informative_pair(theta, ~open_pairs, rng)
