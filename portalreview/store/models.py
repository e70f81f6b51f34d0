"""The tables of a project file (SQLAlchemy 2.x declarative models).

Integrity lives in the database, not only in the code that writes it:

* foreign keys are on for every connection (see ``project.py``);
* row-level rules are CHECK constraints here (a rank is >= 1, a span has start < end, a unit of
  kind ``urgency`` names two different cases, an error category only on a fact that was *not*
  entailed...);
* rules that reach across tables (a span inside its text, a rank for a response that is a member
  of the rank set, a subcode under its own code, an answer only by an assigned annotator) are
  composite foreign keys where SQL allows and triggers (``schema_sql.py``) where it does not.

The catalog tables (``themes``, ``eppc_codes``...) hold ids only: they exist so that answers can
reference them with foreign keys. The full catalog (names, definitions, questions) is the JSON
snapshot in ``project_meta`` under ``catalogs``, written together with the id tables.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

KINDS = ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")
ROLES = ("clinician", "pi")
AUTHOR_KINDS = ("clinician", "model", "imported")
PRODUCTIONS = (
    "theme_guided",  # written in the theme-guided form (seed 000, Appendix G)
    "real_time",  # sent to the patient in routine care (seed 000, SoCPPM)
    "zero_shot",  # LLM draft from the 0-shot prompt (seed 000, Appendix H)
    "thematic_prompt",  # LLM draft from the thematic prompt (seed 000, Appendix H)
    "edited_draft",  # a clinician's edit of an LLM draft
    "edited_empathy",  # an LLM's empathy edit of a physician reply (seed 004)
    "other",
)
STATUSES = ("draft", "submitted")
SUGGESTION_USES = ("accepted", "edited", "ignored")
SENDERS = ("patient", "provider")
FACT_SIDES = ("original", "edited")


def utc_now() -> str:
    """ISO-8601 UTC timestamp with seconds, the format every table uses."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _in(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


class Base(DeclarativeBase):
    pass


# --- project metadata and catalogs -------------------------------------------------------------


class ProjectMeta(Base):
    __tablename__ = "project_meta"
    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ThemeRow(Base):
    __tablename__ = "themes"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class UrgencyLevelRow(Base):
    __tablename__ = "urgency_levels"
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    __table_args__ = (CheckConstraint("level BETWEEN 1 AND 6", name="level_1_to_6"),)


class EppcCodeRow(Base):
    __tablename__ = "eppc_codes"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class EppcSubcodeRow(Base):
    """A subcode belongs to one code: ("PartnershipPatient", "salutation") and
    ("PartnershipProvider", "salutation") are two rows and two different labels."""

    __tablename__ = "eppc_subcodes"
    code_id: Mapped[str] = mapped_column(ForeignKey("eppc_codes.id"), primary_key=True)
    id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class CriterionRow(Base):
    __tablename__ = "criteria"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class ErrorCategoryRow(Base):
    __tablename__ = "error_categories"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


# --- people, cases, responses, sentences -------------------------------------------------------


class Annotator(Base):
    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String, unique=True)
    display_name: Mapped[str] = mapped_column(String)
    role: Mapped[str] = mapped_column(String)
    # A model whose answers are stored as a pseudo annotator (seed 000 Table 8: judge vs human).
    is_model: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    __table_args__ = (
        CheckConstraint(_in("role", ROLES), name="role_known"),
        CheckConstraint("length(trim(name)) > 0", name="name_not_blank"),
    )


class Case(Base):
    """A patient message with its chart summary (seed 000 Appendix A.1; seed 002 PMR-Synth)."""

    __tablename__ = "cases"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    external_id: Mapped[str] = mapped_column(String, unique=True)
    source_dataset: Mapped[str] = mapped_column(String, default="")
    message: Mapped[str] = mapped_column(Text)
    # The chart summary, structured: a JSON object with the four sections' item lists.
    chart_json: Mapped[str] = mapped_column(Text, default="{}")
    # The same chart as the sectioned text a model prompt or a reader sees.
    chart_text: Mapped[str] = mapped_column(Text, default="")
    age_band: Mapped[str | None] = mapped_column(String, nullable=True)
    gender: Mapped[str | None] = mapped_column(String, nullable=True)
    # Reference urgency (seed 002 Table 6) when the source gives one; a filter label otherwise.
    urgency_level: Mapped[int | None] = mapped_column(
        ForeignKey("urgency_levels.level"), nullable=True
    )
    urgency_filter: Mapped[str | None] = mapped_column(String, nullable=True)
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    __table_args__ = (
        CheckConstraint("json_valid(chart_json)", name="chart_is_json"),
        CheckConstraint("length(trim(external_id)) > 0", name="external_id_not_blank"),
        CheckConstraint(
            "urgency_filter IS NULL OR urgency_filter IN ('UNCLEAR', 'SUPPORTIVE CARE')",
            name="urgency_filter_known",
        ),
        CheckConstraint(
            "urgency_filter IS NULL OR urgency_level IS NULL", name="level_or_filter_not_both"
        ),
    )


