"""The agreement report's results kept in the project (table ``report_cache``, format 6), so
that opening the dashboard again, a restart or ``portalreview report`` run again does not
compute what no answer changed.

Each *part* of the report - one analysis (``analysis.KINDS``) or ``study`` (the counts in the
report's header) - is stored with

* ``settings_key``: a digest of everything the figures rest on besides the study's rows: seed,
  resamples, filter, whether drafts count, the catalogs' version, and the code that computes
  them (:func:`code_digest`);
* the audit log's position when it was computed (the newest entry's id and hash) and a
  :class:`Snapshot` of the rest, made of the live frames' watermark (``live_frames.Mark``): a
  digest of their fingerprint (every table the frames read besides the answers,
  ``project_meta``, the schema, the assignments' count and largest rowid) and, per block of
  256 answer ids, the answers' count and summed time on task.

A stored part is **valid** now, and used instead of computing it, when:

1. the fingerprint digest is the same;
2. the audit log still holds the entry at the stored position (same hash), and each entry
   after it names an answer or is one of ``live_frames.SAFE_ACTIONS``;
3. no answer those entries name, and no answer in a block whose count or time on task
   changed (a save of the time on task alone writes no audit entry), is of a kind the part
   reads: ``analysis.DEPENDS_ON`` (``study`` reads every kind); a block with fewer answers
   than before makes every part stale.

That is the live report's own rule (``store/live_frames.py`` and ``analysis.DEPENDS_ON``)
carried across restarts: a part is used only where the live report would have kept it. A part
is read in the same snapshot as the frames it joins, and written with the snapshot read
*before* its frames (never a later one), so a save landing in between makes it stale, never
wrong.

The project keeps the parts of the ``MAX_SETTINGS`` settings written last, in the order of a
write number kept in each row's ``state_json`` (not by ``computed_at``, the clock's time,
which a clock set wrong and put right again would reorder).

Writing the cache never stops a report: a project open read-only, a clinician's session, a
server that refuses or went away - the report is returned all the same and the failure logged.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from portalreview import __version__
from portalreview.analysis import DEPENDS_ON, KINDS
from portalreview.source_digest import source_digest
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.live_frames import (
    BLOCK_BITS,
    SAFE_ACTIONS,
    Mark,
    audit_hash,
    sql_rows,
    watermark,
)
from portalreview.store.models import utc_now

if TYPE_CHECKING:
    from portalreview.analysis.filters import FrameFilter
    from portalreview.domain.catalogs import Catalogs

log = logging.getLogger(__name__)

#: The report's parts: the analyses, and the study's counts.
STUDY = "study"
PARTS = (STUDY, *KINDS)
#: The answer kinds each part reads.
PART_DEPENDS_ON: dict[str, frozenset[str]] = {STUDY: frozenset(KINDS), **DEPENDS_ON}
#: Settings kept per project (the most recently computed); older ones are dropped.
MAX_SETTINGS = 8

_LATER_ENTRIES_SQL = (
    "SELECT l.action, l.answer_id, a.kind FROM audit_log l "
    "LEFT JOIN answers a ON a.id = l.answer_id WHERE l.id > ?"
)


#: The libraries whose arithmetic is in the figures: a result computed with another version
#: of one of them is not taken for this one's.
COMPUTING_LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn", "krippendorff")


@functools.cache
def code_digest() -> str:
    """A digest of the program's own source (:mod:`portalreview.source_digest`: its ``.py``
    files, or a frozen build's stamp of the source it was built from) and of the versions of
    :data:`COMPUTING_LIBRARIES`, so that a result computed by other code is never taken for
    this code's; the versions alone where neither is there."""
    versions = " ".join(f"{name} {_version(name)}" for name in COMPUTING_LIBRARIES)
    source = source_digest()
    if source is None:
        return f"portalreview {__version__}; {versions}"
    return hashlib.sha256(f"{__version__}; {versions}; {source}".encode()).hexdigest()


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@dataclass(frozen=True)
class CacheSettings:
    """What the figures rest on besides the study's rows."""

    seed: int
    n_resamples: int
    choice: str  # the filter as sorted JSON ("{}"-like for none)
    include_drafts: bool
    catalogs_version: Any

    @classmethod
    def of(
        cls,
        seed: int,
        n_resamples: int,
        choice: FrameFilter,
        include_drafts: bool,
        catalogs: Catalogs,
    ) -> CacheSettings:
        """The settings a report with these options is kept under."""
        return cls(
            int(seed),
            int(n_resamples),
            json.dumps(choice.as_json(), sort_keys=True),
            bool(include_drafts),
            catalogs.version,
        )

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "code": code_digest()}, sort_keys=True)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.as_json().encode()).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """Where the study stands, as the cache compares it (see the module docstring): the
    live frames' watermark (``live_frames.Mark``) in a form that can be stored."""

    audit_id: int
    audit_hash: str | None
    fingerprint: str  # digest of the fingerprint and the assignments' count and rowid
    blocks: list[list]  # per block of answer ids (live_frames.BLOCK_BITS): [count, seconds]

    @classmethod
    def of(cls, mark: Mark) -> Snapshot:
        seen = repr((mark.fingerprint, tuple(mark.assignments)))
        blocks = [
            [int(n), float(t)] for n, t in zip(mark.block_counts, mark.time_sums, strict=True)
        ]
        return cls(
            mark.audit_id, mark.audit_hash, hashlib.sha256(seen.encode()).hexdigest(), blocks
        )

    def state_json(self) -> str:
        return json.dumps({"fingerprint": self.fingerprint, "blocks": self.blocks})


