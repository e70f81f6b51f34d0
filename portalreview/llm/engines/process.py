"""The model in its own process: :class:`ProcessEngine` has the interface of the in-process
:class:`~portalreview.llm.engine.Engine` and runs one in a child process.

Why: a native crash inside llama.cpp (a segfault, an abort, the system killing the process
when memory runs out) would otherwise take the whole desktop window with it, and a CUDA build
of llama-cpp-python crashed or aborted when numpy, scipy or SQLAlchemy were imported around it
(docs/llm.md). The child is started with multiprocessing's ``spawn`` context (a fresh
interpreter, nothing inherited) and imports ``llama_cpp`` before anything else
(:mod:`portalreview.llm.engines.child`). When it dies, the call waiting on it and every later
call raise :class:`~portalreview.llm.errors.ModelProcessDied`, whose message says what
happened; this process goes on.

The threading contract is the in-process engine's: one call at a time (a concurrent call raises
:class:`EngineBusyError`), a ``cancel`` :class:`threading.Event` set from any thread stops a
generation within one token (a stream ends with exactly the pieces handed out before the cancel
was seen), and :meth:`ProcessEngine.close` may be called from any thread. Prompt segments reach
the child unchanged through pickle (a ``str`` subclass stays that subclass there).

Costs: one round trip per call (tens of microseconds), and a stream's pieces arrive in batches
(the first at once, then at most every 10 ms), so decoding runs at the in-process speed.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from portalreview.llm.chat import ChatFormat, segments_of
from portalreview.llm.chat import prompt_format as describe_prompt_format
from portalreview.llm.engine import (
    ChoiceProbabilities,
    Engine,
    EngineInfo,
    Generation,
    GenerationParams,
    Prompt,
)
from portalreview.llm.engines import child
from portalreview.llm.errors import (
    Cancelled,
    EngineBusyError,
    EngineClosedError,
    LlmError,
    ModelProcessDied,
)
from portalreview.llm.model_file import (
    FileIdentity,
    GgufHeader,
    default_hash_cache,
    loaded_model_sha256,
    read_header,
    remembered_sha256,
)

#: How often a waiting call looks at its ``cancel`` event (seconds).
POLL_SECONDS = 0.02
_START_LOCK = threading.Lock()

_SIGNAL_MEANING = {
    "SIGKILL": "was killed (by the system when memory ran out, or by another program)",
    "SIGSEGV": "crashed (a memory fault inside llama.cpp)",
    "SIGBUS": "crashed (a memory fault inside llama.cpp)",
    "SIGABRT": "aborted (llama.cpp stopped itself after an internal error)",
    "SIGILL": "crashed (an instruction this processor lacks: llama.cpp was built for another CPU)",
    "SIGFPE": "crashed (an arithmetic fault inside llama.cpp)",
    "SIGTERM": "was ended by another program",
}


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words ("crashed (...) (signal SIGSEGV)", "exited with code 3")."""
    if exitcode is None:
        return "ended (its exit status could not be read)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            return f"was ended by signal {-exitcode}"
        return f"{_SIGNAL_MEANING.get(name, 'was ended')} (signal {name})"
    if exitcode == 0xC0000005:  # Windows' access violation
        return "crashed (a memory fault inside llama.cpp)"
    return f"exited with code {exitcode}"


def died_message(model_file: str, exitcode: int | None, *, loading: bool = False) -> str:
    """The message of :class:`ModelProcessDied` for the person at the screen."""
    when = " while loading it" if loading else ""
    return (
        f"The model process stopped{when}: it {describe_exit(exitcode)}. "
        f"PortalReview is still running and your answers are saved. Load the model again "
        f"({model_file}) to go on using it."
    )


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a child starts, show multiprocessing a ``__main__`` without a file: ``spawn``
    otherwise runs the parent's main script (a benchmark, a console-script wrapper) in the child
    before the child's own entry point, importing numpy, SQLAlchemy... before ``llama_cpp``."""
    with _START_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


# A stream in the model process is the same object as one in this process: iterating it asks
# its engine (here a ProcessEngine) for the pieces.
ProcessGeneration = Generation


