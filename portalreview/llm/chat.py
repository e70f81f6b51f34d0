"""Prompts in the model's own chat format.

Instruction-tuned models (Llama 3, Qwen 2.5, Gemma, SmolLM2...) are trained on conversations
written in their chat format, which a GGUF file carries as the Jinja2 text
``tokenizer.chat_template``. We render that template once, with one user message holding a
placeholder, to learn the markup that goes before a user message (system turn, role header)
and after it (end of turn, the assistant turn's start). A prompt's segments are then wrapped:

    [markup before] instructions, case A, case B (without the cue) [markup after] cue

so that the instructions stay a shared first part (prefix reuse and the urgency probabilities
in both orders work as before) and the answer cue ("Answer:", "JSON:") opens the assistant's
turn, where the options " YES" / " NO" or the grammar-constrained JSON follow. The cue is the
template's own last line: a template whose last line holds a placeholder (it ends with
``{{message}}``) has none, and its prompt's last segment comes marked :class:`NoCue`, so no
substituted text (a patient's sign-off) can leave the user's turn. Markup segments
are :class:`ChatMarkup` and are tokenized with special tokens; every other segment is text and
never is, so a patient message holding "<|im_end|>" cannot end the turn. A model whose file
has no template, or one we cannot render, keeps plain completion.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

CHAT_TEMPLATE_KEY = "tokenizer.chat_template"
# A cue is the template's last line when it is this short ("Answer:", "Rewritten reply:").
MAX_CUE_CHARS = 40
_PLACEHOLDER = "PORTALREVIEW-USER-MESSAGE-7f3c"


class ChatMarkup(str):
    """A piece of the chat format's markup: tokenized with special tokens."""

    __slots__ = ()


class NoCue(str):
    """A prompt's last segment that ends with substituted text, not with the template's own
    wording: all of it stays in the user's turn."""

    __slots__ = ()


def keep_cue_mark(last_segment: str, text: str) -> str:
    """``text``, rebuilt from a prompt's last segment, marked :class:`NoCue` as that one was."""
    return NoCue(text) if isinstance(last_segment, NoCue) else text


class ChatTemplateError(ValueError):
    """The model's chat template cannot be used (it fails to render, or has no user turn)."""


@dataclass(frozen=True)
class ChatFormat:
    """The markup around one user message, from a model's chat template."""

    before: str
    after: str
    template_sha256: str

    def wrap(self, segments: Sequence[str]) -> list[str]:
        """The prompt's segments inside a user turn, the last line (the cue) after the
        assistant turn's start; a :class:`NoCue` prompt has no cue, and the assistant's turn
        starts empty. Already-wrapped prompts are returned as they are."""
        parts = [s for s in segments if s]
        if not parts or isinstance(parts[0], ChatMarkup):
            return parts
        no_cue = isinstance(segments[-1], NoCue)
        body, cue = (parts[-1], "") if no_cue else split_cue(parts[-1])
        content = [*parts[:-1], body]
        content[0] = content[0].lstrip()
        content[-1] = content[-1].rstrip()
        wrapped: list[str] = [ChatMarkup(self.before), *(str(c) for c in content if c)]
        wrapped.append(ChatMarkup(self.after))
        if cue:
            wrapped.append(cue)
        return wrapped

    def describe(self) -> dict[str, Any]:
        """What a suggestion's provenance records of the format."""
        return {
            "format": "chat",
            "chat_template_sha256": self.template_sha256,
            "before": self.before,
            "after": self.after,
        }


PLAIN_COMPLETION: dict[str, Any] = {"format": "completion"}


def split_cue(text: str) -> tuple[str, str]:
    """``(body, cue)``: the cue is the last line when it is short, else empty."""
    cut = text.rfind("\n")
    if cut < 0:
        return text, ""
    cue = text[cut + 1 :]
    if not cue.strip() or len(cue) > MAX_CUE_CHARS:
        return text, ""
    return text[:cut], cue


#: Bounds on rendering a model file's chat template, which is code the file brings: a few
#: loops and joins of a real template take milliseconds; one written to loop or grow for ever
#: would otherwise hold the model's load (and the machine's memory) for good.
RENDER_SECONDS = 2.0
RENDER_GROWTH_BYTES = 256 * 1024 * 1024
RENDER_RANGE = 10_000
RENDER_TEXT_CHARS = 1_000_000
RENDER_INT_BITS = 1_000_000


