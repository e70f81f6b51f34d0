"""Semantic checks of model answers: what a grammar cannot guarantee (a span verbatim in its
text, a code of the codebook, a subcode under its own code...) is refused with every reason
listed, and good answers become the kind's payload."""

from __future__ import annotations

import json

import pytest

from portalreview.domain.catalogs import DEFAULT_CATALOGS as CAT
from portalreview.llm import answers
from portalreview.llm.errors import AnswerError

SENTENCE = "I have had chest pain since this morning, should I come in?"


def eppc(*results) -> str:
    return json.dumps(
        {"results": [dict(zip(("Code", "Sub-code", "Span"), r, strict=True)) for r in results]}
    )


def test_eppc_answer_becomes_labels_with_offsets():
    raw = eppc(
        ("InfoGive", "Symptoms", "chest pain"), ("InfoSeek", "SchedulingAppt", "should I come in?")
    )
    payload = answers.eppc_payload(raw, SENTENCE, CAT)
    start = SENTENCE.index("chest pain")
    assert payload["labels"][0] == {
        "code": "InfoGive",
        "subcode": "Symptoms",
        "spans": [[start, start + len("chest pain")]],
    }
    assert payload["labels"][1]["code"] == "InfoSeek"


def test_eppc_same_code_and_subcode_twice_makes_a_discontinuous_span():
    raw = eppc(
        ("InfoGive", "Symptoms", "chest pain"),
        ("InfoGive", "Symptoms", "this morning"),
        ("InfoGive", "Symptoms", "chest pain"),
    )
    (label,) = answers.eppc_payload(raw, SENTENCE, CAT)["labels"]
    assert len(label["spans"]) == 2


@pytest.mark.parametrize(
    "result, reason",
    [
        (("InfoGiving", "Symptoms", "chest pain"), "'InfoGiving' is not a code of the project's"),
        (
            ("InfoGive", "salutation", "chest pain"),
            "'salutation' is not a subcode of InfoGive (it is a subcode of PartnershipProvider, "
            "PartnershipPatient)",
        ),
        (("InfoGive", "Symptoms", "back pain"), "the span 'back pain' is not verbatim"),
        (("InfoGive", "Symptoms", ""), "is not verbatim"),
    ],
)
def test_eppc_refusals_say_why(result, reason):
    with pytest.raises(AnswerError) as info:
        answers.eppc_payload(eppc(result), SENTENCE, CAT)
    assert reason in str(info.value)


def test_eppc_lists_every_problem_and_one_subcode_per_code():
    raw = eppc(
        ("InfoGive", "Symptoms", "chest pain"),
        ("InfoGive", "Drugs", "chest pain"),
        ("Nope", "x", "y"),
    )
    with pytest.raises(AnswerError) as info:
        answers.eppc_payload(raw, SENTENCE, CAT)
    assert len(info.value.reasons) == 2
    assert "InfoGive is given two subcodes (Symptoms, Drugs)" in info.value.reasons[0]
    with pytest.raises(AnswerError, match="not valid JSON"):
        answers.eppc_payload("{results: ", SENTENCE, CAT)
    with pytest.raises(AnswerError, match="no 'results' list"):
        answers.eppc_payload("[]", SENTENCE, CAT)


def test_match_decision():
    draft = "I am sorry. Please go to the ER now."
    assert answers.match_decision(" NO MATCH", draft) == []
    assert answers.match_decision(" go to the ER", draft) == [[19, 31]]
    with pytest.raises(AnswerError, match="'go to urgent care' is not verbatim in the draft"):
        answers.match_decision("go to urgent care", draft)


def test_theme_label_and_empathy_verdict():
    assert answers.theme_label(" planning", CAT) == "planning"
    with pytest.raises(AnswerError, match="'plans' is not a theme"):
        answers.theme_label("plans", CAT)
    assert answers.empathy_payload(" Response 2", [7, 9]) == {"more_empathetic_response_id": 9}
    assert answers.empathy_payload("Equally empathetic", [7, 9]) == {"equal": True}
    with pytest.raises(AnswerError, match="not one of"):
        answers.empathy_payload("Both", [7, 9])


