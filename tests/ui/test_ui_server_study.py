"""The app on a server study: File > Open server study…, signed in as the database account's
annotator; typing kept while the server is away and saved when it is back; the PI's dashboard
following another person's saves by LISTEN/NOTIFY."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time

import psycopg
import pytest
from PySide6.QtWidgets import QDialog, QMessageBox
from sqlalchemy import text
from test_ui_dashboard import COMPUTE_MS, Dashboard, cell_of, open_dashboard
from ui_support import show_kind, wait_saved

from portalreview.store.backends import ServerProject, postgres
from portalreview.store.backends.postgres import parse_url, redact
from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.main_window import MainWindow
from portalreview.ui.server_dialog import ServerStudyDialog
from tests.conftest import build_small_study
from tests.store.test_server_commit_lost import _at_the_next_commit
from tests.store.test_server_frozen import freezing_the_next_read, frozen


@pytest.fixture
def team_study(postgres_server):
    """The small study on the server, and a database account for ava and for the PI."""
    server = postgres_server
    database = server.new_database()
    accounts = {}
    with ServerProject.create(server.url(database), name="Ward study") as project:
        study = build_small_study(project)
        for person in ("ava", "pat"):
            accounts[person] = server.member_login(project, person)
    return server, database, study, accounts


def _open(qtbot, prefs, team_study, person) -> MainWindow:
    server, database, _study, accounts = team_study
    role, password = accounts[person]
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    window.show()
    window.open_server_study(server.dsn(database, role), password)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    return window


def test_the_dialog_keeps_the_password_out_of_the_address(qtbot):
    dialog = ServerStudyDialog("postgresql://ava@db.example.org/ward")
    qtbot.addWidget(dialog)
    dialog.address_edit.setText("postgresql://ava:secret@db.example.org/ward")
    dialog._check_and_accept()
    assert dialog.result() != QDialog.DialogCode.Accepted
    assert "own box" in dialog.problem.text() and "secret" not in dialog.problem.text()
    dialog.address_edit.setText("db.example.org/ward")
    dialog._check_and_accept()
    assert "starts with postgresql://" in dialog.problem.text()
    dialog.address_edit.setText("postgresql://ava@db.example.org/ward")
    dialog.password_edit.setText("secret")
    dialog._check_and_accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert dialog.address() == "postgresql://ava@db.example.org/ward"
    assert dialog.password() == "secret"


def test_a_password_given_as_a_parameter_is_kept_out_of_the_address_too(qtbot):
    """libpq takes ``?password=`` as a password: the dialog took such an address, opened the
    study and wrote the password into the settings twice, and ``info`` printed it (found by
    an explorer). The dialog asks for its own box; shown or logged, it is ***."""
    dialog = ServerStudyDialog()
    qtbot.addWidget(dialog)
    dialog.address_edit.setText("postgresql://chloe@db.example.org/ward?password=s3cret")
    dialog._check_and_accept()
    assert dialog.result() != QDialog.DialogCode.Accepted
    assert "own box" in dialog.problem.text() and "s3cret" not in dialog.problem.text()
    typed = "postgresql://chloe@db/ward?sslmode=require&password=s3cret&sslpassword=k3y"
    assert redact(typed) == "postgresql://chloe:***@db/ward?sslmode=require&sslpassword=***"
    assert parse_url(typed).password == "s3cret"  # as libpq would take it


def test_typing_is_kept_while_the_server_is_away(qtbot, prefs, team_study, monkeypatch):
    server, database, study, _accounts = team_study
    window = _open(qtbot, prefs, team_study, "ava")
    assert window.annotator_name == "ava"  # her account decides who she is: no question
    assert "Signed in as" in window.person_label.whole_text()
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(empathy, "I am sorry.")
    wait_saved(qtbot, window)

    server.stop()
    try:
        warnings = []
        monkeypatch.setattr(QMessageBox, "warning", lambda *args: warnings.append(args[2]))
        qtbot.keyClicks(empathy, " Please come in today.")
        window.session.save()
        assert window.session.pending and window.save_label.text() == "⚠ Not saved"
        assert "did not answer" in window.save_problem.text()
        window.show_unit(study.units["respond"])  # reloading would drop the typing: refused
        assert warnings and "not saved yet, so it stays on screen" in warnings[0]
        assert empathy.toPlainText() == "I am sorry. Please come in today."
        # kept on this computer against a crash too
        kept = window.session.unsaved.read(study.units["respond"])
        assert kept.payload["parts"]["empathy"] == "I am sorry. Please come in today."
    finally:
        server.restart()
    # the listener reconnects and saves what was waiting
    qtbot.waitUntil(lambda: not window.session.pending, timeout=30000)
    assert window.session.unsaved.read(study.units["respond"]) is None
    with ServerProject.open(server.url(database)) as project:
        answer = StudyService(project).as_viewer("ava").get_answer(study.units["respond"])
    assert answer.payload["parts"]["empathy"] == "I am sorry. Please come in today."
    window.close_project()


def test_a_save_behind_a_busy_server_keeps_the_text(qtbot, prefs, team_study, monkeypatch):
    """Another writer (the PI's import, a workstation stopped mid-save) holds the team's write
    lock: her save gives up after the lock wait, says so, and keeps her text to save later."""
    server, database, study, _accounts = team_study
    monkeypatch.setattr(postgres, "LOCK_WAIT_S", 0.5, raising=False)
    window = _open(qtbot, prefs, team_study, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy = window.editors["respond"].findChild(TextBox, "box_empathy")
    holder = psycopg.connect(server.dsn(database))
    # should the save wait on (before the fix: for ever), the holder is ended after 8 s
    end_holder = f"SELECT pg_terminate_backend({holder.info.backend_pid})"
    unblock = threading.Timer(8, server.admin_sql, [end_holder])
    try:
        holder.execute(f"SELECT pg_advisory_xact_lock({postgres.WRITE_LOCK})")
        unblock.start()
        qtbot.keyClicks(empathy, "I am sorry.")
        started = time.monotonic()
        window.session.save()
        assert time.monotonic() - started < 5  # before: her window froze until it was free
        assert window.session.pending and window.save_label.text() == "⚠ Not saved"
        message = window.save_problem.text()
        assert "is busy" in message and "Nothing was saved" in message
        assert empathy.toPlainText() == "I am sorry."
    finally:
        unblock.cancel()
        with contextlib.suppress(psycopg.Error):
            holder.rollback()
        holder.close()
    qtbot.keyClicks(empathy, " Come in today.")  # her next change saves it all
    wait_saved(qtbot, window)
    with ServerProject.open(server.url(database)) as project:
        answer = StudyService(project).as_viewer("ava").get_answer(study.units["respond"])
    assert answer.payload["parts"]["empathy"] == "I am sorry. Come in today."
    window.close_project()


def test_a_save_to_a_frozen_server_ends_in_words_and_keeps_the_text(
    qtbot, prefs, team_study, monkeypatch
):
    """The server freezes in the middle of her save (its process stopped, the connection
    left open): the save gives up after the watchdog's bound, says so, and keeps her text."""
    server, database, study, _accounts = team_study
    monkeypatch.setattr(postgres, "SAVE_WATCHDOG_S", 2, raising=False)
    window = _open(qtbot, prefs, team_study, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(empathy, "I am sorry.")
    wait_saved(qtbot, window)
    real_audit, frozen = StudyService._audit, []

    def freeze_then_audit(self, s, *args):
        s.flush()
        frozen.append(s.scalar(text("SELECT pg_backend_pid()")))
        os.kill(frozen[-1], signal.SIGSTOP)
        return real_audit(self, s, *args)

    def wake() -> None:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    # should the save wait on (before the fix: for as long as the server is frozen), the
    # server is woken after 12 s
    unfreeze = threading.Timer(12, wake)
    monkeypatch.setattr(StudyService, "_audit", freeze_then_audit)
    try:
        unfreeze.start()
        qtbot.keyClicks(empathy, " Please come in today.")
        started = time.monotonic()
        window.session.save()
        waited = time.monotonic() - started
        monkeypatch.setattr(StudyService, "_audit", real_audit)
        assert waited < 6  # the bound (2 s here, 30 s in use) and some slack
        assert window.session.pending and window.save_label.text() == "⚠ Not saved"
        message = window.save_problem.text()
        assert "did not answer for 2 s" in message and "Nothing was saved" in message
        assert empathy.toPlainText() == "I am sorry. Please come in today."
    finally:
        unfreeze.cancel()
        wake()
    qtbot.keyClicks(empathy, " Or call us.")  # once it is back, her next change saves it all
    wait_saved(qtbot, window)
    with ServerProject.open(server.url(database)) as project:
        answer = StudyService(project).as_viewer("ava").get_answer(study.units["respond"])
    assert answer.payload["parts"]["empathy"] == "I am sorry. Please come in today. Or call us."
    window.close_project()


def test_saving_again_after_a_save_the_frozen_server_may_have_kept_replaces_it(
    qtbot, prefs, team_study, monkeypatch
):
    """The server froze with her save's COMMIT in hand: "It may or may not have been saved
    ... Saving it again replaces it." It woke and kept the save, and her Ctrl+S was taken for
    a save from another computer (found by an explorer). It replaces it, and the time on task
    the unsure save sent is stored once."""
    _server, _database, study, _accounts = team_study
    monkeypatch.setattr(postgres, "SAVE_WATCHDOG_S", 2, raising=False)
    monkeypatch.setattr(postgres, "READ_WATCHDOG_S", 2, raising=False)
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: None)  # (closing, not saved)
    window = _open(qtbot, prefs, team_study, "ava")
    clock = [1000.0]
    window.session.clock._clock = lambda: clock[0]
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    empathy = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(empathy, "I am sorry.")
    wait_saved(qtbot, window)
    pids: list[int] = []

    def freeze(dbapi_connection) -> None:
        pids.append(dbapi_connection.info.backend_pid)
        os.kill(pids[-1], signal.SIGSTOP)

    with frozen(pids):
        clock[0] += 40
        qtbot.keyClicks(empathy, " Please come in today.")
        _at_the_next_commit(window.project, freeze)
        window.save_now()
        assert pids and window.save_label.text() == "⚠ Not saved"
        assert "Saving it again replaces it." in window.save_problem.text()
    unit = study.units["respond"]
    # woken, the server carries out the COMMIT it had received
    qtbot.waitUntil(lambda: "today" in window.service.get_answer(unit).payload["parts"]["empathy"])
    clock[0] += 5
    qtbot.keyClicks(empathy, " Or call us.")
    window.save_now()  # Ctrl+S, as the message invites
    assert window.session.conflict is None and not window.save_problem.isVisible()
    assert window.save_label.text().startswith("✓ Saved")
    answer = window.service.get_answer(unit)
    assert answer.payload["parts"]["empathy"] == "I am sorry. Please come in today. Or call us."
    assert answer.active_seconds == 45.0
    window.close_project()


def test_a_submission_made_while_the_server_was_away_is_submitted_when_it_is_back(
    qtbot, prefs, team_study, monkeypatch
):
    """Ctrl+Enter on an answer saved as a draft, nothing changed, while the server was away:
    once it was back nothing was saved, and "⚠ Not saved" stayed (found by an explorer)."""
    server, _database, study, _accounts = team_study
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: None)
    window = _open(qtbot, prefs, team_study, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    for part, words in (("empathy", "I am sorry."), ("planning", "Come in today.")):
        qtbot.keyClicks(window.editors["respond"].findChild(TextBox, f"box_{part}"), words)
    wait_saved(qtbot, window)
    server.stop()
    try:
        window.act_submit.trigger()
        assert window.session.pending and window.save_label.text() == "⚠ Not saved"
    finally:
        server.restart()
    # the listener reconnects and saves the submission that was waiting
    qtbot.waitUntil(lambda: not window.session.pending, timeout=30000)
    assert window.service.get_answer(study.units["respond"]).status == "submitted"
    assert window.save_label.text().endswith("· submitted")
    window.close_project()


def test_the_next_unit_from_a_frozen_server_ends_in_words_and_keeps_the_unit_shown(
    qtbot, prefs, team_study, monkeypatch
):
    """The server freezes as her window reads the next unit (its process stopped, the
    connection left open): the read gives up after the watchdog's bound, says so, and the
    unit she typed in stays on screen and highlighted; once the server is back, it opens."""
    server, database, study, _accounts = team_study
    with ServerProject.open(server.url(database)) as project:  # a second unit in her list
        pi = StudyService(project)
        second = pi.add_unit(pi.create_unit_set("more replies", "respond"), study.case1)
        pi.assign(second, study.ava)
    monkeypatch.setattr(postgres, "READ_WATCHDOG_S", 2, raising=False)
    window = _open(qtbot, prefs, team_study, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    first = window.session.unit.unit_id
    empathy = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(empathy, "I am sorry.")
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: warnings.append(args[2]))
    pids: list[int] = []
    with (
        frozen(pids) as wake,
        freezing_the_next_read(window.project, pids, on_thread=threading.main_thread()),
    ):
        # should the read wait on (before the fix: for as long as the server is frozen), the
        # server is woken after 12 s
        unfreeze = threading.Timer(12, wake)
        unfreeze.start()
        try:
            started = time.monotonic()
            window.step(1)  # her text is saved as she leaves; then the next unit is read
            waited = time.monotonic() - started
        finally:
            unfreeze.cancel()
    assert pids and waited < 6  # the bound (2 s here, 30 s in use) and some slack
    assert len(warnings) == 1 and warnings[0].startswith("Could not show this unit:")
    assert "did not answer for 2 s" in warnings[0] and "Nothing was read" in warnings[0]
    assert warnings[0].endswith("Unit 1 stays on screen.")
    assert window.session.unit.unit_id == first and window.queue.current_unit() == first
    assert empathy.toPlainText() == "I am sorry." and window.editors["respond"].isEnabled()
    assert not window.session.pending
    window.step(1)  # the server is back: the next unit opens
    assert window.session.unit.unit_id == second and window.queue.current_unit() == second
    with ServerProject.open(server.url(database)) as project:
        answer = StudyService(project).as_viewer("ava").get_answer(first)
    assert answer.payload["parts"]["empathy"] == "I am sorry."
    window.close_project()


# where the server freezes: the account's annotator, read with the open on the worker thread
# (any thread), or who may sign in, read by the window (its thread); and what the window says
def _failed_open(qtbot, window, errors, address, password) -> str:
    seen = len(errors)
    window.open_server_study(address, password)
    qtbot.waitUntil(lambda: len(errors) > seen, timeout=20000)
    return errors[-1]


def test_a_study_that_does_not_open_says_what_to_do_in_the_dialog(
    qtbot, prefs, team_study, monkeypatch
):
    """Each reason in the dialog's own terms, without "***" for a password nobody typed into
    the address or the password itself. Before, a missing password said "Put it in
    ~/.pgpass" in a dialog that has a Password box, and a missing database or server showed
    libpq's words."""
    server, database, _study, accounts = team_study
    role, password = accounts["ava"]
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")
    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "critical", lambda *args: errors.append(args[2]))
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    address = server.dsn(database, role)
    empty = server.new_database()
    expected = {  # (address, password): what the message says
        (address, "not-the-password"): f"refused the user name {role} with that password",
        (address, None): f"The server asks for the password of {role}",
        (address.replace(f":{server.port}/", ":1/"), password): "No study server answered "
        "at 127.0.0.1, port 1. Check the server's name and the port in the address",
        (address.replace(database, "no_such_db"), password): "has no database named "
        "no_such_db. Check the name at the end of the address",
        (server.dsn(empty, role), password): f"The database {empty} holds no PortalReview study",
    }
    for (where, typed), words in expected.items():
        message = _failed_open(qtbot, window, errors, where, typed)
        assert message.startswith(f"Could not open {where.split('//')[0]}//"), message
        assert words in message, message
        assert "***" not in message and password not in message and "not-the-p" not in message
        assert "pgpass" not in message, message
    assert "Password box" in errors[0] and "Password box" in errors[1]
    assert window.project is None


