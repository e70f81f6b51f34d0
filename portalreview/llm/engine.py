"""The engine: one local GGUF model, loaded once, used from one worker thread at a time.

Threading contract (what the GUI relies on):

* :meth:`Engine.load` is slow (seconds to minutes): call it off the GUI thread. Only one model
  loads at a time in the process (the bindings redirect the process's stdout/stderr while a
  model loads), so concurrent loads queue.
* Every other call runs on whichever thread calls it, and one engine serves one call at a time:
  a second concurrent call raises :class:`EngineBusyError` instead of corrupting the model's
  state. Run all model work on one worker thread (a queue).
* A ``cancel`` :class:`threading.Event` may be set from any thread; it is checked before every
  generated token and between prompt chunks, so cancelling takes effect within one token.
* :meth:`Engine.close` may be called from any thread (the GUI's quit handler): it stops the
  running generation at its next token, waits for it to let go of the model, then frees it.

How it runs: all layers are offloaded to the GPU when the llama.cpp build supports offload,
otherwise the model runs on the CPU with one thread per physical core (a guess: logical cores
halved above four). The context size comes from the model's trained length within a memory
budget (:func:`portalreview.llm.model_file.plan_memory`). A prompt is a list of *segments*,
tokenized one by one; prompts that share leading segments share their tokens exactly, so the
key/value cache of the shared prefix is reused (llama.cpp keeps the cache of the last prompt;
we evaluate only the suffix that differs).
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portalreview.llm import gbnf
from portalreview.llm.chat import (
    CHAT_TEMPLATE_KEY,
    ChatFormat,
    ChatMarkup,
    format_of,
    segments_of,
)
from portalreview.llm.chat import prompt_format as describe_prompt_format
from portalreview.llm.errors import (
    EngineBusyError,
    EngineClosedError,
    GrammarError,
    LlmError,
    ModelFileError,
    PromptTooLongError,
)
from portalreview.llm.model_file import (
    FileIdentity,
    GgufHeader,
    available_memory,
    default_hash_cache,
    loaded_model_sha256,
    plan_memory,
    read_header,
    remembered_sha256,
)

log = logging.getLogger(__name__)
_LOAD_LOCK = threading.Lock()
_SEGMENT_CACHE = 4096  # tokenized prompt segments kept (an inbox repeats each text 58 times)
Prompt = str | Sequence[str]


def default_threads() -> int:
    """Threads for token generation: one per physical core, as far as Python can tell."""
    try:
        logical = len(os.sched_getaffinity(0))
    except AttributeError:
        logical = os.cpu_count() or 1
    return max(1, logical if logical <= 4 else logical // 2)


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build can offload layers to a GPU."""
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def _build_name() -> str:
    import llama_cpp

    return f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')}"


def _gpu_backend_name() -> str:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    for key, label in (
        ("CUDA", "CUDA"),
        ("METAL", "Metal"),
        ("VULKAN", "Vulkan"),
        ("HIP", "ROCm"),
        ("SYCL", "SYCL"),
    ):
        if key in info.upper():
            return f"GPU ({label})"
    return "GPU"


