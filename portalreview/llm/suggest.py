"""Suggesters: a model's answer to one unit of each kind, as that kind's payload, with the
provenance every suggestion stores (model file and SHA-256, template id and text, parameters,
seed, seconds); batch runs over a unit set that resume where they stopped; and a model's
answers stored as a pseudo annotator so that agreement compares model and clinicians (seed
000 Table 8; seed 004's alignment score).

Per kind (the templates are in ``resources/prompts``):

* respond: the theme-guided form filled as JSON (seed 000, Appendix G/H);
* rank: rank and correctness with reasons C1-C3 as JSON (seed 001);
* match: per reference sentence the verbatim draft span or NO MATCH (seed 000, Algorithm 1),
  then a theme per sentence of both replies (seed 000, Appendix C.2);
* urgency: P(A before B) read from YES/NO next-token probabilities, both orders (seed 002),
  and each patient's level 1-6 (seed 002, Table 6) read from one next-token distribution over
  the level numbers;
* eppc: codes, subcodes and evidence spans as JSON with previous/next sentence (seed 003);
* empathy: the three-way verdict (seed 004, 3EM-Ranker);
* facts: medical facts of both replies, then entailment of each by the other reply, read from
  YES/NO probabilities (seed 004, MedFactChecking), and for each fact not entailed its expert
  error category (seed 004, Supplementary Table 3) read from one next-token distribution over
  the categories' letters.

The level and the error category come from optional templates (``urgency_level``,
``fact_error_category``, like ``sentence_theme`` for match): a context without them still
suggests the rest of the answer.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import func, select

from portalreview.domain.catalogs import Catalogs
from portalreview.llm import answers, gates, grammars
from portalreview.llm.chat import keep_cue_mark
from portalreview.llm.engine import Engine, Generation, GenerationParams
from portalreview.llm.errors import (
    AnswerError,
    Cancelled,
    LlmError,
    ModelFileChanged,
    ModelProcessDied,
    ModelServerError,
    TemplateError,
)
from portalreview.llm.grammars import GrammarLimits
from portalreview.llm.own_examples import OwnExample, examples_text
from portalreview.llm.templates import (
    PromptLibrary,
    PromptTemplate,
    codebook_text,
    criteria_text,
    error_categories_text,
    error_category_labels,
    themes_text,
    urgency_levels_text,
)
from portalreview.llm.urgency import (
    NO,
    YES,
    InboxScores,
    PairProbability,
    Patient,
    pair_probability,
)
from portalreview.store.claims import in_turn
from portalreview.store.kinds import PayloadError
from portalreview.store.models import AuditEntry, Unit, UnitSet
from portalreview.store.service import CaseView, StoreError, StudyService, UnitView
from portalreview.store.study_setup import CaseFilter, EventRecorder, plan_units
from portalreview.store.templates import (
    TemplateService,
    read_cases,
    refused_reasons,
    response_by_external_id,
    suggestion_payload,
    suggestions_by,
    unit_ids,
)

TEMPLATES_FOR_KIND: dict[str, tuple[str, ...]] = {
    "respond": ("respond_boxes",),
    "rank": ("rank_judge",),
    "match": ("content_match", "sentence_theme"),
    "urgency": ("urgency_pair", "urgency_level"),
    "eppc": ("eppc_extract",),
    "empathy": ("empathy_judge",),
    "facts": ("fact_decompose", "fact_entail", "fact_error_category"),
}
DRAFT_KINDS = ("draft_zero_shot", "draft_thematic")
DRAFT_EVENT = "draft"  # the audit log action that records how a draft was made
# The model went away: its process died, the server stopped answering, or its file changed on
# disk. Each next unit would fail the same way, so a run stops; what it stored is kept.
MODEL_GONE = (ModelProcessDied, ModelServerError, ModelFileChanged)
DRAFT_PRODUCTION = {
    "draft_zero_shot": "zero_shot",
    "draft_thematic": "thematic_prompt",
    "empathy_edit": "edited_empathy",
}


@dataclass
class SuggestContext:
    """What every suggester needs. ``cancel`` stops within one token."""

    engine: Engine
    catalogs: Catalogs
    templates: dict[str, PromptTemplate]
    params: GenerationParams = field(default_factory=GenerationParams)
    limits: GrammarLimits = field(default_factory=GrammarLimits)
    cancel: threading.Event | None = None
    match_themes: bool = True
    # A respond suggestion for one clinician, with their own earlier replies as examples
    # (llm/own_examples.py; the "respond_own_examples" template): who, and which replies.
    for_annotator: int | None = None
    own_examples: tuple[OwnExample, ...] = ()

    @property
    def template_id(self) -> str:
        """What a suggestion made with these templates records (:attr:`ModelAnswer.template_id`)."""
        return "+".join(t.key for t in self.templates.values())


@dataclass(frozen=True)
class ModelAnswer:
    """A model's payload for one unit, with what :meth:`StudyService.add_suggestion` stores.
    ``observed`` holds numbers behind the answer (probabilities), saved in the parameters.
    ``refused``: why the quality gates refused it (see :func:`gated`), None when it may be
    offered."""

    unit_id: int
    kind: str
    payload: dict[str, Any]
    templates: tuple[PromptTemplate, ...]
    params: dict[str, Any]
    seed: int
    seconds: float
    refused: str | None = None
    for_annotator: int | None = None  # made from this clinician's own replies: theirs alone

    @property
    def template_id(self) -> str:
        return "+".join(t.key for t in self.templates)

    @property
    def template_text(self) -> str:
        return template_text(self.templates)


def template_text(templates: Sequence[PromptTemplate]) -> str:
    if len(templates) == 1:
        return templates[0].text
    return "\n".join(f"----- {t.key} -----\n{t.text.rstrip()}" for t in templates)


def resolve_templates(
    library: PromptLibrary, kind: str, match_themes: bool = True, own_examples: bool = False
) -> dict[str, PromptTemplate]:
    """The templates a kind's suggestion uses; ``own_examples``: a respond suggestion with the
    clinician's own earlier replies (``respond_own_examples`` instead of ``respond_boxes``)."""
    names = TEMPLATES_FOR_KIND.get(kind)
    if names is None:
        raise LlmError(f"no model suggestions for the kind {kind!r}")
    if kind == "match" and not match_themes:
        names = names[:1]
    if kind == "respond" and own_examples:
        names = ("respond_own_examples",)
    return {n: library.template(n) for n in names}


