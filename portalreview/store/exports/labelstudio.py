"""Label Studio: one project per annotation kind, as a task file and its labeling config.

Label Studio's import format (labelstud.io/guide/task_format, /guide/tasks): a JSON list of
tasks, each ``{"data": {...}, "annotations": [...], "meta": {...}}``; ``data`` must hold every
``$variable`` of the labeling config's object tags; an annotation is ``{"result": [regions],
"completed_by": {"email": ...}, "ground_truth", "was_cancelled", "lead_time"}``; a region is
``{"id", "from_name", "to_name", "type", "value"}`` whose ``value`` is the control tag's own
(labelstud.io/tags): ``labels`` ``{"start", "end", "text", "labels": [...]}``, ``textarea``
``{"text": [...]}``, ``ranker`` ``{"ranker": {bucket: [item ids]}}``, ``pairwise``
``{"selected": "left" | "right"}``, ``choices`` ``{"choices": [...]}``.

Kinds and their regions: respond -> TextArea per theme (+ notes, + the edited text of an
edit-draft unit); rank -> Ranker buckets ``rank_1``... over a List of the responses (ties share
a bucket); urgency -> Pairwise (left = the unit's case A) + Choices for the optional levels;
eppc -> Labels regions (evidence spans) + Choices (the codes); match -> Labels regions on the
draft, labelled with the reference sentence ``S1``, ``S2``... they match.
Only submitted answers are written (Label Studio imports no drafts without a feature flag).
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

from portalreview.store.csv_cells import safe_row, safe_writer
from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.prodigy import eppc_label
from portalreview.store.exports.snapshot import Row, Snapshot

DEFAULT_EMAIL_DOMAIN = "portalreview.invalid"
KINDS = ("respond", "rank", "urgency", "eppc", "match")


class _Build:
    """Label Studio files of one snapshot: tasks per kind, and annotator e-mail addresses."""

    def __init__(self, snapshot: Snapshot, email_domain: str) -> None:
        self.snap = snapshot
        self.emails = annotator_emails(
            sorted({a["annotator"] for a in snapshot.answers}), email_domain
        )

    def annotation(self, number: int, answer: Row, result: list[dict]) -> dict:
        return {
            "id": number,
            "completed_by": {"email": self.emails[answer["annotator"]]},
            "result": result,
            "ground_truth": answer["gold"],
            "was_cancelled": False,
            "lead_time": answer["active_seconds"],
            "created_at": answer["created_at"],
            "updated_at": answer["updated_at"],
        }


def build(snapshot: Snapshot, email_domain: str = DEFAULT_EMAIL_DOMAIN) -> dict[str, bytes]:
    """``<kind>.json`` (tasks) and ``<kind>.xml`` (labeling config) per kind with units, and
    ``annotators.csv`` (name -> the e-mail written as ``completed_by``)."""
    b = _Build(snapshot, email_domain)
    answers: dict[tuple[str, int], list[Row]] = {}
    for a in snapshot.answers:
        if a["status"] == "submitted":
            answers.setdefault((a["unit"]["set"], a["unit"]["position"]), []).append(a)
    files: dict[str, bytes] = {}
    number = 0
    for kind in KINDS:
        units = [(k, u) for k, u in snapshot.units.items() if u["kind"] == kind]
        if not units:
            continue
        data_of, result_of, config = _KINDS[kind]
        tasks = []
        for key, unit in units:
            annotations = []
            for answer in answers.get(key, []):
                number += 1
                regions = result_of(b, unit, answer["answer"], f"a{number}")
                annotations.append(b.annotation(number, answer, regions))
            tasks.append(
                {
                    "data": data_of(b, unit),
                    "annotations": annotations,
                    "meta": {"unit_set": key[0], "unit": key[1], "case_id": unit["case_id"]},
                }
            )
        files[f"{kind}.json"] = _json(tasks)
        files[f"{kind}.xml"] = _xml(config(b, [u for _, u in units]))
    if not files:
        raise ExportFailed(
            f"there are no units of the kinds Label Studio takes ({', '.join(KINDS)})"
        )
    files["annotators.csv"] = _annotators_csv(b.emails)
    return files


def annotator_emails(names: list[str], domain: str) -> dict[str, str]:
    """name -> ``<name as lowercase letters, digits, . _ ->@domain``, made unique."""
    emails: dict[str, str] = {}
    for name in names:
        local = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip(".-") or "annotator"
        email, n = f"{local}@{domain}", 1
        while email in emails.values():
            n += 1
            email = f"{local}-{n}@{domain}"
        emails[name] = email
    return emails


# --- one function each for data, result regions and config, per kind -------------------------


def _region(rid: str, from_name: str, to_name: str, kind: str, value: dict) -> dict:
    return {"id": rid, "from_name": from_name, "to_name": to_name, "type": kind, "value": value}


def _textarea(rid: str, name: str, to: str, text: str) -> dict:
    return _region(rid, name, to, "textarea", {"text": [text]})


def _respond_data(b: _Build, unit: Row) -> dict:
    draft = unit.get("response_id")
    return {
        "message": b.snap.cases[unit["case_id"]]["message"],
        "chart": b.snap.chart_text(unit["case_id"]),
        "draft": b.snap.responses[draft]["text"] if draft else "",
    }


def _respond_result(b: _Build, unit: Row, payload: dict, rid: str) -> list[dict]:
    if payload.get("mode") == "edit_draft":
        out = [_textarea(f"{rid}_edit", "edited_text", "draft", payload["final_text"])]
    else:
        parts = payload.get("parts", {})
        out = [
            _textarea(f"{rid}_{i}", f"theme_{t.id}", "message", parts[t.id])
            for i, t in enumerate(b.snap.catalogs.themes)
            if parts.get(t.id, "").strip()
        ]
    if payload.get("notes", "").strip():
        out.append(_textarea(f"{rid}_notes", "notes", "message", payload["notes"]))
    return out


def _respond_config(b: _Build, units: list[Row]) -> ET.Element:
    view = ET.Element("View")
    _text(view, "Patient message", "message")
    _text(view, "Chart", "chart")
    _text(view, "Draft to edit (edit-draft units)", "draft")
    for t in b.snap.catalogs.themes:
        ET.SubElement(view, "Header", value=t.name)
        _area(view, f"theme_{t.id}", "message", t.question)
    box = b.snap.catalogs.notes_box
    ET.SubElement(view, "Header", value=box.name)
    _area(view, "notes", "message", box.question)
    ET.SubElement(view, "Header", value="Edited draft")
    _area(view, "edited_text", "draft", "The draft as you would send it")
    return view


def _rank_data(b: _Build, unit: Row) -> dict:
    items = []
    for i, rid in enumerate(unit["members"], start=1):
        text = b.snap.responses[rid]["text"]
        # Ranker's List shows title and body; Label Studio's task check wants a "text" key.
        items.append({"id": rid, "title": f"Response {i}", "body": text, "text": text})
    return {"message": b.snap.cases[unit["case_id"]]["message"], "responses": items}


def _rank_result(b: _Build, unit: Row, payload: dict, rid: str) -> list[dict]:
    buckets: dict[str, list[str]] = {}
    for entry in sorted(payload.get("entries", []), key=lambda e: e["rank"]):
        buckets.setdefault(f"rank_{entry['rank']}", []).append(entry["response_id"])
    return [_region(rid, "rank", "responses", "ranker", {"ranker": buckets})]


def _rank_config(b: _Build, units: list[Row]) -> ET.Element:
    view = ET.Element("View")
    _text(view, "Patient message", "message")
    ET.SubElement(view, "List", name="responses", value="$responses", title="Responses")
    ranker = ET.SubElement(view, "Ranker", name="rank", toName="responses")
    most = max(len(u["members"]) for u in units)
    for r in range(1, most + 1):
        title = f"Rank {r}" + (" (best)" if r == 1 else "")
        ET.SubElement(ranker, "Bucket", name=f"rank_{r}", title=title)
    return view


def _urgency_data(b: _Build, unit: Row) -> dict:
    return {
        "case_a": b.snap.cases[unit["case_id"]]["message"],
        "case_b": b.snap.cases[unit["case_b_id"]]["message"],
    }


def _urgency_result(b: _Build, unit: Row, payload: dict, rid: str) -> list[dict]:
    side = {unit["case_id"]: "left", unit["case_b_id"]: "right"}
    out = []
    if payload.get("more_urgent_case_id"):
        selected = {"selected": side[payload["more_urgent_case_id"]]}
        out.append(_region(f"{rid}_pw", "more_urgent", "more_urgent", "pairwise", selected))
    for case_id, level in sorted(payload.get("levels", {}).items()):
        letter = "a" if side[case_id] == "left" else "b"
        value = {"choices": [str(level)]}
        name, to = f"level_{letter}", f"case_{letter}"
        out.append(_region(f"{rid}_{letter}", name, to, "choices", value))
    return out


def _urgency_config(b: _Build, units: list[Row]) -> ET.Element:
    view = ET.Element("View")
    ET.SubElement(view, "Header", value="Which message needs care first?")
    ET.SubElement(view, "Pairwise", name="more_urgent", toName="case_a,case_b")
    for letter in ("a", "b"):
        _text(view, f"Message {letter.upper()}", f"case_{letter}")
        choices = ET.SubElement(
            view, "Choices", name=f"level_{letter}", toName=f"case_{letter}", choice="single"
        )
        for level in b.snap.catalogs.urgency_levels:
            ET.SubElement(choices, "Choice", value=str(level.level), hint=level.name)
    return view


def _eppc_data(b: _Build, unit: Row) -> dict:
    ref = unit["sentence_id"]
    sentences = b.snap.sentences_of(ref["of"], ref["owner"])
    at = ref["position"]
    return {
        "previous": sentences[at - 1].text if at > 0 else "",
        "sentence": sentences[at].text,
        "next": sentences[at + 1].text if at + 1 < len(sentences) else "",
    }


def _eppc_result(b: _Build, unit: Row, payload: dict, rid: str) -> list[dict]:
    text = b.snap.sentence(unit["sentence_id"]).text
    labels = payload.get("labels", [])
    chosen = [eppc_label(x["code"], x.get("subcode")) for x in labels]
    out = []
    if chosen:
        out.append(_region(f"{rid}_codes", "codes", "sentence", "choices", {"choices": chosen}))
    pairs = zip(labels, chosen, strict=True)
    spans = sorted((s, e, lab) for x, lab in pairs for s, e in x.get("spans", []))
    for i, (start, end, label) in enumerate(spans):
        value = {"start": start, "end": end, "text": text[start:end], "labels": [label]}
        out.append(_region(f"{rid}_{i}", "evidence", "sentence", "labels", value))
    return out


def _eppc_config(b: _Build, units: list[Row]) -> ET.Element:
    view = ET.Element("View")
    _text(view, "Previous sentence", "previous")
    _text(view, "Sentence", "sentence")
    _text(view, "Next sentence", "next")
    names = []
    for code in b.snap.catalogs.eppc_codes:
        names.append(code.id)
        names.extend(eppc_label(code.id, s.id) for s in code.subcodes)
    labels = ET.SubElement(view, "Labels", name="evidence", toName="sentence", choice="multiple")
    codes = ET.SubElement(view, "Choices", name="codes", toName="sentence", choice="multiple")
    for name in names:
        ET.SubElement(labels, "Label", value=name)
        ET.SubElement(codes, "Choice", value=name)
    return view


def _match_data(b: _Build, unit: Row) -> dict:
    sentences = b.snap.sentences_of("response", unit["response_id"])
    numbered = "\n".join(f"S{i}. {s.text}" for i, s in enumerate(sentences, start=1))
    return {"reference": numbered, "draft": b.snap.responses[unit["response_b_id"]]["text"]}


def _match_result(b: _Build, unit: Row, payload: dict, rid: str) -> list[dict]:
    text = b.snap.responses[unit["response_b_id"]]["text"]
    out = []
    for decision in payload.get("decisions", []):
        label = f"S{decision['sentence_id']['position'] + 1}"
        for start, end in sorted(decision.get("spans", [])):
            value = {"start": start, "end": end, "text": text[start:end], "labels": [label]}
            out.append(_region(f"{rid}_{len(out)}", "match", "draft", "labels", value))
    return out


def _match_config(b: _Build, units: list[Row]) -> ET.Element:
    view = ET.Element("View")
    _text(view, "Reference response (numbered sentences)", "reference")
    _text(view, "Draft: mark the text that matches each reference sentence", "draft")
    labels = ET.SubElement(view, "Labels", name="match", toName="draft")
    most = max(len(b.snap.sentences_of("response", u["response_id"])) for u in units)
    for i in range(1, most + 1):
        ET.SubElement(labels, "Label", value=f"S{i}")
    return view


_Fn = Callable[..., object]
_KINDS: dict[str, tuple[_Fn, _Fn, _Fn]] = {
    "respond": (_respond_data, _respond_result, _respond_config),
    "rank": (_rank_data, _rank_result, _rank_config),
    "urgency": (_urgency_data, _urgency_result, _urgency_config),
    "eppc": (_eppc_data, _eppc_result, _eppc_config),
    "match": (_match_data, _match_result, _match_config),
}


# --- writing ----------------------------------------------------------------------------------


def _text(view: ET.Element, heading: str, name: str) -> None:
    ET.SubElement(view, "Header", value=heading)
    ET.SubElement(view, "Text", name=name, value=f"${name}")


def _area(view: ET.Element, name: str, to: str, placeholder: str) -> None:
    ET.SubElement(
        view,
        "TextArea",
        name=name,
        toName=to,
        placeholder=placeholder,
        rows="3",
        maxSubmissions="1",
        editable="true",
    )


def _xml(view: ET.Element) -> bytes:
    ET.indent(view)
    return ET.tostring(view, encoding="unicode").encode("utf-8") + b"\n"


def _json(tasks: list[dict]) -> bytes:
    return (json.dumps(tasks, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _annotators_csv(emails: dict[str, str]) -> bytes:
    """Name -> e-mail, for whoever creates the Label Studio users. A name is any text (an EPPC
    import creates annotators from its column): escaped so that a spreadsheet runs none as a
    formula, as every CSV PortalReview writes (store/csv_cells.py; its reader undoes it)."""
    buffer = io.StringIO()
    writer = safe_writer(buffer)
    writer.writerow(["annotator", "email"])
    writer.writerows(safe_row(pair) for pair in sorted(emails.items()))
    return buffer.getvalue().encode("utf-8")
