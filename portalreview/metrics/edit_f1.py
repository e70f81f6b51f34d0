"""Edit-F1: how much a clinician would have to edit a draft (seed 000, "How Much Would a
Clinician Edit This Draft?", Sections 3.1-3.2, Appendix C and F.2).

Content level: every sentence of the reference (clinician) response is either matched by a
verbatim piece of the draft or marked NO MATCH. Matched sentences are expected matches (EM,
true positives), NO MATCH sentences expected additions (EA, false negatives), and whatever is
left of the draft once the matched pieces are removed, counted in sentences, is expected
deletions (ED, false positives) - Algorithm 1.

Theme level: the theme labels of the draft's sentences act as predictions of the theme labels of
the reference's sentences; Theme-Level Edit-F1 is their micro F1 (Section 3.2).

Everything here is hand-written arithmetic over counts (no library computes Edit-F1): theme sets
are compared with Python's sets (the tests check the scores against scikit-learn's
``MultiLabelBinarizer`` + ``f1_score``), and :func:`editing_load` aligns words by a longest
common subsequence (:mod:`portalreview.metrics.editing`). The module imports no numpy, pandas,
scipy or scikit-learn when loaded (the desktop editors use it as the clinician works); the three
functions that return pandas tables import pandas when called.
"""

from __future__ import annotations

import numbers
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from portalreview.domain.spans import merge_spans
from portalreview.metrics._common import (
    check_count,
    f1_from_counts,
    ratio,
    sorted_labels,
)
from portalreview.metrics.editing import draft_edits
from portalreview.metrics.editing import word_tokens as word_tokens  # re-exported

if TYPE_CHECKING:  # pandas is imported by the three functions that return its tables only,
    import pandas as pd  # so that the editors importing this module do not pay for it

Span = tuple[int, int]
#: One reference sentence's decision: ``None`` (or the string "NO MATCH") for no match, else one
#: ``(start, end)`` character span of the draft, or a sequence of such spans.
Decision = Span | Sequence[Span] | str | None
#: A sentence splitter: text -> pieces, each a ``str`` or an object with a ``.text`` attribute.
Segmenter = Callable[[str], Sequence[Any]]

NO_MATCH = "NO MATCH"
_WORD_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class EditF1Result:
    """Counts and scores of Content-Level Edit-F1 (seed 000, Section 3.1)."""

    em: int
    ea: int
    ed: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True)
class ThemeF1Result:
    """Micro counts and scores of Theme-Level Edit-F1 (seed 000, Section 3.2)."""

    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True)
class EditingLoad:
    """Measured editing load of one draft against the text the clinician finally sent."""

    draft_words: int
    final_words: int
    kept: int
    deleted: int
    added: int
    precision: float
    recall: float
    f1: float


# --------------------------------------------------------------------------------------------
# Content level
# --------------------------------------------------------------------------------------------


def edit_f1_from_counts(em: int, ea: int, ed: int, *, zero_division: float = 0.0) -> EditF1Result:
    """Content-Level Edit-F1 from EM, EA and ED (seed 000, Section 3.1).

    EM, EA and ED are true positives, false negatives and false positives: precision =
    EM / (EM + ED) (share of the draft that need not be removed), recall = EM / (EM + EA) (share
    of the reference that need not be added), F1 = 2 EM / (2 EM + ED + EA), their harmonic mean.

    Conventions: a ratio whose denominator is 0 takes ``zero_division`` (default 0.0, as in
    scikit-learn). F1 is computed on counts, so it is 0.0, not ``zero_division``, when only one
    of precision and recall is undefined (an empty draft against a non-empty reference), and
    ``zero_division`` only when EM = EA = ED = 0 (nothing on either side).
    """
    em, ea, ed = check_count(em, "em"), check_count(ea, "ea"), check_count(ed, "ed")
    return EditF1Result(
        em=em,
        ea=ea,
        ed=ed,
        precision=ratio(em, em + ed, zero_division),
        recall=ratio(em, em + ea, zero_division),
        f1=f1_from_counts(em, ed, ea, zero_division),
    )