def read_snapshot(s: Session) -> Snapshot:
    """The study's :class:`Snapshot` in the session's transaction."""
    return Snapshot.of(watermark(s))


#: More changed blocks than this: the kinds of every answer from the first changed one on.
MAX_BLOCKS = 64


def changed_kinds(s: Session, stored: Snapshot, now: Snapshot) -> frozenset[str]:
    """The answer kinds that may have changed between ``stored`` and ``now`` (every kind
    when anything else may have: see the module docstring)."""
    everything = frozenset(KINDS)
    if stored.fingerprint != now.fingerprint or now.audit_id < stored.audit_id:
        return everything
    if stored.audit_id and audit_hash(s, stored.audit_id) != stored.audit_hash:
        return everything
    timed = _timed_kinds(s, stored.blocks, now.blocks)
    if timed is None:
        return everything
    changed = set(timed)
    if now.audit_id > stored.audit_id:
        for action, answer_id, kind in sql_rows(s, _LATER_ENTRIES_SQL, (stored.audit_id,)):
            if answer_id is None and action in SAFE_ACTIONS:
                continue
            if kind is None:  # an entry without an answer, or an answer no longer there
                return everything
            changed.add(kind)
    return frozenset(changed)


def _timed_kinds(s: Session, old: list[list], new: list[list]) -> set[str] | None:
    """The kinds of the answers in the blocks whose count or time on task changed (a save
    that changes only the time on task writes no audit entry); None when answers went
    missing (read everything)."""
    if len(new) < len(old):
        return None
    changed = [b for b in range(len(new)) if b >= len(old) or old[b] != new[b]]
    if any(b < len(old) and new[b][0] < old[b][0] for b in changed):
        return None
    if not changed:
        return set()
    if len(changed) > MAX_BLOCKS:
        ranges = [(changed[0], len(new))]
    else:
        ranges = [(b, b + 1) for b in changed]
    kinds: set[str] = set()
    for low, high in ranges:
        rows = sql_rows(
            s,
            "SELECT DISTINCT kind FROM answers WHERE id >= ? AND id < ?",
            (low << BLOCK_BITS, high << BLOCK_BITS),
        )
        kinds |= {kind for (kind,) in rows}
    return kinds


