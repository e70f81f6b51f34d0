"""Drafting quality from match answers (seed 000, "How Much Would a Clinician Edit This Draft?").

A match unit pairs a reference response with a draft; each annotator decides, for every
reference sentence, which verbatim piece of the draft matches it (or NO MATCH) and labels the
theme of every sentence on both sides. From these answers:

* Content-Level Edit-F1 (Section 3.1, Algorithm 1) per pair (unit x annotator) and
  micro-averaged per unit set and draft source (Tables 4-5), with EM / EA / ED counts;
* Theme-Level Edit-F1 (Section 3.2): the reference's theme set against the draft's theme set
  of the same answer, micro over the group, "Other" left out (and, separately, kept in);
  per-theme F1 (Table 15) and per-theme content recall (Table 14);
* inter-annotator predictability (Appendix E.2): the same scores over units whose reference
  and draft are both clinicians' responses, per ordered pair of clinicians and averaged;
* judge agreement (Appendix C.1, Table 8) between every ordered pair of annotators of a unit,
  and between a model pseudo-annotator and each person.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._bootstrap import Population
from portalreview.analysis._common import (
    JsonRows,
    Settings,
    answer_counts,
    answered_units,
    f1_counts,
    humans,
    jsonable,
    models,
    one_row_per_answer,
    ordered_names,
    people,
    prf_columns,
    records,
    safe_ratio,
    sources_of,
    spliced_or_whole,
)
from portalreview.analysis._kept import kept_figures
from portalreview.analysis._memo import Memo
from portalreview.domain.catalogs import Catalogs
from portalreview.metrics import count_expected_deletions
from portalreview.store.frames import StudyFrames

KIND = "match"
_SIDES = ("ref", "draft")


# --------------------------------------------------------------------------------------------
# Per pair (one answer): EM / EA / ED and theme sets
# --------------------------------------------------------------------------------------------


def leftover_text(draft: str, spans: tuple) -> str:
    """The draft with the union of matched spans removed, each removed stretch replaced by
    one space (Algorithm 1, line 10; ``metrics.unmatched_draft_text`` without its input
    checks: stored spans were checked when the answer was saved)."""
    pieces, cursor, end = [], 0, -1
    for start, stop in spans:  # sorted
        if start > end:
            if end >= 0:
                cursor = end
            pieces.append(draft[cursor:start])
            end = stop
        else:
            end = max(end, stop)
    pieces.append(draft[end if end >= 0 else 0 :])
    return " ".join(pieces)


#: ED of a draft with a set of matched spans removed, kept for the process. Why: segmenting
#: the leftover drafts is most of the match tables' cost (and of the editing load's Edit-F1
#: estimate), and a report refreshed after a few new answers finds every other answer's
#: leftover here. Key: (draft text, its answer's matched spans sorted) - all that ED depends
#: on (Algorithm 1, lines 10-12, with the default segmenter). Bound: 100,000 entries, least
#: recently used dropped first (a 10,000-case study with 4 annotators has 40,000 match answers,
#: about 23,000 distinct keys: 5.4 MiB measured, the draft texts being the frames' own strings).
_ED = Memo("match.expected_deletions", max_entries=100_000)


def _expected_deletions(pairs: pd.DataFrame, spans: dict, texts: Mapping[int, str]) -> np.ndarray:
    """ED of each pair (Algorithm 1, lines 10-12): sentences of the leftover draft that still
    hold a word (``metrics.count_expected_deletions``), from the cache ``_ED`` when the same
    draft and spans were met before.

    Segmenting the leftover draft is the one per-pair step that cannot be vectorised (the
    segmenter's decisions depend on the text around each full stop, so a leftover is always
    segmented whole); pairs that leave the same text - the same spans removed from the same
    draft, or different spans that leave the same words - share one segmentation.
    """
    keys = [
        (texts[draft], spans.get(answer, ()))
        for answer, draft in zip(
            pairs.answer_id.tolist(), pairs.response_b_id.tolist(), strict=True
        )
    ]
    counts = _ED.get_many(keys)
    missing = [i for i, count in enumerate(counts) if count is None]
    if missing:
        by_text: dict[str, int] = {}
        made = {}
        for i in missing:
            key = keys[i]
            count = made.get(key)
            if count is None:
                text = leftover_text(*key)
                count = by_text.get(text)
                if count is None:
                    count = by_text[text] = count_expected_deletions(text)
                made[key] = count
            counts[i] = count
        _ED.put_many(made.items())
    return np.array(counts, dtype=int)


def _spans_by_answer(decisions: pd.DataFrame) -> dict[int, tuple]:
    """Every matched span of each answer, sorted (the union Algorithm 1 removes)."""
    out: dict[int, tuple] = {}
    get = out.get
    for answer, spans in zip(decisions.answer_id.tolist(), decisions.spans.tolist(), strict=True):
        found = get(answer)
        out[answer] = spans if found is None else found + spans
    return {a: v if len(v) < 2 else tuple(sorted(v)) for a, v in out.items()}


def pair_counts(answers: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """One row per match answer: EM, EA (decided reference sentences with and without a
    matched span) and ED, with Content-Level P / R / F1 (seed 000, Section 3.1; the scores
    of ``metrics.edit_f1_from_counts``)."""
    decisions = frames.match_decisions[frames.match_decisions.answer_id.isin(answers.answer_id)]
    matched = _has_spans(decisions)
    ids, inverse = np.unique(decisions.answer_id.to_numpy(), return_inverse=True)
    inverse = inverse.reshape(-1)
    em = np.bincount(inverse, matched, len(ids)).astype(np.int64)
    ea = np.bincount(inverse, minlength=len(ids)) - em
    per = pd.DataFrame({"em": em, "ea": ea}, index=pd.Index(ids, name="answer_id"))
    spans = _spans_by_answer(decisions[matched])
    out = answers[["answer_id", "unit_id", "annotator", "response_id", "response_b_id"]].copy()
    out[["response_id", "response_b_id"]] = out[["response_id", "response_b_id"]].astype(int)
    texts = _texts_of(frames.responses, out.response_b_id.unique())
    out = out.join(per, on="answer_id")
    out[["em", "ea"]] = out[["em", "ea"]].fillna(0).astype(int)
    out["ed"] = _expected_deletions(out, spans, texts)
    scores = prf_columns(out.em.to_numpy(), out.ed.to_numpy(), out.ea.to_numpy())
    return out.assign(**scores).reset_index(drop=True)


def _texts_of(responses: pd.DataFrame, response_ids: np.ndarray) -> dict[int, str]:
    """The texts of the responses ``response_ids`` (a refresh's few answers need a few
    drafts, not a dict of every response)."""
    where = pd.Index(responses.response_id).get_indexer(response_ids)
    found = where >= 0  # (a draft not among the responses: a KeyError where it is read)
    texts = responses.text.to_numpy(dtype=object)[where[found]].tolist()
    return dict(zip(np.asarray(response_ids)[found].tolist(), texts, strict=True))


def _has_spans(decisions: pd.DataFrame) -> np.ndarray:
    """Whether each decision matched a span (the reference sentence has a match)."""
    spans = decisions.spans.tolist()
    return np.fromiter((len(x) > 0 for x in spans), bool, len(spans))


def _answer_theme_groups(
    answer_ids: np.ndarray, themes: pd.Series
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The (answer, theme) groups of rows, as ``groupby(["answer_id", "theme"])`` makes them
    (sorted by answer, then theme; rows without a theme left out), with numpy: a frame of the
    groups' answer_id and theme, which rows are kept, and each kept row's group."""
    keep = ~themes.isna().to_numpy()
    code, names = pd.factorize(themes.to_numpy(dtype=object)[keep], sort=True)
    n = max(len(names), 1)
    group, inverse = np.unique(answer_ids[keep].astype(np.int64) * n + code, return_inverse=True)
    keys = pd.DataFrame(
        {
            "answer_id": group // n,
            "theme": pd.array(np.asarray(names, dtype=object)[group % n], dtype=themes.dtype),
        }
    )
    return keys, keep, inverse.reshape(-1)