@dataclass(frozen=True)
class EngineInfo:
    """What the settings page and the status bar show about the loaded model."""

    path: Path
    model_name: str
    architecture: str
    size_bytes: int
    weight_types: dict[str, int]
    device: str  # "CPU" or "GPU (CUDA)"...
    gpu_layers: int  # layers offloaded to the GPU
    n_layers: int
    n_threads: int
    n_ctx: int
    n_ctx_train: int
    load_seconds: float
    build: str = ""  # the llama.cpp that ran it: "llama-cpp-python 0.3.36", a server's build

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def runtime(self) -> dict[str, Any]:
        """Where the model ran, for a suggestion's provenance: the same file, prompt and greedy
        settings can give another answer on a GPU than on a CPU (docs/llm.md, "On a GPU")."""
        return {
            "device": self.device,
            "gpu_layers": self.gpu_layers,
            "n_layers": self.n_layers,
            "n_threads": self.n_threads,
            "build": self.build,
        }

    def describe(self) -> str:
        main = max(self.weight_types, key=self.weight_types.get) if self.weight_types else "?"
        where = (
            f"on the {self.device}, {self.gpu_layers} of {self.n_layers} layers offloaded"
            if self.gpu_layers
            else f"on the CPU with {self.n_threads} thread{'s' * (self.n_threads != 1)}"
        )
        return (
            f"{self.model_name} ({main}, {self.size_bytes / 1024**3:.1f} GB) {where}; "
            f"context {self.n_ctx} tokens"
        )


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters; stored with every suggestion. Greedy (temperature 0) by default,
    so that a suggestion can be reproduced."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChoiceProbabilities:
    """Next-token probabilities of a few answer options (no text generated).

    ``probs``: per option, the probability of its first token renormalized over the options
    (they sum to 1). ``mass``: how much of the full next-token distribution the options hold
    (near 1 when the model answers in the asked format; small means the numbers say little).
    """

    probs: dict[str, float]
    mass: float
    token_ids: dict[str, int]
    prompt_tokens: int
    evaluated_tokens: int

    @classmethod
    def of(
        cls, raw: dict[str, float], token_ids: dict[str, int], prompt_tokens: int, evaluated: int
    ) -> ChoiceProbabilities:
        """From each option's probability in the whole distribution (``raw``): renormalized
        over the options (even when they hold no mass at all)."""
        mass = sum(raw.values())
        if mass <= 0:
            probs = {c: 1.0 / len(raw) for c in raw}
        else:
            probs = {c: v / mass for c, v in raw.items()}
        return cls(probs, mass, token_ids, prompt_tokens, evaluated)


@dataclass
class Generation:
    """A streamed generation. Iterate it to receive text pieces (one per token, or fewer when a
    character spans tokens); afterwards ``text``, ``token_ids``, ``finish_reason`` ("stop",
    "length", "cancelled" or "closed") and ``seconds`` describe the whole run. ``engine`` is
    the :class:`Engine` or the :class:`~portalreview.llm.engines.process.ProcessEngine` that
    runs it."""

    engine: Any
    tokens: list[int]
    params: GenerationParams
    grammar: str | None
    cancel: threading.Event | None
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    seconds: float = 0.0
    evaluated_prompt_tokens: int = 0
    # whether a "length" stop was the model's context filling up, where the engine knows it
    # better than the counts here (the server's own count of tokens; see cut_off)
    context_full: bool | None = None

    @property
    def prompt_tokens(self) -> int:
        return len(self.tokens)

    def __iter__(self) -> Iterator[str]:
        return self.engine._run(self)

    def wait(self) -> Generation:
        """Run to the end (or cancel) and return self."""
        for _ in self:
            pass
        return self

    def cut_off(self) -> str:
        """Why a generation that ended with ``finish_reason == "length"`` stopped, in words a
        PI can act on: the model's context was full (the prompt took most of it), or the
        answer reached the token limit."""
        generated, limit = len(self.token_ids), self.params.max_tokens
        info = getattr(self.engine, "info", None)
        n_ctx = int(getattr(info, "n_ctx", 0) or 0)
        full = self.context_full
        if full is None:  # the local engine stops when prompt + answer - 1 reach n_ctx
            full = generated < limit and self.prompt_tokens + generated >= n_ctx - 1
        if full and n_ctx:
            room = max(0, n_ctx - self.prompt_tokens)
            return (
                f"the model's context ({n_ctx} tokens) is full: the prompt takes "
                f"{self.prompt_tokens}, which left room for {room} tokens of answer; use a "
                "larger context or shorter inputs"
            )
        if generated < limit and self.context_full is None:
            return f"it was cut off at {generated} tokens, before the token limit ({limit})"
        return f"it was cut off at {limit} tokens (raise the token limit)"


