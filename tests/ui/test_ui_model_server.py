"""The study's model server, seen from the app: Tools > Models offers the server the project
names, suggestions come from it (a real llama.cpp server with SmolLM2 on 127.0.0.1), and when
the server goes away in the middle of the work the banner says so, the clinician's typing is
saved, and suggestions work again once IT restarts it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton
from ui_support import open_window, preferences, show_kind, stored_answer, wait_saved

from portalreview.llm import testing_server
from portalreview.llm.engines.server import ServerEngine
from portalreview.llm.model_file import model_sha256
from portalreview.llm.model_server import ServerSetting
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.model_panel import ModelDialog
from portalreview.ui.suggestions import SuggestionBanner

pytestmark = [pytest.mark.real_model, pytest.mark.model_server]
WAIT_MS = 120000


def banner(window, kind: str) -> SuggestionBanner:
    return window.editors[kind].findChild(SuggestionBanner)


def test_suggestions_come_from_the_server_and_its_loss_is_said(
    qtbot, gui, tmp_path, llama_server_binary, real_model_path, monkeypatch
) -> None:
    monkeypatch.setenv("PORTALREVIEW_MACHINE_SETTINGS", str(tmp_path / "none.json"))
    log = tmp_path / "server.log"
    server = testing_server.start(llama_server_binary, real_model_path, slots=1, log=log)
    try:
        setting = ServerSetting(url=server.url, sha256=model_sha256(real_model_path, None))
        with Project.open(gui.path) as project:
            StudyService(project).set_model_server(setting.to_json())
        window = open_window(qtbot, preferences(tmp_path), gui.path, "ava")
        host = window.suggestions.host
        dialog = ModelDialog(host, window)
        qtbot.addWidget(dialog)
        label = dialog.findChild(QLabel, "serverLabel")
        assert server.url.split("//")[1] in label.text() and "this study" in label.text()
        use = dialog.findChild(QPushButton, "useServer")
        assert use.isEnabled()
        qtbot.mouseClick(use, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: isinstance(host.engine, ServerEngine), timeout=WAIT_MS)
        assert "model server" in dialog.findChild(QLabel, "currentModel").text()
        dialog.close()

        show_kind(window, "urgency")  # one next-token question per order: quick on SmolLM2
        qtbot.waitUntil(lambda: banner(window, "urgency").state in ("offered", "note"),
                        timeout=WAIT_MS)
        assert "SmolLM2" in banner(window, "urgency").text.text()

        server.kill()  # the GPU box goes away
        show_kind(window, "respond")
        qtbot.waitUntil(lambda: banner(window, "respond").state == "note", timeout=WAIT_MS)
        note = banner(window, "respond").text.text()
        assert "model server" in note and server.url.split("//")[1] in note, note

        # the clinician goes on by hand, and it is saved
        editor = window.editors["respond"]
        first_box = next(b for b in editor.findChildren(TextBox) if b.isVisible())
        first_box.setFocus()
        qtbot.keyClicks(first_box, "Please come in today.")
        wait_saved(qtbot, window)
        qtbot.waitUntil(
            lambda: "Please come in today." in str(
                stored_answer(gui.path, gui.ids.units["respond"], "ava")
            ),
            timeout=WAIT_MS,
        )

        # IT restarts the server on the same address: suggestions come again
        server = testing_server.start(llama_server_binary, real_model_path, slots=1,
                                      port=server.port, log=log)
        show_kind(window, "empathy")
        qtbot.waitUntil(lambda: banner(window, "empathy").state in ("offered", "note"),
                        timeout=WAIT_MS)
        assert "cannot be used" not in banner(window, "empathy").text.text()
        window.close()
    finally:
        server.stop()


def test_the_pi_names_the_server_in_the_models_dialog(qtbot, gui, tmp_path, monkeypatch) -> None:
    from PySide6.QtWidgets import QDialog

    from portalreview.llm.model_server import configured_setting
    from portalreview.ui import model_panel

    monkeypatch.setenv("PORTALREVIEW_MACHINE_SETTINGS", str(tmp_path / "none.json"))
    clinician = open_window(qtbot, preferences(tmp_path / "ava"), gui.path, "ava")
    dialog = ModelDialog(clinician.suggestions.host, clinician)
    qtbot.addWidget(dialog)
    assert not dialog.findChild(QPushButton, "nameServer").isVisible()
    assert "No model server is named" in dialog.findChild(QLabel, "serverLabel").text()
    assert not dialog.findChild(QPushButton, "useServer").isEnabled()
    clinician.close()

    window = open_window(qtbot, preferences(tmp_path / "pat"), gui.path, "pat")
    dialog = ModelDialog(window.suggestions.host, window)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.findChild(QPushButton, "nameServer").isVisible()
    answers = iter([("http://10.1.2.3:8443", "not a hash"), ("http://10.1.2.3:8443", "ab" * 32)])
    errors: list[str] = []

    def fill_and_save(form) -> int:
        for url, sha in answers:
            form.url.setText(url)
            form.sha.setText(sha)
            form.check_and_accept()
            if form.result() == QDialog.DialogCode.Accepted:
                return QDialog.DialogCode.Accepted
            errors.append(form.error.text())
        return QDialog.DialogCode.Rejected

    monkeypatch.setattr(model_panel.ServerForm, "exec", fill_and_save)
    qtbot.mouseClick(dialog.findChild(QPushButton, "nameServer"), Qt.MouseButton.LeftButton)
    assert errors and "needs 'sha256'" in errors[0]
    label = dialog.findChild(QLabel, "serverLabel").text()
    assert "http://10.1.2.3:8443" in label and "this study" in label
    assert dialog.findChild(QPushButton, "useServer").isEnabled()
    window.close()
    with Project.open(gui.path, read_only=True) as project:
        setting = configured_setting(project)
    assert setting is not None and setting.sha256 == "ab" * 32