def test_an_account_not_set_up_in_the_studys_database_is_told_what_to_do(
    qtbot, prefs, team_study, monkeypatch
):
    """The study copied into another database (as a restore does) before IT set its members up
    there again: she appeared signed in to an empty window, no tabs and no message (an uncaught
    permission error). An account that is no member was told "refused this: permission denied
    for table project_meta". Each is now told at open, with what IT runs; nothing opens."""
    server, database, _study, accounts = team_study
    role, password = accounts["ava"]
    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "critical", lambda *args: errors.append(args[2]))
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    window.show()
    copy = server.clone_database(database, prefix="restored")
    message = _failed_open(qtbot, window, errors, server.dsn(copy, role), password)
    assert message.startswith(f"Could not open postgresql://{role}@127.0.0.1"), message
    assert "the study was restored or copied into this database since IT set" in message
    owner = f"postgresql://portalreview_admin@127.0.0.1:{server.port}/{copy}"
    assert f'portalreview member "{owner}" {role} --as ava' in message
    assert window.project is None and window.session is None
    assert window.stack.currentWidget() is window.welcome
    eve = f"eve_{secrets.token_hex(4)}"
    server.admin_sql(f"CREATE ROLE {eve} LOGIN PASSWORD 'eve-pw'")
    message = _failed_open(qtbot, window, errors, server.dsn(database, eve), "eve-pw")
    assert f"The database account {eve} may connect to" in message
    assert f"{eve} --as NAME" in message and "permission denied" not in message
    assert window.project is None


