"""The model process: what :class:`~portalreview.llm.engines.process.ProcessEngine` runs in its
child. :func:`main` imports ``llama_cpp`` before anything else, then only what the in-process
:class:`~portalreview.llm.engine.Engine` needs (numpy, the model-file reader, the grammar
checker): never scipy, SQLAlchemy, pandas or Qt. A CUDA build of llama-cpp-python crashed on
model load when numpy came first, and aborted at import ("free(): invalid pointer") when scipy
or SQLAlchemy followed it; a fresh process that imports little is the shape that worked.

This module itself imports only the standard library, so that the parent can name
:func:`main` as the process's target without loading llama.cpp.

The protocol (one request at a time, over one duplex pipe):

* the parent sends ``(operation, args)``; the child answers ``("ok", value, cached)`` or
  ``("error", exception, cached)``, where ``cached`` is how many tokens the key/value cache
  holds afterwards;
* ``generate`` answers with ``("pieces", [(text, token_ids), ...])`` batches (the first piece
  at once, then at most every :data:`FLUSH_SECONDS`), then ``("done", pieces, summary, cached)``;
* a shared two-byte flag array carries *cancel* (the current request) and *closing* (the whole
  engine): the in-process engine checks them before every token and between prompt batches;
* ``close`` closes the model and ends the process; so does the pipe closing (the parent is
  gone), and the parent's end, whatever the child is doing (:func:`_end_with_parent`).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

#: Pieces of a stream are sent together when they come faster than this (seconds): fewer
#: wake-ups of the parent, which shares the CPU with llama.cpp's threads. The first piece of a
#: generation is sent at once.
FLUSH_SECONDS = 0.01

#: The modules already imported when :func:`main` began (before ``llama_cpp``); the tests
#: read it back through the ``modules`` operation.
IMPORTED_BEFORE: tuple[str, ...] = ()

CANCEL, CLOSING = 0, 1


class _Flag:
    """The cancel event the engine checks per token: set when the parent set the request's
    cancel flag or the engine is closing (duck-typed ``threading.Event.is_set``)."""

    def __init__(self, flags: Any) -> None:
        self.flags = flags

    def is_set(self) -> bool:
        return bool(self.flags[CANCEL] or self.flags[CLOSING])


def main(conn: Any, flags: Any, path: str, options: dict[str, Any]) -> None:
    """The child's entry point: load the model, answer requests until told to close."""
    global IMPORTED_BEFORE
    IMPORTED_BEFORE = tuple(sys.modules)
    import llama_cpp  # noqa: F401  (first: see the module's docstring)

    # Ctrl+C in a terminal reaches the whole process group: the parent decides, not us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent()
    from portalreview.llm.engine import Engine

    try:
        engine = Engine.load(path, **options)
    except Exception as exc:  # the parent re-raises it (ModelFileError...)
        conn.send(("error", _portable(exc), 0))
        return
    try:
        conn.send(("ok", (engine.info, engine.chat, engine.chat_note), 0))
        _serve(conn, flags, engine)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone: nobody to answer
    finally:
        engine.close()


def _end_with_parent() -> None:
    """End this process as soon as its parent is gone (killed, ended by SIGTERM, crashed). The
    closed pipe tells the child only between requests: a load or a long answer under way
    would otherwise go on alone, at full speed, with nobody to answer."""
    import multiprocessing
    import os
    import threading
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        wait([parent.sentinel])  # ready when the parent's end of the spawn pipe is closed
        os._exit(1)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def _serve(conn: Any, flags: Any, engine: Any) -> None:
    cancel = _Flag(flags)
    while True:
        op, args = conn.recv()
        if op == "close":
            engine.close()
            conn.send(("ok", None, 0))
            return
        if op == "generate":
            _generate(conn, engine, cancel, flags, *args)
            continue
        try:
            value = _handle(engine, cancel, op, args)
        except Exception as exc:
            conn.send(("error", _portable(exc), engine.cached_tokens))
        else:
            conn.send(("ok", value, engine.cached_tokens))


def _handle(engine: Any, cancel: _Flag, op: str, args: tuple) -> Any:
    if op == "tokenize":
        return engine.tokenize(*args)
    if op == "prompt_tokens":
        return engine.prompt_tokens(*args)
    if op == "piece":
        return engine.piece(*args)
    if op == "check_grammar":
        return engine.check_grammar(*args)
    if op == "prepare":  # what Engine.stream does before it returns the Generation
        prompt, grammar = args
        if grammar is not None:
            engine.check_grammar(grammar)
        return engine.prompt_tokens(prompt)
    if op == "next_token_logprobs":
        prompt, reuse = args
        return engine.next_token_logprobs(prompt, reuse_prefix=reuse, cancel=cancel)
    if op == "choice_probabilities":
        prompt, choices, reuse = args
        return engine.choice_probabilities(prompt, choices, reuse_prefix=reuse, cancel=cancel)
    if op == "modules":
        return {"before": IMPORTED_BEFORE, "now": tuple(sys.modules)}
    raise ValueError(f"the model process knows no operation {op!r}")


def _generate(
    conn: Any, engine: Any, cancel: _Flag, flags: Any, tokens: list[int], params: Any, grammar: Any
) -> None:
    """Stream one generation: batches of ``(text, token ids)``, then the summary."""
    from portalreview.llm.engine import Generation

    gen = Generation(engine, tokens, params, grammar, cancel)
    batch: list[tuple[str, list[int]]] = []
    sent_ids = sent_chars = 0
    last_flush = 0.0
    try:
        for text in gen:
            batch.append((text, gen.token_ids[sent_ids:]))
            sent_ids, sent_chars = len(gen.token_ids), sent_chars + len(text)
            now = time.perf_counter()
            if now - last_flush >= FLUSH_SECONDS:
                conn.send(("pieces", batch))
                batch, last_flush = [], now
    except Exception as exc:
        conn.send(("error", _portable(exc), engine.cached_tokens))
        return
    if sent_ids < len(gen.token_ids) or sent_chars < len(gen.text):
        # tokens that ended inside a character gave no piece of their own: hand them out
        # with what the decoder made of their bytes, so that the parent has every token
        batch.append((gen.text[sent_chars:], gen.token_ids[sent_ids:]))
    reason = gen.finish_reason
    if reason == "cancelled" and flags[CLOSING]:
        reason = "closed"
    summary = {
        "text": gen.text,
        "token_ids": gen.token_ids,
        "finish_reason": reason,
        "seconds": gen.seconds,
        "evaluated_prompt_tokens": gen.evaluated_prompt_tokens,
    }
    conn.send(("done", batch, summary, engine.cached_tokens))


def _portable(exc: BaseException) -> BaseException:
    """The exception as the parent can unpickle it; otherwise an LlmError with its text. An
    unexpected one (a bug) carries the child's traceback as a note."""
    import pickle
    import traceback

    from portalreview.llm.errors import LlmError

    if not isinstance(exc, LlmError):
        exc.add_note("in the model process:\n" + "".join(traceback.format_exception(exc)))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return LlmError(f"{type(exc).__name__}: {exc}")
    return exc
