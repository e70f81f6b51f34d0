"""One consistent read of what the external exports need: the portable tables of
:func:`portalreview.store.exporters.read_tables`, the catalogs and every sentence's offsets.

The external formats (Label Studio, Prodigy, REDCap) are built from portable references only
(external case and response ids, sentence positions), never from internal database ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from portalreview.domain.catalogs import Catalogs
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.exporters import read_tables
from portalreview.store.models import Case, Response, Sentence
from portalreview.store.project import Project
from portalreview.store.service import CHART_SECTIONS, chart_text_of

Row = dict[str, Any]
SentenceKey = tuple[str, str, int]  # (of: "case" | "response", owner external id, position)


@dataclass(frozen=True)
class SentenceRow:
    """A sentence: character offsets into its owner's text (code points) and its text."""

    start: int
    end: int
    text: str


@dataclass
class Snapshot:
    """What one read transaction saw; rows are the portable rows of docs/formats.md."""

    catalogs: Catalogs
    cases: dict[str, Row]
    responses: dict[str, Row]
    units: dict[tuple[str, int], Row]
    answers: list[Row]
    sentences: dict[SentenceKey, SentenceRow] = field(default_factory=dict)
    annotators: dict[str, Row] = field(default_factory=dict)  # by name

    def sentence(self, ref: dict) -> SentenceRow:
        """The sentence a portable sentence reference names."""
        return self.sentences[(ref["of"], ref["owner"], ref["position"])]

    def sentences_of(self, of: str, owner: str) -> list[SentenceRow]:
        """Every sentence of one case message or response, in order."""
        found = sorted((k[2], s) for k, s in self.sentences.items() if k[:2] == (of, owner))
        return [s for _, s in found]

    def unit_of(self, answer: Row) -> Row:
        """The unit row an answer row belongs to."""
        return self.units[(answer["unit"]["set"], answer["unit"]["position"])]

    def chart_text(self, case_id: str) -> str:
        """The case's sectioned chart text (as stored, or written from its four lists)."""
        case = self.cases[case_id]
        if case["chart"] is not None:
            return case["chart"]
        return chart_text_of({s: case[s] for s in CHART_SECTIONS})


def read_snapshot(project: Project) -> Snapshot:
    """Everything the external exports read, in one read transaction."""
    with project.read() as session:
        _, tables = read_tables(session)
        catalogs = read_catalogs(session)
        cases = dict(session.execute(select(Case.id, Case.external_id)).all())
        responses = dict(session.execute(select(Response.id, Response.external_id)).all())
        sentences = {}
        for s in session.scalars(select(Sentence)):
            key = (
                ("case", cases[s.case_id], s.position)
                if s.case_id is not None
                else ("response", responses[s.response_id], s.position)
            )
            sentences[key] = SentenceRow(s.start, s.end, s.text)
    return Snapshot(
        catalogs=catalogs,
        cases={row["case_id"]: row for row in tables["cases"][1]},
        responses={row["response_id"]: row for row in tables["responses"][1]},
        units={(row["set"], row["position"]): row for row in tables["units"][1]},
        answers=tables["answers"][1],
        sentences=sentences,
        annotators={row["name"]: row for row in tables["annotators"][1]},
    )
