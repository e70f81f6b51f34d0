"""Clinicians' preferences as training data for preference tuning (docs/formats.md,
"Preferences"): one JSON line per pair of replies to one patient message, in the
conversational preference layout of TRL's DPO trainer::

    {"prompt": [{"role": "user", "content": "<the case's chart and message>"}],
     "chosen": [{"role": "assistant", "content": "<the preferred reply>"}],
     "rejected": [{"role": "assistant", "content": "<the other reply>"}],
     "source": "rank", "case_id": "demo-001", "annotator": "nurse_ava"}

Where the pairs come from:

* **rank** (seed 001, MedAlign's ranking of drafts): every two drafts of one ranking with
  different ranks make one pair, the better-ranked chosen; drafts sharing a rank (a tie) make
  none and are counted.
* **empathy** (seed 004): the reply judged more empathetic is chosen over the other; "equally
  empathetic" makes none and is counted.
* **edit** (edit-a-draft, seed 000's clinicians editing model drafts): the clinician's final
  text is chosen over the draft as it was; a draft left unchanged makes none and is counted
  (``metrics.editing.left_unchanged``: line breaks written another way are no change).

Only submitted answers count (drafts in progress are counted and left out), and never those of
a model pseudo annotator. A clinician's own export (``annotator``) holds their answers alone:
what the study's blinding lets them see.

Each pair is written as it is made, the answers read as they are taken (:func:`write`): held at
once, the 146,281 pairs of a 10,000-case study and their files' bytes took over a gigabyte.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any, TextIO

from portalreview.metrics.editing import left_unchanged
from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.snapshot import Row, Snapshot
from portalreview.store.output_files import (
    move_into_place,
    output_error,
    staging_folder,
    sync_file,
    write_staged,
)
from portalreview.store.service import person_name

SOURCES = ("rank", "empathy", "edit")
INSTRUCTION = (
    "A patient wrote to their care team through the patient portal. Write the care team's "
    "reply to the patient."
)


def prompt_text(snapshot: Snapshot, case_id: str) -> str:
    """The prompt of every pair about one case: the task, the chart, the message."""
    case = snapshot.cases[case_id]
    return (
        f"{INSTRUCTION}\n\nThe patient's chart:\n{snapshot.chart_text(case_id).strip()}\n\n"
        f"The patient's message:\n{case['message'].strip()}"
    )


def _record(snapshot: Snapshot, case_id: str, chosen: str, rejected: str, source: str,
            annotator: str) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": prompt_text(snapshot, case_id)}],
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
        "source": source,
        "case_id": case_id,
        "annotator": annotator,
    }


def _text(snapshot: Snapshot, response_id: str) -> str:
    return snapshot.responses[response_id]["text"]


def _rank_pairs(snapshot: Snapshot, answer: Row, left_out: Counter) -> list[dict]:
    case_id = snapshot.unit_of(answer)["case_id"]
    entries = answer["answer"]["entries"]
    pairs = []
    for a, b in combinations(entries, 2):
        if a["rank"] == b["rank"]:
            left_out["rank: a tie"] += 1
            continue
        better, worse = (a, b) if a["rank"] < b["rank"] else (b, a)
        pairs.append(_record(snapshot, case_id, _text(snapshot, better["response_id"]),
                             _text(snapshot, worse["response_id"]), "rank", answer["annotator"]))
    return pairs


def _empathy_pairs(snapshot: Snapshot, answer: Row, left_out: Counter) -> list[dict]:
    unit = snapshot.unit_of(answer)
    chosen = answer["answer"].get("more_empathetic_response_id")
    if chosen is None:
        left_out["empathy: equally empathetic"] += 1
        return []
    other = unit["response_b_id"] if chosen == unit["response_id"] else unit["response_id"]
    return [_record(snapshot, unit["case_id"], _text(snapshot, chosen), _text(snapshot, other),
                    "empathy", answer["annotator"])]


def _edit_pairs(snapshot: Snapshot, answer: Row, left_out: Counter) -> list[dict]:
    payload = answer["answer"]
    if payload.get("mode") != "edit_draft":
        return []  # a theme-guided response has no draft to prefer it over
    draft = _text(snapshot, payload["base_response_id"])
    final = payload["final_text"]
    if left_unchanged(draft, final):  # line breaks as a text box gives them back are no edit
        left_out["edit: the draft was left unchanged"] += 1
        return []
    case_id = snapshot.unit_of(answer)["case_id"]
    return [_record(snapshot, case_id, final, draft, "edit", answer["annotator"])]


PAIRS = {"rank": _rank_pairs, "empathy": _empathy_pairs, "respond": _edit_pairs}


def preference_records(
    snapshot: Snapshot, annotator: str | None, left_out: Counter
) -> Iterator[dict]:
    """Every preference pair (of ``annotator`` alone, when given), in the answers' order, as
    they are read; what was left out is counted in ``left_out``."""
    for answer in snapshot.answers:
        if answer["kind"] not in PAIRS:
            continue
        if annotator is not None and answer["annotator"] != annotator:
            continue
        if snapshot.annotators[answer["annotator"]]["is_model"]:
            left_out["answers of a model pseudo annotator"] += 1
            continue
        if answer.get("gold"):  # the PI's decision copies a clinician's answer: counted once
            left_out["gold (adjudicated) answers"] += 1
            continue
        if answer["status"] != "submitted":
            left_out["answers not submitted yet"] += 1
            continue
        yield from PAIRS[answer["kind"]](snapshot, answer, left_out)


POOLED, SUMMARY = "preferences-pooled.jsonl", "preferences-summary.json"


def _file_names(people: list[str]) -> dict[str, str]:
    """Each person's file, ``preferences-NAME.jsonl``: letters and digits of any script kept,
    other characters as ``_``. Names that would give one file ("Dr Müller" and "Dr Möller"
    once, when only ASCII was kept; "Ava" and "ava" on Windows' and macOS' case-blind file
    systems) get ``-2``, ``-3``, so that no one's file replaces another's."""
    taken = {POOLED.casefold(), SUMMARY.casefold()}
    names = {}
    for person in people:
        stem = "preferences-" + re.sub(r"[^\w.-]", "_", person)
        name, n = f"{stem}.jsonl", 1
        while name.casefold() in taken:
            n += 1
            name = f"{stem}-{n}.jsonl"
        taken.add(name.casefold())
        names[person] = name
    return names


def write(snapshot: Snapshot, out: Path, annotator: str | None = None) -> list[Path]:
    """Write the export's files into the folder ``out``: pooled and per clinician (the PI),
    or one clinician's own, and a summary of what each source gave and what was left out;
    returns their paths. Each pair is written as it is made into a hidden staging folder; the
    files then replace an earlier export's together (as ``write_files_together`` does)."""
    if annotator is not None:
        annotator = stored_annotator_name(snapshot, annotator)
    left_out: Counter = Counter()
    with staging_folder(out) as staging:
        pairs = _PairFiles(staging, pooled=annotator is None)
        try:
            for record in preference_records(snapshot, annotator, left_out):
                pairs.add(record)
        except OSError as exc:  # a full disk: named as the folder asked for, never the staging
            if exc.errno is None:
                raise
            raise output_error(exc, out) from exc
        finally:
            pairs.close()
        people = sorted({*pairs.people, *([annotator] if annotator else [])})
        file_names = _file_names(people)
        names = [*pairs.named(file_names, people), SUMMARY]
        summary = _summary(pairs, annotator, people, file_names, left_out)
        write_staged(staging / SUMMARY, out / SUMMARY, lambda path: path.write_bytes(summary))
        move_into_place(staging, out, names)
    return [out / name for name in names]


