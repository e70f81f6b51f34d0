"""Turn a model's raw answer into a kind's answer payload (the formats in
``portalreview/store/kinds/*.py``), checking what a grammar cannot: that a span is verbatim in
its text, a code is in the project's codebook, a subcode sits under its own code, a theme or
criterion exists. Every problem found is listed in :class:`AnswerError`'s reasons, so a
grammar that drifted from the catalogs, or an answer from an unconstrained model, is refused
with words a PI can act on. A value of the wrong JSON type anywhere (a number, a list, an
object or null where text is expected...) is such a problem too, never a Python error: the
unit is recorded as failed and the batch goes on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from portalreview.domain.catalogs import Catalogs
from portalreview.domain.spans import merge_spans
from portalreview.llm.errors import AnswerError
from portalreview.llm.grammars import EMPATHY_OPTIONS, NO_MATCH


def _json(raw: str, what: str) -> Any:
    """The answer's JSON; an answer that does not parse is an AnswerError (unparsable), also
    one nested too deeply for Python or with a number too long for it."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        reason = exc.msg
    except RecursionError:
        reason = "nested too deeply"
    except ValueError:  # (the only other: Python's limit on the digits of an integer)
        reason = "a number with more than 4,300 digits"
    raise AnswerError(what, [f"the answer is not valid JSON ({reason})"], raw)


def find_verbatim(span: str, text: str) -> tuple[int, int] | None:
    """Character offsets of the first exact occurrence of ``span`` in ``text``."""
    if not span:
        return None
    start = text.find(span)
    return None if start < 0 else (start, start + len(span))


def respond_payload(raw: str, catalogs: Catalogs) -> dict[str, Any]:
    """Theme boxes -> ``{"mode": "theme_guided", "parts": {...}, "notes": ""}``."""
    what = "the theme-guided reply"
    data = _json(raw, what)
    if not isinstance(data, dict):
        raise AnswerError(what, ["the answer is not a JSON object of boxes"], raw)
    known = {t.id for t in catalogs.themes}
    reasons = [f"{k!r} is not a theme of the project" for k in data if k not in known]
    reasons += [
        f"the box {k!r} does not hold text" for k, v in data.items() if not isinstance(v, str)
    ]
    parts = {
        k: v.strip() for k, v in data.items() if k in known and isinstance(v, str) and v.strip()
    }
    if not reasons and not parts:
        reasons.append("every box is empty")
    if reasons:
        raise AnswerError(what, reasons, raw)
    return {"mode": "theme_guided", "parts": parts, "notes": ""}


def rank_payload(
    raw: str, labels: Sequence[str], response_ids: Sequence[int], catalogs: Catalogs
) -> dict[str, Any]:
    """Ranking JSON -> ``{"entries": [{"response_id", "rank", "correct", "criteria"}]}``."""
    what = "the ranking"
    data = _json(raw, what)
    entries = data.get("ranking") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise AnswerError(what, ["the answer has no 'ranking' list"], raw)
    by_label = dict(zip(labels, response_ids, strict=True))
    criteria = {c.id for c in catalogs.criteria}
    reasons: list[str] = []
    out = []
    for i, entry in enumerate(entries):
        where = f"ranking[{i}]"
        if not isinstance(entry, dict):
            reasons.append(f"{where} is not an object")
            continue
        label, rank, correct = entry.get("response"), entry.get("rank"), entry.get("correct")
        reasons += _rank_entry_problems(where, label, rank, correct, entry, by_label, criteria)
        if isinstance(label, str) and label in by_label:
            named = entry.get("criteria")
            named = [c for c in named if isinstance(c, str)] if isinstance(named, list) else []
            out.append(
                {
                    "response_id": by_label[label],
                    "rank": rank,
                    "correct": correct,
                    "criteria": list(dict.fromkeys(named)),
                }
            )
    seen = [e["response_id"] for e in out]
    if len(set(seen)) != len(seen):
        reasons.append("a reply is ranked twice")
    missing = [lb for lb, rid in by_label.items() if rid not in seen]
    if missing:
        reasons.append(f"no entry for {', '.join(missing)}")
    if reasons:
        raise AnswerError(what, reasons, raw)
    return {"entries": out}


def _rank_entry_problems(
    where: str, label: Any, rank: Any, correct: Any, entry: dict, by_label: dict, criteria: set
) -> list[str]:
    problems = []
    if not isinstance(label, str) or label not in by_label:
        problems.append(f"{where}: {label!r} is not one of the replies {', '.join(by_label)}")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= len(by_label):
        problems.append(f"{where}: rank {rank!r} is not between 1 and {len(by_label)}")
    if not isinstance(correct, bool):
        problems.append(f"{where}: 'correct' must be true or false")
    reasons = entry.get("criteria") or []
    if not isinstance(reasons, list):
        problems.append(f"{where}: 'criteria' must be a list")
        return problems
    problems += [
        f"{where}: unknown criterion {c!r}"
        for c in reasons
        if not isinstance(c, str) or c not in criteria
    ]
    if reasons and correct is not False:
        problems.append(f"{where}: problems are named only for a reply marked incorrect")
    return problems


