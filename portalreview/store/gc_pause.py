"""Python's cyclic garbage collector paused while a large read makes many objects."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (reference counting still frees
    memory at once), then restore it as it was.

    Reading a large study creates millions of row tuples in a few seconds; each automatic
    collection walks every live container, so with the collector on, reading 10,000 cases
    spends about as long collecting as reading (the frames; adjudication's answers of one
    kind, twice as long). Nothing read this way forms reference cycles. Of two blocks that
    overlap (two threads), the one that found it on turns it back on when it ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