class CaseTag(Base):
    """Free tags as key/value pairs, e.g. split=test, inbox=inbox-1."""

    __tablename__ = "case_tags"
    case_id: Mapped[int] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(String, primary_key=True)
    __table_args__ = (
        CheckConstraint("length(trim(key)) > 0", name="tag_key_not_blank"),
        Index("ix_case_tags_key_value", "key", "value"),
    )


class Response(Base):
    """A reply to a case: a clinician's, a model's draft, or one imported from elsewhere."""

    __tablename__ = "responses"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"), index=True)
    external_id: Mapped[str] = mapped_column(String, unique=True)
    author_kind: Mapped[str] = mapped_column(String)
    # Annotator name or model name. Never shown to a clinician (blinding, see service.py).
    author: Mapped[str] = mapped_column(String, default="")
    # The system a draft came from (e.g. "llama-3-8b/0-shot"): the unit of "per source" tables.
    source: Mapped[str] = mapped_column(String, default="")
    production: Mapped[str] = mapped_column(String, default="other")
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    __table_args__ = (
        CheckConstraint(_in("author_kind", AUTHOR_KINDS), name="author_kind_known"),
        CheckConstraint(_in("production", PRODUCTIONS), name="production_known"),
        CheckConstraint("length(trim(external_id)) > 0", name="external_id_not_blank"),
    )


