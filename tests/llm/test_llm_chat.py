"""Prompts in the model's chat format (portalreview.llm.chat): the markup learnt from a Jinja2
template, the wrapping that keeps the instructions a shared first part, and the engine with a
model file that carries a template (random weights; the real SmolLM2 is in
test_llm_real_model.py)."""

from __future__ import annotations

import pytest
from llm_testkit import tiny_model  # noqa: F401 - fixture

from portalreview.llm.chat import (
    ChatMarkup,
    ChatTemplateError,
    chat_format,
    format_of,
    split_cue,
)
from portalreview.llm.engine import Engine
from portalreview.llm.errors import ModelFileError
from portalreview.llm.suggest import one_token_options
from portalreview.llm.templates import TEMPLATE_KINDS, PromptTemplate, default_template
from portalreview.llm.testing_model import TINY, prompt_corpus, write_model
from portalreview.llm.urgency import Patient, inbox_prompt, pair_probability

CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou help.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)


def test_chatml_markup_is_what_the_template_writes_around_a_user_message() -> None:
    fmt = chat_format(CHATML)
    assert fmt.before == "<|im_start|>system\nYou help.<|im_end|>\n<|im_start|>user\n"
    assert fmt.after == "<|im_end|>\n<|im_start|>assistant\n"
    assert len(fmt.template_sha256) == 64


def test_bos_token_is_written_only_when_passed() -> None:
    assert chat_format(LLAMA3).before == "<|start_header_id|>user<|end_header_id|>\n\n"
    assert chat_format(LLAMA3, bos_token="<s>").before.startswith("<s><|start_header_id|>")


def test_wrap_keeps_instructions_a_shared_first_part_and_puts_the_cue_in_the_answer_turn() -> None:
    fmt = chat_format(CHATML)
    ab = fmt.wrap(["Sort them.\n\n", "Patient A\nx", "\n\nPatient B\ny\n\nA first?\nAnswer:"])
    ba = fmt.wrap(["Sort them.\n\n", "Patient A\ny", "\n\nPatient B\nx\n\nA first?\nAnswer:"])
    assert ab[:2] == ba[:2]  # markup and instructions: shared tokens, evaluated once
    assert isinstance(ab[0], ChatMarkup) and isinstance(ab[-2], ChatMarkup)
    assert not any(isinstance(s, ChatMarkup) for s in ab[1:-2])
    assert ab[-1] == "Answer:"
    assert "".join(ab) == (
        "<|im_start|>system\nYou help.<|im_end|>\n<|im_start|>user\nSort them.\n\nPatient A\nx"
        "\n\nPatient B\ny\n\nA first?<|im_end|>\n<|im_start|>assistant\nAnswer:"
    )
    assert fmt.wrap(ab) == ab  # wrapping twice changes nothing


def test_split_cue() -> None:
    assert split_cue("Question?\nAnswer:") == ("Question?", "Answer:")
    assert split_cue("Question?\nLevel: ") == ("Question?", "Level: ")
    assert split_cue("no newline") == ("no newline", "")
    long_line = "x" * 80
    assert split_cue(f"a\n{long_line}") == (f"a\n{long_line}", "")
    assert split_cue("a\n   ") == ("a\n   ", "")


ENDS_WITH_MESSAGE = "Write a short reply.\n\n{{chart}}\n\nMessage from the patient:\n{{message}}"


@pytest.mark.parametrize(
    "message",
    ["Could we talk about it? No rush.\nThanks,\nLena", "Thanks!"],
    ids=["sign-off on its own line", "one short line"],
)
def test_a_template_ending_with_a_placeholder_keeps_the_whole_message_in_the_user_turn(
    message: str,
) -> None:
    fmt = chat_format(CHATML)
    template = PromptTemplate("draft_zero_shot", "mine", ENDS_WITH_MESSAGE, "mine@v1")
    values = {"chart": "Age 40.", "message": message}
    user = ENDS_WITH_MESSAGE.replace("{{chart}}", "Age 40.").replace("{{message}}", message)
    wrapped = fmt.wrap(template.render(values))
    # as the model's own template renders one user message: the assistant's turn starts empty
    assert "".join(wrapped) == fmt.before + user + fmt.after
    assert isinstance(wrapped[-1], ChatMarkup)


