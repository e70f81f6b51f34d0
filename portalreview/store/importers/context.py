"""The state of one import: its transaction, its service, lookups by external id, and the
translation of any refusal from below into an :class:`ImportFailed` naming the record."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from portalreview.domain.catalogs import CatalogError, Catalogs
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.importers.errors import ImportFailed, json_type
from portalreview.store.importers.records import Record, show, whole_number
from portalreview.store.importers.report import ImportReport
from portalreview.store.kinds import PayloadError
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    AuditEntry,
    Case,
    CaseTag,
    RankMember,
    Response,
    Sentence,
    Suggestion,
    Unit,
    UnitSet,
)
from portalreview.store.project import Project
from portalreview.store.service import (
    AccessError,
    StoreError,
    StudyService,
    person_name,
    readable_integrity,
)

COUNTED = {
    "annotators": Annotator,
    "cases": Case,
    "case_tags": CaseTag,
    "responses": Response,
    "sentences": Sentence,
    "unit_sets": UnitSet,
    "units": Unit,
    "rank_members": RankMember,
    "assignments": Assignment,
    "suggestions": Suggestion,
    "answers": Answer,
    "audit_log": AuditEntry,
}


# "case 21", "response 19" and "pair (21, 26)" in a payload's refusal: the project's ids
_INTERNAL_IDS = re.compile(
    r"\b(?P<what>case|response) (?P<id>\d+)\b|\bpair \((?P<a>\d+), (?P<b>\d+)\)"
)


class ImportService(StudyService):
    """The system viewer's service, with the catalogs read inside the import's transaction
    (so that catalogs written by the same import are the ones answers are checked against)."""

    def __init__(self, project: Project, catalogs: Catalogs, dry_run: bool = False) -> None:
        super().__init__(project)
        self._catalogs = catalogs
        self._dry_run = dry_run
        self.audit_entries_not_written = 0

    def _audit(self, s: Session, *entry: Any) -> None:
        """An audit entry, or in a dry run only counted: on a server the audit log's guard
        takes the team's write lock for an entry, which a dry run must not hold (the team's
        saves would wait for it); and what an entry holds is the program's own, not the
        imported data, so leaving it out leaves nothing of the files unchecked."""
        if self._dry_run:
            self.audit_entries_not_written += 1
        else:
            super()._audit(s, *entry)

    def use_catalogs(self, catalogs: Catalogs) -> None:
        """Check answers against ``catalogs`` from now on (written by this import)."""
        self._catalogs = catalogs

    def record_import(self, session: Session, details: dict[str, Any]) -> None:
        """One audit-log entry for the whole import (answers saved add their own)."""
        self._audit(session, "import", None, None, None, details)


def count_rows(session: Session) -> dict[str, int]:
    """Rows per table, for the report (and for tests: nothing changed after a failure)."""
    return {
        name: session.scalar(select(func.count()).select_from(model))
        for name, model in COUNTED.items()
    }


class ImportContext:
    """Everything the format loaders share during one :func:`import_files` call."""

    def __init__(
        self,
        project: Project,
        session: Session,
        report: ImportReport,
        parts: dict[str, list],
        dry_run: bool = False,
    ) -> None:
        self.session = session
        self.report = report
        self.svc = ImportService(project, read_catalogs(session), dry_run)
        self.parts = parts  # format name -> [Part, ...] (REDCap pairs records with dictionaries)
        self.first_seen: dict[tuple[str, str], str] = {}
        self.redcap_mapping: dict | None = None
        self._ids: dict[str, dict[str, int]] = {}
        # (unit, annotator) assignments imported without saying whether they hold gold only
        self.unmarked: set[tuple[int, int]] = set()
        # (unit, annotator) assignments of units judged, checked for own responses at the end
        self.judged: set[tuple[int, int]] = set()

    @property
    def catalogs(self) -> Catalogs:
        """The catalogs answers are checked against."""
        return self.svc.catalogs

    # --- guarded work ---------------------------------------------------------------------

    @contextlib.contextmanager
    def guard(self, rec: Record, name: str | None = None) -> Iterator[None]:
        """Run one record's writes; a refusal from the service, a codec or the database
        becomes an ImportFailed naming the record (and ``name``, the field, when given)."""
        try:
            yield
            self.session.flush()
        except ImportFailed:
            raise
        except PayloadError as exc:
            rec.fail(name, self._in_file_terms(str(exc)))
        except (StoreError, CatalogError, AccessError) as exc:
            rec.fail(name, str(exc))
        except IntegrityError as exc:
            rec.fail(name, f"not saved: {readable_integrity(exc)}")

    def _in_file_terms(self, message: str) -> str:
        """A payload's refusal names cases and responses by the project's own ids ("case 21
        is not one of the pair (21, 26)"); the file knows them by their external ids."""
        said = ["case"]  # what a bare pair of ids after it holds

        def external(what: str, number: str) -> str:
            names = {v: k for k, v in self.ids(f"{what}s").items()}
            found = names.get(int(number))
            return repr(found) if found is not None else number

        def swap(m: re.Match) -> str:
            if m.group("what"):
                said[0] = m.group("what")
                return f"{m.group('what')} {external(said[0], m.group('id'))}"
            first, second = (external(said[0], m.group(g)) for g in ("a", "b"))
            return f"pair ({first}, {second})"

        return _INTERNAL_IDS.sub(swap, message)

    def claim(self, table: str, key: str, rec: Record, name: str, exists: bool) -> None:
        """Refuse an id that the project already has or that this import already used."""
        first = self.first_seen.get((table, key))
        if first:
            rec.fail(name, f"{table} {key!r} appears twice in this import (first: {first})")
        if exists:
            rec.fail(name, f"{table} {key!r} is already in the project (ids must be unique)")
        self.first_seen[(table, key)] = rec.where

    # --- lookups by external id -------------------------------------------------------------

    def ids(self, table: str) -> dict[str, int]:
        """external id (or name) -> id for cases, responses, annotators or unit sets."""
        if table not in self._ids:
            column = {
                "cases": (Case.external_id, Case.id),
                "responses": (Response.external_id, Response.id),
                "annotators": (Annotator.name, Annotator.id),
                "unit_sets": (UnitSet.name, UnitSet.id),
            }[table]
            self._ids[table] = dict(self.session.execute(select(*column)).all())
        return self._ids[table]

    def case_ref(self, rec: Record, name: str, value: Any) -> int:
        """The id of the case whose external id is ``value``; an error naming it if unknown."""
        return self._ref("cases", "case", rec, name, value)

    def response_ref(self, rec: Record, name: str, value: Any) -> int:
        """The id of the response whose external id is ``value``; an error if unknown."""
        return self._ref("responses", "response", rec, name, value)

    def _ref(self, table: str, what: str, rec: Record, name: str, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            rec.fail(name, f"expected the external id of a {what} (text), got {json_type(value)}")
        found = self.ids(table).get(value.strip())
        if found is None:
            rec.fail(
                name,
                f"there is no {what} {value!r} in the project or in this import "
                f"(import the {table} first)",
            )
        return found

    def sentence_ref(self, rec: Record, name: str, ref: Any) -> int:
        """The id of the sentence ``{"owner", "of", "position"}`` refers to."""
        if not isinstance(ref, dict) or not {"owner", "position"} <= set(ref):
            rec.fail(name, 'expected {"owner": ..., "of": "case"|"response", "position": n}')
        unknown = sorted(set(ref) - {"owner", "of", "position"})
        if unknown:
            rec.fail(name, f"unknown key(s) {', '.join(unknown)} in a sentence reference")
        of = ref.get("of")
        if of not in (None, "case", "response"):
            rec.fail(f"{name}.of", f"expected 'case' or 'response', got {show(of)}")
        position = whole_number(ref["position"])
        if position is None or position < 0:
            rec.fail(
                f"{name}.position", f"expected a whole number from 0, got {show(ref['position'])}"
            )
        owner = ref["owner"]
        if not isinstance(owner, str | int) or isinstance(owner, bool):
            rec.fail(f"{name}.owner", f"expected an external id, got {json_type(owner)}")
        return self._sentence(rec, name, str(owner).strip(), of, position)

    def _sentence(self, rec: Record, name: str, owner: str, of: str | None, position: int) -> int:
        hits = []
        if of in (None, "case") and owner in self.ids("cases"):
            hits.append(Sentence.case_id == self.ids("cases")[owner])
        if of in (None, "response") and owner in self.ids("responses"):
            hits.append(Sentence.response_id == self.ids("responses")[owner])
        if not hits:
            rec.fail(f"{name}.owner", f"there is no case or response {owner!r}")
        if len(hits) > 1:
            rec.fail(f"{name}.of", f"{owner!r} is both a case and a response: say which")
        found = self.session.scalar(
            select(Sentence.id).where(hits[0], Sentence.position == position)
        )
        if found is None:
            rec.fail(f"{name}.position", f"{owner!r} has no sentence {position} (counted from 0)")
        return found

    def resolver(self, rec: Record, prefix: str) -> Resolver:
        """Portable references -> ids, failing on ``rec`` with ``prefix.<path>`` as the field."""
        return Resolver(self, rec, prefix)

    # --- annotators, unit sets, units, assignments ----------------------------------------

    def annotator(self, rec: Record, name: str) -> int:
        """The id of the annotator named in field ``name``; created (clinician) if new, with
        a note naming them (a misspelt name makes a new person). A name written with other
        Unicode code points for the same letters (NFD "josé" from macOS, NFC "josé" from
        Windows) is the same person, not a second one who looks the same."""
        person = rec.ident(name)
        found = self.annotator_id(person)
        if found is None:
            found = self.svc.add_annotator(person, session=self.session)
            self.ids("annotators")[person] = found
            self.report.note(f"a new annotator, {person!r}, was added (named in {rec.where})")
        return found

    def annotator_id(self, name: str) -> int | None:
        """The id of the annotator called ``name``, however its letters are written
        (``service.person_name``), or None."""
        known = self.ids("annotators")
        found = known.get(name)
        if found is None:
            same = [n for n in known if person_name(n) == person_name(name)]
            if same:
                found = known[name] = known[same[0]]
        return found

    def unit_set(self, name: str) -> tuple[int, str] | None:
        """(id, kind) of the unit set called ``name`` (trimmed, as names are stored), or None."""
        row = self.session.execute(
            select(UnitSet.id, UnitSet.kind).where(UnitSet.name == name.strip())
        ).first()
        return None if row is None else (row[0], row[1])

    def ensure_unit_set(self, name: str, kind: str, rec: Record, description: str = "") -> int:
        """The id of unit set ``name`` of ``kind``, created when missing."""
        name = name.strip()
        found = self.unit_set(name)
        if found is None:
            set_id = self.svc.create_unit_set(name, kind, description, session=self.session)
            self.ids("unit_sets")[name] = set_id
            return set_id
        if found[1] != kind:
            rec.fail(None, f"unit set {name!r} already exists with kind {found[1]}, not {kind}")
        return found[0]

    def unit_ref(self, rec: Record, name: str, ref: Any) -> Unit:
        """The unit ``{"set": name, "position": n}`` refers to; an error if there is none."""
        if not isinstance(ref, dict) or set(ref) != {"set", "position"}:
            rec.fail(name, 'expected {"set": "<unit set name>", "position": n}')
        position = whole_number(ref["position"])
        if not isinstance(ref["set"], str) or position is None:
            rec.fail(name, 'expected {"set": "<unit set name>", "position": n}')
        unit = self.session.scalar(  # set names are stored trimmed, as ``Record.ident`` reads them
            select(Unit)
            .join(UnitSet, UnitSet.id == Unit.unit_set_id)
            .where(UnitSet.name == ref["set"].strip(), Unit.position == position)
        )
        if unit is None:
            rec.fail(name, f"there is no unit {position} in unit set {ref['set']!r}")
        return unit

    def ensure_assigned(self, unit_id: int, annotator_id: int) -> None:
        """Assign the unit to the annotator unless it already is, for work: an assignment
        that only holds the PI's gold answer becomes one (an ordinary answer saved on it was
        left out of her queue and progress)."""
        held = self.session.get(Assignment, (unit_id, annotator_id))
        if held is None or held.is_gold_holder:
            self.svc.assign(unit_id, annotator_id, session=self.session)
            self.session.flush()

    def has_answer(self, unit_id: int, annotator_id: int, gold: bool = False) -> bool:
        """Whether the annotator already has an (ordinary or gold) answer to the unit."""
        return (
            self.session.scalar(
                select(Answer.id).where(
                    Answer.unit_id == unit_id,
                    Answer.annotator_id == annotator_id,
                    Answer.is_gold.is_(gold),
                )
            )
            is not None
        )

    def set_times(self, row: Any, rec: Record, **columns: str) -> None:
        """Restore timestamps given in the file (``created_at="created_at"``...)."""
        for attribute, name in columns.items():
            value = rec.timestamp(name)
            if value is not None:
                setattr(row, attribute, value)


class Resolver:
    """:class:`portable.RefsToIds` for one record."""

    def __init__(self, ctx: ImportContext, rec: Record, prefix: str) -> None:
        self.ctx, self.rec, self.prefix = ctx, rec, prefix

    def _name(self, trail: str) -> str:
        return f"{self.prefix}.{trail}" if trail else self.prefix

    def case(self, ref: Any, trail: str) -> int:
        return self.ctx.case_ref(self.rec, self._name(trail), ref)

    def response(self, ref: Any, trail: str) -> int:
        return self.ctx.response_ref(self.rec, self._name(trail), ref)

    def sentence(self, ref: Any, trail: str) -> int:
        return self.ctx.sentence_ref(self.rec, self._name(trail), ref)