@dataclass(frozen=True)
class StoredPart:
    """One part as stored: its name, its result's JSON text, when it was computed, and the
    answer kinds that may have changed since (None: anything may have)."""

    part: str
    text: str
    computed_at: str
    changed: frozenset[str] | None

    @property
    def valid(self) -> bool:
        """Whether it holds now: no kind it reads changed since it was computed."""
        return self.changed is not None and not PART_DEPENDS_ON[self.part] & self.changed

    def result(self) -> dict[str, Any]:
        return json.loads(self.text)


def stored_parts(s: Session, settings: CacheSettings, now: Snapshot) -> dict[str, StoredPart]:
    """Every part stored for ``settings``, each marked valid or not at ``now`` (read in the
    session's transaction); none for a clinician on a server, who may not read them."""
    if not _may_read_cache(s):
        return {}
    rows = sql_rows(
        s,
        "SELECT part, audit_id, audit_hash, state_json, result_json, computed_at "
        "FROM report_cache WHERE settings_key = ?",
        (settings.key,),
    )
    changed_by_state: dict[tuple, frozenset[str]] = {}
    out = {}
    for part, audit_id, hash_, state_json, result_json, computed_at in rows:
        if part not in PART_DEPENDS_ON:
            continue
        changed = None
        if (stored := _stored_snapshot(audit_id, hash_, state_json)) is not None:
            # one snapshot written by two stores (two write numbers) is compared once
            state = (stored.audit_id, stored.audit_hash, stored.state_json())
            if state not in changed_by_state:
                changed_by_state[state] = changed_kinds(s, stored, now)
            changed = changed_by_state[state]
        out[part] = StoredPart(part, result_json, computed_at, changed)
    return out


def _may_read_cache(s: Session) -> bool:
    """Whether this connection may read the kept results: on a server only the PI and the
    study's owner have the table (docs/deployment.md)."""
    if s.get_bind().dialect.name != "postgresql":
        return True
    return bool(s.scalar(text("SELECT has_table_privilege('report_cache', 'SELECT')")))


@dataclass(frozen=True)
class Kept:
    """What the project keeps for some report settings, read in one transaction."""

    catalogs: Catalogs
    settings: CacheSettings
    snapshot: Snapshot
    parts: dict[str, StoredPart]


def read_kept(
    s: Session,
    seed: int,
    n_resamples: int,
    choice: FrameFilter | None,
    include_drafts: bool,
) -> Kept:
    """The catalogs, the settings these options are kept under, where the study stands and
    every part kept for them (each valid or not now), in the session's transaction."""
    from portalreview.analysis.filters import FrameFilter

    catalogs = read_catalogs(s)
    settings = CacheSettings.of(
        seed, n_resamples, choice or FrameFilter(), include_drafts, catalogs
    )
    snapshot = read_snapshot(s)
    return Kept(catalogs, settings, snapshot, stored_parts(s, settings, snapshot))


def _stored_snapshot(audit_id: Any, hash_: Any, state_json: Any) -> Snapshot | None:
    """The :class:`Snapshot` a row was computed at; None when its state cannot be read."""
    try:
        fields = json.loads(state_json)
        blocks = [[int(n), float(t)] for n, t in fields["blocks"]]
        return Snapshot(int(audit_id), hash_, str(fields["fingerprint"]), blocks)
    except (ValueError, KeyError, TypeError):
        return None


def store(
    project: Any, settings: CacheSettings, snapshot: Snapshot, parts: Mapping[str, Any]
) -> bool:
    """Keep ``parts`` (part -> JSON-ready result) computed at ``snapshot``; False (and a
    warning in the log) when they could not be written. Keeps the ``MAX_SETTINGS`` most
    recently written settings."""
    if not parts or getattr(project, "read_only", False):
        return False
    results = {part: json.dumps(result, allow_nan=False) for part, result in parts.items()}
    try:
        with project.write() as s:
            newness = _newness_of_kept_settings(s)
            number = 1 + max((n for known, n in newness.values() if known), default=0)
            _write_rows(s, _rows(settings, snapshot, results, number))
            newness[settings.key] = (True, number)
            _drop_old_settings(s, newness)
    except Exception as exc:  # a cache that cannot be written must not stop the report
        log.warning("the report's results were not kept in the project: %s", exc)
        return False
    return True


