"""GBNF grammars: a checker that runs before llama.cpp sees a grammar, and small builders.

Why a checker: in the current llama-cpp-python bindings an invalid grammar makes llama.cpp
return a null sampler that the bindings then use, which kills the process. :func:`check`
parses the grammar the way llama.cpp's parser does and raises :class:`GrammarError` with the
line and column of the first problem: an unterminated string or character class, an
unbalanced parenthesis, a bad escape or repetition, a reference to an undefined rule, no
``root`` rule, or a left-recursive rule. (The engine then asks llama.cpp's own constructor as a
second check, with the model loaded, and frees what it built.)

The syntax: ``name ::= alternatives`` per rule; names of letters, digits and ``-``; literals
``"..."``; character classes ``[...]`` / ``[^...]``; ``.``; groups ``( ... )``; repetition
``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}``; ``#`` comments. A rule ends at a newline,
except inside parentheses or right after ``|``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from portalreview.llm.errors import GrammarError

_NAME = re.compile(r"[A-Za-z0-9-]+")
_ESCAPES = {"n", "r", "t", "\\", '"', "[", "]", "-"}  # what llama.cpp accepts
MAX_REPETITION = 10_000
_BRACES = re.compile(r"\{[ \t]*(\d+)[ \t]*(?:(,)[ \t]*(\d*)[ \t]*)?\}")  # no newlines


@dataclass
class _Item:
    """One element of a sequence, with its repetition bounds (max None = unbounded)."""

    kind: str  # "lit", "class", "any", "ref", "group"
    value: object = None
    low: int = 1
    high: int | None = 1
    line: int = 0
    col: int = 0


@dataclass
class Grammar:
    """A parsed grammar: rule name -> alternatives (each a list of items)."""

    rules: dict[str, list[list[_Item]]] = field(default_factory=dict)


class _Parser:
    def __init__(self, text: str) -> None:
        self.src = text
        self.pos = 0
        self.grammar = Grammar()
        self.refs: list[tuple[str, int, int]] = []

    # -- positions and errors --------------------------------------------------------------

    def where(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        line = self.src.count("\n", 0, pos) + 1
        col = pos - (self.src.rfind("\n", 0, pos) + 1) + 1
        return line, col

    def fail(self, message: str, pos: int | None = None) -> GrammarError:
        line, col = self.where(pos)
        return GrammarError(f"invalid grammar at line {line}, column {col}: {message}")

    def peek(self) -> str:
        return self.src[self.pos] if self.pos < len(self.src) else ""

    # -- whitespace and names -----------------------------------------------------------------

    def space(self, newline_ok: bool) -> None:
        while self.pos < len(self.src):
            c = self.src[self.pos]
            if c == "#":
                while self.pos < len(self.src) and self.src[self.pos] not in "\r\n":
                    self.pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.pos += 1
            else:
                break

    def name(self) -> str:
        m = _NAME.match(self.src, self.pos)
        if not m:
            found = self.peek() or "the end"
            raise self.fail(f"expected a rule name, found {found!r}")
        self.pos = m.end()
        return m.group()

    # -- rules ------------------------------------------------------------------------------------

    def parse(self) -> Grammar:
        self.space(True)
        while self.pos < len(self.src):
            self.rule()
            self.space(True)
        return self.grammar

    def rule(self) -> None:
        start = self.pos
        name = self.name()
        self.space(False)
        if not self.src.startswith("::=", self.pos):
            raise self.fail(f"expected '::=' after the rule name {name!r}")
        self.pos += 3
        self.space(True)
        alternatives = self.alternatives(nested=False)
        if self.peek() not in ("", "\n", "\r"):
            raise self.fail(f"unexpected {self.peek()!r}; a rule ends at the end of its line")
        if name in self.grammar.rules:
            raise self.fail(f"the rule {name!r} is defined twice", start)
        self.grammar.rules[name] = alternatives

    def alternatives(self, nested: bool) -> list[list[_Item]]:
        alts = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return alts

    def sequence(self, nested: bool) -> list[_Item]:
        items: list[_Item] = []
        while True:
            c = self.peek()
            line, col = self.where()
            if c == '"':
                items.append(_Item("lit", self.literal(), line=line, col=col))
            elif c == "[":
                items.append(_Item("class", self.char_class(), line=line, col=col))
            elif c == ".":
                self.pos += 1
                items.append(_Item("any", line=line, col=col))
            elif c == "(":
                self.pos += 1
                self.space(True)
                group = self.alternatives(nested=True)
                if self.peek() != ")":
                    raise self.fail(
                        f"expected ')' to close the '(' opened at line {line}, column {col}"
                    )
                self.pos += 1
                items.append(_Item("group", group, line=line, col=col))
            elif c and _NAME.match(c):
                name = self.name()
                self.refs.append((name, line, col))
                items.append(_Item("ref", name, line=line, col=col))
            elif c in ("*", "+", "?", "{"):
                if not items:
                    raise self.fail(f"{c!r} has nothing before it to repeat")
                self.repetition(items[-1])
            else:
                return items
            self.space(nested)

    # -- terminals ------------------------------------------------------------------------------

    def escape(self) -> str:
        """The character of an escape sequence starting at a backslash."""
        start = self.pos
        self.pos += 1
        c = self.peek()
        if c in ("x", "u", "U"):
            digits = {"x": 2, "u": 4, "U": 8}[c]
            code = self.src[self.pos + 1 : self.pos + 1 + digits]
            if len(code) != digits or not all(ch in "0123456789abcdefABCDEF" for ch in code):
                raise self.fail(f"\\{c} needs {digits} hexadecimal digits", start)
            self.pos += 1 + digits
            return chr(int(code, 16)) if int(code, 16) <= 0x10FFFF else "\ufffd"
        if c not in _ESCAPES:
            raise self.fail(f"unknown escape '\\{c}'", start)
        self.pos += 1
        return {"n": "\n", "r": "\r", "t": "\t"}.get(c, c)

    def char(self, closing: str, what: str, opened: int) -> str:
        c = self.peek()
        if not c or c in "\r\n":
            raise self.fail(f"unterminated {what} (opened here)", opened)
        if c == "\\":
            return self.escape()
        self.pos += 1
        return c

    def literal(self) -> str:
        opened = self.pos
        self.pos += 1
        out = []
        while self.peek() != '"':
            out.append(self.char('"', "string", opened))
        self.pos += 1
        return "".join(out)

    def char_class(self) -> tuple[bool, list[tuple[str, str]]]:
        opened = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[str, str]] = []
        while self.peek() != "]":
            low = self.char("]", "character class", opened)
            high = low
            if self.peek() == "-" and self.src[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                high = self.char("]", "character class", opened)
                if ord(high) < ord(low):
                    raise self.fail(f"the range {low!r}-{high!r} runs backwards", opened)
            ranges.append((low, high))
        self.pos += 1
        return negated, ranges

    def repetition(self, item: _Item) -> None:
        if item.low != 1 or item.high != 1:
            raise self.fail("a repetition cannot follow another repetition; use parentheses")
        if item.kind == "lit" and item.value == "":
            raise self.fail('the empty string "" cannot be repeated (it adds nothing)')
        c = self.peek()
        if c != "{":
            self.pos += 1
            item.low, item.high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            return
        m = _BRACES.match(self.src, self.pos)
        if not m:
            raise self.fail("expected a repetition like {2}, {1,} or {0,5}")
        self.pos = m.end()
        low = int(m.group(1))
        high = low if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if high is not None and high < low:
            raise self.fail(f"the repetition {{{low},{high}}} has its maximum below its minimum")
        if max(low, high or 0) > MAX_REPETITION:
            raise self.fail(f"a repetition over {MAX_REPETITION} is too large")
        item.low, item.high = low, high


def _nullable(grammar: Grammar) -> set[str]:
    """Rules that can match the empty string."""
    found: set[str] = set()

    def item_nullable(item: _Item) -> bool:
        if item.low == 0:
            return True
        if item.kind == "lit":
            return item.value == ""
        if item.kind == "ref":
            return item.value in found
        if item.kind == "group":
            return any(all(item_nullable(i) for i in alt) for alt in item.value)  # type: ignore[union-attr]
        return False

    changed = True
    while changed:
        changed = False
        for name, alts in grammar.rules.items():
            if name not in found and any(all(item_nullable(i) for i in alt) for alt in alts):
                found.add(name)
                changed = True
    return found


def _left_refs(alts: list[list[_Item]], nullable: set[str]) -> set[str]:
    """Rules that can be reached first (before any character) from these alternatives."""
    out: set[str] = set()
    for alt in alts:
        for item in alt:
            if item.kind == "ref":
                out.add(item.value)  # type: ignore[arg-type]
            elif item.kind == "group":
                out |= _left_refs(item.value, nullable)  # type: ignore[arg-type]
            skip = item.low == 0 or (item.kind == "ref" and item.value in nullable)
            if item.kind == "lit" and item.value == "":
                skip = True
            if item.kind == "group":
                skip = skip or any(
                    all(_item_empty(i, nullable) for i in a)
                    for a in item.value  # type: ignore[union-attr]
                )
            if not skip:
                break
    return out


def _item_empty(item: _Item, nullable: set[str]) -> bool:
    if item.low == 0:
        return True
    if item.kind == "lit":
        return item.value == ""
    if item.kind == "ref":
        return item.value in nullable
    if item.kind == "group":
        return any(all(_item_empty(i, nullable) for i in a) for a in item.value)  # type: ignore[union-attr]
    return False


def _core_empty(item: _Item, nullable: set[str]) -> bool:
    """Whether the item, taken once (its own repetition ignored), can match nothing."""
    return _item_empty(_Item(item.kind, item.value), nullable)


def _items(alts: list[list[_Item]]) -> list[_Item]:
    out = []
    for alt in alts:
        for item in alt:
            out.append(item)
            if item.kind == "group":
                out += _items(item.value)  # type: ignore[arg-type]
    return out


def _check_empty_repetition(grammar: Grammar, nullable: set[str]) -> None:
    """``x*``, ``x+`` or ``x{n,}`` of an ``x`` that can match nothing: llama.cpp turns the
    repetition into a rule that calls itself first (left recursion)."""
    for alts in grammar.rules.values():
        for item in _items(alts):
            if item.high is None and _core_empty(item, nullable):
                raise GrammarError(
                    f"invalid grammar at line {item.line}, column {item.col}: the repeated part "
                    "can match nothing, so repeating it without limit never ends (llama.cpp "
                    "refuses it as left recursion); make it match at least one character"
                )


def _check_left_recursion(grammar: Grammar) -> None:
    nullable = _nullable(grammar)
    _check_empty_repetition(grammar, nullable)
    edges = {name: _left_refs(alts, nullable) for name, alts in grammar.rules.items()}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(edges.get(name, ())):
            if state.get(nxt) == 1:
                cycle = " -> ".join([*path[path.index(nxt) :], nxt]) if nxt in path else nxt
                raise GrammarError(
                    f"invalid grammar: the rule {nxt!r} is left-recursive ({cycle}); llama.cpp "
                    "cannot use left recursion: rewrite it with repetition (x ::= y (z)*)"
                )
            if state.get(nxt) is None and nxt in grammar.rules:
                visit(nxt, [*path, nxt])
        state[name] = 2

    for name in grammar.rules:
        if state.get(name) is None:
            visit(name, [name])


def check(text: str, root: str = "root") -> Grammar:
    """Parse and check a GBNF grammar; return it parsed, or raise :class:`GrammarError`."""
    if not isinstance(text, str) or not text.strip():
        raise GrammarError("invalid grammar: it is empty")
    if "\x00" in text:
        raise GrammarError("invalid grammar: it contains a NUL character")
    parser = _Parser(text)
    grammar = parser.parse()
    for name, line, col in parser.refs:
        if name not in grammar.rules:
            raise GrammarError(
                f"invalid grammar at line {line}, column {col}: the rule {name!r} is used but "
                "never defined"
            )
    if root not in grammar.rules:
        raise GrammarError(f"invalid grammar: there is no {root!r} rule to start from")
    _check_left_recursion(grammar)
    return grammar


# --- builders -------------------------------------------------------------------------------


def literal(text: str) -> str:
    """``text`` as a GBNF string literal (quotes, backslashes and control characters escaped)."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_text(text: str) -> str:
    """The characters of ``text`` as they appear inside a JSON string (no surrounding quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def alternatives(options: Iterable[str]) -> str:
    """``"a" | "b" | ...`` from plain strings."""
    opts = list(dict.fromkeys(options))
    if not opts:
        raise GrammarError("invalid grammar: a choice needs at least one option")
    return " | ".join(literal(o) for o in opts)


JSON_CHAR_RULE = r'jchar ::= [^"\\\x00-\x1F\x7F] | "\\" ["\\/bfnrt]'


def json_string_rule(name: str, max_chars: int) -> str:
    """A rule for a JSON string of at most ``max_chars`` characters (uses ``jchar``, see
    :data:`JSON_CHAR_RULE`)."""
    return f'{name} ::= "\\"" jchar{{0,{max_chars}}} "\\""'


def verbatim_span_rules(prefix: str, text: str, *, in_json: bool = False) -> list[str]:
    """Rules for "any run of whole words of ``text``, copied exactly": the rule ``prefix``
    matches a span that starts at a word and ends at a word, with the original spacing and
    punctuation between. With ``in_json`` the characters are JSON-escaped (the span sits inside
    a JSON string). ``text`` without words gives a rule that matches nothing but ``""``.

    One rule per word (``prefix-k ::= word_k (sep_k prefix-(k+1))?``), so the grammar grows
    linearly with the text, not with the number of possible spans.
    """
    esc = json_text if in_json else (lambda s: s)
    words = list(re.finditer(r"\S+", text))
    if not words:
        return [f'{prefix} ::= ""']
    rules = []
    for k, m in enumerate(words):
        word = literal(esc(m.group()))
        if k + 1 < len(words):
            sep = literal(esc(text[m.end() : words[k + 1].start()]))
            rules.append(f"{prefix}-{k} ::= {word} ({sep} {prefix}-{k + 1})?")
        else:
            rules.append(f"{prefix}-{k} ::= {word}")
    rules.insert(0, f"{prefix} ::= " + " | ".join(f"{prefix}-{k}" for k in range(len(words))))
    return rules
