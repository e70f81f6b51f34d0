"""Clinicians' own responses (seed 000) from respond answers.

A respond answer is either a theme-guided response (one box per theme; a filled box means the
response includes that theme, Appendix G) or a clinician's edit of an LLM draft. Reported:

* theme proportions: the share of theme-guided responses that include each theme (Table 6);
* theme inter-annotator agreement on cases answered by several clinicians: strict inclusion,
  strict exclusion and strict agreement per theme (Table 3, Appendix E.1) and Krippendorff's
  alpha on theme presence per theme and pooled;
* pairwise TF-IDF cosine similarity between clinicians' composed responses - a stand-in for
  Table 11's embedding cosine that needs no download (see ``metrics.tfidf_cosine_matrix``);
  a theme-guided response is composed as ``store.kinds.respond.compose`` does (the filled
  boxes in catalog order joined by a space), an edited draft is its final text;
* editing load of edited drafts (:mod:`portalreview.analysis.editing`: draft words kept,
  deleted and added, per answer, pooled, per annotator and per draft source beside the drafts'
  Edit-F1 estimate) and time on task.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from portalreview.analysis import editing as edits
from portalreview.analysis._bootstrap import presence_alpha, presence_alpha_blocks
from portalreview.analysis._common import (
    Settings,
    answer_counts,
    answered_units,
    humans,
    jsonable,
    people,
    safe_ratio,
)
from portalreview.domain.catalogs import Catalogs
from portalreview.store.frames import StudyFrames
from portalreview.store.kinds.respond import compose

KIND = "respond"
#: The result's keys (after the counts) when the study has no respond answer.
EMPTY: dict[str, Any] = {
    "n_theme_guided": 0,
    "n_edit_draft": 0,
    "theme_proportions": [],
    "theme_agreement": None,
    "similarity": None,
    "editing_load": edits.EMPTY,
    "time_on_task": [],
}


def respond_answers(frames: StudyFrames) -> pd.DataFrame:
    """People's respond answers with their mode, base draft and final text."""
    answers = humans(people(frames, KIND))
    return answers.merge(frames.respond_answers, on="answer_id")


def theme_counts(answers: pd.DataFrame, frames: StudyFrames, themes: list[str]) -> pd.DataFrame:
    """Theme-guided answers x themes: 1 when the answer's box for the theme is filled."""
    guided = answers[answers["mode"] == "theme_guided"]
    parts = frames.respond_parts[frames.respond_parts.answer_id.isin(guided.answer_id)]
    table = np.zeros((len(guided), len(themes)))
    rows = pd.Index(guided.answer_id).get_indexer(parts.answer_id)
    cols = pd.Index(themes).get_indexer(parts.theme)
    keep = (rows >= 0) & (cols >= 0)
    table[rows[keep], cols[keep]] = 1.0
    return pd.DataFrame(table, index=guided.answer_id.to_numpy(), columns=themes)


# --------------------------------------------------------------------------------------------
# Table 6 and Table 3
# --------------------------------------------------------------------------------------------


def proportions(guided: pd.DataFrame, table: pd.DataFrame, themes: list[str], s: Settings):
    """Share of theme-guided responses including each theme (Table 6), pooled over people
    with CIs over units, and per annotator."""
    units = guided.set_index("answer_id").unit_id.loc[table.index].to_numpy()
    per_unit = table.groupby(units).sum()
    n = pd.Series(units).value_counts().reindex(per_unit.index).to_numpy()
    pop = s.population({"n": n, "k": per_unit.to_numpy()}, per_unit.index)
    who = guided.set_index("answer_id").annotator.loc[table.index].to_numpy()
    by_annotator = table.groupby(who).mean()
    return [
        {
            "theme": theme,
            "n_responses_including": int(table[theme].sum()),
            "share": pop.figure(lambda x, i=i: safe_ratio(x["k"][:, i], x["n"])),
            "share_by_annotator": {a: by_annotator.loc[a, theme] for a in by_annotator.index},
        }
        for i, theme in enumerate(themes)
    ]


def theme_iaa(guided: pd.DataFrame, table: pd.DataFrame, themes: list[str], s: Settings):
    """Strict inclusion / exclusion / agreement per theme (Table 3) and alpha on theme
    presence, over the cases answered by two or more clinicians."""
    units = guided.set_index("answer_id").unit_id.loc[table.index].to_numpy()
    k = table.groupby(units).sum()
    m = pd.Series(units).value_counts().reindex(k.index).to_numpy(float)
    shared = m >= 2
    ids = k.index[shared]
    k, m = k.to_numpy(float)[shared], m[shared]
    blocks = {
        "one": np.ones(len(m)),
        "inc": (k == m[:, None]).astype(float),
        "exc": (k == 0).astype(float),
        **presence_alpha_blocks(m, k),
    }
    pop = s.population(blocks, ids)
    rows = []
    for i, theme in enumerate(themes):
        rows.append(
            {
                "theme": theme,
                "strict_inclusion": pop.figure(lambda x, i=i: safe_ratio(x["inc"][:, i], x["one"])),
                "strict_exclusion": pop.figure(lambda x, i=i: safe_ratio(x["exc"][:, i], x["one"])),
                "strict_agreement": pop.figure(
                    lambda x, i=i: safe_ratio(x["inc"][:, i] + x["exc"][:, i], x["one"])
                ),
                "alpha": pop.figure(lambda x, i=i: presence_alpha(x, i)),
            }
        )
    return {
        "n_units": int(shared.sum()),
        "n_responses": int(m.sum()),
        "per_theme": rows,
        "alpha_pooled": pop.figure(presence_alpha),
    }


