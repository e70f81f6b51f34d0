"""Where the model runs: in this process (:class:`~portalreview.llm.engine.Engine`, for tests and
benchmarks) or in a process of its own (:class:`~portalreview.llm.engines.process.
ProcessEngine`, what the app uses: a crash inside llama.cpp then stops only that process).
Both have the same interface; :func:`load_engine` chooses.

This package imports nothing at import time: the model process imports it before
``llama_cpp``, which must come before numpy (see :mod:`portalreview.llm.engines.child`).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from portalreview.llm.engine import Engine
    from portalreview.llm.engines.process import ProcessEngine

    AnyEngine: TypeAlias = Engine | ProcessEngine


def load_engine(
    path: str | os.PathLike,
    *,
    isolated: bool = True,
    cancel: threading.Event | None = None,
    **options: Any,
) -> AnyEngine:
    """Load a model file with :meth:`Engine.load`'s keyword arguments, in a process of its own
    (``isolated``, the default) or in this one. ``cancel`` stops an isolated load at once (the
    process is ended; raises :class:`~portalreview.llm.errors.Cancelled`); an in-process load
    cannot stop half-way, so there it is checked only when the load is done."""
    if isolated:
        from portalreview.llm.engines.process import ProcessEngine

        return ProcessEngine.load(path, cancel=cancel, **options)
    from portalreview.llm.engine import Engine
    from portalreview.llm.errors import Cancelled

    engine = Engine.load(path, **options)
    if cancel is not None and cancel.is_set():
        engine.close()
        raise Cancelled("loading the model was cancelled")
    return engine
