"""Label catalogs: every fixed vocabulary the annotation and review tasks use.

Plain data with validation; no Qt and no SQL. Where each catalog comes from:

* response themes and the theme-guided response form: seed 000 ("How Much Would a Clinician
  Edit This Draft?"), Table 1, Table 9, Appendix G (REDCap form) and Appendix H (thematic
  prompt); the short column labels follow its per-theme tables (Tables 14-17);
* urgency scale and the two filter labels: seed 002 (PMR-Bench), Table 6 and Appendix A.4.1;
* EPPC codebook (9 codes, their subcodes, legacy spellings, display names): seed 003
  (EPPCMinerBen), Section 3.2.2 and Figure 2, with the internal names from ``FACTS.md``;
* correctness criteria C1-C3: seed 001 (MedAlign), "Clinician Evaluation of LLM Responses";
* empathy comparison choices and expert error categories: seed 004 ("From Generation to
  Collaboration"), Section 3.6 / Supplementary Fig. 3 and Supplementary Table 3.

All wording of names, definitions and questions is ours. A study starts from
:data:`DEFAULT_CATALOGS` and may grow it (never shrink or rename it) with
:meth:`Catalogs.extended`, typically from a JSON file read by :func:`load_catalog_extension`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_CATALOGS",
    "CatalogError",
    "Catalogs",
    "Criterion",
    "EmpathyChoice",
    "EppcCode",
    "EppcSubcode",
    "ErrorCategory",
    "NotesBox",
    "Theme",
    "UrgencyFilterLabel",
    "UrgencyLevel",
    "load_catalog_extension",
]


class CatalogError(ValueError):
    """A catalog, or an extension of one, is invalid.

    The message starts with the path of the problem, e.g.
    ``eppc_codes[3].subcodes[1].id: duplicate id "Symptoms"``.
    """


# --------------------------------------------------------------------------------------------
# Entry types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Theme:
    """A response theme (seed 000, Table 1; one text box each in the Appendix G form)."""

    id: str
    name: str
    short: str
    definition: str
    question: str
    is_other: bool = False


@dataclass(frozen=True)
class NotesBox:
    """The free-text box for assumptions and notes at the end of the form (seed 000, App. G).

    It is not a theme: its text is never part of the reply to the patient.
    """

    id: str
    name: str
    question: str


@dataclass(frozen=True)
class UrgencyLevel:
    """One step of the 6-level urgency scale (seed 002, Table 6); 1 is the most urgent."""

    level: int
    name: str
    definition: str


@dataclass(frozen=True)
class UrgencyFilterLabel:
    """A label outside the urgency scale, used only to filter messages (seed 002, A.4.1)."""

    id: str
    name: str
    definition: str


@dataclass(frozen=True)
class EppcSubcode:
    """An EPPC subcode; it belongs to one code (the same id under two codes is two labels)."""

    id: str
    name: str
    definition: str


@dataclass(frozen=True)
class EppcCode:
    """An EPPC communication code with its subcodes (seed 003, Section 3.2.2 and Figure 2)."""

    id: str
    name: str
    definition: str
    subcodes: tuple[EppcSubcode, ...]


@dataclass(frozen=True)
class Criterion:
    """A reason to mark a response incorrect (seed 001, MedAlign criteria C1-C3)."""

    id: str
    name: str
    definition: str


@dataclass(frozen=True)
class EmpathyChoice:
    """An answer to "which of two responses is more empathetic?" (seed 004, Section 3.6)."""

    id: str
    name: str


@dataclass(frozen=True)
class ErrorCategory:
    """A kind of error experts found in edited responses (seed 004, Supplementary Table 3)."""

    id: str
    name: str
    definition: str


# --------------------------------------------------------------------------------------------
# Validation helpers (they work on the JSON-ready dict form and raise with a path)
# --------------------------------------------------------------------------------------------

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
_EMPATHY_CHOICE_IDS = ("first_more", "second_more", "equal")
_TOP_KEYS = (
    "version",
    "themes",
    "notes_box",
    "urgency_levels",
    "urgency_filter_labels",
    "eppc_codes",
    "eppc_legacy_spellings",
    "criteria",
    "empathy_choices",
    "error_categories",
)
_EXTENSION_LIST_KEYS = (
    "themes",
    "eppc_codes",
    "criteria",
    "error_categories",
    "urgency_filter_labels",
)
_EXTENSION_KEYS = ("version", *_EXTENSION_LIST_KEYS, "eppc_legacy_spellings")
_FIXED_KEYS = {
    "urgency_levels": "the urgency scale is fixed at levels 1-6 by design and cannot be extended",
    "notes_box": "the notes box is fixed and cannot be extended",
    "empathy_choices": "the three empathy choices are fixed and cannot be extended",
}


def _q(text: object) -> str:
    """Quote a value for an error message."""
    return json.dumps(text, ensure_ascii=False) if isinstance(text, str) else repr(text)


def _norm(text: str) -> str:
    """Spelling key for lenient matching: case, spaces, '_' and '-' are ignored."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if not ch.isspace() and ch not in "_-")


