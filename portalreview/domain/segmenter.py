"""Rule-based sentence segmentation for patient-portal messages and clinician replies.

``split_sentences`` turns a message into :class:`SentenceSpan` objects, one per sentence.

Guarantees, for any input string ``source``:

* offsets are indices into the Python ``str`` (code points, not bytes or UTF-16 units), and
  ``span.text == source[span.start:span.end]`` always holds;
* each span is stripped: it starts at a non-whitespace character and ends just past one;
* spans are non-empty, in order and non-overlapping, and every non-whitespace character of
  ``source`` lies in exactly one span (empty or whitespace-only text gives ``[]``).

The segmenter is rule-based (plain ``re``, no NLTK data, no spaCy models) because the tool runs
offline on clinical workstations where nothing can be downloaded, and because fixed rules break
text in places annotators can predict. It works in two passes:

1. Line structure. The text is cut into segments at blank lines, before list items ("- ", "* ",
   "• ", "1. ", "1) " at the start of a line) and at a single line break when the line before has
   no terminal punctuation and the next line starts with a capital letter or a digit (greetings
   and sign-offs such as "Hi Dr. Lee," or "Thanks,\\nMaria").
2. Sentence ends inside each segment. A run of ``.``, ``!``, ``?``, ``…``, the Arabic question
   mark ``؟`` or the Urdu full stop ``۔`` (plus any closing quotes or brackets, plus emoji right
   after it) ends a sentence when whitespace or the end of the segment follows, unless the word
   before is an abbreviation ("Dr.", "e.g.", "b.i.d.", "No." before a number, initials such as
   "J. Smith" ...), the run is an ellipsis or a quoted mark that the sentence carries on after
   in lower case, or it is the period of a numbered-list marker.
   Decimals, times, URLs and e-mail addresses never break because their periods are not followed
   by whitespace. A missing space after a period ("twice.It did not help") is also a break,
   and each marker of an inline numbered list ("plan: 1. Rest 2. Fluids") starts a sentence.
   The Chinese and Japanese marks ``。``, ``！``, ``？`` and ``｡`` end a sentence with or without
   whitespace after them (those scripts put none between sentences), except where a closing
   quote or bracket follows them and then no whitespace ("「はい。」と言った" goes on).
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SentenceSpan", "sentence_texts", "split_sentences"]


@dataclass(frozen=True, slots=True)
class SentenceSpan:
    """One sentence of a source text: ``text == source[start:end]``, without outer whitespace."""

    start: int
    end: int
    text: str


#: Full stops and marks of Chinese and Japanese, which need no whitespace after them.
_CJK_TERMINALS = "。！？｡"
_TERMINALS = ".!?…؟۔" + _CJK_TERMINALS
_CLOSERS = "\"'”’»)]}」』）】〕〉》"
_OPENERS = "\"'“‘«([{¿¡"
_MAX_ABBREVIATION = 40  # look-behind cap in characters; keeps the scan linear on huge tokens

_LINE_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")
# A list item at the start of a line: a bullet, "1." or "1)", then a blank.
_LIST_ITEM = re.compile(r"[^\S\r\n]*(?:[-*•·‣◦▪–—]|\d{1,2}[.)])[^\S\r\n]")
_INLINE_MARKER = re.compile(r"(?<!\S)(\d{1,2})[.)](?=\s)")
_TERMINAL_RUN = re.compile(f"[{re.escape(_TERMINALS)}]+[{re.escape(_CLOSERS)}]*")
# A mark that ends a sentence whatever comes next (no abbreviation or ellipsis ends in it).
_FIRM_MARK = re.compile(f"[!?؟{_CJK_TERMINALS}]")
# A whitespace-separated token with no letters or digits (emoji, ":)") that is not the start
# of the next sentence (an opening quote or bracket, a dash or a bullet).
_SYMBOL_TOKEN = re.compile(r"\s*[^\s\w\"'“‘«(\[{¿¡\-*•–—][^\s\w]*(?=\s|$)")
# Emoji and other symbols right after a Chinese or Japanese mark ("谢谢！😊我..."), which belong
# to the sentence the mark ends; never a mark or an opening quote or bracket, so each scan
# stops before the next mark (keeps the segmentation linear).
_CJK_OPENERS = "「『（【〔〈《"
_CJK_TRAILING_SYMBOLS = re.compile(
    rf"[^\s\w{re.escape(_OPENERS + _CJK_OPENERS + _TERMINALS)}\-*•–—]*"
)
_NON_SPACE = re.compile(r"\S")
_NEXT_WORD = re.compile(r"\s*[\"'“‘«(\[{¿¡]*(\w*)")
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # a.m, p.r.n, b.i.d, M.D (final period excluded)
_GLUED_LEFT = re.compile(r"(?:\S*[,;])?([^\W\d_]{2,})")
_GLUED_RIGHT = re.compile(r"[A-Z][a-z]+(?:['’][a-z]+)?(?=[\s,;:!?\"”’)]|\.(?!\w)|$)")

# Never end a sentence (unless the text ends there).
_ALWAYS_CONTINUE = frozenset({"e.g", "i.e", "vs", "approx", "cf", "viz"})
# Titles go with the name after them; "I saw the Dr. He said..." still breaks (see _STARTERS).
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "jr", "sr", "rev"})
# End a sentence only when a capital follows: "etc. and" continues, "etc. The" breaks.
_CONTINUE_BEFORE_LOWER = frozenset(
    {
        "etc", "pt", "pts", "appt", "appts", "hr", "hrs", "yr", "yrs", "wk", "wks", "mo", "mos",
        "min", "mins", "tab", "tabs", "cap", "caps", "lb", "lbs", "oz", "dept", "ext", "incl",
        "esp", "tel", "ref", "wt", "ht",
    }
)  # fmt: skip
_KNOWN_ABBREVIATIONS = _ALWAYS_CONTINUE | _TITLES | _CONTINUE_BEFORE_LOWER | {"st", "no"}
# Capitalised words that start sentences far more often than they are names, so that
# "Main St. Please call" or "vitamin D. Take it" still break after the abbreviation.
_STARTERS = frozenset(
    {
        "I", "The", "It", "He", "She", "We", "They", "You", "My", "Our", "Your", "His", "Her",
        "Their", "This", "That", "These", "Those", "There", "Then", "Thanks", "Thank",
        "Please", "Also", "But", "And", "So", "If", "When", "What", "Which", "Who", "Why",
        "How", "Where", "Is", "Are", "Was", "Were", "Can", "Could", "Would", "Should", "Will",
        "Do", "Does", "Did", "Have", "Has", "Had", "Hi", "Hello", "Dear", "Yes", "No", "Ok",
        "OK", "Okay", "Sorry", "Today", "Yesterday", "Tomorrow", "After", "Before", "Since",
        "Let", "Just", "Take", "Call", "Stop", "Keep", "Continue", "Check", "See", "Make",
        "Go", "Any", "All", "Not", "Now"
    }
)  # fmt: skip


def split_sentences(text: str) -> list[SentenceSpan]:
    """Split ``text`` into stripped sentence spans (see the module docstring for the rules)."""
    return _spans(text, _cuts(text))


def sentence_texts(text: str) -> list[str]:
    """The texts of :func:`split_sentences`'s spans, in order, without making the spans: for
    callers that only read the sentences (counting a leftover draft's sentences for Edit-F1's
    ED segments tens of thousands of texts on a large study)."""
    out = []
    cuts = _cuts(text)
    for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True):
        stripped = text[a:b].strip()
        if stripped:
            out.append(stripped)
    return out


def _cuts(text: str) -> list[int]:
    """Sorted offsets where a new piece (a segment or a sentence) begins."""
    cuts: set[int] = set()
    starts = _segment_starts(text)
    for seg_start, seg_end in zip(starts, [*starts[1:], len(text)], strict=True):
        cuts.add(seg_start)
        cuts.update(_sentence_cuts(text, seg_start, seg_end))
    return sorted(cuts)


def _spans(text: str, cuts: list[int]) -> list[SentenceSpan]:
    """Strip each piece between consecutive cuts; whitespace-only pieces are dropped."""
    spans = []
    for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True):
        piece = text[a:b]
        stripped = piece.strip()
        if stripped:
            start = a + len(piece) - len(piece.lstrip())
            spans.append(SentenceSpan(start, start + len(stripped), stripped))
    return spans


# --- pass 1: line structure -------------------------------------------------------------------


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """Yield ``(start, end)`` of each line's content, line breaks (LF, CRLF, CR...) excluded."""
    start = 0
    for m in _LINE_BREAK.finditer(text):
        yield start, m.start()
        start = m.end()
    yield start, len(text)


