"""Prodigy JSONL tasks for the span kinds (EPPC evidence spans, content-match spans).

Prodigy's task format (prodigy.ai/docs/api-interfaces, ``ner_manual`` / ``spans_manual``):
``text``; ``tokens`` as ``{"text", "start", "end", "id", "ws"}``; ``spans`` as
``{"start", "end", "token_start", "token_end", "label"}`` with character offsets and the
indices of the first and last token (``token_end`` inclusive); an annotated task has
``answer`` ``accept``, ``reject`` or ``ignore``. What the answer means here, per kind:

* eppc (one task per coder x sentence): ``accept`` = the coder's submitted coding, its evidence
  spans labelled ``Code: Subcode`` and its codes in ``accept`` (the choice interface's
  selected ``options``); no spans and an empty ``accept`` = no EPPC code in the sentence.
* match (one task per annotator x reference sentence, the draft as ``text``): ``accept`` = the
  sentence has a match, its span(s) in the draft labelled ``MATCH``; ``reject`` = NO MATCH.

A draft (unsubmitted) answer is written with ``answer`` ``ignore``. Offsets count Unicode code
points, as Python and Prodigy (a Python program) do.
"""

from __future__ import annotations

import json

from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.snapshot import Row, Snapshot
from portalreview.store.exports.tokens import Token, token_range, tokenize

MATCH_LABEL = "MATCH"
KINDS = ("eppc", "match")


def build(snapshot: Snapshot) -> dict[str, bytes]:
    """``{"eppc.jsonl": ..., "match.jsonl": ...}`` for the kinds that have answers."""
    lines: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for answer in snapshot.answers:
        if answer["kind"] == "eppc":
            lines["eppc"].append(eppc_task(snapshot, answer))
        elif answer["kind"] == "match":
            lines["match"].extend(match_tasks(snapshot, answer))
    files = {
        f"{kind}.jsonl": "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks).encode()
        for kind, tasks in lines.items()
        if tasks
    }
    if not files:
        raise ExportFailed(
            "there are no eppc or match answers to export as Prodigy tasks "
            "(the other kinds have no spans; export them as labelstudio or jsonl)"
        )
    return files


def eppc_label(code: str, subcode: str | None) -> str:
    """The label of a code-subcode pair (the code alone while it has no subcode)."""
    return f"{code}: {subcode}" if subcode else code


def eppc_task(snapshot: Snapshot, answer: Row) -> dict:
    """One coder's EPPC coding of one sentence."""
    unit = snapshot.unit_of(answer)
    ref = unit["sentence_id"]
    sentence = snapshot.sentence(ref)
    labels = answer["answer"].get("labels", [])
    chosen = [eppc_label(x["code"], x.get("subcode")) for x in labels]
    char_spans = sorted(
        (start, end, eppc_label(x["code"], x.get("subcode")))
        for x in labels
        for start, end in x.get("spans", [])
    )
    neighbours = snapshot.sentences_of(ref["of"], ref["owner"])
    at = ref["position"]
    return {
        "text": sentence.text,
        **_tokens_and_spans(sentence.text, char_spans),
        "options": [{"id": o, "text": o} for o in _eppc_options(snapshot)],
        "accept": chosen,
        "answer": _answer(answer, "accept"),
        "meta": {
            "of": ref["of"],
            "owner": ref["owner"],
            "sentence": at,
            "previous": neighbours[at - 1].text if at > 0 else "",
            "next": neighbours[at + 1].text if at + 1 < len(neighbours) else "",
            **_meta(answer),
        },
        **_who(answer, "eppc"),
    }


def match_tasks(snapshot: Snapshot, answer: Row) -> list[dict]:
    """One task per decided reference sentence: the draft with the span(s) matching it."""
    unit = snapshot.unit_of(answer)
    reference, draft = unit["response_id"], unit["response_b_id"]
    text = snapshot.responses[draft]["text"]
    themes = {
        (t["sentence_id"]["of"], t["sentence_id"]["owner"], t["sentence_id"]["position"]): t[
            "theme"
        ]
        for t in answer["answer"].get("themes", [])
    }
    tasks = []
    for decision in answer["answer"].get("decisions", []):
        ref = decision["sentence_id"]
        spans = [(s, e, MATCH_LABEL) for s, e in sorted(decision.get("spans", []))]
        key = (ref["of"], ref["owner"], ref["position"])
        tasks.append(
            {
                "text": text,
                **_tokens_and_spans(text, spans),
                "answer": _answer(answer, "accept" if spans else "reject"),
                "meta": {
                    "reference": reference,
                    "draft": draft,
                    "reference_sentence": ref["position"],
                    "reference_text": snapshot.sentence(ref).text,
                    "reference_theme": themes.get(key, ""),
                    **_meta(answer),
                },
                **_who(answer, "match"),
            }
        )
    return tasks


def _tokens_and_spans(text: str, spans: list[tuple[int, int, str]]) -> dict:
    tokens = tokenize(text, [(s, e) for s, e, _ in spans])
    out_spans = []
    for start, end, label in spans:
        first, last = token_range(tokens, start, end)
        out_spans.append(
            {"start": start, "end": end, "token_start": first, "token_end": last, "label": label}
        )
    return {"tokens": [_token(text, i, t) for i, t in enumerate(tokens)], "spans": out_spans}


def _token(text: str, number: int, token: Token) -> dict:
    return {
        "text": text[token.start : token.end],
        "start": token.start,
        "end": token.end,
        "id": number,
        "ws": token.ws,
    }


def _eppc_options(snapshot: Snapshot) -> list[str]:
    options = []
    for code in snapshot.catalogs.eppc_codes:
        options.append(code.id)
        options.extend(eppc_label(code.id, s.id) for s in code.subcodes)
    return options


def _answer(answer: Row, submitted: str) -> str:
    return submitted if answer["status"] == "submitted" else "ignore"


def _meta(answer: Row) -> dict:
    return {
        "unit_set": answer["unit"]["set"],
        "unit": answer["unit"]["position"],
        "annotator": answer["annotator"],
        "gold": answer["gold"],
        "status": answer["status"],
    }


def _who(answer: Row, kind: str) -> dict:
    """Prodigy's annotator fields: ``_annotator_id`` is ``<dataset>-<session name>``."""
    name = f"portalreview_{kind}-{answer['annotator']}"
    return {"_annotator_id": name, "_session_id": name}
