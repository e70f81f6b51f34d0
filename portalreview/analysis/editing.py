"""Editing load of drafts clinicians edited in place (edit-a-draft mode) from respond answers.

A respond answer in mode ``edit_draft`` names the LLM draft it started from
(``base_response_id``) and holds the text the clinician finally sent (``final_text``); the
answer's ``active_seconds`` is the time spent editing. Not from a paper: this is the measured
counterpart of seed 000's *estimated* editing load (Section 3.1). Reported:

* per answer: the draft's words kept, deleted and added (``metrics.draft_edits``: word tokens
  aligned by a longest common subsequence), precision = kept / (kept + deleted), recall =
  kept / (kept + added), F1, and the editing seconds;
* summaries pooled, per annotator and per draft source (``responses.source`` of the base
  draft): totals and means of the word counts, micro P / R / F1 (words summed over answers
  first) and the mean editing time with 95% bootstrap CIs over units, the median time;
* per draft source, beside the measured load, the Content-Level Edit-F1 *estimate* (seed 000,
  Section 3.1, Algorithm 1) of the same drafts from the match answers that judged them, when
  there are any (CIs over the match units, resampled as in the match tables).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from portalreview.analysis import match
from portalreview.analysis._common import (
    Settings,
    answered_units,
    one_row_per_answer,
    prf_columns,
    records,
    safe_ratio,
    sources_of,
)
from portalreview.analysis._kept import kept_figures
from portalreview.analysis._memo import Memo
from portalreview.metrics.editing import DraftEdits, draft_edits, with_active_seconds
from portalreview.store.frames import StudyFrames

if TYPE_CHECKING:
    from portalreview.analysis._bootstrap import Population

MODE = "edit_draft"
_WORDS = ("draft_words", "final_words", "kept", "deleted", "added")
#: The ``editing_load`` result when the study has no edited draft.
EMPTY: dict[str, Any] = {
    "n_answers": 0,
    "pooled": None,
    "by_annotator": [],
    "by_source": [],
    "answers": [],
}


def edit_rows(edited: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """One row per edit_draft answer: answer_id, unit_id, annotator, draft_id, source, the
    word counts and scores of ``metrics.draft_edits`` and active_seconds; sorted by unit and
    annotator."""
    return _by_unit(_answer_rows(edited, frames))


def _by_unit(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values(["unit_id", "annotator"], kind="stable").reset_index(drop=True)


def _kept_edit_rows(edited: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """:func:`edit_rows` of the people's edited answers ``edited``, each answer's row made once
    per frames (and, in a live report, only for the answers saved since:
    ``analysis._common.spliced``; a match answer changes none of them)."""

    def make(ids: pd.Series) -> pd.DataFrame:
        return _answer_rows(edited[edited.answer_id.isin(ids)], frames)

    found = one_row_per_answer(frames, "respond_edit_rows", edited.answer_id, make)
    return _by_unit(found)


def _answer_rows(edited: pd.DataFrame, frames: StudyFrames) -> pd.DataFrame:
    """:func:`edit_rows` in the answers' order."""
    drafts = edited.base_response_id.astype(int).tolist()
    responses = frames.responses
    where = pd.Index(responses.response_id).get_indexer(drafts)
    if (where < 0).any():
        raise KeyError(f"edited drafts not among the responses: {np.asarray(drafts)[where < 0]}")
    texts = responses.text.to_numpy(dtype=object)[where].tolist()
    pairs = [
        (text, final if isinstance(final, str) else "")
        for text, final in zip(texts, edited.final_text.tolist(), strict=True)
    ]
    edits = [
        with_active_seconds(words, float(seconds))
        for words, seconds in zip(_word_edits(pairs), edited.active_seconds.tolist(), strict=True)
    ]
    fields = (*_WORDS, "precision", "recall", "f1", "active_seconds")
    return pd.DataFrame(
        {
            "answer_id": edited.answer_id.to_numpy(),
            "unit_id": edited.unit_id.to_numpy(),
            "annotator": edited.annotator.to_numpy(),
            "draft_id": drafts,
            "source": pd.Series(drafts).map(sources_of(frames)).to_numpy(),
            **{f: [getattr(e, f) for e in edits] for f in fields},
        }
    )


#: Word-level edits of a draft into a final text, kept for the process. Why: aligning the
#: words (an exact LCS per edited answer) is the editing load's main cost, and a refresh
#: after a few new answers meets every other answer's (draft, final text) again. Key: the
#: draft's text and the final text - all ``metrics.draft_edits`` (default tokenisation, case
#: kept) depends on; the answer's time is attached afterwards (``with_active_seconds``).
#: Bound: 50,000 entries, least recently used dropped first (a 10,000-case study with 4
#: annotators has about 4,000 edited drafts: 1.4 MiB measured).
_EDITS = Memo("editing.draft_edits", max_entries=50_000)