_UPSERT = text(
    "INSERT INTO report_cache (settings_key, part, settings_json, audit_id, audit_hash, "
    "state_json, result_json, computed_at) VALUES (:settings_key, :part, :settings_json, "
    ":audit_id, :audit_hash, :state_json, :result_json, :computed_at) "
    "ON CONFLICT (settings_key, part) DO UPDATE SET settings_json = excluded.settings_json, "
    "audit_id = excluded.audit_id, audit_hash = excluded.audit_hash, "
    "state_json = excluded.state_json, result_json = excluded.result_json, "
    "computed_at = excluded.computed_at"
)


def _write_rows(s: Session, rows: list[dict[str, Any]]) -> None:
    s.execute(_UPSERT, rows)


#: The key in a row's ``state_json`` of its write number: one more than the largest kept when
#: it was written, so that the settings written last are known whatever the clock said.
WRITE_NUMBER = "written"


def _rows(
    settings: CacheSettings, snapshot: Snapshot, results: Mapping[str, str], number: int
) -> list[dict[str, Any]]:
    """The rows that keep ``results`` (part -> JSON text), with the write number ``number``;
    ``computed_at`` stays the clock's time, which the dashboard shows."""
    state_json = json.dumps({**json.loads(snapshot.state_json()), WRITE_NUMBER: number})
    computed_at = utc_now()
    return [
        {
            "settings_key": settings.key,
            "part": part,
            "settings_json": settings.as_json(),
            "audit_id": snapshot.audit_id,
            "audit_hash": snapshot.audit_hash,
            "state_json": state_json,
            "result_json": result_json,
            "computed_at": computed_at,
        }
        for part, result_json in results.items()
    ]


def _newness_of_kept_settings(s: Session) -> dict[str, tuple[bool, Any]]:
    """Each kept settings key -> how recently it was written, newest largest: (True, write
    number), or (False, ``computed_at``) for rows without a number (written by an earlier
    version), which count as older than any with one. Not ``computed_at`` alone: with the
    clock set a year ahead for a while, then put right, the settings written since would be
    the oldest, and dropped as soon as written."""
    newness: dict[str, tuple[bool, Any]] = {}
    rows = sql_rows(s, "SELECT settings_key, state_json, computed_at FROM report_cache", ())
    for key, state_json, computed_at in rows:
        number = _write_number(state_json)
        row = (True, number) if number is not None else (False, computed_at or "")
        newness[key] = max(newness.get(key, row), row)
    return newness


def _write_number(state_json: Any) -> int | None:
    """The write number in a row's state; None for a row without one (or unreadable)."""
    try:
        number = json.loads(state_json).get(WRITE_NUMBER)
    except (ValueError, TypeError, AttributeError):
        return None
    return number if type(number) is int else None


def _drop_old_settings(s: Session, newness: Mapping[str, tuple[bool, Any]]) -> None:
    """Keep the ``MAX_SETTINGS`` settings written last (``newness``); ties by key."""
    newest_first = sorted(sorted(newness), key=newness.__getitem__, reverse=True)
    for key in newest_first[MAX_SETTINGS:]:
        s.execute(text("DELETE FROM report_cache WHERE settings_key = :key"), {"key": key})


__all__ = [
    "PARTS",
    "STUDY",
    "CacheSettings",
    "Kept",
    "Snapshot",
    "StoredPart",
    "changed_kinds",
    "code_digest",
    "read_kept",
    "read_snapshot",
    "store",
    "stored_parts",
]