def chat_format(template: str, *, bos_token: str = "", eos_token: str = "") -> ChatFormat:
    """Learn the markup around a user message from a Jinja2 chat template, rendered in a
    sandbox the way Hugging Face and llama.cpp render it (``add_generation_prompt``), within
    the bounds above (:class:`ChatTemplateError` past them).
    ``bos_token``: pass "" when the engine adds the BOS token itself."""
    import jinja2

    def raise_exception(message: str) -> None:
        raise ChatTemplateError(f"the chat template refused the prompt: {message}")

    env = _bounded_sandbox()
    env.globals["raise_exception"] = raise_exception
    try:
        compiled = env.from_string(template)  # (its size bounds its compiling)
        with _render_bounds():
            text = compiled.render(
                messages=[{"role": "user", "content": _PLACEHOLDER}],
                add_generation_prompt=True,
                bos_token=bos_token,
                eos_token=eos_token,
            )
    except _RenderStopped as exc:
        raise ChatTemplateError(f"the model's chat template did not render: {exc}") from None
    except ChatTemplateError:
        raise
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ChatTemplateError(f"the model's chat template does not render: {exc}") from exc
    except (MemoryError, RecursionError, OverflowError) as exc:
        raise ChatTemplateError(
            f"the model's chat template does not render: it ran out of room ({exc!r})"
        ) from exc
    if text.count(_PLACEHOLDER) != 1:
        raise ChatTemplateError("the model's chat template does not show the user's message")
    before, after = text.split(_PLACEHOLDER)
    if not after.strip():
        raise ChatTemplateError("the model's chat template has no assistant turn to answer in")
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()
    return ChatFormat(before, after, digest)


def _bounded_sandbox() -> Any:
    """Jinja's immutable sandbox with shorter ranges and no repetition or power past the
    bounds (each checked before it is computed)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    def bounded_range(*args: int) -> range:
        numbers = range(*args)
        if len(numbers) > RENDER_RANGE:
            raise SecurityError(f"a range of {len(numbers)} is more than {RENDER_RANGE}")
        return numbers

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if _too_big(operator, left, right):
                raise SecurityError(f"a {operator} whose result would be too large")
            return super().call_binop(context, operator, left, right)

    env = Bounded(trim_blocks=True, lstrip_blocks=True)
    env.globals["range"] = bounded_range
    return env


def _too_big(operator: str, left: Any, right: Any) -> bool:
    """Whether ``left operator right`` (``*`` or ``**``) would make a value past the bounds:
    one C call a trace cannot stop, so it is judged before it is made."""
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(times, int):
                return len(seq) * times > RENDER_TEXT_CHARS
    ints = isinstance(left, int) and isinstance(right, int)
    if ints and operator == "*":
        return left.bit_length() + right.bit_length() > RENDER_INT_BITS
    if ints and operator == "**":
        return right > 0 and max(left.bit_length(), 1) * right > RENDER_INT_BITS
    return False


class _RenderStopped(BaseException):
    """Raised by the render's trace past a bound: a BaseException, so that no ``except
    ValueError`` in the template's own filters (``int``, ``float``) can swallow it (a trace
    that raises is switched off, and the render would go on unbounded)."""


@contextlib.contextmanager
def _render_bounds() -> Iterator[None]:
    """Stop the render once it ran :data:`RENDER_SECONDS`, or holds
    :data:`RENDER_GROWTH_BYTES` more memory than when it began (Python's own allocations, as
    tracemalloc counts them): a trace function, called on every line of the compiled
    template, looks at the clock, and every 256 calls at the memory."""
    deadline = time.monotonic() + RENDER_SECONDS
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    calls = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal calls
        calls += 1
        if time.monotonic() > deadline:
            raise _RenderStopped(f"it ran past {RENDER_SECONDS:g} s")
        if calls % 256 == 0 and tracemalloc.get_traced_memory()[0] - base > RENDER_GROWTH_BYTES:
            raise _RenderStopped(f"it took more than {RENDER_GROWTH_BYTES // 2**20} MB of memory")
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)
        if started_tracing:
            tracemalloc.stop()


def format_of(metadata: dict[str, Any], **tokens: str) -> tuple[ChatFormat | None, str]:
    """The chat format of a model file's metadata, or None with the reason plain completion
    is used."""
    template = metadata.get(CHAT_TEMPLATE_KEY)
    if not isinstance(template, str) or not template.strip():
        return None, "the model file has no chat template"
    try:
        return chat_format(template, **tokens), ""
    except ChatTemplateError as exc:
        return None, str(exc)


def prompt_format(chat: ChatFormat | None, note: str = "") -> dict[str, Any]:
    """What a suggestion's provenance records of how prompts reach a model."""
    if chat is not None:
        return chat.describe()
    return {**PLAIN_COMPLETION, "why": note} if note else dict(PLAIN_COMPLETION)


def segments_of(chat: ChatFormat | None, prompt: str | Sequence[str]) -> list[str]:
    """A prompt's segments as the model reads them: inside its chat format, if it has one."""
    segments = [prompt] if isinstance(prompt, str) else list(prompt)
    return chat.wrap(segments) if chat is not None else segments


def rendered(segments: Sequence[str]) -> str:
    """The prompt exactly as the model reads it (markup included)."""
    return "".join(segments)