def stored_annotator_name(snapshot: Snapshot, name: str) -> str:
    """The study's name for the annotator called ``name``, however its letters or outer
    spaces are typed (``service.person_name``, as ``copy --for`` finds her); ExportFailed when
    there is none."""
    if name in snapshot.annotators:
        return name
    wanted = person_name(name)
    found = next((stored for stored in snapshot.annotators if person_name(stored) == wanted), None)
    if found is None:
        raise ExportFailed(f"there is no annotator named {name!r} in this study")
    return found


class _PairFiles:
    """The pairs written as they come: to the pooled file, and to each person's, which is
    named once everyone is known (names that would share a file get -2, -3: ``_file_names``)
    and until then has a number."""

    def __init__(self, staging: Path, pooled: bool) -> None:
        self.staging = staging
        self.people: dict[str, TextIO] = {}  # person -> their file, in the order first seen
        self.pooled = self._open(POOLED) if pooled else None
        self.by_source: Counter = Counter()
        self.by_person: Counter = Counter()

    def add(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        person = record["annotator"]
        if person not in self.people:
            self.people[person] = self._open(self._numbered(len(self.people)))
        self.people[person].write(line)
        if self.pooled is not None:
            self.pooled.write(line)
        self.by_source[record["source"]] += 1
        self.by_person[person] += 1

    def close(self) -> None:
        for stream in (*self.people.values(), self.pooled):
            if stream is not None:
                stream.close()

    def named(self, file_names: dict[str, str], people: list[str]) -> list[str]:
        """Each person's file renamed to its name (an empty one for a person with no pair),
        written to disk with the pooled file; the files' names, in the export's order."""
        numbers = {person: n for n, person in enumerate(self.people)}
        for person in people:
            path = self.staging / file_names[person]
            if person in numbers:
                os.replace(self.staging / self._numbered(numbers[person]), path)
            else:
                path.write_bytes(b"")
            sync_file(path)
        names = [file_names[person] for person in people]
        if self.pooled is not None:
            sync_file(self.staging / POOLED)
            names.append(POOLED)
        return names

    def _open(self, name: str) -> TextIO:
        return (self.staging / name).open("w", encoding="utf-8", newline="\n")

    @staticmethod
    def _numbered(n: int) -> str:
        return f"person-{n}.part"  # no file name of the export ends in .part


def _summary(pairs: _PairFiles, annotator: str | None, people: list[str],
             file_names: dict[str, str], left_out: Counter) -> bytes:  # fmt: skip
    summary = {
        "format": "TRL preference (conversational): prompt, chosen, rejected",
        "annotator": annotator or "all (pooled and per annotator)",
        "pairs": sum(pairs.by_source.values()),
        "pairs_by_source": {s: pairs.by_source[s] for s in SOURCES},
        "pairs_by_annotator": {p: pairs.by_person[p] for p in people},
        "file_by_annotator": file_names,
        "left_out": dict(sorted(left_out.items())),
    }
    return (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
