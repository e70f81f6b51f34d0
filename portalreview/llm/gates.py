"""Quality gates: a model suggestion that is degenerate is stored for the PI with the reason, and
never offered to a clinician nor saved as a model annotator's answer.

A small model asked to fill a form often answers in the form's own words: every theme box of a
respond suggestion held the theme's name ("Empathy", "Logistics"), fact lists came back empty,
and content-match spans covered most of the draft for every sentence (seen with
SmolLM2-135M-Instruct; see tests/llm/test_llm_gates.py). Such an answer looks like a suggestion
on screen and would anchor a clinician (seed 000, Section 3.1 and Appendix G, asks clinicians to
write or match content, not to accept labels), and as a pseudo annotator's answer it would
distort agreement (seed 000, Table 8).

Each gate is a pure function ``(payload, texts, catalogs, template) -> None | reason``: the
payload, the unit's texts (:class:`UnitTexts`), the catalogs the prompt lists and the prompt
template's text. A suggestion is refused when it is

* empty: no content in any field (no box text, no decision, no ranking, no choice);
* an echo: a free-text field (a respond box or the notes, a fact) repeats a label the prompt
  shows (a theme's id, name or short name, a code, criterion or category name, in words close
  to it: "Empathy" for "Empathetic communication"), a definition or question of the catalogs,
  a bare answer word ("YES", "JSON", "NO MATCH"), or a run of words of the template's own
  instruction lines;
* the same text in every box: one text in more than half of the respond boxes (two or
  more); three or more EPPC labels with one span; in a match suggestion of three or more
  reference sentences, more than half of them sharing their draft span with another sentence
  (Algorithm 1 matches each sentence to the draft content that says what it says, so
  sentences of different content rarely share one), or six or more sentence theme labels all
  of one theme;
* spans covering the whole text: a match decision covers the whole draft when its spans hold
  at least :data:`WHOLE_SHARE` (90 %) of the draft's non-blank characters; the suggestion is
  refused when more than half of the reference's sentences, and at least two, cover the whole
  draft (a draft of one sentence is exempt: its one sentence is all there is to copy). EPPC
  evidence is the shortest part of the sentence that shows the code (seed 003); a suggestion
  whose three or more codes all take the whole sentence (90 %) as evidence is refused (one or
  two codes may well be shown by their whole sentence: a clinician of the demo study gave a
  thank-you sentence two codes with the whole sentence as evidence);
* a text loop: a run of three or more copies of a word sequence (six or more of one word), one
  chunk of characters repeated eight times or more, or a sentence of three words or more
  written twice; in facts, the same fact twice on one side;
* facts: a side whose reply has a sentence of three words or more, but no fact listed (unless
  the payload says ``"no_facts": true``, the explicit "no medical fact on either side" answer
  of seed 004's empty-set rule, which is an answer and not an empty one);
* an urgency answer that could not be used, judged from the probabilities behind it (the
  suggestion's ``observed`` numbers, :func:`unusable_urgency`): the model gave the same answer
  word in both orders ("A before B?" YES and "B before A?" YES), P(A first) is within
  :data:`MIN_URGENCY_MARGIN` of 0.5, or YES and NO held less than :data:`MIN_YES_NO_MASS` of
  its next-token probability. SmolLM2-135M-Instruct answered YES both ways to every demo pair
  (0.90-0.94), with P(A first) 0.49-0.51 and 15-17 % of its probability on YES/NO: a coin flip
  that, pre-filled, would look like a decision.

The thresholds are chosen so that ordinary clinician text passes (tests hold both kinds of
case); each is a named constant.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from portalreview.domain.catalogs import Catalogs
from portalreview.domain.segmenter import sentence_texts

WHOLE_SHARE = 0.9  # spans holding this share of a text's non-blank characters cover "all" of it
SAME_SPAN_MIN = 3  # this many decisions / labels with one span are "the same in every box"
SAME_THEME_MIN = 6  # this many sentences all labelled with one theme are "the same in every box"
LOOP_COPIES = 3  # consecutive copies of a word sequence that make a loop
LOOP_WORD_COPIES = 6  # ... of a single word
LOOP_CHAR_COPIES = 8  # consecutive copies of a chunk of up to 12 characters
LABEL_WORDS = 4  # a text of at most this many content words can be a bare label
SIMILAR = 0.85  # difflib ratio above which a text is a copy of a label or definition
INSTRUCTION_WORDS = 4  # a run of this many words of an instruction line is an echo of it
SENTENCE_WORDS = 3  # a sentence with this many words can hold a fact / make a loop
# An urgency pair's P(A first) this close to 0.5 (0.4-0.6) is a coin flip, not a decision.
MIN_URGENCY_MARGIN = 0.1
# YES and NO must hold at least this share of the next-token probability in both orders: a
# model that mostly answers neither is not answering the question asked.
MIN_YES_NO_MASS = 0.5

# Answers a prompt asks for or ends with, and what a model writes when it has nothing to say.
ANSWER_WORDS = frozenset(
    [
        "yes",
        "no",
        "json",
        "answer",
        "no match",
        "part",
        "none",
        "null",
        "n a",
        "na",
        "text",
        "string",
        "box",
        "reply",
        "true",
        "false",
        "empty",
        "id",
        "ids",
        "label",
    ]
)
_STOP = frozenset(
    {"a", "an", "and", "the", "of", "or", "to", "for", "in", "on", "with", "related", "s"}
)
# What a reason starts with ("echo: 7 of 9 boxes ..."): :func:`category` reads it back.
EMPTY, ECHO, SAME, WHOLE, LOOP, NO_FACTS, UNUSABLE = (
    "empty",
    "echo",
    "same text",
    "whole text",
    "text loop",
    "no facts",
    "could not be used",
)
CATEGORIES = (EMPTY, ECHO, SAME, WHOLE, LOOP, NO_FACTS, UNUSABLE)
_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_CHAR_LOOP = re.compile(r"(.{1,12}?)\1{" + str(LOOP_CHAR_COPIES - 1) + ",}", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")


@dataclass(frozen=True)
class UnitTexts:
    """The texts of a unit that the gates compare a payload with: the patient's message, the
    responses by the label the unit gives them ("Reference", "Draft", "Original", "Edited",
    "Response A"...) and, for an EPPC unit, the sentence coded."""

    message: str = ""
    responses: dict[str, str] = field(default_factory=dict)
    sentence: str = ""


def unit_texts(unit: Any) -> UnitTexts:
    """The texts of a :class:`~portalreview.store.service.UnitView`."""
    return UnitTexts(
        unit.cases[0].message if unit.cases else "",
        {r.label: r.text for r in unit.responses},
        unit.sentence.text if unit.sentence is not None else "",
    )


Gate = Callable[[dict, UnitTexts, Catalogs, str], str | None]


# --- text helpers ------------------------------------------------------------------------------


def _norm(text: str) -> str:
    """Lower case words only: "Plan-planning!" -> "plan planning"."""
    return " ".join(_WORD.findall(text.lower().replace("_", " ")))


def _content_words(text: str) -> list[str]:
    return [w for w in _norm(text).split() if w not in _STOP]


def _same_stem(a: str, b: str) -> bool:
    """Words alike up to their ending ("empathy"/"empathetic", "medications"/"medication")."""
    if a == b:
        return True
    n = min(len(a), len(b))
    return n >= 4 and a[: max(4, n - 3)] == b[: max(4, n - 3)]


def _covered_by(words: Sequence[str], label_words: Sequence[str]) -> bool:
    return bool(words) and all(any(_same_stem(w, x) for x in label_words) for w in words)


@dataclass(frozen=True)
class _Labels:
    """What the prompt shows: short labels (ids, names), long ones (definitions, questions)
    and the template's instruction lines, normalised."""

    short: tuple[str, ...]
    long: tuple[str, ...]
    instructions: tuple[str, ...]


