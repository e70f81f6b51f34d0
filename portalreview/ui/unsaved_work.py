"""An answer that could not be saved, kept on this computer until it is.

A save fails when the study server went away, the project's drive is full or gone, or the
file was replaced under the program. The text stays on screen and the unit cannot be left
(``portalreview.ui.session``), but a screen is memory: a crash, a power cut or a closed
laptop lost it. So each failed save also writes what was on screen to a small file in the
person's own program folder (``<app data>/unsaved``, or ``$PORTALREVIEW_UNSAVED_DIR``), one
file per study, person and unit, and the next successful save of that unit deletes it. Signing in
to the study again offers to put it back on screen, where it is saved like any change.

The file holds the answer's text, so it is written readable by its owner only, and never
leaves this computer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from portalreview.applog import app_data_dir

log = logging.getLogger(__name__)

UNSAVED_DIR_ENV = "PORTALREVIEW_UNSAVED_DIR"
_FORMAT = "portalreview-unsaved-answer"
_VERSION = 1


class UnsavedWorkError(Exception):
    """A kept file that cannot be read back (damaged, or from a later version)."""


def unsaved_dir() -> Path:
    """Where unsaved answers are kept: ``$PORTALREVIEW_UNSAVED_DIR``, else
    ``<app data>/unsaved``."""
    override = os.environ.get(UNSAVED_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else app_data_dir() / "unsaved"


@dataclass(frozen=True)
class UnsavedAnswer:
    """What was on screen when a save failed: everything the save would have stored."""

    unit_id: int
    kind: str
    payload: dict[str, Any]
    comment: str
    status: str  # what the save asked for: "draft" or "submitted"
    flag: dict[str, Any] | None  # {"flagged", "flag_note"} when a flag change was not saved
    suggestion_id: int | None
    suggestion_use: str | None
    unsaved_seconds: float  # time on task not stored yet
    based_on: str | None  # the stored answer's updated_at when the unit was shown (None: none)
    kept_at: str  # local time, ISO 8601, to the second
    why: str  # why the save failed, as the person was told


_NONE = type(None)
#: The JSON types each field of a kept answer may have (a whole number never a bool).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "unit_id": (int,),
    "kind": (str,),
    "payload": (dict,),
    "comment": (str,),
    "status": (str,),
    "flag": (dict, _NONE),
    "suggestion_id": (int, _NONE),
    "suggestion_use": (str, _NONE),
    "unsaved_seconds": (int, float),
    "based_on": (str, _NONE),
    "kept_at": (str,),
    "why": (str,),
}


def _field_problem(kept: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a kept answer read back (None: nothing): a field of
    the wrong type crashed sign-in at every sign-in, the file never named damaged."""
    for name, types in _FIELD_TYPES.items():
        value = kept[name]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"its {name} is {type(value).__name__}, not {_names(types)}"
    if kept["status"] not in ("draft", "submitted"):
        return f"its status {kept['status']!r} is neither draft nor submitted"
    if not math.isfinite(kept["unsaved_seconds"]) or kept["unsaved_seconds"] < 0:
        return f"its unsaved_seconds {kept['unsaved_seconds']!r} is not a time"
    if not all(isinstance(key, str) for key in kept["payload"]):
        return "its payload is not an object of named fields"
    return _flag_problem(kept["flag"])


def _flag_problem(flag: dict[str, Any] | None) -> str | None:
    if flag is None:
        return None
    if set(flag) != {"flagged", "flag_note"}:
        return "its flag is not {flagged, flag_note}"
    if not isinstance(flag["flagged"], bool) or not isinstance(flag["flag_note"], str | _NONE):
        return "its flag is not a yes or no with a note"
    return None


def _names(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is _NONE else t.__name__ for t in types)


