"""Answers as plain lines a person reads, one decision per line (no widgets): the PI's
adjudication window and the copies window set them side by side, and ``portalreview
conflicts`` prints them, so that a decision is read by what it says (cases by their ids in the
file, drafts by their letters, codes by their names), not by the database's numbers."""

from __future__ import annotations

import json
from typing import Any

from portalreview.domain.catalogs import Catalogs
from portalreview.store.service import UnitView


def quote(text: str, limit: int = 90) -> str:
    """``text`` on one line, in quotation marks, cut to ``limit`` characters with "…"."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[: limit - 1] + '…'}”"


def summary_lines(
    kind: str, payload: dict[str, Any], unit: UnitView, catalogs: Catalogs
) -> list[str]:
    """An answer as plain lines a person reads: one decision per line, so that lines not
    shared by every answer show where annotators disagree."""
    make = _SUMMARIES.get(kind)
    lines = make(payload, unit, catalogs) if make else []
    if make is None:
        lines = [json.dumps(payload, ensure_ascii=False)]
    return lines or ["(nothing entered)"]


def _respond(payload, unit, catalogs) -> list[str]:
    lines = []
    if payload.get("mode") == "edit_draft":
        lines.append("Edited draft: " + quote(payload.get("final_text", ""), 400))
    else:
        parts = payload.get("parts", {})
        for theme in catalogs.themes:
            if parts.get(theme.id, "").strip():
                lines.append(f"{theme.name}: {quote(parts[theme.id], 300)}")
    if payload.get("notes", "").strip():
        lines.append(f"{catalogs.notes_box.name}: {quote(payload['notes'], 300)}")
    return lines


def _rank(payload, unit, catalogs) -> list[str]:
    labels = {r.id: r.label for r in unit.responses}
    entries = sorted(
        payload.get("entries", []),
        key=lambda e: (e.get("rank") is None, e.get("rank") or 0, labels.get(e["response_id"], "")),
    )
    lines = []
    for e in entries:
        label = labels.get(e["response_id"], f"response {e['response_id']}")
        rank = f"rank {e['rank']}" if e.get("rank") is not None else "not ranked"
        if e.get("correct") is True:
            verdict = "correct"
        elif e.get("correct") is False:
            reasons = ", ".join(e.get("criteria", []))
            verdict = "incorrect" + (f" ({reasons})" if reasons else "")
        else:
            verdict = "correctness not judged"
        lines.append(f"{label}: {rank}, {verdict}")
    return lines


def _match(payload, unit, catalogs) -> list[str]:
    if len(unit.responses) < 2:
        return []
    reference, draft = unit.responses[0], unit.responses[1]
    sentences = {s.id: s for s in (*reference.sentences, *draft.sentences)}
    themes = {t.id: t.name for t in catalogs.themes}
    lines = []
    for d in payload.get("decisions", []):
        sentence = sentences.get(d["sentence_id"])
        ref = quote(sentence.text, 60) if sentence else f"sentence {d['sentence_id']}"
        if not d["spans"]:
            lines.append(f"{ref} → NO MATCH")
        else:
            found = " … ".join(quote(draft.text[s:e], 80) for s, e in d["spans"])
            lines.append(f"{ref} → {found}")
    for t in payload.get("themes", []):
        sentence = sentences.get(t["sentence_id"])
        where = quote(sentence.text, 50) if sentence else f"sentence {t['sentence_id']}"
        lines.append(f"Theme of {where}: {themes.get(t['theme'], t['theme'])}")
    return lines


def _urgency(payload, unit, catalogs) -> list[str]:
    cases = {c.id: c for c in unit.cases}
    names = {level.level: level.name for level in catalogs.urgency_levels}

    def case_name(case_id) -> str:
        case = cases.get(int(case_id))
        return f"case {case.external_id}" if case else f"case {case_id}"

    lines = []
    if payload.get("more_urgent_case_id") is not None:
        lines.append(f"More urgent: {case_name(payload['more_urgent_case_id'])}")
    if payload.get("ask_second"):
        lines.append("Asks for a second annotator (hard pair)")
    for case_id, level in sorted(payload.get("levels", {}).items()):
        lines.append(f"Level of {case_name(case_id)}: {level} ({names.get(level, '?')})")
    return lines


def _eppc(payload, unit, catalogs) -> list[str]:
    text = unit.sentence.text if unit.sentence else ""
    codes = {c.id: c for c in catalogs.eppc_codes}
    lines = []
    for label in payload.get("labels", []):
        code = codes.get(label["code"])
        name = code.name if code else label["code"]
        sub = next(
            (s.name for s in (code.subcodes if code else ()) if s.id == label.get("subcode")),
            label.get("subcode") or "no subcode",
        )
        spans = " + ".join(quote(text[s:e], 70) for s, e in label.get("spans", []))
        lines.append(f"{name} → {sub}: {spans or 'no evidence'}")
    return lines or ["No EPPC code"]


def _empathy(payload, unit, catalogs) -> list[str]:
    if payload.get("equal"):
        return ["Both are equally empathetic"]
    chosen = payload.get("more_empathetic_response_id")
    if chosen is None:
        return ["Not decided"]
    for response in unit.responses:
        if response.id == chosen:
            return [f"More empathetic: {response.label} ({quote(response.text, 50)})"]
    return [f"More empathetic: response {chosen}"]


def _facts(payload, unit, catalogs) -> list[str]:
    categories = {c.id: c.name for c in catalogs.error_categories}
    lines = ["No medical facts on either side"] if payload.get("no_facts") else []
    for fact in payload.get("facts", []):
        original = fact["side"] == "original"
        if fact.get("entailed") is None:
            verdict = "not judged"
        elif fact["entailed"]:
            verdict = "kept" if original else "supported"
        else:
            verdict = "LOST" if original else "ADDED"
            if fact.get("error_category"):
                verdict += f" ({categories.get(fact['error_category'], fact['error_category'])})"
        side = "Original" if original else "Edited"
        lines.append(f"{side}: {quote(fact['text'], 80)} — {verdict}")
    return lines


_SUMMARIES = {
    "respond": _respond,
    "rank": _rank,
    "match": _match,
    "urgency": _urgency,
    "eppc": _eppc,
    "empathy": _empathy,
    "facts": _facts,
}
