"""One GBNF grammar per structured answer, so that whatever the model samples parses into
that kind's answer. Built from the project's catalogs and the unit's own texts (a span grammar
admits only text copied verbatim from its source), and checked by
:func:`portalreview.llm.gbnf.check` as they are built.

Every grammar allows one leading space: SentencePiece vocabularies put the space before a
word into the word's token, so the first token of an answer often starts with one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from portalreview.domain.catalogs import Catalogs
from portalreview.llm import gbnf
from portalreview.llm.gbnf import JSON_CHAR_RULE, alternatives, json_string_rule, json_text, literal

NO_MATCH = "NO MATCH"
EMPATHY_OPTIONS = ("Response 1", "Response 2", "Equally empathetic")


@dataclass(frozen=True)
class GrammarLimits:
    """Upper bounds that keep a constrained answer finite (and a test model fast)."""

    box_chars: int = 600  # one box of the theme-guided form
    fact_chars: int = 240  # one medical fact
    max_facts: int = 20
    eppc_results: int = 6


def _finish(rules: list[str]) -> str:
    text = "\n".join(rules) + "\n"
    gbnf.check(text)
    return text


def _json_key(key: str) -> str:
    """A JSON object key with its colon, as a GBNF literal: ``"\\"key\\":"``."""
    return literal(f'"{json_text(key)}":')


def respond_boxes(catalogs: Catalogs, limits: GrammarLimits = GrammarLimits()) -> str:
    """``{"empathy": "...", ..., "other": "..."}``: every theme box in catalog order, each a
    string of at most ``box_chars`` (empty = theme left out). Seed 000, Appendix G."""
    pairs = [f"{_json_key(t.id)} ws box" for t in catalogs.themes]
    body = ' "," ws '.join(pairs)
    return _finish(
        [
            f'root ::= " "? "{{" ws {body} ws "}}"',
            'ws ::= " "?',
            json_string_rule("box", limits.box_chars),
            JSON_CHAR_RULE,
        ]
    )


def rank_judge(labels: Sequence[str], criteria: Sequence[str]) -> str:
    """``{"ranking": [{"response": "A", "rank": 1, "correct": true, "criteria": []}, ...]}``
    with one entry per label in order, ranks 1..n, and at least one reason for an incorrect
    reply, none for a correct one, each from the criteria (seed 001 Sec. 5: incorrect means
    meeting at least one of them; without criteria in the catalog, none)."""
    n = len(labels)
    entries = []
    rules = []
    for i, label in enumerate(labels):
        rules.append(
            f'entry-{i} ::= "{{" {_json_key("response")} ws {literal(json_text_quoted(label))} '
            f'"," ws {_json_key("rank")} ws rank "," ws verdict "}}"'
        )
        entries.append(f"entry-{i}")
    crit = " | ".join(literal(json_text_quoted(c)) for c in criteria)
    if criteria:  # one reason or more, up to as many as there are criteria
        reasons = [
            f'reasons ::= "[" reason ( "," ws reason ){{0,{len(criteria) - 1}}} "]"',
            f"reason ::= {crit}",
        ]
    else:
        reasons = ['reasons ::= "[]"']
    return _finish(
        [
            f'root ::= " "? "{{" {_json_key("ranking")} ws "[" '
            + ' "," ws '.join(entries)
            + ' "]}"',
            *rules,
            "rank ::= " + " | ".join(literal(str(r)) for r in range(1, n + 1)),
            f'verdict ::= {_json_key("correct")} ws "true," ws {_json_key("criteria")} ws "[]" | '
            f'{_json_key("correct")} ws "false," ws {_json_key("criteria")} ws reasons',
            *reasons,
            'ws ::= " "?',
        ]
    )


def json_text_quoted(text: str) -> str:
    """``text`` as a JSON string, quotes included."""
    return f'"{json_text(text)}"'


def content_match(draft: str) -> str:
    """``NO MATCH``, or a run of whole words copied verbatim from the draft (seed 000,
    Appendix C.1: the judge's output must match the draft exactly)."""
    return _finish(
        [
            f'root ::= " "? ( {literal(NO_MATCH)} | span )',
            *gbnf.verbatim_span_rules("span", draft),
        ]
    )


def choice(options: Sequence[str]) -> str:
    """Exactly one of ``options`` (a theme id, an empathy verdict...)."""
    return _finish([f'root ::= " "? ( {alternatives(options)} )'])


def sentence_theme(catalogs: Catalogs) -> str:
    """One theme id of the catalog, "other" included (seed 000, Appendix C.2)."""
    return choice([t.id for t in catalogs.themes])


def empathy_judge() -> str:
    """Response 1 / Response 2 / Equally empathetic (seed 004, three-way comparison)."""
    return choice(EMPATHY_OPTIONS)


def eppc_extract(catalogs: Catalogs, sentence: str, limits: GrammarLimits = GrammarLimits()) -> str:
    """``{"results": [{"Code": ..., "Sub-code": ..., "Span": ...}]}`` (FACTS.md's output shape):
    a code of the codebook, a subcode *of that code*, and a span copied from the sentence;
    at most ``eppc_results`` results (seed 003)."""
    items = []
    rules = []
    for i, code in enumerate(catalogs.eppc_codes):
        subs = " | ".join(literal(json_text_quoted(s.id)) for s in code.subcodes)
        rules.append(f"sub-{i} ::= {subs}")
        rules.append(
            f'item-{i} ::= "{{" {_json_key("Code")} ws {literal(json_text_quoted(code.id))} '
            f'"," ws {_json_key("Sub-code")} ws sub-{i} "," ws {_json_key("Span")} ws '
            f'"\\"" span "\\"" "}}"'
        )
        items.append(f"item-{i}")
    more = max(0, limits.eppc_results - 1)
    return _finish(
        [
            f'root ::= " "? "{{" {_json_key("results")} ws "[" '
            f'( item ( "," ws item ){{0,{more}}} )? "]}}"',
            "item ::= " + " | ".join(items),
            *rules,
            *gbnf.verbatim_span_rules("span", sentence, in_json=True),
            'ws ::= " "?',
        ]
    )


def fact_list(limits: GrammarLimits = GrammarLimits()) -> str:
    """``["fact", ...]``: at most ``max_facts`` non-empty strings (seed 004, decomposition)."""
    more = max(0, limits.max_facts - 1)
    return _finish(
        [
            f'root ::= " "? "[" ( fact ( "," ws fact ){{0,{more}}} )? "]"',
            f'fact ::= "\\"" jchar{{1,{limits.fact_chars}}} "\\""',
            JSON_CHAR_RULE,
            'ws ::= " "?',
        ]
    )