def _segment_starts(text: str) -> list[int]:
    """Offsets where a line starts a new segment; always begins with 0."""
    starts = [0]
    prev: tuple[int, int] | None = None  # the previous non-blank line
    after_blank = False
    for start, end in _lines(text):
        if not text[start:end].strip():
            after_blank = True
            continue
        if prev is not None and (after_blank or _line_break_ends(text, prev, start, end)):
            starts.append(start)
        prev, after_blank = (start, end), False
    return starts


def _line_break_ends(text: str, prev: tuple[int, int], start: int, end: int) -> bool:
    """Whether the single line break between line ``prev`` and ``[start, end)`` ends a sentence."""
    if _LIST_ITEM.match(text, start, end):
        return True
    last = text[prev[0] : prev[1]].rstrip().rstrip(_CLOSERS)[-1:]
    if last and last in _TERMINALS:
        return False  # pass 2 decides, e.g. "Please call Dr.\nLee" stays one sentence
    first = text[start:end].lstrip().lstrip(_OPENERS)[:1]
    return first.isupper() or first.istitle() or first.isdigit() or first in "•‣◦▪"


# --- pass 2: sentence ends inside a segment ---------------------------------------------------


def _sentence_cuts(text: str, start: int, end: int) -> list[int]:
    """Offsets inside segment ``[start, end)`` where a new sentence begins."""
    marker_periods, cuts = _list_markers(text, start, end)
    pos = start
    while m := _TERMINAL_RUN.search(text, pos, end):
        pos = m.end()
        if m.start() in marker_periods:
            continue
        cut = _cut_after(text, m, start, end)
        if cut is not None:
            cuts.append(cut)
            pos = max(pos, cut)  # never rescan emoji absorbed into this sentence
    return cuts


