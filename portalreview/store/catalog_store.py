"""The project's own copy of the catalogs (themes, urgency scale, EPPC codebook, criteria...).

A project keeps the catalogs it was created with, so a later app version never changes an
ongoing study's codebook. The full catalogs live as JSON in ``project_meta['catalogs']``; the
id tables beside it let answers reference entries with foreign keys. Both are written here,
together, in one transaction.
"""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from portalreview.domain.catalogs import Catalogs
from portalreview.store.models import (
    CriterionRow,
    EppcCodeRow,
    EppcSubcodeRow,
    ErrorCategoryRow,
    ProjectMeta,
    ThemeRow,
    UrgencyLevelRow,
)
from portalreview.store.project import ProjectError

CATALOGS_KEY = "catalogs"


def _sync_id_tables(session: Session, catalogs: Catalogs) -> None:
    """Insert the ids the tables do not have yet (entries are never removed)."""

    def add_missing(model, key_of, rows) -> None:
        existing = {key_of(r) for r in session.scalars(select(model))}
        session.add_all(r for r in rows if key_of(r) not in existing)

    add_missing(
        ThemeRow,
        lambda r: r.id,
        [ThemeRow(id=t.id, position=i) for i, t in enumerate(catalogs.themes)],
    )
    add_missing(
        UrgencyLevelRow,
        lambda r: r.level,
        [UrgencyLevelRow(level=lv.level) for lv in catalogs.urgency_levels],
    )
    add_missing(
        EppcCodeRow,
        lambda r: r.id,
        [EppcCodeRow(id=c.id, position=i) for i, c in enumerate(catalogs.eppc_codes)],
    )
    session.flush()
    add_missing(
        EppcSubcodeRow,
        lambda r: (r.code_id, r.id),
        [
            EppcSubcodeRow(code_id=c.id, id=s.id, position=j)
            for c in catalogs.eppc_codes
            for j, s in enumerate(c.subcodes)
        ],
    )
    add_missing(
        CriterionRow,
        lambda r: r.id,
        [CriterionRow(id=c.id, position=i) for i, c in enumerate(catalogs.criteria)],
    )
    add_missing(
        ErrorCategoryRow,
        lambda r: r.id,
        [ErrorCategoryRow(id=e.id, position=i) for i, e in enumerate(catalogs.error_categories)],
    )


def write_catalogs(session: Session, catalogs: Catalogs) -> None:
    """Store ``catalogs`` as the project's catalogs (inside the caller's transaction)."""
    _sync_id_tables(session, catalogs)
    session.merge(ProjectMeta(key=CATALOGS_KEY, value=json.dumps(catalogs.to_dict())))


class NoCatalogsError(ProjectError, LookupError):
    """A project file whose making was cut short (by a version that left it behind)."""


class DamagedCatalogsError(ProjectError, ValueError):
    """A project file whose stored catalogs cannot be read (damaged)."""


def read_catalogs(session: Session) -> Catalogs:
    row = session.get(ProjectMeta, CATALOGS_KEY)
    if row is None:
        raise NoCatalogsError(
            "the project has no catalogs: making it was cut short (a full disk?), so it holds "
            "no work. Delete it and make it again."
        )
    try:
        return Catalogs.from_dict(json.loads(row.value))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DamagedCatalogsError(
            "the project's catalogs (themes, urgency scale, EPPC codebook, criteria) cannot be "
            f"read ({type(exc).__name__}: {exc}): the file is damaged. Nothing was changed; "
            "restore a backup made before the damage (the .backups folder beside a project file)."
        ) from exc


def install_catalogs(project, catalogs: Catalogs) -> None:
    with project.write() as session:
        write_catalogs(session, catalogs)