class Sentence(Base):
    """A sentence of a case's message or of a response, by character offsets into that text.

    Offsets count Unicode code points (Python ``str`` indexing and SQLite ``substr`` agree).
    A trigger checks that ``text`` is exactly the owner's text between ``start`` and ``end``.
    """

    __tablename__ = "sentences"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_id: Mapped[int | None] = mapped_column(ForeignKey("cases.id"), nullable=True, index=True)
    response_id: Mapped[int | None] = mapped_column(
        ForeignKey("responses.id"), nullable=True, index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    __table_args__ = (
        CheckConstraint("(case_id IS NULL) != (response_id IS NULL)", name="one_owner"),
        CheckConstraint("start >= 0 AND end > start", name="span_ordered"),
        CheckConstraint("length(text) = end - start", name="text_matches_span_length"),
        CheckConstraint("position >= 0", name="position_not_negative"),
        UniqueConstraint("case_id", "position", name="uq_case_sentence_position"),
        UniqueConstraint("response_id", "position", name="uq_response_sentence_position"),
    )


# --- units of work and assignments -------------------------------------------------------------

_UNIT_SHAPES = {
    # kind: which reference columns are set (the rest must be NULL); case_id is always set.
    # respond: response_id is optional - when set, the unit asks to edit that draft.
    "respond": (),
    "rank": (),
    "match": ("response_id", "response_b_id"),
    "urgency": ("case_b_id",),
    "eppc": ("sentence_id",),
    "empathy": ("response_id", "response_b_id"),
    "facts": ("response_id", "response_b_id"),
}
_UNIT_REFS = ("case_b_id", "response_id", "response_b_id", "sentence_id")


_UNIT_OPTIONAL_REFS = {"respond": ("response_id",)}


def _unit_shape_check() -> str:
    clauses = []
    for kind, present in _UNIT_SHAPES.items():
        optional = _UNIT_OPTIONAL_REFS.get(kind, ())
        parts = [f"kind = '{kind}'"]
        parts += [
            f"{c} IS NOT NULL" if c in present else f"{c} IS NULL"
            for c in _UNIT_REFS
            if c not in optional
        ]
        clauses.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(clauses)


class UnitSet(Base):
    __tablename__ = "unit_sets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String, unique=True)
    kind: Mapped[str] = mapped_column(String)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    __table_args__ = (
        CheckConstraint(_in("kind", KINDS), name="kind_known"),
        UniqueConstraint("id", "kind", name="uq_unit_set_kind"),
    )


class Unit(Base):
    """One unit of work of one kind (see DESIGN.md's table of kinds).

    respond/rank: a case. match: a reference response (``response_id``) x a draft
    (``response_b_id``). urgency: case A (``case_id``) x case B (``case_b_id``). eppc: a sentence.
    empathy: two responses to the case's message. facts: an original (``response_id``) and its
    edited version (``response_b_id``). The members of a rank set are in ``rank_members``.
    """

    __tablename__ = "units"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_set_id: Mapped[int] = mapped_column(Integer, index=True)
    kind: Mapped[str] = mapped_column(String)
    position: Mapped[int] = mapped_column(Integer)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"), index=True)
    case_b_id: Mapped[int | None] = mapped_column(ForeignKey("cases.id"), nullable=True)
    response_id: Mapped[int | None] = mapped_column(ForeignKey("responses.id"), nullable=True)
    response_b_id: Mapped[int | None] = mapped_column(ForeignKey("responses.id"), nullable=True)
    sentence_id: Mapped[int | None] = mapped_column(ForeignKey("sentences.id"), nullable=True)
    batch: Mapped[str] = mapped_column(String, default="")
    __table_args__ = (
        # The unit's kind is the kind of its set.
        ForeignKeyConstraint(
            ["unit_set_id", "kind"], ["unit_sets.id", "unit_sets.kind"], name="fk_unit_set_kind"
        ),
        CheckConstraint(_unit_shape_check(), name="references_fit_kind"),
        CheckConstraint("case_b_id IS NULL OR case_b_id != case_id", name="two_different_cases"),
        CheckConstraint(
            "response_b_id IS NULL OR response_b_id != response_id",
            name="two_different_responses",
        ),
        UniqueConstraint("id", "kind", name="uq_unit_kind"),
        UniqueConstraint("unit_set_id", "position", name="uq_unit_position"),
    )


class RankMember(Base):
    """A candidate response of a rank unit; a trigger keeps it to the unit's own case."""

    __tablename__ = "rank_members"
    unit_id: Mapped[int] = mapped_column(ForeignKey("units.id"), primary_key=True)
    response_id: Mapped[int] = mapped_column(ForeignKey("responses.id"), primary_key=True)


class Assignment(Base):
    """A unit given to an annotator; ``presentation`` records how it was shown to them.

    For a rank unit it is the shuffled order of responses; for a pair it says whether the
    sides were swapped. It is decided once, at assignment, from a seed, and never changes.

    ``is_gold_holder``: the row exists only because the PI saved a gold answer on a unit not
    given to them (an answer needs an assignment); it is no work of theirs, and handing the
    unit to them later turns it into work (format 7).
    """

    __tablename__ = "assignments"
    unit_id: Mapped[int] = mapped_column(ForeignKey("units.id"), primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, default=0)
    presentation_json: Mapped[str] = mapped_column(Text, default="{}")
    assigned_at: Mapped[str] = mapped_column(String, default=utc_now)
    is_gold_holder: Mapped[bool] = mapped_column(Boolean, default=False)
    __table_args__ = (
        CheckConstraint("json_valid(presentation_json)", name="presentation_is_json"),
        Index("ix_assignments_annotator", "annotator_id", "position"),
    )


# --- answers -----------------------------------------------------------------------------------


class Answer(Base):
    """One annotator's answer to one unit; the kind-specific content is in the detail tables.

    At most one ordinary answer per (unit, annotator) and at most one gold answer per unit
    (the PI's adjudication). An ordinary answer needs an assignment.
    """

    __tablename__ = "answers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    is_gold: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String, default="draft")
    active_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    flag_note: Mapped[str] = mapped_column(Text, default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    suggestion_id: Mapped[int | None] = mapped_column(ForeignKey("suggestions.id"), nullable=True)
    suggestion_use: Mapped[str | None] = mapped_column(String, nullable=True)
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    updated_at: Mapped[str] = mapped_column(String, default=utc_now)
    __table_args__ = (
        ForeignKeyConstraint(["unit_id", "kind"], ["units.id", "units.kind"], name="fk_unit_kind"),
        # Only an annotator the unit is assigned to can answer it (the PI is assigned a unit
        # when adjudicating it).
        ForeignKeyConstraint(
            ["unit_id", "annotator_id"],
            ["assignments.unit_id", "assignments.annotator_id"],
            name="fk_assigned",
        ),
        CheckConstraint(_in("status", STATUSES), name="status_known"),
        CheckConstraint("active_seconds >= 0", name="time_not_negative"),
        CheckConstraint(
            "suggestion_use IS NULL OR (suggestion_id IS NOT NULL AND "
            + _in("suggestion_use", SUGGESTION_USES)
            + ")",
            name="suggestion_use_known",
        ),
        UniqueConstraint("unit_id", "annotator_id", "is_gold", name="uq_one_answer_per_annotator"),
        UniqueConstraint("id", "kind", name="uq_answer_kind"),
        Index(
            "ux_one_gold_per_unit",
            "unit_id",
            unique=True,
            sqlite_where=text("is_gold"),
            postgresql_where=text("is_gold"),
        ),
        Index("ix_answers_annotator", "annotator_id", "unit_id"),
    )


def _answer_kind_fk(kind: str) -> tuple:
    """Columns and constraint tying a detail row to an answer of one kind only."""
    return (
        ForeignKeyConstraint(
            ["answer_id", "kind"],
            ["answers.id", "answers.kind"],
            ondelete="CASCADE",
            name="fk_answer_kind",
        ),
        CheckConstraint(f"kind = '{kind}'", name="answer_of_this_kind"),
    )


class RespondAnswer(Base):
    """Theme-guided response (one box per theme + notes) or an edited draft (seed 000, App. G)."""

    __tablename__ = "respond_answers"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="respond")
    mode: Mapped[str] = mapped_column(String, default="theme_guided")
    notes: Mapped[str] = mapped_column(Text, default="")
    base_response_id: Mapped[int | None] = mapped_column(ForeignKey("responses.id"), nullable=True)
    final_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (
        *_answer_kind_fk("respond"),
        CheckConstraint(
            "(mode = 'theme_guided' AND base_response_id IS NULL AND final_text IS NULL) OR "
            "(mode = 'edit_draft' AND base_response_id IS NOT NULL AND final_text IS NOT NULL)",
            name="mode_fits_fields",
        ),
    )


class RespondPart(Base):
    """The text of one theme box. An empty box has no row: the theme is not included."""

    __tablename__ = "respond_parts"
    answer_id: Mapped[int] = mapped_column(
        ForeignKey("respond_answers.answer_id", ondelete="CASCADE"), primary_key=True
    )
    theme_id: Mapped[str] = mapped_column(ForeignKey("themes.id"), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    __table_args__ = (CheckConstraint("length(trim(text)) > 0", name="box_not_blank"),)


class RankEntry(Base):
    """The rank (1 = best, ties allowed) and correctness of one candidate (seed 001)."""

    __tablename__ = "rank_entries"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="rank")
    response_id: Mapped[int] = mapped_column(ForeignKey("responses.id"), primary_key=True)
    rank: Mapped[int | None] = mapped_column(Integer, nullable=True)
    correct: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    __table_args__ = (
        *_answer_kind_fk("rank"),
        CheckConstraint("rank IS NULL OR rank >= 1", name="rank_positive"),
    )


class RankCriterion(Base):
    """A reason (C1-C3) a candidate was marked incorrect."""

    __tablename__ = "rank_criteria"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    response_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    criterion_id: Mapped[str] = mapped_column(ForeignKey("criteria.id"), primary_key=True)
    __table_args__ = (
        ForeignKeyConstraint(
            ["answer_id", "response_id"],
            ["rank_entries.answer_id", "rank_entries.response_id"],
            ondelete="CASCADE",
        ),
    )


class MatchDecision(Base):
    """The decision for one reference sentence: spans in ``match_spans``, none = NO MATCH."""

    __tablename__ = "match_decisions"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="match")
    sentence_id: Mapped[int] = mapped_column(ForeignKey("sentences.id"), primary_key=True)
    __table_args__ = _answer_kind_fk("match")