def test_rank_answer():
    raw = json.dumps(
        {
            "ranking": [
                {"response": "A", "rank": 2, "correct": False, "criteria": ["C1", "C1"]},
                {"response": "B", "rank": 1, "correct": True, "criteria": []},
            ]
        }
    )
    payload = answers.rank_payload(raw, ["A", "B"], [11, 12], CAT)
    assert payload["entries"][0] == {
        "response_id": 11,
        "rank": 2,
        "correct": False,
        "criteria": ["C1"],
    }
    bad = json.dumps(
        {
            "ranking": [
                {"response": "A", "rank": 5, "correct": True, "criteria": ["C9"]},
                {"response": "Z", "rank": 1, "correct": "yes"},
            ]
        }
    )
    with pytest.raises(AnswerError) as info:
        answers.rank_payload(bad, ["A", "B"], [11, 12], CAT)
    text = str(info.value)
    for reason in (
        "rank 5 is not between 1 and 2",
        "unknown criterion 'C9'",
        "only for a reply marked incorrect",
        "'Z' is not one of the replies",
        "'correct' must be true or false",
        "no entry for B",
    ):
        assert reason in text


def test_respond_answer():
    raw = json.dumps({"empathy": " Sorry to hear that. ", "planning": "", "other": "x"})
    assert answers.respond_payload(raw, CAT) == {
        "mode": "theme_guided",
        "parts": {"empathy": "Sorry to hear that.", "other": "x"},
        "notes": "",
    }
    with pytest.raises(AnswerError, match="every box is empty"):
        answers.respond_payload(json.dumps({"empathy": " "}), CAT)
    with pytest.raises(AnswerError, match="'jokes' is not a theme"):
        answers.respond_payload(json.dumps({"jokes": "ha"}), CAT)


def test_fact_list():
    assert answers.fact_list('["PSA is 4.2", " PSA is 4.2", "", "Start antibiotics"]') == [
        "PSA is 4.2",
        "Start antibiotics",
    ]
    with pytest.raises(AnswerError, match="item 1 is not text"):
        answers.fact_list('["a", 3]')


# --- answers of the wrong JSON types (an unconstrained model, a server ignoring the grammar) ---

RANK_GOOD = {
    "ranking": [
        {"response": "A", "rank": 2, "correct": False, "criteria": ["C1"]},
        {"response": "B", "rank": 1, "correct": True, "criteria": []},
    ]
}
EPPC_GOOD = {"results": [{"Code": "InfoGive", "Sub-code": "Symptoms", "Span": "chest pain"}]}


@pytest.mark.parametrize(
    "entry, reason",
    [
        ({"response": ["A"], "rank": 1, "correct": True}, "['A'] is not one of the replies"),
        ({"response": {"A": 1}, "rank": 1, "correct": True}, "{'A': 1} is not one of the"),
        ({"response": 1, "rank": 1, "correct": True}, "1 is not one of the replies"),
        (
            {"response": "A", "rank": 1, "correct": False, "criteria": [{"id": "C1"}]},
            "unknown criterion {'id': 'C1'}",
        ),
        (
            {"response": "A", "rank": 1, "correct": False, "criteria": [["C1"]]},
            "unknown criterion ['C1']",
        ),
        (
            {"response": "A", "rank": 1, "correct": False, "criteria": {"C1": True}},
            "'criteria' must be a list",
        ),
    ],
)
def test_rank_fields_of_the_wrong_type_are_refused_with_reasons(entry, reason):
    raw = json.dumps({"ranking": [entry, {"response": "B", "rank": 2, "correct": True}]})
    with pytest.raises(AnswerError) as info:
        answers.rank_payload(raw, ["A", "B"], [11, 12], CAT)
    assert reason in str(info.value)