# --- generation helpers -----------------------------------------------------------------------


def _generate(ctx: SuggestContext, name: str, values: dict[str, str], grammar: str | None) -> str:
    gen = ctx.engine.complete(
        ctx.templates[name].render(values), ctx.params, grammar=grammar, cancel=ctx.cancel
    )
    if gen.finish_reason in ("cancelled", "closed"):
        raise Cancelled("cancelled")
    if gen.finish_reason == "length":
        raise AnswerError(f"the {name} answer", [gen.cut_off()], gen.text)
    return gen.text


@dataclass(frozen=True)
class OneTokenChoice:
    """One of a few one-token labels, read from one next-token distribution (nothing is
    generated): the most probable ``label``, every label's probability renormalized over the
    labels, and the ``mass`` the labels hold in the full distribution (near 1 when the model
    answers in the asked format)."""

    label: str
    probs: dict[str, float]
    mass: float

    def observed(self, names: dict[str, str] | None = None) -> dict[str, Any]:
        """What a suggestion keeps of it; ``names`` renames the labels (a letter -> the
        category id it stands for)."""
        names = names or {}
        return {"probs": {names.get(k, k): p for k, p in self.probs.items()}, "mass": self.mass}


def one_token_options(
    engine: Engine, segments: Sequence[str], labels: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """How to ask for one of ``labels`` in one next-token distribution: the prompt segments to
    evaluate and ``{label: option text}``. Tried in turn: the label after a space (" 3", " B":
    one token in many vocabularies, for letters in nearly all); a space at the end of the
    prompt and the bare label (tokenizers that split digits, such as Llama 2's and Llama 3's,
    make " 3" the space and then the digit); the bare label right after the prompt's cue
    ("Level:3"). Each option must add exactly one token, a different one for each label;
    otherwise its first token would not stand for the label alone."""
    if len(labels) < 2:
        raise LlmError(f"a one-token answer needs at least two options, not {list(labels)}")
    last = segments[-1]
    for end, lead in (("", " "), (" ", ""), ("", "")):
        options = {label: lead + label for label in labels}
        if _one_token_each(engine, last + end, list(options.values())):
            return [*segments[:-1], keep_cue_mark(last, last + end)], options
    raise LlmError(
        f"the answer options {', '.join(labels)} are not one token each in this model's "
        "tokenizer, neither after a space nor right after the prompt; end the template with a "
        "cue such as 'Answer:' or use fewer options"
    )


def _one_token_each(engine: Engine, prompt_end: str, options: list[str]) -> bool:
    base = engine.tokenize(prompt_end)
    firsts = set()
    for option in options:
        tokens = engine.tokenize(prompt_end + option)
        if len(tokens) != len(base) + 1 or tokens[: len(base)] != base:
            return False
        firsts.add(tokens[-1])
    return len(firsts) == len(options)


def _choose(
    ctx: SuggestContext, name: str, values: dict[str, str], labels: Sequence[str]
) -> OneTokenChoice:
    """The template ``name`` answered with one of ``labels`` from the next-token
    distribution (ties go to the earlier label)."""
    segments, options = one_token_options(ctx.engine, ctx.templates[name].render(values), labels)
    result = ctx.engine.choice_probabilities(
        segments, list(options.values()), cancel=ctx.cancel
    )
    probs = {label: result.probs[option] for label, option in options.items()}
    return OneTokenChoice(max(labels, key=probs.__getitem__), probs, result.mass)


def _case(unit: UnitView) -> CaseView:
    return unit.cases[0]


def _labelled(unit: UnitView, label: str) -> Any:
    for r in unit.responses:
        if r.label == label:
            return r
    raise LlmError(f"unit {unit.unit_id} has no {label.lower()} response")


# --- one suggester per kind -------------------------------------------------------------------


def suggest_respond(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    case = _case(unit)
    values = {
        "themes": themes_text(ctx.catalogs, with_ids=True, include_other=True),
        "chart": case.chart_text,
        "message": case.message,
    }
    name = "respond_boxes"
    if "respond_own_examples" in ctx.templates:
        name = "respond_own_examples"
        values["examples"] = examples_text(list(ctx.own_examples))
    raw = _generate(ctx, name, values, grammars.respond_boxes(ctx.catalogs, ctx.limits))
    return answers.respond_payload(raw, ctx.catalogs), {}


def suggest_rank(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    case = _case(unit)
    labels = [chr(65 + i) for i in range(len(unit.responses))]
    ids = [r.id for r in unit.responses]
    listing = "\n\n".join(
        f"Reply {lb}:\n{r.text}" for lb, r in zip(labels, unit.responses, strict=True)
    )
    values = {
        "criteria": criteria_text(ctx.catalogs),
        "chart": case.chart_text,
        "message": case.message,
        "responses": listing,
    }
    grammar = grammars.rank_judge(labels, [c.id for c in ctx.catalogs.criteria])
    raw = _generate(ctx, "rank_judge", values, grammar)
    return answers.rank_payload(raw, labels, ids, ctx.catalogs), {"order": ids}


def suggest_match(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    reference, draft = _labelled(unit, "Reference"), _labelled(unit, "Draft")
    spans = content_matches(ctx, draft.text, [s.text for s in reference.sentences])
    decisions = [
        {"sentence_id": sentence.id, "spans": found}
        for sentence, found in zip(reference.sentences, spans, strict=True)
    ]
    payload: dict[str, Any] = {"decisions": decisions, "themes": []}
    if "sentence_theme" in ctx.templates:
        payload["themes"] = _theme_labels(ctx, (reference, draft))
    return payload, {}


def content_matches(ctx: SuggestContext, draft: str, sentences: Sequence[str]) -> list[list]:
    """The content-level judge (seed 000, Algorithm 1; the ``content_match`` template): for
    each reference sentence, the span of ``draft`` that matches it, or ``[]`` for NO MATCH."""
    grammar = grammars.content_match(draft)
    return [
        answers.match_decision(
            _generate(ctx, "content_match", {"draft": draft, "sentence": text}, grammar), draft
        )
        for text in sentences
    ]


def _theme_labels(ctx: SuggestContext, responses: Sequence[Any]) -> list[dict]:
    grammar = grammars.sentence_theme(ctx.catalogs)
    themes = themes_text(ctx.catalogs, with_ids=True, include_other=True)
    labels = []
    for response in responses:
        for sentence in response.sentences:
            values = {"themes": themes, "text": response.text, "sentence": sentence.text}
            raw = _generate(ctx, "sentence_theme", values, grammar)
            labels.append(
                {"sentence_id": sentence.id, "theme": answers.theme_label(raw, ctx.catalogs)}
            )
    return labels


def suggest_urgency(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    cases = unit.cases[:2]
    a, b = (Patient(c.id, c.message, c.chart_text) for c in cases)
    pair = pair_probability(ctx.engine, ctx.templates["urgency_pair"], a, b, cancel=ctx.cancel)
    payload, observed = urgency_payload(pair)
    if "urgency_level" in ctx.templates and len(ctx.catalogs.urgency_levels) >= 2:
        levels = {
            str(case.id): urgency_level(ctx, case) for case in sorted(cases, key=lambda c: c.id)
        }
        # the payload's optional levels, as a clinician enters them (case id -> level)
        payload["levels"] = {key: int(choice.label) for key, choice in levels.items()}
        observed["levels"] = {key: choice.observed() for key, choice in levels.items()}
    return payload, observed


def urgency_level(ctx: SuggestContext, case: CaseView) -> OneTokenChoice:
    """One patient's level on the catalog's scale (seed 002, Table 6), read from one
    next-token distribution over the level numbers."""
    values = {
        "levels": urgency_levels_text(ctx.catalogs),
        "chart": case.chart_text,
        "message": case.message,
    }
    labels = [str(entry.level) for entry in ctx.catalogs.urgency_levels]
    return _choose(ctx, "urgency_level", values, labels)


def urgency_payload(pair: PairProbability) -> tuple[dict, dict]:
    """An urgency unit's payload from a pair's probabilities (A = the unit's first case as the
    service presents it), and the numbers behind it (saved with the suggestion)."""
    observed = {
        "p_a_first": pair.p_a_first,
        "p_yes_ab": pair.p_yes_ab,
        "p_yes_ba": pair.p_yes_ba,
        "yes_no_mass": pair.mass,
        "a": pair.a,
        "b": pair.b,
    }
    return {"more_urgent_case_id": pair.more_urgent, "ask_second": False}, observed


def suggest_eppc(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    sentence = unit.sentence
    if sentence is None:
        raise LlmError(f"unit {unit.unit_id} has no sentence")
    values = {
        "codebook": codebook_text(ctx.catalogs),
        "sender": unit.sender or "patient",
        "previous": unit.previous_sentence.text if unit.previous_sentence else "(none)",
        "sentence": sentence.text,
        "next": unit.next_sentence.text if unit.next_sentence else "(none)",
    }
    grammar = grammars.eppc_extract(ctx.catalogs, sentence.text, ctx.limits)
    raw = _generate(ctx, "eppc_extract", values, grammar)
    return answers.eppc_payload(raw, sentence.text, ctx.catalogs), {}


def suggest_empathy(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    first, second = unit.responses[:2]
    values = {"message": _case(unit).message, "response_1": first.text, "response_2": second.text}
    raw = _generate(ctx, "empathy_judge", values, grammars.empathy_judge())
    return answers.empathy_payload(raw, [first.id, second.id]), {"order": [first.id, second.id]}


def suggest_facts(ctx: SuggestContext, unit: UnitView) -> tuple[dict, dict]:
    original, edited = _labelled(unit, "Original"), _labelled(unit, "Edited")
    grammar = grammars.fact_list(ctx.limits)
    facts, observed = [], []
    for side, own, other in (("original", original, edited), ("edited", edited, original)):
        for fact in answers.fact_list(
            _generate(ctx, "fact_decompose", {"text": own.text}, grammar)
        ):
            result = ctx.engine.choice_probabilities(
                ctx.templates["fact_entail"].render({"premise": other.text, "hypothesis": fact}),
                (YES, NO),
                cancel=ctx.cancel,
            )
            facts.append({"side": side, "text": fact, "entailed": result.probs[YES] >= 0.5})
            observed.append(round(result.probs[YES], 6))
    numbers: dict[str, Any] = {"p_entailed": observed}
    if "fact_error_category" in ctx.templates and len(ctx.catalogs.error_categories) >= 2:
        # asked after every entailment question: these prompts share their long prefix
        numbers["error_category"] = suggest_error_categories(
            ctx, original.text, edited.text, facts, message=_case(unit).message
        )
    return {"facts": facts}, numbers


_SIDE_NAMES = {"original": "the original reply", "edited": "the edited reply"}


def suggest_error_categories(
    ctx: SuggestContext, original: str, edited: str, facts: list[dict], *, message: str
) -> list[dict | None]:
    """Set the error category of every fact of ``facts`` (payload entries) that is not
    entailed (seed 004, Supplementary Table 3); returns per fact the probabilities by category
    id and their mass (None for an entailed fact). ``message``: the patient's, which the
    experts read with both replies (seed 004, Section 3.1), for a template that shows it."""
    labels = error_category_labels(ctx.catalogs)
    shared = {
        "categories": error_categories_text(ctx.catalogs),
        "message": message,
        "original": original,
        "edited": edited,
    }
    observed: list[dict | None] = []
    for fact in facts:
        if fact["entailed"]:
            observed.append(None)
            continue
        values = {**shared, "side": _SIDE_NAMES[fact["side"]], "fact": fact["text"]}
        choice = _choose(ctx, "fact_error_category", values, list(labels))
        fact["error_category"] = labels[choice.label]
        observed.append(choice.observed(labels))
    return observed


SUGGESTERS: dict[str, Callable[[SuggestContext, UnitView], tuple[dict, dict]]] = {
    "respond": suggest_respond,
    "rank": suggest_rank,
    "match": suggest_match,
    "urgency": suggest_urgency,
    "eppc": suggest_eppc,
    "empathy": suggest_empathy,
    "facts": suggest_facts,
}


class PromptRecorder:
    """An engine that notes the exact text of every prompt it is asked (chat markup
    included), so that a suggestion's provenance shows the PI what the model read."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prompts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def _note(self, prompt: Any) -> None:
        text = self.engine.render_prompt(prompt)
        if text not in self.prompts:
            self.prompts.append(text)

    def stream(self, prompt: Any, *args: Any, **kwargs: Any) -> Generation:
        self._note(prompt)
        return self.engine.stream(prompt, *args, **kwargs)

    def complete(self, prompt: Any, *args: Any, **kwargs: Any) -> Generation:
        self._note(prompt)
        return self.engine.complete(prompt, *args, **kwargs)

    def next_token_logprobs(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        self._note(prompt)
        return self.engine.next_token_logprobs(prompt, *args, **kwargs)

    def choice_probabilities(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        self._note(prompt)
        return self.engine.choice_probabilities(prompt, *args, **kwargs)


def engine_provenance(engine: Any) -> dict[str, Any]:
    """What every stored suggestion and draft records of the engine that made it: the prompt
    format, where it ran (``runtime``: the same model can answer otherwise on a GPU) and, for a
    model server, its address and file (``model_origin``)."""
    found = {"prompt_format": engine.prompt_format, "runtime": engine.info.runtime}
    origin = getattr(engine, "origin", None)
    if origin:
        found["model_origin"] = origin
    return found


def suggest(ctx: SuggestContext, unit: UnitView) -> ModelAnswer:
    """The model's payload for one unit (raises :class:`AnswerError` when the answer does not
    fit, :class:`Cancelled` when cancelled). Its parameters record the prompt format and
    every prompt the model read, exactly as rendered (``prompts``)."""
    started = time.perf_counter()
    recorder = PromptRecorder(ctx.engine)
    payload, observed = SUGGESTERS[unit.kind](replace(ctx, engine=recorder), unit)
    params = {
        **ctx.params.as_dict(),
        **({"observed": observed} if observed else {}),
        "prompts": recorder.prompts,
        **engine_provenance(ctx.engine),
    }
    personal = "respond_own_examples" in ctx.templates
    if personal:
        params["own_examples"] = [e.provenance() for e in ctx.own_examples]
    return ModelAnswer(
        unit.unit_id,
        unit.kind,
        payload,
        tuple(ctx.templates.values()),
        params,
        ctx.params.seed,
        time.perf_counter() - started,
        for_annotator=ctx.for_annotator if personal else None,
    )


def gated(answer: ModelAnswer, unit: UnitView, catalogs: Catalogs) -> ModelAnswer:
    """The answer with the quality gates' verdict (``refused``: the reason, or None)."""
    reason = gates.check(
        answer.kind,
        answer.payload,
        gates.unit_texts(unit),
        catalogs,
        answer.template_text,
        answer.params.get("observed"),
    )
    return replace(answer, refused=reason)


def store(service: StudyService, engine: Engine, answer: ModelAnswer) -> int:
    """Save a model answer as a suggestion with its provenance (and the quality gates'
    reason when they refused it); returns the suggestion id."""
    return service.add_suggestion(
        answer.unit_id,
        answer.payload,
        model_file=engine.info.file_name,
        model_sha256=engine.sha256,
        template_id=answer.template_id,
        template_text=answer.template_text,
        params=answer.params,
        seed=answer.seed,
        seconds=answer.seconds,
        refused_reason=answer.refused,
        for_annotator_id=answer.for_annotator,
    )


# --- the model as an annotator ----------------------------------------------------------------


def model_annotator(service: StudyService, name: str) -> int:
    """The id of the pseudo annotator ``name`` for a model's answers (created if needed). A
    person's account is never reused for a model."""
    found = existing_model_annotator(service, name)
    if found is not None:
        return found
    try:
        return service.add_annotator(name, display_name=f"{name} (model)", is_model=True)
    except StoreError:  # another run (another workstation) made it a moment ago
        found = existing_model_annotator(service, name)
        if found is None:
            raise
        return found


def existing_model_annotator(service: StudyService, name: str) -> int | None:
    """The id of the pseudo annotator ``name`` if there is one (None: not yet); a person's
    account of that name is refused, before a model is loaded and nothing is written."""
    for person in service.annotators():
        if person.name == name:
            if not person.is_model:
                raise StoreError(
                    f"{name!r} is a person's account; choose another name for the model"
                )
            return person.id
    return None


def save_as_annotator(
    service: StudyService, annotator_id: int, unit_id: int, payload: dict, suggestion_id: int
) -> str:
    """Store the model's answer as the pseudo annotator's own (assigning the unit first).
    Submitted when complete, else kept as a draft; returns the status."""
    if service.get_answer(unit_id, annotator_id=annotator_id) is None:
        with contextlib.suppress(StoreError):  # already assigned
            service.assign(unit_id, annotator_id)
    for status in ("submitted", "draft"):
        try:
            service.save_answer(
                unit_id,
                payload,
                status=status,
                annotator_id=annotator_id,
                suggestion_id=suggestion_id,
                suggestion_use="accepted",
            )
            return status
        except PayloadError:
            if status == "draft":
                raise
    return "draft"


# --- batch runs -------------------------------------------------------------------------------


@dataclass
class BatchReport:
    """What a batch run did: ``failed`` maps a unit to the reason its answer did not fit the
    kind; ``refused`` maps a unit to the reason the quality gates refused its suggestion
    (stored for the PI, not offered, not an annotator's answer; ``stored`` excludes it)."""

    total: int
    stored: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    cancelled: bool = False
    seconds: float = 0.0
    refused: dict[int, str] = field(default_factory=dict)
    # why a drafting run stopped early because the model went away (its process died, the
    # server stopped answering); what was stored before is kept
    stopped: str | None = None
    # a drafting run keys its lists by case id: the external ids that messages name them by
    case_names: dict[int, str] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return len(self.stored) + len(self.skipped) + len(self.failed) + len(self.refused)

    def named(self, key: int) -> str:
        """How messages name an entry of the lists: "case demo-001" in a drafting run (keyed by
        case id), "unit 7" in a batch run."""
        if key in self.case_names:
            return f"case {self.case_names[key]}"
        return f"unit {key}"


def run_batch(
    service: StudyService,
    engine: Engine,
    kind: str,
    units: Sequence[int],
    *,
    library: PromptLibrary | None = None,
    annotator: str | None = None,
    params: GenerationParams | None = None,
    limits: GrammarLimits | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[BatchReport, int], None] | None = None,
    match_themes: bool = True,
) -> BatchReport:
    """Suggest for every unit, skipping units this model file and template set already
    answered (resume). With ``annotator``, also store each answer as that pseudo annotator's.
    Each unit is saved in its own transaction, so stopping loses at most the unit in progress.
    ``progress(report, unit_id)`` is called after each unit. A model that goes away (one of
    :data:`MODEL_GONE`, e.g. :class:`ModelFileChanged` when its file was written over on disk)
    ends the run with that error; what was stored before is kept."""
    library = library or PromptLibrary(service)
    ctx = SuggestContext(
        engine,
        service.catalogs,
        resolve_templates(library, kind, match_themes),
        params or GenerationParams(),
        limits or GrammarLimits(),
        cancel,
        match_themes,
    )
    template_id = ctx.template_id
    existing = suggestions_by(service, list(units), engine.sha256, template_id)
    refused = refused_reasons(service, list(existing.values()))
    existing_refused = {u: refused[sid] for u, sid in existing.items() if sid in refused}
    annotator_id = model_annotator(service, annotator) if annotator else None
    report = BatchReport(len(units))
    started = time.perf_counter()
    with _in_turn(service, units, f"suggest:{engine.sha256}:{template_id}", cancel) as turn:
        for unit_id in turn:
            if cancel is not None and cancel.is_set():
                break
            try:
                _one_unit(service, ctx, unit_id, existing, existing_refused, annotator_id, report)
            except Cancelled:
                report.cancelled = True
                break
            report.seconds = time.perf_counter() - started
            if progress is not None:
                progress(report, unit_id)
    report.cancelled = report.cancelled or _left_when_cancelled(report, cancel)
    report.seconds = time.perf_counter() - started
    return report


@contextlib.contextmanager
def _in_turn(
    service: StudyService, items: Sequence[Any], work: str, cancel: threading.Event | None
) -> Iterator[Iterator[Any]]:
    """The items of a run (unit ids, cases), each while this run holds its claim
    ``work:item`` (store/claims.py): another run making the same answers at the same moment
    (another workstation on a team study) does each item once, and this run finds it done."""

    def key(item: Any) -> str:
        return f"{work}:{getattr(item, 'id', item)}"

    with contextlib.closing(in_turn(service.project, items, key, cancel)) as turn:
        yield turn


def _left_when_cancelled(report: BatchReport, cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set() and report.done < report.total


def _one_unit(
    service: StudyService,
    ctx: SuggestContext,
    unit_id: int,
    existing: dict[int, int],
    existing_refused: dict[int, str],
    annotator_id: int | None,
    report: BatchReport,
) -> None:
    if unit_id not in existing:  # another run may have answered it since this one began
        _look_again(service, ctx, unit_id, existing, existing_refused)
    if unit_id in existing_refused:  # refused before: kept for the PI, never an answer
        report.refused[unit_id] = existing_refused[unit_id]
        return
    answered = annotator_id is None or service.get_answer(unit_id, annotator_id=annotator_id)
    if unit_id in existing:
        if answered:
            report.skipped.append(unit_id)
        else:  # suggested before, but not yet stored as the model annotator's answer
            payload = suggestion_payload(service, existing[unit_id])
            save_as_annotator(service, annotator_id, unit_id, payload, existing[unit_id])
            report.stored.append(unit_id)
        return
    unit = service.read_unit(unit_id)
    try:
        answer = gated(suggest(ctx, unit), unit, ctx.catalogs)
    except (Cancelled, *MODEL_GONE):  # the run stops; stored is kept
        raise
    except LlmError as exc:
        report.failed[unit_id] = str(exc)
        return
    suggestion_id = store(service, ctx.engine, answer)
    if answer.refused is not None:
        report.refused[unit_id] = answer.refused
        return
    if annotator_id is not None:
        save_as_annotator(service, annotator_id, unit_id, answer.payload, suggestion_id)
    report.stored.append(unit_id)


def _look_again(
    service: StudyService,
    ctx: SuggestContext,
    unit_id: int,
    existing: dict[int, int],
    existing_refused: dict[int, str],
) -> None:
    """Add the unit's suggestion by this model and template to ``existing`` (and its reason
    to ``existing_refused`` when the gates refused it), if one was stored meanwhile."""
    found = suggestions_by(service, [unit_id], ctx.engine.sha256, ctx.template_id)
    if unit_id in found:
        existing[unit_id] = found[unit_id]
        for reason in refused_reasons(service, [found[unit_id]]).values():
            existing_refused[unit_id] = reason


# --- drafts (new responses, not answers) ------------------------------------------------------


def draft_values(
    template: PromptTemplate, case: CaseView, catalogs: Catalogs, physician_reply: str = ""
) -> dict[str, str]:
    """Placeholder values of a drafting template for one case."""
    values = {"chart": case.chart_text, "message": case.message}
    if template.kind == "draft_thematic":
        values["themes"] = themes_text(catalogs)
    if template.kind == "empathy_edit":
        values = {"message": case.message, "response": physician_reply}
    return values


def stream_draft(
    engine: Engine,
    template: PromptTemplate,
    values: dict[str, str],
    params: GenerationParams | None = None,
    cancel: threading.Event | None = None,
) -> Generation:
    """A draft reply (0-shot or thematic, seed 000 App. H) or an empathy edit (seed 004) as a
    stream of text pieces, for an editor to show as it is written."""
    return engine.stream(template.render(values), params, cancel=cancel)


def store_draft(
    service: StudyService,
    engine: Engine,
    template: PromptTemplate,
    case: CaseView,
    text: str,
    *,
    params: GenerationParams | None = None,
    seconds: float = 0.0,
    finish_reason: str | None = None,
    prompt: str = "",
) -> int:
    """Save a generated draft as a model-authored response of the case. Its external id names
    the case, the template and the model's hash, so a rerun finds it (resume). A response has
    no columns for how it was made, so the provenance a suggestion stores (model file and
    SHA-256, template id and text, the prompt format and the exact rendered ``prompt``,
    parameters, seed, seconds) goes into the audit log in the
    same transaction (action ``draft``; :func:`draft_provenance` reads it back)."""
    params = params or GenerationParams()
    recorder = EventRecorder(service.project)
    with recorder._write() as s:
        response_id = service.add_response(
            case.id,
            draft_external_id(engine, template, case),
            text.strip(),
            author_kind="model",
            author=engine.info.model_name,
            source=f"{engine.info.file_name}/{template.key}",
            production=DRAFT_PRODUCTION.get(template.kind, "other"),
            session=s,
        )
        recorder.record(
            s,
            DRAFT_EVENT,
            {
                "response_id": response_id,
                "case_id": case.id,
                "model_file": engine.info.file_name,
                "model_sha256": engine.sha256,
                "template_id": template.key,
                "template_text": template.text,
                "params": params.as_dict(),
                "seed": params.seed,
                "seconds": seconds,
                "finish_reason": finish_reason,
                "prompt": prompt,
                **engine_provenance(engine),
            },
        )
    return response_id


def draft_provenance(service: StudyService, response_id: int) -> dict[str, Any] | None:
    """How a model draft was made (what :func:`store_draft` recorded), or None for a response
    that no drafting run wrote."""
    service._require_admin("read how drafts were made")
    with service.project.read() as s:
        rows = s.scalars(
            select(AuditEntry.new_json)
            .where(AuditEntry.action == DRAFT_EVENT)
            .order_by(AuditEntry.id.desc())
        )
        for text in rows:
            details = json.loads(text)
            if details.get("response_id") == response_id:
                return details
    return None


def draft_external_id(engine: Engine, template: PromptTemplate, case: CaseView) -> str:
    return f"llm:{engine.sha256[:12]}:{template.key}:{case.external_id}"


def has_draft(
    service: StudyService, engine: Engine, template: PromptTemplate, case: CaseView
) -> bool:
    return response_by_external_id(service, draft_external_id(engine, template, case)) is not None


def run_drafts(
    service: StudyService,
    engine: Engine,
    cases: Sequence[CaseView],
    template: PromptTemplate,
    *,
    params: GenerationParams | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[BatchReport, int], None] | None = None,
    on_start: Callable[[CaseView], None] | None = None,
    on_piece: Callable[[CaseView, str], None] | None = None,
) -> BatchReport:
    """Generate one draft per case with a drafting template (0-shot or thematic) and store it
    as a response; cases that already have this model's draft from this template are skipped.
    ``on_start(case)`` is called when a case's draft begins and ``on_piece(case, text)`` with
    each piece as it is generated (the pieces of a case join to exactly its generated text),
    so that a window can show the draft being written. A draft cut off by the token limit or a
    full context is not stored (``report.failed`` says which and what to change): clinicians
    would rank it as a finished reply. Cancelling stops within one token and
    keeps the drafts already stored; the case in progress is dropped. A model that goes away
    (:class:`ModelProcessDied`, :class:`ModelServerError`, or :class:`ModelFileChanged`: its
    file was written over on disk, so no draft may record its old hash) stops the run the same
    way, and ``report.stopped`` says why."""
    if template.kind not in DRAFT_KINDS:
        raise LlmError(f"{template.kind} is not a drafting template")
    params = params or GenerationParams()
    report = BatchReport(len(cases), case_names={case.id: case.external_id for case in cases})
    started = time.perf_counter()
    try:
        work = f"draft:{engine.sha256}:{template.key}"
    except MODEL_GONE as exc:  # (the file was written over since the last run)
        report.stopped = str(exc)
        return report
    with _in_turn(service, cases, work, cancel) as turn:
        for case in turn:
            if cancel is not None and cancel.is_set():
                break
            try:
                _draft_case(
                    service, engine, template, case, params, cancel, report, on_start, on_piece
                )
            except MODEL_GONE as exc:  # every next case would fail the same way
                report.stopped = str(exc)
                break
            if report.cancelled:
                break
            report.seconds = time.perf_counter() - started
            if progress is not None:
                progress(report, case.id)
    report.cancelled = report.cancelled or _left_when_cancelled(report, cancel)
    report.seconds = time.perf_counter() - started
    return report


def _draft_case(
    service: StudyService,
    engine: Engine,
    template: PromptTemplate,
    case: CaseView,
    params: GenerationParams,
    cancel: threading.Event | None,
    report: BatchReport,
    on_start: Callable[[CaseView], None] | None,
    on_piece: Callable[[CaseView, str], None] | None,
) -> None:
    """One case of :func:`run_drafts`: skipped, drafted and stored, refused, or cancelled (as
    ``report`` then says); raises one of :data:`MODEL_GONE` when the model went away."""
    if has_draft(service, engine, template, case):
        report.skipped.append(case.id)
        return
    gen = _generate_draft(service, engine, template, case, params, cancel, on_start, on_piece)
    if gen.finish_reason in ("cancelled", "closed"):
        report.cancelled = True
    elif gen.finish_reason == "length":  # an unfinished draft is no model response
        report.failed[case.id] = f"the draft is unfinished: {gen.cut_off()}"
    elif not gen.text.strip():
        report.failed[case.id] = "the model wrote an empty draft"
    else:
        store_draft(
            service,
            engine,
            template,
            case,
            gen.text,
            params=params,
            seconds=gen.seconds,
            finish_reason=gen.finish_reason,
            prompt=engine.render_prompt(
                template.render(draft_values(template, case, service.catalogs))
            ),
        )
        report.stored.append(case.id)


def _generate_draft(
    service: StudyService,
    engine: Engine,
    template: PromptTemplate,
    case: CaseView,
    params: GenerationParams,
    cancel: threading.Event | None,
    on_start: Callable[[CaseView], None] | None,
    on_piece: Callable[[CaseView, str], None] | None,
) -> Generation:
    if on_start is not None:
        on_start(case)
    gen = stream_draft(
        engine, template, draft_values(template, case, service.catalogs), params, cancel
    )
    shown = 0
    for piece in gen:
        shown += len(piece)
        if on_piece is not None:
            on_piece(case, piece)
    rest = gen.text[shown:]  # an engine may hand out a last piece only with the whole text
    if rest and on_piece is not None:
        on_piece(case, rest)
    return gen


# --- what a drafting run works on (shared by the GUI and ``portalreview suggest``) -------------


def cases_of_units(service: StudyService, units: Sequence[int]) -> list[CaseView]:
    """The distinct cases of some units, in the units' order (what the drafts of a unit set
    are written for)."""
    seen: dict[int, CaseView] = {}
    for unit_id in units:
        for case in service.read_unit(unit_id).cases:
            seen.setdefault(case.id, case)
    return list(seen.values())


def cases_for_drafts(
    service: StudyService, *, unit_set: str | None = None, tags: Sequence[str] = ()
) -> list[CaseView]:
    """The cases of a unit set's units, or else the cases the study set-up's own case filter
    selects (``tags``: ``KEY=VALUE`` items, all required; none = every case), in id order.
    A bad tag or a filter that selects nothing raises a :class:`StoreError` naming it."""
    if unit_set is not None:
        return cases_of_units(service, unit_ids(service, None, unit_set))
    service._require_admin("choose cases for drafts")
    # The set-up's "respond" recipe makes one unit per selected case: the same filter, and
    # the same messages for a bad tag or an empty selection, as `portalreview setup --tag`.
    plan = plan_units(service.project, "respond", cases=CaseFilter.parse(tags))
    return read_cases(service, [spec.case_id for spec in plan.units])


def drafting_template(
    service: StudyService, name: str | None = None, library: PromptLibrary | None = None
) -> PromptTemplate:
    """The drafting template ``name``: a drafting kind (``draft_zero_shot``, the default, or
    ``draft_thematic``: the project's template of that kind, else the bundled one) or the name
    of a project template of one of those kinds."""
    library = library or PromptLibrary(service)
    if name is None:
        return library.template(DRAFT_KINDS[0])
    record = TemplateService(service).get(name)
    kind = record.kind if record is not None else name
    if kind not in DRAFT_KINDS:
        raise TemplateError(
            f"{name!r} is not a drafting template ({', '.join(DRAFT_KINDS)}, "
            "or a project template of those kinds)"
        )
    return library.template(kind, name)


def drafting_templates(service: StudyService) -> list[PromptTemplate]:
    """Every drafting template a run can use: the project's templates of the drafting kinds,
    and the bundled default of a kind the project has none of."""
    library = PromptLibrary(service)
    store = TemplateService(service)
    out = []
    for kind in DRAFT_KINDS:
        names = [r.name for r in store.list(kind)] or [None]
        out += [library.template(kind, name) for name in names]
    return out


def unit_sets(service: StudyService) -> list[tuple[str, str, int]]:
    """``(name, kind, number of units)`` of every unit set, oldest first."""
    service._require_admin("list the unit sets")
    with service.project.read() as s:
        rows = s.execute(
            select(UnitSet.name, UnitSet.kind, func.count(Unit.id))
            .outerjoin(Unit, Unit.unit_set_id == UnitSet.id)
            .group_by(UnitSet.id)
            .order_by(UnitSet.id)
        )
        return [(name, kind, int(n)) for name, kind, n in rows]


def unit_set_cases(service: StudyService) -> dict[str, int]:
    """How many distinct cases each unit set's units hold (what a drafting run for the set
    drafts for; :func:`cases_of_units` reads them); a set without units is left out."""
    service._require_admin("list the unit sets")
    cases: dict[str, set[int]] = {}
    with service.project.read() as s:
        rows = s.execute(
            select(UnitSet.name, Unit.case_id, Unit.case_b_id).join(
                Unit, Unit.unit_set_id == UnitSet.id
            )
        )
        for name, case_a, case_b in rows:
            cases.setdefault(name, set()).update(c for c in (case_a, case_b) if c is not None)
    return {name: len(ids) for name, ids in cases.items()}


# --- an inbox scored by the model, kept as a pseudo annotator's answers ------------------------


def store_inbox_answers(
    service: StudyService,
    engine: Engine,
    template: PromptTemplate,
    scores: InboxScores,
    annotator: str,
    *,
    params: GenerationParams | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[BatchReport, int], None] | None = None,
) -> BatchReport:
    """Store the pair answers of an inbox the model scored (:func:`urgency.score_inbox`) for
    every urgency unit whose two cases it scored, as suggestions (with provenance) and as the
    answers of the pseudo annotator ``annotator``: no second model call. Resume as
    :func:`run_batch`: a unit that already has this model's suggestion from this template
    reuses it; one the pseudo annotator already answered is skipped. The seconds stored per
    unit are the run's time per pair (the run asks all pairs in one sweep, sharing prompts)."""
    params = params or GenerationParams()
    pairs = {(p.a, p.b): p for p in scores.pairs}
    units = [
        (unit_id, pair)
        for unit_id, view in _urgency_units(service)
        if (pair := _oriented(pairs, view)) is not None
    ]
    if not units:
        raise StoreError(
            "no urgency unit pairs two of these messages, so there is no answer to store "
            "(make urgency units of the inbox first)"
        )
    existing = suggestions_by(service, [u for u, _ in units], engine.sha256, template.key)
    annotator_id = model_annotator(service, annotator)
    report = BatchReport(len(units))
    started = time.perf_counter()
    per_pair = scores.seconds / max(len(scores.pairs), 1)
    scored = dict(units)
    with _in_turn(service, list(scored), f"suggest:{engine.sha256}:{template.key}", cancel) as turn:
        for unit_id in turn:
            if cancel is not None and cancel.is_set():
                break
            if service.get_answer(unit_id, annotator_id=annotator_id) is not None:
                report.skipped.append(unit_id)
            else:
                answer = _inbox_answer(engine, template, params, unit_id, scored[unit_id], per_pair)
                suggestion_id, made = _stored_once(service, engine, answer, existing)
                payload = answer.payload if made else suggestion_payload(service, suggestion_id)
                save_as_annotator(service, annotator_id, unit_id, payload, suggestion_id)
                report.stored.append(unit_id)
            report.seconds = time.perf_counter() - started
            if progress is not None:
                progress(report, unit_id)
    report.cancelled = _left_when_cancelled(report, cancel)
    report.seconds = time.perf_counter() - started
    return report


def _inbox_answer(
    engine: Engine,
    template: PromptTemplate,
    params: GenerationParams,
    unit_id: int,
    pair: PairProbability,
    seconds: float,
) -> ModelAnswer:
    payload, observed = urgency_payload(pair)
    provenance = {**params.as_dict(), "observed": observed, **engine_provenance(engine)}
    return ModelAnswer(unit_id, "urgency", payload, (template,), provenance, params.seed, seconds)


def _stored_once(
    service: StudyService, engine: Engine, answer: ModelAnswer, existing: dict[int, int]
) -> tuple[int, bool]:
    """The id of this model's suggestion for the answer's unit from the same template, and
    whether it was stored now: the one in ``existing`` or stored since (by another run), else
    ``answer`` stored now."""
    if answer.unit_id not in existing:
        found = suggestions_by(service, [answer.unit_id], engine.sha256, answer.template_id)
        existing.update(found)
    if answer.unit_id in existing:
        return existing[answer.unit_id], False
    existing[answer.unit_id] = store(service, engine, answer)
    return existing[answer.unit_id], True


def _urgency_units(service: StudyService) -> list[tuple[int, UnitView]]:
    return [(u, service.read_unit(u)) for u in unit_ids(service, "urgency")]


def _oriented(
    pairs: dict[tuple[Any, Any], PairProbability], view: UnitView
) -> PairProbability | None:
    """The scored pair of a unit's two cases, with A = the unit's first case."""
    if len(view.cases) < 2:
        return None
    a, b = view.cases[0].id, view.cases[1].id
    if (a, b) in pairs:
        return pairs[(a, b)]
    if (b, a) in pairs:
        p = pairs[(b, a)]
        return PairProbability(a, b, p.p_yes_ba, p.p_yes_ab, p.mass)
    return None
