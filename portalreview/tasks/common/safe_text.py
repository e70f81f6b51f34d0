"""Study text (imported messages, names, codebook entries) shown as it is written.

Qt reads a tooltip, and a label left at its automatic format, as HTML when its first line looks
like HTML: an imported ``<img src="file:...">`` would load and draw that file (on Windows a
``file://host/share`` address contacts that server), a message holding a huge ``<table>``
freezes the window while it is laid out, and "Cardiology <ED> pilot" loses its "<ED>". Labels
that are HTML on purpose put study values in with ``html.escape``; tooltips of plain study text
go through :func:`plain_tip`."""

from __future__ import annotations

from PySide6.QtGui import Qt


def plain_tip(text: str) -> str:
    """``text`` as a tooltip that shows it literally: unchanged where Qt would read it as plain
    text anyway, else escaped as one HTML paragraph (line breaks kept)."""
    if not Qt.mightBeRichText(text):
        return text
    return Qt.convertFromPlainText(text, Qt.WhiteSpaceMode.WhiteSpaceNormal)
