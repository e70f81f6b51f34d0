"""One answer codec per annotation kind; the registry the service layer dispatches on.

A new kind: a module here with KIND, write, clear, read, read_many and incomplete, and one line
below.
"""

from __future__ import annotations

from types import ModuleType

from portalreview.store.kinds import empathy, eppc, facts, match, rank, respond, urgency
from portalreview.store.kinds.base import PayloadError, UnitContext

CODECS: dict[str, ModuleType] = {
    m.KIND: m for m in (respond, rank, match, urgency, eppc, empathy, facts)
}

__all__ = ["CODECS", "PayloadError", "UnitContext"]
