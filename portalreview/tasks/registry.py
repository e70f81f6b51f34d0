"""Which editor shows which annotation kind. A new kind = a folder under ``tasks/`` with an
``editor.py`` + one line here."""

from __future__ import annotations

from collections.abc import Callable

from portalreview.domain.catalogs import Catalogs
from portalreview.tasks.common.editor_base import Editor

EditorFactory = Callable[[Catalogs], Editor]


def _respond(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.respond.editor import RespondEditor

    return RespondEditor(catalogs)


def _rank(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.rank.editor import RankEditor

    return RankEditor(catalogs)


def _match(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.match.editor import MatchEditor

    return MatchEditor(catalogs)


def _urgency(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.urgency.editor import UrgencyEditor

    return UrgencyEditor(catalogs)


def _empathy(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.empathy.editor import EmpathyEditor

    return EmpathyEditor(catalogs)


def _eppc(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.eppc.editor import EppcEditor

    return EppcEditor(catalogs)


def _facts(catalogs: Catalogs) -> Editor:
    from portalreview.tasks.facts.editor import FactsEditor

    return FactsEditor(catalogs)


#: kind -> (title shown in the kind selector, editor factory)
EDITORS: dict[str, tuple[str, EditorFactory]] = {
    "respond": ("Write responses", _respond),
    "rank": ("Rank drafts", _rank),
    "match": ("Match content", _match),
    "urgency": ("Urgency pairs", _urgency),
    "eppc": ("Code sentences (EPPC)", _eppc),
    "empathy": ("Empathy pairs", _empathy),
    "facts": ("Check facts", _facts),
}