def _obj(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise CatalogError(f"{path}: expected an object, found {type(value).__name__}")
    return value


def _seq(value: Any, path: str) -> list:
    if not isinstance(value, list | tuple):
        raise CatalogError(f"{path}: expected a list, found {type(value).__name__}")
    return list(value)


def _keys(d: dict, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    allowed = (*required, *optional)
    for key in d:
        if key not in allowed:
            raise CatalogError(f"{path}: unknown key {_q(key)} (expected: {', '.join(allowed)})")
    for key in required:
        if key not in d:
            raise CatalogError(f"{path}: missing key {_q(key)}")


def _text(d: dict, key: str, path: str) -> str:
    value = d[key]
    if not isinstance(value, str):
        raise CatalogError(f"{path}.{key}: expected a string, found {type(value).__name__}")
    if not value.strip():
        raise CatalogError(f"{path}.{key}: must not be empty")
    return value


def _ident(d: dict, key: str, path: str, *, snake: bool = False) -> str:
    value = _text(d, key, path)
    if value != value.strip():
        raise CatalogError(f"{path}.{key}: id {_q(value)} has leading or trailing spaces")
    if snake and not _SNAKE.match(value):
        raise CatalogError(
            f"{path}.{key}: id {_q(value)} must be snake_case "
            "(lowercase letters, digits and '_', starting with a letter)"
        )
    return value


def _unique(values: list[str], path: str, what: str = "id", attr: str = "id") -> None:
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise CatalogError(f"{path}[{i}].{attr}: duplicate {what} {_q(value)}")
        seen.add(value)


def _parse_theme(raw: Any, path: str) -> Theme:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "short", "definition", "question"), ("is_other",))
    is_other = d.get("is_other", False)
    if not isinstance(is_other, bool):
        raise CatalogError(f"{path}.is_other: expected true or false, found {_q(is_other)}")
    return Theme(
        id=_ident(d, "id", path, snake=True),
        name=_text(d, "name", path),
        short=_text(d, "short", path),
        definition=_text(d, "definition", path),
        question=_text(d, "question", path),
        is_other=is_other,
    )


def _parse_notes_box(raw: Any, path: str) -> NotesBox:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "question"))
    return NotesBox(
        id=_ident(d, "id", path, snake=True),
        name=_text(d, "name", path),
        question=_text(d, "question", path),
    )


def _parse_level(raw: Any, path: str) -> UrgencyLevel:
    d = _obj(raw, path)
    _keys(d, path, ("level", "name", "definition"))
    level = d["level"]
    if not isinstance(level, int) or isinstance(level, bool):
        raise CatalogError(f"{path}.level: expected an integer, found {_q(level)}")
    return UrgencyLevel(
        level=level, name=_text(d, "name", path), definition=_text(d, "definition", path)
    )


def _parse_filter_label(raw: Any, path: str) -> UrgencyFilterLabel:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "definition"))
    return UrgencyFilterLabel(
        id=_ident(d, "id", path),
        name=_text(d, "name", path),
        definition=_text(d, "definition", path),
    )


def _parse_subcode(raw: Any, path: str) -> EppcSubcode:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "definition"))
    return EppcSubcode(
        id=_ident(d, "id", path),
        name=_text(d, "name", path),
        definition=_text(d, "definition", path),
    )


def _parse_code(raw: Any, path: str) -> EppcCode:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "definition", "subcodes"))
    subs = tuple(
        _parse_subcode(s, f"{path}.subcodes[{j}]")
        for j, s in enumerate(_seq(d["subcodes"], f"{path}.subcodes"))
    )
    _unique([s.id for s in subs], f"{path}.subcodes")
    return EppcCode(
        id=_ident(d, "id", path),
        name=_text(d, "name", path),
        definition=_text(d, "definition", path),
        subcodes=subs,
    )


def _parse_criterion(raw: Any, path: str) -> Criterion:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "definition"))
    return Criterion(
        id=_ident(d, "id", path),
        name=_text(d, "name", path),
        definition=_text(d, "definition", path),
    )


def _parse_empathy_choice(raw: Any, path: str) -> EmpathyChoice:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name"))
    return EmpathyChoice(id=_ident(d, "id", path), name=_text(d, "name", path))


def _parse_error_category(raw: Any, path: str) -> ErrorCategory:
    d = _obj(raw, path)
    _keys(d, path, ("id", "name", "definition"))
    return ErrorCategory(
        id=_ident(d, "id", path, snake=True),
        name=_text(d, "name", path),
        definition=_text(d, "definition", path),
    )


def _parse_list(data: dict, key: str, parse) -> tuple:
    items = tuple(parse(raw, f"{key}[{i}]") for i, raw in enumerate(_seq(data[key], key)))
    _unique([item.id for item in items], key)
    return items


def _parse_legacy(
    raw: Any, codes: tuple[EppcCode, ...], path: str = "eppc_legacy_spellings"
) -> dict[str, dict[str, str]]:
    outer = _obj(raw, path)
    by_id = {c.id: c for c in codes}
    result: dict[str, dict[str, str]] = {}
    for code_key, inner_raw in outer.items():
        kpath = f"{path}[{_q(code_key)}]"
        if not isinstance(code_key, str):
            raise CatalogError(f"{kpath}: keys must be code ids (strings)")
        if code_key == "":
            targets = {c.id: c.id for c in codes}
            what = "code"
        elif code_key in by_id:
            targets = {s.id: s.id for s in by_id[code_key].subcodes}
            what = f"subcode of {code_key}"
        else:
            valid = ", ".join(by_id) or "(none)"
            raise CatalogError(
                f'{kpath}: unknown EPPC code {_q(code_key)} (use "" for code spellings; '
                f"valid codes: {valid})"
            )
        inner = _obj(inner_raw, kpath)
        canon_norm = {_norm(t): t for t in targets}
        seen_norm: dict[str, str] = {}
        mapped: dict[str, str] = {}
        for spelling, target in inner.items():
            spath = f"{kpath}[{_q(spelling)}]"
            if not isinstance(spelling, str) or not spelling.strip():
                raise CatalogError(f"{spath}: a legacy spelling must be a non-empty string")
            if not isinstance(target, str) or target not in targets:
                valid = ", ".join(targets) or "(none)"
                raise CatalogError(
                    f"{spath}: target {_q(target)} is not a canonical {what} (valid: {valid})"
                )
            key = _norm(spelling)
            if key in canon_norm and canon_norm[key] != target:
                raise CatalogError(
                    f"{spath}: spelling already matches canonical id {_q(canon_norm[key])}, "
                    f"so it cannot map to {_q(target)}"
                )
            if key in seen_norm and seen_norm[key] != target:
                raise CatalogError(
                    f"{spath}: same spelling (ignoring case and spaces) already maps to "
                    f"{_q(seen_norm[key])}"
                )
            seen_norm[key] = target
            mapped[spelling] = target
        result[code_key] = mapped
    return result