def match_decision(raw: str, draft: str) -> list[list[int]]:
    """The judge's answer -> the decision's spans: ``[]`` for NO MATCH, else the one span of
    the draft the answer copies (seed 000, Algorithm 1 needs it verbatim)."""
    answer = raw.strip()
    if answer == NO_MATCH:
        return []
    found = find_verbatim(answer, draft)
    if found is None:
        raise AnswerError(
            "the content match", [f"{_short(answer)!r} is not verbatim in the draft"], raw
        )
    return [list(found)]


def theme_label(raw: str, catalogs: Catalogs) -> str:
    theme = raw.strip()
    if theme not in {t.id for t in catalogs.themes}:
        known = ", ".join(t.id for t in catalogs.themes)
        raise AnswerError("the theme label", [f"{theme!r} is not a theme ({known})"], raw)
    return theme


def empathy_payload(raw: str, response_ids: Sequence[int]) -> dict[str, Any]:
    """Three-way verdict -> ``{"more_empathetic_response_id": id}`` or ``{"equal": true}``;
    ``response_ids`` are the replies in the order the prompt showed them."""
    verdict = raw.strip()
    if verdict == EMPATHY_OPTIONS[2]:
        return {"equal": True}
    if verdict in EMPATHY_OPTIONS[:2]:
        return {"more_empathetic_response_id": response_ids[EMPATHY_OPTIONS.index(verdict)]}
    options = ", ".join(EMPATHY_OPTIONS)
    raise AnswerError("the empathy verdict", [f"{verdict!r} is not one of {options}"], raw)


def eppc_payload(raw: str, sentence: str, catalogs: Catalogs) -> dict[str, Any]:
    """``{"results": [{"Code", "Sub-code", "Span"}]}`` -> ``{"labels": [...]}`` with spans as
    character offsets into the sentence. Two results for one code with the same subcode merge
    into a discontinuous span; with different subcodes they are refused (one subcode per code,
    seed 003)."""
    what = "the EPPC coding"
    data = _json(raw, what)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise AnswerError(what, ["the answer has no 'results' list"], raw)
    codes = {c.id: c for c in catalogs.eppc_codes}
    labels: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    for i, item in enumerate(results):
        problem = _eppc_item(i, item, sentence, codes, labels)
        if problem:
            reasons.append(problem)
    if reasons:
        raise AnswerError(what, reasons, raw)
    for label in labels.values():
        label["spans"] = merge_spans(label["spans"])
    return {"labels": list(labels.values())}


def _eppc_item(
    i: int, item: Any, sentence: str, codes: dict, labels: dict[str, dict[str, Any]]
) -> str | None:
    where = f"results[{i}]"
    if not isinstance(item, dict):
        return f"{where} is not an object"
    code, sub, span = item.get("Code"), item.get("Sub-code"), item.get("Span")
    if not isinstance(code, str) or code not in codes:
        return f"{where}: {code!r} is not a code of the project's codebook"
    if not isinstance(sub, str):
        return f"{where}: the subcode {sub!r} is not text"
    if sub not in {s.id for s in codes[code].subcodes}:
        owners = [c for c, v in codes.items() if sub in {s.id for s in v.subcodes}]
        hint = f" (it is a subcode of {', '.join(owners)})" if owners else ""
        return f"{where}: {sub!r} is not a subcode of {code}{hint}"
    found = find_verbatim(span if isinstance(span, str) else "", sentence)
    if found is None:
        return f"{where}: the span {_short(str(span))!r} is not verbatim in the sentence"
    if code in labels and labels[code]["subcode"] != sub:
        return f"{where}: {code} is given two subcodes ({labels[code]['subcode']}, {sub})"
    labels.setdefault(code, {"code": code, "subcode": sub, "spans": []})["spans"].append(
        list(found)
    )
    return None


def fact_list(raw: str) -> list[str]:
    """A JSON list of facts -> the distinct, non-empty facts in order (seed 004)."""
    what = "the fact list"
    data = _json(raw, what)
    if not isinstance(data, list):
        raise AnswerError(what, ["the answer is not a JSON list"], raw)
    bad = [f"item {i} is not text" for i, f in enumerate(data) if not isinstance(f, str)]
    if bad:
        raise AnswerError(what, bad, raw)
    return list(dict.fromkeys(f.strip() for f in data if f.strip()))


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
