"""Where a project lives: an SQLite file (``store/project.py``) or a PostgreSQL database
(``backends/postgres.py``). Both offer the same interface (read, write, meta, close...), so the
service layer, the kinds and the screens are written once. :func:`open_project` chooses by the
argument: an address ``postgresql://...`` or a file path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from portalreview.store.backends.postgres import (
    PasswordNeeded,
    ServerProject,
    is_server_url,
    redact,
)
from portalreview.store.project import SUFFIX, Project

AnyProject = Project | ServerProject

#: Asks the person for a server password (given the address without one), or None where
#: nobody can be asked. The command line sets a terminal prompt, the app a dialog.
password_prompt: Callable[[str], str | None] | None = None

T = TypeVar("T")


def asking_password(target: str, attempt: Callable[[str | None], T]) -> T:
    """``attempt(None)``; where the server asks for a password that neither the address nor
    ``~/.pgpass`` gave, once more with the one :data:`password_prompt` gets from the person.
    Every way of reaching a server address goes through here: open, create, copy, upgrade."""
    try:
        return attempt(None)
    except PasswordNeeded:
        password = password_prompt(redact(target)) if password_prompt else None
        if not password:
            raise
        return attempt(password)


def project_target(value: str) -> Path | str:
    """A command's project argument: a server address as given, or a file path (with
    ``.prproj`` added when it has no suffix). An existing folder, or a path without a name
    (``.``), stays as given, so that opening it says it is a folder, not a project file."""
    if is_server_url(value):
        return value
    path = Path(value)
    if path.suffix or not path.name or path.is_dir():
        return path
    return path.with_suffix(SUFFIX)


def target_name(target: Path | str) -> str:
    """How messages name a study: the file's name, or the server address without password."""
    return redact(target) if is_server_url(target) else Path(target).name


def shown_target(target: Path | str) -> str:
    """A study's whole location for messages: the file's path, or the address (no password)."""
    return redact(target) if is_server_url(target) else str(target)


def open_project(target: str | os.PathLike, read_only: bool = False, **file_options) -> AnyProject:
    """Open the study at ``target``: a server address or a project file."""
    if is_server_url(target):
        address = str(target)
        return asking_password(
            address, lambda password: ServerProject.open(address, read_only, password)
        )
    return Project.open(target, read_only=read_only, **file_options)


def create_project(target: str | os.PathLike, name: str | None = None, **options) -> AnyProject:
    """Create a study at ``target``: an empty server database, or a new project file."""
    if is_server_url(target):
        address = str(target)
        return asking_password(
            address,
            lambda password: ServerProject.create(address, name, password=password, **options),
        )
    return Project.create(target, name=name, **options)


def upgrade_server_study(target: str) -> tuple[int, int]:
    """``ServerProject.upgrade``, asking for the password as opening does."""
    return asking_password(target, lambda password: ServerProject.upgrade(target, password))


__all__ = [
    "AnyProject",
    "Project",
    "ServerProject",
    "asking_password",
    "create_project",
    "is_server_url",
    "open_project",
    "project_target",
    "shown_target",
    "target_name",
    "upgrade_server_study",
]
