"""The GBNF checker refuses every grammar llama.cpp would refuse (an invalid grammar crashes
the process in the current bindings, so it must never get that far), with the line and
column of the problem; the builders produce grammars both parsers accept."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_testkit import engine, tiny_model_file  # noqa: F401 - fixtures

from portalreview.llm import gbnf
from portalreview.llm.engine import _native_grammar_check
from portalreview.llm.errors import GrammarError


def native_ok(engine, text: str) -> bool:  # noqa: F811
    try:
        _native_grammar_check(engine._llm, text)
        return True
    except GrammarError:
        return False


def test_llama_cpp_sample_grammars_pass():
    import llama_cpp.llama_grammar as lg

    for name in dir(lg):
        if name.endswith("_GBNF"):
            gbnf.check(getattr(lg, name))


def test_grammars_from_json_schemas_pass():
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    schema = (
        '{"type": "object", "properties": {"a": {"type": "string", "maxLength": 5},'
        '"b": {"enum": ["x", "y"]}, "c": {"type": "array", "items": {"type": "integer"}}},'
        '"required": ["a"]}'
    )
    gbnf.check(json_schema_to_gbnf(schema))


@pytest.mark.parametrize(
    "text, message",
    [
        ('root ::= "a" b', "line 1, column 14: the rule 'b' is used but never defined"),
        ('root ::= ("a"', "to close the .* opened at line 1, column 10"),
        ('root ::= "a', "unterminated string"),
        ("root ::= [a-", "unterminated character class"),
        ('x ::= "a"', "there is no 'root' rule"),
        ('root ::= root "a"', "left-recursive"),
        ('root ::= x\nx ::= y "a"\ny ::= "b"? root', "left-recursive"),
        ('root ::= "\\q"', "unknown escape"),
        ('root ::= "\\x4"', "needs 2 hexadecimal digits"),
        ('root ::= "a"{3,1}', "maximum below its minimum"),
        ('root ::= "a"**', "cannot follow another repetition"),
        ('root ::= * "a"', "nothing before it to repeat"),
        ('root ::= "a" )', "a rule ends at the end of its line"),
        ('root ::= "a"\n  "b"', "line 2, column 3: expected a rule name"),
        ('root ::= "a"\nroot ::= "b"', "defined twice"),
        ("root_x ::= [a]", "expected '::='"),
        ("root ::= [z-a]", "runs backwards"),
        ("", "it is empty"),
        ('root ::= "a" ""*', 'the empty string "" cannot be repeated'),
        ('root ::= ("a" | "")*', "can match nothing"),
        ('root ::= x+\nx ::= "b"?', "can match nothing"),
        ('root ::= ("a"*) root', "left-recursive"),
        ('root ::= "a"{1,\n}', "expected a repetition like"),
    ],
)
def test_errors_name_the_problem(text, message):
    with pytest.raises(GrammarError, match=message):
        gbnf.check(text)


# Only some refusals are safe to show llama.cpp: an inverted repetition such as {3,1} makes
# its parser exhaust the memory, which is why nothing unchecked may reach it.
@pytest.mark.parametrize(
    "text",
    ['root ::= "a" b', 'root ::= ("a"', 'root ::= "a', 'x ::= "a"', 'root ::= root "a"'],
)
def test_llama_cpp_refuses_them_too(engine, text):  # noqa: F811
    with pytest.raises(GrammarError):
        gbnf.check(text)
    assert not native_ok(engine, text)


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "a" # a comment\n',
        'root ::= ( "a"\n  | "b" )',
        'root ::= "a" |\n  "b"',
        'root ::= [^"\\\\\\x00-\\x1F] [\\-a] "\\u00e9"',
        'root ::= x{2} x{0,3} x{1,}\nx ::= "a"',
        'root ::= ""',
        'root ::= x "a"\nx ::= "b"?',
    ],
)
def test_valid_grammars_pass_both_parsers(engine, text):  # noqa: F811
    gbnf.check(text)
    assert native_ok(engine, text)


_ATOMS = ['"a"', '"b\\n"', "[a-z]", '[^"\\\\]', ".", '""', '"\\x41"', "[\\-x]", '"\\u00e9"']
_REPEATS = ["", "", "", "*", "+", "?", "{2}", "{0,3}", "{1,}"]
_NOISE = list('"[]()|*+?{},\\ \n-^.#:=a0x')


def _random_grammar(rng) -> str:
    """A random grammar, then up to two random edits (most edits make it invalid)."""
    names = ["root"] + [f"r{i}" for i in range(rng.randint(0, 3))]

    def element(depth: int) -> str:
        pick = rng.random()
        if pick < 0.2:
            core = rng.choice(names)
        elif pick < 0.35 and depth < 2:
            core = "(" + alternatives(depth + 1) + ")"
        else:
            core = rng.choice(_ATOMS)
        return core + rng.choice(_REPEATS)

    def alternatives(depth: int) -> str:
        seqs = [
            " ".join(element(depth) for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(1, 3))
        ]
        return (" | " if rng.random() < 0.7 else " |\n ").join(seqs)

    text = "\n".join(f"{n} ::= {alternatives(0)}" for n in names) + "\n"
    for _ in range(rng.randint(0, 2)):
        i = rng.randrange(len(text) + 1)
        pick = rng.random()
        if pick < 0.4:
            text = text[:i] + rng.choice(_NOISE) + text[i:]
        elif pick < 0.8:
            text = text[:i] + text[i + 1 :]
        else:
            text = text[:i] + text[i : i + 3] + text[i:]
    return text


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.randoms(use_true_random=False))
def test_whatever_the_checker_accepts_llama_cpp_accepts(engine, rng):  # noqa: F811
    """Soundness: a grammar our checker lets through never makes llama.cpp fail."""
    text = _random_grammar(rng)
    try:
        gbnf.check(text)
    except GrammarError:
        return
    assert native_ok(engine, text), text


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=0, max_size=20))
def test_literals_round_trip(engine, value):  # noqa: F811
    value = value.replace("\x00", "")
    text = f"root ::= {gbnf.literal(value)}\n"
    parsed = gbnf.check(text)
    assert parsed.rules["root"][0][0].value == value
    assert native_ok(engine, text)


def test_verbatim_span_rules_accept_only_copied_words():
    rules = gbnf.verbatim_span_rules("span", 'Call "911" now.\nThen rest.', in_json=True)
    gbnf.check("\n".join(["root ::= span", *rules]))
    assert rules[0] == "span ::= span-0 | span-1 | span-2 | span-3 | span-4"
    assert rules[2] == 'span-1 ::= "\\\\\\"911\\\\\\"" (" " span-2)?'
    assert gbnf.verbatim_span_rules("s", "   ") == ['s ::= ""']