def _list_markers(text: str, start: int, end: int) -> tuple[set[int], list[int]]:
    """Find numbered-list markers ("1. ", "2) ") in a segment.

    Returns the offsets of their periods (which never end a sentence) and their start offsets
    (where a new sentence begins). A marker counts when it opens the segment, when it is a "1."
    after a colon or a sentence end, or when it is part of a 1, 2, 3... sequence.
    """
    first_char = _NON_SPACE.search(text, start, end)
    first = first_char.start() if first_char else end
    chain: list[tuple[re.Match[str], bool]] = []
    accepted: list[re.Match[str]] = []
    for m in _INLINE_MARKER.finditer(text, start, end):
        n = int(m.group(1))
        if chain and n == int(chain[-1][0].group(1)) + 1:
            chain.append((m, False))
        elif n == 1 or m.start() == first:
            opens = m.start() == first or _char_before(text, m.start(), start) in ":;.!?…"
            accepted += _accepted_chain(chain)
            chain = [(m, opens)]
    accepted += _accepted_chain(chain)
    periods = {m.end() - 1 for m in accepted if text[m.end() - 1] == "."}
    return periods, [m.start() for m in accepted]


def _accepted_chain(chain: list[tuple[re.Match[str], bool]]) -> list[re.Match[str]]:
    """A lone "1." mid-sentence is just a number; a sequence or an opening marker is a list."""
    return [m for m, _ in chain] if len(chain) > 1 or (chain and chain[0][1]) else []


