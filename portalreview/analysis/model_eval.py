"""Model quality, measured: each model pseudo-annotator (``annotators.is_model``) beside the
clinicians, with the papers' own measures, each figure with its 95% bootstrap interval and n.

Per model, on the units that model answered (so the model and the clinicians are scored on the
same units; the clinicians' figures beside it are theirs on those units):

* urgency (seed 002): pairwise accuracy against the reference levels by difficulty (Section
  4.1, Table 2; :func:`analysis.urgency.accuracy`) and NDCG@k / T-NDCG@k of each inbox sorted
  by the model's own pair answers (Section 4.2; :func:`analysis.urgency.inbox`);
* eppc (seed 003): micro P / R / F1 of codes and of code-subcode pairs against the gold
  (adjudicated) answers (Appendix B; :func:`analysis.eppc.compare`);
* match (seed 000, Table 8): agreement, non-match agreement, match agreement and match overlap
  of the model's content matches judged against each clinician's, and of each clinician's
  against each other's (:func:`analysis.match.judge_agreement_table`);
* rank (seed 001, Table 4): Kendall's tau-b between the model's ranking and each clinician's,
  and between clinicians (:func:`analysis.rank.rater_tau`);
* empathy (seed 004, Section 3.6): percent agreement and Krippendorff's alpha of the 3-way
  verdicts (:func:`analysis._agreement.model_vs_people`);
* facts (seed 004, Section 3.3, equations 1-4): the micro and macro Fact-Recall and
  Fact-Precision the model's fact checks give the edits, beside the clinicians' own
  (:func:`analysis.facts.scores`);
* suggestions: the share of the model's suggestions the quality gates refused
  (``suggestions.refused_reason``, ``llm/gates.py``), per kind and over all, CI over the units
  it suggested for.

Nothing here implements a measure: every figure is an analysis module's, computed on the model's
units. The intervals are the analyses' own: a percentile bootstrap over the model's units of
that kind (``metrics.bootstrap_ci``'s resamples), except the inbox scores, whose intervals
resample judgements (see :mod:`analysis.urgency`): a sort made by one judge, who answered each
pair once, has no such interval, and its figure says so.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from portalreview.analysis import empathy as empathy_analysis
from portalreview.analysis import eppc, facts, match, rank, urgency
from portalreview.analysis._agreement import model_vs_people
from portalreview.analysis._common import (
    Settings,
    humans,
    jsonable,
    ordered_names,
    people,
    safe_ratio,
)
from portalreview.domain.catalogs import Catalogs
from portalreview.llm.runtime import where_it_ran
from portalreview.store.frames import StudyFrames

#: The kinds a model is evaluated on, in the order the table lists them (respond has no
#: model-vs-clinician measure in the papers).
KINDS = ("urgency", "eppc", "match", "rank", "empathy", "facts")
#: What a figure's n counts, per kind.
N_UNITS = {
    "urgency": "pairs",
    "eppc": "sentences",
    "match": "reference x draft units",
    "rank": "cases",
    "empathy": "pairs",
    "facts": "pairs",
    "suggestions": "units",
}
SOURCES = {
    "urgency": "seed 002, Table 2 and Section 4.2",
    "eppc": "seed 003, Appendix B",
    "match": "seed 000, Table 8",
    "rank": "seed 001, Table 4",
    "empathy": "seed 004, Section 3.6",
    "facts": "seed 004, Section 3.3",
    "suggestions": "quality gates",
}
NO_DATA = "not enough data"
UNDEFINED = "undefined on these units"
#: Why an inbox score has no interval when one judge answered each pair once.
ONE_JUDGE = "no interval: one judgement per pair (inbox intervals resample judgements)"


@dataclass(frozen=True)
class Figure:
    """One figure: its value, 95% bootstrap interval and the number of units it rests on;
    ``note`` says why the value or the interval is missing."""

    value: float | None
    ci: tuple[float, float] | None
    n: int
    note: str = ""

    @classmethod
    def of(cls, data: dict[str, Any] | None, note: str = "") -> Figure:
        """From an analysis figure ``{"value", "ci", "n_units", ...}`` (made JSON-ready)."""
        data = jsonable(data) if data is not None else None
        if not data:
            return cls(None, None, 0, note or NO_DATA)
        ci = data.get("ci")
        ci = tuple(ci) if ci and None not in ci else None
        value = data.get("value")
        n = int(data.get("n_units") or 0)
        if value is None:  # no units, or a statistic undefined on them (alpha of one category)
            note = note or (UNDEFINED if n else NO_DATA)
        elif ci is None and not note:
            note = "no interval (too few units or resamples)"
        return cls(value, ci, n, note)

    @classmethod
    def missing(cls, note: str = NO_DATA) -> Figure:
        return cls(None, None, 0, note)


@dataclass(frozen=True)
class Row:
    """One figure of one evaluated model's table: ``who`` gave the answers it scores (the
    model or a clinician), ``against`` the reference they are scored against (a clinician,
    "gold", "reference levels"; "" for a figure of ``who`` alone)."""

    model: str
    kind: str
    measure: str
    who: str
    against: str
    figure: Figure

    @property
    def is_model(self) -> bool:
        return self.who == self.model

    @property
    def n_of(self) -> str:
        return N_UNITS[self.kind]

    @property
    def source(self) -> str:
        return SOURCES[self.kind]


@dataclass
class ModelEvaluation:
    """Every model's rows, the settings they were computed with."""

    models: list[str]
    rows: list[Row] = field(default_factory=list)
    seed: int = 0
    n_resamples: int = 1000
    # model -> where its answers' suggestions were made (in words) -> how many answers
    ran_on: dict[str, dict[str, int]] = field(default_factory=dict)

    def rows_of(self, model: str, kind: str | None = None) -> list[Row]:
        return [r for r in self.rows if r.model == model and (kind is None or r.kind == kind)]

    def find(self, model: str, kind: str, measure: str, who: str, against: str = "") -> Figure:
        """The figure of one row (KeyError when there is none)."""
        for r in self.rows_of(model, kind):
            if r.measure == measure and r.who == who and r.against == against:
                return r.figure
        raise KeyError((model, kind, measure, who, against))


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def model_names(frames: StudyFrames) -> list[str]:
    """The model pseudo-annotators with at least one submitted ordinary answer."""
    answers = frames.answers
    keep = answers.is_model.astype(bool) & ~answers.is_gold.astype(bool)
    return ordered_names(answers[keep].annotator)


