"""Prompt templates: what each kind of template must contain, the bundled defaults
(``resources/prompts/<kind>.txt``, written by us), checking a PI's edit, and rendering a
template into prompt *segments* for prefix reuse.

Placeholders are written ``{{name}}``; any other brace is plain text (templates show JSON
examples). A template kind lists the placeholders it must use; a text that uses an unknown one,
or leaves out a required one, is refused with the list of what is allowed.

Where the structures come from: the drafting prompts follow seed 000 Appendix H (0-shot:
instruction, chart, message, reply cue; thematic: the same with the themes described), with the
theme descriptions from our catalog; the content-match judge follows seed 000 Appendix C.1 (copy
the matching draft text verbatim or say NO MATCH); the urgency pair follows seed 002 Section 3.3
(message and chart of two patients, a YES/NO question whose YES probability is read); EPPC
follows seed 003 Section 3.1 and FACTS.md (previous, current and next sentence; results of code,
sub-code and span); the empathy edit follows the refined constraints of seed 004 Supplementary
Fig. 2, the judge its three-way comparison (Supplementary Fig. 3), fact decomposition and
entailment its MedFactChecking prompts (Supplementary Figs. 4-5), all reworded. Two prompts have
no model in the seeds and are ours: one patient's urgency level on seed 002's 6-level scale
(Table 6; the level definitions come from our catalog), and the expert error category of a
fact the edit lost or added (seed 004, Supplementary Table 3; our catalog's categories).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from portalreview.domain.catalogs import Catalogs
from portalreview.llm.chat import NoCue, split_cue
from portalreview.llm.errors import TemplateError
from portalreview.resources import resources_dir
from portalreview.store.errors import INSUFFICIENT_PRIVILEGE
from portalreview.store.service import AccessError, StudyService
from portalreview.store.templates import TemplateService

PLACEHOLDER = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")


@dataclass(frozen=True)
class TemplateKind:
    """What a template is for and what it must contain.

    ``cuts``: groups of placeholders; the prompt is split before the first placeholder of each
    group, so everything before it is a shared prefix that the engine evaluates once for many
    prompts (e.g. the instructions, then patient A, for the 29 pairs that start with A).
    ``answer``: "text" (free generation), "json"/"choice"/"span" (grammar-constrained),
    "yes_no" (read from the next-token distribution, nothing generated), or "one_token" (one
    of a few one-token labels, also read from the next-token distribution).
    ``optional``: a suggestion goes ahead without it (it adds to the kind's answer).
    ``may_use``: placeholders a text may use but need not: offered after projects had stored
    their copy of the kind's template, which must go on working without them.
    """

    id: str
    title: str
    serves: str
    placeholders: tuple[str, ...]
    answer: str
    cuts: tuple[tuple[str, ...], ...] = ()
    source: str = ""
    optional: bool = False
    may_use: tuple[str, ...] = ()

    @property
    def allowed(self) -> tuple[str, ...]:
        """Every placeholder a text of this kind can use: the required ones, then the others."""
        return self.placeholders + self.may_use


TEMPLATE_KINDS: dict[str, TemplateKind] = {
    k.id: k
    for k in (
        TemplateKind(
            "draft_zero_shot",
            "Draft reply (0-shot)",
            "drafts",
            ("chart", "message"),
            "text",
            source="seed 000, Appendix H, Figure 7 (structure)",
        ),
        TemplateKind(
            "draft_thematic",
            "Draft reply (thematic)",
            "drafts",
            ("themes", "chart", "message"),
            "text",
            source="seed 000, Appendix H, Figure 8 (structure)",
        ),
        TemplateKind(
            "respond_boxes",
            "Theme-guided reply form",
            "respond",
            ("themes", "chart", "message"),
            "json",
            source="seed 000, Appendix G form and Appendix H thematic prompt",
        ),
        TemplateKind(
            "respond_own_examples",
            "Theme-guided reply form, with the clinician's own earlier replies",
            "respond",
            ("themes", "examples", "chart", "message"),
            "json",
            source="seed 000, Section 4.1.2 (RAG prompting), with the clinician's own replies",
            optional=True,
        ),
        TemplateKind(
            "rank_judge",
            "Rank and check candidate replies",
            "rank",
            ("criteria", "chart", "message", "responses"),
            "json",
            cuts=(("chart", "message"),),
            source="seed 001, clinician evaluation, C1-C3",
        ),
        TemplateKind(
            "content_match",
            "Content-match judge",
            "match",
            ("draft", "sentence"),
            "span",
            cuts=(("draft",), ("sentence",)),
            source="seed 000, Section 3.1, Appendix C.1",
        ),
        TemplateKind(
            "sentence_theme",
            "Sentence theme label",
            "match",
            ("themes", "text", "sentence"),
            "choice",
            cuts=(("text",), ("sentence",)),
            source="seed 000, Appendix C.2",
            optional=True,
        ),
        TemplateKind(
            "urgency_pair",
            "Which patient first (pair)",
            "urgency",
            ("chart_a", "message_a", "chart_b", "message_b"),
            "yes_no",
            cuts=(("chart_a", "message_a"), ("chart_b", "message_b")),
            source="seed 002, Section 3.3 (UrgentSFT YES probability)",
        ),
        TemplateKind(
            "urgency_inbox",
            "Which patient first (whole inbox in view)",
            "urgency",
            ("patients", "first", "second"),
            "yes_no",
            cuts=(("first", "second"),),
            source="ours: seed 002's pair question, asked with the whole inbox listed once",
        ),
        TemplateKind(
            "urgency_level",
            "Urgency level of one patient (1-6)",
            "urgency",
            ("levels", "chart", "message"),
            "one_token",
            cuts=(("chart", "message"),),
            source="seed 002, Section 3.2 and Table 6 (the 6-level scale); our level definitions",
            optional=True,
        ),
        TemplateKind(
            "eppc_extract",
            "EPPC codes, subcodes and evidence",
            "eppc",
            ("codebook", "sender", "previous", "sentence", "next"),
            "json",
            cuts=(("sender", "previous", "sentence", "next"),),
            source="seed 003, Section 3.1 and Appendix A; FACTS.md output shape",
        ),
        TemplateKind(
            "empathy_edit",
            "Edit a reply for empathy",
            "drafts",
            ("message", "response"),
            "text",
            source="seed 004, Section 3.1, refined prompt (Supplementary Fig. 2)",
        ),
        TemplateKind(
            "empathy_judge",
            "Three-way empathy judge",
            "empathy",
            ("message", "response_1", "response_2"),
            "choice",
            source="seed 004, Section 3.2, 3EM-Ranker (Supplementary Fig. 3)",
        ),
        TemplateKind(
            "fact_decompose",
            "Medical fact decomposition",
            "facts",
            ("text",),
            "json",
            source="seed 004, Section 3.3 (Supplementary Fig. 5)",
        ),
        TemplateKind(
            "fact_entail",
            "Fact entailment",
            "facts",
            ("premise", "hypothesis"),
            "yes_no",
            cuts=(("premise",), ("hypothesis",)),
            source="seed 004, Section 3.3 (Supplementary Fig. 4)",
        ),
        TemplateKind(
            "fact_error_category",
            "Error category of a lost or added fact",
            "facts",
            ("categories", "original", "edited", "side", "fact"),
            "one_token",
            cuts=(("message", "original", "edited"), ("side", "fact")),
            source="seed 004, expert error categories (Supplementary Table 3); our definitions",
            optional=True,
            # the patient's message, as the experts saw it (seed 004, Section 3.1): "Adds
            # Unnecessary Advice" is advice unrelated to the patient's query
            may_use=("message",),
        ),
    )
}


@dataclass(frozen=True)
class PromptTemplate:
    """A template ready to render. ``key`` is what a suggestion records ("name@v2" for a
    project's template, "name@default" for a bundled one)."""

    kind: str
    name: str
    text: str
    key: str

    @property
    def spec(self) -> TemplateKind:
        return TEMPLATE_KINDS[self.kind]

    def render(self, values: Mapping[str, str]) -> list[str]:
        """The prompt as segments (see :func:`render`)."""
        return render(self.text, values, self.spec.cuts)


def placeholders_of(text: str) -> list[str]:
    return list(dict.fromkeys(PLACEHOLDER.findall(text)))


def validate(kind: str, text: str) -> None:
    """Refuse a template text that cannot work for ``kind`` (unknown kind, empty, unknown or
    missing placeholders), with a message that lists what is allowed."""
    spec = TEMPLATE_KINDS.get(kind)
    if spec is None:
        raise TemplateError(f"unknown template kind {kind!r}; known: {', '.join(TEMPLATE_KINDS)}")
    if not text.strip():
        raise TemplateError(f"the {spec.title} template is empty")
    used = placeholders_of(text)
    unknown = [p for p in used if p not in spec.allowed]
    missing = [p for p in spec.placeholders if p not in used]
    allowed = ", ".join("{{" + p + "}}" for p in spec.allowed)
    if unknown:
        names = ", ".join("{{" + p + "}}" for p in unknown)
        raise TemplateError(f"the {spec.title} template uses {names}; it can use {allowed}")
    if missing:
        names = ", ".join("{{" + p + "}}" for p in missing)
        required = ", ".join("{{" + p + "}}" for p in spec.placeholders)
        also = ", ".join("{{" + p + "}}" for p in spec.may_use)
        raise TemplateError(
            f"the {spec.title} template must contain {names} (all of {required})"
            + (f"; it may also use {also}" if also else "")
        )


def render(text: str, values: Mapping[str, str], cuts: Sequence[Sequence[str]] = ()) -> list[str]:
    """Fill the placeholders and split the result into segments before the first placeholder
    of each cut group. Values are inserted as they are (a value that looks like a placeholder
    is not filled again). Trailing spaces of the template are dropped, so an answer option
    such as " YES" follows the cue directly. A template without a cue line of its own
    (:func:`cue_of`) renders its last segment :class:`NoCue`: a chat model's user turn then
    holds all of it."""
    text = text.rstrip()
    missing = [p for p in placeholders_of(text) if p not in values]
    if missing:
        raise TemplateError(f"no value for {', '.join(missing)}")
    positions = []
    for group in cuts:
        found = [m.start() for m in PLACEHOLDER.finditer(text) if m.group(1) in group]
        if found:
            positions.append(min(found))
    bounds = [0, *sorted(set(p for p in positions if p > 0)), len(text)]

    def fill(piece: str) -> str:
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), piece)

    segments = [fill(text[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    if segments and not cue_of(text):
        segments[-1] = NoCue(segments[-1])
    return segments


def cue_of(text: str) -> str:
    """The template's answer cue ("Answer:", "Your reply:"): its last line when that is short
    fixed wording; "" when the line holds a placeholder, whose value is never a cue."""
    cue = split_cue(text.rstrip())[1]
    return "" if PLACEHOLDER.search(cue) else cue


# --- bundled defaults -------------------------------------------------------------------------


def default_text(kind: str) -> str:
    """The bundled default text of a template kind."""
    path = resources_dir() / "prompts" / f"{kind}.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(
            f"the bundled template {path} is missing: reinstall PortalReview"
        ) from exc


def default_template(kind: str) -> PromptTemplate:
    return PromptTemplate(kind, kind, default_text(kind), f"{kind}@default")


def defaults() -> dict[str, tuple[str, str]]:
    """``{name: (kind, text)}`` of every bundled default (names equal kinds)."""
    return {kind: (kind, default_text(kind)) for kind in TEMPLATE_KINDS}


# --- catalog text for the placeholders ----------------------------------------------------------


def themes_text(catalogs: Catalogs, *, with_ids: bool = False, include_other: bool = False) -> str:
    """One line per response theme (seed 000, Table 1) with our definition."""
    lines = []
    for t in catalogs.themes:
        if t.is_other and not include_other:
            continue
        label = f"{t.id}: {t.name}" if with_ids else t.name
        lines.append(f"- {label}. {t.definition}")
    return "\n".join(lines)


def codebook_text(catalogs: Catalogs) -> str:
    """The EPPC codebook: code id, name and definition, then its subcodes (seed 003)."""
    lines = []
    for code in catalogs.eppc_codes:
        lines.append(f"{code.id} ({code.name}): {code.definition}")
        for sub in code.subcodes:
            lines.append(f"  - {sub.id}: {sub.definition}")
    return "\n".join(lines)


def criteria_text(catalogs: Catalogs) -> str:
    """The correctness criteria C1-C3 (seed 001)."""
    return "\n".join(f"- {c.id}: {c.name}. {c.definition}" for c in catalogs.criteria)


def urgency_levels_text(catalogs: Catalogs) -> str:
    """The urgency scale (seed 002, Table 6), one line per level: its number (what the model
    answers), name and our definition."""
    return "\n".join(f"- {u.level}: {u.name}. {u.definition}" for u in catalogs.urgency_levels)


def error_category_labels(catalogs: Catalogs) -> dict[str, str]:
    """``{label: category id}``: the letters A, B, ... that stand for the expert error
    categories in a prompt. A letter after a space is one token in the tokenizers of common
    models, where a number after a space often is two (the space, then the digit)."""
    categories = catalogs.error_categories
    if len(categories) > len(_LETTERS):
        raise TemplateError(
            f"the catalog has {len(categories)} error categories; a prompt can offer at most "
            f"{len(_LETTERS)} (one letter each)"
        )
    return {letter: c.id for letter, c in zip(_LETTERS, categories, strict=False)}


def error_categories_text(catalogs: Catalogs) -> str:
    """The expert error categories (seed 004, Supplementary Table 3), one line each: its
    letter (what the model answers), name and our definition."""
    names = {c.id: c for c in catalogs.error_categories}
    return "\n".join(
        f"- {letter}: {names[cid].name}. {names[cid].definition}"
        for letter, cid in error_category_labels(catalogs).items()
    )


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --- the project's templates ------------------------------------------------------------------


class PromptLibrary:
    """The templates a study uses: the project's own (editable by the PI) where it has one,
    the bundled default otherwise. The GUI's template editor calls :meth:`save`."""

    def __init__(self, service: StudyService | None = None) -> None:
        self._store = None if service is None else TemplateService(service)

    def template(self, kind: str, name: str | None = None) -> PromptTemplate:
        """The template named ``name`` (default: the one named like its kind, else the first
        of that kind in the project, else the bundled default)."""
        if kind not in TEMPLATE_KINDS:
            raise TemplateError(f"unknown template kind {kind!r}")
        if self._store is not None:
            records = self._store.list(kind)
            wanted = name or kind
            chosen = next((r for r in records if r.name == wanted), None)
            if chosen is None and name is None and records:
                chosen = records[0]
            if chosen is not None:
                validate(kind, chosen.text)
                return PromptTemplate(kind, chosen.name, chosen.text, chosen.key)
            if name is not None and name != kind:
                raise TemplateError(f"the project has no {kind} template called {name!r}")
        return default_template(kind)

    def install_defaults(self) -> list[str]:
        """Copy the bundled defaults the project lacks into it (PI or system viewer). A
        clinician may not write templates (a team study's server refuses it): their run uses
        the bundled default of each template the project lacks, as the app does."""
        if self._store is None:
            return []
        try:
            return self._store.install(defaults())
        except AccessError:  # a clinician viewer: refused before anything is written
            return []
        except DBAPIError as exc:  # a clinician's own account: the team study's server refuses
            if getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
                return []
            raise

    def save(self, kind: str, name: str, text: str) -> PromptTemplate:
        """Check and store a PI's template text (a new version when it changed)."""
        validate(kind, text)
        if self._store is None:
            raise TemplateError("no project is open")
        record = self._store.save(name, kind, text)
        return PromptTemplate(kind, record.name, record.text, record.key)