def locate_span(draft: str, text: str) -> Span | None:
    """Character span of the first verbatim occurrence of ``text`` in ``draft``, else ``None``.

    Seed 000, Appendix C.1: the judge's matching content must be copied verbatim from the draft
    to be removable, so no fuzzy search is done. Leading and trailing whitespace of ``text`` is
    ignored; an empty ``text`` is a ValueError.
    """
    if not isinstance(draft, str) or not isinstance(text, str):
        raise ValueError("draft and text must be strings")
    needle = text.strip()
    if not needle:
        raise ValueError("text to locate is empty")
    start = draft.find(needle)
    return None if start < 0 else (start, start + len(needle))


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_span(span: Any, draft_len: int | None, where: str) -> Span:
    ok = isinstance(span, (tuple, list)) and len(span) == 2 and all(_is_int(x) for x in span)
    if not ok:
        raise ValueError(f"{where}: a span must be a (start, end) pair of ints, got {span!r}")
    start, end = span
    if draft_len is None:
        if not 0 <= start < end:
            raise ValueError(f"{where}: span {tuple(span)} must satisfy 0 <= start < end")
    elif not 0 <= start < end <= draft_len:
        raise ValueError(
            f"{where}: span {tuple(span)} must satisfy 0 <= start < end <= {draft_len} "
            "(the draft's length)"
        )
    return (int(start), int(end))


def _normalize_decision(decision: Decision, draft_len: int | None, where: str) -> tuple[Span, ...]:
    """The decision's spans; an empty tuple means NO MATCH. ``draft_len`` None: no upper check."""
    if decision is None:
        return ()
    if isinstance(decision, str):
        if decision.strip().upper() == NO_MATCH:
            return ()
        raise ValueError(
            f"{where}: got text {decision[:40]!r}; give character spans (see locate_span) "
            "or None / 'NO MATCH'"
        )
    is_single = (
        isinstance(decision, (tuple, list))
        and len(decision) == 2
        and all(_is_int(x) for x in decision)
    )
    if is_single:
        return (_check_span(decision, draft_len, where),)
    if not isinstance(decision, (tuple, list)) or len(decision) == 0:
        raise ValueError(
            f"{where}: expected None for NO MATCH or one or more (start, end) spans, "
            f"got {decision!r}"
        )
    return tuple(_check_span(s, draft_len, where) for s in decision)


def unmatched_draft_text(draft: str, decisions: Sequence[Decision]) -> str:
    """The draft with the union of all matched spans removed (seed 000, Algorithm 1, line 10).

    Each removed stretch is replaced by one space so that the text on either side of it is not
    glued into a new word; overlapping or touching spans are merged first.
    """
    if not isinstance(draft, str):
        raise ValueError(f"draft must be a string, got {type(draft).__name__}")
    spans = [
        s
        for i, d in enumerate(decisions)
        for s in _normalize_decision(d, len(draft), f"decisions[{i}]")
    ]
    pieces: list[str] = []
    cursor = 0
    for start, end in merge_spans(spans):
        pieces.append(draft[cursor:start])
        cursor = end
    pieces.append(draft[cursor:])
    return " ".join(pieces)


def _default_segment(text: str) -> Sequence[Any]:
    """The sentences of ``text`` by ``portalreview.domain.segmenter`` (their texts: the
    callers read nothing else, and making the span objects costs a tenth of the time)."""
    try:
        from portalreview.domain.segmenter import sentence_texts
    except ImportError as exc:  # the domain segmenter is written separately
        raise ImportError(
            "portalreview.domain.segmenter.sentence_texts is not available; "
            "pass segment= explicitly"
        ) from exc
    return sentence_texts(text)


def _piece_texts(pieces: Sequence[Any]) -> list[str]:
    texts = []
    for piece in pieces:
        if isinstance(piece, str):
            texts.append(piece)
        elif hasattr(piece, "text"):
            texts.append(str(piece.text))
        else:
            raise ValueError(
                f"segment must return strings or objects with .text, got {type(piece).__name__}"
            )
    return texts


def count_expected_deletions(remaining: str, segment: Segmenter | None = None) -> int:
    """ED: sentences of the leftover draft that still contain a word character.

    Seed 000, Algorithm 1, lines 11-12. Pieces made only of punctuation or whitespace (the
    full stop left behind when a matched span stopped just before it) are not counted.
    """
    split = segment if segment is not None else _default_segment
    return sum(1 for t in _piece_texts(split(remaining)) if _WORD_CHAR.search(t))