def _ordinary(frames: StudyFrames, kind: str) -> pd.DataFrame:
    answers = people(frames, kind)
    return answers[~answers.is_gold.astype(bool)]


def _units_of(answers: pd.DataFrame, who: str) -> list[int]:
    return sorted(answers[answers.annotator == who].unit_id.unique().tolist())


def _clinicians_on(answers: pd.DataFrame, units: Iterable[int]) -> list[str]:
    """The people (not models, not gold) who answered any of ``units``."""
    return ordered_names(humans(answers[answers.unit_id.isin(list(units))]).annotator)


class _Rows:
    """Collects one model's rows of one kind."""

    def __init__(self, model: str, kind: str) -> None:
        self.model, self.kind, self.rows = model, kind, []

    def add(self, measure: str, who: str, against: str, figure: Figure) -> None:
        self.rows.append(Row(self.model, self.kind, measure, who, against, figure))

    def none(self, measure: str, note: str) -> list[Row]:
        self.add(measure, self.model, "", Figure.missing(note))
        return self.rows


# --------------------------------------------------------------------------------------------
# One function per kind
# --------------------------------------------------------------------------------------------

DIFFICULTY = {
    "easy": "pair accuracy, easy (levels 4+ apart)",
    "medium": "pair accuracy, medium (2-3 apart)",
    "hard": "pair accuracy, hard (1 apart)",
    "total": "pair accuracy, all pairs",
}
INBOX_SCORES = ("ndcg@10", "t_ndcg@10", "ndcg@30", "t_ndcg@30")


