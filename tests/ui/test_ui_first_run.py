"""A first run: the welcome page leads to the demo study, and Help to the user guide."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QMessageBox
from ui_support import answer_sign_in_dialog, preferences

from portalreview import demo
from portalreview.ui import getting_started
from portalreview.ui.main_window import MainWindow
from portalreview.ui.user_guide import UserGuideWindow, github_anchor

REPO = Path(__file__).resolve().parents[2]


def test_the_welcome_page_opens_the_demo_study_built_on_first_use(
    qtbot, tmp_path, monkeypatch, built_demo
):
    """With no settings the welcome page offered only "Open a project…" and "New project…":
    nothing led a newcomer to the demo."""
    target = tmp_path / "Documents" / "PortalReview" / demo.FILE_NAME
    monkeypatch.setattr(getting_started, "demo_study_path", lambda: target)
    builds: list[Path] = []

    def build(path: Path) -> Path:  # the session's demo, copied: built once for all tests
        builds.append(path)
        return Path(shutil.copy(built_demo, path))

    monkeypatch.setattr(demo, "build_demo", build)
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    window.show()
    button = window.welcome.demo_button
    assert button.isVisible() and button.text() == "Open the demo study"
    for time in ("first", "again"):
        answer_sign_in_dialog(qtbot, "np_chloe")
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.session is not None, timeout=20_000)
        assert window.project.path == target and window.annotator_name == "np_chloe", time
        assert button.isEnabled()
        window.close_project()
    assert builds == [target]  # built the first time only


def test_a_damaged_demo_file_is_set_aside_and_the_demo_built_again(
    qtbot, tmp_path, monkeypatch, built_demo
):
    """An emptied demo file (a sync tool, a full disk) made every "Open the demo study" fail
    with "… is empty", naming no folder and offering nothing (found by an explorer). It asks
    to build the demo again, the file kept beside it."""
    target = tmp_path / "Documents" / "PortalReview" / demo.FILE_NAME
    target.parent.mkdir(parents=True)
    target.write_bytes(b"")
    monkeypatch.setattr(getting_started, "demo_study_path", lambda: target)
    monkeypatch.setattr(demo, "build_demo", lambda path: Path(shutil.copy(built_demo, path)))
    asked = []
    monkeypatch.setattr(
        QMessageBox,
        "question",
        lambda *args: asked.append(args[2]) or QMessageBox.StandardButton.Yes,
    )
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    window.show()
    answer_sign_in_dialog(qtbot, "np_chloe")
    qtbot.mouseClick(window.welcome.demo_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20_000)
    assert len(asked) == 1 and str(target) in asked[0] and "is empty" in asked[0]
    (kept,) = [p for p in target.parent.iterdir() if "-damaged-" in p.name]
    assert kept.stat().st_size == 0 and window.project.path == target
    window.close_project()


def test_help_user_guide_shows_the_readme_and_follows_its_links(qtbot, tmp_path):
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    guide_action = next(a for a in help_menu.actions() if a.text() == "&User guide")
    guide_action.trigger()
    guide = window.findChild(UserGuideWindow)
    qtbot.waitUntil(guide.isVisible)
    assert guide.page() == REPO / "README.md"
    assert "Set up on a fresh machine" in guide.browser.toPlainText()
    guide.follow_link(QUrl("docs/formats.md#how-an-import-works"))
    assert guide.page() == REPO / "docs" / "formats.md"
    assert guide.browser.verticalScrollBar().value() > 0  # at the heading, not the top
    guide.browser.backward()
    assert guide.page() == REPO / "README.md"


def test_a_heading_s_anchor_is_github_s():
    assert github_anchor("A team study on a PostgreSQL server") == (
        "a-team-study-on-a-postgresql-server"
    )
    assert github_anchor("File formats: import and export") == "file-formats-import-and-export"