def _labels(catalogs: Catalogs, template: str) -> _Labels:
    short: list[str] = []
    long: list[str] = []
    for t in catalogs.themes:
        short += [t.id, t.name, t.short]
        long += [t.definition, t.question]
    box = catalogs.notes_box
    short += [box.id, box.name]
    long.append(box.question)
    for c in catalogs.criteria:
        short += [c.id, c.name]
        long.append(c.definition)
    for code in catalogs.eppc_codes:
        short += [code.id, code.name]
        long.append(code.definition)
        for sub in code.subcodes:
            short += [sub.id, sub.name]
            long.append(sub.definition)
    for e in catalogs.error_categories:
        short += [e.id, e.name]
        long.append(e.definition)
    for u in catalogs.urgency_levels:
        short.append(u.name)
        long.append(u.definition)
    short += [e.name for e in catalogs.empathy_choices]
    lines = (_norm(_PLACEHOLDER.sub(" ", line)) for line in template.splitlines())
    return _Labels(
        tuple(dict.fromkeys(n for n in map(_norm, short) if n)),
        tuple(dict.fromkeys(n for n in map(_norm, long) if n)),
        tuple(line for line in lines if line),
    )


def echo_of(text: str, labels: _Labels) -> str | None:
    """The prompt's words that ``text`` repeats, or None: an answer word; a short label, or
    words close to one ("Empathy" for "empathetic communication"); a definition or question,
    whole or a run of words of one; a run of words of the template's instruction lines."""
    norm = _norm(text)
    if not norm:
        return None
    if norm in ANSWER_WORDS:
        return text.strip()
    words = _content_words(text)
    if len(words) <= LABEL_WORDS:
        for label in labels.short:
            if norm == label or _covered_by(words, label.split()):
                return label
    for label in (*labels.short, *labels.long):
        if difflib.SequenceMatcher(None, norm, label, autojunk=False).ratio() >= SIMILAR:
            return label
    if len(norm.split()) >= INSTRUCTION_WORDS:
        padded = f" {norm} "
        for line in (*labels.long, *labels.instructions):
            if padded in f" {line} ":
                return line
    return None