def _urgency(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "urgency")
    rows = urgency.decisions(frames)
    rows = rows[~rows.is_gold.astype(bool)]
    units = _units_of(rows, model)
    if not units:
        return out.none(DIFFICULTY["total"], "the model answered no urgency pair")
    s = base.for_units(units)
    on = rows[rows.unit_id.isin(units)]
    everyone = [model, *_clinicians_on(on, units)]
    for who in everyone:
        found = jsonable(urgency.accuracy(on[on.annotator == who], s))
        for bucket, measure in DIFFICULTY.items():
            out.add(measure, who, "reference levels", Figure.of(found[bucket]["accuracy"]))
    for index, (name, members) in enumerate(urgency.inbox_members(frames).items()):
        scored = jsonable(urgency.inbox(name, members, on, frames, s, index=index))
        by_who = {e["annotator"]: e for e in scored["by_annotator"]}
        if model not in by_who:
            continue
        for who in everyone:
            for key in INBOX_SCORES:
                entry = by_who.get(who)
                fig = Figure.of(entry[key] if entry else None)
                if fig.value is not None and fig.ci is None:
                    fig = Figure(fig.value, None, fig.n, ONE_JUDGE)
                label = key.upper().replace("T_NDCG", "T-NDCG")
                out.add(f"inbox {name}: {label} of the sort", who, "reference levels", fig)
    return out.rows


EPPC_MEASURES = {
    ("codes", "precision"): "codes: micro precision",
    ("codes", "recall"): "codes: micro recall",
    ("codes", "f1"): "codes: micro F1",
    ("code_subcode", "precision"): "code-subcode: micro precision",
    ("code_subcode", "recall"): "code-subcode: micro recall",
    ("code_subcode", "f1"): "code-subcode: micro F1",
}


def _eppc(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "eppc")
    answers = people(frames, "eppc")
    if model not in set(answers.annotator):
        return out.none("codes: micro F1", "the model coded no sentence")
    codes = [c.id for c in base.catalogs.eppc_codes]
    coding = eppc.Coding(answers, eppc.label_rows(answers, frames, codes))
    units = coding.shared(model, "")
    if units.empty:
        return out.none("codes: micro F1", "no gold (adjudicated) answer on the model's units")
    s = base.for_units(units)
    for who in [model, *_clinicians_on(answers, units)]:
        mine = units.intersection(coding.units_of[who])
        found = jsonable(
            eppc.compare(coding.rows_of[""], coding.rows_of[who], mine, codes, s, coding.matcher)
        )
        for (part, score), measure in EPPC_MEASURES.items():
            out.add(measure, who, "gold", Figure.of(found[part][score]))
    return out.rows


MATCH_MEASURES = {
    "agreement": "agreement",
    "non_match_agreement": "non-match agreement",
    "match_agreement": "match agreement (same span)",
    "match_overlap": "match overlap",
}


def _match(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "match")
    answers = _ordinary(frames, "match")
    units = _units_of(answers, model)
    if not units:
        return out.none("agreement", "the model matched no draft")
    s = base.for_units(units)
    on = answers[answers.unit_id.isin(units)]
    table = jsonable(match.judge_agreement_table(on, frames, s))
    if not any(e["judged_annotator"] == model for e in table):
        return out.none("agreement", "no clinician answered the model's match units")
    # the model's rows first, then each pair of clinicians (the human agreement beside it)
    table.sort(key=lambda e: (e["judged_annotator"] != model, e["judged_annotator"]))
    for entry in table:
        for key, measure in MATCH_MEASURES.items():
            fig = Figure.of(entry[key])
            out.add(measure, entry["judged_annotator"], entry["reference_annotator"], fig)
    return out.rows


