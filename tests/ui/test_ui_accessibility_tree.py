"""What a screen reader finds (issue 17, part 2): Qt's accessibility tree (QAccessible) of the
main window with every kind of work, every tool window, the sign-in dialog and the model-server
form is walked, and every interactive control that is shown (a button, a check or radio box, a
text field, a list, a table, a tab...) must have a name. Qt's own parts of a control (a spin
box's line edit, a scroll area's viewport) are announced through the control: they are not
checked, but what they hold is. Rows, cells and items are named by their own text."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QApplication, QWidget
from ui_support import open_window, preferences

from portalreview.ui.model_panel import ServerForm
from portalreview.ui.sign_in import SignInDialog
from portalreview.ui.tools import TOOLS

Role = QAccessible.Role
INTERACTIVE = {
    Role.Button, Role.ButtonDropDown, Role.ButtonMenu, Role.CheckBox, Role.RadioButton,
    Role.ComboBox, Role.EditableText, Role.List, Role.Table, Role.Tree, Role.PageTab,
    Role.Slider, Role.SpinBox, Role.Link,
}
# Their children are rows, cells or items named by their own text: the container is checked.
CONTAINERS = {Role.List, Role.Table, Role.Tree, Role.ComboBox, Role.SpinBox}
KINDS = ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")


def unnamed_controls(root: QWidget, seen: list[str] | None = None) -> list[str]:
    """Every shown interactive control under ``root`` whose accessible name is empty (and,
    in ``seen``, every interactive control walked)."""
    found: list[str] = []
    seen = [] if seen is None else seen

    def walk(iface, path: str, depth: int) -> None:
        if iface is None or not iface.isValid() or depth > 60:
            return
        state = iface.state()
        if state.invisible:  # not shown (scrolled out of view still counts)
            return
        role = iface.role()
        widget = iface.object() if isinstance(iface.object(), QWidget) else None
        # Qt's own parts (a scroll area's viewport, a spin box's line edit) are announced
        # through their control: not checked themselves, but what they hold is.
        internal = widget is not None and widget.objectName().startswith("qt_")
        here = f"{path} > {role.name}" + (f" {widget.objectName()!r}" if widget else "")
        if role in INTERACTIVE and not internal:
            seen.append(here)
            if not iface.text(QAccessible.Text.Name).strip():
                found.append(here + f" ({type(widget).__name__ if widget else 'item'})")
        if role in CONTAINERS:
            return
        for i in range(iface.childCount()):
            walk(iface.child(i), here, depth + 1)

    walk(QAccessible.queryAccessibleInterface(root), type(root).__name__, 0)
    return found


def test_every_control_of_every_kind_has_a_name(qtbot, gui, tmp_path) -> None:
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    missing = {}
    for kind in KINDS:
        window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
        qtbot.wait(100)
        seen: list[str] = []
        missing[kind] = unnamed_controls(window, seen)
        # the walk reached the editor's own controls, not only the window's frame
        assert sum(f"'{kind}Editor'" in path for path in seen) >= 3, (kind, seen)
    window.close()
    assert missing == {kind: [] for kind in KINDS}


def test_every_tool_window_s_controls_have_names(qtbot, gui, tmp_path) -> None:
    window = open_window(qtbot, preferences(tmp_path), gui.path, "pat")
    missing = {}
    for tool in TOOLS:
        before = set(QApplication.topLevelWidgets())
        tool.load()(window)
        qtbot.wait(400)
        for widget in QApplication.topLevelWidgets():
            if widget not in before and widget.isVisible():
                missing[tool.title] = unnamed_controls(widget)
                widget.close()
    assert set(missing) == {t.title for t in TOOLS}
    assert missing == {title: [] for title in missing}
    window.close()


@pytest.mark.parametrize("which", ["sign-in", "server form", "server study"])
def test_the_dialogs_controls_have_names(qtbot, which) -> None:
    if which == "sign-in":
        from types import SimpleNamespace

        people = [SimpleNamespace(name="ava", display_name="Ava", role="clinician")]
        dialog = SignInDialog("Study", people)
    elif which == "server form":
        dialog = ServerForm(None)
    else:
        from portalreview.ui.server_dialog import ServerStudyDialog

        dialog = ServerStudyDialog("postgresql://ava@db/ward")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.wait(50)
    assert unnamed_controls(dialog) == []


def test_descriptions_and_live_figures_are_there_for_a_screen_reader(qtbot, gui, tmp_path) -> None:
    from portalreview.tasks.common.editor_base import LiveFigure, TextBox

    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    window.kind_tabs.setCurrentIndex(window.kinds.index("respond"))
    qtbot.wait(100)
    theme = window.service.catalogs.themes[0]
    box = window.editors["respond"].findChild(TextBox, f"box_{theme.id}")
    assert theme.question in box.accessibleDescription()

    window.kind_tabs.setCurrentIndex(window.kinds.index("urgency"))
    qtbot.wait(100)
    unit = window.session.unit
    shown = {c.external_id for c in unit.cases}
    buttons = [b for b in window.editors["urgency"].findChildren(QWidget)
               if b.objectName() in ("choose_left", "choose_right")]
    described = {next(x for x in shown if x in b.accessibleDescription()) for b in buttons}
    assert described == shown  # each button says which patient it chooses

    for kind, figure in (("match", "Content Edit-F1"), ("facts", "Fact-Recall")):
        window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
        qtbot.wait(100)
        live = window.editors[kind].findChild(LiveFigure)
        assert figure in live.accessibleName(), (kind, live.accessibleName())
        assert "<b>" not in live.accessibleName()  # announced as text, not markup
    window.close()


def _button_names(root: QWidget) -> list[str]:
    names: list[str] = []

    def walk(iface, depth: int) -> None:
        if iface is None or not iface.isValid() or depth > 60 or iface.state().invisible:
            return
        if iface.role() == Role.Button:
            names.append(iface.text(QAccessible.Text.Name))
        if iface.role() not in CONTAINERS:
            for i in range(iface.childCount()):
                walk(iface.child(i), depth + 1)

    walk(QAccessible.queryAccessibleInterface(root), 0)
    return names


def test_no_two_buttons_of_an_editor_share_a_name(qtbot, gui, tmp_path) -> None:
    """Check facts' two sides each had "Add", "Remove (Del)" and "List the selection as a
    fact (F)": a screen reader could not tell which side a button acted on."""
    window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
    shared = {}
    for kind in KINDS:
        window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
        qtbot.wait(100)
        names = _button_names(window.editors[kind])
        shared[kind] = sorted({n for n in names if names.count(n) > 1})
    window.close()
    assert shared == {kind: [] for kind in KINDS}
