"""Prompt templates stored in the project (schema version 2): read by everyone, written by
the PI. Each change raises the template's version and is recorded in the audit log, and every
suggestion keeps the exact text it was made with, so a study can always say what was asked.

What the texts must contain (placeholders per kind) is checked by ``portalreview.llm.templates``
before it calls :meth:`TemplateService.save`; this layer enforces only what the database can.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import func, or_, select

from portalreview.store.models import (
    Assignment,
    Case,
    PromptTemplate,
    Response,
    Suggestion,
    Unit,
    UnitSet,
    utc_now,
)
from portalreview.store.service import AccessError, CaseView, StoreError, StudyService


@dataclass(frozen=True)
class TemplateRecord:
    """One stored template. ``key`` ("name@v3") is what suggestions record as template id."""

    id: int
    kind: str
    name: str
    text: str
    version: int
    updated_at: str

    @property
    def key(self) -> str:
        return f"{self.name}@v{self.version}"


def _record(row: PromptTemplate) -> TemplateRecord:
    return TemplateRecord(row.id, row.kind, row.name, row.text, row.version, row.updated_at)


class TemplateService:
    """The prompt templates of one project, as seen by the viewer of ``service``."""

    def __init__(self, service: StudyService) -> None:
        self.service = service

    def list(self, kind: str | None = None) -> list[TemplateRecord]:
        query = select(PromptTemplate).order_by(PromptTemplate.kind, PromptTemplate.name)
        if kind is not None:
            query = query.where(PromptTemplate.kind == kind)
        with self.service.project.read() as s:
            return [_record(r) for r in s.scalars(query)]

    def get(self, name: str) -> TemplateRecord | None:
        with self.service.project.read() as s:
            row = s.scalar(select(PromptTemplate).where(PromptTemplate.name == name))
            return None if row is None else _record(row)

    def save(self, name: str, kind: str, text: str) -> TemplateRecord:
        """Create a template, or replace its text (version + 1). PI only. Saving the same text
        again changes nothing."""
        self._require_pi()
        if not text.strip():
            raise StoreError(f"the template {name!r} is empty")
        with self.service._write() as s:
            row = s.scalar(select(PromptTemplate).where(PromptTemplate.name == name))
            if row is not None and row.kind != kind:
                raise StoreError(f"the template {name!r} is for {row.kind}, not {kind}")
            if row is not None and row.text == text:
                return _record(row)
            old = None if row is None else {"version": row.version, "text": row.text}
            if row is None:
                row = PromptTemplate(kind=kind, name=name, text=text, version=1)
                s.add(row)
            else:
                row.text = text
                row.version += 1
            row.updated_at = utc_now()
            row.updated_by = self.service.viewer.annotator_id
            s.flush()
            new = {"name": name, "kind": kind, "version": row.version, "text": text}
            self.service._audit(s, "template", None, None, old, new)
            return _record(row)

    def install(self, defaults: Mapping[str, tuple[str, str]]) -> list[str]:
        """Add the templates ``{name: (kind, text)}`` the project does not have yet (never
        overwrites the PI's edits); returns the names added."""
        have = {t.name for t in self.list()}
        added = []
        for name, (kind, text) in defaults.items():
            if name not in have:
                self.save(name, kind, text)
                added.append(name)
        return added

    def _require_pi(self) -> None:
        if not self.service.viewer.sees_all:
            raise AccessError("only the PI can change prompt templates")


# --- lookups for batch suggestion runs (``portalreview suggest``) ------------------------------


def unit_ids(service: StudyService, kind: str | None, unit_set: str | None = None) -> list[int]:
    """The units of a kind (None: any kind), in set and position order; only those of the
    named set if given."""
    service._require_admin("list every unit")
    query = (
        select(Unit.id)
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .order_by(UnitSet.id, Unit.position)
    )
    if kind is not None:
        query = query.where(Unit.kind == kind)
    with service.project.read() as s:
        if unit_set is not None:
            found = s.scalar(select(UnitSet).where(UnitSet.name == unit_set))
            if found is None:
                names = ", ".join(s.scalars(select(UnitSet.name).order_by(UnitSet.id)))
                raise StoreError(f"there is no unit set {unit_set!r} (sets: {names or 'none'})")
            if kind is not None and found.kind != kind:
                raise StoreError(f"the unit set {unit_set!r} holds {found.kind} units, not {kind}")
            query = query.where(UnitSet.name == unit_set)
        return list(s.scalars(query))


def suggestions_by(
    service: StudyService,
    units: list[int],
    model_sha256: str,
    template_id: str,
    for_annotator: int | None = None,
) -> dict[int, int]:
    """unit id -> id of the newest suggestion made for it by this model file and template
    (for anyone; with ``for_annotator``, the ones made for that clinician alone)."""
    service._require_admin("read model suggestions")
    out: dict[int, int] = {}
    with service.project.read() as s:
        rows = s.execute(
            select(Suggestion.unit_id, Suggestion.id)
            .where(
                Suggestion.model_sha256 == model_sha256,
                Suggestion.template_id == template_id,
                Suggestion.unit_id.in_(units),
                Suggestion.for_annotator_id.is_(None)
                if for_annotator is None
                else Suggestion.for_annotator_id == for_annotator,
            )
            .order_by(Suggestion.id)
        )
        for unit, sid in rows:
            out[unit] = sid
    return out


def read_cases(service: StudyService, case_ids: list[int]) -> list[CaseView]:
    """Case views (message, chart, sentences) in the given order, e.g. an inbox to score."""
    service._require_admin("read cases outside a unit")
    with service.project.read() as s:
        missing = [c for c in case_ids if s.get(Case, c) is None]
        if missing:
            raise StoreError(f"there is no case {missing[0]}")
        return [service._case_view(s, c) for c in case_ids]


def response_by_external_id(service: StudyService, external_id: str) -> int | None:
    """The id of the response with this external id, if there is one."""
    service._require_admin("look up responses")
    with service.project.read() as s:
        return s.scalar(select(Response.id).where(Response.external_id == external_id))


def suggestion_payload(service: StudyService, suggestion_id: int) -> dict:
    """The payload of a stored suggestion."""
    service._require_admin("read model suggestions")
    with service.project.read() as s:
        row = s.get(Suggestion, suggestion_id)
        if row is None:
            raise StoreError(f"there is no suggestion {suggestion_id}")
        return json.loads(row.payload_json)


@dataclass(frozen=True)
class SuggestionView:
    """A stored model suggestion as an editor shows it (pre-filled, marked as a suggestion)."""

    id: int
    unit_id: int
    kind: str
    payload: dict
    model_file: str
    template_id: str
    created_at: str


def latest_suggestion(
    service: StudyService, unit_id: int, template_id: str | None = None
) -> SuggestionView | None:
    """The newest suggestion for a unit (optionally from one template set) that may be offered:
    one the quality gates refused is never returned, nor one made for another person (from
    their own replies). A clinician may read it only for a unit assigned to them; the PI and
    the system read any."""
    with service.project.read() as s:
        viewer = service.viewer
        if not viewer.sees_all and s.get(Assignment, (unit_id, viewer.annotator_id)) is None:
            raise AccessError("this unit is not assigned to you")
        for_whom = Suggestion.for_annotator_id.is_(None)
        if viewer.annotator_id is not None:
            for_whom = or_(for_whom, Suggestion.for_annotator_id == viewer.annotator_id)
        query = select(Suggestion).where(
            Suggestion.unit_id == unit_id, Suggestion.refused_reason.is_(None), for_whom
        )
        if template_id is not None:
            query = query.where(Suggestion.template_id == template_id)
        row = s.scalar(query.order_by(Suggestion.id.desc()).limit(1))
        if row is None:
            return None
        return SuggestionView(
            row.id,
            row.unit_id,
            row.kind,
            json.loads(row.payload_json),
            row.model_file,
            row.template_id,
            row.created_at,
        )


@dataclass(frozen=True)
class SuggestionPrompts:
    """What a model read to make a suggestion: the prompt format (chat template or plain
    completion) and every prompt exactly as rendered. Suggestions stored before prompts were
    recorded have none (``prompts`` empty); their template text is still there."""

    suggestion_id: int
    model_file: str
    template_id: str
    template_text: str
    prompt_format: dict
    prompts: list[str]
    runtime: dict  # where the model ran (EngineInfo.runtime); empty for older suggestions


def suggestion_prompts(service: StudyService, suggestion_id: int) -> SuggestionPrompts:
    """The exact prompts behind a suggestion, for the PI (a clinician may not read them)."""
    service._require_admin("read the prompts behind model suggestions")
    with service.project.read() as s:
        row = s.get(Suggestion, suggestion_id)
        if row is None:
            raise StoreError(f"there is no suggestion {suggestion_id}")
        params = json.loads(row.params_json or "{}")
        return SuggestionPrompts(
            row.id,
            row.model_file,
            row.template_id,
            row.template_text,
            params.get("prompt_format") or {"format": "not recorded"},
            list(params.get("prompts") or []),
            dict(params.get("runtime") or {}),
        )


# --- suggestions the quality gates refused (for the PI) ----------------------------------------


def refused_reasons(service: StudyService, suggestion_ids: list[int]) -> dict[int, str]:
    """suggestion id -> why the quality gates refused it, for those of ``suggestion_ids``
    that were refused."""
    service._require_admin("read model suggestions")
    with service.project.read() as s:
        rows = s.execute(
            select(Suggestion.id, Suggestion.refused_reason).where(
                Suggestion.id.in_(suggestion_ids), Suggestion.refused_reason.is_not(None)
            )
        )
        return {sid: reason for sid, reason in rows}


@dataclass(frozen=True)
class RefusedSuggestion:
    """A suggestion the quality gates refused, as the PI sees it."""

    id: int
    unit_id: int
    unit_set: str
    kind: str
    model_file: str
    template_id: str
    reason: str
    created_at: str


def refused_suggestions(service: StudyService) -> list[RefusedSuggestion]:
    """Every refused suggestion, newest first (PI only: clinicians never see them)."""
    service._require_admin("see the suggestions the quality gates refused")
    with service.project.read() as s:
        rows = s.execute(
            select(Suggestion, UnitSet.name)
            .join(Unit, Unit.id == Suggestion.unit_id)
            .join(UnitSet, UnitSet.id == Unit.unit_set_id)
            .where(Suggestion.refused_reason.is_not(None))
            .order_by(Suggestion.id.desc())
        )
        return [
            RefusedSuggestion(
                row.id,
                row.unit_id,
                set_name,
                row.kind,
                row.model_file,
                row.template_id,
                row.refused_reason,
                row.created_at,
            )
            for row, set_name in rows
        ]


def suggestion_counts(service: StudyService) -> tuple[int, int]:
    """(suggestions that may be offered, suggestions the quality gates refused)."""
    service._require_admin("count model suggestions")
    with service.project.read() as s:
        total = s.scalar(select(func.count()).select_from(Suggestion)) or 0
        refused = s.scalar(
            select(func.count())
            .select_from(Suggestion)
            .where(Suggestion.refused_reason.is_not(None))
        )
        return total - (refused or 0), refused or 0