def _rank(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "rank")
    measure = "Kendall's tau-b of the rankings"
    answers = _ordinary(frames, "rank")
    units = _units_of(answers, model)
    if not units:
        return out.none(measure, "the model ranked no case")
    long, _ = rank.long_table(answers[answers.unit_id.isin(units)], frames)
    sources = sorted(long.source.unique().tolist())
    table = rank.wide(long, "rank", sources)
    meta = long.drop_duplicates("answer_id").set_index("answer_id").loc[table.index]
    s = base.for_units(units)
    clinicians = _clinicians_on(answers, units)
    pairs = [(model, c) for c in clinicians] + list(itertools.combinations(clinicians, 2))
    if not clinicians:
        return out.none(measure, "no clinician ranked the model's cases")
    for a, b in pairs:
        mine = meta[meta.rater.isin([a, b])]
        tau = rank.rater_tau(
            table.loc[mine.index], mine.reset_index()[["answer_id", "unit", "rater"]], s
        )
        out.add(measure, a, b, Figure.of(jsonable(tau)["mean"]))
    return out.rows


def _empathy(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "empathy")
    rows, _ = empathy_analysis.choices(frames)
    rows = rows[~rows.is_gold.astype(bool)]
    units = _units_of(rows, model)
    if not units:
        return out.none("verdict: percent agreement", "the model compared no pair")
    s = base.for_units(units)
    long = rows[rows.unit_id.isin(units)][["unit_id", "annotator", "value"]]
    clinicians = _clinicians_on(rows, units)
    pairs = [(model, c) for c in clinicians] + list(itertools.combinations(clinicians, 2))
    if not clinicians:
        return out.none("verdict: percent agreement", "no clinician compared the model's pairs")
    for a, b in pairs:
        # model_vs_people scores its "model" (here: a) against each other annotator (b)
        found = jsonable(model_vs_people(long[long.annotator.isin([a, b])], [a], s))
        entry = found[0] if found else {}
        out.add("verdict: percent agreement", a, b, Figure.of(entry.get("percent_agreement")))
        out.add("verdict: Krippendorff's alpha", a, b, Figure.of(entry.get("alpha")))
    return out.rows


FACT_MEASURES = {
    ("micro", "recall"): "Fact-Recall (micro)",
    ("micro", "precision"): "Fact-Precision (micro)",
    ("macro", "recall"): "Fact-Recall (macro)",
    ("macro", "precision"): "Fact-Precision (macro)",
}


def _facts(frames: StudyFrames, model: str, base: Settings) -> list[Row]:
    out = _Rows(model, "facts")
    answers = _ordinary(frames, "facts")
    units = _units_of(answers, model)
    if not units:
        return out.none("Fact-Recall (micro)", "the model checked no edit")
    s = base.for_units(units)
    pairs = facts.pair_counts(answers[answers.unit_id.isin(units)], frames)
    decided = pairs[(pairs.n_undecided == 0) & ~pairs.unchecked]  # as analysis.facts
    for who in [model, *_clinicians_on(answers, units)]:
        mine = decided[decided.annotator == who]
        found = jsonable(facts.scores(mine, s)) if len(mine) else None
        for (part, score), measure in FACT_MEASURES.items():
            fig = Figure.of(found[part][score]) if found else Figure.missing()
            out.add(measure, who, "", fig)
    return out.rows


EVALUATORS: dict[str, Callable[[StudyFrames, str, Settings], list[Row]]] = {
    "urgency": _urgency,
    "eppc": _eppc,
    "match": _match,
    "rank": _rank,
    "empathy": _empathy,
    "facts": _facts,
}


# --------------------------------------------------------------------------------------------
# The share of suggestions the quality gates refused
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suggestions:
    """The study's model suggestions (``rows``: suggestion_id, unit_id, kind, model_file,
    model_sha256, refused; one row per suggestion) and which of them each pseudo-annotator's
    answers started from (``links``: annotator, suggestion_id, ran_on - where the model ran,
    in words)."""

    rows: pd.DataFrame
    links: pd.DataFrame


