"""Every colour that carries a meaning, for each colour scheme (light, dark, high contrast), in
one place, with the contrast each must keep (tests/ui/test_ui_contrast.py computes the WCAG
contrast ratios: at least 4.5:1 for text against what it is drawn on, in every scheme).

Colour is never the only cue: evidence and matched spans are underlined as well as tinted,
lines that differ between answers carry a "≠" mark, a misplaced urgent message says "⚠ urgent,
sorted low", done and to-do units carry ● / ○ and the words, a suggestion's banner says what it
is. The scheme in use is set by :func:`portalreview.ui.main_window.apply_color_scheme`.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QPen
from PySide6.QtWidgets import (
    QApplication,
    QPlainTextEdit,
    QProxyStyle,
    QStyle,
    QStyleFactory,
    QTextEdit,
)

SCHEMES = ("light", "dark", "high_contrast")
_PROPERTY = "portalreview_scheme"

#: Text colours (drawn on the window or a text field's background).
TEXT: dict[str, dict[str, str]] = {
    "error": {"light": "#b3261e", "dark": "#ff8a80", "high_contrast": "#ff8c8c"},
    "ok": {"light": "#1e6b30", "dark": "#81c995", "high_contrast": "#66ff66"},
    "muted": {"light": "#5f6368", "dark": "#a8adb3", "high_contrast": "#ffffff"},
}

#: Backgrounds drawn behind ordinary text (the palette's Text colour stays on them).
MARK: dict[str, dict[str, str]] = {
    "difference": {"light": "#ffe1c2", "dark": "#5a2a2a", "high_contrast": "#3d0066"},
    "focus_entry": {"light": "#fff3b0", "dark": "#3b4a5a", "high_contrast": "#00335c"},
    "current_sentence": {"light": "#fff3b0", "dark": "#3b5b2a", "high_contrast": "#00335c"},
    "fact_lost": {"light": "#fbdada", "dark": "#5a2a2a", "high_contrast": "#5c0000"},
    "fact_kept": {"light": "#dcf3df", "dark": "#24472b", "high_contrast": "#003d00"},
    "matched": {"light": "#c8ecd0", "dark": "#1f5f32", "high_contrast": "#003d00"},
    "matched_current": {"light": "#7fd39a", "dark": "#14532d", "high_contrast": "#005c5c"},
    "warning_row": {"light": "#ffd6cc", "dark": "#6e1e1e", "high_contrast": "#5c0000"},
}

#: The EPPC codes' evidence colours, one per code (behind the sentence's text).
CODE_MARKS: dict[str, tuple[str, ...]] = {
    "light": ("#ffe08a", "#a8d8ff", "#c3f0b8", "#ffc2d6", "#d9c8ff", "#ffd0a8", "#b8f0ea",
              "#e8e8a0", "#f0c0f0"),
    "dark": ("#7a5d00", "#1d5680", "#2f6b25", "#7f2946", "#4d3591", "#80461a", "#1f6b63",
             "#5f5f18", "#6b2a6b"),
    "high_contrast": ("#5c4600", "#00335c", "#1f4d1a", "#5c1a33", "#33265c", "#5c3300",
                      "#134d47", "#40400f", "#4d1a4d"),
}

#: White text on these (who wrote the message shown).
SENDER: dict[str, dict[str, str]] = {
    "patient": {"light": "#1d6fa5", "dark": "#1d6fa5", "high_contrast": "#00336b"},
    "provider": {"light": "#7a4ea0", "dark": "#7a4ea0", "high_contrast": "#4d1a6b"},
}

#: The suggestion banner: (background, border, text) per state.
BANNER: dict[str, dict[str, tuple[str, str, str]]] = {
    "light": {
        "working": ("#eef3fb", "#8aa8d8", "#1c2b45"),
        "offered": ("#fff3c4", "#d9a400", "#3a2c00"),
        "accepted": ("#e3f4e1", "#5aa55a", "#173d17"),
        "edited": ("#e3f4e1", "#5aa55a", "#173d17"),
        "note": ("#f1f1f1", "#b0b0b0", "#2a2a2a"),
    },
    "dark": {
        "working": ("#1c2b45", "#8aa8d8", "#e8eefb"),
        "offered": ("#3a2c00", "#d9a400", "#fff3c4"),
        "accepted": ("#173d17", "#5aa55a", "#e3f4e1"),
        "edited": ("#173d17", "#5aa55a", "#e3f4e1"),
        "note": ("#2a2a2a", "#8a8a8a", "#f1f1f1"),
    },
    "high_contrast": {
        "working": ("#000000", "#00ffff", "#ffffff"),
        "offered": ("#000000", "#ffff00", "#ffff00"),
        "accepted": ("#000000", "#66ff66", "#ffffff"),
        "edited": ("#000000", "#66ff66", "#ffffff"),
        "note": ("#000000", "#ffffff", "#ffffff"),
    },
}


#: Placeholder text, and the guiding questions drawn in its colour on the window: opaque greys
#: with at least 4.5:1 on both a field and the window (light: 7.0:1 on white, 6.1:1 on #efefef).
PLACEHOLDER = {"light": "#595959", "dark": "#a0a4aa"}


def light_palette(standard: QPalette) -> QPalette:
    """The style's light palette with a darker selection colour (Fusion's own blue gives
    white text only 3.7:1) and a readable placeholder colour (:func:`readable_placeholder`)."""
    palette = QPalette(standard)
    palette.setColor(QPalette.ColorRole.Highlight, QColor("#1d5fa0"))
    palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
    palette.setColor(QPalette.ColorRole.PlaceholderText, QColor(PLACEHOLDER["light"]))
    return palette


def readable_placeholder(standard: QPalette) -> QPalette:
    """``standard`` (a platform's palette) with a placeholder colour that keeps 4.5:1 on both
    its field and window colours. A platform's own is often its text colour at half alpha:
    Fusion's, black at 50%, is drawn #777777 on the window (3.9:1, the theme boxes' guiding
    questions) and #7f7f7f in a field (4.0:1)."""
    role, palette = QPalette.ColorRole, QPalette(standard)
    backgrounds = (palette.color(role.Base), palette.color(role.Window))

    def readable(colour: QColor) -> bool:
        return all(contrast_ratio(drawn(colour, bg), bg) >= 4.5 for bg in backgrounds)

    if readable(palette.color(role.PlaceholderText)):
        return palette
    dark = palette.color(role.Base).lightness() < 128
    ours = QColor(PLACEHOLDER["dark" if dark else "light"])
    palette.setColor(role.PlaceholderText, ours if readable(ours) else palette.color(role.Text))
    return palette