@pytest.mark.parametrize(
    "result, reason",
    [
        ((["InfoSeek"], "Symptoms", "chest pain"), "['InfoSeek'] is not a code of the project's"),
        (({"InfoGive": 1}, "Symptoms", "chest pain"), "is not a code of the project's"),
        ((None, "Symptoms", "chest pain"), "None is not a code of the project's"),
        (("InfoGive", ["Symptoms"], "chest pain"), "the subcode ['Symptoms'] is not text"),
        (("InfoGive", 3, "chest pain"), "the subcode 3 is not text"),
        (("InfoGive", "Symptoms", ["chest pain"]), "is not verbatim"),
    ],
)
def test_eppc_fields_of_the_wrong_type_are_refused_with_reasons(result, reason):
    with pytest.raises(AnswerError) as info:
        answers.eppc_payload(eppc(result), SENTENCE, CAT)
    assert reason in str(info.value)


def _random_json(rng, depth: int = 0):
    """Any JSON value, now and then one a parser looks for (a reply label, a criterion, a
    code, a subcode, a span of SENTENCE, a theme)."""
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, 1, 2, -1, 3, 10**20, 1.5, float("1e308")])
    if pick in (3, 4, 5):
        return rng.choice(
            [
                "",
                "A",
                "B",
                "C",
                "C1",
                "C9",
                "InfoGive",
                "InfoSeek",
                "Symptoms",
                "SchedulingAppt",
                "chest pain",
                "empathy",
                "planning",
                "x",
                " ",
            ]
        )
    if pick in (6, 7):
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = [
        "response",
        "rank",
        "correct",
        "criteria",
        "Code",
        "Sub-code",
        "Span",
        "ranking",
        "results",
        "empathy",
        "other",
        "zzz",
    ]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def _mutated(rng, value):
    """``value`` with one node (or itself) replaced by a random JSON value."""
    if rng.random() < 0.2 or not isinstance(value, dict | list) or not value:
        return _random_json(rng)
    value = json.loads(json.dumps(value))
    key = rng.choice(list(value)) if isinstance(value, dict) else rng.randrange(len(value))
    value[key] = _mutated(rng, value[key])
    return value


def _text(value) -> bool:
    return isinstance(value, str)


PARSERS = {
    "rank": (RANK_GOOD, lambda raw: answers.rank_payload(raw, ["A", "B"], [11, 12], CAT)),
    "eppc": (EPPC_GOOD, lambda raw: answers.eppc_payload(raw, SENTENCE, CAT)),
    "respond": (
        {"empathy": "Sorry.", "planning": "Come in."},
        lambda raw: answers.respond_payload(raw, CAT),
    ),
    "facts": (["PSA is 4.2", "Start antibiotics"], answers.fact_list),
}


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_any_json_answer_is_a_payload_or_refused_with_reasons(kind):
    """Thousands of answers of every JSON type in every field: each one is a well-typed
    payload or an AnswerError, never a Python error that would stop the batch."""
    import random

    good, parse = PARSERS[kind]
    rng = random.Random(f"answers-{kind}")
    refused = 0
    for _ in range(3000):
        document = _mutated(rng, good) if rng.random() < 0.8 else _random_json(rng)
        try:
            payload = parse(json.dumps(document))
        except AnswerError as exc:
            assert exc.reasons and all(_text(r) for r in exc.reasons)
            refused += 1
            continue
        if kind == "rank":
            for entry in payload["entries"]:
                assert entry["response_id"] in (11, 12) and type(entry["rank"]) is int
                assert type(entry["correct"]) is bool and all(map(_text, entry["criteria"]))
        elif kind == "eppc":
            for label in payload["labels"]:
                assert _text(label["code"]) and _text(label["subcode"])
        elif kind == "respond":
            assert all(map(_text, payload["parts"].values()))
        else:
            assert all(map(_text, payload))
    assert 0 < refused < 3000


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("1" * 5_000, "a number with more than 4,300 digits"),
    ],
)
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_json_python_cannot_hold_is_an_unparsable_answer(kind, raw, reason):
    """A RecursionError, and an AttributeError (a ValueError has no .msg), stopped the batch."""
    with pytest.raises(AnswerError, match=rf"not valid JSON \({reason}\)"):
        PARSERS[kind][1](raw)