class UnsavedWork:
    """The kept answers of one person in one study (``project_id``: the study's UUID), a file
    per unit: an answer kept and not put back yet (Cancel at sign-in) is never overwritten by
    another unit's failed save."""

    def __init__(self, project_id: str, annotator: str, folder: Path | None = None) -> None:
        self.project_id = project_id
        self.annotator = annotator
        self.folder = folder or unsaved_dir()
        self._prefix = hashlib.sha256(f"{project_id}\0{annotator}".encode()).hexdigest()[:24]

    def path_for(self, unit_id: int) -> Path:
        return self.folder / f"{self._prefix}-{unit_id}.json"

    def keep(self, answer: UnsavedAnswer) -> bool:
        """Write ``answer`` over the one kept for its unit before, whole or not at all; False
        (and logged) when it cannot be written, so the person can be told it is only on
        screen."""
        record = {
            "format": _FORMAT,
            "version": _VERSION,
            "project_id": self.project_id,
            "annotator": self.annotator,
            "answer": asdict(answer),
        }
        path = self.path_for(answer.unit_id)
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _write_whole(path, json.dumps(record, ensure_ascii=False, indent=1))
        except (OSError, TypeError, ValueError) as exc:
            log.warning("unsaved answer of unit %s not kept here: %s", answer.unit_id, exc)
            return False
        log.info("unsaved answer of unit %s kept on this computer in %s", answer.unit_id, path)
        return True

    def kept(self) -> list[UnsavedAnswer]:
        """Every kept answer that can be read back, the oldest first (see :meth:`read_all`)."""
        return self.read_all()[0]

    def read_all(self) -> tuple[list[UnsavedAnswer], list[UnsavedWorkError]]:
        """Every kept answer that can be read back, the oldest first, and what is wrong with
        each file that cannot (left as it is): one damaged file must not hide the others."""
        answers, damaged = [], []
        try:
            self._take_in_one_file_per_person()
        except UnsavedWorkError as exc:
            damaged.append(exc)
        try:
            paths = sorted(self.folder.glob(f"{self._prefix}-*.json"))
        except OSError:  # no folder, or nowhere to keep one
            return [], damaged
        for path in paths:
            try:
                answer = self._read(path)
            except UnsavedWorkError as exc:
                damaged.append(exc)
                continue
            if answer is not None:
                answers.append(answer)
        return sorted(answers, key=lambda a: a.kept_at), damaged

    def _take_in_one_file_per_person(self) -> None:
        """Builds of 2026-11-28/29 kept one file per study and person (``<prefix>.json``): its
        answer is renamed to its unit's file, so it is offered like the others. Beside a newer
        file for the same unit it is left where it is and named (raised), never overwritten."""
        older = self.folder / f"{self._prefix}.json"
        answer = self._read(older)
        if answer is None:
            return
        unit_file = self.path_for(answer.unit_id)
        if unit_file.exists():
            raise UnsavedWorkError(
                f"{older} holds an answer to unit {answer.unit_id} kept by an earlier version, "
                f"beside a newer one ({unit_file.name}), which is offered: its text is in the file"
            )
        try:
            older.rename(unit_file)
        except OSError as exc:
            raise UnsavedWorkError(f"{older} cannot be renamed to {unit_file.name}: {exc}") from exc

    def read(self, unit_id: int) -> UnsavedAnswer | None:
        """The answer kept for ``unit_id``, or None."""
        return self._read(self.path_for(unit_id))

    def _read(self, path: Path) -> UnsavedAnswer | None:
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # none kept, or nowhere to keep one
            return None
        except OSError as exc:
            raise UnsavedWorkError(f"{path} cannot be read: {exc}") from exc
        except UnicodeDecodeError as exc:  # cut short inside a character ("é", "’")
            raise UnsavedWorkError(f"{path} is damaged: {exc}") from exc
        try:
            record = json.loads(text)
            if record.get("format") != _FORMAT or record.get("version") != _VERSION:
                raise ValueError("not an unsaved answer of this version of PortalReview")
            owner = (record.get("project_id"), record.get("annotator"))
            if owner != (self.project_id, self.annotator):
                raise ValueError("it belongs to another study or person")
            names = {f.name for f in fields(UnsavedAnswer)}
            kept = record["answer"]
            if not isinstance(kept, dict) or set(kept) != names:
                raise ValueError("its answer is incomplete")
            problem = _field_problem(kept)
            if problem:
                raise ValueError(problem)
            return UnsavedAnswer(**kept)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UnsavedWorkError(f"{path} is damaged: {exc}") from exc

    def forget(self, unit_id: int) -> None:
        """The unit's answer was saved (or the person discarded it): delete its kept file."""
        path = self.path_for(unit_id)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            log.info("unsaved answer kept in %s: saved now, file deleted", path)


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` to a new file beside ``path`` (owner-only), flush it to the disk, then
    put it in ``path``'s place: a crash leaves the old file or the new one, never half."""
    handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
