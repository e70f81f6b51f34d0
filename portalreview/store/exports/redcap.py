"""REDCap: the theme-guided responses (respond kind) as a data import CSV, with the data
dictionary CSV that creates the matching instrument (seed 000, Appendix G: one text box per
theme plus the assumptions/notes box).

REDCap's rules followed here (Vanderbilt's "Creating a Data Dictionary in REDCap"; REDCap's
data import tool): the dictionary has the 18 standard columns in their order; the record id is
the first field of the first form; variable and form names use only lowercase letters, digits
and underscores, start with a letter, and are kept to 26 characters at most; the records file's
header row names the fields, record id first, plus ``<form>_complete`` (0 Incomplete,
1 Unverified, 2 Complete); UTF-8 without a byte-order mark (a BOM would glue itself to the
record id's column name).

One record per case x clinician: ``record_id`` (1, 2, ...), ``case_id``, ``annotator``,
``gold`` (yes/no: 1 = the PI's adjudicated answer), one ``notes`` field per theme of the
catalog, ``notes`` (the notes box), and the status as ``theme_guided_response_complete``
(2 = submitted, 0 = draft). The import side (``portalreview import``) reads these two files
back with its proposed mapping, a gold record as a gold answer.
"""

from __future__ import annotations

import csv
import io
import re

from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.snapshot import Row, Snapshot
from portalreview.store.importers.redcap import DICTIONARY_COLUMNS

FORM = "theme_guided_response"
NAME_LIMIT = 26
RECORDS_FILE = "redcap_records.csv"
DICTIONARY_FILE = "redcap_dictionary.csv"
# Names REDCap gives itself in exports and imports; a field must not take them.
RESERVED = {
    "record",
    "event_id",
    "redcap_event_name",
    "redcap_repeat_instrument",
    "redcap_repeat_instance",
    "redcap_data_access_group",
    "redcap_survey_identifier",
}
FIXED = ("record_id", "case_id", "annotator", "gold")


def field_name(text: str, taken: set[str]) -> str:
    """A REDCap variable name for ``text``: lowercase letters, digits and underscores,
    starting with a letter, at most 26 characters, not taken and not reserved."""
    base = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "field"
    if not base[0].isalpha():
        base = f"f_{base}"
    base = base[:NAME_LIMIT].rstrip("_")
    name, n = base, 1
    while name in taken or name in RESERVED or name.endswith("_complete"):
        n += 1
        suffix = f"_{n}"
        name = base[: NAME_LIMIT - len(suffix)].rstrip("_") + suffix
    taken.add(name)
    return name


def build(snapshot: Snapshot) -> dict[str, bytes]:
    """``redcap_records.csv`` and ``redcap_dictionary.csv``."""
    answers = [
        a
        for a in snapshot.answers
        if a["kind"] == "respond" and a["answer"].get("mode", "theme_guided") == "theme_guided"
    ]
    if not answers:
        raise ExportFailed("there are no theme-guided respond answers to export for REDCap")
    _refuse_duplicates(snapshot, answers)
    taken = set(FIXED)
    themes = [(t, field_name(t.id, taken)) for t in snapshot.catalogs.themes]
    notes = field_name("notes", taken)
    dictionary = _dictionary(snapshot, themes, notes)
    columns = [*FIXED, *(name for _, name in themes), notes, f"{FORM}_complete"]
    records = []
    for number, a in enumerate(answers, start=1):
        parts = a["answer"].get("parts", {})
        records.append(
            [
                str(number),
                snapshot.unit_of(a)["case_id"],
                a["annotator"],
                "1" if a["gold"] else "0",  # without it the PI's gold came back as her answer
                *(parts.get(t.id, "") for t, _ in themes),
                a["answer"].get("notes", ""),
                "2" if a["status"] == "submitted" else "0",
            ]
        )
    return {RECORDS_FILE: _csv([columns, *records]), DICTIONARY_FILE: _csv(dictionary)}


def _refuse_duplicates(snapshot: Snapshot, answers: list[Row]) -> None:
    """A record is a case x clinician (the PI's gold answer one of its own): two answers of one
    clinician to one case (in two unit sets) cannot both be records of the same instrument."""
    seen: dict[tuple[str, str, bool], str] = {}
    for a in answers:
        key = (snapshot.unit_of(a)["case_id"], a["annotator"], a["gold"])
        if key in seen:
            gold = " (gold)" if key[2] else ""
            raise ExportFailed(
                f"{key[1]} answered case {key[0]}{gold} in unit sets {seen[key]!r} and "
                f"{a['unit']['set']!r}; a REDCap record is one case x clinician: export one "
                "set at a time (--unit-set)"
            )
        seen[key] = a["unit"]["set"]


def _dictionary(snapshot: Snapshot, themes: list, notes: str) -> list[list[str]]:
    def row(
        name: str, kind: str, label: str, note: str = "", header: str = "", tags: str = ""
    ) -> list[str]:
        values = {
            "Variable / Field Name": name,
            "Form Name": FORM,
            "Section Header": header,
            "Field Type": kind,
            "Field Label": label,
            "Field Note": note,
            "Field Annotation": tags,
        }
        return [values.get(c, "") for c in DICTIONARY_COLUMNS]

    rows = [
        list(DICTIONARY_COLUMNS),
        row("record_id", "text", "Record ID"),
        row("case_id", "text", "Case ID", "the PortalReview case id"),
        row("annotator", "text", "Annotator", "the clinician's PortalReview name"),
        row(
            "gold",
            "yesno",
            "Gold (adjudicated) answer",
            "Yes: the PI's adjudicated answer, not a clinician's",
            tags="@HIDDEN-SURVEY",  # the PI's mark: not a question for a clinician's survey
        ),
    ]
    for i, (theme, name) in enumerate(themes):
        header = "Response, one box per theme" if i == 0 else ""
        rows.append(row(name, "notes", theme.name, theme.question, header))
    box = snapshot.catalogs.notes_box
    rows.append(row(notes, "notes", box.name, box.question))
    return rows


def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")