def text_loop(text: str) -> str | None:
    """How ``text`` loops, or None: a word sequence repeated back to back, one chunk of
    characters repeated, or a sentence written twice."""
    tokens = _TOKEN.findall(text.lower())
    for n in range(1, 11):
        need = LOOP_WORD_COPIES if n == 1 else LOOP_COPIES
        for start in range(len(tokens) - n * need + 1):
            gram = tokens[start : start + n]
            if all(tokens[start + k * n : start + (k + 1) * n] == gram for k in range(need)):
                return f"{' '.join(gram)!r} repeated {need} times or more"
    match = _CHAR_LOOP.search(text)
    if match and match.group(1).strip():
        return f"{match.group(1)!r} repeated {LOOP_CHAR_COPIES} times or more"
    counts = Counter(
        _norm(s) for s in sentence_texts(text) if len(_norm(s).split()) >= SENTENCE_WORDS
    )
    repeated = [s for s, n in counts.items() if n > 1]
    if repeated:
        return f"the sentence {repeated[0]!r} written {counts[repeated[0]]} times"
    return None


def coverage(spans: Iterable[Sequence[int]], text: str) -> float:
    """The share of ``text``'s non-blank characters that the spans hold (overlaps once)."""
    inside = set()
    for start, end in spans:
        inside.update(range(max(start, 0), min(end, len(text))))
    total = sum(1 for c in text if not c.isspace())
    return sum(1 for i in inside if not text[i].isspace()) / total if total else 0.0


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one gate per kind -------------------------------------------------------------------------


