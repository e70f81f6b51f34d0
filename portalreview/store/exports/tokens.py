"""Tokens for span-annotation tools that snap selections to tokens (Prodigy's ``tokens``).

spaCy's convention, which Prodigy follows: a token's ``ws`` says whether one space follows it;
any other whitespace (a newline, a second space) is a token of its own, so the text can be
rebuilt exactly from the tokens. Tokens are also cut at every span boundary given, so each
character span starts at a token's start and ends at a token's end.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

_PIECE = re.compile(r"\w+(?:['’]\w+)*| |\s+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Token:
    """A token: character offsets [start, end) into the text, and whether one space follows."""

    start: int
    end: int
    ws: bool


def tokenize(text: str, spans: Iterable[tuple[int, int]] = ()) -> list[Token]:
    """Tokens of ``text``, cut at every start and end of ``spans``; a single space after a
    token is folded into that token's ``ws`` unless a span starts at it or ends with it."""
    spans = list(spans)
    cuts = sorted({x for span in spans for x in span})
    pieces: list[tuple[int, int]] = []
    for match in _PIECE.finditer(text):
        pieces.extend(_cut(match.start(), match.end(), cuts))
    tokens: list[Token] = []
    for start, end in pieces:
        folds = (
            text[start:end] == " "
            and tokens
            and not tokens[-1].ws
            and not text[tokens[-1].start : tokens[-1].end].isspace()
            and not any(s == start or e == end for s, e in spans)
        )
        if folds:
            last = tokens[-1]
            tokens[-1] = Token(last.start, last.end, True)
        else:
            tokens.append(Token(start, end, False))
    return tokens


def _cut(start: int, end: int, cuts: list[int]) -> list[tuple[int, int]]:
    inside = [c for c in cuts if start < c < end]
    bounds = [start, *inside, end]
    return list(itertools.pairwise(bounds))


def token_range(tokens: list[Token], start: int, end: int) -> tuple[int, int]:
    """(first, last) token index of the character span [start, end), ``last`` inclusive as
    Prodigy's ``token_end`` is; ValueError when the span does not fall on token bounds."""
    first = next((i for i, t in enumerate(tokens) if t.start == start), None)
    last = next((i for i, t in enumerate(tokens) if t.end == end), None)
    if first is None or last is None or last < first:
        raise ValueError(f"span [{start}, {end}) does not fall on token boundaries")
    return first, last