def high_contrast_palette() -> QPalette:
    """White on black, yellow selection with black text, cyan links (at least 7:1 each)."""
    role, palette = QPalette.ColorRole, QPalette()
    colours = {
        role.Window: "#000000", role.WindowText: "#ffffff", role.Base: "#000000",
        role.AlternateBase: "#141414", role.Text: "#ffffff", role.Button: "#000000",
        role.ButtonText: "#ffffff", role.ToolTipBase: "#000000", role.ToolTipText: "#ffffff",
        role.PlaceholderText: "#d0d0d0", role.Highlight: "#ffff00",
        role.HighlightedText: "#000000", role.Link: "#00ffff", role.LinkVisited: "#ff80ff",
        role.BrightText: "#ffffff", role.Light: "#ffffff", role.Midlight: "#c0c0c0",
        role.Mid: "#ffffff", role.Dark: "#ffffff", role.Shadow: "#ffffff",
    }
    for colour_role, colour in colours.items():
        palette.setColor(colour_role, QColor(colour))
    for colour_role in (role.Text, role.WindowText, role.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, colour_role, QColor("#b0b0b0"))
    return palette


class OutlinedStyle(QProxyStyle):
    """Fusion, with check boxes, radio buttons and text fields outlined in the placeholder
    colour (at least 4.5:1 on a field and on the window, :func:`readable_placeholder`).
    Fusion outlines them in the window colour 40% darker: 1.1:1 on the dark palette (EPPC's
    code boxes and the comment field could not be seen) and 1.7:1 on the light one, under the
    3:1 WCAG 1.4.11 asks of what shows a control is there; so are progress bars. A pressed-in
    button is drawn in the selection colours."""

    _BOXES = (
        QStyle.PrimitiveElement.PE_IndicatorCheckBox,
        QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck,
        QStyle.PrimitiveElement.PE_IndicatorRadioButton,
    )

    def __init__(self) -> None:
        super().__init__(QStyleFactory.create("Fusion"))

    def drawPrimitive(self, element, option, painter, widget=None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        flags = QStyle.StateFlag
        if not option.state & flags.State_Enabled or not self._outlined(element, widget):
            return  # a disabled control keeps Fusion's faint look
        if not option.state & flags.State_HasFocus:
            self._outline(element, option, painter, QPalette.ColorRole.PlaceholderText, 1)
        elif element == QStyle.PrimitiveElement.PE_Frame:
            # Fusion marks a focused field in the selection colour, a text box not at all.
            self._outline(element, option, painter, QPalette.ColorRole.Highlight, 2)

    @staticmethod
    def _pressed_in(option):
        """A pressed-in (checked) button's option drawn in the selection colours (black on
        yellow in high contrast; inverted where those are too close to the button's own):
        Fusion shades it a little darker than the button colour, and black a little darker is
        black (the chosen urgency level looked like the others; in the dark scheme the
        patient chosen first too)."""
        if not option.state & QStyle.StateFlag.State_On:
            return option
        role, palette = QPalette.ColorRole, QPalette(option.palette)
        fill, text = palette.color(role.Highlight), palette.color(role.HighlightedText)
        if contrast_ratio(fill, palette.color(role.Button)) < 3.5:  # Fusion lightens it a bit
            # the dark scheme's blue on its grey buttons (3.0:1 as drawn): the button inverted
            fill, text = palette.color(role.ButtonText), palette.color(role.Button)
        palette.setColor(role.Button, fill)
        palette.setColor(role.ButtonText, text)
        drawn = type(option)(option)
        drawn.palette = palette
        return drawn

    def drawControl(self, element, option, painter, widget=None) -> None:
        if element == QStyle.ControlElement.CE_PushButton:
            option = self._pressed_in(option)
        super().drawControl(element, option, painter, widget)
        if element == QStyle.ControlElement.CE_ProgressBarGroove:  # its length, seen empty too
            self._outline(element, option, painter, QPalette.ColorRole.PlaceholderText, 1)

    def drawComplexControl(self, control, option, painter, widget=None) -> None:
        # A section's open/closed toggle shows its state by its arrow: not drawn pressed in.
        if control == QStyle.ComplexControl.CC_ToolButton and not option.arrowType.value:
            option = self._pressed_in(option)
        super().drawComplexControl(control, option, painter, widget)

    def _outlined(self, element, widget) -> bool:
        if element in self._BOXES or element == QStyle.PrimitiveElement.PE_FrameLineEdit:
            return True
        # A plain-text or rich-text box's frame (the comment and the theme boxes).
        return element == QStyle.PrimitiveElement.PE_Frame and isinstance(
            widget, (QPlainTextEdit, QTextEdit)
        ) and not widget.isReadOnly()

    def _outline(self, element, option, painter, role: QPalette.ColorRole, width: int) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(option.palette.color(role), width))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        inset = width / 2
        rect = QRectF(option.rect).adjusted(inset, inset, -inset, -inset)
        if element == QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(rect.adjusted(0.5, 0.5, -0.5, -0.5))
        else:
            painter.drawRoundedRect(rect, 2, 2)
        painter.restore()