# --------------------------------------------------------------------------------------------
# Table 11 (TF-IDF cosine stand-in)
# --------------------------------------------------------------------------------------------


def composed_texts(answers: pd.DataFrame, frames: StudyFrames, themes: list[str]) -> pd.Series:
    """The response a patient would read, per answer (``store.kinds.respond.compose``)."""
    parts = frames.respond_parts[frames.respond_parts.answer_id.isin(answers.answer_id)]
    boxes: dict[int, dict[str, str]] = {}
    for a, theme, text in zip(
        parts.answer_id.tolist(), parts.theme.tolist(), parts.text.tolist(), strict=True
    ):
        boxes.setdefault(a, {})[theme] = text
    texts = [
        compose({"mode": mode, "parts": boxes.get(a, {}), "final_text": final or ""}, themes)
        for a, mode, final in zip(
            answers.answer_id.tolist(),
            answers["mode"].tolist(),
            answers.final_text.tolist(),
            strict=True,
        )
    ]
    return pd.Series(texts, index=answers.answer_id.to_numpy())


def pair_cosines(answers: pd.DataFrame, texts: pd.Series) -> pd.DataFrame:
    """Cosine of the TF-IDF vectors of two clinicians' responses to the same case, for every
    pair of clinicians on every shared case; one TF-IDF model fitted on all non-blank texts
    (scikit-learn defaults, as ``metrics.tfidf_cosine_matrix``). Texts without a token give
    no value."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    present = texts[texts.str.strip() != ""]
    rows = answers[answers.answer_id.isin(present.index)][["answer_id", "unit_id", "annotator"]]
    pairs = rows.merge(rows, on="unit_id", suffixes=("_a", "_b"))
    pairs = pairs[pairs.annotator_a < pairs.annotator_b].reset_index(drop=True)
    if pairs.empty:
        return pairs.assign(cosine=[])
    try:
        matrix = TfidfVectorizer().fit_transform(present.to_numpy()).tocsr()
    except ValueError:  # no text has a token
        return pairs.iloc[:0].assign(cosine=[])
    where = pd.Series(np.arange(len(present)), index=present.index)
    left = matrix[where.loc[pairs.answer_id_a].to_numpy()]
    right = matrix[where.loc[pairs.answer_id_b].to_numpy()]
    cosine = np.asarray(left.multiply(right).sum(axis=1)).ravel()
    empty = (left.getnnz(axis=1) == 0) | (right.getnnz(axis=1) == 0)
    pairs["cosine"] = np.where(empty, np.nan, np.clip(cosine, -1.0, 1.0))
    return pairs.dropna(subset=["cosine"])


def similarity(answers: pd.DataFrame, texts: pd.Series, s: Settings) -> dict[str, Any]:
    """Mean pairwise TF-IDF cosine per pair of clinicians and overall (CI over cases)."""
    pairs = pair_cosines(answers, texts)
    per_unit = pairs.groupby("unit_id").cosine.agg(["sum", "size"])
    pop = s.population(
        {"total": per_unit["sum"].to_numpy(), "n": per_unit["size"].to_numpy()}, per_unit.index
    )
    by_pair = pairs.groupby(["annotator_a", "annotator_b"]).cosine.agg(["mean", "size"])
    return {
        "method": "tfidf_cosine",
        "n_comparisons": len(pairs),
        "mean": pop.figure(lambda x: safe_ratio(x["total"], x["n"])),
        "by_pair": [
            {"annotator_a": a, "annotator_b": b, "mean_cosine": r["mean"], "n_units": r["size"]}
            for (a, b), r in by_pair.iterrows()
        ],
    }


# --------------------------------------------------------------------------------------------
# Editing load and time
# --------------------------------------------------------------------------------------------


def time_on_task(answers: pd.DataFrame) -> list[dict[str, Any]]:
    """Active seconds per mode: answers, mean and median (no CI: a description)."""
    grouped = answers.groupby("mode").active_seconds.agg(["size", "mean", "median"])
    return [
        {
            "mode": mode,
            "n_answers": r["size"],
            "mean_seconds": r["mean"],
            "median_seconds": r["median"],
        }
        for mode, r in grouped.iterrows()
    ]


def analyse(
    frames: StudyFrames,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
) -> dict[str, Any]:
    """The respond tables of seed 000 computed from the project's respond answers."""
    s = Settings.of(catalogs, seed, n_resamples).for_units(answered_units(frames, KIND))
    themes = [t.id for t in s.catalogs.themes]
    answers = respond_answers(frames)
    if answers.empty:
        return jsonable({**answer_counts(answers), **EMPTY})
    guided = answers[answers["mode"] == "theme_guided"]
    table = theme_counts(answers, frames, themes)
    texts = composed_texts(answers, frames, themes)
    modes = answers["mode"].value_counts()
    return jsonable(
        {
            **answer_counts(answers),
            "n_theme_guided": int(modes.get("theme_guided", 0)),
            "n_edit_draft": int(modes.get("edit_draft", 0)),
            "theme_proportions": proportions(guided, table, themes, s),
            "theme_agreement": theme_iaa(guided, table, themes, s),
            "similarity": similarity(answers, texts, s),
            "editing_load": edits.editing(answers, frames, s),
            "time_on_task": time_on_task(answers),
        }
    )
