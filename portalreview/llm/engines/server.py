"""The model on a shared server: :class:`ServerEngine` has the interface of the local
:class:`~portalreview.llm.engine.Engine` and sends the work to llama.cpp's own HTTP server
(``llama-server``), which IT runs on a GPU box for the whole team (docs/deployment.md).

Nothing about a suggestion changes with the engine. Prompts are tokenized segment by segment
as the local engine does it (chat markup with special tokens, text without, through the
server's ``/tokenize``) and sent as token ids, so the server reads exactly the tokens the
local engine would. Grammars go in the request's ``grammar`` field, sampling in explicit
fields and sampler order. Next-token probabilities come from the server's pre-sampling
probabilities (``n_probs``: a softmax over the whole vocabulary of the raw logits); an answer
option outside the top ``CHOICE_TOP_N`` is asked for on its own, with a logit bias that makes
the server pick it, whose reported probability is still the unbiased one (the bias is a
sampler, applied after the probabilities are read). They equal the local engine's on the
same file within rounding (tests/llm/test_llm_server.py).

Only the configured address is ever reached (:func:`portalreview.llm.model_server.
check_allowed`); no proxy is used and no redirect followed. Unlike a local engine, a server
engine may be used from several threads at once: each call has its own connection, and the
server runs them in its parallel slots.

Errors: a server that does not answer, answers with an error, or goes away during a request
raises :class:`ModelServerError` naming the address and what happened; nothing is half-stored
(suggestions are stored only after a whole answer arrived).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import http.client
import json
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portalreview.llm import gbnf
from portalreview.llm.chat import ChatFormat, ChatMarkup, format_of
from portalreview.llm.chat import prompt_format as describe_prompt_format
from portalreview.llm.engine import (
    ChoiceProbabilities,
    Engine,
    EngineInfo,
    Generation,
    GenerationParams,
    Prompt,
)
from portalreview.llm.errors import (
    Cancelled,
    EngineClosedError,
    GrammarError,
    LlmError,
    ModelServerError,
    PromptTooLongError,
)
from portalreview.llm.model_server import ServerAddress, ServerSetting, check_allowed

#: Probabilities read per choice request; options outside these are asked for one by one.
CHOICE_TOP_N = 20
CONNECT_SECONDS = 10.0
#: How long to wait for the next byte of an answer (a busy server queues requests).
READ_SECONDS = 600.0
_SEGMENT_CACHE = 4096


@dataclass(frozen=True)
class ServerInfo(EngineInfo):
    """What the settings page shows about a server's model."""

    address: str = ""
    slots: int = 1

    def describe(self) -> str:
        kind = next(iter(self.weight_types), "?")
        return (
            f"{self.model_name} ({kind}, {self.size_bytes / 1024**3:.1f} GB) on the model "
            f"server {self.address} ({self.slots} parallel slot{'s' * (self.slots != 1)}); "
            f"context {self.n_ctx} tokens"
        )