class ProcessEngine:
    """One loaded model in its own process. Build with :meth:`load`; close with :meth:`close`
    (or ``with``)."""

    def __init__(
        self,
        process: Any,
        conn: Any,
        flags: Any,
        header: GgufHeader,
        hash_cache: Path | None,
        loaded_file: FileIdentity | None = None,
    ) -> None:
        self._process = process
        self._conn = conn
        self._flags = flags
        self.header = header
        self.info: EngineInfo | None = None
        self.chat: ChatFormat | None = None  # the model's chat format, learnt in the process
        self.chat_note = ""
        self._hash_cache = hash_cache
        # the file as it was when the model process opened it (see :attr:`sha256`)
        self._loaded_file = loaded_file or FileIdentity.of(header.path)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False
        self._died: ModelProcessDied | None = None
        self._died_lock = threading.Lock()
        self._on_died: Callable[[ModelProcessDied], None] | None = None
        self._sha256: str | None = None
        self._checked_grammars: set[str] = set()
        self._cached = 0
        self._in_flight = False  # a request was sent and its last answer not yet read
        self._finalizer = weakref.finalize(self, _reap, process, conn)

    # --- lifecycle --------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        cancel: threading.Event | None = None,
        hash_cache: Path | bool = True,
        **options: Any,
    ) -> ProcessEngine:
        """Check the file here, then start the model process and load it there, with the
        keyword arguments of :meth:`Engine.load`. ``cancel`` (set from any thread) stops the
        process at once, even half-way through llama.cpp's load, and raises
        :class:`Cancelled`. Raises :class:`ModelFileError` as :meth:`Engine.load` does, and
        :class:`ModelProcessDied` when the process stops while loading."""
        inspect.signature(Engine.load).bind(path, hash_cache=hash_cache, **options)
        header = read_header(path)  # a bad file is refused before any process starts
        loaded_file = FileIdentity.of(header.path)  # before llama.cpp maps it
        ctx = multiprocessing.get_context("spawn")
        conn, child_conn = ctx.Pipe(duplex=True)
        flags = ctx.RawArray("b", 2)
        process = ctx.Process(
            target=child.main,
            args=(child_conn, flags, str(header.path), {**options, "hash_cache": False}),
            name=f"portalreview model {header.path.name}",
            daemon=True,
        )
        with _main_module_hidden():
            process.start()
        child_conn.close()
        cache = default_hash_cache() if hash_cache is True else (hash_cache or None)
        engine = cls(process, conn, flags, header, cache, loaded_file)
        try:
            engine.info, engine.chat, engine.chat_note = engine._answer(
                engine._receive(cancel, loading=True)
            )
        except BaseException:  # a refused file, a crash, a cancel: no process is left behind
            engine._kill()
            raise
        threading.Thread(
            target=_watch, args=(weakref.ref(engine), process.sentinel), daemon=True
        ).start()
        return engine

    @property
    def pid(self) -> int | None:
        """The model process's id (for the tests that end it)."""
        return self._process.pid

    @property
    def died(self) -> ModelProcessDied | None:
        """Why the model process stopped, when it did (None while it runs)."""
        return self._died

    def on_died(self, callback: Callable[[ModelProcessDied], None] | None) -> None:
        """Call ``callback(error)`` (from a background thread) when the process stops by
        itself, also while no call waits on it; at once when it already has."""
        self._on_died = callback
        if callback is not None and self._died is not None and not self._closing.is_set():
            callback(self._died)

    def close(self, timeout: float = 60.0) -> None:
        """Stop any running generation at its next token, then end the model process. Safe to
        call twice and from any thread; a process that does not stop in ``timeout`` seconds is
        killed."""
        self._closing.set()
        self._flags[child.CLOSING] = 1
        if self._died is not None:  # nothing to free: reap the process
            self._kill()
            return
        got = self._lock.acquire(timeout=timeout)
        try:
            if not self._closed:
                self._closed = True
                if got and self._died is None:
                    with contextlib.suppress(LlmError, OSError, EOFError):
                        self._send(("close", ()))
                        self._receive(None)
                self._stop_process(timeout if got else 0.0)
        finally:
            if got:
                self._lock.release()

    @property
    def closed(self) -> bool:
        """True once closed, or once the model process stopped (it cannot answer again)."""
        return self._closed or self._died is not None

    def __enter__(self) -> ProcessEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- provenance -------------------------------------------------------------------------

    @property
    def sha256(self) -> str:
        """The model file's SHA-256, computed here on first use and remembered. Raises
        :class:`ModelFileChanged` once the file on disk is no longer the one loaded, as
        :attr:`Engine.sha256` does (the process maps the file, so its answers change with it)."""
        self._sha256 = loaded_model_sha256(
            self.header.path, self._loaded_file, self._sha256, self._hash_cache
        )
        return self._sha256

    @property
    def sha256_remembered(self) -> bool:
        """As :attr:`Engine.sha256_remembered`."""
        known = self._sha256 is not None
        return known or bool(remembered_sha256(self.header.path, self._hash_cache))

    # --- tokens -----------------------------------------------------------------------------

    @property
    def prompt_format(self) -> dict[str, Any]:
        """As :attr:`Engine.prompt_format` (what a suggestion's provenance records)."""
        return describe_prompt_format(self.chat, self.chat_note)

    def prompt_segments(self, prompt: Prompt) -> list[str]:
        """As :meth:`Engine.prompt_segments`: wrapped here exactly as in the process."""
        return segments_of(self.chat, prompt)

    def render_prompt(self, prompt: Prompt) -> str:
        """The exact text the model reads for ``prompt`` (chat markup included)."""
        return "".join(self.prompt_segments(prompt))

    def tokenize(self, text: str, bos: bool = False) -> list[int]:
        return self._call("tokenize", text, bos)

    def prompt_tokens(self, prompt: Prompt) -> list[int]:
        """As :meth:`Engine.prompt_tokens` (BOS, then each segment tokenized on its own)."""
        return self._call("prompt_tokens", prompt)

    def piece(self, token: int) -> bytes:
        return self._call("piece", token)

    @property
    def cached_tokens(self) -> int:
        """Tokens whose key/value cache the process held after the last call."""
        return 0 if self.closed else self._cached

    def check_grammar(self, text: str) -> None:
        """As :meth:`Engine.check_grammar` (our parser, then llama.cpp's), in the process."""
        if text not in self._checked_grammars:
            self._call("check_grammar", text)
            self._checked_grammars.add(text)

    # --- generation -------------------------------------------------------------------------

    def stream(
        self,
        prompt: Prompt,
        params: GenerationParams | None = None,
        *,
        grammar: str | None = None,
        cancel: threading.Event | None = None,
    ) -> ProcessGeneration:
        """A generation to iterate. The grammar is checked and the prompt tokenized now."""
        tokens = self._call("prepare", prompt, grammar)
        if grammar is not None:
            self._checked_grammars.add(grammar)
        return ProcessGeneration(self, tokens, params or GenerationParams(), grammar, cancel)

    def complete(
        self,
        prompt: Prompt,
        params: GenerationParams | None = None,
        *,
        grammar: str | None = None,
        cancel: threading.Event | None = None,
    ) -> ProcessGeneration:
        """Generate to the end and return the finished generation."""
        return self.stream(prompt, params, grammar=grammar, cancel=cancel).wait()

    def _run(self, gen: ProcessGeneration) -> Iterator[str]:
        with self._use():
            started = time.perf_counter()
            gen.token_ids, gen.text, gen.finish_reason = [], "", None
            self._flags[child.CANCEL] = int(gen.cancel is not None and gen.cancel.is_set())
            self._send(("generate", (gen.tokens, gen.params, gen.grammar)))
            self._in_flight = True
            stream = _Stream(self, gen)
            try:
                yield from stream.pieces()
            finally:
                stream.finish()
                gen.seconds = time.perf_counter() - started

    # --- next-token probabilities -----------------------------------------------------------

    def next_token_logprobs(
        self, prompt: Prompt, *, reuse_prefix: bool = True, cancel: threading.Event | None = None
    ) -> tuple[Any, int]:
        """As :meth:`Engine.next_token_logprobs`: (log-probabilities, tokens evaluated)."""
        return self._call("next_token_logprobs", prompt, reuse_prefix, cancel=cancel)

    def choice_probabilities(
        self,
        prompt: Sequence[str],
        choices: Sequence[str],
        *,
        reuse_prefix: bool = True,
        cancel: threading.Event | None = None,
    ) -> ChoiceProbabilities:
        """As :meth:`Engine.choice_probabilities`, answered in one round trip."""
        return self._call(
            "choice_probabilities", prompt, list(choices), reuse_prefix, cancel=cancel
        )

    def child_modules(self) -> dict[str, tuple[str, ...]]:
        """The modules the process had imported before ``llama_cpp`` and has now (tests)."""
        return self._call("modules")

    # --- the pipe ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _use(self) -> Iterator[None]:
        self._raise_if_unusable()
        if not self._lock.acquire(blocking=False):
            raise EngineBusyError(
                "the model is busy with another request; one model serves one task at a time"
            )
        try:
            self._raise_if_unusable()
            yield
        finally:
            if self._in_flight:  # interrupted mid-request (Ctrl+C...): the pipe is out of step
                self._in_flight = False
                if self._died is None:  # (a process that died is not "ended by us": the
                    self._kill()  # watcher must still tell, so _closing stays unset)
            self._lock.release()

    def _raise_if_unusable(self) -> None:
        if self._died is not None:
            raise ModelProcessDied(str(self._died), self._died.exitcode)
        if self._closing.is_set() or self._closed:
            raise EngineClosedError("the model is closed; load it again to continue")

    def _call(self, op: str, *args: Any, cancel: threading.Event | None = None) -> Any:
        with self._use():
            self._flags[child.CANCEL] = int(cancel is not None and cancel.is_set())
            self._send((op, args))
            self._in_flight = True
            reply = self._receive(cancel)
            self._in_flight = False
            return self._answer(reply)

    def _answer(self, reply: tuple) -> Any:
        kind, value, cached = reply
        self._cached = cached
        if kind == "error":
            raise value
        return value

    def _send(self, message: tuple) -> None:
        try:
            self._conn.send(message)
        except (EOFError, OSError, ValueError) as exc:
            raise self._gone(False) from exc

    def _receive(self, cancel: threading.Event | None, *, loading: bool = False) -> tuple:
        """The child's next message. Waits on the pipe and on the process's sentinel, so a
        dead child raises :class:`ModelProcessDied` instead of hanging; while waiting, a set
        ``cancel`` is passed on (when loading: the process is ended, as llama.cpp's load
        cannot stop half-way)."""
        conn, sentinel = self._conn, self._process.sentinel
        timeout = POLL_SECONDS if cancel is not None else None
        while True:
            if cancel is not None and cancel.is_set():
                if loading:
                    raise Cancelled("loading the model was cancelled")
                self._flags[child.CANCEL] = 1
            try:
                ready = wait([conn, sentinel], timeout)
                if conn in ready:
                    return conn.recv()
            except (EOFError, OSError, ValueError) as exc:  # ValueError: a closed pipe's fd
                raise self._gone(loading) from exc
            if sentinel in ready:
                raise self._death(loading)

    def _gone(self, loading: bool) -> LlmError:
        """The error for a pipe that broke or was closed under a waiting call: the process
        died (the usual case), or another thread closed the engine."""
        if self._died is not None or wait([self._process.sentinel], 0):  # (does not reap)
            return self._death(loading)
        return EngineClosedError("the model was closed while it worked; load it again")

    def _death(self, loading: bool = False) -> ModelProcessDied:
        """Record (once) that the process stopped, and the error that says so."""
        with self._died_lock:
            if self._died is None:
                code = self._exitcode()
                self._died = ModelProcessDied(
                    died_message(self.header.path.name, code, loading=loading), code
                )
            return ModelProcessDied(str(self._died), self._died.exitcode)

    def _exitcode(self, seconds: float = 5.0) -> int | None:
        """The ended process's exit status. Two threads reaping it at once (os.waitpid) leave
        one of them without the status for a moment, until the other has stored it."""
        deadline = time.monotonic() + seconds
        self._process.join(timeout=seconds)
        code = self._process.exitcode
        while code is None and time.monotonic() < deadline:
            time.sleep(0.01)
            code = self._process.exitcode
        return code

    def _noticed_death(self) -> None:
        """The watcher saw the process stop: record it and tell, unless we ended it."""
        if self._closing.is_set():
            return
        error = self._death()
        callback = self._on_died
        if callback is not None:
            callback(error)

    def _kill(self) -> None:
        self._closing.set()
        self._closed = True
        self._stop_process(0.0)

    def _stop_process(self, grace: float) -> None:
        process = self._process
        if grace > 0:
            process.join(timeout=grace)
        if process.is_alive():
            process.kill()
            process.join(timeout=10)
        with contextlib.suppress(OSError):
            self._conn.close()
        self._finalizer.detach()


