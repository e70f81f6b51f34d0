"""The service layer the GUI and the CLI use: no SQL outside ``store/``.

A :class:`StudyService` is bound to one project and one *viewer* (who is asking). Blinding lives
here, in the queries, not only in the views: a clinician reads only units assigned to them, only
their own answers, and never a draft's author or source, nor a case's reference urgency level.
The PI, and the ``system`` viewer the CLI and importers use, read everything.

Every write is one short transaction; every change to an answer adds a row to the append-only,
hash-chained audit log in the same transaction.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import numbers
import random
import sqlite3
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, and_, case, func, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, aliased

from portalreview.domain.catalogs import Catalogs
from portalreview.domain.segmenter import split_sentences
from portalreview.store.adaptive import AdaptiveSetting, adaptive_settings, next_unit
from portalreview.store.catalog_store import read_catalogs, write_catalogs
from portalreview.store.errors import SaveFailed, StoreError
from portalreview.store.kinds import CODECS, PayloadError, UnitContext
from portalreview.store.kinds.base import check_storable_texts, plain_rows
from portalreview.store.models import (
    KINDS,
    Annotator,
    Answer,
    Assignment,
    AuditEntry,
    Case,
    CaseTag,
    ProjectMeta,
    RankMember,
    Response,
    Sentence,
    Suggestion,
    Unit,
    UnitSet,
    utc_now,
)
from portalreview.store.project import Project

CHART_SECTIONS = ("demographics", "problems", "encounters", "medications")
_CHART_HEADINGS = {
    "demographics": "###Demographics###",
    "problems": "###Full Active Problem List###",
    "encounters": "###Recent Encounters (Max 10)###",
    "medications": "###Medications (Outpatient)###",
}
GENESIS_HASH = "0" * 64
_BULK = 500  # answers per bulk read of payloads (within any database's parameter limit)
# what a UnitBrief shows of a unit's own row
_UNIT_BRIEF_COLUMNS = (
    Unit.id,
    Unit.kind,
    Unit.unit_set_id,
    Unit.position,
    Unit.case_id,
    Unit.case_b_id,
    Unit.sentence_id,
)
# what a CaseView and a SentenceView show of their rows (SentenceView's fields, in order)
_CASE_VIEW_COLUMNS = (
    Case.id,
    Case.external_id,
    Case.message,
    Case.chart_json,
    Case.chart_text,
    Case.age_band,
    Case.gender,
    Case.urgency_level,
)
_SENTENCE_VIEW_COLUMNS = (
    Sentence.id,
    Sentence.position,
    Sentence.start,
    Sentence.end,
    Sentence.text,
)
# what an AnswerView shows of an answer's own row, in its fields' order, the payload left out
# (it goes at _PAYLOAD_AT): answers_for_units makes views of these rows by position
_PAYLOAD_AT = 6
_ANSWER_VIEW_COLUMNS = (
    Answer.id,
    Answer.unit_id,
    Answer.kind,
    Answer.annotator_id,
    Answer.is_gold,
    Answer.status,
    Answer.active_seconds,
    Answer.flagged,
    Answer.flag_note,
    Answer.comment,
    Answer.suggestion_id,
    Answer.suggestion_use,
    Answer.updated_at,
)


class AccessError(PermissionError):
    """The viewer may not see or change this (blinding, roles)."""


class _Unchecked(enum.Enum):
    UNCHECKED = "unchecked"


#: ``save_answer(if_updated_at=UNCHECKED)``: replace the stored answer whatever it is now
UNCHECKED = _Unchecked.UNCHECKED


class SavedElsewhere(StoreError):
    """The answer was saved from somewhere else (another workstation signed in as the same
    person) since the one saving read it: saving would put an older answer over a newer one.
    Nothing was saved; :attr:`stored` is the answer saved there."""

    def __init__(self, stored: AnswerView) -> None:
        self.stored = stored
        when = stored.updated_at.replace("T", " ")[:16]
        super().__init__(
            f"This unit was saved from another computer or window signed in as you (at {when} "
            "UTC), after it was opened here. Nothing was saved here, so as not to put one "
            "answer over the other: keep what is on screen here, or show the answer saved there."
        )


@dataclass(frozen=True)
class Viewer:
    """Who is asking: an annotator (clinician or PI), or ``system`` (CLI, importers)."""

    annotator_id: int | None
    role: str

    @classmethod
    def system(cls) -> Viewer:
        return cls(None, "system")

    @property
    def sees_all(self) -> bool:
        return self.role in ("pi", "system")


@dataclass(frozen=True)
class SentenceView:
    id: int
    position: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class CaseView:
    id: int
    external_id: str
    message: str
    chart: dict[str, list[str]]
    chart_text: str
    age_band: str | None
    gender: str | None
    sentences: tuple[SentenceView, ...]
    reference_level: int | None = None  # hidden (None) for clinicians


@dataclass(frozen=True)
class ResponseView:
    id: int
    label: str  # what the screen calls it: "Response A", "Draft", "Reference"...
    text: str
    sentences: tuple[SentenceView, ...]
    author: str | None = None  # hidden (None) for clinicians
    source: str | None = None  # hidden (None) for clinicians


@dataclass(frozen=True)
class UnitView:
    """Everything an editor needs to show one unit, in the order this viewer sees it."""

    unit_id: int
    kind: str
    unit_set: str
    position: int
    cases: tuple[CaseView, ...]
    responses: tuple[ResponseView, ...]
    sentence: SentenceView | None = None
    previous_sentence: SentenceView | None = None
    next_sentence: SentenceView | None = None
    sender: str | None = None
    presentation: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitBrief:
    """What a unit is about, in a few fields: for a list of many units."""

    unit_id: int
    kind: str
    unit_set: str
    position: int
    case_external_ids: tuple[str, ...]
    sentence_text: str | None = None


@dataclass(frozen=True)
class AnswerView:
    answer_id: int
    unit_id: int
    kind: str
    annotator_id: int
    is_gold: bool
    status: str
    payload: dict[str, Any]
    active_seconds: float
    flagged: bool
    flag_note: str
    comment: str
    suggestion_id: int | None
    suggestion_use: str | None
    updated_at: str


@dataclass(frozen=True)
class QueueItem:
    unit_id: int
    position: int
    status: str  # "todo", "draft" or "submitted"
    flagged: bool
    adaptive: bool = False  # of an adaptive set: the next pair appears only after a submit


@dataclass(frozen=True)
class Progress:
    done: int
    total: int

    def __str__(self) -> str:
        return f"{self.done} of {self.total} done"


@dataclass(frozen=True)
class AuditRecord:
    at: str
    actor_id: int | None
    action: str
    old: dict | None
    new: dict | None


def chart_text_of(chart: dict[str, list[str]]) -> str:
    """The sectioned chart text the public drafting and triage datasets use (FACTS.md)."""
    blocks = []
    for section in CHART_SECTIONS:
        items = chart.get(section, [])
        joiner = " - " if section == "problems" else "\n"
        blocks.append(f"{_CHART_HEADINGS[section]}\n{joiner.join(items)}")
    return "\n\n".join(blocks)


def _sentences_of(text: str, **owner: int) -> list[Sentence]:
    return [
        Sentence(position=i, start=s.start, end=s.end, text=s.text, **owner)
        for i, s in enumerate(split_sentences(text))
    ]


def _outer_spaces_off(name: str, blank: str) -> str:
    """An id or a name as the importers read one (``Record.ident``): without outer spaces, so
    that it comes back the same through an export and an import; StoreError(``blank``) when
    nothing is left."""
    name = name.strip()
    if not name:
        raise StoreError(blank)
    return name


def person_name(name: str) -> str:
    """A person's name as it is stored and looked up: its letters in one Unicode form (NFC;
    macOS writes "é" as "e" and a combining accent) and no outer spaces."""
    return unicodedata.normalize("NFC", name).strip()


def find_annotator(s: Session, name: str) -> Annotator | None:
    """The annotator called ``name``, however its letters are written (:func:`person_name`;
    a name stored before names were kept in one form is found too)."""
    person = s.scalar(select(Annotator).where(Annotator.name == name))
    if person is None:
        wanted = person_name(name)
        people = s.scalars(select(Annotator))
        person = next((a for a in people if person_name(a.name) == wanted), None)
    return person


def _sentence_view(s: Sentence) -> SentenceView:
    return SentenceView(s.id, s.position, s.start, s.end, s.text)


# A UNIQUE rule's words where its name alone would not tell the person what happened, by the
# name PostgreSQL gives (the index's) and SQLite gives (its columns).
_ONE_GOLD = "this unit already has a gold answer (a unit has one)"
_UNIQUE_WORDS = {"ux_one_gold_per_unit": _ONE_GOLD, "answers.unit_id": _ONE_GOLD}


def readable_integrity(exc: IntegrityError) -> str:
    """The database's refusal (a trigger, a UNIQUE, FOREIGN KEY or CHECK rule) in words."""
    if hasattr(exc.orig, "sqlstate"):
        return _readable_postgres(exc.orig)
    message = str(exc.orig)
    if "integrity:" in message:
        return message.split("integrity:", 1)[1].strip()
    if "UNIQUE constraint failed" in message:
        rule = message.split(":", 1)[1].strip()
        return _UNIQUE_WORDS.get(rule, f"it already exists ({rule})")
    if "FOREIGN KEY constraint failed" in message:
        return "it refers to something that does not exist"
    if "CHECK constraint failed" in message:
        return _broken_rule(message.split(":", 1)[1].strip())
    return message