def content_edit_f1(
    draft: str,
    decisions: Sequence[Decision],
    *,
    segment: Segmenter | None = None,
    zero_division: float = 0.0,
) -> EditF1Result:
    """Content-Level Edit-F1 of one draft against one reference (seed 000, Sec. 3.1, Alg. 1).

    ``decisions`` holds one entry per reference sentence, in order: ``None`` (or "NO MATCH")
    when no content of the draft matches it, otherwise the matched ``(start, end)`` character
    span(s) of ``draft`` (end exclusive). EM = sentences with a match, EA = sentences with NO
    MATCH. The union of all matched spans is removed from the draft (each removed stretch
    becomes one space), the rest is split with ``segment`` and ED = pieces still holding a word
    character - so the unmatched words of a partly matched draft sentence are one deletion.
    See :func:`edit_f1_from_counts` for the scores and zero-denominator rules.

    ``segment`` defaults to ``portalreview.domain.segmenter.split_sentences`` (imported when
    first needed); it may return strings or objects with a ``.text`` attribute.
    """
    if not isinstance(draft, str):
        raise ValueError(f"draft must be a string, got {type(draft).__name__}")
    if isinstance(decisions, (str, bytes)):
        raise ValueError("decisions must be a sequence with one entry per reference sentence")
    normalized = [
        _normalize_decision(d, len(draft), f"decisions[{i}]") for i, d in enumerate(decisions)
    ]
    em = sum(1 for spans in normalized if spans)
    ea = len(normalized) - em
    ed = count_expected_deletions(unmatched_draft_text(draft, decisions), segment)
    return edit_f1_from_counts(em, ea, ed, zero_division=zero_division)


def micro_edit_f1(results: Iterable[EditF1Result], *, zero_division: float = 0.0) -> EditF1Result:
    """Micro-averaged Content-Level Edit-F1 over pairs (seed 000, Section 5: "micro average").

    "Micro" here means: EM, EA and ED are summed over all (reference, draft) pairs and the scores
    are computed once from the sums, so long responses weigh more than short ones. An empty
    input is a ValueError.
    """
    items = list(results)
    if not items:
        raise ValueError("micro_edit_f1 needs at least one result")
    return edit_f1_from_counts(
        sum(r.em for r in items),
        sum(r.ea for r in items),
        sum(r.ed for r in items),
        zero_division=zero_division,
    )


# --------------------------------------------------------------------------------------------
# Theme level
# --------------------------------------------------------------------------------------------