class Engine:
    """One loaded model. Build with :meth:`load`; close with :meth:`close` (or ``with``)."""

    def __init__(
        self,
        llm: Any,
        header: GgufHeader,
        info: EngineInfo,
        hash_cache: Path | None,
        chat: ChatFormat | None = None,
        chat_note: str = "",
        loaded_file: FileIdentity | None = None,
    ):
        self._llm = llm
        self.chat = chat
        self.chat_note = chat_note
        self.header = header
        self.info = info
        self._hash_cache = hash_cache
        # the file as it was when llama.cpp opened it: what the recorded SHA-256 must describe
        self._loaded_file = loaded_file or FileIdentity.of(header.path)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._sha256: str | None = None
        self._checked_grammars: set[str] = set()
        self._eog_cache: dict[int, bool] = {}
        self._segments: dict[tuple[bool, str], list[int]] = {}

    # --- lifecycle --------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        n_ctx: int | None = None,
        max_ctx: int = 8192,
        n_threads: int | None = None,
        gpu: bool | None = None,
        available_bytes: int | None = -1,
        hash_cache: Path | bool = True,
        n_batch: int = 512,
        chat: bool = True,
    ) -> Engine:
        """Check the file, then load it with llama.cpp.

        ``gpu``: None or True = offload everything when the build supports it (a build without
        GPU offload loads on the CPU, and says so in :attr:`info`); False = the CPU.
        ``available_bytes``: the memory to plan with (-1 = ask the system; None = do not check).
        ``hash_cache``: where to remember the file's SHA-256 across runs (True: the user's cache
        folder; False: only in memory). ``chat``: use the model's chat template when its file has
        one (False: plain completion).
        Raises :class:`ModelFileError` with a readable reason; never passes a file it could not
        check to llama.cpp.
        """
        header = read_header(path)
        loaded_file = FileIdentity.of(header.path)  # before llama.cpp maps it
        use_gpu = gpu is not False and gpu_offload_supported()
        if available_bytes == -1:
            available_bytes = available_memory()
        plan = plan_memory(
            header,
            n_ctx=n_ctx,
            max_ctx=max_ctx,
            available_bytes=available_bytes,
            weights_in_ram=not use_gpu,
        )
        threads = n_threads or default_threads()
        started = time.perf_counter()
        llm = _load_llama(header, plan.n_ctx, threads, use_gpu, n_batch)
        n_layers = header.block_count or 0
        info = EngineInfo(
            path=header.path,
            model_name=header.name,
            architecture=header.architecture,
            size_bytes=header.file_size,
            weight_types=header.weight_types,
            device=_gpu_backend_name() if use_gpu else "CPU",
            gpu_layers=n_layers if use_gpu else 0,
            n_layers=n_layers,
            n_threads=threads,
            n_ctx=llm.n_ctx(),
            n_ctx_train=header.context_length or llm.n_ctx(),
            load_seconds=time.perf_counter() - started,
            build=_build_name(),
        )
        cache = default_hash_cache() if hash_cache is True else (hash_cache or None)
        log.info(
            "model loaded: %s (%d bytes, %s, %d/%d layers on the GPU, context %d) in %.2f s",
            Path(header.path).name,
            header.file_size,
            info.device,
            info.gpu_layers,
            n_layers,
            info.n_ctx,
            info.load_seconds,
        )
        fmt, note = _chat_format(llm, header) if chat else (None, "chat format turned off")
        return cls(llm, header, info, cache, fmt, note, loaded_file)

    def close(self, timeout: float = 60.0) -> None:
        """Stop any running generation at its next token, then free the model. Safe to call
        twice and from any thread."""
        self._closing.set()
        if not self._lock.acquire(timeout=timeout):
            raise EngineBusyError("the model is still busy; try closing again")
        try:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
        finally:
            self._lock.release()

    @property
    def closed(self) -> bool:
        return self._llm is None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _use(self) -> Iterator[Any]:
        if self._closing.is_set() or self._llm is None:
            raise EngineClosedError("the model is closed; load it again to continue")
        if not self._lock.acquire(blocking=False):
            raise EngineBusyError(
                "the model is busy with another request; one model serves one task at a time"
            )
        try:
            if self._llm is None:
                raise EngineClosedError("the model is closed; load it again to continue")
            yield self._llm
        finally:
            self._lock.release()

    # --- provenance -------------------------------------------------------------------------

    @property
    def sha256(self) -> str:
        """The model file's SHA-256, computed on first use and remembered. Raises
        :class:`ModelFileChanged` once the file on disk is no longer the one loaded: llama.cpp
        maps the file into memory, so a file written over in place changes the answers, and
        no stored suggestion may then name the old hash (checked on every use: one stat)."""
        self._sha256 = loaded_model_sha256(
            self.info.path, self._loaded_file, self._sha256, self._hash_cache
        )
        return self._sha256

    @property
    def sha256_remembered(self) -> bool:
        """Whether :attr:`sha256` comes without reading the whole model file (hashed before)."""
        return self._sha256 is not None or bool(remembered_sha256(self.info.path, self._hash_cache))

    # --- tokens -----------------------------------------------------------------------------

    def tokenize(self, text: str, bos: bool = False) -> list[int]:
        with self._use() as llm:
            return list(llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False))

    @property
    def prompt_format(self) -> dict[str, Any]:
        """How prompts reach the model, as a suggestion's provenance records it."""
        return describe_prompt_format(self.chat, self.chat_note)

    def prompt_segments(self, prompt: Prompt) -> list[str]:
        """The prompt's segments as the model reads them: inside its chat format when it has
        one (:mod:`portalreview.llm.chat`), else as they are."""
        return segments_of(self.chat, prompt)

    def render_prompt(self, prompt: Prompt) -> str:
        """The exact text the model reads for ``prompt`` (chat markup included)."""
        return "".join(self.prompt_segments(prompt))

    def prompt_tokens(self, prompt: Prompt) -> list[int]:
        """BOS, then each segment tokenized on its own: prompts that share leading segments
        share leading tokens exactly (what prefix reuse needs). Chat markup is tokenized with
        special tokens, text never is."""
        segments = self.prompt_segments(prompt)
        with self._use() as llm:
            tokens = [llm.token_bos()] if _adds_bos(llm) else []
            for seg in segments:
                if seg:
                    tokens += self._segment_tokens(llm, seg)
        if not tokens:
            raise LlmError("the prompt is empty")
        if len(tokens) >= self.info.n_ctx:
            raise PromptTooLongError(
                f"the prompt has {len(tokens)} tokens but the model's context holds "
                f"{self.info.n_ctx}; shorten the texts or the template"
            )
        return tokens

    def _segment_tokens(self, llm: Any, segment: str) -> list[int]:
        special = isinstance(segment, ChatMarkup)
        key = (special, str(segment))
        cached = self._segments.get(key)
        if cached is None:
            cached = llm.tokenize(segment.encode("utf-8"), add_bos=False, special=special)
            if len(self._segments) >= _SEGMENT_CACHE:
                self._segments.pop(next(iter(self._segments)))
            self._segments[key] = cached
        return cached

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for."""
        with self._use() as llm:
            return _piece(llm, token)

    @property
    def cached_tokens(self) -> int:
        """Tokens whose key/value cache is held from the last call (the reusable prefix)."""
        llm = self._llm
        return 0 if llm is None else int(llm.n_tokens)

    # --- grammars ---------------------------------------------------------------------------

    def check_grammar(self, text: str) -> None:
        """Check a grammar twice before it can reach a sampler: our parser
        (:func:`portalreview.llm.gbnf.check`), then llama.cpp's own constructor, whose null
        result we test and whose sampler we free."""
        if text in self._checked_grammars:
            return
        gbnf.check(text)
        with self._use() as llm:
            _native_grammar_check(llm, text)
        self._checked_grammars.add(text)

    # --- generation -------------------------------------------------------------------------

    def stream(
        self,
        prompt: Prompt,
        params: GenerationParams | None = None,
        *,
        grammar: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """A generation to iterate: text pieces as they come. The grammar (if any) is checked
        now, before any work starts."""
        if grammar is not None:
            self.check_grammar(grammar)
        tokens = self.prompt_tokens(prompt)
        return Generation(self, tokens, params or GenerationParams(), grammar, cancel)

    def complete(
        self,
        prompt: Prompt,
        params: GenerationParams | None = None,
        *,
        grammar: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """Generate to the end and return the finished :class:`Generation`."""
        return self.stream(prompt, params, grammar=grammar, cancel=cancel).wait()

    def _run(self, gen: Generation) -> Iterator[str]:
        with self._use() as llm:
            started = time.perf_counter()
            try:
                gen.evaluated_prompt_tokens = self._prefill(llm, gen.tokens[:-1], gen.cancel, True)
                if self._stopped(gen):
                    return
                llm.eval(gen.tokens[-1:])
                gen.evaluated_prompt_tokens += 1
                yield from self._sample(llm, gen)
            finally:
                gen.seconds = time.perf_counter() - started

    def _stopped(self, gen: Generation) -> bool:
        if self._closing.is_set():
            gen.finish_reason = "closed"
        elif gen.cancel is not None and gen.cancel.is_set():
            gen.finish_reason = "cancelled"
        return gen.finish_reason is not None

    def _sample(self, llm: Any, gen: Generation) -> Iterator[str]:
        """Sample token by token from the logits of the last evaluated token; stop at an
        end-of-generation token, the token limit, a full context, cancel or close. A character
        the stop cut in two (its first bytes generated, not the rest) is left out of the text,
        as llama.cpp's server leaves it out, not written as U+FFFD."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        sampler = _Sampler(llm, gen.params, gen.grammar)
        n_vocab = llm.n_vocab()
        try:
            while True:
                logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
                token = sampler.sample(logits)
                if self._is_eog(llm, token):
                    gen.finish_reason = "stop"
                    break
                sampler.accept(token)
                gen.token_ids.append(token)
                text = decoder.decode(_piece(llm, token))
                if text:
                    pieces.append(text)
                    yield text
                if len(gen.token_ids) >= gen.params.max_tokens or llm.n_tokens >= llm.n_ctx():
                    gen.finish_reason = "length"
                    break
                if self._stopped(gen):
                    break
                llm.eval([token])
        finally:
            sampler.close()
            gen.text = "".join(pieces)  # without the decoder's incomplete last character
            if gen.finish_reason is None:
                gen.finish_reason = "stop"

    def _is_eog(self, llm: Any, token: int) -> bool:
        if token not in self._eog_cache:
            import llama_cpp

            self._eog_cache[token] = bool(llama_cpp.llama_vocab_is_eog(llm._model.vocab, token))
        return self._eog_cache[token]

    def _prefill(
        self, llm: Any, tokens: list[int], cancel: threading.Event | None, reuse: bool
    ) -> int:
        """Make the cache hold exactly ``tokens``: keep the prefix it shares with the last
        prompt (when ``reuse``), evaluate the rest in batches, checking ``cancel`` between
        them. Returns the number of tokens evaluated."""
        common = _common_prefix(llm.input_ids[: llm.n_tokens], tokens) if reuse else 0
        llm.n_tokens = common
        rest = tokens[common:]
        step = max(1, int(llm.n_batch))
        for i in range(0, len(rest), step):
            if self._closing.is_set() or (cancel is not None and cancel.is_set()):
                break
            llm.eval(rest[i : i + step])
        return len(rest)

    # --- next-token probabilities -----------------------------------------------------------

    def next_token_logprobs(
        self, prompt: Prompt, *, reuse_prefix: bool = True, cancel: threading.Event | None = None
    ) -> tuple[np.ndarray, int]:
        """Log-probabilities of the token that would follow ``prompt`` (no text generated),
        and how many prompt tokens had to be evaluated (the rest came from the cache)."""
        tokens = self.prompt_tokens(prompt)
        with self._use() as llm:
            evaluated = self._prefill(llm, tokens[:-1], cancel, reuse_prefix)
            if self._closing.is_set() or (cancel is not None and cancel.is_set()):
                from portalreview.llm.errors import Cancelled

                raise Cancelled("cancelled")
            llm.eval(tokens[-1:])
            logits = np.ctypeslib.as_array(
                llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)
            ).astype(np.float64)
        if not np.all(np.isfinite(logits)):
            raise LlmError("the model produced invalid numbers (NaN): the file may be damaged")
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum()), evaluated + 1

    def choice_probabilities(
        self,
        prompt: Sequence[str],
        choices: Sequence[str],
        *,
        reuse_prefix: bool = True,
        cancel: threading.Event | None = None,
    ) -> ChoiceProbabilities:
        """P(each option) from the next-token distribution after ``prompt``.

        Each option is identified by its first token *in context*: the last prompt segment is
        tokenized with and without the option appended, and the first extra token counts. The
        options' first tokens must differ (e.g. "YES" / "NO")."""
        segments = [prompt] if isinstance(prompt, str) else list(prompt)
        ids = self._choice_tokens(self.prompt_segments(segments)[-1], choices)
        logprobs, evaluated = self.next_token_logprobs(
            segments, reuse_prefix=reuse_prefix, cancel=cancel
        )
        raw = {c: float(np.exp(logprobs[ids[c]])) for c in choices}
        return ChoiceProbabilities.of(raw, ids, len(self.prompt_tokens(segments)), evaluated)

    def _choice_tokens(self, last_segment: str, choices: Sequence[str]) -> dict[str, int]:
        if len(choices) < 2:
            raise ValueError("give at least two options")
        base = self.tokenize(last_segment)
        ids: dict[str, int] = {}
        for choice in choices:
            with_choice = self.tokenize(last_segment + choice)
            if with_choice[: len(base)] != base or len(with_choice) == len(base):
                raise LlmError(
                    f"the answer option {choice!r} merges with the end of the prompt in this "
                    "model's tokenizer; end the template with a separator such as 'Answer:'"
                )
            ids[choice] = with_choice[len(base)]
        if len(set(ids.values())) != len(choices):
            raise LlmError(
                f"the answer options {list(choices)} start with the same token in this model; "
                "choose options that differ in their first word"
            )
        return ids


