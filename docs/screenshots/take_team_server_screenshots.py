"""Screenshots of a team study on a PostgreSQL server.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_team_server_screenshots.py

Starts a PostgreSQL server of its own (``portalreview.store.testing_postgres``), copies the demo
study into it, gives the clinician ``np_chloe`` and the PI ``dr_pi`` database accounts, and
saves next to this script:

* ``team-server-1-open.png``: File > Open server study…, filled in;
* ``team-server-2-clinician.png``: the clinician signed in by her account, at work;
* ``team-server-3-server-away.png``: the server stopped while she types: "⚠ Not saved" and why,
  above the editor, her text kept on screen and on this computer;
* ``team-server-4-saved-elsewhere.png``: the unit saved from another workstation signed in as
  her since she opened it here: which answer stays is hers to choose.

Look at the images after running it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import desktop_screen  # noqa: F401  (a 1920 x 1080 offscreen screen, before PySide6)
from PySide6.QtCore import QSettings
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest

from portalreview.demo import build_demo
from portalreview.store import testing_postgres
from portalreview.store.backends import Project
from portalreview.store.service import StudyService
from portalreview.store.transfer import copy_study
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow
from portalreview.ui.server_dialog import ServerStudyDialog
from portalreview.ui.settings import Preferences

HERE = Path(__file__).resolve().parent
ACCOUNTS = {"np_chloe": ("chloe_martin", "chloe-pw"), "dr_pi": ("pat_lee", "pat-pw")}


def _wait(condition, ms: int = 60000) -> None:
    waited = 0
    while not condition() and waited < ms:
        QTest.qWait(50)
        waited += 50


def _window(prefs: Preferences, server, database: str, person: str) -> MainWindow:
    role, password = ACCOUNTS[person]
    window = MainWindow(prefs)
    window.resize(1280, 800)
    window.show()
    window.open_server_study(server.dsn(database, role), password)
    _wait(lambda: window.session is not None)
    return window


def _save_failures(window: MainWindow, server) -> None:
    """The server away while she types, then the unit saved from another workstation."""
    window.kind_tabs.setCurrentIndex(window.kinds.index("respond"))
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    box.setFocus()
    box.moveCursor(QTextCursor.MoveOperation.End)
    QTest.keyClicks(box, " I am sorry the pain came back.")
    _wait(lambda: not window.session.pending)
    server.stop()
    QTest.keyClicks(box, " Please come in today.")
    window.save_now()
    QTest.qWait(300)
    window.grab().save(str(HERE / "team-server-3-server-away.png"))
    server.restart()
    _wait(lambda: not window.session.pending)
    other_desk = StudyService(window.project).as_viewer("np_chloe")
    unit = window.session.unit.unit_id
    other_desk.save_answer(unit, {"mode": "theme_guided", "parts": {"empathy": "Saved there."}})
    QTest.keyClicks(box, " Call 911 if it gets worse.")
    window.save_now()
    QTest.qWait(300)
    window.grab().save(str(HERE / "team-server-4-saved-elsewhere.png"))
    window.session.take_theirs()


def main() -> None:
    application()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        with testing_postgres.running(folder / "cluster") as server:
            database = server.new_database("ward5_study")
            with Project.open(build_demo(folder / "demo.prproj"), read_only=True) as demo:
                study = copy_study(demo, server.url(database))
            for person, (role, password) in ACCOUNTS.items():
                server.admin_sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
                study.add_member(role, person)
            prefs = Preferences(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))

            dialog = ServerStudyDialog(f"postgresql://chloe_martin@db.hospital.org/{database}")
            dialog.password_edit.setText("chloe-pw")
            dialog.show()
            QTest.qWait(300)
            dialog.grab().save(str(HERE / "team-server-1-open.png"))
            dialog.close()

            clinician = _window(prefs, server, database, "np_chloe")
            QTest.qWait(500)
            clinician.grab().save(str(HERE / "team-server-2-clinician.png"))
            _save_failures(clinician, server)

            clinician.close_project()
            study.close()
    print("saved team-server-*.png in", HERE)


if __name__ == "__main__":
    main()