def people_pair_counts(frames: StudyFrames) -> pd.DataFrame:
    """:func:`pair_counts` of the people's match answers, made once per frames: the match
    tables and the editing load's Edit-F1 estimate (``analysis.editing``) share it. Read it,
    never change it in place."""
    return _people_table(frames, "match_pair_counts", pair_counts)


def people_theme_presence(frames: StudyFrames) -> pd.DataFrame:
    """:func:`theme_presence` of the people's match answers, made once per frames. Read it,
    never change it in place."""
    return _people_table(frames, "match_theme_presence", theme_presence)


def _people_table(frames: StudyFrames, key: str, table: Any) -> pd.DataFrame:
    """``table(answers, frames)`` of the people's match answers, kept in the frames' memo
    under ``key`` (a live report makes only the rows of the answers saved since:
    ``analysis._common.spliced``)."""
    found = frames.memo.get(key)
    if found is None:
        answers = humans(people(frames, KIND))
        make = functools.partial(_of_answers, table, answers, frames)
        found = spliced_or_whole(frames, key, answers.answer_id, make)
    return found


def _of_answers(table: Any, answers: pd.DataFrame, frames: StudyFrames, ids: pd.Series):
    """``table(answers, frames)`` of the answers ``ids`` (every answer: the same rows)."""
    return table(answers[answers.answer_id.isin(ids)], frames)