class _Sampler:
    """Sampling as llama.cpp's own tools do it: the chain (greedy, or top-k / top-p / min-p /
    temperature / seeded draw) picks a token; only that token is checked against the grammar,
    and the grammar filters the whole vocabulary only when it refuses the pick. Filtering every
    candidate at every step (what the bindings' ``generate`` does) costs tens of milliseconds
    per token with a large vocabulary."""

    def __init__(self, llm: Any, params: GenerationParams, grammar: str | None) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self._lib = llama_cpp
        self.chain = llama_cpp.llama_sampler_chain_init(
            llama_cpp.llama_sampler_chain_default_params()
        )
        for part in _chain_parts(llama_cpp, llm.n_vocab(), params):
            llama_cpp.llama_sampler_chain_add(self.chain, part)
        self.grammar = None
        if grammar is not None:
            with _quiet_llama_log():
                self.grammar = llama_cpp.llama_sampler_init_grammar(
                    llm._model.vocab, grammar.encode("utf-8"), b"root"
                )
            if not self.grammar:
                self.grammar = None
                self.close()
                raise GrammarError("invalid grammar: llama.cpp's parser refused it")
        self.all = _internals.LlamaTokenDataArray(n_vocab=llm.n_vocab())
        self.one_data = (llama_cpp.llama_token_data * 1)()
        self.one = llama_cpp.llama_token_data_array(
            data=self.one_data, size=1, selected=-1, sorted=False
        )

    def _pick(self, logits: np.ndarray, with_grammar: bool) -> int:
        self.all.copy_logits(logits)
        arr = ctypes.byref(self.all.candidates)
        if with_grammar:
            self._lib.llama_sampler_apply(self.grammar, arr)
        self._lib.llama_sampler_apply(self.chain, arr)
        selected = self.all.candidates.selected
        return int(self.all.candidates_data.id[selected])

    def _allowed(self, token: int) -> bool:
        self.one_data[0].id = token
        self.one_data[0].logit = 0.0
        self.one_data[0].p = 0.0
        self.one.size = 1
        self.one.selected = -1
        self._lib.llama_sampler_apply(self.grammar, ctypes.byref(self.one))
        return bool(np.isfinite(self.one_data[0].logit))

    def sample(self, logits: np.ndarray) -> int:
        token = self._pick(logits, with_grammar=False)
        if self.grammar is None or self._allowed(token):
            return token
        token = self._pick(logits, with_grammar=True)
        if not self._allowed(token):
            raise LlmError("the answer grammar admits no further token (a dead end)")
        return token

    def accept(self, token: int) -> None:
        if self.grammar is not None:
            self._lib.llama_sampler_accept(self.grammar, token)
        self._lib.llama_sampler_accept(self.chain, token)

    def close(self) -> None:
        for sampler in (self.grammar, self.chain):
            if sampler:
                self._lib.llama_sampler_free(sampler)
        self.grammar = self.chain = None