class MatchSpan(Base):
    """A span of the draft (character offsets into the draft's text) matching a sentence."""

    __tablename__ = "match_spans"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sentence_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[int] = mapped_column(Integer, primary_key=True)
    end: Mapped[int] = mapped_column(Integer)
    __table_args__ = (
        ForeignKeyConstraint(
            ["answer_id", "sentence_id"],
            ["match_decisions.answer_id", "match_decisions.sentence_id"],
            ondelete="CASCADE",
        ),
        CheckConstraint("start >= 0 AND end > start", name="span_ordered"),
    )


class SentenceTheme(Base):
    """The theme an annotator gave a sentence of either side of a match unit."""

    __tablename__ = "sentence_themes"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="match")
    sentence_id: Mapped[int] = mapped_column(ForeignKey("sentences.id"), primary_key=True)
    theme_id: Mapped[str] = mapped_column(ForeignKey("themes.id"))
    __table_args__ = _answer_kind_fk("match")


class UrgencyAnswer(Base):
    """Which of the two cases needs care first (seed 002): a case, never a screen side."""

    __tablename__ = "urgency_answers"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="urgency")
    # NULL while the annotator has only given levels; required to submit.
    more_urgent_case_id: Mapped[int | None] = mapped_column(ForeignKey("cases.id"), nullable=True)
    ask_second: Mapped[bool] = mapped_column(Boolean, default=False)
    __table_args__ = _answer_kind_fk("urgency")