def theme_presence(answers: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """One row per (answer, theme) used on either side: in_ref / in_draft flags - the theme
    sets Theme-Level Edit-F1 compares (seed 000, Section 3.2)."""
    labels = frames.sentence_themes[frames.sentence_themes.answer_id.isin(answers.answer_id)]
    sentences = frames.sentences
    found = pd.Index(sentences.sentence_id).get_indexer(labels.sentence_id)
    owner = sentences.response_id.to_numpy(dtype=float)[found]  # NaN: a case's sentence
    owner[found < 0] = np.nan
    row = pd.Index(answers.answer_id).get_indexer(labels.answer_id)  # one row per answer
    sides = {c: answers[c].to_numpy(dtype=float)[row] for c in ("response_id", "response_b_id")}
    groups, keep, inverse = _answer_theme_groups(labels.answer_id.to_numpy(), labels.theme)
    for flag, side in (("in_ref", "response_id"), ("in_draft", "response_b_id")):
        hits = (owner == sides[side])[keep]
        groups[flag] = np.bincount(inverse, hits, len(groups)) > 0
    return groups


# --------------------------------------------------------------------------------------------
# Micro figures over a group of pairs, with CIs over units
# --------------------------------------------------------------------------------------------


def _theme_unit_counts(
    pairs: pd.DataFrame, presence: pd.DataFrame, other: str
) -> dict[str, pd.Series]:
    """Per unit: theme TP / FP / FN without and with the Other theme."""
    rows = presence.merge(pairs[["answer_id", "unit_id"]], on="answer_id")
    rows = rows.assign(
        tp=rows.in_ref & rows.in_draft,
        fp=rows.in_draft & ~rows.in_ref,
        fn=rows.in_ref & ~rows.in_draft,
    )
    out = {}
    for suffix, part in (("", rows[rows.theme != other]), ("_all", rows)):
        sums = part.groupby("unit_id")[["tp", "fp", "fn"]].sum()
        for col in ("tp", "fp", "fn"):
            out[f"{col}{suffix}"] = sums[col]
    return out


def _unit_columns(pairs: pd.DataFrame, presence: pd.DataFrame, other: str) -> pd.DataFrame:
    """One row per unit of the group: summed EM, EA, ED and theme counts of its pairs."""
    units = pairs.groupby("unit_id")[["em", "ea", "ed"]].sum()
    for name, series in _theme_unit_counts(pairs, presence, other).items():
        units[name] = series.reindex(units.index).fillna(0)
    return units


def _content(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return prf_columns(sums["em"], sums["ed"], sums["ea"])


def _theme(sums: Mapping[str, np.ndarray], suffix: str) -> dict[str, np.ndarray]:
    return prf_columns(sums[f"tp{suffix}"], sums[f"fp{suffix}"], sums[f"fn{suffix}"])


def _scores(pop: Population, which: str, count_names: tuple[str, ...]) -> dict[str, Any]:
    totals = pop.totals()
    out: dict[str, Any] = {name.removesuffix("_all"): int(totals[name]) for name in count_names}
    for score in ("precision", "recall", "f1"):
        if which == "content":
            out[score] = pop.figure(lambda s, k=score: _content(s)[k])
        else:
            suffix = "" if which == "theme" else "_all"
            out[score] = pop.figure(lambda s, k=score, x=suffix: _theme(s, x)[k])
    return out


def _group_figures(
    pairs: pd.DataFrame,
    presence: pd.DataFrame,
    settings: Settings,
    units: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Content- and Theme-Level Edit-F1 of a group of pairs, micro over the group (``units``:
    its :func:`_unit_columns`, when made already); a group met before with the same per-unit
    columns is not resampled again (``analysis._kept``)."""
    if units is None:
        units = _unit_columns(pairs, presence, _other_id(settings))
    columns = {c: units[c].to_numpy() for c in units.columns}
    kept = kept_figures("match.group_figures", settings, columns, units.index, _group_scores)
    return {
        "n_units": len(units),
        "n_pairs": len(pairs),
        "n_annotators": int(pairs.annotator.nunique()),
        **kept,
    }


def _group_scores(pop: Population) -> dict[str, Any]:
    return {
        "content": _scores(pop, "content", ("em", "ea", "ed")),
        "theme": _scores(pop, "theme", ("tp", "fp", "fn")),
        "theme_with_other": _scores(pop, "theme_with_other", ("tp_all", "fp_all", "fn_all")),
    }


def _other_id(settings: Settings) -> str:
    others = [t.id for t in settings.catalogs.themes if t.is_other]
    return others[0] if others else "other"


def _theme_ids(settings: Settings) -> list[str]:
    return [t.id for t in settings.catalogs.themes]


def per_theme_f1(pairs: pd.DataFrame, presence: pd.DataFrame, settings: Settings) -> list[dict]:
    """Theme-Level Edit-F1 of each theme over the group (seed 000, Table 15), Other kept as
    its own row: per theme, TP = pairs whose reference and draft both contain it, FP = only
    the draft, FN = only the reference (``metrics.per_theme_edit_f1``'s set counting)."""
    one_group = np.zeros(len(pairs), dtype=np.int64)
    return _per_theme_f1_tables(pairs, presence, one_group, 1, _theme_ids(settings))[0]


def theme_recall_counts(frames: StudyFrames) -> pd.DataFrame:
    """Per (answer, theme): the decided reference sentences the answer gave that theme
    (``size``) and how many of them it matched (``sum``) - every match answer's, counted
    once per frames and summed per group by :func:`per_theme_recall`."""
    found = frames.memo.get("match_theme_recall")
    if found is None:
        decisions, labels = frames.match_decisions, frames.sentence_themes

        def make(ids: pd.Series) -> pd.DataFrame:  # every answer with a label: all rows
            mine = labels[labels.answer_id.isin(ids)]
            return _recall_counts(decisions[decisions.answer_id.isin(ids)], mine)

        answer_ids = pd.Series(np.unique(labels.answer_id.to_numpy()))
        found = spliced_or_whole(frames, "match_theme_recall", answer_ids, make)
    return found


def _recall_counts(decisions: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """:func:`theme_recall_counts` from the decisions and the sentence themes: each theme label
    joined to its (answer, sentence) decision by one integer key, the (answer, theme) groups
    counted with numpy - the merge and two-key groupby of pandas, in a quarter of the time
    (rows sorted by answer and theme as the groupby sorts them)."""
    ids = [f[c].to_numpy() for f in (decisions, labels) for c in ("answer_id", "sentence_id")]
    fits = not any(len(x) and (x.min() < 0 or x.max() >= 2**31) for x in ids)
    decided = pd.Index((ids[0].astype(np.int64) << 32) | ids[1]) if fits else None
    if decided is None or not decided.is_unique:  # no one-integer key: pandas' own join
        rows = decisions.merge(labels, on=["answer_id", "sentence_id"])
        rows = rows.assign(matched=rows.spans.map(len) > 0)
        return rows.groupby(["answer_id", "theme"]).matched.agg(["size", "sum"]).reset_index()
    where = decided.get_indexer((ids[2].astype(np.int64) << 32) | ids[3])
    joined = where >= 0
    groups, keep, inverse = _answer_theme_groups(ids[2][joined], labels.theme[joined])
    matched = _has_spans(decisions)[where[joined][keep]]
    groups["size"] = np.bincount(inverse, minlength=len(groups)).astype(np.int64)
    groups["sum"] = np.bincount(inverse, matched, len(groups)).astype(np.int64)
    return groups


def per_theme_recall(pairs: pd.DataFrame, frames: StudyFrames, settings: Settings) -> list[dict]:
    """Content-level recall of each theme (seed 000, Table 14): matched reference sentences
    of a theme / reference sentences of that theme, summed over the group's pairs (the
    theme is the one the same annotator gave the sentence; unlabelled sentences are left
    out). Same counting as ``metrics.per_theme_content_recall``."""
    one_group = np.zeros(len(pairs), dtype=np.int64)
    counts = theme_recall_counts(frames)
    return _per_theme_recall_tables(pairs, counts, one_group, 1, _theme_ids(settings))[0]


def _groups(
    pairs: pd.DataFrame, presence: pd.DataFrame, frames: StudyFrames, keys: list[str], s: Settings
) -> list[dict[str, Any]]:
    """The figures of each group of pairs (by ``keys``, sorted): :func:`_group_figures`,
    :func:`per_theme_f1` and :func:`per_theme_recall`, with the theme counts of every pair and
    group made in one pass each instead of one join of the theme tables per group."""
    pairs = pairs.reset_index(drop=True)
    grouped = list(pairs.groupby(keys, sort=True))
    themes = _theme_ids(s)  # unique: the catalog refuses a duplicate id
    group_of = np.full(len(pairs), -1, dtype=np.int64)
    for i, (_, group) in enumerate(grouped):
        group_of[pairs.index.get_indexer(group.index)] = i
    with_counts = pairs.assign(**_pair_theme_counts(pairs, presence, _other_id(s)))
    f1_tables = _per_theme_f1_tables(pairs, presence, group_of, len(grouped), themes)
    recall_tables = _per_theme_recall_tables(
        pairs, theme_recall_counts(frames), group_of, len(grouped), themes
    )
    out = []
    for i, (key, group) in enumerate(grouped):
        labels = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        units = _summed_by_unit(with_counts.loc[group.index])
        entry = {**labels, **_group_figures(group, presence, s, units)}
        entry["per_theme"] = f1_tables[i]
        entry["per_theme_content_recall"] = recall_tables[i]
        out.append(entry)
    return out


_THEME_COUNTS = ("tp", "fp", "fn", "tp_all", "fp_all", "fn_all")


def _pair_theme_counts(
    pairs: pd.DataFrame, presence: pd.DataFrame, other: str
) -> dict[str, np.ndarray]:
    """Per pair (row of ``pairs``, one per answer): its answer's theme TP / FP / FN without
    and with the Other theme - what :func:`_theme_unit_counts` sums per unit."""
    row = pd.Index(pairs.answer_id).get_indexer(presence.answer_id)
    mine = row >= 0
    flags = _presence_flags(presence)
    not_other = (presence.theme != other).to_numpy(bool)
    out = {}
    for suffix, keep in (("", mine & not_other), ("_all", mine)):
        for name, flag in flags.items():
            counts = np.bincount(row[keep], flag[keep], len(pairs))
            out[f"{name}{suffix}"] = counts.astype(np.int64)
    return out


def _presence_flags(presence: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each theme-presence row as TP (in the reference and the draft), FP (the draft only),
    FN (the reference only)."""
    in_ref, in_draft = presence.in_ref.to_numpy(bool), presence.in_draft.to_numpy(bool)
    return {"tp": in_ref & in_draft, "fp": in_draft & ~in_ref, "fn": in_ref & ~in_draft}


def _summed_by_unit(pairs: pd.DataFrame) -> pd.DataFrame:
    """:func:`_unit_columns` of a group from its pairs with :func:`_pair_theme_counts`."""
    return pairs.groupby("unit_id")[["em", "ea", "ed", *_THEME_COUNTS]].sum()


def _by_group_and_theme(
    pair_rows: np.ndarray,
    theme_of_row: pd.Series,
    values: Mapping[str, np.ndarray],
    group_of: np.ndarray,
    n_groups: int,
    themes: list[str],
) -> dict[str, np.ndarray]:
    """Sums of each of ``values`` (one per row) per group and catalog theme, (n_groups,
    n_themes) int64 each, over the rows of a pair (``pair_rows`` >= 0) of a group."""
    column = pd.Index(themes).get_indexer(theme_of_row)
    group = np.full(len(pair_rows), -1, dtype=np.int64)
    of_a_pair = pair_rows >= 0
    group[of_a_pair] = group_of[pair_rows[of_a_pair]]
    keep = (group >= 0) & (column >= 0)
    cell = group[keep] * len(themes) + column[keep]
    size = n_groups * len(themes)
    return {
        name: np.bincount(cell, v[keep], size).astype(np.int64).reshape(n_groups, len(themes))
        for name, v in values.items()
    }


def _per_theme_f1_tables(
    pairs: pd.DataFrame,
    presence: pd.DataFrame,
    group_of: np.ndarray,
    n_groups: int,
    themes: list[str],
) -> list[JsonRows]:
    """:func:`per_theme_f1` of every group at once (``group_of``: each pair's group)."""
    row = pd.Index(pairs.answer_id).get_indexer(presence.answer_id)
    flags = _presence_flags(presence)
    sums = _by_group_and_theme(row, presence.theme, flags, group_of, n_groups, themes)
    return [
        _per_theme_f1_records(*(sums[c][i] for c in ("tp", "fp", "fn")), themes)
        for i in range(n_groups)
    ]


def _per_theme_f1_records(
    tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, themes: list[str]
) -> JsonRows:
    table = pd.DataFrame({"theme": themes, "tp": tp, "fp": fp, "fn": fn})
    return records(table.assign(**prf_columns(tp, fp, fn), support=table.tp + table.fn))


def _per_theme_recall_tables(
    pairs: pd.DataFrame,
    counts: pd.DataFrame,
    group_of: np.ndarray,
    n_groups: int,
    themes: list[str],
) -> list[list[dict]]:
    """:func:`per_theme_recall` of every group at once (``group_of``: each pair's group)."""
    row = pd.Index(pairs.answer_id).get_indexer(counts.answer_id)
    values = {"size": counts["size"].to_numpy(), "sum": counts["sum"].to_numpy()}
    sums = _by_group_and_theme(row, counts.theme, values, group_of, n_groups, themes)
    return [
        _recall_records(sums["size"][i].tolist(), sums["sum"][i].tolist(), themes)
        for i in range(n_groups)
    ]


def _recall_records(sizes: list[int], hits: list[int], themes: list[str]) -> list[dict]:
    return [
        {"theme": theme, "n_sentences": n, "n_matched": hit, "recall": hit / n if n else None}
        for theme, n, hit in zip(themes, sizes, hits, strict=True)
    ]


# --------------------------------------------------------------------------------------------
# Inter-annotator predictability (App. E.2)
# --------------------------------------------------------------------------------------------


def _iap_average(pairs: pd.DataFrame, presence: pd.DataFrame, settings: Settings) -> dict:
    """Mean over ordered clinician pairs of their micro Content / Theme Edit-F1 (App. E.2:
    "take the average results"), CI over units (a resample without some pair averages the
    pairs it has)."""
    order = sorted(set(zip(pairs.reference_author, pairs.draft_author, strict=True)))
    column = {p: i for i, p in enumerate(order)}
    other = _other_id(settings)
    units = _unit_columns(pairs, presence, other)
    first = pairs.groupby("unit_id")[["reference_author", "draft_author"]].first()
    which = np.array([column[tuple(x)] for x in first.loc[units.index].to_numpy()])
    blocks = {}
    for name in ("em", "ea", "ed", "tp", "fp", "fn"):
        block = np.zeros((len(units), len(order)))
        block[np.arange(len(units)), which] = units[name].to_numpy()
        blocks[name] = block
    present = np.zeros((len(units), len(order)))
    present[np.arange(len(units)), which] = 1
    blocks["n"] = present
    pop = settings.population(blocks, units.index)

    def mean_f1(sums: Mapping[str, np.ndarray], theme: bool) -> np.ndarray:
        if theme:
            f1 = f1_counts(sums["tp"], sums["fp"], sums["fn"])
        else:
            f1 = f1_counts(sums["em"], sums["ed"], sums["ea"])
        f1 = np.where(sums["n"] > 0, f1, np.nan)
        with np.errstate(invalid="ignore"):
            return np.nanmean(f1, axis=1)

    return {
        "n_ordered_pairs": len(order),
        "content_f1": pop.figure(lambda s: mean_f1(s, False)),
        "theme_f1": pop.figure(lambda s: mean_f1(s, True)),
    }


def iap(pairs: pd.DataFrame, presence: pd.DataFrame, frames: StudyFrames, s: Settings) -> dict:
    """IAP (seed 000, App. E.2): Edit-F1 with one clinician's response as the reference and
    another's as the draft, per ordered pair of clinicians (reference author, draft author),
    averaged over the pairs, and pooled (micro over every IAP pair)."""
    kinds = frames.responses.set_index("response_id").author_kind
    both = (pairs.response_id.map(kinds) == "clinician") & (
        pairs.response_b_id.map(kinds) == "clinician"
    )
    chosen = pairs[both]
    if chosen.empty:
        return {"n_units": 0, "ordered_pairs": [], "average": None, "pooled": None}
    return {
        "n_units": int(chosen.unit_id.nunique()),
        "ordered_pairs": _groups(chosen, presence, frames, ["reference_author", "draft_author"], s),
        "average": _iap_average(chosen, presence, s),
        "pooled": _group_figures(chosen, presence, s),
    }


# --------------------------------------------------------------------------------------------
# Judge agreement (App. C.1, Table 8)
# --------------------------------------------------------------------------------------------


def _merged(spans: tuple) -> tuple:
    if len(spans) < 2:
        return spans
    out: list[list[int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple(map(tuple, out))


def _overlap(a: tuple, b: tuple) -> bool:
    return any(max(s1, s2) < min(e1, e2) for s1, e1 in a for s2, e2 in b)


def span_columns(frames: StudyFrames) -> pd.DataFrame:
    """Each match decision's answer, span count, and first span's start and end (-1 without a
    span), row for row with ``frames.match_decisions``; made once per frames (and, in a live
    report, only for the answers saved since: ``analysis._common.spliced``)."""
    found = frames.memo.get("match_span_columns")
    if found is None:
        decisions = frames.match_decisions

        def make(ids: pd.Series) -> pd.DataFrame:
            return _span_columns(decisions[decisions.answer_id.isin(ids)])

        answer_ids = pd.Series(np.unique(decisions.answer_id.to_numpy()))
        found = spliced_or_whole(frames, "match_span_columns", answer_ids, make)
    return found


def _span_columns(decisions: pd.DataFrame) -> pd.DataFrame:
    spans = decisions.spans.tolist()
    return pd.DataFrame({"answer_id": decisions.answer_id.to_numpy(), **_span_arrays(spans)})


def _span_arrays(spans: list[tuple]) -> dict[str, np.ndarray]:
    return {
        "n_spans": np.fromiter(map(len, spans), np.int64, len(spans)),
        "start": np.array([x[0][0] if x else -1 for x in spans], dtype=np.int64),
        "end": np.array([x[0][1] if x else -1 for x in spans], dtype=np.int64),
    }


def _decided_by_name(answers: pd.DataFrame, frames: StudyFrames) -> dict[str, pd.DataFrame]:
    """The decisions of ``answers`` (one row per answer) per annotator: unit, reference
    sentence, spans and the span columns."""
    decisions, made = frames.match_decisions, span_columns(frames)
    row = pd.Index(answers.answer_id).get_indexer(decisions.answer_id)
    code, names = pd.factorize(answers.annotator)
    owner = np.where(row >= 0, code[row], -1)
    decided = pd.DataFrame(
        {
            "unit_id": answers.unit_id.to_numpy()[row],
            "sentence_id": decisions.sentence_id.to_numpy(),
            "spans": decisions.spans.to_numpy(),
            **{c: made[c].to_numpy() for c in ("n_spans", "start", "end")},
        }
    )
    mine = {name: np.flatnonzero(owner == i) for i, name in enumerate(names)}
    return {name: decided.take(rows) for name, rows in mine.items() if len(rows)}


def _agreement_pair(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (unit, reference sentence) decided by both ``a`` and ``b``: the Table 8 indicators
    (exact = the same merged spans; overlap = a character in common) with ``a`` as the
    reference, then with ``b`` as the reference. Exact, overlap and agreement do not depend on
    which side is the reference, so one join serves both directions. Two single spans are
    compared as numbers; a side with several spans is merged first (``_merged``: touching or
    overlapping spans become one), so several spans that merge into one compare as that one."""
    both = a.merge(b, on=["unit_id", "sentence_id"], suffixes=_SIDES)
    n_a, n_b = both.n_spansref.to_numpy(), both.n_spansdraft.to_numpy()
    a_match, b_match = n_a > 0, n_b > 0
    single = (n_a == 1) & (n_b == 1)
    s1, e1 = both.startref.to_numpy(), both.endref.to_numpy()
    s2, e2 = both.startdraft.to_numpy(), both.enddraft.to_numpy()
    exact = single & (s1 == s2) & (e1 == e2)
    overlap = single & (np.maximum(s1, s2) < np.minimum(e1, e2))
    several = np.flatnonzero(a_match & b_match & ~single)
    for i in several:
        x, y = _merged(both.spansref.iat[i]), _merged(both.spansdraft.iat[i])
        exact[i] = x == y
        overlap[i] = _overlap(x, y)
    units = both.unit_id
    return (
        _indicators(units, a_match, b_match, exact, overlap),
        _indicators(units, b_match, a_match, exact, overlap),
    )


def _indicators(
    units: pd.Series, ref_match: np.ndarray, got_match: np.ndarray, exact: Any, overlap: Any
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unit_id": units,
            "n": 1,
            "same": ref_match == got_match,
            "ref_non_match": ~ref_match,
            "non_match_hit": ~ref_match & ~got_match,
            "ref_match": ref_match,
            "exact": exact,
            "overlap": overlap,
        }
    )


def _agreement_figures(rows: pd.DataFrame, settings: Settings) -> dict[str, Any]:
    ids, inverse = np.unique(rows.unit_id.to_numpy(), return_inverse=True)
    inverse = inverse.reshape(-1)
    units = {  # rows.groupby("unit_id").sum(), with numpy (counts: exact in float64)
        c: np.bincount(inverse, rows[c].to_numpy(), len(ids)) for c in rows.columns[1:]
    }
    return {
        "n_sentences": int(units["n"].sum()),
        "n_reference_matches": int(units["ref_match"].sum()),
        "n_reference_non_matches": int(units["ref_non_match"].sum()),
        **kept_figures("match.agreement_figures", settings, units, ids, _agreement_scores),
    }


def _agreement_scores(pop: Population) -> dict[str, Any]:
    return {
        "agreement": pop.figure(lambda s: safe_ratio(s["same"], s["n"])),
        "non_match_agreement": pop.figure(
            lambda s: safe_ratio(s["non_match_hit"], s["ref_non_match"])
        ),
        "match_agreement": pop.figure(lambda s: safe_ratio(s["exact"], s["ref_match"])),
        "match_overlap": pop.figure(lambda s: safe_ratio(s["overlap"], s["ref_match"])),
    }


def judge_agreement_table(answers: pd.DataFrame, frames: StudyFrames, s: Settings) -> list[dict]:
    """Table 8 measures for every ordered pair (reference annotator, judged annotator) sharing
    match units: people with each other, and each model pseudo-annotator judged against each
    person. The reference's decisions are the denominators (see metrics.judge_agreement).
    Gold answers take no part: a PI's adjudication is not their own judgement."""
    answers = answers[~answers.is_gold.astype(bool)]
    by_name = _decided_by_name(answers, frames)
    people_names = ordered_names(humans(answers).annotator)
    model_names = ordered_names(models(answers).annotator)
    pairs = list(itertools.permutations(people_names, 2))
    pairs += [(p, m) for m in model_names for p in people_names]
    out, other_way = [], {}
    for ref_name, judged_name in pairs:
        if ref_name not in by_name or judged_name not in by_name:
            continue  # answers with no decision yet (a draft, a reference with no sentence)
        rows = other_way.pop((ref_name, judged_name), None)
        if rows is None:
            rows, other_way[judged_name, ref_name] = _agreement_pair(
                by_name[ref_name], by_name[judged_name]
            )
        if rows.empty:
            continue
        entry = {
            "reference_annotator": ref_name,
            "judged_annotator": judged_name,
            "judged_is_model": judged_name in model_names,
        }
        out.append({**entry, **_agreement_figures(rows, s)})
    return out


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _with_labels(pairs: pd.DataFrame, answers: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    sources = sources_of(frames)
    authors = frames.responses.set_index("response_id").author.fillna("").astype(str)
    unit_sets = answers.set_index("answer_id").unit_set
    return pairs.assign(
        unit_set=pairs.answer_id.map(unit_sets),
        source=pairs.response_b_id.map(sources),
        reference_author=pairs.response_id.map(authors),
        draft_author=pairs.response_b_id.map(authors),
    )


def _pair_records(pairs: pd.DataFrame, frames: StudyFrames) -> JsonRows:
    """The pairs (one per answer, in answer id order) as JSON-ready rows sorted by unit and
    annotator; each answer's row made once per frames (and, in a live report, only for the
    answers saved since: ``analysis._common.spliced``)."""

    def make(ids: pd.Series) -> pd.DataFrame:
        return _record_table(pairs[pairs.answer_id.isin(ids)])

    found = one_row_per_answer(frames, "match_pair_records", pairs.answer_id, make)
    made = found.record.tolist()
    order = pairs.reset_index(drop=True).sort_values(["unit_id", "annotator"]).index
    return JsonRows(made[i] for i in order.tolist())


def _record_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Each pair's JSON-ready row, beside its answer id, in the pairs' order."""
    columns = [
        "unit_id",
        "unit_set",
        "annotator",
        "response_id",
        "response_b_id",
        "source",
        "em",
        "ea",
        "ed",
        "precision",
        "recall",
        "f1",
    ]
    frame = pairs[columns].rename(
        columns={"response_id": "reference_id", "response_b_id": "draft_id"}
    )
    made = np.empty(len(frame), dtype=object)
    made[:] = records(frame)
    return pd.DataFrame({"answer_id": pairs.answer_id.to_numpy(), "record": made})


def _empty(answers: pd.DataFrame, s: Settings) -> dict[str, Any]:
    return {
        "n_model_answers": len(models(answers)),
        "other_theme": _other_id(s),
        "by_source": [],
        "iap": {"n_units": 0, "ordered_pairs": [], "average": None, "pooled": None},
        "judge_agreement": [],
        "pairs": [],
    }


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """Every drafting table of seed 000 computed from the project's match answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    answers = people(frames, KIND)
    people_answers = humans(answers)
    if people_answers.empty:
        return jsonable({**answer_counts(people_answers), **_empty(answers, s)})
    pairs = _with_labels(people_pair_counts(frames), people_answers, frames)
    presence = people_theme_presence(frames)
    kinds = frames.responses.set_index("response_id").author_kind
    drafts = pairs[
        ~(
            (pairs.response_id.map(kinds) == "clinician")
            & (pairs.response_b_id.map(kinds) == "clinician")
        )
    ]
    return jsonable(
        {
            **answer_counts(people_answers),
            "n_model_answers": len(models(answers)),
            "other_theme": _other_id(s),
            "by_source": _groups(drafts, presence, frames, ["unit_set", "source"], s),
            "iap": iap(pairs, presence, frames, s),
            "judge_agreement": judge_agreement_table(answers, frames, s),
            "pairs": _pair_records(pairs, frames),
        }
    )