def _chain_parts(lib: Any, n_vocab: int, p: GenerationParams) -> list[Any]:
    parts = []
    if p.repeat_penalty != 1.0:
        parts.append(lib.llama_sampler_init_penalties(n_vocab, 64, p.repeat_penalty, 0.0, 0.0))
    if p.temperature <= 0:
        return [*parts, lib.llama_sampler_init_greedy()]
    return [
        *parts,
        lib.llama_sampler_init_top_k(p.top_k),
        lib.llama_sampler_init_top_p(p.top_p, 1),
        lib.llama_sampler_init_min_p(p.min_p, 1),
        lib.llama_sampler_init_temp(p.temperature),
        lib.llama_sampler_init_dist(p.seed),
    ]


def _chat_format(llm: Any, header: GgufHeader) -> tuple[ChatFormat | None, str]:
    """The model's chat format (the BOS token left out of the markup when the engine adds it
    to every prompt anyway), or None and why not."""
    bos = "" if _adds_bos(llm) else _special_text(llm, llm.token_bos())
    return format_of(header.metadata, bos_token=bos, eos_token=_special_text(llm, llm.token_eos()))


def _special_text(llm: Any, token: int) -> str:
    """A special token's text ("<s>"), for chat templates that write it themselves."""
    if token < 0:
        return ""
    return _piece(llm, token, special=True).decode("utf-8", errors="replace")


