"""Measured word-level edits of an LLM draft into the reply a clinician sent (edit-a-draft mode).

Seed 000 ("How Much Would a Clinician Edit This Draft?", Section 3.1) *estimates* how much a
clinician would edit a draft (Content-Level Edit-F1, :mod:`portalreview.metrics.edit_f1`). When
clinicians edit drafts in place, the edits can be *measured*: this module is that observed
counterpart. It is not from a paper; every convention is ours and stated here.

Tokenisation (:func:`word_tokens`): a word is a run of letters, digits or underscores (with
their combining accents), keeping inner apostrophes and hyphens ("don't", "follow-up");
punctuation and whitespace are dropped, so "today." and "today!" are the same word. Texts are
compared in Unicode's composed form (NFC): "naïve" typed with a separate diaeresis, as some
systems and copied text give it, is the same word. Case is kept unless ``lowercase=True``.

Alignment: the kept words are a longest common subsequence (LCS) of the draft's words and the
final text's words - the most draft words that survive, in their order, into the final text.
It is computed exactly (:func:`lcs_length`, bit-parallel), not with difflib's heuristic matcher,
which can keep fewer words on repetitive text. Then deleted = draft words - kept, added = final
words - kept, and with the draft as the prediction of the final text: precision = kept /
(kept + deleted), recall = kept / (kept + added), F1 = 2 kept / (2 kept + deleted + added).
"""

from __future__ import annotations

import functools
import math
import numbers
import re
import unicodedata
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from portalreview.metrics._common import f1_from_counts, ratio, word_character_class

_LINE_BREAK = re.compile("\r\n|[\r\u2028\u2029]")


@dataclass(frozen=True)
class DraftEdits:
    """Word-level edits of one draft into its final text, and the active editing time."""

    draft_words: int
    final_words: int
    kept: int
    deleted: int
    added: int
    precision: float
    recall: float
    f1: float
    active_seconds: float | None


def word_tokens(text: str, *, lowercase: bool = False) -> list[str]:
    """Word tokens of the text in composed form (NFC): runs of letters/digits/underscore with
    their combining marks, keeping inner apostrophes and hyphens ("don't", "follow-up");
    punctuation and whitespace are dropped.

    Not from a paper: the tokenisation of :func:`draft_edits` (and of
    ``metrics.editing_load``). ``lowercase=True`` folds case first.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    return _word_token().findall(text.lower() if lowercase else text)


@functools.cache
def _word_token() -> re.Pattern[str]:
    word = rf"\w{word_character_class()}*"
    return re.compile(rf"{word}(?:['\u2019-]{word})*")


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of a longest common subsequence of two token sequences.

    Not from a paper: the exact alignment behind :func:`draft_edits`. The bit-parallel LCS
    recurrence (Allison and Dix 1986, in Hyyro's 2004 form): ``v`` starts with len(a) one
    bits; for each token of ``b``, with ``m`` the bit mask of that token's positions in ``a``
    and ``u = v & m``, ``v = (v + u) | (v - u)`` (kept to len(a) bits); the LCS length is the
    number of zero bits of ``v`` at the end. Python integers hold the bit vector, so the cost
    is len(b) big-integer steps; a common prefix and suffix are counted first and left out of
    the loop (they always belong to some longest common subsequence). It gives the same
    length as the textbook O(len(a) len(b))
    dynamic programme (the tests check it against one, and against difflib where difflib is
    optimal).
    """
    # A common prefix and suffix belong to some longest common subsequence: count them and
    # run the bit-parallel loop on what lies between (an edit usually keeps most of a draft).
    shorter = min(len(a), len(b))
    head = 0
    while head < shorter and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shorter - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head or tail:
        return head + tail + lcs_length(a[head : len(a) - tail], b[head : len(b) - tail])
    if not a or not b:
        return 0
    positions: dict[Hashable, int] = {}
    for i, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << i)
    every = (1 << len(a)) - 1
    v = every
    for token in b:
        m = positions.get(token)
        if m is not None:
            u = v & m
            v = ((v + u) | (v - u)) & every
    return len(a) - v.bit_count()


