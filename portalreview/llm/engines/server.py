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
import http.client
import json
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
    build: str = ""

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
        settings = props.get("default_generation_settings") or {}
        meta = model.get("meta") or {}
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

    def _http(self, read_seconds: float = READ_SECONDS) -> _Http:
        if self._closed:
            raise EngineClosedError("the model server was closed here; connect again")
        return _Http(self.setting, read_seconds)

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
        return list(self._http().post_json("/tokenize", body)["tokens"])

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
    stream = Engine.stream
    complete = Engine.complete
    _choice_tokens = Engine._choice_tokens

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
        reply = self._http().post_json("/detokenize", {"tokens": [token]})
        return str(reply.get("content", "")).encode("utf-8")

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
            primed = self._prime(gen.tokens, gen.cancel)
            for event in self._http().stream_events("/completion", body, gen.cancel):
                text = event.get("content") or ""
                gen.token_ids += list(event.get("tokens") or [])
                if text:
                    pieces.append(text)
                    yield text
                if event.get("stop"):
                    stop_type = event.get("stop_type")
                    if stop_type == "eos" and gen.token_ids:
                        gen.token_ids.pop()  # the end-of-generation token, which we never keep
                    gen.finish_reason = "length" if stop_type == "limit" else "stop"
                    gen.evaluated_prompt_tokens = primed + int(
                        (event.get("timings") or {}).get("prompt_n", 0)
                    )
                    self._last_cached = int(event.get("tokens_cached") or 0)
        except Cancelled:
            gen.finish_reason = "cancelled"
        finally:
            gen.text = "".join(pieces)
            gen.seconds = time.perf_counter() - started
            if gen.finish_reason is None:
                gen.finish_reason = "closed" if self._closed else "stop"

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
        segments = [prompt] if isinstance(prompt, str) else list(prompt)
        ids = self._choice_tokens(self.prompt_segments(segments)[-1], choices)
        tokens = self.prompt_tokens(segments)
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        primed = self._prime(tokens, cancel, reuse_prefix)
        first = self._next_token(tokens, CHOICE_TOP_N, None)
        top = {int(p["id"]): p["prob"] for p in first["top"]}
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
        reply = self._http().post_json("/completion", body)
        return int((reply.get("timings") or {}).get("prompt_n", 0))

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
        reply = self._http().post_json("/completion", body)
        if int((reply.get("timings") or {}).get("prompt_n", 1)) > 1:
            reply = self._http().post_json("/completion", body)
        probs = reply.get("completion_probabilities") or []
        if not probs:
            raise ModelServerError(
                f"the model server {self.address} returned no token probabilities"
            )
        entry = probs[0]
        return {
            "id": int(entry["id"]),
            "prob": _prob(entry),
            "top": [{"id": t["id"], "prob": _prob(t)} for t in entry.get("top_logprobs", [])],
            "evaluated": int((reply.get("timings") or {}).get("prompt_n", len(tokens))),
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
        return float(entry["prob"])
    return math.exp(float(entry["logprob"]))


# --- HTTP ----------------------------------------------------------------------------------


class _Http:
    """One request's connection to the configured server (standard library only: no proxy
    settings are read and no redirect is followed)."""

    def __init__(self, setting: ServerSetting, read_seconds: float) -> None:
        check_allowed(setting.address, setting)
        self.setting = setting
        self.address = setting.address
        self.read_seconds = read_seconds

    def _connection(self) -> http.client.HTTPConnection:
        a = self.address
        if a.scheme == "https":
            context = ssl.create_default_context(cafile=self.setting.ca_file)
            return http.client.HTTPSConnection(
                a.host, a.port, timeout=CONNECT_SECONDS, context=context
            )
        return http.client.HTTPConnection(a.host, a.port, timeout=CONNECT_SECONDS)

    def _open(self, method: str, path: str, body: dict | None) -> tuple[Any, Any]:
        conn = self._connection()
        payload = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if payload else {}
        try:
            conn.connect()
            conn.sock.settimeout(self.read_seconds)
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self._unreachable(exc) from None
        if response.status != 200:
            detail = _error_text(response)
            conn.close()
            if "grammar" in detail.lower():
                raise GrammarError(f"the model server refused the answer grammar: {detail}")
            raise ModelServerError(
                f"the model server {self.address} answered {response.status} to {path}: "
                f"{detail}"
            )
        return conn, response

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

    def get_json(self, path: str) -> dict:
        return self._json("GET", path, None)

    def post_json(self, path: str, body: dict) -> dict:
        return self._json("POST", path, body)

    def _json(self, method: str, path: str, body: dict | None) -> dict:
        conn, response = self._open(method, path, body)
        try:
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._lost(exc) from None
        finally:
            conn.close()
        try:
            return json.loads(data)
        except ValueError:
            raise ModelServerError(
                f"{self.address}{path} did not answer in JSON: is it a llama.cpp server?"
            ) from None

    def stream_events(
        self, path: str, body: dict, cancel: threading.Event | None
    ) -> Iterator[dict]:
        """Server-sent events of a streamed completion. A set ``cancel`` closes the
        connection (the server then stops the generation) and raises :class:`Cancelled`."""
        conn, response = self._open("POST", path, body)
        with _closing_on(cancel, conn):
            try:
                while True:
                    line = response.readline()
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("cancelled")
                    if not line:
                        raise self._lost(ConnectionError("the answer ended early"))
                    if not line.startswith(b"data: "):
                        continue
                    event = json.loads(line[6:])
                    if "error" in event:
                        raise ModelServerError(f"the model server {self.address}: "
                                               f"{event['error']}")
                    yield event
                    if event.get("stop"):
                        return
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled") from None
                raise self._lost(exc) from None
            finally:
                conn.close()


@contextlib.contextmanager
def _closing_on(cancel: threading.Event | None, conn: Any) -> Iterator[None]:
    """While the block runs, a set ``cancel`` shuts the connection's socket, so that a read
    waiting for the server returns at once."""
    if cancel is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(0.05):
                with contextlib.suppress(OSError):
                    if conn.sock is not None:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                return

    watcher = threading.Thread(target=watch, name="model-server-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _error_text(response: Any) -> str:
    try:
        data = json.loads(response.read() or b"{}")
    except (OSError, ValueError, http.client.HTTPException):
        return response.reason or "an error"
    error = data.get("error", data)
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