def read_suggestions(project: Any) -> Suggestions:
    """:class:`Suggestions` of a project (PI / system read). Only the suggestions an answer
    started from have their parameters read (they hold every prompt: kilobytes each)."""
    from sqlalchemy import select

    from portalreview.store.models import Annotator, Answer, Suggestion

    with project.read() as s:
        rows = s.execute(
            select(
                Suggestion.id,
                Suggestion.unit_id,
                Suggestion.kind,
                Suggestion.model_file,
                Suggestion.model_sha256,
                Suggestion.refused_reason,
            ).order_by(Suggestion.id)
        ).all()
        links = s.execute(
            select(Annotator.name, Answer.suggestion_id, Suggestion.params_json)
            .join(Annotator, Annotator.id == Answer.annotator_id)
            .join(Suggestion, Suggestion.id == Answer.suggestion_id)
            .where(Annotator.is_model.is_(True))
        ).all()
    columns = ["suggestion_id", "unit_id", "kind", "model_file", "model_sha256", "reason"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["refused"] = frame.reason.notna() & (frame.reason.astype(str).str.strip() != "")
    linked = pd.DataFrame(
        [(name, sid, _ran_on(params)) for name, sid, params in links],
        columns=["annotator", "suggestion_id", "ran_on"],
    )
    return Suggestions(frame.drop(columns="reason"), linked)


def _ran_on(params_json: str | None) -> str:
    """A suggestion's recorded runtime in words (or that it was not recorded)."""
    try:
        params = json.loads(params_json or "{}")
    except ValueError:
        params = {}
    return where_it_ran(params.get("runtime") if isinstance(params, dict) else None)


def ran_on(suggestions: Suggestions | None, model: str) -> dict[str, int]:
    """Where the suggestions that ``model``'s answers started from were made -> how many
    answers: a model pseudo-annotator run once on a GPU and once on a CPU pools answers that
    can differ for that reason alone (docs/llm.md, "On a GPU")."""
    if suggestions is None:
        return {}
    links = suggestions.links
    counts = links[links.annotator == model].ran_on.value_counts()
    return {str(where): int(n) for where, n in sorted(counts.items())}


def _file_stem(name: str) -> str:
    return name.rsplit("/", 1)[-1].removesuffix(".gguf")


def suggestions_of(suggestions: Suggestions, model: str) -> pd.DataFrame:
    """The suggestions of the model behind the pseudo-annotator ``model``: those of every model
    file (SHA-256) its answers started from, and those of a file named as the pseudo-annotator
    (``evaluate-model --model FILE`` names it after the file: a model all of whose suggestions
    were refused has no answer to start from)."""
    rows = suggestions.rows
    linked = suggestions.links[suggestions.links.annotator == model].suggestion_id
    hashes = set(rows[rows.suggestion_id.isin(linked)].model_sha256)
    named = rows.model_file.map(_file_stem) == _file_stem(model)
    return rows[rows.model_sha256.isin(hashes) | named]


REFUSED = "share refused by the quality gates"


def _refused(suggestions: Suggestions | None, model: str, base: Settings) -> list[Row]:
    """The share of the model's suggestions the quality gates refused, per kind and over all,
    with a bootstrap CI over the units suggested for."""
    out = _Rows(model, "suggestions")
    if suggestions is None:
        return out.none(f"{REFUSED}: all kinds", "the study's suggestions were not read")
    mine = suggestions_of(suggestions, model)
    if mine.empty:
        return out.none(f"{REFUSED}: all kinds", "no stored suggestion of this model")
    for label, group in [("all kinds", mine), *mine.groupby("kind", sort=True)]:
        per_unit = group.groupby("unit_id").refused.agg(["sum", "size"])
        s = base.for_units(per_unit.index)
        pop = s.population(
            {"refused": per_unit["sum"].to_numpy(), "n": per_unit["size"].to_numpy()},
            per_unit.index,
        )
        fig = pop.figure(lambda x: safe_ratio(x["refused"], x["n"]))
        out.add(f"{REFUSED}: {label}", model, "", Figure.of(fig))
    return out.rows


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def evaluate(
    frames: StudyFrames,
    *,
    models: Iterable[str] | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
    catalogs: Catalogs | None = None,
    kinds: Iterable[str] = KINDS,
    suggestions: Suggestions | None = None,
) -> ModelEvaluation:
    """Every model pseudo-annotator of the study (or those named in ``models``) beside the
    clinicians, kind by kind, and the share of its ``suggestions`` the quality gates refused
    (:func:`read_suggestions`); a model name that has no answer is a ValueError."""
    found = model_names(frames)
    chosen = found if models is None else list(models)
    unknown = [m for m in chosen if m not in found]
    if unknown:
        have = ", ".join(found) or "none"
        raise ValueError(
            f"no answers of a model pseudo-annotator named {', '.join(unknown)} "
            f"(the study's model annotators: {have})"
        )
    base = Settings.of(catalogs, seed, n_resamples)
    result = ModelEvaluation(chosen, seed=base.seed, n_resamples=base.n_resamples)
    for model in chosen:
        result.ran_on[model] = ran_on(suggestions, model)
        refused = _refused_counts(suggestions, model)
        for kind in kinds:
            rows = EVALUATORS[kind](frames, model, base)
            result.rows += _say_refused(rows, refused.get(kind, 0))
        result.rows += _refused(suggestions, model, base)
    return result


def _refused_counts(suggestions: Suggestions | None, model: str) -> dict[str, int]:
    """kind -> how many of the model's suggestions the quality gates refused."""
    if suggestions is None:
        return {}
    mine = suggestions_of(suggestions, model)
    return mine[mine.refused].kind.value_counts().to_dict()


def _say_refused(rows: list[Row], n_refused: int) -> list[Row]:
    """A kind the model has no usable answer of says how many of its suggestions the quality
    gates refused (they are never an annotator's answer)."""
    if n_refused == 0 or len(rows) != 1 or rows[0].figure.value is not None:
        return rows
    row = rows[0]
    note = f"{row.figure.note}; the quality gates refused its {n_refused} suggestion(s)"
    return [Row(row.model, row.kind, row.measure, row.who, row.against, Figure.missing(note))]


def units_to_run(frames: StudyFrames, kind: str, unit_ids: list[int], limit: int) -> list[int]:
    """The ``limit`` units of ``unit_ids`` a model should answer first so that its answers
    can be compared: units with a gold answer, then those with the most clinicians' answers,
    then the rest, each in the given order."""
    if limit <= 0:
        raise ValueError(f"the limit must be a positive number of units, got {limit}")
    answers = people(frames, kind)
    gold = set(answers[answers.is_gold.astype(bool)].unit_id.tolist())
    counts = humans(answers).unit_id.value_counts()
    order = sorted(
        range(len(unit_ids)),
        key=lambda i: (unit_ids[i] not in gold, -int(counts.get(unit_ids[i], 0)), i),
    )
    return [unit_ids[i] for i in order[:limit]]


def format_figure(figure: Figure, decimals: int = 3) -> str:
    """``0.812 [0.700, 0.900] n=12``; ``n=0 — not enough data (...)`` without a value."""
    if figure.value is None:
        why = f" ({figure.note})" if figure.note and figure.note != NO_DATA else ""
        return f"n={figure.n} — {NO_DATA}{why}"
    text = f"{figure.value:.{decimals}f}"
    if figure.ci is not None:
        low, high = figure.ci
        text += f" [{low:.{decimals}f}, {high:.{decimals}f}]"
    else:
        text += " [no interval]"
    return f"{text} n={figure.n}"
