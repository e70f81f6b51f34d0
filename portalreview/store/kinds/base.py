"""What every kind's answer codec shares: payload checks with messages a person can act on.

An answer's *payload* is a plain JSON-ready dict (documented per kind in docs/formats.md). The
service layer stores it through the kind's codec: ``write`` turns it into rows (the database
then enforces the rules that cross tables), ``read`` turns rows back into the same dict
(``read_many``: of many answers at once, which ``read`` calls for one), and
``incomplete`` says what is still missing before the answer can be submitted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Row, Select
from sqlalchemy.orm import Session

from portalreview.domain.catalogs import Catalogs
from portalreview.store.models import Answer, Unit


class PayloadError(ValueError):
    """An answer payload that cannot be stored; the message names the field."""


@dataclass(frozen=True)
class UnitContext:
    """What a codec needs to know about the unit an answer is for."""

    unit: Unit
    catalogs: Catalogs
    members: tuple[int, ...] = ()  # rank: the responses of the set
    reference_sentences: tuple[int, ...] = ()  # match: sentence ids of the reference
    draft_sentences: tuple[int, ...] = ()  # match: sentence ids of the draft
    draft_length: int = 0  # match: characters in the draft
    sentence_length: int = 0  # eppc: characters in the sentence


class Codec(Protocol):
    KIND: str

    def write(self, session: Session, answer: Answer, ctx: UnitContext, payload: dict) -> None: ...

    def read(self, session: Session, answer: Answer) -> dict: ...

    def read_many(self, session: Session, answer_ids: Sequence[int]) -> dict[int, dict]: ...

    def incomplete(self, ctx: UnitContext, payload: dict) -> str | None: ...


def plain_rows(session: Session, query: Select) -> Sequence[Row]:
    """``session.execute(query)``'s rows, run on the session's connection without the ORM's
    work on each row: a third of the time of reading 40,000 answers' payloads (adjudication
    at 10,000 units). Flushed first, as ``session.execute`` would (autoflush): a payload read
    back in the transaction that wrote it has all its rows."""
    if session.autoflush:
        session.flush()
    return session.connection().execute(query).all()  # fetched at once, not row by row


def field(payload: dict, key: str, kind: type | tuple[type, ...], where: str, default: Any = ...):
    """``payload[key]`` checked for type; ``default`` when absent (required if not given)."""
    if key not in payload or (payload[key] is None and default is not ...):
        if default is ...:
            raise PayloadError(f"{where}: '{key}' is missing")
        return default
    value = payload[key]
    if isinstance(value, bool) and kind in (int, (int,)):
        raise PayloadError(f"{where}: '{key}' must be a whole number, not {value!r}")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise PayloadError(f"{where}: '{key}' must be {names}, not {type(value).__name__}")
    return value


#: Why a text cannot be stored. PostgreSQL's text cannot hold a NUL at all (a study on a server
#: failed every save of such an answer with a database error); a project file refuses it too, so
#: that both back ends keep the same answers and a file's study can be copied to a server.
_NUL = (
    "contains a NUL character (invisible; text copied from a PDF or another program can carry "
    "one), which cannot be stored: delete it, or cut the text and paste it back (pasting leaves "
    "it out)"
)
_SURROGATE = "contains an invalid character (an unpaired UTF-16 surrogate), which cannot be stored"


def unstorable_text(text: str) -> str | None:
    """Why ``text`` cannot be stored on either back end, or None."""
    if "\x00" in text:
        return _NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None


def check_storable_texts(value: Any, where: str) -> None:
    """Refuse a text (or key) anywhere inside ``value`` that cannot be stored, naming its place
    ("respond: parts.empathy contains a NUL character..."). Walked without recursion."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            problem = unstorable_text(item)
            if problem:
                raise PayloadError(f"{where}: {path or 'the text'} {problem}")
        elif isinstance(item, dict):
            for key in item:
                problem = unstorable_text(key) if isinstance(key, str) else None
                if problem:
                    raise PayloadError(f"{where}: a key of {path or 'the answer'} {problem}")
            todo.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            todo.extend((f"{path}[{i}]", v) for i, v in enumerate(item))


def check_keys(payload: dict, allowed: Iterable[str], where: str) -> None:
    if not isinstance(payload, dict):
        raise PayloadError(f"{where}: expected an object, got {type(payload).__name__}")
    unknown = sorted(set(payload) - set(allowed))
    if unknown:
        raise PayloadError(f"{where}: unknown field(s) {', '.join(unknown)}")


def spans(value: Any, where: str, limit: int) -> list[tuple[int, int]]:
    """A list of [start, end] pairs inside a text of length ``limit``, not overlapping."""
    if not isinstance(value, list):
        raise PayloadError(f"{where}: spans must be a list of [start, end] pairs")
    out = []
    for i, item in enumerate(value):
        ok = (
            isinstance(item, list | tuple)
            and len(item) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        )
        if not ok:
            raise PayloadError(f"{where}[{i}]: a span must be [start, end] with whole numbers")
        start, end = item
        if not 0 <= start < end <= limit:
            raise PayloadError(
                f"{where}[{i}]: span [{start}, {end}] is outside the text (0 to {limit})"
            )
        out.append((start, end))
    out.sort()
    for (_, end_a), (start_b, _) in itertools.pairwise(out):
        if start_b < end_a:
            raise PayloadError(f"{where}: spans overlap")
    return out
