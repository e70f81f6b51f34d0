"""Where a project lives: an SQLite file (``store/project.py``) or a PostgreSQL database
(``backends/postgres.py``). Both offer the same interface (read, write, meta, close...), so the
service layer, the kinds and the screens are written once. :func:`open_project` chooses by the
argument: an address ``postgresql://...`` or a file path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

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


def project_target(value: str) -> Path | str:
    """A command's project argument: a server address as given, or a file path (with
    ``.prproj`` added when it has no suffix)."""
    if is_server_url(value):
        return value
    path = Path(value)
    return path if path.suffix else path.with_suffix(SUFFIX)


def target_name(target: Path | str) -> str:
    """How messages name a study: the file's name, or the server address without password."""
    return redact(target) if is_server_url(target) else Path(target).name


def shown_target(target: Path | str) -> str:
    """A study's whole location for messages: the file's path, or the address (no password)."""
    return redact(target) if is_server_url(target) else str(target)


def open_project(target: str | os.PathLike, read_only: bool = False, **file_options) -> AnyProject:
    """Open the study at ``target``: a server address or a project file."""
    if is_server_url(target):
        try:
            return ServerProject.open(str(target), read_only=read_only)
        except PasswordNeeded:
            password = password_prompt(redact(str(target))) if password_prompt else None
            if not password:
                raise
            return ServerProject.open(str(target), read_only=read_only, password=password)
    return Project.open(target, read_only=read_only, **file_options)


def create_project(target: str | os.PathLike, name: str | None = None, **options) -> AnyProject:
    """Create a study at ``target``: an empty server database, or a new project file."""
    if is_server_url(target):
        return ServerProject.create(str(target), name=name, **options)
    return Project.create(target, name=name, **options)


__all__ = [
    "AnyProject",
    "Project",
    "ServerProject",
    "create_project",
    "is_server_url",
    "open_project",
    "project_target",
    "shown_target",
    "target_name",
]
