"""Tests for portalreview.metrics.editing (measured word-level edits of a draft). Hand-worked
cases with the arithmetic in comments; a brute-force LCS (textbook dynamic programme, and an
exhaustive search on tiny inputs) as the independent reference for the alignment."""

from __future__ import annotations

import difflib
import itertools
import math
import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from portalreview import metrics
from portalreview.metrics._common import word_character_class
from portalreview.metrics.editing import (
    DraftEdits,
    draft_edits,
    lcs_length,
    left_unchanged,
    word_tokens,
)


def dp_lcs(a: list, b: list) -> int:
    """Textbook O(len(a) len(b)) LCS length: L[i][j] = L[i-1][j-1] + 1 on equal tokens, else
    max(L[i-1][j], L[i][j-1])."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = (
                table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
            )
    return table[len(a)][len(b)]


def exhaustive_lcs(a: list, b: list) -> int:
    """The longest subsequence of ``a`` that is also a subsequence of ``b``, by trying every
    subsequence of ``a`` (tiny inputs only)."""

    def is_subsequence(part: tuple, whole: list) -> bool:
        it = iter(whole)
        return all(token in it for token in part)

    for size in range(len(a), 0, -1):
        if any(is_subsequence(c, b) for c in itertools.combinations(a, size)):
            return size
    return 0


# ------------------------------------------------------------------ hand-worked cases


def test_one_clause_replaced():
    edits = draft_edits("Please rest and drink fluids.", "Please rest and call us.", 42.5)
    # draft: Please rest and drink fluids (5); final: Please rest and call us (5).
    # kept "Please rest and" = 3; deleted drink, fluids = 2; added call, us = 2.
    # P = 3 / (3 + 2) = 0.6; R = 3 / (3 + 2) = 0.6; F1 = 2*3 / (2*3 + 2 + 2) = 0.6.
    assert edits == DraftEdits(5, 5, 3, 2, 2, 0.6, 0.6, pytest.approx(0.6), 42.5)


def test_reordered_words_keep_the_longest_common_run_in_order():
    edits = draft_edits("Call us today.", "Today, call us.", lowercase=True)
    # tokens: call us today | today call us. A common subsequence keeps order: "call us" (2),
    # so "today" is deleted from its old place and added at the new one.
    # P = 2/3, R = 2/3, F1 = 4 / (4 + 1 + 1) = 2/3.
    assert (edits.kept, edits.deleted, edits.added) == (2, 1, 1)
    assert edits.precision == pytest.approx(2 / 3)
    assert edits.recall == pytest.approx(2 / 3)
    assert edits.f1 == pytest.approx(2 / 3)


def test_sentence_dropped_and_sentence_added():
    draft = "Rest today. Drink water. Call if worse."
    final = "Rest today. Call if worse. We will phone you tomorrow."
    edits = draft_edits(draft, final)
    # draft words: Rest today Drink water Call if worse (7);
    # final: Rest today Call if worse We will phone you tomorrow (10).
    # kept: Rest today Call if worse (5); deleted: Drink water (2); added 5.
    # P = 5/7, R = 5/10, F1 = 10 / (10 + 2 + 5) = 10/17.
    assert (edits.draft_words, edits.final_words) == (7, 10)
    assert (edits.kept, edits.deleted, edits.added) == (5, 2, 5)
    assert edits.precision == pytest.approx(5 / 7)
    assert edits.recall == pytest.approx(0.5)
    assert edits.f1 == pytest.approx(10 / 17)


def test_exact_where_difflib_keeps_fewer_words():
    draft, final = "Please, please, please.", "Please really please please."
    # draft: P p p (3 words, case kept: "Please", "please", "please");
    # final: Please really please please (4). LCS = Please please please = 3:
    # kept 3, deleted 0, added "really" 1; P = 1, R = 3/4, F1 = 6 / (6 + 0 + 1) = 6/7.
    edits = draft_edits(draft, final)
    assert (edits.kept, edits.deleted, edits.added) == (3, 0, 1)
    assert (edits.precision, edits.recall) == (1.0, 0.75)
    assert edits.f1 == pytest.approx(6 / 7)
    # difflib's matcher (the heuristic this replaces) keeps only 2 of them here:
    a, b = ["a", "a", "a"], ["a", "b", "a", "a"]
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    assert sum(block.size for block in blocks) == 2
    assert lcs_length(a, b) == 3 == dp_lcs(a, b)


def test_identical_texts_and_punctuation_only_edits():
    text = "Your results are normal. Keep taking the follow-up dose."
    same = draft_edits(text, text, 10)
    # 9 words each, all kept.
    assert (same.draft_words, same.kept, same.deleted, same.added) == (9, 9, 0, 0)
    assert (same.precision, same.recall, same.f1) == (1.0, 1.0, 1.0)
    # Punctuation and spacing are not words: the same 9 words.
    assert draft_edits(text, text.replace(".", "!").replace(" ", "  ")).f1 == 1.0


def test_line_breaks_written_another_way_are_no_edit():
    # a draft from a Windows file, as a Qt text box gives it back: "\n", no leading U+FEFF
    draft = "\ufeffSorry you are unwell.\r\nCall us today.\rBye.\u2028See you\u2029soon."
    final = "Sorry you are unwell.\nCall us today.\nBye.\nSee you\nsoon.\n"
    assert left_unchanged(draft, final)
    assert left_unchanged(draft, draft) and left_unchanged("a\r\nb", " a\nb ")
    assert not left_unchanged(draft, final.replace("today", "tomorrow"))
    assert not left_unchanged("a\r\nb", "a b")  # a line break taken out is an edit
    edits = draft_edits(draft, final)  # the words ignore line breaks and the U+FEFF already
    assert (edits.draft_words, edits.kept, edits.deleted, edits.added) == (11, 11, 0, 0)


def test_empty_texts():
    both = draft_edits("", "   ")
    # no word on either side: every ratio is 0/0 -> zero_division (0.0 by default)
    assert (both.draft_words, both.final_words, both.kept) == (0, 0, 0)
    assert (both.precision, both.recall, both.f1) == (0.0, 0.0, 0.0)
    assert draft_edits("", "", zero_division=1.0).f1 == 1.0
    written = draft_edits("", "Call the clinic.")
    # empty draft, 3 final words: kept 0, added 3; P = 0/0 -> 0.0, R = 0/3 = 0, F1 = 0/3 = 0
    assert (written.kept, written.added, written.precision, written.recall) == (0, 3, 0.0, 0.0)
    assert draft_edits("", "Call the clinic.", zero_division=1.0).f1 == 0.0
    erased = draft_edits("Call the clinic.", "")
    # 3 draft words all deleted: P = 0/3 = 0, R = 0/0 -> zero_division
    assert (erased.deleted, erased.precision, erased.recall) == (3, 0.0, 0.0)
    assert draft_edits("Call the clinic.", "", zero_division=1.0).recall == 1.0


def test_case_is_kept_unless_lowercase():
    assert draft_edits("Rest", "rest").kept == 0
    assert draft_edits("Rest", "rest", lowercase=True).kept == 1


def test_tokenisation_is_documented_behaviour():
    assert word_tokens("Don't skip the follow-up, ok? It’s 2.5 mg_dose!") == [
        "Don't",
        "skip",
        "the",
        "follow-up",
        "ok",
        "It’s",
        "2",
        "5",
        "mg_dose",
    ]
    with pytest.raises(ValueError):
        word_tokens(None)  # type: ignore[arg-type]


def test_active_seconds_are_carried_and_checked():
    assert draft_edits("a", "a").active_seconds is None
    assert draft_edits("a", "a", 12).active_seconds == 12.0
    for bad in (-1.0, math.nan, math.inf, True, "12"):
        with pytest.raises(ValueError, match="active_seconds"):
            draft_edits("a", "a", bad)  # type: ignore[arg-type]


def test_editing_load_gives_the_same_counts():
    draft, final = "Please, please, please.", "Please really please please."
    load, edits = metrics.editing_load(draft, final), metrics.draft_edits(draft, final)
    assert (load.kept, load.deleted, load.added, load.f1) == (
        edits.kept,
        edits.deleted,
        edits.added,
        edits.f1,
    )


# ------------------------------------------------------------------ against brute force


def test_classic_lcs_example():
    # CLRS: LCS("ABCBDAB", "BDCABA") = 4 ("BCBA").
    assert lcs_length("ABCBDAB", "BDCABA") == 4 == dp_lcs(list("ABCBDAB"), list("BDCABA"))


tokens = st.lists(st.sampled_from(["a", "b", "c", "the", "dose"]), max_size=40)


@settings(max_examples=300)
@given(tokens, tokens)
def test_lcs_equals_dynamic_programme(a, b):
    assert lcs_length(a, b) == dp_lcs(a, b)


@settings(max_examples=200)
@given(st.lists(st.sampled_from("xyz"), max_size=7), st.lists(st.sampled_from("xyz"), max_size=7))
def test_lcs_equals_exhaustive_search(a, b):
    assert lcs_length(a, b) == exhaustive_lcs(a, b)


def test_long_drafts_past_a_machine_word():
    # 300 tokens: the bit vector spans several machine words.
    a = [f"w{i % 17}" for i in range(300)]
    b = [f"w{(i * 7) % 17}" for i in range(260)]
    assert lcs_length(a, b) == dp_lcs(a, b)


@given(st.text(max_size=80), st.text(max_size=80))
def test_counts_add_up(draft, final):
    edits = draft_edits(draft, final)
    assert edits.kept + edits.deleted == edits.draft_words == len(word_tokens(draft))
    assert edits.kept + edits.added == edits.final_words == len(word_tokens(final))
    assert edits.kept == dp_lcs(word_tokens(draft), word_tokens(final))
    assert 0.0 <= edits.f1 <= 1.0


def test_a_text_with_decomposed_accents_is_the_same_text():
    """ "Zoë" and "naïve" with a separate combining diaeresis (as macOS and copied text may
    give them) are the words they look like: an unedited draft scores as unedited."""
    draft = "Zoë, the naïve café test. Don't worry.\nCall us."
    final = unicodedata.normalize("NFD", draft)
    assert final != draft
    edits = draft_edits(draft, final)
    assert (edits.draft_words, edits.final_words, edits.kept, edits.f1) == (9, 9, 9, 1.0)
    assert left_unchanged(draft, final)
    # a mark with no composed form, and a script whose vowel signs are marks, stay in the word
    assert word_tokens("q\u0308x हिन्दी") == ["q\u0308x", "हिन्दी"]


def test_every_combining_mark_of_this_python_is_a_word_character():
    marks = [
        chr(code) for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code))[0] == "M"
    ]
    inside = re.compile(word_character_class())
    assert marks and all(inside.fullmatch(mark) for mark in marks)
