"""A subset of a study's answers, for the PI's dashboard: whose answers, about which drafts, on
which cases (``filter_frames``), as a fresh :class:`StudyFrames` every analysis reads as it
reads the whole study.

Filtering leaves the study as it is and only leaves answers out, so a filtered report equals
the report of a copy of the project from which those answers were deleted (the tests check
it that way):

* **annotators**: only these people's (or models') answers count. Gold answers (the PI's
  adjudicated decisions) stay: they are the reference the "vs gold" figures compare with, not
  an annotator's opinion.
* **sources**: only answers about drafts of these sources (``responses.source``, else the
  author, as the per-source tables label them). A unit counts when one of its responses is of a
  chosen source; units without responses (urgency pairs, EPPC sentences, theme-guided replies)
  drop out. A ranking keeps only the chosen sources' entries (the analysis re-ranks what is
  left), so the win-rate matrix shrinks to the chosen sources.
* **tags**: only units on cases carrying the chosen case tags (``cases.tags``): for each key,
  one of its chosen values; every chosen key must hold. A unit of two cases (an urgency pair)
  counts when both do.

Nothing here changes the frames it is given; the result has its own (empty) ``memo``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis._common import source_labels
from portalreview.store.frames import StudyFrames

#: Tables with one row per (part of an) answer, trimmed to the answers kept.
DETAIL_TABLES = (
    "respond_parts",
    "respond_answers",
    "rank_entries",
    "match_decisions",
    "sentence_themes",
    "urgency",
    "eppc_labels",
    "empathy",
    "facts",
)


@dataclass(frozen=True)
class FrameFilter:
    """One choice of answers: None (or empty) = no restriction of that sort.

    ``tags`` maps a tag key to its accepted values."""

    annotators: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        annotators: Iterable[str] | None = None,
        sources: Iterable[str] | None = None,
        tags: Mapping[str, Iterable[str]] | Iterable[tuple[str, str]] | None = None,
    ) -> FrameFilter:
        """A filter from any iterables (sorted, duplicates dropped; empty = no restriction);
        ``tags`` as {key: values} or as (key, value) pairs."""
        pairs = tags.items() if isinstance(tags, Mapping) else [(k, [v]) for k, v in tags or ()]
        grouped: dict[str, set[str]] = {}
        for key, values in pairs:
            grouped.setdefault(key, set()).update(values)
        return cls(
            _names(annotators),
            _names(sources),
            {k: tuple(sorted(v)) for k, v in sorted(grouped.items()) if v},
        )

    @property
    def active(self) -> bool:
        return bool(self.annotators or self.sources or self.tags)

    def apply(self, frames: StudyFrames) -> StudyFrames:
        return filter_frames(frames, self.annotators, self.sources, self.tags)

    def within(self, choices: FilterChoices) -> FrameFilter:
        """This filter less the annotators, sources and tag values ``choices`` no longer
        offers (for the dashboard: a tick may outlive the last answer it named)."""
        return FrameFilter.of(
            [name for name in self.annotators or () if name in choices.annotators],
            [source for source in self.sources or () if source in choices.sources],
            {
                key: [value for value in values if value in choices.tags.get(key, ())]
                for key, values in self.tags.items()
            },
        )

    def left_out_of(self, narrowed: FrameFilter) -> list[str]:
        """What :meth:`within` left out to give ``narrowed``, in words, one line each."""
        people = [
            f"{name} has no submitted answer any more"
            for name in self.annotators or ()
            if name not in (narrowed.annotators or ())
        ]
        sources = [
            f"no draft is of source {source} any more"
            for source in self.sources or ()
            if source not in (narrowed.sources or ())
        ]
        tags = [
            f"no case is tagged {key}={value} any more"
            for key, values in self.tags.items()
            for value in values
            if value not in narrowed.tags.get(key, ())
        ]
        return people + sources + tags

    def describe(self) -> str:
        """The filter in words, for a screen or a workbook ("" when it keeps everything)."""
        parts = []
        if self.annotators:
            parts.append("annotators " + ", ".join(self.annotators))
        if self.sources:
            parts.append("draft sources " + ", ".join(self.sources))
        if self.tags:
            parts.append(
                "case tags "
                + " and ".join(f"{k}={' or '.join(v)}" for k, v in self.tags.items())
            )
        return "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        """The filter as JSON-ready data (the report's ``settings.filters``)."""
        return {
            "annotators": list(self.annotators or []),
            "sources": list(self.sources or []),
            "tags": {k: list(v) for k, v in self.tags.items()},
        }


def _names(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return tuple(sorted(set(values or ()))) or None


@dataclass(frozen=True)
class FilterChoices:
    """What a study offers to filter on."""

    annotators: list[str]  # everyone with an ordinary (not gold) answer
    sources: list[str]  # the responses' source labels
    tags: dict[str, list[str]]  # case tag key -> its values


def filter_choices(frames: StudyFrames) -> FilterChoices:
    """The annotators, draft sources and case tags of ``frames``, each sorted."""
    answers = frames.answers
    people = answers.annotator[~answers.is_gold.astype(bool)]
    tags: dict[str, set[str]] = {}
    for case_tags in frames.cases.tags:
        for key, values in case_tags.items():
            tags.setdefault(key, set()).update(values)
    return FilterChoices(
        sorted(set(people.tolist())),
        sorted(set(source_labels(frames.responses).tolist())),
        {key: sorted(values) for key, values in sorted(tags.items())},
    )


def filter_frames(
    frames: StudyFrames,
    annotators: Collection[str] | None = None,
    sources: Collection[str] | None = None,
    tags: Mapping[str, Collection[str]] | None = None,
) -> StudyFrames:
    """The answers of ``frames`` that pass every given filter (see the module's docstring);
    None or empty = no restriction. A name, source or tag the study does not have is refused
    with a ValueError that names it."""
    _check(frames, annotators, sources, tags)
    answers = frames.answers
    keep = np.ones(len(answers), dtype=bool)
    if annotators:
        keep &= answers.is_gold.astype(bool).to_numpy() | answers.annotator.isin(annotators)
    if tags:
        keep &= answers.unit_id.isin(_units_on_tagged_cases(frames, tags)).to_numpy()
    rank_entries = frames.rank_entries
    if sources:
        chosen = _responses_of(frames, sources)
        rank_entries = rank_entries[rank_entries.response_id.isin(chosen)]
        keep &= _about_chosen_drafts(frames, chosen, set(rank_entries.answer_id))
    kept = answers[keep].reset_index(drop=True)
    ids = set(kept.answer_id.tolist())
    trimmed = {
        name: _rows_of(rank_entries if name == "rank_entries" else getattr(frames, name), ids)
        for name in DETAIL_TABLES
    }
    return replace(frames, answers=kept, **trimmed)


def _rows_of(table: pd.DataFrame, answer_ids: set[int]) -> pd.DataFrame:
    return table[table.answer_id.isin(answer_ids)].reset_index(drop=True)


def _check(
    frames: StudyFrames,
    annotators: Collection[str] | None,
    sources: Collection[str] | None,
    tags: Mapping[str, Collection[str]] | None,
) -> None:
    """Refuse names the study does not have (a typo would silently keep nothing)."""
    choices = filter_choices(frames)
    problems = []
    for what, asked, known in (
        ("annotator", annotators, choices.annotators),
        ("draft source", sources, choices.sources),
    ):
        if isinstance(asked, str):
            raise ValueError(f"give the {what}s as a list, not the text {asked!r}")
        unknown = sorted(set(asked or ()) - set(known))
        if unknown:
            problems.append(
                f"unknown {what}(s) {', '.join(map(repr, unknown))} "
                f"(the study has: {', '.join(known) or 'none'})"
            )
    for key, values in (tags or {}).items():
        if isinstance(values, str):
            raise ValueError(f"give the values of tag {key!r} as a list, not the text {values!r}")
        if key not in choices.tags:
            problems.append(
                f"no case has a tag {key!r} (tags: {', '.join(choices.tags) or 'none'})"
            )
            continue
        unknown = sorted(set(values) - set(choices.tags[key]))
        if unknown:
            problems.append(
                f"no case is tagged {key}={', '.join(map(repr, unknown))} "
                f"({key} is one of: {', '.join(choices.tags[key])})"
            )
    if problems:
        raise ValueError("; ".join(problems))


def _units_on_tagged_cases(frames: StudyFrames, tags: Mapping[str, Collection[str]]) -> set[int]:
    """Units whose case (and second case, for a pair) carries, for every key, a chosen value."""
    wanted = {key: set(values) for key, values in tags.items() if values}
    cases = {
        case_id
        for case_id, case_tags in zip(frames.cases.case_id, frames.cases.tags, strict=True)
        if all(wanted[key] & set(case_tags.get(key, ())) for key in wanted)
    }
    units = frames.units
    ok = units.case_id.isin(cases) & (units.case_b_id.isna() | units.case_b_id.isin(cases))
    return set(units.unit_id[ok].tolist())


def _responses_of(frames: StudyFrames, sources: Collection[str]) -> set[int]:
    labels = source_labels(frames.responses)  # not sources_of: its memo is the caller's
    return set(labels.index[labels.isin(sources)].tolist())


def _about_chosen_drafts(frames: StudyFrames, chosen: set[int], rankings: set[int]) -> np.ndarray:
    """Per answer: its unit shows a chosen response, or (a ranking) it ranks one."""
    units = frames.units
    shows = units.response_id.isin(chosen) | units.response_b_id.isin(chosen)
    answers = frames.answers
    on_unit = answers.unit_id.isin(set(units.unit_id[shows].tolist())).to_numpy()
    ranked = answers.answer_id.isin(rankings).to_numpy()
    return np.where(answers.kind.to_numpy(dtype=object) == "rank", ranked, on_unit)


__all__ = ["FilterChoices", "FrameFilter", "filter_choices", "filter_frames"]