class ServerEngine:
    """A model served by llama-server. Build with :meth:`connect`."""

    def __init__(self, setting: ServerSetting, props: dict, model: dict, seconds: float) -> None:
        self.setting = setting
        self.address: ServerAddress = setting.address
        self._closed = False
        self._segments: dict[tuple[bool, str], list[int]] = {}
        self._segments_lock = threading.Lock()
        self._last_cached = 0
        self._scope = threading.local()  # the cancel of the call running on each thread
        settings = _object(props.get("default_generation_settings"))
        meta = _object(model.get("meta"))
        model_path = str(props.get("model_path") or model.get("id") or "unknown.gguf")
        self.info = ServerInfo(
            path=Path(Path(model_path.replace("\\", "/")).name),
            model_name=_model_name(props, model_path),
            architecture=str(meta.get("vocab_type", "")),
            size_bytes=int(meta.get("size") or 0),
            weight_types={str(props.get("model_ftype") or "?"): 1},
            device=f"server {self.address}",
            gpu_layers=0,
            n_layers=0,
            n_threads=0,
            n_ctx=int(settings.get("n_ctx") or 0),
            n_ctx_train=int(meta.get("n_ctx_train") or 0),
            load_seconds=seconds,
            address=self.address.url,
            slots=int(props.get("total_slots") or 1),
            build=str(props.get("build_info") or ""),
        )
        self.n_vocab = int(meta.get("n_vocab") or 0)
        self._bos = self._bos_tokens()
        self.chat, self.chat_note = self._chat_format(props)

    # --- lifecycle --------------------------------------------------------------------------

    @classmethod
    def connect(cls, setting: ServerSetting, *, timeout: float = CONNECT_SECONDS) -> ServerEngine:
        """Reach the configured server, check that it is ready, and read what it runs (the
        model file's name and size, its slots and context) and its chat format. Raises
        :class:`ModelServerError`. ``timeout``: seconds to wait for each of these answers."""
        started = time.perf_counter()
        probe = _Http(setting, timeout)
        health = probe.get_json("/health")
        if health.get("status") not in ("ok", None):
            raise ModelServerError(f"the model server {setting.address} is not ready: {health}")
        props = probe.get_json("/props")
        models = probe.get_json("/v1/models").get("data") or [{}]
        if not isinstance(models, list) or not isinstance(models[0], dict):
            raise probe.unexpected("/v1/models", models, "a list of model objects in 'data'")
        with _reading(probe, "/props and /v1/models", "llama.cpp's description of its model"):
            return cls(setting, props, models[0], time.perf_counter() - started)

    def close(self, timeout: float = 60.0) -> None:
        """Forget the server (it keeps running for everyone else)."""
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> ServerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _http(
        self, read_seconds: float = READ_SECONDS, cancel: threading.Event | None = None
    ) -> _Http:
        if self._closed:
            raise EngineClosedError("the model server was closed here; connect again")
        return _Http(self.setting, read_seconds, cancel or getattr(self._scope, "cancel", None))

    @contextlib.contextmanager
    def _cancel_scope(self, cancel: threading.Event | None) -> Iterator[None]:
        """Every request this thread makes in the block (tokenizing included) ends when
        ``cancel`` is set."""
        before = getattr(self._scope, "cancel", None)
        self._scope.cancel = cancel or before
        try:
            yield
        finally:
            self._scope.cancel = before

    # --- provenance -------------------------------------------------------------------------

    @property
    def sha256(self) -> str:
        """The model file's SHA-256 as IT configured it (llama.cpp's server reports none)."""
        return self.setting.sha256

    @property
    def origin(self) -> dict[str, Any]:
        """Where suggestions came from, for their provenance."""
        return {
            "server": self.address.url,
            "model_path": str(self.info.path),
            "sha256_from": "setting (llama-server reports no hash)",
            "build": self.info.build,
        }

    @property
    def prompt_format(self) -> dict[str, Any]:
        return describe_prompt_format(self.chat, self.chat_note)

    # --- tokens -----------------------------------------------------------------------------

    def _tokenize(self, text: str, *, special: bool, add_bos: bool = False) -> list[int]:
        body = {"content": text, "add_special": add_bos, "parse_special": special}
        http = self._http()
        reply = http.post_json("/tokenize", body)
        tokens = reply.get("tokens")
        if not _ints(tokens):
            raise http.unexpected("/tokenize", reply, "a list of token ids in 'tokens'")
        return list(tokens)

    def tokenize(self, text: str, bos: bool = False) -> list[int]:
        if bos:
            return self._tokenize(text, special=False, add_bos=True)
        # cached: every answer option is tokenized with the prompt's end at each question
        return list(self._segment_tokens(str(text)))

    def _bos_tokens(self) -> list[int]:
        plain = self._tokenize("a", special=False)
        with_bos = self._tokenize("a", special=False, add_bos=True)
        return with_bos[: len(with_bos) - len(plain)] if with_bos[-len(plain):] == plain else []

    def _chat_format(self, props: dict) -> tuple[ChatFormat | None, str]:
        template = props.get("chat_template") or ""
        if not template:
            return None, "the server reports no chat template"
        bos = "" if self._bos else str(props.get("bos_token") or "")
        return format_of(
            {"tokenizer.chat_template": template},
            bos_token=bos,
            eos_token=str(props.get("eos_token") or ""),
        )

    # The same as the local engine's: what the model reads, and a generation to iterate.
    prompt_segments = Engine.prompt_segments
    render_prompt = Engine.render_prompt
    complete = Engine.complete
    _choice_tokens = Engine._choice_tokens

    def stream(
        self,
        prompt: Prompt,
        params: GenerationParams | None = None,
        *,
        grammar: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """As :meth:`Engine.stream`; a cancel while the prompt is tokenized gives a generation
        that ends at once as cancelled (what the local engine's does)."""
        if grammar is not None:
            self.check_grammar(grammar)
        try:
            with self._cancel_scope(cancel):
                tokens = self.prompt_tokens(prompt)
        except Cancelled:
            tokens = []
        return Generation(self, tokens, params or GenerationParams(), grammar, cancel)

    def prompt_tokens(self, prompt: Prompt) -> list[int]:
        tokens = list(self._bos)
        for seg in self.prompt_segments(prompt):
            if seg:
                tokens += self._segment_tokens(seg)
        if not tokens:
            raise LlmError("the prompt is empty")
        if self.info.n_ctx and len(tokens) >= self.info.n_ctx:
            raise PromptTooLongError(
                f"the prompt has {len(tokens)} tokens but each of the server's slots holds "
                f"{self.info.n_ctx}; shorten the texts or the template"
            )
        return tokens

    def _segment_tokens(self, segment: str) -> list[int]:
        special = isinstance(segment, ChatMarkup)
        key = (special, str(segment))
        with self._segments_lock:
            cached = self._segments.get(key)
        if cached is None:
            cached = self._tokenize(str(segment), special=special)
            with self._segments_lock:
                if len(self._segments) >= _SEGMENT_CACHE:
                    self._segments.pop(next(iter(self._segments)))
                self._segments[key] = cached
        return cached

    def piece(self, token: int) -> bytes:
        http = self._http()
        content = http.post_json("/detokenize", {"tokens": [token]}).get("content", "")
        if not isinstance(content, str):
            raise http.unexpected("/detokenize", content, "text in 'content'")
        return content.encode("utf-8")

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the server reused from its cache in the last answer."""
        return self._last_cached

    # --- grammars ---------------------------------------------------------------------------

    def check_grammar(self, text: str) -> None:
        """Our parser checks it here; the server's own parser checks it with the request
        (an error there is reported as a :class:`GrammarError`)."""
        gbnf.check(text)

    # --- generation -------------------------------------------------------------------------

    def _run(self, gen: Generation) -> Iterator[str]:
        body = {
            "prompt": gen.tokens,
            "n_predict": gen.params.max_tokens,
            "stream": True,
            "cache_prompt": True,
            "return_tokens": True,
            **sampling_fields(gen.params),
        }
        if gen.grammar is not None:
            body["grammar"] = gen.grammar
        started = time.perf_counter()
        pieces: list[str] = []
        try:
            if not gen.tokens:  # cancelled while the prompt was tokenized
                raise Cancelled("cancelled")
            primed = self._prime(gen.tokens, gen.cancel)
            http = self._http(cancel=gen.cancel)
            for event in http.stream_events("/completion", body):
                text, tokens = event.get("content") or "", event.get("tokens") or []
                if not isinstance(text, str) or not _ints(tokens):
                    raise http.unexpected(
                        "/completion",
                        event,
                        "events with text in 'content' and token ids in 'tokens'",
                    )
                gen.token_ids += tokens
                if text:
                    pieces.append(text)
                    yield text
                if event.get("stop"):
                    stop_type = event.get("stop_type")
                    if stop_type == "eos" and gen.token_ids:
                        gen.token_ids.pop()  # the end-of-generation token, which we never keep
                    gen.finish_reason = "length" if stop_type == "limit" else "stop"
                    with _reading(http, "/completion", "llama.cpp's timings"):
                        gen.evaluated_prompt_tokens = primed + _prompt_n(event, 0)
                        self._last_cached = int(event.get("tokens_cached") or 0)
                        if stop_type == "limit":
                            gen.context_full = self._context_full(gen, event)
        except Cancelled:
            gen.finish_reason = "cancelled"
        finally:
            gen.text = "".join(pieces)
            gen.seconds = time.perf_counter() - started
            if gen.finish_reason is None:
                gen.finish_reason = "closed" if self._closed else "stop"

    def _context_full(self, gen: Generation, event: dict) -> bool:
        """Whether the server stopped because the slot's context filled up: it says so
        (``truncated``), or its own count of generated tokens (``timings.predicted_n``; the
        events leave out the tokens of a character cut in two) fills the context."""
        predicted = _object(event.get("timings")).get("predicted_n", len(gen.token_ids))
        if not _number(predicted):
            raise TypeError("not a number")
        n_ctx = self.info.n_ctx
        return event.get("truncated") is True or bool(
            n_ctx and predicted < gen.params.max_tokens and len(gen.tokens) + predicted >= n_ctx - 1
        )

    # --- next-token probabilities -----------------------------------------------------------

    def next_token_logprobs(self, prompt: Prompt, **_: Any) -> Any:
        raise LlmError(
            "a model server gives the probabilities of chosen tokens, not the whole "
            "vocabulary's; use choice_probabilities"
        )

    def choice_probabilities(
        self,
        prompt: Sequence[str],
        choices: Sequence[str],
        *,
        reuse_prefix: bool = True,
        cancel: threading.Event | None = None,
    ) -> ChoiceProbabilities:
        """P(each option), as :meth:`Engine.choice_probabilities` defines it, from the server's
        pre-sampling probabilities (see the module's docstring)."""
        with self._cancel_scope(cancel):
            return self._choice_probabilities(prompt, choices, reuse_prefix, cancel)

    def _choice_probabilities(
        self,
        prompt: Sequence[str],
        choices: Sequence[str],
        reuse_prefix: bool,
        cancel: threading.Event | None,
    ) -> ChoiceProbabilities:
        segments = [prompt] if isinstance(prompt, str) else list(prompt)
        ids = self._choice_tokens(self.prompt_segments(segments)[-1], choices)
        tokens = self.prompt_tokens(segments)
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        primed = self._prime(tokens, cancel, reuse_prefix)
        first = self._next_token(tokens, CHOICE_TOP_N, None)
        top = {p["id"]: p["prob"] for p in first["top"]}
        raw: dict[str, float] = {}
        for choice, token in ids.items():
            if token not in top:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled")
                forced = self._next_token(tokens, 1, token)
                if forced["id"] != token:
                    raise ModelServerError(
                        f"the model server {self.address} did not score the answer option "
                        f"{choice!r} (it returned token {forced['id']}, not {token})"
                    )
                top[token] = forced["prob"]
            raw[choice] = float(top[token])
        return ChoiceProbabilities.of(raw, ids, len(tokens), primed + first["evaluated"])

    def _prime(
        self, tokens: list[int], cancel: threading.Event | None, reuse: bool = True
    ) -> int:
        """Have the server hold all but the last prompt token in its cache, so that the last
        one is then evaluated alone, as the local engine does it. Why it matters: llama.cpp
        computes a batch of one token with other kernels than a batch of many, and on a small
        model the next-token probabilities differ by up to ~0.02 between the two. Returns the
        tokens the server evaluated."""
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        if len(tokens) < 2:
            return 0
        body = {"prompt": tokens[:-1], "n_predict": 0, "cache_prompt": reuse,
                "temperature": 0.0, "samplers": ["temperature"]}
        http = self._http(cancel=cancel)
        reply = http.post_json("/completion", body)
        with _reading(http, "/completion", "llama.cpp's timings"):
            return _prompt_n(reply, 0)

    def _next_token(self, tokens: list[int], n_probs: int, force: int | None) -> dict[str, Any]:
        """One generated token with the probabilities the server read before sampling. The
        prompt is primed (:meth:`_prime`); when a busy server evaluated more than the last
        token anyway (another slot took the request), it is asked once more, now from its
        cache."""
        body: dict[str, Any] = {
            "prompt": tokens,
            "n_predict": 1,
            "n_probs": n_probs,
            "post_sampling_probs": False,
            "cache_prompt": True,
            "temperature": 0.0,
            "samplers": ["temperature"],
        }
        if force is not None:
            body["logit_bias"] = [[force, 1.0e4]]
        http = self._http()
        reply = http.post_json("/completion", body)
        with _reading(http, "/completion", "llama.cpp's timings"):
            again = _prompt_n(reply, 1) > 1
        if again:
            reply = http.post_json("/completion", body)
        probs = reply.get("completion_probabilities") or []
        if not probs:
            raise ModelServerError(
                f"the model server {self.address} returned no token probabilities"
            )
        if not isinstance(probs, list):
            raise http.unexpected("/completion", probs, "a list in 'completion_probabilities'")
        entry = probs[0]
        if isinstance(entry, dict) and "probs" in entry and "top_logprobs" not in entry:
            raise ModelServerError(
                f"the model server {self.address} gives token probabilities in the shape of "
                "llama.cpp servers older than December 2024 ('probs' with 'tok_str', no token "
                "ids), from which answer options cannot be scored: PortalReview needs "
                "llama.cpp's server of December 2024 or later (probabilities with token ids "
                "and 'top_logprobs'); docs/deployment.md says which version to build."
            )
        top = entry.get("top_logprobs", []) if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(top, list):
            raise http.unexpected(
                "/completion", entry, "token probabilities with 'id', 'logprob' and 'top_logprobs'"
            )
        with _reading(http, "/completion", "token probabilities with 'id' and 'logprob'"):
            return {
                "id": _token_id(entry),
                "prob": _prob(entry),
                "top": [{"id": _token_id(t), "prob": _prob(t)} for t in top],
                "evaluated": _prompt_n(reply, len(tokens)),
            }


def _model_name(props: dict, model_path: str) -> str:
    """The alias IT gave the model (``--alias``), else the file's name without .gguf (the
    server reports its path as the alias when none was given)."""
    alias = str(props.get("model_alias") or "")
    if alias and "/" not in alias and "\\" not in alias:
        return alias
    return Path(model_path.replace("\\", "/")).name.removesuffix(".gguf")


def sampling_fields(params: GenerationParams) -> dict[str, Any]:
    """The request fields that make llama-server sample as the local engine does (the same
    samplers in the same order, no others)."""
    fields: dict[str, Any] = {
        "temperature": max(0.0, params.temperature),
        "repeat_penalty": params.repeat_penalty,
        "repeat_last_n": 64,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "seed": params.seed,
        "min_keep": 1,
    }
    order = ["penalties"] if params.repeat_penalty != 1.0 else []
    if params.temperature <= 0:
        return {**fields, "samplers": [*order, "temperature"]}
    fields.update(top_k=params.top_k, top_p=params.top_p, min_p=params.min_p)
    return {**fields, "samplers": [*order, "top_k", "top_p", "min_p", "temperature"]}


def _prob(entry: dict) -> float:
    import math

    if "prob" in entry:
        value = entry["prob"]
    else:
        value = math.exp(entry["logprob"]) if _number(entry["logprob"]) else None
    if not _number(value):
        raise TypeError("not a probability")
    return float(value)


def _token_id(entry: dict) -> int:
    token = entry["id"]
    if not isinstance(token, int) or isinstance(token, bool):
        raise TypeError("not a token id")
    return token


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    """Whether ``value`` is a list of token ids."""
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def _object(value: Any) -> dict:
    """A nested object of a reply (absent: empty); anything else is refused by
    :func:`_reading`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError("not an object")
    return value


def _prompt_n(reply: dict, default: int) -> int:
    """The prompt tokens the server evaluated for a reply (``timings.prompt_n``)."""
    value = _object(reply.get("timings")).get("prompt_n", default)
    if not _number(value):
        raise TypeError("not a number")
    return int(value)


@contextlib.contextmanager
def _reading(http: _Http, path: str, expected: str) -> Iterator[None]:
    """Parts of a reply read in the block that are not of the shape llama.cpp gives raise
    :class:`ModelServerError` naming the endpoint, not a Python error."""
    try:
        yield
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        raise ModelServerError(
            f"the model server {http.address} answered {path} with something other than "
            f"{expected} ({type(exc).__name__}: {exc}): {NEEDED_SERVER}. The answer was not "
            "used; nothing you entered is lost."
        ) from None


# --- HTTP ----------------------------------------------------------------------------------

#: What a reply of an unexpected shape is told to IT.
NEEDED_SERVER = (
    "is it a llama.cpp server (llama-server) of December 2024 or later? docs/deployment.md "
    "says which version to build"
)
#: How often a wait for the server looks at cancel.
CANCEL_POLL_SECONDS = 0.05


class _Http:
    """One request's connection to the configured server (standard library only: no proxy
    settings are read and no redirect is followed). A set ``cancel`` ends the request within
    :data:`CANCEL_POLL_SECONDS` wherever it waits (connecting, sending, waiting for the
    answer, reading it): the connection is shut, the server stops the work, and
    :class:`Cancelled` is raised. Not while the server's name is looked up (the system's
    resolver cannot be interrupted; an address given as numbers needs no lookup)."""

    def __init__(
        self, setting: ServerSetting, read_seconds: float, cancel: threading.Event | None = None
    ) -> None:
        check_allowed(setting.address, setting)
        self.setting = setting
        self.address = setting.address
        self.read_seconds = read_seconds
        self.cancel = cancel

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _connection(self) -> http.client.HTTPConnection:
        a = self.address
        if a.scheme == "https":
            context = ssl.create_default_context(cafile=self.setting.ca_file)
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                a.host, a.port, timeout=CONNECT_SECONDS, context=context
            )
        else:
            conn = http.client.HTTPConnection(a.host, a.port, timeout=CONNECT_SECONDS)
        return conn

    @contextlib.contextmanager
    def _exchange(self, method: str, path: str, body: dict | None) -> Iterator[Any]:
        """Send the request and yield the response (status 200); the connection is closed
        afterwards. Errors before the answer's headers are :meth:`_unreachable`, a cancel is
        :class:`Cancelled`; errors while the caller reads are the caller's to translate."""
        if self._cancelled():
            raise Cancelled("cancelled")
        conn = self._connection()
        raw = _RawSocket()
        conn._create_connection = functools.partial(  # type: ignore[attr-defined]
            _connect, cancel=self.cancel, raw=raw
        )
        payload = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if payload else {}
        try:
            with _closing_on(self.cancel, raw):
                try:
                    conn.connect()
                    conn.sock.settimeout(self.read_seconds)
                    conn.request(method, path, body=payload, headers=headers)
                    response = conn.getresponse()
                except (OSError, http.client.HTTPException) as exc:
                    if self._cancelled():
                        raise Cancelled("cancelled") from None
                    raise self._unreachable(exc) from None
                if response.status != 200:
                    detail = _error_text(response)
                    if self._cancelled():
                        raise Cancelled("cancelled")
                    if "grammar" in detail.lower():
                        raise GrammarError(f"the model server refused the answer grammar: {detail}")
                    raise ModelServerError(
                        f"the model server {self.address} answered {response.status} to "
                        f"{path}: {detail}"
                    )
                yield response
        finally:
            conn.close()
            raw.close()

    def _unreachable(self, exc: BaseException) -> ModelServerError:
        if isinstance(exc, ssl.SSLError):
            why = f"the secure connection failed ({exc.reason or exc})"
        elif isinstance(exc, ConnectionRefusedError):
            why = "nothing answers there (connection refused): the server is not running"
        elif isinstance(exc, socket.timeout | TimeoutError):
            why = "it did not answer in time"
        else:
            why = f"the connection failed ({exc})"
        return ModelServerError(
            f"the model server {self.address} cannot be used: {why}. Ask IT to check it; "
            "nothing you entered is lost."
        )

    def _lost(self, exc: BaseException) -> ModelServerError:
        return ModelServerError(
            f"the model server {self.address} went away during the request ({exc}); the "
            "answer was not used. Nothing you entered is lost; try again when IT has "
            "restarted it."
        )

    def unexpected(self, path: str, got: Any, expected: str) -> ModelServerError:
        """A reply of another shape than llama.cpp's: names the server, the endpoint, what
        came and what was expected."""
        return ModelServerError(
            f"the model server {self.address} answered {path} with {_describe(got)}, not "
            f"{expected}: {NEEDED_SERVER}. The answer was not used; nothing you entered is "
            "lost."
        )

    def get_json(self, path: str) -> dict:
        return self._json("GET", path, None)

    def post_json(self, path: str, body: dict) -> dict:
        return self._json("POST", path, body)

    def _json(self, method: str, path: str, body: dict | None) -> dict:
        """The reply, which must be a JSON object."""
        with self._exchange(method, path, body) as response:
            try:
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                if self._cancelled():
                    raise Cancelled("cancelled") from None
                raise self._lost(exc) from None
        try:
            reply = json.loads(data)
        except ValueError:
            raise ModelServerError(
                f"{self.address}{path} did not answer in JSON: is it a llama.cpp server?"
            ) from None
        if not isinstance(reply, dict):
            raise self.unexpected(path, reply, "a JSON object")
        return reply

    def stream_events(self, path: str, body: dict) -> Iterator[dict]:
        """Server-sent events of a streamed completion, each a JSON object. A set ``cancel``
        closes the connection (the server then stops the generation) and raises
        :class:`Cancelled`."""
        with self._exchange("POST", path, body) as response:
            while True:
                try:
                    line = response.readline()
                except (OSError, http.client.HTTPException) as exc:
                    if self._cancelled():
                        raise Cancelled("cancelled") from None
                    raise self._lost(exc) from None
                if self._cancelled():
                    raise Cancelled("cancelled")
                if not line:
                    raise self._lost(ConnectionError("the answer ended early"))
                if not line.startswith(b"data: "):
                    continue
                event = self._event(path, line[6:])
                yield event
                if event.get("stop"):
                    return

    def _event(self, path: str, data: bytes) -> dict:
        try:
            event = json.loads(data)
        except ValueError:
            raise ModelServerError(
                f"the model server {self.address} sent something unreadable in its answer to "
                f"{path} ({_short_bytes(data)}): {NEEDED_SERVER}. The answer was not used; "
                "nothing you entered is lost."
            ) from None
        if not isinstance(event, dict):
            raise self.unexpected(path, event, "a JSON object per event")
        if "error" in event:
            raise ModelServerError(
                f"the model server {self.address} stopped the answer with an error: "
                f"{_error_message(event['error'])}. The answer was not used; nothing you "
                "entered is lost."
            )
        return event