def _adds_bos(llm: Any) -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_vocab_get_add_bos(llm._model.vocab)) and llm.token_bos() >= 0


def _common_prefix(cached: Sequence[int], tokens: Sequence[int]) -> int:
    n = 0
    for a, b in zip(cached, tokens, strict=False):
        if a != b:
            break
        n += 1
    return n


def _piece(llm: Any, token: int, special: bool = False) -> bytes:
    import llama_cpp

    size = 64
    while True:
        buf = (ctypes.c_char * size)()
        n = llama_cpp.llama_token_to_piece(llm._model.vocab, token, buf, size, 0, special)
        if n >= 0:
            return bytes(buf[:n])
        size = -n


@contextlib.contextmanager
def _quiet_llama_log() -> Iterator[None]:
    logger = logging.getLogger("llama-cpp-python")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _native_grammar_check(llm: Any, text: str) -> None:
    import llama_cpp

    with _quiet_llama_log():
        sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, text.encode("utf-8"), b"root"
        )
    if not sampler:
        raise GrammarError(
            "invalid grammar: llama.cpp's parser refused it (our checker found no problem; "
            "please report this grammar)"
        )
    llama_cpp.llama_sampler_free(sampler)


def _load_llama(header: GgufHeader, n_ctx: int, threads: int, gpu: bool, n_batch: int) -> Any:
    import jinja2
    from llama_cpp import Llama

    with _LOAD_LOCK:
        try:
            return Llama(
                str(header.path),
                n_ctx=n_ctx,
                n_batch=min(n_batch, n_ctx),
                n_threads=threads,
                n_threads_batch=max(threads, os.cpu_count() or threads),
                n_gpu_layers=-1 if gpu else 0,
                logits_all=False,
                verbose=False,
            )
        except jinja2.TemplateError as exc:  # llama-cpp-python compiles it on loading
            raise ModelFileError(
                f"{header.path.name} cannot be loaded: its chat template "
                f"({CHAT_TEMPLATE_KEY}) is not a valid Jinja template ({exc}), and llama.cpp's "
                "Python binding refuses such a file. Use a file converted with a correct "
                "template, or correct it (gguf's gguf_new_metadata.py --chat-template)."
            ) from exc
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelFileError(
                f"llama.cpp could not load {header.path.name} (architecture "
                f"{header.architecture or 'unknown'}): {exc}. The file may be for a newer "
                "llama.cpp, or damaged."
            ) from exc