class _CharTokenizer:
    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]


def test_prompts_rebuilt_from_the_last_segment_keep_the_message_in_the_user_turn() -> None:
    fmt = chat_format(CHATML)
    level = PromptTemplate("urgency_level", "mine", "{{levels}}\n{{chart}}\n{{message}}", "l@v1")
    segments = level.render({"levels": "1-6", "chart": "Age 40.", "message": "Hi\nLena"})
    one_token, _ = one_token_options(_CharTokenizer(), segments, ["1", "2"])
    assert "".join(fmt.wrap(one_token)).endswith("Hi\nLena<|im_end|>\n<|im_start|>assistant\n")
    text = "Inbox:\n{{patients}}\n\nIs {{first}} more urgent\nthan {{second}}"
    inbox = PromptTemplate("urgency_inbox", "mine", text, "i@v1")
    wrapped = fmt.wrap(inbox_prompt(inbox, "1. a\n2. b", 1, 2))
    assert "".join(wrapped).endswith("more urgent\nthan 2<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("kind", list(TEMPLATE_KINDS))
def test_a_bundled_template_still_opens_the_answer_turn_with_its_last_line(kind: str) -> None:
    fmt = chat_format(CHATML)
    template = default_template(kind)
    values = {p: f"{p} value\nsigned,\nLena" for p in template.spec.allowed}
    rendered = "".join(template.render(values))
    body, cue = rendered.rsplit("\n", 1)
    assert cue == template.text.rstrip().rsplit("\n", 1)[1]  # fixed wording, e.g. "Answer:"
    wrapped = fmt.wrap(template.render(values))
    assert wrapped[-1] == cue
    assert "".join(wrapped) == fmt.before + body.strip() + fmt.after + cue


def test_templates_that_cannot_serve_are_refused_with_a_reason() -> None:
    with pytest.raises(ChatTemplateError, match="does not render"):
        chat_format("{% for m in messages %}{{ m.content ")
    with pytest.raises(ChatTemplateError, match="refused the prompt: no users"):
        chat_format("{{ raise_exception('no users') }}")
    with pytest.raises(ChatTemplateError, match="does not show the user"):
        chat_format("{% if add_generation_prompt %}assistant:{% endif %}")
    with pytest.raises(ChatTemplateError, match="no assistant turn"):
        chat_format("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert format_of({}) == (None, "the model file has no chat template")
    fmt, note = format_of({"tokenizer.chat_template": "{{ raise_exception('x') }}"})
    assert fmt is None and "refused" in note


def test_the_sandbox_refuses_unsafe_templates() -> None:
    with pytest.raises(ChatTemplateError):
        chat_format("{{ ''.__class__.__mro__[1].__subclasses__() }}")


@pytest.fixture(scope="module")
def chat_engine(tmp_path_factory: pytest.TempPathFactory):
    path = write_model(
        tmp_path_factory.mktemp("chat") / "chat.gguf",
        TINY,
        corpus=prompt_corpus(),
        chat_template=CHATML,
    )
    eng = Engine.load(path, gpu=False, hash_cache=False)
    yield eng
    eng.close()


def test_engine_uses_the_template_of_the_model_file(chat_engine) -> None:
    assert chat_engine.chat is not None
    assert chat_engine.prompt_format["format"] == "chat"
    rendered = chat_engine.render_prompt(["Instructions\n", "Question\nAnswer:"])
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith("assistant\nAnswer:")


def test_engine_without_a_template_keeps_plain_completion(tiny_model) -> None:  # noqa: F811
    with Engine.load(tiny_model, gpu=False, hash_cache=False) as eng:
        assert eng.chat is None
        assert eng.prompt_format == {
            "format": "completion",
            "why": "the model file has no chat template",
        }
        assert eng.render_prompt(["a\n", "b\nAnswer:"]) == "a\nb\nAnswer:"


def test_a_chat_template_that_is_not_jinja_is_named_on_loading(tmp_path) -> None:
    """llama-cpp-python compiles a file's chat template when it loads it and refuses one
    that is not Jinja: the words name the template, not a jinja2 traceback."""
    path = write_model(
        tmp_path / "bad.gguf", TINY, corpus=prompt_corpus(), chat_template="{% for x in %}"
    )
    with pytest.raises(ModelFileError, match=r"chat template \(tokenizer.chat_template\) is not"):
        Engine.load(path, gpu=False, hash_cache=False)


def test_chat_can_be_turned_off(tmp_path_factory) -> None:
    path = write_model(
        tmp_path_factory.mktemp("off") / "m.gguf",
        TINY,
        corpus=prompt_corpus(),
        chat_template=CHATML,
    )
    with Engine.load(path, gpu=False, hash_cache=False, chat=False) as eng:
        assert eng.chat is None and eng.prompt_format["why"] == "chat format turned off"


def test_urgency_in_both_orders_reuses_the_shared_prefix_and_gives_the_same_numbers(
    chat_engine,
) -> None:
    template = default_template("urgency_pair")
    a = Patient(1, "I have crushing chest pain since this morning.", "Age: 61")
    b = Patient(2, "Can I get a copy of my flu shot record?", "Age: 30")
    reused = pair_probability(chat_engine, template, a, b, reuse_prefix=True)
    fresh = pair_probability(chat_engine, template, a, b, reuse_prefix=False)
    assert reused.p_yes_ab == pytest.approx(fresh.p_yes_ab, abs=1e-6)
    assert reused.p_yes_ba == pytest.approx(fresh.p_yes_ba, abs=1e-6)
    segments = chat_engine.prompt_segments(template.render({
        "chart_a": a.chart, "message_a": a.message, "chart_b": b.chart, "message_b": b.message
    }))
    assert segments[-1] == "Answer:" and isinstance(segments[0], ChatMarkup)
    # a second question that shares patient A evaluates only what differs
    chat_engine.choice_probabilities(segments, [" YES", " NO"])
    other = Patient(3, "My knee hurts a little when I run.", "Age: 40")
    result = chat_engine.choice_probabilities(
        template.render({
            "chart_a": a.chart, "message_a": a.message,
            "chart_b": other.chart, "message_b": other.message,
        }),
        [" YES", " NO"],
    )
    assert result.evaluated_tokens < result.prompt_tokens / 2


@pytest.mark.parametrize(
    ("template", "why"),
    [
        (
            "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}",
            "ran past 2 s",
        ),
        (  # the int filter catches ValueError: the stop must pass through it
            "{% for a in range(10000) %}{% for b in range(10000) %}{% set x = (b ~ 'a')|int %}"
            "{% endfor %}{% endfor %}",
            "ran past 2 s",
        ),
        ("{{ (((10 ** 64) ** 64) ** 64) ** 64 }}", "too large"),
        ("{{ 7 ** 2000000 }}", "too large"),
        ("{% for a in range(100000) %}x{% endfor %}", "more than 10000"),
        ("{{ 'x' * 10 ** 10 }}", "too large"),
        (
            "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}"
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ messages[0].content }}",
            "MB of memory",
        ),
    ],
    ids=["loops", "int filter", "power tower", "power", "range", "repeat", "doubling"],
)
def test_a_template_that_loops_or_grows_for_ever_is_stopped(template, why) -> None:
    """A chat template is code the model file brings: one written to run or grow for ever
    held the model's load at full speed until memory ran out. It is stopped, and the model
    keeps plain completion with the reason."""
    with pytest.raises(ChatTemplateError, match=why):
        chat_format(template)
    fmt, note = format_of({"tokenizer.chat_template": template})
    assert fmt is None and why in note