def _parse_catalogs(data: Any) -> dict[str, Any]:
    """Validate the dict form of a whole catalog set; return constructor arguments."""
    data = _obj(data, "catalogs")
    _keys(data, "catalogs", _TOP_KEYS)
    if not isinstance(data["version"], str) or not data["version"].strip():
        raise CatalogError("version: expected a non-empty string")

    themes = _parse_list(data, "themes", _parse_theme)
    if not themes:
        raise CatalogError("themes: at least the Other theme is required")
    others = [i for i, t in enumerate(themes) if t.is_other]
    if len(others) != 1:
        raise CatalogError(f"themes: exactly one theme must have is_other set, found {len(others)}")
    if others[0] != len(themes) - 1:
        raise CatalogError(f"themes[{others[0]}].is_other: the Other theme must come last")
    _unique([t.short for t in themes], "themes", what="short label", attr="short")

    notes_box = _parse_notes_box(data["notes_box"], "notes_box")
    if notes_box.id in {t.id for t in themes}:
        raise CatalogError(f"notes_box.id: {_q(notes_box.id)} is already a theme id")

    levels = tuple(
        _parse_level(raw, f"urgency_levels[{i}]")
        for i, raw in enumerate(_seq(data["urgency_levels"], "urgency_levels"))
    )
    if len(levels) != 6:
        raise CatalogError(
            f"urgency_levels: the scale has exactly 6 levels (1-6), found {len(levels)}"
        )
    for i, lvl in enumerate(levels):
        if lvl.level != i + 1:
            raise CatalogError(
                f"urgency_levels[{i}].level: expected {i + 1} (levels run 1-6 in order), "
                f"found {lvl.level}"
            )

    filter_labels = _parse_list(data, "urgency_filter_labels", _parse_filter_label)
    codes = _parse_list(data, "eppc_codes", _parse_code)
    legacy = _parse_legacy(data["eppc_legacy_spellings"], codes)
    criteria = _parse_list(data, "criteria", _parse_criterion)

    choices = _parse_list(data, "empathy_choices", _parse_empathy_choice)
    if tuple(c.id for c in choices) != _EMPATHY_CHOICE_IDS:
        raise CatalogError(
            "empathy_choices: ids must be exactly " + ", ".join(_EMPATHY_CHOICE_IDS) + " in order"
        )
    errors = _parse_list(data, "error_categories", _parse_error_category)

    return {
        "version": data["version"],
        "themes": themes,
        "notes_box": notes_box,
        "urgency_levels": levels,
        "urgency_filter_labels": filter_labels,
        "eppc_codes": codes,
        "eppc_legacy_spellings": legacy,
        "criteria": criteria,
        "empathy_choices": choices,
        "error_categories": errors,
    }


def _entry_dict(entry: Any) -> dict[str, Any]:
    if isinstance(entry, Theme):
        return {
            "id": entry.id,
            "name": entry.name,
            "short": entry.short,
            "definition": entry.definition,
            "question": entry.question,
            "is_other": entry.is_other,
        }
    if isinstance(entry, NotesBox):
        return {"id": entry.id, "name": entry.name, "question": entry.question}
    if isinstance(entry, UrgencyLevel):
        return {"level": entry.level, "name": entry.name, "definition": entry.definition}
    if isinstance(entry, EppcCode):
        return {
            "id": entry.id,
            "name": entry.name,
            "definition": entry.definition,
            "subcodes": [_entry_dict(s) for s in entry.subcodes],
        }
    if isinstance(entry, EmpathyChoice):
        return {"id": entry.id, "name": entry.name}
    if isinstance(entry, UrgencyFilterLabel | EppcSubcode | Criterion | ErrorCategory):
        return {"id": entry.id, "name": entry.name, "definition": entry.definition}
    raise CatalogError(f"unexpected catalog entry {entry!r}")


_FIELD_TYPES: dict[str, type] = {
    "themes": Theme,
    "urgency_levels": UrgencyLevel,
    "urgency_filter_labels": UrgencyFilterLabel,
    "eppc_codes": EppcCode,
    "criteria": Criterion,
    "empathy_choices": EmpathyChoice,
    "error_categories": ErrorCategory,
}

_EXT_PARSERS = {
    "themes": _parse_theme,
    "urgency_filter_labels": _parse_filter_label,
    "criteria": _parse_criterion,
    "error_categories": _parse_error_category,
}


def _check_extension_shape(extension: Any, where: str) -> dict:
    """Top-level shape of an extension: an object with known keys of the right JSON types."""
    if not isinstance(extension, dict):
        raise CatalogError(
            f"{where}: a catalog extension must be a JSON object, "
            f"found {_json_type_name(extension)}"
        )
    for key, value in extension.items():
        if key in _FIXED_KEYS:
            raise CatalogError(f"{where}.{key}: {_FIXED_KEYS[key]}")
        if key not in _EXTENSION_KEYS:
            raise CatalogError(
                f"{where}: unknown key {_q(key)} (allowed: {', '.join(_EXTENSION_KEYS)})"
            )
        if key == "version" and (not isinstance(value, str) or not value.strip()):
            raise CatalogError(f"{where}.version: expected a non-empty string")
        if key in _EXTENSION_LIST_KEYS and not isinstance(value, list):
            raise CatalogError(f"{where}.{key}: expected a list, found {_json_type_name(value)}")
        if key == "eppc_legacy_spellings" and not isinstance(value, dict):
            raise CatalogError(f"{where}.{key}: expected an object, found {_json_type_name(value)}")
    return extension


def _json_type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def _diff_fields(old: dict, new: dict) -> list[str]:
    return [k for k in old if k in new and old[k] != new[k]]