def gate_respond(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Respond (seed 000, Appendix G): the theme boxes, the notes, or an edited draft."""
    boxes = {k: v for k, v in (payload.get("parts") or {}).items() if str(v).strip()}
    if str(payload.get("notes") or "").strip():
        boxes["notes"] = payload["notes"]
    if str(payload.get("final_text") or "").strip():
        boxes["final_text"] = payload["final_text"]
    if not boxes:
        return f"{EMPTY}: every box is empty"
    labels = _labels(catalogs, template)
    echoes = {box: e for box, text in boxes.items() if (e := echo_of(str(text), labels))}
    if echoes:
        box, echo = next(iter(echoes.items()))
        return (
            f"{ECHO}: {len(echoes)} of {len(boxes)} boxes repeat the prompt's own words "
            f"(the {box} box: {_short(str(boxes[box]))!r}, from {_short(echo)!r})"
        )
    (text, n), *_ = Counter(_norm(str(t)) for t in boxes.values()).most_common(1)
    if n >= 2 and 2 * n > len(boxes):
        where = "every box" if n == len(boxes) else f"{n} of {len(boxes)} boxes"
        return f"{SAME}: the same text in {where}: {_short(text)!r}"
    for box, text in boxes.items():
        loop = text_loop(str(text))
        if loop:
            return f"{LOOP}: in the {box} box, {loop}"
    return None


def gate_match(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Match (seed 000, Algorithm 1): the draft spans of each reference sentence."""
    decisions = payload.get("decisions") or []
    if not decisions:
        return f"{EMPTY}: no decision for any sentence"
    draft = texts.responses.get("Draft", "")
    spans = [[tuple(s) for s in d.get("spans") or []] for d in decisions]
    whole = sum(1 for s in spans if s and coverage(s, draft) >= WHOLE_SHARE)
    if len(sentence_texts(draft)) >= 2 and whole >= 2 and 2 * whole > len(decisions):
        return (
            f"{WHOLE}: the spans of {whole} of {len(decisions)} sentences cover the whole draft "
            f"(>= {WHOLE_SHARE:.0%} of its characters)"
        )
    counts = Counter(tuple(s) for s in spans if s)
    shared = sum(1 for s in spans if s and counts[tuple(s)] > 1)
    if len(spans) >= SAME_SPAN_MIN and 2 * shared > len(spans):
        if shared == len(spans) and len(counts) == 1:
            start, end = spans[0][0]
            return f"{SAME}: the same draft span for every sentence: {_short(draft[start:end])!r}"
        return f"{SAME}: {shared} of {len(spans)} sentences share their draft span with others"
    themes = [t.get("theme") for t in payload.get("themes") or []]
    if len(themes) >= SAME_THEME_MIN and len(set(themes)) == 1:
        return f"{SAME}: the theme {themes[0]} for all {len(themes)} sentences"
    return None


def gate_eppc(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """EPPC (seed 003): the evidence spans of each code."""
    labels = payload.get("labels") or []
    spans = [[tuple(s) for s in label.get("spans") or []] for label in labels]
    whole = [s for s in spans if s and coverage(s, texts.sentence) >= WHOLE_SHARE]
    if len(labels) >= SAME_SPAN_MIN and len(whole) == len(labels):
        return (
            f"{WHOLE}: all {len(labels)} codes take the whole sentence as their evidence "
            f"(>= {WHOLE_SHARE:.0%} of its characters)"
        )
    if len(spans) >= SAME_SPAN_MIN and spans[0] and all(s == spans[0] for s in spans):
        return f"{SAME}: the same evidence span for every code ({len(spans)} codes)"
    return None


def gate_facts(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Facts (seed 004, MedFactChecking): the facts of the original and the edited reply."""
    facts = payload.get("facts") or []
    labels = _labels(catalogs, template)
    for side in ("original", "edited"):
        own = [str(f.get("text", "")) for f in facts if f.get("side") == side]
        text = texts.responses.get(side.capitalize(), "")
        sentences = [s for s in sentence_texts(text) if len(_norm(s).split()) >= SENTENCE_WORDS]
        if not own and sentences and payload.get("no_facts") is not True:
            n = len(sentences)
            return f"{NO_FACTS}: none listed for the {side} reply, which has {n} sentence(s)"
        counts = Counter(_norm(f) for f in own)
        twice = [f for f, n in counts.items() if n > 1]
        if twice:
            fact, n = _short(twice[0]), counts[twice[0]]
            return f"{LOOP}: the {side} fact {fact!r} is listed {n} times"
        for fact in own:
            echo = echo_of(fact, labels)
            if echo:
                return f"{ECHO}: the fact {_short(fact)!r} repeats the prompt ({_short(echo)!r})"
            loop = text_loop(fact)
            if loop:
                return f"{LOOP}: in the fact {_short(fact)!r}, {loop}"
    return None


def gate_rank(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Rank (seed 001): a ranking must rank something."""
    return None if payload.get("entries") else f"{EMPTY}: no reply is ranked"


def gate_empathy(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Empathy (seed 004): a choice or 'equal'."""
    chosen = payload.get("more_empathetic_response_id") is not None or payload.get("equal")
    return None if chosen else f"{EMPTY}: no choice"


def gate_urgency(payload: dict, texts: UnitTexts, catalogs: Catalogs, template: str) -> str | None:
    """Urgency (seed 002): which patient is more urgent (the probabilities behind the choice
    are judged by :func:`unusable_urgency`)."""
    return None if payload.get("more_urgent_case_id") is not None else f"{EMPTY}: no choice"


def unusable_urgency(observed: Mapping[str, Any]) -> str | None:
    """Why the probabilities behind an urgency answer (``p_yes_ab``, ``p_yes_ba``,
    ``p_a_first``, ``yes_no_mass`` as :func:`portalreview.llm.suggest.urgency_payload` saves
    them) make it unusable, or None: the same answer word in both orders, a coin flip, or too
    little probability on YES and NO."""
    p_ab, p_ba = observed.get("p_yes_ab"), observed.get("p_yes_ba")
    p_first, mass = observed.get("p_a_first"), observed.get("yes_no_mass")
    if p_ab is None or p_ba is None or p_first is None or mass is None:
        return None  # not read from probabilities (an answer stored some other way)
    problems = []
    if (p_ab >= 0.5) == (p_ba >= 0.5):
        word = "YES" if p_ab >= 0.5 else "NO"
        problems.append(
            f"the model answered {word} both to 'A before B' (P(YES) {p_ab:.2f}) and to "
            f"'B before A' (P(YES) {p_ba:.2f})"
        )
    if abs(p_first - 0.5) < MIN_URGENCY_MARGIN:
        problems.append(
            f"P(A first) {p_first:.2f} is a coin flip (it must be below "
            f"{0.5 - MIN_URGENCY_MARGIN:.1f} or above {0.5 + MIN_URGENCY_MARGIN:.1f})"
        )
    if mass < MIN_YES_NO_MASS:
        share = f"{mass:.0%}" if mass >= 0.01 else "less than 1%"
        problems.append(
            f"only {share} of the model's next-token probability was on YES or NO "
            f"(at least {MIN_YES_NO_MASS:.0%} needed)"
        )
    return f"{UNUSABLE}: {'; '.join(problems)}" if problems else None


GATES: dict[str, Gate] = {
    "respond": gate_respond,
    "match": gate_match,
    "eppc": gate_eppc,
    "facts": gate_facts,
    "rank": gate_rank,
    "empathy": gate_empathy,
    "urgency": gate_urgency,
}


def category(reason: str) -> str:
    """The kind of degeneracy a reason names (one of :data:`CATEGORIES`, else "other")."""
    head = reason.split(":", 1)[0].strip()
    return head if head in CATEGORIES else "other"


# Gates on the numbers behind an answer (a suggestion's ``observed``), per kind.
OBSERVED_GATES: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "urgency": unusable_urgency,
}


def check(
    kind: str,
    payload: dict,
    texts: UnitTexts,
    catalogs: Catalogs,
    template: str = "",
    observed: Mapping[str, Any] | None = None,
) -> str | None:
    """Why a suggestion of ``kind`` is refused, or None when it may be offered. ``observed``:
    the numbers behind the answer (probabilities), when the model gave them."""
    gate = GATES.get(kind)
    if gate is None:
        raise ValueError(f"no quality gate for the kind {kind!r}")
    if not isinstance(payload, dict) or not payload:
        return f"{EMPTY}: no content in any field"
    reason = gate(payload, texts, catalogs, template)
    observed_gate = OBSERVED_GATES.get(kind)
    if reason is None and observed and observed_gate is not None:
        reason = observed_gate(observed)
    return reason
