"""One consistent read of what the external exports need: the portable tables of
:func:`portalreview.store.exporters.stream_tables`, the catalogs and every sentence's offsets.

The external formats (Label Studio, Prodigy, REDCap) are built from portable references only
(external case and response ids, sentence positions), never from internal database ids.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from portalreview.domain.catalogs import Catalogs
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.exporters import Progress, stream_tables
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
    answers: Iterable[Row]  # a list, but in a streamed_snapshot: read once, as taken
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


#: The tables of :func:`portalreview.store.exporters.stream_tables` a snapshot holds (never
#: the assignments, suggestions and audit log: as many rows as the answers, or more).
SNAPSHOT_TABLES = ("annotators", "cases", "responses", "units", "answers")


def read_snapshot(
    project: Project,
    kinds: Collection[str] | None = None,
    sentences: bool = True,
    progress: Progress | None = None,
) -> Snapshot:
    """Everything the external exports read, in one read transaction: the answers of
    ``kinds`` alone when given, and no sentences with ``sentences=False``; ``progress`` is
    told as the tables are read (:func:`~portalreview.store.exporters.stream_tables`)."""
    with project.read() as session:
        snapshot = _snapshot(session, kinds, sentences, progress)
        snapshot.answers = list(snapshot.answers)
    return snapshot


@contextlib.contextmanager
def streamed_snapshot(
    project: Project,
    kinds: Collection[str] | None = None,
    sentences: bool = True,
    progress: Progress | None = None,
) -> Iterator[Snapshot]:
    """:func:`read_snapshot`'s snapshot, its answers read as they are taken (once), in the
    block: its read transaction."""
    with project.read() as session:
        yield _snapshot(session, kinds, sentences, progress)


def _snapshot(
    session: Session, kinds: Collection[str] | None, sentences: bool, progress: Progress | None
) -> Snapshot:
    _, streams = stream_tables(session, progress, kinds)
    tables = {name: list(streams[name][1]) for name in SNAPSHOT_TABLES if name != "answers"}
    return Snapshot(
        catalogs=read_catalogs(session),
        cases={row["case_id"]: row for row in tables["cases"]},
        responses={row["response_id"]: row for row in tables["responses"]},
        units={(row["set"], row["position"]): row for row in tables["units"]},
        answers=streams["answers"][1],
        sentences=_sentences(session) if sentences else {},
        annotators={row["name"]: row for row in tables["annotators"]},
    )


def _sentences(session: Session) -> dict[SentenceKey, SentenceRow]:
    """Every sentence by its portable key (read as plain rows: 460,000 as ORM objects took
    about 7 s)."""
    cases = dict(session.execute(select(Case.id, Case.external_id)).all())
    responses = dict(session.execute(select(Response.id, Response.external_id)).all())
    columns = (Sentence.case_id, Sentence.response_id, Sentence.position, Sentence.start,
               Sentence.end, Sentence.text)  # fmt: skip
    sentences = {}
    for case_id, response_id, position, start, end, text in session.execute(select(*columns)):
        key = (
            ("case", cases[case_id], position)
            if case_id is not None
            else ("response", responses[response_id], position)
        )
        sentences[key] = SentenceRow(start, end, text)
    return sentences