def test_a_refusal_while_signing_in_is_said_and_leaves_no_empty_window(
    qtbot, prefs, team_study, monkeypatch
):
    """The server refuses a read that signing in makes (her account's rights given only in
    part): the window said nothing and stayed empty, the error uncaught. Now it says what the
    server refused and what IT does, and shows the welcome page again."""
    server, database, _study, accounts = team_study
    role, password = accounts["ava"]
    server.admin_sql(f"REVOKE SELECT ON assignments FROM {role}", database=database)
    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "critical", lambda *args: errors.append(args[2]))
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    window.show()
    message = _failed_open(qtbot, window, errors, server.dsn(database, role), password)
    assert message.startswith(f"Could not sign in to postgresql://{role}@127.0.0.1"), message
    assert "(permission denied for table assignments)" in message
    assert f"portalreview member ADDRESS {role} --as ava" in message
    assert window.project is None and window.session is None and window.kinds == []
    assert window.stack.currentWidget() is window.welcome


FREEZES = {
    "opening": (None, "Could not open postgresql://"),
    "signing in": (threading.main_thread(), "Could not sign in to postgresql://"),
}


@pytest.mark.parametrize("where", list(FREEZES))
def test_signing_in_to_a_frozen_server_ends_in_words(qtbot, prefs, team_study, monkeypatch, where):
    """The server freezes as the study is opened (the account's annotator is read with the
    open, off the window's thread) or as the window reads who may sign in: the read gives up
    after the watchdog's bound, the window says so and shows the welcome page again; once the
    server is back, she signs in. Before, the window waited for as long as the server stayed
    frozen."""
    on_thread, words = FREEZES[where]
    server, database, _study, accounts = team_study
    monkeypatch.setattr(postgres, "READ_WATCHDOG_S", 2, raising=False)
    errors = []
    monkeypatch.setattr(QMessageBox, "critical", lambda *args: errors.append(args[2]))
    pids: list[int] = []
    real_open = ServerProject.open
    with contextlib.ExitStack() as stack:

        def open_then_freeze(*args, **kwargs):
            project = real_open(*args, **kwargs)
            stack.enter_context(freezing_the_next_read(project, pids, on_thread=on_thread))
            return project

        monkeypatch.setattr(ServerProject, "open", open_then_freeze)
        wake = stack.enter_context(frozen(pids))
        unfreeze = threading.Timer(12, wake)  # (should the read wait on, as before the fix)
        stack.callback(unfreeze.cancel)
        unfreeze.start()
        window = MainWindow(prefs)
        qtbot.addWidget(window)
        window.show()
        role, password = accounts["ava"]
        started = time.monotonic()
        window.open_server_study(server.dsn(database, role), password)
        qtbot.waitUntil(lambda: bool(errors), timeout=20000)
        waited = time.monotonic() - started
    assert pids and waited < 8  # the bound (2 s here, 30 s in use) and some slack
    assert errors[0].startswith(words)
    assert "did not answer for 2 s" in errors[0] and "Nothing was read" in errors[0]
    assert window.project is None and window.session is None
    assert window.stack.currentWidget() is window.welcome
    monkeypatch.setattr(ServerProject, "open", real_open)
    window.open_server_study(server.dsn(database, role), password)  # the server is back
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    assert window.annotator_name == "ava"
    window.close_project()