class _RawSocket:
    """A duplicate of a request's socket, kept so that cancel can shut the connection from
    another thread whatever wraps it (TLS) and whatever stage the request is at."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._shut = False

    def keep(self, sock: socket.socket) -> None:
        with self._lock:
            self.sock = sock.dup()
            if self._shut:  # cancelled while it connected
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

    def shut(self) -> None:
        with self._lock:
            self._shut = True
            if self.sock is not None:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            if self.sock is not None:
                self.sock.close()
                self.sock = None


def _connect(
    address: tuple[str, int],
    timeout: float | None = None,
    source_address: Any = None,
    *,
    cancel: threading.Event | None,
    raw: _RawSocket,
) -> socket.socket:
    """:func:`socket.create_connection` that gives up as soon as ``cancel`` is set (a
    non-blocking connect, watched in short waits), and hands ``raw`` a duplicate of the
    socket."""
    host, port = address
    deadline = time.monotonic() + (timeout or CONNECT_SECONDS)
    error: OSError | None = None
    for family, kind, proto, _, where in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(where)
            while code in _IN_PROGRESS:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out")
                _, writable, failed = select.select(
                    [], [sock], [sock], min(CANCEL_POLL_SECONDS, left)
                )
                if writable or failed:
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            sock.settimeout(timeout)
            raw.keep(sock)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error or OSError(f"no address found for {host}")


_IN_PROGRESS = {
    errno.EINPROGRESS,
    errno.EWOULDBLOCK,
    errno.EALREADY,
    getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK),
}


@contextlib.contextmanager
def _closing_on(cancel: threading.Event | None, raw: _RawSocket) -> Iterator[None]:
    """While the block runs, a set ``cancel`` shuts the connection's socket, so that a wait
    for the server (sending, the answer's headers, its next line) ends at once."""
    if cancel is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(CANCEL_POLL_SECONDS):
            if cancel.is_set():
                raw.shut()
                return

    watcher = threading.Thread(target=watch, name="model-server-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _error_message(error: Any) -> str:
    """The message of llama.cpp's error object (``{"code", "message", "type"}``), or the
    error as text."""
    if isinstance(error, dict):
        return str(error.get("message") or json.dumps(error))
    return str(error)


def _error_text(response: Any) -> str:
    try:
        data = json.loads(response.read() or b"{}")
    except (OSError, ValueError, http.client.HTTPException):
        return response.reason or "an error"
    return _error_message(data.get("error", data) if isinstance(data, dict) else data)


def _describe(value: Any) -> str:
    """A reply's shape in words, with a short excerpt."""
    kinds = {
        dict: "an object",
        list: "a list",
        str: "text",
        bool: "true/false",
        int: "a number",
        float: "a number",
    }
    if value is None:
        return "null"
    text = json.dumps(value)
    excerpt = text if len(text) <= 60 else text[:57] + "..."
    return f"{kinds.get(type(value), type(value).__name__)} ({excerpt})"


def _short_bytes(data: bytes, limit: int = 60) -> str:
    text = data.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