class _Stream:
    """One generation's messages: pieces handed out one by one, a stop at the consumer's
    cancel (or close) that keeps exactly what was handed out, and the child's summary."""

    def __init__(self, engine: ProcessEngine, gen: ProcessGeneration) -> None:
        self.engine = engine
        self.gen = gen
        self.done = False
        self.pieces_out: list[str] = []
        self.summary: dict[str, Any] | None = None

    def _stopped(self) -> str | None:
        if self.engine._closing.is_set():
            return "closed"
        cancel = self.gen.cancel
        return "cancelled" if cancel is not None and cancel.is_set() else None

    def pieces(self) -> Iterator[str]:
        gen = self.gen
        while not self.done:
            batch = self._next_batch()
            for text, ids in batch:
                gen.token_ids.extend(ids)
                self.pieces_out.append(text)
                yield text
                reason = self._stopped()
                if reason is not None and len(gen.token_ids) < gen.params.max_tokens:
                    gen.finish_reason = reason
                    return

    def _next_batch(self) -> list[tuple[str, list[int]]]:
        message = self.engine._receive(self.gen.cancel)
        kind = message[0]
        if kind == "pieces":
            return message[1]
        self.done = True
        self.engine._in_flight = False
        if kind == "error":
            self.engine._answer(message)
        _kind, batch, self.summary, cached = message
        self.engine._cached = cached
        return batch

    def finish(self) -> None:
        """Drain the child's messages to its summary (after a cancel: telling it to stop),
        then describe the generation: the child's summary when every piece was handed out,
        otherwise exactly the pieces handed out."""
        gen = self.gen
        if not self.done:
            self.engine._flags[child.CANCEL] = 1
            while not self.done:
                self._next_batch()
            if gen.finish_reason is None:  # the consumer stopped iterating
                gen.finish_reason = self._stopped() or "cancelled"
            gen.text = "".join(self.pieces_out)
            if self.summary is not None:
                gen.evaluated_prompt_tokens = self.summary["evaluated_prompt_tokens"]
            return
        summary = self.summary
        if summary is None:  # the child reported an error, which is being raised
            return
        gen.evaluated_prompt_tokens = summary["evaluated_prompt_tokens"]
        if gen.finish_reason is None and len(gen.token_ids) == len(summary["token_ids"]):
            gen.token_ids = list(summary["token_ids"])
            gen.text = summary["text"]
            gen.finish_reason = summary["finish_reason"]
        else:
            gen.text = "".join(self.pieces_out)
            gen.finish_reason = gen.finish_reason or self._stopped() or "cancelled"


def _watch(ref: weakref.ref, sentinel: Any) -> None:
    """Background: notice a process that stops while no call waits on it (holding the engine
    only weakly, so that an engine dropped without close() is still reaped)."""
    wait([sentinel])
    engine = ref()
    if engine is not None:
        engine._noticed_death()


def _reap(process: Any, conn: Any) -> None:
    """An engine dropped without close(): closing the pipe ends the process (it reads EOF)."""
    with contextlib.suppress(OSError):
        conn.close()
    process.join(timeout=5)
    if process.is_alive():
        process.kill()