def _word_edits(pairs: list[tuple[str, str]]) -> list[DraftEdits]:
    """``metrics.draft_edits`` (without a time) of each (draft, final text), cached."""
    return _EDITS.fill(_EDITS.get_many(pairs), pairs, lambda pair: draft_edits(*pair))


def _micro(sums: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    return prf_columns(sums["kept"], sums["deleted"], sums["added"])[key]


def load_figures(rows: pd.DataFrame, s: Settings) -> dict[str, Any]:
    """Totals and means of the word counts, micro P / R / F1 and the mean editing time of a
    group of edited answers (CIs over the kind's units), and the median time."""
    units = rows.groupby("unit_id")
    columns = {f: units[f].sum().to_numpy() for f in (*_WORDS, "active_seconds")}
    columns["answers"] = units.size().to_numpy()
    n = len(rows)

    def make(pop: Population) -> dict[str, Any]:
        totals = pop.totals()
        return {
            "n_units": pop.n_units,
            **{f: int(totals[f]) for f in _WORDS},
            **{f"mean_{f}": totals[f] / n for f in ("kept", "deleted", "added")},
            "precision": pop.figure(lambda x: _micro(x, "precision")),
            "recall": pop.figure(lambda x: _micro(x, "recall")),
            "f1": pop.figure(lambda x: _micro(x, "f1")),
            "mean_active_seconds": pop.figure(
                lambda x: safe_ratio(x["active_seconds"], x["answers"])
            ),
        }

    kept = kept_figures("editing.load_figures", s, columns, units.size().index, make, n)
    return {
        "n_answers": n,
        **kept,
        "median_active_seconds": float(rows.active_seconds.median()),
    }


def estimated_edit_f1(frames: StudyFrames, draft_ids: set[int]) -> pd.DataFrame:
    """Match pairs (people's match answers) whose draft is one of ``draft_ids``, with EM, EA
    and ED as the match tables count them (``analysis.match.pair_counts``, of every match
    answer once: ``match.people_pair_counts``)."""
    pairs = match.people_pair_counts(frames)
    pairs = pairs[pairs.response_b_id.isin(list(draft_ids))]
    if pairs.empty:
        return pd.DataFrame(columns=["unit_id", "response_b_id", "em", "ea", "ed"])
    return pairs.reset_index(drop=True)


def estimate_figures(pairs: pd.DataFrame, s: Settings) -> dict[str, Any] | None:
    """Micro Content-Level Edit-F1 of a group of match pairs (seed 000, Section 3.1): EM, EA,
    ED summed, P = EM / (EM + ED), R = EM / (EM + EA); ``s`` resamples the match units (the
    CIs are over the same resampled match units as the match tables')."""
    if pairs.empty:
        return None
    units = pairs.groupby("unit_id")[["em", "ea", "ed"]].sum()
    columns = {c: units[c].to_numpy() for c in units.columns}

    def make(pop: Population) -> dict[str, Any]:
        return {
            **{c: int(units[c].sum()) for c in ("em", "ea", "ed")},
            **{
                key: pop.figure(lambda x, k=key: prf_columns(x["em"], x["ed"], x["ea"])[k])
                for key in ("precision", "recall", "f1")
            },
        }

    kept = kept_figures("editing.estimate_figures", s, columns, units.index, make)
    return {
        "n_pairs": len(pairs),
        "n_units": len(units),
        "n_drafts": int(pairs.response_b_id.nunique()),
        **kept,
    }


def by_source(rows: pd.DataFrame, frames: StudyFrames, s: Settings) -> list[dict[str, Any]]:
    """The measured load per draft source, beside the Edit-F1 estimate of the same drafts."""
    pairs = estimated_edit_f1(frames, set(rows.draft_id.tolist()))
    on_match_units = s.for_units(answered_units(frames, match.KIND))
    out = []
    for source, group in rows.groupby("source", sort=True):
        mine = pairs[pairs.response_b_id.isin(group.draft_id.unique())]
        out.append(
            {
                "source": source,
                "n_drafts": int(group.draft_id.nunique()),
                **load_figures(group, s),
                "edit_f1_estimate": estimate_figures(mine, on_match_units),
            }
        )
    return out


def editing(answers: pd.DataFrame, frames: StudyFrames, s: Settings) -> dict[str, Any]:
    """The editing-load table of people's respond answers ``answers`` (see the module)."""
    edited = answers[answers["mode"] == MODE]
    if edited.empty:
        return dict(EMPTY)
    rows = _kept_edit_rows(edited, frames)
    return {
        "n_answers": len(rows),
        "pooled": load_figures(rows, s),
        "by_annotator": [
            {"annotator": who, **load_figures(group, s)}
            for who, group in rows.groupby("annotator", sort=True)
        ],
        "by_source": by_source(rows, frames, s),
        "answers": records(rows),
    }