def draft_edits(
    draft: str,
    final: str,
    active_seconds: float | None = None,
    *,
    lowercase: bool = False,
    zero_division: float = 0.0,
) -> DraftEdits:
    """Words of ``draft`` kept, deleted and added to make ``final``, with P / R / F1.

    Not from a paper: the measured counterpart of seed 000's expected editing load (Section
    3.1), for a clinician who edited an LLM draft into the reply sent (see the module
    docstring for the tokenisation and the alignment). kept = :func:`lcs_length` of the two
    word sequences; deleted = draft words - kept; added = final words - kept; precision =
    kept / (kept + deleted), recall = kept / (kept + added), F1 = 2 kept / (2 kept + deleted +
    added). A zero denominator gives ``zero_division`` (so two empty texts score
    ``zero_division``, an empty draft against words scores 0 recall). ``active_seconds`` (the
    time the clinician spent editing) is carried through unchanged; it must be a finite
    number >= 0 or None.
    """
    seconds = _checked_seconds(active_seconds)
    a = word_tokens(draft, lowercase=lowercase)
    b = word_tokens(final, lowercase=lowercase)
    kept = lcs_length(a, b)
    deleted, added = len(a) - kept, len(b) - kept
    return DraftEdits(
        draft_words=len(a),
        final_words=len(b),
        kept=kept,
        deleted=deleted,
        added=added,
        precision=ratio(kept, kept + deleted, zero_division),
        recall=ratio(kept, kept + added, zero_division),
        f1=f1_from_counts(kept, deleted, added, zero_division),
        active_seconds=seconds,
    )


def left_unchanged(draft: str, final: str) -> bool:
    """Whether ``final`` is ``draft`` as it was, but for the form of its line breaks ("\\r\\n",
    a lone "\\r", U+2028 and U+2029 are all "\\n"), a U+FEFF at the start and white space at
    either end.

    Not from a paper: when a draft counts as not edited (docs/formats.md, "Preferences": such
    a draft makes no preference pair). A Qt text box gives a draft's line breaks back as
    "\\n" and drops a leading U+FEFF, so those are no edit; :func:`draft_edits` drops them
    with the rest of the white space and punctuation.
    """
    return _plain(final) == _plain(draft)


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    return _LINE_BREAK.sub("\n", text).removeprefix("\ufeff").strip()


def with_active_seconds(edits: DraftEdits, active_seconds: float | None) -> DraftEdits:
    """The same word-level edits with another editing time, checked as :func:`draft_edits`
    checks it (a finite number >= 0, or None).

    Not from a paper: the words kept, deleted and added depend on the two texts only, so a
    caller that already aligned a draft with its final text (the analysis layer keeps the
    alignments of a study between refreshes) attaches each answer's time without aligning
    the texts again.
    """
    return DraftEdits(
        edits.draft_words,
        edits.final_words,
        edits.kept,
        edits.deleted,
        edits.added,
        edits.precision,
        edits.recall,
        edits.f1,
        _checked_seconds(active_seconds),
    )


def _checked_seconds(active_seconds: float | None) -> float | None:
    if active_seconds is None:
        return None
    if isinstance(active_seconds, bool) or not isinstance(active_seconds, numbers.Real):
        raise ValueError(f"active_seconds must be a number or None, got {active_seconds!r}")
    if not math.isfinite(active_seconds) or active_seconds < 0:
        raise ValueError(f"active_seconds must be finite and >= 0, got {active_seconds!r}")
    return float(active_seconds)


__all__ = [
    "DraftEdits",
    "draft_edits",
    "lcs_length",
    "left_unchanged",
    "with_active_seconds",
    "word_tokens",
]
