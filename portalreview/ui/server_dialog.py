"""File > Open server study…: the address of a study on the team's PostgreSQL server, and the
password of the person's own database account.

The address is remembered (without any password) for next time. The password is kept in
memory only while the study is open, and never written anywhere; where IT put it in
``~/.pgpass``, the box may stay empty.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)
from sqlalchemy.exc import DBAPIError

from portalreview.store.backends.postgres import (
    NoSuchDatabase,
    NotAStudy,
    PasswordNeeded,
    PasswordRefused,
    ServerError,
    ServerNotReached,
    is_server_url,
    parse_url,
    redact,
)
from portalreview.store.errors import INSUFFICIENT_PRIVILEGE

PLACEHOLDER = "postgresql://your-account@study-server.hospital.org/ward5_study"


class ServerStudyDialog(QDialog):
    """Asks for a server study's address and the password; :meth:`address` and
    :meth:`password` once accepted."""

    def __init__(self, last_address: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open a server study")
        intro = QLabel(
            "A study on your team's database server. Ask your PI or IT for its address; you "
            "sign in with your own database account, which decides what you may see."
        )
        intro.setWordWrap(True)
        self.address_edit = QLineEdit(last_address)
        self.address_edit.setPlaceholderText(PLACEHOLDER)
        self.address_edit.setAccessibleName("Server study address")
        self.address_edit.setMinimumWidth(520)
        self.address_edit.setCursorPosition(0)  # the start of a long address: its server
        self.password_edit = QLineEdit()
        self.password_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.password_edit.setAccessibleName("Password of your database account")
        self.password_edit.setPlaceholderText("(empty if IT set up a password file)")
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setVisible(False)
        form = QFormLayout()
        form.addRow("&Address:", self.address_edit)
        form.addRow("&Password:", self.password_edit)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._check_and_accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        (self.password_edit if last_address else self.address_edit).setFocus()

    def address(self) -> str:
        """The address as typed, without a password typed into it."""
        return self.address_edit.text().strip()

    def password(self) -> str | None:
        return self.password_edit.text() or None

    def _check_and_accept(self) -> None:
        text = self.address()
        problem = None
        if not is_server_url(text):
            problem = "The address starts with postgresql:// (for example " + PLACEHOLDER + ")."
        else:
            try:
                url = parse_url(text)
            except ServerError as exc:
                problem = str(exc)
            else:
                if url.password:
                    problem = (
                        "Type the password in its own box, not in the address: the address "
                        f"is remembered, the password never ({redact(url)})."
                    )
        if problem:
            self.problem.setText(problem)
            self.problem.setVisible(True)
            return
        self.accept()


AGAIN = "Open it again (File > Open server study…)"


def open_failure_words(exc: Exception, address: str) -> str | None:
    """Why the study at ``address`` (as typed: no password in it) did not open, and what to do
    in this dialog; None where the store's own message says it (a newer format, say)."""
    try:
        url = parse_url(address)
    except ServerError:
        return None
    user, host, database = url.username or "your account", url.host or "localhost", url.database
    where = f"{host}, port {url.port or 5432}"
    if isinstance(exc, PasswordNeeded):
        return (
            f"The server asks for the password of {user}. {AGAIN} and type it in the Password box."
        )
    if isinstance(exc, PasswordRefused):
        return (
            f"The server refused the user name {user} with that password. {AGAIN} and type "
            "the password in the Password box once more (mind Caps Lock). If it is refused "
            "again, ask IT to check your account or reset the password."
        )
    if isinstance(exc, ServerNotReached):
        return (
            f"No study server answered at {where}. Check the server's name and the port in "
            "the address (your PI or IT gives the address), and that this computer is on the "
            "hospital's network."
        )
    if isinstance(exc, NoSuchDatabase):
        return (
            f"The server at {where} has no database named {database}. Check the name at the "
            "end of the address: ask your PI or IT for the study's address."
        )
    if isinstance(exc, NotAStudy):
        return (
            f"The database {database} holds no PortalReview study (yet). Check the address "
            "with your PI or IT: IT makes a study in it first (docs/deployment.md)."
        )
    return None


def refused_read_words(exc: DBAPIError, role: str | None) -> str:
    """What the study server refused the account ``role`` after signing in: its rights were
    changed since (``portalreview member`` gives a member's rights again)."""
    lines = str(exc.orig).strip().splitlines()
    reason = lines[0] if lines else type(exc.orig).__name__
    if getattr(exc.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
        return f"The database refused this: {reason}."
    account = f"your database account {role}" if role else "your database account"
    return (
        f"The study server refused {account} this read ({reason}): its rights in this study "
        "were changed since you signed in. Ask IT to set it up as a member again, with the "
        "study owner's account: portalreview member ADDRESS ROLE --as NAME (docs/deployment.md)."
    )


def sign_in_refused_words(exc: DBAPIError, role: str | None, annotator: str | None) -> str:
    """What the study server refused as the account ``role`` signed in (as ``annotator``),
    and what to do: a read it has no right to means its rights in this database were given
    in part, or not since a restore or a copy (``portalreview member`` gives them all)."""
    lines = str(exc.orig).strip().splitlines()
    reason = lines[0] if lines else type(exc.orig).__name__
    if getattr(exc.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
        return f"The database refused this: {reason}."
    return (
        "The study server refused your database account a read that signing in needs "
        f"({reason}): the account is not fully set up as a member of the study in this "
        "database (a study restored or copied into another database needs its members set up "
        "again). Ask IT to set it up, with the study owner's account: portalreview member "
        f"ADDRESS {role or 'ROLE'} --as {annotator or 'NAME'} (docs/deployment.md)."
    )
