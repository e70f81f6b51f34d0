"""Screenshot of Tools > Models with the study's model server in use.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_server_screenshot.py

Builds the demo study in a temporary folder, starts llama.cpp's server on 127.0.0.1 with the
small model fetched at install time (``packaging/build_llama_server.py``,
``packaging/fetch_small_model.py``), names it as the study's model server, opens the app as the
PI, clicks "Use the model server" in Tools > Models and saves ``models-server.png`` next to
this script. Look at the image after running it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings
from PySide6.QtTest import QTest

from portalreview.demo import build_demo
from portalreview.llm import testing_server
from portalreview.llm.engines.server import ServerEngine
from portalreview.llm.model_file import model_sha256, small_model_path
from portalreview.llm.model_server import ServerSetting
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.model_panel import ModelDialog
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
NAME = "models-server.png"


def main() -> None:
    model, binary = small_model_path(), testing_server.find_binary()
    if model is None or binary is None:
        sys.exit("run packaging/fetch_small_model.py and packaging/build_llama_server.py first")
    application()
    with tempfile.TemporaryDirectory() as tmp, testing_server.running(binary, model) as server:
        os.environ["PORTALREVIEW_MACHINE_SETTINGS"] = str(Path(tmp) / "none.json")
        path = build_demo(Path(tmp) / "demo.prproj")
        setting = ServerSetting(url=server.url, sha256=model_sha256(model, None))
        with Project.open(path) as project:
            StudyService(project).set_model_server(setting.to_json())
        prefs = Preferences(QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat))
        window = MainWindow(prefs)
        window.resize(1280, 800)
        window.show()
        window.open_project(path, annotator="dr_pi")
        while window.session is None:
            QTest.qWait(20)
        dialog = ModelDialog(window.suggestions.host, window)
        dialog.resize(760, 520)
        dialog.show()
        dialog.use_server()
        while not isinstance(window.suggestions.host.engine, ServerEngine):
            QTest.qWait(50)
        QTest.qWait(300)
        dialog.grab().save(str(HERE / NAME))
        print(HERE / NAME)
        dialog.close()
        window.close()


if __name__ == "__main__":
    main()
