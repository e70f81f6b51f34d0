"""Ending the desktop app when the system asks: SIGTERM (a logout, a shutdown or reboot, ``systemctl
stop``, ``kill PID``) and SIGHUP (the terminal it was started from closed).

Python's default for both ended the process on the spot: what the clinician had typed in the
last half second was lost, the log said nothing, and the project's lock, ``-wal`` and ``-shm``
were left behind. Now the window closes as when the person closes it, saving what is open, with
one difference: no one is at the screen to answer a question, and the system kills the process a
few seconds later. So nothing is asked: a dialog open at that moment is dismissed (Cancel), and
what cannot be saved is kept on this computer (``unsaved_work``, ``unsaved_gold``), never thrown
away. Windows sends a GUI program neither signal; nothing is installed there.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication, QDialog

if TYPE_CHECKING:
    from portalreview.ui.main_window import MainWindow

log = logging.getLogger(__name__)

ENDING_SIGNALS = ("SIGTERM", "SIGHUP")
DISMISS_TRIES = 20  # dialogs dismissed one after another (one may open another) before closing
DISMISS_WAIT_MS = 50  # for the code that opened a dismissed dialog to go on


class Termination(QObject):
    """Closes ``window`` when one of :data:`ENDING_SIGNALS` arrives (see the module)."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__()
        self.window = window
        self.signal_name: str | None = None  # the signal being obeyed (None: none came)

    def on_signal(self, signum: int, _frame: object) -> None:
        """The Python-level handler: runs on the main thread between two Python steps, so the
        closing itself waits for Qt's loop (a save may be half done at this point)."""
        if self.signal_name is not None:  # a second signal: already closing
            return
        self.signal_name = signal.Signals(signum).name
        QTimer.singleShot(0, self.end)

    def end(self) -> None:
        log.warning("ended by %s: closing, saving what is open", self.signal_name)
        self._close_when_nothing_asks(DISMISS_TRIES)

    def _close_when_nothing_asks(self, tries_left: int) -> None:
        """Dismiss the dialog waiting for an answer (as Cancel or Escape would), let the code
        that opened it go on, and look again; then close the window, asking nothing, and quit."""
        dialog = QApplication.activeModalWidget()
        if dialog is not None and tries_left > 0:
            log.info("ended by %s: %s dismissed", self.signal_name, type(dialog).__name__)
            if isinstance(dialog, QDialog):
                dialog.reject()
            else:
                dialog.close()
            QTimer.singleShot(
                DISMISS_WAIT_MS, lambda: self._close_when_nothing_asks(tries_left - 1)
            )
            return
        if not self.window.close_unattended(self.signal_name or "a signal"):
            log.error(
                "ended by %s: the window did not close; quitting all the same", self.signal_name
            )
        QApplication.exit(0)


@contextlib.contextmanager
def closing_on_termination(window: MainWindow) -> Iterator[None]:
    """While the block runs (the app's event loop), :data:`ENDING_SIGNALS` close ``window`` as
    :class:`Termination` says; the handlers before are put back after it. Call on the main
    thread; nothing is done on Windows."""
    if sys.platform == "win32":
        yield
        return
    termination = Termination(window)
    # Qt's loop waits in C, where Python cannot run a handler: the signal's byte on this socket
    # wakes the loop, and the notifier's slot is Python, which runs the handler first
    receiver, sender = socket.socketpair()
    receiver.setblocking(False)
    sender.setblocking(False)
    notifier = QSocketNotifier(receiver.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(lambda *_: _drain(receiver))
    earlier_fd = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    earlier = {
        name: signal.signal(getattr(signal, name), termination.on_signal)
        for name in ENDING_SIGNALS
        if signal.getsignal(getattr(signal, name)) is not signal.SIG_IGN  # nohup: still ignored
    }
    try:
        yield
    finally:
        for name, handler in earlier.items():  # (None: one not set from Python)
            signal.signal(getattr(signal, name), signal.SIG_DFL if handler is None else handler)
        signal.set_wakeup_fd(earlier_fd)
        notifier.setEnabled(False)
        receiver.close()
        sender.close()


def _drain(receiver: socket.socket) -> None:
    """Read the signal numbers written to the socket (their handler has run by now)."""
    with contextlib.suppress(OSError):
        while receiver.recv(64):
            pass