# The rules a file can break, in words (the others are named as they are).
_RULE_WORDS = {
    "two_different_cases": "a pair needs two different cases (case_b_id is the unit's case)",
    "two_different_responses": "a pair needs two different responses",
    "level_1_to_6": "an urgency level is a whole number from 1 to 6",
    "name_not_blank": "a name is blank",
    "external_id_not_blank": "an id is blank",
    "tag_key_not_blank": "a tag's key is blank",
    "fact_not_blank": "a fact is blank",
}


def _broken_rule(rule: str) -> str:
    words = _RULE_WORDS.get(rule)
    return f"{words} (rule {rule})" if words else f"a value breaks the rule {rule}"


_POSTGRES_CLASSES = {
    "23505": "it already exists ({})",
    "23503": "it refers to something that does not exist",
}


def _readable_postgres(error: Exception) -> str:
    """PostgreSQL's refusal in the words SQLite's gets. Only its first line is used: the
    DETAIL lines repeat the refused row's values, which may be a patient's message."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if "integrity:" in first:
        return first.split("integrity:", 1)[1].strip()
    constraint = getattr(getattr(error, "diag", None), "constraint_name", None) or "?"
    if constraint in _UNIQUE_WORDS:
        return _UNIQUE_WORDS[constraint]
    if getattr(error, "sqlstate", None) == "23514":  # a CHECK rule
        return _broken_rule(constraint)
    template = _POSTGRES_CLASSES.get(getattr(error, "sqlstate", None) or "")
    return template.format(constraint) if template else first


MODEL_SERVER_KEY = "model_server"  # project_meta key (portalreview.llm.model_server)
OWN_EXAMPLES_KEY = "own_examples"  # project_meta key (portalreview.llm.own_examples)
MAX_OWN_EXAMPLES = 5  # seed 000's RAG prompts held five examples


def _adaptive_queue(
    s: Session, rows: list, adaptive: dict[int, AdaptiveSetting], annotator_id: int
) -> list:
    """Queue rows (unit, position, status, flagged, set, answer) with each adaptive set's
    unanswered units replaced by the one chosen next, answered ones in the order first saved."""
    out, by_set = [], {}
    for row in rows:
        if row[4] in adaptive:
            by_set.setdefault(row[4], []).append(row)
        else:
            out.append(row)
    for set_id, set_rows in by_set.items():
        chosen = next_unit(s, set_id, annotator_id, adaptive[set_id])
        answered = sorted((r for r in set_rows if r[5] is not None), key=lambda r: r[5])
        out.extend(answered + [r for r in set_rows if r[0] == chosen and r[5] is None])
    return sorted(out, key=lambda r: r[4])  # sets in order, as the query gave them (stable)


def _adaptive_progress(
    s: Session, counts: tuple[int, int], adaptive: dict[int, AdaptiveSetting], annotator_id: int
) -> tuple[int, int]:
    """Urgency (done, total) with each adaptive set counting its judgements, not its pairs."""
    done, total = counts
    rows = s.execute(
        select(Unit.unit_set_id, func.count(), func.count(Answer.id))
        .select_from(Assignment)
        .join(Unit, Unit.id == Assignment.unit_id)
        .outerjoin(Answer, own_answer())
        .where(
            Assignment.annotator_id == annotator_id,
            Unit.unit_set_id.in_(adaptive),
            _not_gold_holder(),
        )
        .group_by(Unit.unit_set_id)
    )
    for set_id, assigned, answered in rows:
        total += max(adaptive[set_id].judgements, answered) - assigned
    return done, total


def _project_seed(s: Session) -> str:
    """The project's id, which seeds every presentation, read once per session: a session
    drops objects nobody holds, so each ``s.get`` of it was a query again (one per urgency
    pair of adjudication's list, one per unit handed out)."""
    seed = s.info.get("project_seed")
    if seed is None:
        row = s.get(ProjectMeta, "project_id")
        seed = s.info["project_seed"] = row.value if row else ""
    return seed


def own_answer():
    """The join of an assignment to its annotator's own (not gold) answer."""
    return and_(
        Answer.unit_id == Assignment.unit_id,
        Answer.annotator_id == Assignment.annotator_id,
        Answer.is_gold.is_(False),
    )


def _check_gold_annotator(s: Session, annotator_id: int) -> None:
    """A gold answer is the PI's decision, stored under a PI (under a clinician's name it
    would count as her work, and travel with her offline copy)."""
    person = s.get(Annotator, annotator_id)
    if person is None:
        raise StoreError(f"there is no annotator {annotator_id}")
    if person.role != "pi" or person.is_model:
        what = "a model pseudo annotator" if person.is_model else f"a {person.role}"
        raise StoreError(
            f"a gold answer is the PI's decision; {person.name} is {what}, not a PI"
        )


def _check_no_other_gold(s: Session, unit_id: int, annotator_id: int) -> None:
    """A unit has one gold answer: another PI's, saved since this one opened the unit (two PIs
    adjudicating at once), is refused by name. Read inside the write transaction, after the
    writers before it, so the one saved first is always seen."""
    holder = s.scalar(
        select(Annotator.name)
        .join(Answer, Answer.annotator_id == Annotator.id)
        .where(Answer.unit_id == unit_id, Answer.is_gold, Answer.annotator_id != annotator_id)
    )
    if holder is not None:
        raise StoreError(
            f"{holder} already saved the gold answer for this unit (a unit has one): reopen "
            "the unit to see it"
        )


def not_saved_message(exc: Exception) -> str:
    """The words "Not saved: why" for the person; a refusal already worded "not saved: ..."
    (a broken rule, :class:`_TranslatingWrite`) is not prefixed twice."""
    words = str(exc)
    if words.lower().startswith("not saved: "):
        words = words[len("not saved: ") :]
    return f"Not saved: {words}"


def _inbox_pair_ids(inbox: str):
    """The ids of the urgency units that pair two messages of ``inbox`` (cases tagged
    ``inbox=<name>``), as a subquery."""
    first, second = aliased(CaseTag), aliased(CaseTag)
    return (
        select(Unit.id)
        .join(first, first.case_id == Unit.case_id)
        .join(second, second.case_id == Unit.case_b_id)
        .where(Unit.kind == "urgency", first.key == "inbox", first.value == inbox)
        .where(second.key == "inbox", second.value == inbox)
    )


def _not_gold_holder():
    """Leaves out an assignment made only to hold the PI's gold answer (adjudication is not
    annotation work; ``info`` counts the same way). A unit given to the PI stays their work
    when they adjudicate it too."""
    return Assignment.is_gold_holder.is_(False)


class StudyService:
    """The operations of a study, as seen by one viewer."""

    def __init__(self, project: Project, viewer: Viewer | None = None) -> None:
        self.project = project
        self.viewer = viewer or Viewer.system()
        self._catalogs: Catalogs | None = None

    # --- helpers --------------------------------------------------------------------------

    @property
    def catalogs(self) -> Catalogs:
        if self._catalogs is None:
            with self._quick_read() as s:  # (one row, read once: by the window's first unit)
                self._catalogs = read_catalogs(s)
        return self._catalogs

    def _catalogs_in(self, s: Session) -> Catalogs:
        """:attr:`catalogs`, read in session ``s`` if not yet read: a save reads them in its
        own transaction, under its own time limits, not in a second one beside it."""
        if self._catalogs is None:
            self._catalogs = read_catalogs(s)
        return self._catalogs

    def _require_admin(self, what: str) -> None:
        if not self.viewer.sees_all:
            raise AccessError(f"only the PI can {what}")

    def _write(self, quick: bool = False):
        return _TranslatingWrite(self.project, quick)

    def _quick_read(self):
        """A read the clinician's window makes on its own thread (a unit, the list of units,
        their progress), which takes milliseconds: on a study server it gives up, in words,
        when the server stops answering, rather than freeze the window (postgres.py,
        READ_WATCHDOG_S). Long reads (dashboard, reports, exports) use ``project.read()``."""
        return self.project.read(quick=True)

    def as_viewer(self, annotator_name: str) -> StudyService:
        """A service for the named annotator (sign-in, on the window's thread)."""
        with self._quick_read() as s:
            person = find_annotator(s, annotator_name)
        if person is None:
            raise StoreError(f"there is no annotator called {annotator_name!r}")
        return StudyService(self.project, Viewer(person.id, person.role))

    # --- set-up (PI / system) ---------------------------------------------------------------

    def add_annotator(
        self,
        name: str,
        display_name: str | None = None,
        role: str = "clinician",
        is_model: bool = False,
        session: Session | None = None,
    ) -> int:
        """A new annotator; the name is stored without outer spaces, as an import reads names
        (" ava " exported and imported again would come back as "ava", another sign-in), and
        its letters in one Unicode form (:func:`person_name`)."""
        self._require_admin("add annotators")
        name = _outer_spaces_off(person_name(name), "an annotator needs a name")

        def insert(s: Session) -> int:
            person = Annotator(
                name=name, display_name=display_name or name, role=role, is_model=is_model
            )
            s.add(person)
            s.flush()
            details = {"annotator_id": person.id, "name": name, "role": role, "is_model": is_model}
            self._audit(s, "annotator", None, None, None, details)
            return person.id

        return self._in_session(session, insert)

    def annotators(self) -> list[Annotator]:
        """Everyone in the study, in the order they were added (one small table, read by the
        window at sign-in: a quick read)."""
        with self._quick_read() as s:
            return list(s.scalars(select(Annotator).order_by(Annotator.id)))

    def add_case(
        self,
        external_id: str,
        message: str,
        chart: dict[str, list[str]] | None = None,
        *,
        chart_text: str | None = None,
        age_band: str | None = None,
        gender: str | None = None,
        source_dataset: str = "",
        urgency_level: int | None = None,
        urgency_filter: str | None = None,
        tags: dict[str, str | list[str]] | None = None,
        session: Session | None = None,
    ) -> int:
        """Add a case and split its message into sentences. With ``session``, inside the
        caller's transaction (importers add many rows in one). The case's id is stored without
        outer spaces, as an import reads ids."""
        self._require_admin("add cases")
        external_id = _outer_spaces_off(external_id, "a case needs an id")
        chart = {k: list(chart.get(k, [])) for k in CHART_SECTIONS} if chart else {}
        unknown = set(chart) - set(CHART_SECTIONS)
        if unknown:
            raise StoreError(f"unknown chart section(s): {', '.join(sorted(unknown))}")

        def insert(s: Session) -> int:
            row = Case(
                external_id=external_id,
                message=message,
                chart_json=json.dumps(chart),
                chart_text=chart_text if chart_text is not None else chart_text_of(chart),
                age_band=age_band,
                gender=gender,
                source_dataset=source_dataset,
                urgency_level=urgency_level,
                urgency_filter=urgency_filter,
            )
            s.add(row)
            s.flush()
            s.add_all(_sentences_of(message, case_id=row.id))
            for key, values in (tags or {}).items():
                for value in [values] if isinstance(values, str) else values:
                    s.add(CaseTag(case_id=row.id, key=key, value=value))
            return row.id

        return self._in_session(session, insert)

    def add_response(
        self,
        case_id: int,
        external_id: str,
        text: str,
        *,
        author_kind: str = "imported",
        author: str = "",
        source: str = "",
        production: str = "other",
        session: Session | None = None,
    ) -> int:
        """Add a response to a case; its id is stored without outer spaces, as an import reads
        ids."""
        self._require_admin("add responses")
        external_id = _outer_spaces_off(external_id, "a response needs an id")

        def insert(s: Session) -> int:
            row = Response(
                case_id=case_id,
                external_id=external_id,
                text=text,
                author_kind=author_kind,
                author=author,
                source=source,
                production=production,
            )
            s.add(row)
            s.flush()
            s.add_all(_sentences_of(text, response_id=row.id))
            return row.id

        return self._in_session(session, insert)

    def create_unit_set(
        self, name: str, kind: str, description: str = "", session: Session | None = None
    ) -> int:
        """A new, empty unit set; its name is trimmed (an outer space would make two sets
        that read the same)."""
        self._require_admin("create unit sets")
        if kind not in KINDS:
            raise StoreError(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
        name = name.strip()
        if not name:
            raise StoreError("a unit set needs a name")

        def insert(s: Session) -> int:
            row = UnitSet(name=name, kind=kind, description=description)
            s.add(row)
            s.flush()
            return row.id

        return self._in_session(session, insert)

    def add_unit(
        self,
        unit_set_id: int,
        case_id: int,
        *,
        case_b_id: int | None = None,
        response_id: int | None = None,
        response_b_id: int | None = None,
        sentence_id: int | None = None,
        members: Iterable[int] = (),
        batch: str = "",
        session: Session | None = None,
    ) -> int:
        """Add a unit to a set (its kind is the set's). ``members``: a rank set's responses."""
        self._require_admin("add units")

        def insert(s: Session) -> int:
            unit_set = s.get(UnitSet, unit_set_id)
            if unit_set is None:
                raise StoreError(f"there is no unit set {unit_set_id}")
            position = s.scalar(
                select(func.count()).select_from(Unit).where(Unit.unit_set_id == unit_set_id)
            )
            row = Unit(
                unit_set_id=unit_set_id,
                kind=unit_set.kind,
                position=position,
                case_id=case_id,
                case_b_id=case_b_id,
                response_id=response_id,
                response_b_id=response_b_id,
                sentence_id=sentence_id,
                batch=batch,
            )
            s.add(row)
            s.flush()
            s.add_all(RankMember(unit_id=row.id, response_id=r) for r in members)
            return row.id

        return self._in_session(session, insert)

    def assign(
        self,
        unit_id: int,
        annotator_id: int,
        position: int | None = None,
        session: Session | None = None,
    ) -> None:
        """Give a unit to an annotator, fixing how it will be shown to them (see
        :meth:`_presentation`)."""
        self._require_admin("assign units")

        def insert(s: Session) -> None:
            unit = s.get(Unit, unit_id)
            if unit is None:
                raise StoreError(f"there is no unit {unit_id}")
            pos = unit.position if position is None else position
            presentation = json.dumps(self._presentation(s, unit, annotator_id))
            holder = s.get(Assignment, (unit_id, annotator_id))
            if holder is not None and holder.is_gold_holder:  # the PI's gold stays; now work
                old = {"presentation": json.loads(holder.presentation_json or "{}")}
                holder.is_gold_holder = False
                holder.position, holder.presentation_json = pos, presentation
                # the gold answer is now shown in this order: an entry, so that the live
                # report reads the study again (a new assignment alone changes no figure)
                new = {"annotator_id": annotator_id, "presentation": json.loads(presentation)}
                self._audit(s, "presentation", None, unit_id, old, new)
                return
            s.add(
                Assignment(
                    unit_id=unit_id,
                    annotator_id=annotator_id,
                    position=pos,
                    presentation_json=presentation,
                )
            )

        self._in_session(session, insert)

    def _presentation(self, s: Session, unit: Unit | Row, annotator_id: int) -> dict[str, Any]:
        """The order a unit is shown in, for one annotator: drafts shuffled (seed 001), the
        sides of a pair randomised (seed 002, 004). Seeded by the project, the unit and the
        annotator, so it is stable for one person and differs between people."""
        rng = random.Random(f"{_project_seed(s)}:{unit.id}:{annotator_id}")
        if unit.kind == "rank":
            members = sorted(
                s.scalars(select(RankMember.response_id).where(RankMember.unit_id == unit.id))
            )
            rng.shuffle(members)
            return {"order": members}
        if unit.kind in ("urgency", "empathy"):
            return {"swap": rng.random() < 0.5}
        return {}

    def extend_catalogs(self, extension: dict) -> Catalogs:
        """Add entries (a theme, a subcode...) to this project's catalogs; see
        :meth:`portalreview.domain.catalogs.Catalogs.extended`."""
        self._require_admin("change the codebook")
        with self._write() as s:
            extended = read_catalogs(s).extended(extension)
            write_catalogs(s, extended)
            self._audit(s, "catalogs", None, None, None, {"extension": extension})
        self._catalogs = extended
        return extended

    def set_model_server(self, setting_json: str | None) -> None:
        """Name the study's shared model server (a JSON
        :class:`~portalreview.llm.model_server.ServerSetting`), or forget it (None: the
        program then connects to nothing, unless the machine's settings name one)."""
        self._require_admin("set the model server")
        with self._write() as s:
            old = s.get(ProjectMeta, MODEL_SERVER_KEY)
            before = None if old is None else {"setting": old.value}
            if setting_json is None:
                if old is not None:
                    s.delete(old)
            else:
                s.merge(ProjectMeta(key=MODEL_SERVER_KEY, value=setting_json))
            after = None if setting_json is None else {"setting": setting_json}
            self._audit(s, "model_server", None, None, before, after)

    def set_own_examples(self, examples: int, session: Session | None = None) -> None:
        """Let the model's respond suggestions for a clinician include that clinician's own
        ``examples`` most similar earlier replies (0: off; ``llm/own_examples.py``). PI only,
        recorded in the audit log."""
        self._require_admin("choose the model's examples")
        if not 0 <= examples <= MAX_OWN_EXAMPLES:
            raise StoreError(f"the examples must be between 0 (off) and {MAX_OWN_EXAMPLES}")

        def write(s: Session) -> None:
            old = s.get(ProjectMeta, OWN_EXAMPLES_KEY)
            before = int(old.value) if old is not None else 0
            if before == examples:
                return
            if examples:
                s.merge(ProjectMeta(key=OWN_EXAMPLES_KEY, value=str(examples)))
            else:
                s.delete(old)
            self._audit(s, "own_examples", None, None, {"examples": before}, {"examples": examples})

        self._in_session(session, write)

    def own_examples(self) -> int:
        """How many of a clinician's own earlier replies a respond suggestion may show the
        model (0: the study has not chosen this)."""
        with self._quick_read() as s:
            return self.own_examples_in(s)

    @staticmethod
    def own_examples_in(s: Session) -> int:
        """:meth:`own_examples`, read in session ``s``."""
        row = s.get(ProjectMeta, OWN_EXAMPLES_KEY)
        try:
            return min(max(int(row.value), 0), MAX_OWN_EXAMPLES) if row is not None else 0
        except ValueError:
            return 0

    def add_suggestion(
        self,
        unit_id: int,
        payload: dict[str, Any],
        *,
        model_file: str,
        model_sha256: str,
        template_id: str,
        template_text: str = "",
        params: dict[str, Any] | None = None,
        seed: int | None = None,
        seconds: float = 0.0,
        refused_reason: str | None = None,
        for_annotator_id: int | None = None,
        session: Session | None = None,
    ) -> int:
        """Store a model's proposal for a unit, apart from human answers, with its
        provenance (model file and hash, prompt template, parameters, seed, time taken).
        ``refused_reason``: why the quality gates refused it (``llm/gates.py``); a refused
        suggestion is kept for the PI and never offered nor used as an answer.
        ``for_annotator_id``: made for that clinician alone (from their own replies)."""
        self._require_admin("store model suggestions")

        def insert(s: Session) -> int:
            unit = s.get(Unit, unit_id)
            if unit is None:
                raise StoreError(f"there is no unit {unit_id}")
            row = Suggestion(
                unit_id=unit_id,
                kind=unit.kind,
                payload_json=json.dumps(payload),
                model_file=model_file,
                model_sha256=model_sha256,
                template_id=template_id,
                template_text=template_text,
                params_json=json.dumps(params or {}),
                seed=seed,
                seconds=seconds,
                refused_reason=refused_reason or None,
                for_annotator_id=for_annotator_id,
            )
            s.add(row)
            s.flush()
            return row.id

        return self._in_session(session, insert)

    def _in_session(self, session: Session | None, work):
        if session is not None:
            return work(session)
        with self._write() as s:
            return work(s)

    # --- reading units --------------------------------------------------------------------

    def queue(
        self,
        kind: str,
        status: str | None = None,
        flagged: bool | None = None,
        annotator_id: int | None = None,
        inbox: str | None = None,
    ) -> list[QueueItem]:
        """The units of ``kind`` assigned to an annotator (by default the viewer), set by set in
        the order they were assigned, with their status; ``status`` filters on "todo",
        "draft" or "submitted"; ``inbox`` keeps only the urgency pairs of two of that inbox's
        messages (:meth:`inbox_pairs`). Of an adaptive set (``store/adaptive.py``) only the
        units the annotator answered (in the order they were first saved) and the one chosen
        next."""
        annotator_id = self._whose(annotator_id)
        status_expr = case((Answer.id.is_(None), "todo"), else_=Answer.status).label("status")
        query = (
            select(
                Assignment.unit_id,
                Assignment.position,
                status_expr,
                func.coalesce(Answer.flagged, False),
                Unit.unit_set_id,
                Answer.id,
            )
            .join(Unit, Unit.id == Assignment.unit_id)
            .outerjoin(Answer, own_answer())
            .where(Assignment.annotator_id == annotator_id, Unit.kind == kind, _not_gold_holder())
            .order_by(Unit.unit_set_id, Assignment.position, Assignment.unit_id)
        )
        if inbox is not None:  # the adaptive choice below is made from the whole set still
            query = query.where(Unit.id.in_(_inbox_pair_ids(inbox)))
        with self._quick_read() as s:
            rows = s.execute(query).all()
            adaptive = adaptive_settings(s) if kind == "urgency" else {}
            if adaptive:
                rows = _adaptive_queue(s, rows, adaptive, annotator_id)
            items = [
                QueueItem(u, p, st, bool(f), unit_set in adaptive)
                for u, p, st, f, unit_set, _answer in rows
            ]
        if status is not None:
            items = [i for i in items if i.status == status]
        if flagged is not None:
            items = [i for i in items if i.flagged == flagged]
        return items

    def units_in_queues(self, kind: str) -> list[int]:
        """Every unit of ``kind`` assigned to anyone as work, in the order first met going
        through the annotators' queues (:meth:`queue`), annotator by annotator in id order
        (PI: adjudication). One query, not one per annotator, unless an adaptive set makes
        each queue its own (``store/adaptive.py``)."""
        self._require_admin("list everyone's units")
        with self.project.read() as s:
            if kind != "urgency" or not adaptive_settings(s):
                # sorted here, as queue's ORDER BY sorts each annotator's rows: the database
                # sorted them slower than it read them
                query = (
                    select(
                        Assignment.annotator_id,
                        Unit.unit_set_id,
                        Assignment.position,
                        Assignment.unit_id,
                    )
                    .join(Unit, Unit.id == Assignment.unit_id)
                    .where(Unit.kind == kind, _not_gold_holder())
                )
                rows = sorted(map(tuple, s.execute(query)))  # plain tuples compare fast
                return list(dict.fromkeys(unit_id for *_order, unit_id in rows))
        seen: dict[int, None] = {}
        for person in self.annotators():
            for item in self.queue(kind, annotator_id=person.id):
                seen.setdefault(item.unit_id, None)
        return list(seen)

    def annotators_with_queue(self, kind: str) -> set[int]:
        """The annotators whose queue of ``kind`` (:meth:`queue`) holds a unit (PI), in one
        query; one whose units of ``kind`` are all in adaptive sets has their queue read
        (it holds only the pairs answered and the one chosen next: perhaps none)."""
        self._require_admin("list everyone's queues")
        query = (
            select(Assignment.annotator_id, Unit.unit_set_id)
            .distinct()
            .join(Unit, Unit.id == Assignment.unit_id)
            .where(Unit.kind == kind, _not_gold_holder())
        )
        with self.project.read() as s:
            rows = s.execute(query).all()
            adaptive = adaptive_settings(s) if kind == "urgency" else {}
        plain = {person for person, unit_set in rows if unit_set not in adaptive}
        only_adaptive = {person for person, _set in rows} - plain
        return plain | {p for p in only_adaptive if self.queue(kind, annotator_id=p)}

    def assigned_kinds(self) -> set[str]:
        """The kinds with units assigned to anyone as work, in one query (PI)."""
        query = (
            select(Unit.kind)
            .distinct()
            .join(Assignment, Assignment.unit_id == Unit.id)
            .where(_not_gold_holder())
        )
        with self.project.read() as s:
            return set(s.scalars(query))

    def progress(self, kind: str, annotator_id: int | None = None) -> Progress:
        """Units of ``kind`` submitted, of those assigned (counted, not read one by one)."""
        return self.progress_by_kind(annotator_id).get(kind, Progress(0, 0))

    def progress_by_kind(self, annotator_id: int | None = None) -> dict[str, Progress]:
        """Progress of every kind with units assigned to an annotator, in one query."""
        annotator_id = self._whose(annotator_id)
        submitted = func.sum(case((Answer.status == "submitted", 1), else_=0))
        query = (
            select(Unit.kind, submitted, func.count())
            .select_from(Assignment)
            .join(Unit, Unit.id == Assignment.unit_id)
            .outerjoin(Answer, own_answer())
            .where(Assignment.annotator_id == annotator_id, _not_gold_holder())
            .group_by(Unit.kind)
        )
        with self._quick_read() as s:
            counts = {kind: (int(done or 0), total) for kind, done, total in s.execute(query)}
            adaptive = adaptive_settings(s)
            if adaptive and "urgency" in counts:
                counts["urgency"] = _adaptive_progress(s, counts["urgency"], adaptive, annotator_id)
        return {kind: Progress(done, total) for kind, (done, total) in counts.items()}

    def inboxes(self) -> dict[str, tuple[CaseView, ...]]:
        """Inbox name -> its cases (cases tagged ``inbox=<name>``; seed 002), in id order.
        A clinician sees only the cases of the urgency units assigned to them, and, as
        everywhere, no reference level."""
        with self.project.read() as s:
            rows = s.execute(
                select(CaseTag.value, CaseTag.case_id)
                .where(CaseTag.key == "inbox")
                .order_by(CaseTag.value, CaseTag.case_id)
            ).all()
            if not self.viewer.sees_all:
                pairs = s.execute(
                    select(Unit.case_id, Unit.case_b_id)
                    .join(Assignment, Assignment.unit_id == Unit.id)
                    .where(
                        Assignment.annotator_id == self.viewer.annotator_id,
                        Unit.kind == "urgency",
                    )
                ).all()
                visible = {c for pair in pairs for c in pair if c is not None}
                rows = [r for r in rows if r[1] in visible]
            views = self._case_views(s, (case_id for _name, case_id in rows))
            out: dict[str, list[CaseView]] = {}
            for name, case_id in rows:
                out.setdefault(name, []).append(views[case_id])
            return {name: tuple(cases) for name, cases in out.items()}

    def inbox_pairs(self, inbox: str) -> dict[int, tuple[int, int]]:
        """Unit id -> its two cases, as stored, of every urgency unit that pairs two messages
        of ``inbox`` (cases tagged ``inbox=<name>``), in one query (the inbox view). A
        clinician gets only the units assigned to her, as :meth:`inboxes` shows her only
        their cases."""
        query = select(Unit.id, Unit.case_id, Unit.case_b_id).where(
            Unit.id.in_(_inbox_pair_ids(inbox))
        )
        if not self.viewer.sees_all:
            mine = select(Assignment.unit_id).where(
                Assignment.annotator_id == self.viewer.annotator_id
            )
            query = query.where(Unit.id.in_(mine))
        with self.project.read() as s:
            return {unit_id: (a, b) for unit_id, a, b in s.execute(query)}

    def read_unit(
        self, unit_id: int, session: Session | None = None, as_seen_by: int | None = None
    ) -> UnitView:
        """The unit as the viewer sees it; ``as_seen_by`` (the PI): as that annotator saw it,
        in the same order and on the same sides (the PI looking at a clinician's work was
        shown another order: her "Response B" was his "Response H")."""

        def read(s: Session) -> UnitView:
            unit = s.get(Unit, unit_id)
            if unit is None:
                raise StoreError(f"there is no unit {unit_id}")
            presentation = self._presentation_for_viewer(s, unit, as_seen_by)
            return self._unit_view(s, unit, presentation)

        if session is not None:
            return read(session)
        with self._quick_read() as s:
            return read(s)

    def unit_briefs(self, unit_ids: Sequence[int]) -> dict[int, UnitBrief]:
        """A few words on each of many units, as ``read_unit`` would show them (the list of
        units in adjudication; PI), read a few queries per ``_BULK`` units."""
        self._require_admin("list units")
        ids = list(dict.fromkeys(unit_ids))
        out: dict[int, UnitBrief] = {}
        with self.project.read() as s:
            for start in range(0, len(ids), _BULK):
                out.update(self._unit_briefs(s, ids[start : start + _BULK]))
        return out

    def _unit_briefs(self, s: Session, ids: list[int]) -> dict[int, UnitBrief]:
        # rows, not ORM objects (a tenth of a second per 10,000 units); _presentation_of reads
        # only the columns named here
        units = s.execute(select(*_UNIT_BRIEF_COLUMNS).where(Unit.id.in_(ids))).all()
        mine = select(Assignment.unit_id, Assignment.presentation_json).where(
            Assignment.annotator_id == self.viewer.annotator_id, Assignment.unit_id.in_(ids)
        )
        assignments = {a.unit_id: a for a in s.execute(mine)}
        case_ids = {c for u in units for c in (u.case_id, u.case_b_id) if c is not None}
        sentence_ids = {u.sentence_id for u in units if u.sentence_id is not None}
        set_ids = {u.unit_set_id for u in units}

        def pairs(key, value, ids) -> dict:
            return {k: v for k, v in s.execute(select(key, value).where(key.in_(ids)))}

        cases = pairs(Case.id, Case.external_id, case_ids)
        texts = pairs(Sentence.id, Sentence.text, sentence_ids)
        sets = pairs(UnitSet.id, UnitSet.name, set_ids)
        out = {}
        for unit in units:
            pair = [c for c in (unit.case_id, unit.case_b_id) if c is not None]
            # only an urgency pair's sides show in its brief, as read_unit orders them
            if unit.kind == "urgency":
                presentation = self._presentation_of(s, unit, assignments.get(unit.id))
                if presentation.get("swap", False):
                    pair.reverse()
            out[unit.id] = UnitBrief(
                unit_id=unit.id,
                kind=unit.kind,
                unit_set=sets[unit.unit_set_id],
                position=unit.position,
                case_external_ids=tuple(cases[c] for c in pair),
                sentence_text=texts.get(unit.sentence_id),
            )
        return out

    def sentences(
        self,
        *,
        case_id: int | None = None,
        response_id: int | None = None,
        session: Session | None = None,
    ) -> list[SentenceView]:
        """The sentences of a case's message or of a response, in order."""
        self._require_admin("list sentences outside a unit")
        owner = (
            Sentence.case_id == case_id
            if case_id is not None
            else (Sentence.response_id == response_id)
        )

        def read(s: Session) -> list[SentenceView]:
            rows = s.scalars(select(Sentence).where(owner).order_by(Sentence.position))
            return [_sentence_view(x) for x in rows]

        if session is not None:
            return read(session)
        with self.project.read() as s:
            return read(s)

    def _presentation_for_viewer(
        self, s: Session, unit: Unit, as_seen_by: int | None = None
    ) -> dict[str, Any]:
        whose = self.viewer.annotator_id
        if as_seen_by is not None and as_seen_by != whose:
            self._require_admin("see a unit as another annotator sees it")
            whose = as_seen_by
        assignment = None
        if whose is not None:
            assignment = s.get(Assignment, (unit.id, whose))
        return self._presentation_of(s, unit, assignment, whose)

    def _presentation_of(
        self,
        s: Session,
        unit: Unit | Row,
        assignment: Assignment | Row | None,
        whose: int | None = None,
    ) -> dict[str, Any]:
        """The order ``whose`` (the viewer by default) sees ``unit`` in, given their assignment
        to it (ORM objects, or rows with the unit's id and kind and the assignment's
        presentation)."""
        whose = self.viewer.annotator_id if whose is None else whose
        if assignment is not None:
            # {}: the assignment only holds a gold answer, or a merge made it; a rank or a
            # pair unit is then shown as drawn for this person
            shown = json.loads(assignment.presentation_json)
            return shown or self._presentation(s, unit, whose)
        if not self.viewer.sees_all:
            raise AccessError("this unit is not assigned to you")
        return self._presentation(s, unit, whose or 0)

    def _case_view(self, s: Session, case_id: int) -> CaseView:
        return self._case_views(s, [case_id])[case_id]

    def _case_views(self, s: Session, case_ids: Iterable[int]) -> dict[int, CaseView]:
        """Case id -> its view, of many cases, two queries per ``_BULK`` cases, read as plain
        rows (one case's is read the same way: :meth:`_case_view`)."""
        ids = list(dict.fromkeys(case_ids))
        out: dict[int, CaseView] = {}
        for start in range(0, len(ids), _BULK):
            chunk = ids[start : start + _BULK]
            sentences: dict[int, list[SentenceView]] = {case_id: [] for case_id in chunk}
            query = (
                select(Sentence.case_id, *_SENTENCE_VIEW_COLUMNS)
                .where(Sentence.case_id.in_(chunk))
                .order_by(Sentence.case_id, Sentence.position)
            )
            for case_id, *sentence in plain_rows(s, query):
                sentences[case_id].append(SentenceView(*sentence))
            query = select(*_CASE_VIEW_COLUMNS).where(Case.id.in_(chunk))
            for row in plain_rows(s, query):
                out[row.id] = CaseView(
                    id=row.id,
                    external_id=row.external_id,
                    message=row.message,
                    chart=json.loads(row.chart_json),
                    chart_text=row.chart_text,
                    age_band=row.age_band,
                    gender=row.gender,
                    sentences=tuple(sentences[row.id]),
                    reference_level=row.urgency_level if self.viewer.sees_all else None,
                )
        return out

    def _response_view(self, s: Session, response_id: int, label: str) -> ResponseView:
        row = s.get(Response, response_id)
        sentences = s.scalars(
            select(Sentence).where(Sentence.response_id == response_id).order_by(Sentence.position)
        )
        blind = not self.viewer.sees_all
        return ResponseView(
            id=row.id,
            label=label,
            text=row.text,
            sentences=tuple(_sentence_view(x) for x in sentences),
            author=None if blind else row.author,
            source=None if blind else row.source,
        )

    def _unit_view(self, s: Session, unit: Unit, presentation: dict[str, Any]) -> UnitView:
        swap = presentation.get("swap", False)
        cases = [unit.case_id] + ([unit.case_b_id] if unit.case_b_id else [])
        responses: list[ResponseView] = []
        if unit.kind == "rank":
            order = presentation["order"]
            responses = [
                self._response_view(s, r, f"Response {chr(65 + i)}") for i, r in enumerate(order)
            ]
        elif unit.kind in ("match", "facts", "empathy"):
            labels = {
                "match": ("Reference", "Draft"),
                "facts": ("Original", "Edited"),
                "empathy": ("Response 1", "Response 2"),
            }[unit.kind]
            pair = [unit.response_id, unit.response_b_id]
            if swap:
                pair.reverse()
            responses = [self._response_view(s, r, lb) for r, lb in zip(pair, labels, strict=True)]
        elif unit.kind == "respond" and unit.response_id is not None:
            responses = [self._response_view(s, unit.response_id, "Draft to edit")]
        if swap and unit.kind == "urgency":
            cases.reverse()
        view = UnitView(
            unit_id=unit.id,
            kind=unit.kind,
            unit_set=s.get(UnitSet, unit.unit_set_id).name,
            position=unit.position,
            cases=tuple(self._case_view(s, c) for c in cases),
            responses=tuple(responses),
            presentation=presentation,
        )
        if unit.kind == "eppc":
            view = self._with_sentence_context(s, unit, view)
        return view

    def _with_sentence_context(self, s: Session, unit: Unit, view: UnitView) -> UnitView:
        sentence = s.get(Sentence, unit.sentence_id)
        owner = (
            Sentence.case_id == sentence.case_id
            if sentence.case_id is not None
            else Sentence.response_id == sentence.response_id
        )
        neighbours = {
            x.position: x
            for x in s.scalars(
                select(Sentence).where(
                    owner, Sentence.position.in_([sentence.position - 1, sentence.position + 1])
                )
            )
        }
        before = neighbours.get(sentence.position - 1)
        after = neighbours.get(sentence.position + 1)
        responses = view.responses
        if sentence.response_id is not None:
            responses = (self._response_view(s, sentence.response_id, "Message"),)
        return UnitView(
            **{
                **view.__dict__,
                "responses": responses,
                "sentence": _sentence_view(sentence),
                "previous_sentence": _sentence_view(before) if before else None,
                "next_sentence": _sentence_view(after) if after else None,
                "sender": "patient" if sentence.case_id is not None else "provider",
            }
        )

    # --- answers --------------------------------------------------------------------------

    def _whose(self, annotator_id: int | None) -> int:
        """The annotator whose work is asked for: the viewer's own unless the viewer sees all."""
        if annotator_id is None:
            if self.viewer.annotator_id is None:
                raise StoreError("name the annotator")
            return self.viewer.annotator_id
        if annotator_id != self.viewer.annotator_id and not self.viewer.sees_all:
            raise AccessError("you can only see your own answers")
        return annotator_id

    def _context(self, s: Session, unit: Unit) -> UnitContext:
        def sentence_ids(response_id: int | None) -> tuple[int, ...]:
            if response_id is None:
                return ()
            return tuple(
                s.scalars(
                    select(Sentence.id)
                    .where(Sentence.response_id == response_id)
                    .order_by(Sentence.position)
                )
            )

        members: tuple[int, ...] = ()
        if unit.kind == "rank":
            members = tuple(
                sorted(
                    s.scalars(select(RankMember.response_id).where(RankMember.unit_id == unit.id))
                )
            )
        draft_length = sentence_length = 0
        if unit.kind == "match":
            draft_length = len(s.get(Response, unit.response_b_id).text)
        if unit.kind == "eppc":
            sentence_length = len(s.get(Sentence, unit.sentence_id).text)
        return UnitContext(
            unit=unit,
            catalogs=self._catalogs_in(s),
            members=members,
            reference_sentences=sentence_ids(unit.response_id) if unit.kind == "match" else (),
            draft_sentences=sentence_ids(unit.response_b_id) if unit.kind == "match" else (),
            draft_length=draft_length,
            sentence_length=sentence_length,
        )

    @staticmethod
    def _answer_view(s: Session, answer: Answer) -> AnswerView:
        return StudyService._answer_views(s, [answer])[0]

    @staticmethod
    def _payloads(s: Session, answers: Iterable[tuple[int, str]]) -> dict[int, dict]:
        """Answer id -> payload, of many (answer id, kind) pairs: each kind's payloads read
        in bulk, a few queries per ``_BULK`` answers (the same codec code as one answer's)."""
        by_kind: dict[str, list[int]] = {}
        for answer_id, kind in answers:
            by_kind.setdefault(kind, []).append(answer_id)
        payloads: dict[int, dict] = {}
        for kind, ids in by_kind.items():
            for start in range(0, len(ids), _BULK):
                payloads.update(CODECS[kind].read_many(s, ids[start : start + _BULK]))
        return payloads

    @staticmethod
    def _answer_views(s: Session, answers: Sequence[Answer | Row]) -> list[AnswerView]:
        """The views of many answers (ORM objects, or rows with the answers' columns), in
        their order, their payloads read in bulk (:meth:`_payloads`)."""
        payloads = StudyService._payloads(s, ((answer.id, answer.kind) for answer in answers))
        return [
            AnswerView(
                answer_id=answer.id,
                unit_id=answer.unit_id,
                kind=answer.kind,
                annotator_id=answer.annotator_id,
                is_gold=answer.is_gold,
                status=answer.status,
                payload=payloads[answer.id],
                active_seconds=answer.active_seconds,
                flagged=answer.flagged,
                flag_note=answer.flag_note,
                comment=answer.comment,
                suggestion_id=answer.suggestion_id,
                suggestion_use=answer.suggestion_use,
                updated_at=answer.updated_at,
            )
            for answer in answers
        ]

    def get_answer(
        self, unit_id: int, annotator_id: int | None = None, gold: bool = False
    ) -> AnswerView | None:
        if gold and not self.viewer.sees_all:
            raise AccessError("only the PI can see gold answers")
        annotator_id = None if gold else self._whose(annotator_id)
        with self._quick_read() as s:
            query = select(Answer).where(Answer.unit_id == unit_id, Answer.is_gold.is_(gold))
            if not gold:
                query = query.where(Answer.annotator_id == annotator_id)
            answer = s.scalar(query)
            return None if answer is None else self._answer_view(s, answer)

    def answers_for_unit(self, unit_id: int) -> list[AnswerView]:
        """Every answer to a unit (PI: adjudication)."""
        return self.answers_for_units([unit_id])[unit_id]

    def answers_for_units(self, unit_ids: Sequence[int]) -> dict[int, list[AnswerView]]:
        """Every answer to each of many units, in answer order (PI: adjudication), read a
        few queries per ``_BULK`` units rather than unit by unit."""
        self._require_admin("compare answers")
        return self._answers_by_unit(unit_ids)

    def own_answers_for_units(
        self, unit_ids: Sequence[int], annotator_ids: Iterable[int]
    ) -> dict[int, list[AnswerView]]:
        """The own (not gold) answers of ``annotator_ids`` to each of many units, in answer
        order, read as :meth:`answers_for_units` reads (the inbox view). A clinician may
        name only herself (:class:`AccessError` otherwise), as in :meth:`get_answer`."""
        wanted = sorted({self._whose(annotator_id) for annotator_id in annotator_ids})
        if not wanted:
            return {unit_id: [] for unit_id in unit_ids}
        own = (Answer.annotator_id.in_(wanted), Answer.is_gold.is_(False))
        return self._answers_by_unit(unit_ids, *own)

    def _answers_by_unit(self, unit_ids: Sequence[int], *conditions) -> dict[int, list[AnswerView]]:
        """Each unit's answers that meet ``conditions``, in answer order, a few queries per
        ``_BULK`` units."""
        out: dict[int, list[AnswerView]] = {unit_id: [] for unit_id in unit_ids}
        ids = list(out)
        with self.project.read() as s:
            for start in range(0, len(ids), _BULK):
                chunk = ids[start : start + _BULK]
                # plain tuples, not ORM objects: making 40,000 of those, and reading their
                # fields by name, took over a second at 10,000 units
                query = select(*_ANSWER_VIEW_COLUMNS).where(Answer.unit_id.in_(chunk), *conditions)
                rows = [tuple(row) for row in plain_rows(s, query.order_by(Answer.id))]
                payloads = self._payloads(s, ((row[0], row[2]) for row in rows))
                for row in rows:
                    view = AnswerView(*row[:_PAYLOAD_AT], payloads[row[0]], *row[_PAYLOAD_AT:])
                    out[row[1]].append(view)
        return out

    def save_answer(
        self,
        unit_id: int,
        payload: dict[str, Any],
        *,
        status: str = "draft",
        active_seconds: float | None = None,
        flagged: bool | None = None,
        flag_note: str | None = None,
        comment: str | None = None,
        suggestion_id: int | None = None,
        suggestion_use: str | None = None,
        annotator_id: int | None = None,
        gold: bool = False,
        session: Session | None = None,
        if_updated_at: str | _Unchecked | None = UNCHECKED,
        add_seconds: float | None = None,
    ) -> AnswerView:
        """Create or replace the viewer's answer to a unit, in one short transaction.

        ``payload`` is the kind's answer (see ``store/kinds``); it replaces the previous one
        whole. Fields left as None keep their stored value. ``status="submitted"`` requires a
        complete answer. A gold answer (PI only) is the adjudicated one. ``if_updated_at``:
        save only if the stored answer is still the one read (its ``updated_at``; None: no
        answer yet), else :class:`SavedElsewhere` and nothing is saved. ``add_seconds``: time
        on task added to the stored time in the save's transaction (instead of
        ``active_seconds``, a total: one workstation's total, built on what it read, put over
        the time another had added meanwhile).
        """
        if gold:
            self._require_admin("save gold answers")
        if add_seconds is not None and active_seconds is not None:
            raise StoreError("give the time on task as a total or as seconds to add, not both")
        _check_active_seconds(active_seconds)
        _check_active_seconds(add_seconds)
        annotator_id = self._whose(annotator_id)

        def work(s: Session) -> AnswerView:
            return self._save(
                s,
                unit_id,
                annotator_id,
                payload,
                status,
                gold,
                dict(
                    active_seconds=active_seconds,
                    flagged=flagged,
                    flag_note=flag_note,
                    comment=comment,
                    suggestion_id=suggestion_id,
                    suggestion_use=suggestion_use,
                ),
                if_updated_at,
                add_seconds,
            )

        if session is not None:
            return work(session)
        with self._write(quick=True) as s:  # a clinician's save: its waits are short
            return work(s)

    def _save(
        self,
        s: Session,
        unit_id: int,
        annotator_id: int,
        payload: dict,
        status: str,
        gold: bool,
        fields: dict[str, Any],
        if_updated_at: str | _Unchecked | None = UNCHECKED,
        add_seconds: float | None = None,
    ) -> AnswerView:
        unit = s.get(Unit, unit_id)
        if unit is None:
            raise StoreError(f"there is no unit {unit_id}")
        if status not in ("draft", "submitted"):
            raise StoreError(f"status must be 'draft' or 'submitted', not {status!r}")
        self._check_suggestion(s, fields.get("suggestion_id"))
        check_storable_texts(payload, unit.kind)
        check_storable_texts({k: fields[k] for k in ("comment", "flag_note")}, unit.kind)
        if gold:
            _check_gold_annotator(s, annotator_id)
            _check_no_other_gold(s, unit_id, annotator_id)
        codec = CODECS[unit.kind]
        ctx = self._context(s, unit)
        if gold and s.get(Assignment, (unit_id, annotator_id)) is None:
            s.add(
                Assignment(
                    unit_id=unit_id,
                    annotator_id=annotator_id,
                    position=unit.position,
                    is_gold_holder=True,
                )
            )
            s.flush()
        answer = s.scalar(
            select(Answer).where(
                Answer.unit_id == unit_id,
                Answer.annotator_id == annotator_id,
                Answer.is_gold.is_(gold),
            )
        )
        stored = None if answer is None else self._answer_view(s, answer)
        # (an answer removed meanwhile is made again: there is nothing newer to keep)
        if if_updated_at is not UNCHECKED and stored and stored.updated_at != if_updated_at:
            raise SavedElsewhere(stored)
        old = None if stored is None else self._audit_state(stored)
        if answer is None:
            if s.get(Assignment, (unit_id, annotator_id)) is None:
                raise AccessError("this unit is not assigned to this annotator")
            answer = Answer(
                unit_id=unit_id, kind=unit.kind, annotator_id=annotator_id, is_gold=gold
            )
            s.add(answer)
        else:
            codec.clear(s, answer.id)
        answer.status = status
        for key, value in fields.items():
            if value is not None:
                setattr(answer, key, value)
        if add_seconds is not None:  # added to what is stored now, whoever stored it
            answer.active_seconds = (answer.active_seconds or 0.0) + add_seconds
        s.flush()
        codec.write(s, answer, ctx, payload)
        s.flush()
        view = self._answer_view(s, answer)
        if status == "submitted":
            missing = codec.incomplete(ctx, view.payload)
            if missing:
                raise PayloadError(f"cannot submit yet: {missing}")
        new = self._audit_state(view)
        if new != old:
            answer.updated_at = utc_now()
            s.flush()
            action = "create" if old is None else "update"
            self._audit(s, action, answer.id, unit_id, old, new)
            view = self._answer_view(s, answer)
        return view

    def suggestion_usable(self, suggestion_id: int) -> bool:
        """Whether an answer may name suggestion ``suggestion_id`` as where it started: one
        stored, and not refused by the quality gates (:meth:`_check_suggestion`)."""
        with self.project.read() as s:
            try:
                self._check_suggestion(s, suggestion_id)
            except StoreError:
                return False
        return True

    @staticmethod
    def _check_suggestion(s: Session, suggestion_id: int | None) -> None:
        """An answer may start from a suggestion, never from one the quality gates refused."""
        if suggestion_id is None:
            return
        row = s.get(Suggestion, suggestion_id)
        if row is None:
            raise StoreError(f"there is no suggestion {suggestion_id}")
        if row.refused_reason:
            raise StoreError(
                f"suggestion {suggestion_id} was refused by the quality gates "
                f"({row.refused_reason}); it cannot become an answer"
            )

    @staticmethod
    def _audit_state(view: AnswerView) -> dict[str, Any]:
        """What the audit log records of an answer (time on task is not a change to it)."""
        return {
            "status": view.status,
            "payload": view.payload,
            "flagged": view.flagged,
            "flag_note": view.flag_note,
            "comment": view.comment,
            "suggestion_id": view.suggestion_id,
            "suggestion_use": view.suggestion_use,
        }

    @property
    def _audit_actor_id(self) -> int | None:
        """Who the audit log names for this service's changes: the viewer (None: the system)."""
        return self.viewer.annotator_id

    def _audit(
        self,
        s: Session,
        action: str,
        answer_id: int | None,
        unit_id: int | None,
        old: dict | None,
        new: dict | None,
    ) -> None:
        prev = self.project.last_audit_hash(s)
        entry = AuditEntry(
            at=utc_now(),
            actor_id=self._audit_actor_id,
            action=action,
            answer_id=answer_id,
            unit_id=unit_id,
            old_json=None if old is None else json.dumps(old, sort_keys=True),
            new_json=None if new is None else json.dumps(new, sort_keys=True),
            prev_hash=prev or GENESIS_HASH,
        )
        entry.hash = audit_hash(entry)
        s.add(entry)

    def history(self, unit_id: int, annotator_id: int | None = None) -> list[AuditRecord]:
        """Every recorded change of one annotator's answer to a unit, oldest first."""
        annotator_id = self._whose(annotator_id)
        with self.project.read() as s:
            answer_id = s.scalar(
                select(Answer.id).where(
                    Answer.unit_id == unit_id,
                    Answer.annotator_id == annotator_id,
                    Answer.is_gold.is_(False),
                )
            )
            if answer_id is None:  # never answered (`answer_id == None` would match study events)
                return []
            rows = s.scalars(
                select(AuditEntry).where(AuditEntry.answer_id == answer_id).order_by(AuditEntry.id)
            )
            return [
                AuditRecord(
                    r.at,
                    r.actor_id,
                    r.action,
                    json.loads(r.old_json) if r.old_json else None,
                    json.loads(r.new_json) if r.new_json else None,
                )
                for r in rows
            ]

    def unsubmitted_by_own_save(self, unit_id: int) -> bool:
        """Whether the viewer's answer to ``unit_id`` is a draft, made one from submitted by a
        save of the viewer's own (a change that left it incomplete, which the program saves as
        a draft), not by an import, a merge or the PI. Read from the audit log, so that it
        holds after the program is closed, and at another desk."""
        annotator_id = self._whose(None)
        mine = (
            Answer.unit_id == unit_id,
            Answer.annotator_id == annotator_id,
            Answer.is_gold.is_(False),
            Answer.status == "draft",
        )
        demotions = (
            select(AuditEntry.actor_id, AuditEntry.old_json, AuditEntry.new_json)
            .join(Answer, Answer.id == AuditEntry.answer_id)
            .where(
                *mine,
                # a cheap filter (json.dumps' own spacing); each row found is read to confirm
                AuditEntry.old_json.like('%"status": "submitted"%'),
                AuditEntry.new_json.like('%"status": "draft"%'),
            )
            .order_by(AuditEntry.id.desc())
        )
        with self.project.read() as s:
            for actor_id, old, new in s.execute(demotions):
                if (json.loads(old)["status"], json.loads(new)["status"]) == ("submitted", "draft"):
                    if actor_id != annotator_id:
                        return False
                    # hers, unless a change she cannot read (another's entry) came since
                    answer = s.scalars(select(Answer).where(*mine)).one()
                    return self._last_entry_is_current(s, answer)
        return False

    @staticmethod
    def _last_entry_is_current(s: Session, answer: Answer) -> bool:
        """Whether the newest audit entry this login reads for ``answer`` records it as it is
        now. On a server a clinician reads her own entries only: a later change by the PI, an
        import or a merge is not among them, and it shows as an answer her newest entry does
        not describe."""
        newest = s.scalar(
            select(AuditEntry.new_json)
            .where(AuditEntry.answer_id == answer.id)
            .order_by(AuditEntry.id.desc())
            .limit(1)
        )
        (view,) = StudyService._answer_views(s, [answer])
        return newest == json.dumps(StudyService._audit_state(view), sort_keys=True)

    # --- overview -------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Counts for ``portalreview info``: cases, responses, and per kind the units, the
        assignments and the answers per annotator (an adaptive set counting its judgements,
        as ``portalreview progress`` counts them)."""
        self._require_admin("see the whole study")
        work = _work_by_kind(self.project)
        with self.project.read() as s:
            count = lambda model: s.scalar(select(func.count()).select_from(model))  # noqa: E731
            kinds: dict[str, Any] = {}
            for kind in KINDS:
                units = s.scalar(select(func.count()).select_from(Unit).where(Unit.kind == kind))
                gold_count = s.scalar(
                    select(func.count())
                    .select_from(Answer)
                    .where(Answer.kind == kind, Answer.is_gold.is_(True))
                )
                annotators = work.get(kind, {})
                kinds[kind] = {"units": units, "gold": gold_count, "annotators": annotators}
            return {
                "name": self.project.meta("name"),
                "path": self.project.location,
                "catalogs": self.catalogs.version,
                "cases": count(Case),
                "responses": count(Response),
                "annotators": [
                    {"name": a.name, "role": a.role, "is_model": a.is_model}
                    for a in s.scalars(select(Annotator).order_by(Annotator.id))
                ],
                "kinds": kinds,
                "audit_entries": count(AuditEntry),
            }


def _work_by_kind(project: Project) -> dict[str, dict[str, dict[str, int]]]:
    """Kind -> annotator -> assigned, answered and submitted, in name order: the sums of
    ``study_progress`` (one rule for ``info`` and ``progress``)."""
    from portalreview.store.study_setup import progress_by_kind, study_progress  # (imports us)

    work: dict[str, dict[str, dict[str, int]]] = {}
    for row in progress_by_kind(study_progress(project)):
        work.setdefault(row.kind, {})[row.annotator] = {
            "assigned": row.assigned,
            "answered": row.drafts + row.submitted,
            "submitted": row.submitted,
        }
    return work


def audit_hash(entry: AuditEntry) -> str:
    """SHA-256 over the previous hash and this entry's content: editing any earlier row
    breaks every hash after it."""
    content = json.dumps(
        [
            entry.prev_hash,
            entry.at,
            entry.actor_id,
            entry.action,
            entry.answer_id,
            entry.unit_id,
            entry.old_json,
            entry.new_json,
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class _TranslatingWrite:
    """``project.write()`` that turns the database's refusals into StoreError: a broken
    integrity rule, or a project file that cannot be written (:class:`SaveFailed`)."""

    def __init__(self, project: Project, quick: bool = False) -> None:
        self._label = project.label
        self._cm = project.write(quick=quick)

    def __enter__(self) -> Session:
        try:
            return self._cm.__enter__()
        except DBAPIError as err:
            translated = self._translated(err)
            if translated is None:
                raise
            raise translated from err

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self._cm.__exit__(exc_type, exc, tb)
        except DBAPIError as err:  # the commit, or the rollback after an error, failed
            translated = self._translated(err)
            if translated is None:
                raise
            raise translated from err
        translated = self._translated(exc) if isinstance(exc, DBAPIError) else None
        if translated is not None:
            raise translated from exc
        return False

    def _translated(self, err: DBAPIError) -> StoreError | None:
        if isinstance(err, IntegrityError):
            return StoreError(f"not saved: {readable_integrity(err)}")
        if isinstance(err.orig, sqlite3.Error):  # a server's errors are postgres.py's to word
            return SaveFailed(readable_file_error(self._label, err.orig))
        return None


def readable_file_error(label: str, error: sqlite3.Error) -> str:
    """Why SQLite could not write the project file ``label``, for the person who was saving.
    SQLite's own message names no data, only the trouble ("disk I/O error")."""
    name = getattr(error, "sqlite_errorname", "") or ""
    reason = str(error)
    if name.startswith("SQLITE_FULL"):
        return (
            f"The disk holding {label} is full ({reason}). Nothing was saved. "
            "Make room on that disk, then save again."
        )
    if name.startswith("SQLITE_IOERR"):
        return (
            f"{label} could not be written: the disk or network drive reported an I/O error "
            f"({reason}). Nothing was saved. Check that the drive is there, then save again."
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_CANTOPEN", "SQLITE_AUTH")):
        return (
            f"{label} cannot be written any more: the file or its folder became read-only or "
            f"went away ({reason}). Nothing was saved."
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"{label} is busy in another program ({reason}). Nothing was saved; try again."
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return f"{label} is damaged ({reason}). Nothing was saved."
    return f"{label} could not be written ({reason}). Nothing was saved."


def _check_active_seconds(seconds: float | None) -> None:
    """Time on task is a finite number of seconds >= 0 (or None: kept as stored). Infinity
    passes the database's ``>= 0`` and would make every report fail (metrics/editing.py
    refuses it) and hide later changes of time in its block of the report's watermark."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise StoreError(f"time on task must be a number of seconds, not {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise StoreError(f"time on task must be a finite number of seconds >= 0, not {seconds}")