def test_the_pis_dashboard_hears_another_persons_save(qtbot, prefs, team_study):
    server, database, study, accounts = team_study
    window = _open(qtbot, prefs, team_study, "pat")
    assert window.annotator_name == "pat"
    dashboard = open_dashboard(qtbot, window)
    assert isinstance(dashboard, Dashboard)
    before = cell_of(dashboard, "summary_kinds", "urgency", 2)
    role, password = accounts["ava"]
    with ServerProject.open(server.url(database, role, password)) as elsewhere:  # ava's app
        StudyService(elsewhere).as_viewer("ava").save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
    qtbot.waitUntil(
        lambda: (
            not dashboard.loading
            and cell_of(dashboard, "summary_kinds", "urgency", 2) == before + 1
        ),
        timeout=COMPUTE_MS,
    )
    window.close_project()


def test_a_reload_the_server_refuses_says_why_and_changes_nothing(
    qtbot, prefs, team_study, monkeypatch
):
    """Her account's rights in the study were taken back while she worked (IT set it up
    again in part): Go > Reload work list ended in the database driver's error, unworded,
    and her tabs gone. It says what the server refused and what IT does; nothing changes."""
    server, database, _study, accounts = team_study
    window = _open(qtbot, prefs, team_study, "ava")
    window.queue.jump_to_number(2)
    shown, tabs = window.session.unit.unit_id, window.kinds[:]
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: warnings.append(args[2]))
    role = accounts["ava"][0]
    server.admin_sql(f'REVOKE SELECT ON assignments FROM "{role}"', database=database)
    window.act_reload.trigger()
    assert len(warnings) == 1
    assert f"refused your database account {role} this read" in warnings[0]
    assert "permission denied" in warnings[0] and "portalreview member" in warnings[0]
    assert window.kinds == tabs and window.session.unit.unit_id == shown
    window.close()
