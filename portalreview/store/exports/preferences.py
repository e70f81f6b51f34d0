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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import combinations
from typing import Any

from portalreview.metrics.editing import left_unchanged
from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.snapshot import Row, Snapshot

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
    snapshot: Snapshot, annotator: str | None = None
) -> tuple[list[dict], Counter]:
    """Every preference pair (of ``annotator`` alone, when given) and what was left out."""
    if annotator is not None and annotator not in snapshot.annotators:
        raise ExportFailed(f"there is no annotator named {annotator!r} in this study")
    records: list[dict] = []
    left_out: Counter = Counter()
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
        records += PAIRS[answer["kind"]](snapshot, answer, left_out)
    return records, left_out


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


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


def build(snapshot: Snapshot, annotator: str | None = None) -> dict[str, bytes]:
    """The export's files: pooled and per clinician (the PI), or one clinician's own, and a
    summary of what each source gave and what was left out."""
    records, left_out = preference_records(snapshot, annotator)
    files: dict[str, bytes] = {}
    people = sorted({r["annotator"] for r in records} | ({annotator} if annotator else set()))
    file_names = _file_names(people)
    for person in people:
        files[file_names[person]] = _jsonl([r for r in records if r["annotator"] == person])
    if annotator is None:
        files[POOLED] = _jsonl(records)
    summary = {
        "format": "TRL preference (conversational): prompt, chosen, rejected",
        "annotator": annotator or "all (pooled and per annotator)",
        "pairs": len(records),
        "pairs_by_source": {s: sum(r["source"] == s for r in records) for s in SOURCES},
        "pairs_by_annotator": {p: sum(r["annotator"] == p for r in records) for p in people},
        "file_by_annotator": file_names,
        "left_out": dict(sorted(left_out.items())),
    }
    files[SUMMARY] = (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return files