class UrgencyCaseLevel(Base):
    """The optional 1-6 level an annotator gave one case of the pair."""

    __tablename__ = "urgency_case_levels"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="urgency")
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"), primary_key=True)
    level: Mapped[int] = mapped_column(ForeignKey("urgency_levels.level"))
    __table_args__ = _answer_kind_fk("urgency")


class EppcLabel(Base):
    """A code with its subcode on one sentence (seed 003): one subcode per code, the subcode
    one of that code's own (composite foreign key)."""

    __tablename__ = "eppc_labels"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="eppc")
    code_id: Mapped[str] = mapped_column(ForeignKey("eppc_codes.id"), primary_key=True)
    subcode_id: Mapped[str | None] = mapped_column(String, nullable=True)
    __table_args__ = (
        *_answer_kind_fk("eppc"),
        ForeignKeyConstraint(
            ["code_id", "subcode_id"],
            ["eppc_subcodes.code_id", "eppc_subcodes.id"],
            name="fk_subcode_of_code",
        ),
    )


class EppcSpan(Base):
    """Evidence for a code-subcode pair: offsets relative to the sentence's own text. Several
    rows make a discontinuous span."""

    __tablename__ = "eppc_spans"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code_id: Mapped[str] = mapped_column(String, primary_key=True)
    start: Mapped[int] = mapped_column(Integer, primary_key=True)
    end: Mapped[int] = mapped_column(Integer)
    __table_args__ = (
        ForeignKeyConstraint(
            ["answer_id", "code_id"],
            ["eppc_labels.answer_id", "eppc_labels.code_id"],
            ondelete="CASCADE",
        ),
        CheckConstraint("start >= 0 AND end > start", name="span_ordered"),
    )


class EmpathyAnswer(Base):
    """3-way empathy choice (seed 004): the more empathetic response, or NULL = equally."""

    __tablename__ = "empathy_answers"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="empathy")
    more_empathetic_response_id: Mapped[int | None] = mapped_column(
        ForeignKey("responses.id"), nullable=True
    )
    __table_args__ = _answer_kind_fk("empathy")


class Fact(Base):
    """A medical fact of one side of a fact-check unit and whether the other side entails it
    (seed 004, MedFactChecking); an error category only for a fact that is not entailed."""

    __tablename__ = "facts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    answer_id: Mapped[int] = mapped_column(Integer, index=True)
    kind: Mapped[str] = mapped_column(String, default="facts")
    side: Mapped[str] = mapped_column(String)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    entailed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    error_category_id: Mapped[str | None] = mapped_column(
        ForeignKey("error_categories.id"), nullable=True
    )
    __table_args__ = (
        *_answer_kind_fk("facts"),
        CheckConstraint(_in("side", FACT_SIDES), name="side_known"),
        CheckConstraint("length(trim(text)) > 0", name="fact_not_blank"),
        CheckConstraint(
            "error_category_id IS NULL OR entailed = 0", name="category_only_when_not_entailed"
        ),
        UniqueConstraint("answer_id", "side", "position", name="uq_fact_position"),
    )


class FactCheck(Base):
    """What a fact check says about the pair as a whole (schema version 3): ``no_facts`` when the
    annotator found no medical fact in either response, which seed 004's empty-set rule scores
    1.0 (recall and precision); distinct from an answer with no facts listed *yet*. A trigger
    (``schema_sql``) keeps facts and the flag apart. No row (answers saved before version 3)
    reads as ``no_facts`` false."""

    __tablename__ = "fact_checks"
    answer_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String, default="facts")
    no_facts: Mapped[bool] = mapped_column(Boolean, default=False)
    __table_args__ = _answer_kind_fk("facts")