# --------------------------------------------------------------------------------------------
# The catalog set
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Catalogs:
    """Every label vocabulary of a study, validated on construction.

    ``eppc_legacy_spellings`` maps a code id to ``{legacy subcode spelling: canonical subcode
    id}``; the key ``""`` holds ``{legacy code spelling: canonical code id}``. Treat it as
    read-only.
    """

    version: str
    themes: tuple[Theme, ...]
    notes_box: NotesBox
    urgency_levels: tuple[UrgencyLevel, ...]
    urgency_filter_labels: tuple[UrgencyFilterLabel, ...]
    eppc_codes: tuple[EppcCode, ...]
    eppc_legacy_spellings: dict[str, dict[str, str]]
    criteria: tuple[Criterion, ...]
    empathy_choices: tuple[EmpathyChoice, ...]
    error_categories: tuple[ErrorCategory, ...]

    def __post_init__(self) -> None:
        for name, kind in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, list | tuple):
                raise CatalogError(f"{name}: expected a tuple of {kind.__name__}")
            for i, item in enumerate(value):
                if not isinstance(item, kind):
                    raise CatalogError(f"{name}[{i}]: expected a {kind.__name__}")
                if kind is EppcCode:
                    for j, sub in enumerate(item.subcodes):
                        if not isinstance(sub, EppcSubcode):
                            raise CatalogError(
                                f"{name}[{i}].subcodes[{j}]: expected an EppcSubcode"
                            )
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for code in self.eppc_codes:
            if isinstance(code.subcodes, list):
                object.__setattr__(code, "subcodes", tuple(code.subcodes))
        if not isinstance(self.notes_box, NotesBox):
            raise CatalogError("notes_box: expected a NotesBox")
        if not isinstance(self.eppc_legacy_spellings, dict):
            raise CatalogError("eppc_legacy_spellings: expected a dict")
        # Full validation runs on the dict form, so both construction paths share one rule set.
        parsed = _parse_catalogs(self.to_dict())
        object.__setattr__(self, "eppc_legacy_spellings", parsed["eppc_legacy_spellings"])
        object.__setattr__(self, "_index", self._build_index())

    def __hash__(self) -> int:
        legacy = tuple(
            (code, tuple(sorted(spellings.items())))
            for code, spellings in sorted(self.eppc_legacy_spellings.items())
        )
        return hash(
            (
                self.version,
                self.themes,
                self.notes_box,
                self.urgency_levels,
                self.urgency_filter_labels,
                self.eppc_codes,
                legacy,
                self.criteria,
                self.empathy_choices,
                self.error_categories,
            )
        )

    # -- lookups ----------------------------------------------------------------------------

    def theme(self, theme_id: str) -> Theme:
        """The theme with this id; KeyError naming the known ids otherwise."""
        for theme in self.themes:
            if theme.id == theme_id:
                return theme
        known = ", ".join(t.id for t in self.themes)
        raise KeyError(f"unknown theme id {_q(theme_id)}; known themes: {known}")

    def eppc_code(self, code_id: str) -> EppcCode:
        """The EPPC code with exactly this id; KeyError naming the known ids otherwise."""
        for code in self.eppc_codes:
            if code.id == code_id:
                return code
        known = ", ".join(c.id for c in self.eppc_codes)
        raise KeyError(f"unknown EPPC code {_q(code_id)}; known codes: {known}")

    def _build_index(self) -> dict[str, Any]:
        def entry(ids_names: list[tuple[str, str]], legacy: dict[str, str]) -> dict[str, Any]:
            by_norm: dict[str, list[str]] = {}
            by_name: dict[str, list[str]] = {}
            for ident, name in ids_names:
                by_norm.setdefault(_norm(ident), []).append(ident)
                by_name.setdefault(_norm(name), []).append(ident)
            return {
                "exact": {ident for ident, _ in ids_names},
                "norm": by_norm,
                "legacy": {_norm(k): v for k, v in legacy.items()},
                "name": by_name,
            }

        legacy = self.eppc_legacy_spellings
        return {
            "": entry([(c.id, c.name) for c in self.eppc_codes], legacy.get("", {})),
            **{
                c.id: entry([(s.id, s.name) for s in c.subcodes], legacy.get(c.id, {}))
                for c in self.eppc_codes
            },
        }

    @staticmethod
    def _resolve(spelling: str, idx: dict[str, Any]) -> tuple[str, str] | None:
        """Find a canonical id for a spelling: (id, how) or None when nothing matches."""
        if spelling in idx["exact"]:
            return spelling, "exact"
        key = _norm(spelling)
        for table, how in ((idx["norm"], "case/spacing"), (idx["name"], "display name")):
            hits = table.get(key, [])
            if len(hits) > 1:
                raise CatalogError(
                    f"{_q(spelling)}: ambiguous spelling, matches " + ", ".join(map(_q, hits))
                )
            if hits:
                return hits[0], how
            if how == "case/spacing" and key in idx["legacy"]:
                return idx["legacy"][key], "legacy spelling"
        return None

    def canonical_eppc(self, code: str, subcode: str | None) -> tuple[str, str | None, list[str]]:
        """Map a code/subcode spelling onto canonical ids.

        Matching tries, in order: the exact id; the id ignoring case, spaces, '_' and '-';
        the legacy spellings; the display name. Returns ``(code_id, subcode_id, applied)``
        where ``applied`` describes each mapping that was not an exact match (empty when the
        input was already canonical). A blank subcode counts as no subcode.

        Raises CatalogError naming the code and the valid choices when the code is unknown
        or the subcode does not belong to that code.
        """
        index: dict[str, Any] = self._index  # type: ignore[attr-defined]
        applied: list[str] = []
        if not isinstance(code, str) or not code.strip():
            raise CatalogError(f"EPPC code {_q(code)}: expected a non-empty code name")
        found = self._resolve(code, index[""])
        if found is None:
            valid = ", ".join(c.id for c in self.eppc_codes)
            raise CatalogError(f"EPPC code {_q(code)}: unknown code; valid codes: {valid}")
        code_id, how = found
        if how != "exact":
            applied.append(f"code {_q(code)} -> {_q(code_id)} ({how})")

        if subcode is None:
            return code_id, None, applied
        if not isinstance(subcode, str):
            raise CatalogError(f"EPPC code {_q(code_id)}: subcode must be text, got {subcode!r}")
        if not subcode.strip():
            applied.append(f"subcode {_q(subcode)} under {code_id}: blank, read as no subcode")
            return code_id, None, applied
        sub_found = self._resolve(subcode, index[code_id])
        if sub_found is None:
            valid = ", ".join(s.id for s in self.eppc_code(code_id).subcodes) or "(none)"
            elsewhere = [
                c.id
                for c in self.eppc_codes
                if c.id != code_id and self._resolve(subcode, index[c.id]) is not None
            ]
            hint = f" (it is a subcode of {', '.join(elsewhere)})" if elsewhere else ""
            raise CatalogError(
                f"EPPC code {_q(code_id)}: subcode {_q(subcode)} does not belong to this "
                f"code{hint}; valid subcodes: {valid}"
            )
        sub_id, how = sub_found
        if how != "exact":
            applied.append(f"subcode {_q(subcode)} -> {_q(sub_id)} under {code_id} ({how})")
        return code_id, sub_id, applied

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-ready plain data; ``Catalogs.from_dict(c.to_dict()) == c``."""
        return {
            "version": self.version,
            "themes": [_entry_dict(t) for t in self.themes],
            "notes_box": _entry_dict(self.notes_box),
            "urgency_levels": [_entry_dict(lv) for lv in self.urgency_levels],
            "urgency_filter_labels": [_entry_dict(f) for f in self.urgency_filter_labels],
            "eppc_codes": [_entry_dict(c) for c in self.eppc_codes],
            "eppc_legacy_spellings": {
                code: dict(spellings) for code, spellings in self.eppc_legacy_spellings.items()
            },
            "criteria": [_entry_dict(c) for c in self.criteria],
            "empathy_choices": [_entry_dict(c) for c in self.empathy_choices],
            "error_categories": [_entry_dict(e) for e in self.error_categories],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Catalogs:
        """Build from :meth:`to_dict` output; CatalogError with the path of any problem."""
        return cls(**_parse_catalogs(data))

    # -- extension ---------------------------------------------------------------------------

    def extended(self, extension: dict) -> Catalogs:
        """A copy with the additions of ``extension`` (a PI growing a running study's labels).

        Keys (all optional): ``version``; ``themes`` (inserted before Other);
        ``eppc_codes`` (a new code with its subcodes, or an existing code id with new
        subcodes to append); ``eppc_legacy_spellings``; ``criteria``; ``error_categories``;
        ``urgency_filter_labels``. Only additions: an entry whose id exists with other content
        is refused, an identical one is ignored. The urgency scale, the notes box and the
        empathy choices are fixed. Without a ``version`` key a changed catalog gets
        ``<old version>+ext-<hash of the extension>``; a ``version`` equal to the current one
        is refused when the extension changes anything.
        """
        ext = _check_extension_shape(extension, "extension")
        base = self.to_dict()
        merged = self.to_dict()
        changed = False

        for key, parse in _EXT_PARSERS.items():
            if key not in ext:
                continue
            entries = [parse(raw, f"extension.{key}[{i}]") for i, raw in enumerate(ext[key])]
            _unique([e.id for e in entries], f"extension.{key}")
            existing = {d["id"]: d for d in base[key]}
            additions = []
            for i, entry in enumerate(entries):
                new = _entry_dict(entry)
                if key == "themes" and entry.is_other:
                    raise CatalogError(
                        f"extension.themes[{i}].is_other: the catalog already has its "
                        "Other theme; added themes go before it"
                    )
                old = existing.get(entry.id)
                if old is None:
                    additions.append(new)
                elif old != new:
                    raise CatalogError(
                        f"extension.{key}[{i}]: {_q(entry.id)} already exists with a "
                        f"different {', '.join(_diff_fields(old, new))}; existing entries "
                        "cannot be changed"
                    )
            if additions:
                changed = True
                if key == "themes":
                    merged[key] = merged[key][:-1] + additions + merged[key][-1:]
                else:
                    merged[key] = merged[key] + additions

        if "eppc_codes" in ext:
            changed |= self._extend_codes(ext["eppc_codes"], merged)

        if "eppc_legacy_spellings" in ext:
            changed |= self._extend_legacy(ext["eppc_legacy_spellings"], merged)

        if "version" in ext:
            version = ext["version"]
            if changed and version == self.version:
                raise CatalogError(
                    f"extension.version: {_q(version)} is the current version; an extension "
                    "that adds entries must set a new version"
                )
        elif changed:
            digest = hashlib.sha256(
                json.dumps(ext, sort_keys=True, ensure_ascii=False).encode("utf-8")
            ).hexdigest()[:8]
            version = f"{self.version}+ext-{digest}"
        else:
            version = self.version
        merged["version"] = version
        try:
            return Catalogs.from_dict(merged)
        except CatalogError as exc:
            raise CatalogError(f"after applying the extension: {exc}") from None

    def _extend_codes(self, raw_codes: list, merged: dict) -> bool:
        changed = False
        codes_by_id = {d["id"]: d for d in merged["eppc_codes"]}
        seen: set[str] = set()
        for i, raw in enumerate(raw_codes):
            path = f"extension.eppc_codes[{i}]"
            d = _obj(raw, path)
            code_id = _ident(d, "id", path) if "id" in d else None
            if code_id is None:
                raise CatalogError(f'{path}: missing key "id"')
            if code_id in seen:
                raise CatalogError(f"{path}.id: duplicate id {_q(code_id)}")
            seen.add(code_id)
            old = codes_by_id.get(code_id)
            if old is None:
                code = _parse_code(d, path)
                merged["eppc_codes"].append(_entry_dict(code))
                codes_by_id[code_id] = merged["eppc_codes"][-1]
                changed = True
                continue
            _keys(d, path, ("id",), ("name", "definition", "subcodes"))
            for field_name in ("name", "definition"):
                if field_name in d and d[field_name] != old[field_name]:
                    raise CatalogError(
                        f"{path}.{field_name}: code {_q(code_id)} already exists with a "
                        f"different {field_name}; existing entries cannot be changed"
                    )
            raw_subs = _seq(d.get("subcodes", []), f"{path}.subcodes")
            subs = [_parse_subcode(s, f"{path}.subcodes[{j}]") for j, s in enumerate(raw_subs)]
            _unique([s.id for s in subs], f"{path}.subcodes")
            old_subs = {s["id"]: s for s in old["subcodes"]}
            for j, sub in enumerate(subs):
                new = _entry_dict(sub)
                prev = old_subs.get(sub.id)
                if prev is None:
                    old["subcodes"].append(new)
                    changed = True
                elif prev != new:
                    raise CatalogError(
                        f"{path}.subcodes[{j}]: subcode {_q(sub.id)} of {code_id} already "
                        f"exists with a different {', '.join(_diff_fields(prev, new))}; "
                        "existing entries cannot be changed"
                    )
        return changed

    def _extend_legacy(self, raw: dict, merged: dict) -> bool:
        changed = False
        legacy = merged["eppc_legacy_spellings"]
        for code_key, inner in raw.items():
            kpath = f"extension.eppc_legacy_spellings[{_q(code_key)}]"
            inner = _obj(inner, kpath)
            current = legacy.setdefault(code_key, {})
            for spelling, target in inner.items():
                if spelling in current and current[spelling] != target:
                    raise CatalogError(
                        f"{kpath}[{_q(spelling)}]: already maps to {_q(current[spelling])}; "
                        "existing entries cannot be changed"
                    )
                if spelling not in current:
                    current[spelling] = target
                    changed = True
        return changed


# --------------------------------------------------------------------------------------------
# Extension files
# --------------------------------------------------------------------------------------------


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {_q(key)} in one object")
        result[key] = value
    return result


def load_catalog_extension(path: str | os.PathLike) -> dict:
    """Read a catalog extension from a JSON file and check its top-level shape.

    Raises CatalogError naming the file when it cannot be read, is not UTF-8 JSON, repeats a
    key inside one object, is not a JSON object, or has an unknown or fixed top-level key.
    Entry-level checks happen in :meth:`Catalogs.extended`.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CatalogError(f"{file}: catalog extension file not found") from None
    except IsADirectoryError:
        raise CatalogError(f"{file}: is a folder, not a catalog extension file") from None
    except UnicodeDecodeError as exc:
        raise CatalogError(f"{file}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise CatalogError(
            f"{file}: cannot read catalog extension ({exc.strerror or exc})"
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise CatalogError(f"{file}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise CatalogError(f"{file}: {exc}") from None
    return _check_extension_shape(data, str(file))


# --------------------------------------------------------------------------------------------
# Default content (our wording throughout)
# --------------------------------------------------------------------------------------------

_THEMES = (
    Theme(
        id="empathy",
        name="Empathetic communication",
        short="Emp",
        definition=(
            "Words that show the patient you understand and care: acknowledging the problem, "
            "praising their effort, asking for patience, or thanking them."
        ),
        question="What would you say to show this patient understanding and support?",
    ),
    Theme(
        id="symptom_questions",
        name="Symptom-related follow-up questions",
        short="SymQ",
        definition=(
            "Questions that ask the patient for more detail about their symptoms or history, "
            "such as where, when, how often or how bad."
        ),
        question="What would you ask the patient about their symptoms or history?",
    ),
    Theme(
        id="medication_questions",
        name="Medication-related follow-up questions",
        short="MedQ",
        definition=(
            "Questions about the patient's medicines: what they take, how and when they take "
            "them, what they have tried, and what they plan to do."
        ),
        question="What would you ask the patient about their medicines?",
    ),
    Theme(
        id="assessment",
        name="Medical assessment",
        short="Assess",
        definition=(
            "Explaining the clinical picture, for example what a test result means, what may "
            "be causing the symptoms, or why a treatment is being chosen."
        ),
        question=(
            "What would you explain about the results, the likely cause, or the reasons "
            "behind your advice?"
        ),
    ),
    Theme(
        id="planning",
        name="Medical planning and instructions",
        short="Plan",
        definition=(
            "The medical plan and what the patient should do next: tests to get, treatments "
            "to start, stop or change, and self-care steps."
        ),
        question="What medical plan or instructions would you give the patient?",
    ),
    Theme(
        id="logistics",
        name="Logistics: scheduling, billing, operations",
        short="Logis",
        definition=(
            "Practical details about appointments, billing, clinic policies and how things "
            "work, including practical instructions or questions for the patient."
        ),
        question=(
            "What scheduling, billing or other practical information would you give, and "
            "what would you ask about it?"
        ),
    ),
    Theme(
        id="coordination",
        name="Care coordination and communication planning",
        short="Coord",
        definition=(
            "Who will be in touch with whom and when: follow-up contact with the patient and "
            "communication within the clinic or with other clinics."
        ),
        question=(
            "How will you or the care team follow up with the patient, and who else needs "
            "to be contacted?"
        ),
    ),
    Theme(
        id="contingency",
        name="Contingency planning",
        short="Cont",
        definition=(
            "A backup plan: warning signs to watch for and what the patient should do if "
            "things get worse or do not improve."
        ),
        question="What warning signs should the patient watch for, and what should they do then?",
    ),
    Theme(
        id="other",
        name="Other",
        short="Other",
        definition="Anything worth saying to the patient that fits none of the themes above.",
        question="Is there anything else you would tell this patient that fits no box above?",
        is_other=True,
    ),
)

_NOTES_BOX = NotesBox(
    id="notes",
    name="Assumptions and notes",
    question=(
        "Record any assumptions you made about the case, from the chart or from experience "
        "with similar patients, and any reasoning you want to keep. This text is not part "
        "of the reply."
    ),
)

_URGENCY_LEVELS = (
    UrgencyLevel(
        1,
        "Emergency now",
        "Possibly life-threatening symptoms; the patient needs emergency care right away.",
    ),
    UrgencyLevel(
        2,
        "Same-day care",
        "Urgent but not life-threatening; the patient should be seen today, for example at "
        "urgent care or a walk-in clinic.",
    ),
    UrgencyLevel(
        3,
        "Visit within 1-3 days",
        "Semi-urgent; the patient needs an in-person visit within the next one to three days.",
    ),
    UrgencyLevel(
        4,
        "Routine visit",
        "Not urgent, but the patient should be seen in person; timing is flexible.",
    ),
    UrgencyLevel(
        5,
        "Remote advice",
        "Self-care can help; no visit is needed, but the patient needs guidance by message "
        "or phone.",
    ),
    UrgencyLevel(
        6,
        "No medical attention",
        "Nothing of medical concern; no further clinical action is needed.",
    ),
)

_URGENCY_FILTER_LABELS = (
    UrgencyFilterLabel(
        id="UNCLEAR",
        name="Unclear",
        definition=(
            "The clinician's reply does not point clearly to any one level; such messages "
            "are left out of urgency comparisons."
        ),
    ),
    UrgencyFilterLabel(
        id="SUPPORTIVE CARE",
        name="Supportive care",
        definition=(
            "The reply points to supportive services such as physical therapy or a routine "
            "mental health session rather than acute care, so it does not fit the scale."
        ),
    ),
)


def _sub(ident: str, name: str, definition: str) -> EppcSubcode:
    return EppcSubcode(ident, name, definition)


_SHARED_TOPICS = (
    ("Symptoms", "Symptoms", "symptoms: what they are, how they feel, how they have changed"),
    ("Diagnostics", "Diagnostics", "tests, imaging, lab results or diagnoses"),
    ("Drugs", "Drugs", "medicines: names, doses, effects, side effects or refills"),
    ("Prognosis", "Prognosis", "the expected course or outlook of an illness or treatment"),
    (
        "Generalinformation",
        "General information",
        "health matters that no more specific subcode covers",
    ),
    ("Instruction", "Instruction", "steps to follow, such as how to prepare for a test"),
    (
        "carecoordination",
        "Care coordination",
        "who handles which part of care: referrals, handoffs, messages among the care team",
    ),
    (
        "SchedulingAppt",
        "Appointment-related information",
        "appointments: booking, dates, times, changes or cancellations",
    ),
)


def _topics(verb: str, ids: tuple[str, ...]) -> tuple[EppcSubcode, ...]:
    return tuple(
        _sub(ident, name, f"{verb} {about}.")
        for ident, name, about in _SHARED_TOPICS
        if ident in ids
    )


_INFO_GIVE_IDS = tuple(t[0] for t in _SHARED_TOPICS)
_INFO_SEEK_IDS = (
    "Symptoms",
    "Diagnostics",
    "Drugs",
    "Generalinformation",
    "carecoordination",
    "SchedulingAppt",
)

_SDOH = {
    "EconomicStability": (
        "Economic stability",
        "money, work, or the cost of care, medicines, food or housing",
    ),
    "HealthCareAccessAndQuality": (
        "Health care access and quality",
        "getting care: insurance coverage, transport, availability of services, or the "
        "quality of care received",
    ),
    "NeighborhoodAndBuiltEnvironment": (
        "Neighborhood and built environment",
        "housing, safety, or the place the person lives and how it affects their health",
    ),
}


def _sdoh(verb: str, ids: tuple[str, ...]) -> tuple[EppcSubcode, ...]:
    return tuple(_sub(i, _SDOH[i][0], f"{verb} {_SDOH[i][1]}.") for i in ids)


_SALUTATION = _sub(
    "salutation", "Salutation", "An opening greeting, such as 'Hello' or 'Dear ...'."
)
_SIGNOFF = _sub("signoff", "Signoff", "A closing line or signature that ends the message.")
_CONNECTION = _sub(
    "connection",
    "Connection",
    "Makes friendly, personal remarks that build rapport beyond the medical business.",
)
_APPRECIATION = _sub(
    "Appreciation/Gratitude", "Appreciation / gratitude", "Expresses thanks or appreciation."
)
_ALIGNMENT = _sub("Alignment", "Alignment", "Agrees with the other person or shows a shared view.")
_BUILD_TRUST = _sub(
    "build trust",
    "Build trust",
    "Builds confidence in the relationship, for example through commitment or honesty.",
)

_EPPC_CODES = (
    EppcCode(
        "InfoGive",
        "Information giving",
        "The writer shares medical or practical information about the patient's care.",
        _topics("Shares information about", _INFO_GIVE_IDS),
    ),
    EppcCode(
        "InfoSeek",
        "Information seeking",
        "The writer asks for medical or practical information about the patient's care.",
        _topics("Asks about", _INFO_SEEK_IDS),
    ),
    EppcCode(
        "InfoGiveSDOH",
        "Information giving: social determinants of health",
        "The writer shares information about social or economic circumstances that affect health.",
        _sdoh("Shares information about", tuple(_SDOH)),
    ),
    EppcCode(
        "InfoSeekSDOH",
        "Information seeking: social determinants of health",
        "The writer asks about social or economic circumstances that affect health.",
        _sdoh("Asks about", ("EconomicStability", "HealthCareAccessAndQuality")),
    ),
    EppcCode(
        "PartnershipProvider",
        "Provider partnership",
        "The clinician builds the working relationship with the patient and invites them "
        "into their care.",
        (
            _SALUTATION,
            _SIGNOFF,
            _CONNECTION,
            _APPRECIATION,
            _sub(
                "maintainCommunication",
                "Maintain communication",
                "Keeps the conversation open, for example inviting the patient to write or "
                "call again.",
            ),
            _BUILD_TRUST,
            _ALIGNMENT,
            _sub(
                "inviteCollaboration",
                "Invite collaboration",
                "Asks for the patient's input or invites them to take part in planning.",
            ),
            _sub(
                "checkingUnderstanding/clarification",
                "Checking understanding / clarification",
                "Checks that the patient has understood, or asks them to clarify something.",
            ),
        ),
    ),
    EppcCode(
        "PartnershipPatient",
        "Patient partnership",
        "The patient builds the working relationship and takes an active part in their care.",
        (
            _SALUTATION,
            _SIGNOFF,
            _APPRECIATION,
            _CONNECTION,
            _ALIGNMENT,
            _BUILD_TRUST,
            _sub(
                "statePreferences",
                "State preferences",
                "Says what they would prefer, such as a time, a treatment or a way of contact.",
            ),
            _sub(
                "expressOpinions",
                "Express opinions",
                "Gives their own view or belief about their health or care.",
            ),
            _sub(
                "activeParticipation/involvement",
                "Active participation and involvement",
                "Takes an active role, such as asking what else to do or reporting steps "
                "already taken.",
            ),
        ),
    ),
    EppcCode(
        "SharedDecisionProvider",
        "Shared decision-making (provider)",
        "The clinician involves the patient in reaching a decision about care.",
        (
            _sub("ShareOptions", "Share options", "Lays out the choices that are available."),
            _sub(
                "Approval/Reinforcement",
                "Approval / reinforcement",
                "Approves of or encourages a choice or action of the patient.",
            ),
            _sub(
                "EncourageQuestions",
                "Encourage questions",
                "Invites the patient to ask questions.",
            ),
            _sub(
                "SummarizeConfirmUnderstanding",
                "Summarize and confirm understanding",
                "Sums up what was discussed or decided and checks that both sides agree.",
            ),
            _sub(
                "MakeDecision",
                "Make decision",
                "States the decision reached or the course of action to take.",
            ),
        ),
    ),
    EppcCode(
        "SharedDecisionPatient",
        "Shared decision-making (patient)",
        "The patient takes part in reaching a decision about their care.",
        (
            _sub(
                "ApprovalofDecision/Reinforcement",
                "Approval of decision / reinforcement",
                "Agrees with or supports a decision or plan.",
            ),
            _sub(
                "ExploreOptions",
                "Explore options",
                "Asks about or weighs the possible choices.",
            ),
            _sub(
                "SeekingApproval",
                "Seeking approval",
                "Asks the clinician to approve or carry out an action, such as a refill or "
                "a change to the medication list.",
            ),
        ),
    ),
    EppcCode(
        "Socioemotional/Empathy",
        "Socioemotional / empathy",
        "Expressions of feeling, and responses to the other person's feelings.",
        (
            _sub(
                "ExpressConcern/unease",
                "Expressing concern / unease",
                "Voices worry or discomfort about a health matter or about care.",
            ),
            _sub("Sadness/fear", "Sadness / fear", "Expresses sadness, fear or distress."),
            _sub(
                "Reassurance",
                "Reassurance",
                "Comforts the other person and eases their worry.",
            ),
            _sub(
                "AcknowledgeSituation",
                "Acknowledge situation",
                "Recognizes what the other person is going through.",
            ),
            _sub(
                "PositiveRemarks",
                "Positive remarks",
                "Makes upbeat or encouraging comments.",
            ),
        ),
    ),
)

# FACTS.md names three legacy spellings (the part before the slash). The same pattern is
# applied to every other slash-named subcode and to the one slash-named code.
_EPPC_LEGACY_SPELLINGS = {
    "": {"Socioemotional": "Socioemotional/Empathy"},
    "PartnershipProvider": {
        "checkingUnderstanding": "checkingUnderstanding/clarification",
        "Appreciation": "Appreciation/Gratitude",
    },
    "PartnershipPatient": {
        "activeParticipation": "activeParticipation/involvement",
        "Appreciation": "Appreciation/Gratitude",
    },
    "SharedDecisionProvider": {"Approval": "Approval/Reinforcement"},
    "SharedDecisionPatient": {"ApprovalofDecision": "ApprovalofDecision/Reinforcement"},
    "Socioemotional/Empathy": {
        "ExpressConcern": "ExpressConcern/unease",
        "Sadness": "Sadness/fear",
    },
}

_CRITERIA = (
    Criterion(
        "C1",
        "Clinically inappropriate",
        "Given what the patient's record shows, the response is not a clinically sound answer.",
    ),
    Criterion(
        "C2",
        "Error that changes the interpretation",
        "The response contains a mistake whose correction would change the clinical "
        "reading of the case.",
    ),
    Criterion(
        "C3",
        "Does not address the instruction",
        "The response does not do what the instruction or question asked.",
    ),
)

_EMPATHY_CHOICES = (
    EmpathyChoice("first_more", "Response 1 is more empathetic"),
    EmpathyChoice("second_more", "Response 2 is more empathetic"),
    EmpathyChoice("equal", "Both are equally empathetic"),
)

_ERROR_CATEGORIES = (
    ErrorCategory(
        "follow_up_recommendation",
        "Added follow-up recommendation",
        "The edit recommends a follow-up step, such as a visit, test or call, that the "
        "clinician's original reply did not.",
    ),
    ErrorCategory(
        "clinical_assumption",
        "Clinical assumption or speculation",
        "The edit guesses or assumes something about the patient's condition that nothing "
        "in the original supports.",
    ),
    ErrorCategory(
        "clinical_inaccuracy",
        "Clinical inaccuracy",
        "The edit states something medically incorrect.",
    ),
    ErrorCategory(
        "unnecessary_advice",
        "Unnecessary advice",
        "The edit adds advice the patient did not need and the clinician did not give.",
    ),
    ErrorCategory(
        "unnecessary_doubt",
        "Unnecessary doubt or fear",
        "The edit adds wording that could make the patient worried or unsure without reason.",
    ),
    ErrorCategory(
        "false_assurance",
        "False assurance",
        "The edit reassures the patient more than the facts allow, for example promising "
        "a good outcome.",
    ),
)

DEFAULT_CATALOGS: Catalogs = Catalogs(
    version="portalreview-1",
    themes=_THEMES,
    notes_box=_NOTES_BOX,
    urgency_levels=_URGENCY_LEVELS,
    urgency_filter_labels=_URGENCY_FILTER_LABELS,
    eppc_codes=_EPPC_CODES,
    eppc_legacy_spellings=_EPPC_LEGACY_SPELLINGS,
    criteria=_CRITERIA,
    empathy_choices=_EMPATHY_CHOICES,
    error_categories=_ERROR_CATEGORIES,
)
"""The built-in catalogs every new study starts from."""