def _char_before(text: str, pos: int, start: int) -> str:
    """The last non-space character before ``pos`` in the segment, or ":" at its start."""
    while pos > start and text[pos - 1].isspace():
        pos -= 1
    return text[pos - 1] if pos > start else ":"


def _cut_after(text: str, run: re.Match[str], start: int, end: int) -> int | None:
    """Offset just past the sentence that ``run`` ends, or None if it ends none."""
    after = run.end()
    if after < end and not text[after].isspace():
        if run.group()[-1] in _CJK_TERMINALS:  # "医生您好。我..." needs no space
            return _CJK_TRAILING_SYMBOLS.match(text, after, end).end()
        return after if _is_glued_break(text, run, start, end) else None
    cut = after
    while symbol := _SYMBOL_TOKEN.match(text, cut, end):
        cut = symbol.end()  # "Thank you! 😊" - the emoji belongs to the sentence it follows
    nxt = _NEXT_WORD.match(text, cut, end)
    word = nxt.group(1) or text[nxt.end() : min(nxt.end() + 1, end)]
    return cut if _ends_sentence(text, run, start, word) else None


def _ends_sentence(text: str, run: re.Match[str], start: int, nxt: str) -> bool:
    """Decide for a run of terminal marks followed by whitespace and then the word ``nxt``."""
    if not nxt:
        return True
    kind = _kind(nxt)
    marks = run.group().rstrip(_CLOSERS)
    if kind == "lower" and len(marks) < len(run.group()):
        return False  # a quoted mark inside a sentence: '"Is it bad?" she asked.'
    if _FIRM_MARK.search(marks):
        return True
    if len(marks) > 1 or "…" in marks:
        return kind in ("upper", "other")  # "I took it and... well" trails off, no break
    return _period_ends_sentence(_word_before(text, run.start(), start), nxt, kind)


def _period_ends_sentence(word: str, nxt: str, kind: str) -> bool:
    """Whether a single period after ``word``, followed by ``nxt``, ends a sentence."""
    key = word.lower()
    if key in _ALWAYS_CONTINUE:
        return False
    starter = kind == "upper" and nxt in _STARTERS
    if key in _TITLES:
        return starter
    if len(word) == 1 and word.isupper():  # initials: "J. Smith", "E. coli"; "vitamin D. Take"
        return starter or kind in ("digit", "other")
    if key == "st":
        return not (kind == "upper" and not starter)  # "St. Mary's" vs "Oak St. Please"
    if key == "no" and kind == "digit":
        return False  # "No. 48213"
    if key in _CONTINUE_BEFORE_LOWER or _DOTTED.fullmatch(key):
        return kind not in ("lower", "digit")  # "3:30 p.m. tomorrow" vs "at 3 p.m. Please"
    return True


def _is_glued_break(text: str, run: re.Match[str], start: int, end: int) -> bool:
    """A period with no space after it that still ends a sentence: "twice.It did not help"."""
    if run.group()[-1] not in _TERMINALS or not _GLUED_RIGHT.match(text, run.end(), end):
        return False  # cheap checks first: "2.5", "a.m." and URLs stop here
    left = _GLUED_LEFT.fullmatch(_word_before(text, run.start(), start))
    return left is not None and left.group(1).lower() not in _KNOWN_ABBREVIATIONS


def _word_before(text: str, pos: int, start: int) -> str:
    """The whitespace-delimited token ending at ``pos`` (capped), without opening punctuation."""
    i, limit = pos, max(start, pos - _MAX_ABBREVIATION)
    while i > limit and not text[i - 1].isspace():
        i -= 1
    return text[i:pos].lstrip(_OPENERS)


def _kind(word: str) -> str:
    """Classify a word by its first character: "upper", "lower", "digit" or "other"."""
    c = word[0]
    if c.isdigit():
        return "digit"
    if c.islower():
        return "lower"
    return "upper" if c.isupper() or c.istitle() else "other"