class HighContrastStyle(OutlinedStyle):
    """:class:`OutlinedStyle`, with check and radio boxes drawn white (yellow inside when
    ticked): Fusion's own outline is a shade darker than the window, so on black it cannot be
    seen. A style, not a style sheet: a style sheet on the application would undo the
    editors' text zoom."""

    def drawPrimitive(self, element, option, painter, widget=None) -> None:
        if element not in self._BOXES:
            super().drawPrimitive(element, option, painter, widget)
            return
        rect = option.rect.adjusted(1, 1, -2, -2)
        ticked = bool(option.state & (QStyle.StateFlag.State_On | QStyle.StateFlag.State_NoChange))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor("#ffffff"), 2))
        painter.setBrush(QColor("#ffff00" if ticked else "#000000"))
        if element == QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(rect)
        else:
            painter.drawRect(rect)
        painter.restore()


def set_scheme(name: str) -> None:
    """Record the scheme in use (light, dark or high_contrast)."""
    app = QApplication.instance()
    if app is not None:
        app.setProperty(_PROPERTY, name)


def scheme() -> str:
    """The scheme in use: the one recorded, else light or dark by the palette."""
    app = QApplication.instance()
    if app is None:
        return "light"
    recorded = app.property(_PROPERTY)
    if recorded in SCHEMES:
        return recorded
    return "dark" if app.palette().base().color().lightness() < 128 else "light"


def text(role: str) -> str:
    return TEXT[role][scheme()]


def mark(role: str) -> QColor:
    return QColor(MARK[role][scheme()])


def code_mark(index: int) -> QColor:
    marks = CODE_MARKS[scheme()]
    return QColor(marks[index % len(marks)])


def sender(role: str) -> str:
    return SENDER[role][scheme()]


def banner(state: str) -> tuple[str, str, str]:
    return BANNER[scheme()][state]


def drawn(colour: str | QColor, background: str | QColor) -> QColor:
    """``colour`` as painted on ``background`` (opaque): a translucent colour is blended into
    it. ``QColor.name()`` drops the alpha, so black at 50% would read as black."""
    fg, bg = QColor(colour), QColor(background)
    alpha = fg.alphaF()
    channels = zip(fg.getRgb()[:3], bg.getRgb()[:3], strict=True)
    return QColor(*(round(f * alpha + b * (1 - alpha)) for f, b in channels))


def contrast_ratio(first: str | QColor, second: str | QColor) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""

    def luminance(colour: str | QColor) -> float:
        c = QColor(colour)
        channels = []
        for value in (c.redF(), c.greenF(), c.blueF()):
            channels.append(value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4)
        r, g, b = channels
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    a, b = sorted((luminance(first), luminance(second)), reverse=True)
    return (a + 0.05) / (b + 0.05)
