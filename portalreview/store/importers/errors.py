"""The one error an import raises, with where it happened in words a person can act on."""

from __future__ import annotations


class ImportFailed(ValueError):
    """An import refused; nothing was changed.

    The message names the file, the row (CSV/XLSX, header = row 1) or line (JSON Lines), the
    field, and what was expected. The parts are also kept as attributes for a GUI to highlight.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        place: str | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.place = place
        self.field = field
        self.reason = message
        super().__init__(locate(message, file=file, place=place, field=field))


class EmptyTable(ImportFailed):
    """A file or sheet with no data rows (an error, except for a folder's empty tables)."""


def locate(
    message: str, *, file: str | None = None, place: str | None = None, field: str | None = None
) -> str:
    """``"cases.csv, row 5, field 'urgency_level': message"`` with the parts that are known."""
    where = [part for part in (file, place) if part]
    if field:
        where.append(f"field {field!r}")
    return f"{', '.join(where)}: {message}" if where else message


def json_type(value: object) -> str:
    """The JSON name of a Python value's type, for messages ("text", "number", "list"...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