# --- suggestions and the audit log -------------------------------------------------------------


class Suggestion(Base):
    """An LLM's proposal for a unit, kept apart from human answers, with its provenance."""

    __tablename__ = "suggestions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_id: Mapped[int] = mapped_column(ForeignKey("units.id"), index=True)
    kind: Mapped[str] = mapped_column(String)
    payload_json: Mapped[str] = mapped_column(Text)
    model_file: Mapped[str] = mapped_column(String)
    model_sha256: Mapped[str] = mapped_column(String)
    template_id: Mapped[str] = mapped_column(String)
    template_text: Mapped[str] = mapped_column(Text, default="")
    params_json: Mapped[str] = mapped_column(Text, default="{}")
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[str] = mapped_column(String, default=utc_now)
    # Why the quality gates (portalreview.llm.gates) refused it; a refused suggestion is kept
    # for the PI and never offered to a clinician nor saved as a model annotator's answer.
    refused_reason: Mapped[str | None] = mapped_column(Text, nullable=True, default=None)
    # Made for one clinician (a prompt holding their own earlier replies, llm/own_examples.py):
    # shown to them alone, and readable on a server by them and the PI alone. NULL: anyone's.
    for_annotator_id: Mapped[int | None] = mapped_column(
        ForeignKey("annotators.id"), nullable=True, default=None
    )
    __table_args__ = (
        CheckConstraint(_in("kind", KINDS), name="kind_known"),
        CheckConstraint("json_valid(payload_json)", name="payload_is_json"),
        CheckConstraint("json_valid(params_json)", name="params_is_json"),
        CheckConstraint("length(model_sha256) = 64", name="sha256_hex"),
    )


class AuditEntry(Base):
    """Append-only: triggers refuse UPDATE and DELETE. Each row's ``hash`` chains over the
    previous row's, so an export can prove the log was not edited."""

    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[str] = mapped_column(String, default=utc_now)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True)
    action: Mapped[str] = mapped_column(String)
    answer_id: Mapped[int | None] = mapped_column(ForeignKey("answers.id"), nullable=True)
    unit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    old_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    new_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    prev_hash: Mapped[str] = mapped_column(String)
    hash: Mapped[str] = mapped_column(String, unique=True)
    __table_args__ = (
        Index("ix_audit_answer", "answer_id"),
        {"sqlite_autoincrement": True},
    )


# --- prompt templates (schema version 2) ---------------------------------------------------------


class PromptTemplate(Base):
    """A prompt template of the local-model suggestions, stored in the project so that a study
    records exactly what was asked; the PI may edit it (each edit raises ``version``). ``kind``
    says what the template is for (see ``portalreview.llm.templates``); ``name`` is unique."""

    __tablename__ = "prompt_templates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String)
    name: Mapped[str] = mapped_column(String, unique=True)
    text: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[str] = mapped_column(String, default=utc_now)
    updated_by: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True)
    __table_args__ = (
        CheckConstraint("length(trim(kind)) > 0", name="template_kind_not_blank"),
        CheckConstraint("length(trim(name)) > 0", name="template_name_not_blank"),
        CheckConstraint("length(trim(text)) > 0", name="template_text_not_blank"),
        CheckConstraint("version >= 1", name="template_version_positive"),
    )


# --- the report cache (schema version 6) ----------------------------------------------------------


class ReportCacheEntry(Base):
    """One analysis's result of the agreement report, kept so that a restart need not compute
    again what nothing changed (``reports/report_cache``). ``part`` is an analysis kind or
    "study" (the report's counts); ``settings_key`` the digest of the settings and code the
    result was computed with; ``audit_id`` / ``audit_hash`` the audit log's position then and
    ``state`` the rest of what the result rests on (JSON), checked before the result is used.
    The PI's alone: it sums every person's answers (no clinician reads it on a server; an
    offline copy has none)."""

    __tablename__ = "report_cache"
    settings_key: Mapped[str] = mapped_column(String, primary_key=True)
    part: Mapped[str] = mapped_column(String, primary_key=True)
    settings_json: Mapped[str] = mapped_column(Text)
    audit_id: Mapped[int] = mapped_column(Integer)
    audit_hash: Mapped[str | None] = mapped_column(String, nullable=True)
    state_json: Mapped[str] = mapped_column(Text)
    result_json: Mapped[str] = mapped_column(Text)
    computed_at: Mapped[str] = mapped_column(String, default=utc_now)
