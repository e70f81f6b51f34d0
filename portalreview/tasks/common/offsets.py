"""Character offsets between Python strings and Qt text documents.

The store keeps spans as offsets into a Python ``str`` (code points): EPPC evidence into its
sentence, match spans into the draft. A ``QTextDocument`` counts positions in UTF-16 code
units, so every character outside the Basic Multilingual Plane (most emoji: "😀" is one code
point, two UTF-16 units) shifts Qt's positions by one; ``setPlainText`` turns a "\\r\\n"
line break into one paragraph separator, and drops a U+FEFF (a byte-order mark, as a text
saved by Notepad starts with) at the very start of the text, though not a second one nor one
further in. :class:`TextOffsets` converts both ways for one text. No widgets here.
"""

from __future__ import annotations

from bisect import bisect_left

BOM = "\ufeff"


class TextOffsets:
    """Offsets of one text: Python index <-> position in a QTextDocument holding that text."""

    def __init__(self, text: str) -> None:
        self.text = text
        #: Python characters before the document's first position: a leading U+FEFF
        self.hidden_prefix = 1 if text.startswith(BOM) else 0
        starts = [0]  # starts[i]: Qt position of code point i (and of the end, at len(text))
        position = 0
        for i, char in enumerate(text):
            if char == "\r" and text[i + 1 : i + 2] == "\n":
                width = 0  # "\r\n" becomes one separator in the document
            elif i < self.hidden_prefix:
                width = 0  # setPlainText drops it
            else:
                width = 2 if ord(char) > 0xFFFF else 1
            position += width
            starts.append(position)
        self._starts = starts

    @property
    def qt_length(self) -> int:
        """Positions the document has for this text (``characterCount() - 1``)."""
        return self._starts[-1]

    def to_qt(self, index: int) -> int:
        """The document position of Python index ``index`` (0..len(text))."""
        if not 0 <= index <= len(self.text):
            raise ValueError(f"index {index} is outside the text (0 to {len(self.text)})")
        return self._starts[index]

    def from_qt(self, position: int, *, round_up: bool = False) -> int:
        """The Python index of document position ``position``.

        A position inside a character (between the two halves of a surrogate pair, which a
        cursor should never stop at) rounds down to the character's start, or up to its end
        with ``round_up`` (for the end of a selection).
        """
        position = max(0, min(position, self.qt_length))
        if position == 0:  # the first visible character, after a dropped U+FEFF
            return self.hidden_prefix
        index = bisect_left(self._starts, position)
        if self._starts[index] == position:  # the first of equal ones: "\r" of "\r\n"
            return min(index, len(self.text))
        return index if round_up else index - 1

    def span_from_qt(self, start: int, end: int) -> tuple[int, int]:
        """A selection's Python ``(start, end)`` (start rounded down, end rounded up)."""
        a, b = sorted((start, end))
        return self.from_qt(a), self.from_qt(b, round_up=True)

    def span_to_qt(self, start: int, end: int) -> tuple[int, int]:
        return self.to_qt(start), self.to_qt(end)


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` without the whitespace at either end of ``text[start:end]``."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