def _theme_lists(
    per_response: Sequence[Collection[str]], name: str, include_other: bool, other_label: str
) -> list[list[str]]:
    if isinstance(per_response, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of per-response theme label lists")
    out = []
    for i, labels in enumerate(per_response):
        if isinstance(labels, (str, bytes)):
            raise ValueError(f"{name}[{i}] must be a list of theme labels, got a string")
        if any(not isinstance(x, str) for x in labels):
            raise ValueError(f"{name}[{i}]: theme labels must be strings")
        out.append([x for x in labels if include_other or x != other_label])
    return out


def _theme_counts(
    reference_themes: Sequence[Collection[str]],
    draft_themes: Sequence[Collection[str]],
    themes: Sequence[str] | None,
    mode: Literal["set", "multiset"],
    include_other: bool,
    other_label: str,
) -> tuple[list[str], list[int], list[int], list[int]]:
    if mode not in ("set", "multiset"):
        raise ValueError(f"mode must be 'set' or 'multiset', got {mode!r}")
    ref = _theme_lists(reference_themes, "reference_themes", include_other, other_label)
    drf = _theme_lists(draft_themes, "draft_themes", include_other, other_label)
    if len(ref) != len(drf):
        raise ValueError(
            "reference_themes and draft_themes must have one entry per pair, "
            f"got {len(ref)} and {len(drf)}"
        )
    seen = {x for labels in ref + drf for x in labels}
    if themes is None:
        labels = sorted_labels(seen)
    else:
        labels = [t for t in themes if include_other or t != other_label]
        unknown = seen - set(labels)
        if unknown:
            raise ValueError(f"theme labels not in themes: {sorted(unknown)}")
    tp_c: Counter[str] = Counter()
    fp_c: Counter[str] = Counter()
    fn_c: Counter[str] = Counter()
    if mode == "set":  # each response's theme set: a label counts once per pair
        for r, d in zip(ref, drf, strict=True):
            rs, ds = set(r), set(d)
            tp_c.update(rs & ds)
            fp_c.update(ds - rs)
            fn_c.update(rs - ds)
        return (
            labels,
            [tp_c[x] for x in labels],
            [fp_c[x] for x in labels],
            [fn_c[x] for x in labels],
        )
    for r, d in zip(ref, drf, strict=True):
        rc, dc = Counter(r), Counter(d)
        for label in set(rc) | set(dc):
            hit = min(rc[label], dc[label])
            tp_c[label] += hit
            fp_c[label] += dc[label] - hit
            fn_c[label] += rc[label] - hit
    return labels, [tp_c[x] for x in labels], [fp_c[x] for x in labels], [fn_c[x] for x in labels]


def theme_edit_f1(
    reference_themes: Sequence[Collection[str]],
    draft_themes: Sequence[Collection[str]],
    *,
    mode: Literal["set", "multiset"] = "set",
    include_other: bool = False,
    other_label: str = "Other",
    zero_division: float = 0.0,
) -> ThemeF1Result:
    """Micro Theme-Level Edit-F1 over (reference, draft) pairs (seed 000, Section 3.2).

    Entry ``i`` of each argument lists the theme labels of the sentences of pair ``i``'s
    reference (clinician) response and of its draft. Our reading of "the theme labels assigned
    to [draft sentences are used] as predictions for the theme labels assigned to [reference
    sentences]": sentences are not aligned one to one, so each response is reduced to the
    *set* of themes it contains (``mode="set"``, default) and a pair contributes, per theme,
    TP if both responses contain it, FP if only the draft does, FN if only the reference does.
    "Micro" = TP, FP, FN summed over themes and pairs, then P/R/F1 once.

    Why sets: per-theme F1 under this reading reproduces the paper's arithmetic, e.g. Table 15's
    0.50 for Assessment where drafts nearly always contain it and 33% of references do
    (2 x 0.33 / 1.33 = 0.50), and Table 17's 0.10 for Planning at 5% (2 x 0.05 / 1.05).
    ``mode="multiset"`` counts sentences instead: per theme, TP = min(draft count, reference
    count), FP and FN the excess on each side.

    "Other" (label ``other_label``) is dropped on both sides unless ``include_other``: the
    paper's theme scores cover the 8 themes (Tables 4, 15). Zero denominators take
    ``zero_division``; F1 = 2TP / (2TP + FP + FN).
    """
    _, tp, fp, fn = _theme_counts(
        reference_themes, draft_themes, None, mode, include_other, other_label
    )
    t, p, n = sum(tp), sum(fp), sum(fn)
    return ThemeF1Result(
        tp=t,
        fp=p,
        fn=n,
        precision=ratio(t, t + p, zero_division),
        recall=ratio(t, t + n, zero_division),
        f1=f1_from_counts(t, p, n, zero_division),
    )


def per_theme_edit_f1(
    reference_themes: Sequence[Collection[str]],
    draft_themes: Sequence[Collection[str]],
    *,
    themes: Sequence[str] | None = None,
    mode: Literal["set", "multiset"] = "set",
    include_other: bool = False,
    other_label: str = "Other",
    zero_division: float = 0.0,
) -> pd.DataFrame:
    """Theme-Level Edit-F1 for each theme separately (seed 000, Appendix F.2, Tables 15, 17).

    Same counting as :func:`theme_edit_f1`, kept per theme: one row per theme (``themes`` in the
    given order, else the labels seen, sorted) with columns tp, fp, fn, precision, recall, f1 and
    support (= tp + fn, references containing the theme in set mode). A label outside
    ``themes`` is a ValueError. Zero denominators take ``zero_division``.
    """
    import pandas as pd

    labels, tp, fp, fn = _theme_counts(
        reference_themes, draft_themes, themes, mode, include_other, other_label
    )
    rows = []
    for label, t, p, n in zip(labels, tp, fp, fn, strict=True):
        rows.append(
            {
                "theme": label,
                "tp": t,
                "fp": p,
                "fn": n,
                "precision": ratio(t, t + p, zero_division),
                "recall": ratio(t, t + n, zero_division),
                "f1": f1_from_counts(t, p, n, zero_division),
                "support": t + n,
            }
        )
    columns = ["theme", "tp", "fp", "fn", "precision", "recall", "f1", "support"]
    return pd.DataFrame(rows, columns=columns).set_index("theme")


def per_theme_content_recall(
    reference_themes: Sequence[Sequence[str]],
    decisions: Sequence[Sequence[Decision]],
    *,
    themes: Sequence[str] | None = None,
    include_other: bool = False,
    other_label: str = "Other",
    zero_division: float = float("nan"),
) -> pd.DataFrame:
    """Content-level recall of each theme (seed 000, Appendix F.2, Tables 14 and 16).

    ``reference_themes[i][j]`` is the theme of sentence ``j`` of pair ``i``'s reference and
    ``decisions[i][j]`` its match decision (None / "NO MATCH" or span(s); spans are not checked
    against a draft here). A reference sentence of theme t counts as recalled when it was
    matched. Recall_t = matched sentences of theme t / sentences of theme t, summed over all
    pairs first (the tables' "micro average recall ... for each theme class"). A theme with no
    sentences gets ``zero_division`` (default NaN: nothing to recall). Columns: n_sentences,
    n_matched, recall; "Other" is dropped unless ``include_other``.
    """
    import pandas as pd

    if len(reference_themes) != len(decisions):
        raise ValueError(
            "reference_themes and decisions must have one entry per pair, "
            f"got {len(reference_themes)} and {len(decisions)}"
        )
    total: Counter[str] = Counter()
    matched: Counter[str] = Counter()
    for i, (labels, decs) in enumerate(zip(reference_themes, decisions, strict=True)):
        if len(labels) != len(decs):
            raise ValueError(
                f"pair {i}: {len(labels)} theme labels but {len(decs)} decisions; "
                "give one of each per reference sentence"
            )
        for j, (label, dec) in enumerate(zip(labels, decs, strict=True)):
            if not isinstance(label, str):
                raise ValueError(f"reference_themes[{i}][{j}] must be a string")
            if not include_other and label == other_label:
                continue
            spans = _normalize_decision(dec, None, f"decisions[{i}][{j}]")
            total[label] += 1
            matched[label] += bool(spans)
    labels_out = list(themes) if themes is not None else sorted_labels(total)
    if not include_other:
        labels_out = [x for x in labels_out if x != other_label]
    unknown = set(total) - set(labels_out)
    if unknown:
        raise ValueError(f"theme labels not in themes: {sorted(unknown)}")
    rows = [
        {
            "theme": t,
            "n_sentences": total[t],
            "n_matched": matched[t],
            "recall": ratio(matched[t], total[t], zero_division),
        }
        for t in labels_out
    ]
    return pd.DataFrame(rows, columns=["theme", "n_sentences", "n_matched", "recall"]).set_index(
        "theme"
    )


def theme_proportions(
    themes_per_response: Sequence[Collection[str]], *, themes: Sequence[str] | None = None
) -> pd.Series:
    """Share of responses that contain each theme (seed 000, Section 4.3, Table 6).

    Entry ``i`` lists the theme labels of response ``i``'s sentences (repeats allowed); a theme
    counts once per response. The denominator is every response given, including responses
    with no labelled sentence. "Other" is kept (Table 6 reports it). Indexed by ``themes`` in
    that order if given (a label outside it is a ValueError), else by the labels seen, sorted.
    """
    import pandas as pd

    sets = [set(x) for x in _theme_lists(themes_per_response, "themes_per_response", True, "")]
    if not sets:
        raise ValueError("theme_proportions needs at least one response")
    seen = set().union(*sets)
    labels = list(themes) if themes is not None else sorted_labels(seen)
    unknown = seen - set(labels)
    if unknown:
        raise ValueError(f"theme labels not in themes: {sorted(unknown)}")
    values = [sum(label in s for s in sets) / len(sets) for label in labels]
    return pd.Series(values, index=pd.Index(labels, name="theme"), name="proportion")


# --------------------------------------------------------------------------------------------
# Measured editing load (edit-a-draft mode)
# --------------------------------------------------------------------------------------------


def editing_load(
    draft: str, final: str, *, lowercase: bool = False, zero_division: float = 0.0
) -> EditingLoad:
    """Measured editing load of a draft the clinician edited into ``final`` (our addition).

    Not from a paper: it is the observed counterpart of seed 000's expected editing load
    (Section 3.1), for when clinicians edit a draft in place. Both texts are cut into word
    tokens (:func:`word_tokens`) and the *kept* words are a longest common subsequence of the
    two (exact, ``metrics.editing.lcs_length``; earlier versions used difflib's heuristic
    matcher, which could keep fewer words on repetitive texts). deleted = draft words - kept,
    added = final words - kept; precision = kept / draft words (share of the draft that
    survived), recall = kept / final words (share of the sent text that came from the draft),
    F1 = 2 kept / (draft words + final words). Zero denominators take ``zero_division``. The
    same counts as :func:`portalreview.metrics.editing.draft_edits`, which also carries the
    editing time.
    """
    edits = draft_edits(draft, final, lowercase=lowercase, zero_division=zero_division)
    return EditingLoad(
        draft_words=edits.draft_words,
        final_words=edits.final_words,
        kept=edits.kept,
        deleted=edits.deleted,
        added=edits.added,
        precision=edits.precision,
        recall=edits.recall,
        f1=edits.f1,
    )
