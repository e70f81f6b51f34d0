"""Background work for the GUI (the Anki / napari pattern): a function runs on a pool thread,
never touching widgets; its result, error or progress comes back to the GUI thread through
signals. The function may accept ``progress(done, total)`` and ``cancelled()`` callbacks."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, QTimer, Signal, SignalInstance
from PySide6.QtWidgets import QProgressDialog, QWidget
from shiboken6 import isValid

from portalreview.applog import error_text
from portalreview.store.errors import ProjectClosed

log = logging.getLogger(__name__)

EXIT_WAIT_MS = 5000  # how long quitting waits for background work to stop (each polls cancel)
# the same when the system ends the program (``termination``): it kills it a few seconds later
TERMINATION_WAIT_MS = 1000


class WorkerSignals(QObject):
    finished = Signal(object)
    failed = Signal(str, object)  # message, exception
    progress = Signal(int, int)


class Worker(QRunnable):
    """Runs ``fn`` off the GUI thread. ``cancel()`` sets a flag ``fn`` can poll;
    ``abandon()`` also silences it (at exit, when no window is left to tell)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.signals = WorkerSignals()
        self._cancel = threading.Event()
        self.abandoned = False
        self.setAutoDelete(False)
        params = inspect.signature(fn).parameters
        if "progress" in params:
            self.kwargs["progress"] = lambda done, total: self._report(
                self.signals.progress, done, total
            )
        if "cancelled" in params:
            self.kwargs["cancelled"] = self._cancel.is_set

    def cancel(self) -> None:
        self._cancel.set()

    def abandon(self) -> None:
        """Cancel, and report nothing more: the result, error or progress goes to no one."""
        self.abandoned = True
        self.cancel()

    @property
    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> None:
        try:
            result = self.fn(*self.args, **self.kwargs)
        except Exception as exc:  # reported to the GUI, which shows the message
            self._log_failure(exc)
            self._report(self.signals.failed, str(exc) or type(exc).__name__, exc)
        else:
            self._report(self.signals.finished, result)
        finally:
            if self.abandoned:  # no GUI slot will let go of it
                _running.discard(self)

    def _report(self, signal: SignalInstance, *values: Any) -> None:
        """Emit, unless abandoned or the signals' object is gone (deleted as Python shut down
        under the work: emitting raised "Signal source has been deleted")."""
        if self.abandoned:
            return
        try:
            signal.emit(*values)
        except RuntimeError:
            if isValid(self.signals):
                raise
            log.info("background task %s ended after its window", _name(self.fn))

    def _log_failure(self, exc: Exception) -> None:
        """An error with its traceback; an expected end in one line: the project closed under
        the work (another study opened, the window closed) or the work was cancelled."""
        if isinstance(exc, ProjectClosed) or self.is_cancelled:
            log.info("background task %s stopped: %s", _name(self.fn), error_text(exc))
        else:
            log.error("background task %s failed", _name(self.fn), exc_info=True)


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


_running: set[Worker] = set()  # keeps Python references alive until the worker reports


def run_in_background(
    fn: Callable[..., Any],
    *args: Any,
    on_done: Callable[[Any], None] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    **kwargs: Any,
) -> Worker:
    worker = Worker(fn, *args, **kwargs)
    _running.add(worker)

    def finish(result: Any) -> None:
        _running.discard(worker)
        if on_done and not worker.abandoned:
            on_done(result)

    def fail(message: str, exc: Exception) -> None:
        _running.discard(worker)
        if on_error and not worker.abandoned:
            on_error(message, exc)

    queued = Qt.ConnectionType.QueuedConnection
    worker.signals.finished.connect(finish, queued)
    worker.signals.failed.connect(fail, queued)
    if on_progress:
        worker.signals.progress.connect(on_progress, queued)
    QThreadPool.globalInstance().start(worker)
    return worker


def stop_all(timeout_ms: int = EXIT_WAIT_MS) -> bool:
    """At exit: abandon every background task and wait (up to ``timeout_ms``) for the pool's
    threads, so that none still runs, and reports, while Python shuts down under it. False
    if some did not end in time."""
    for worker in list(_running):
        worker.abandon()
    ended = QThreadPool.globalInstance().waitForDone(timeout_ms)
    if not ended:
        log.warning("background work still running at exit after %d ms", timeout_ms)
    return ended


def run_with_progress(
    parent: QWidget | None,
    label: str,
    fn: Callable[..., Any],
    *args: Any,
    on_done: Callable[[Any], None] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
    cancellable: bool = True,
    **kwargs: Any,
) -> Worker:
    """Like :func:`run_in_background`, with a progress dialog (shown only if the work takes
    longer than 400 ms) whose Cancel button cancels the worker."""
    dialog = QProgressDialog(label, "Cancel" if cancellable else None, 0, 0, parent)
    dialog.setWindowTitle("PortalReview")
    dialog.setWindowModality(Qt.WindowModality.WindowModal)
    dialog.setMinimumDuration(400)
    dialog.setAutoClose(False)
    dialog.setAutoReset(False)

    def progress(done: int, total: int) -> None:
        dialog.setMaximum(max(total, 0))
        dialog.setValue(done)

    def close_then(callback, *values) -> None:
        dialog.close()
        dialog.deleteLater()
        if callback:
            callback(*values)

    worker = run_in_background(
        fn,
        *args,
        on_done=lambda r: close_then(on_done, r),
        on_error=lambda m, e: close_then(on_error, m, e),
        on_progress=progress,
        **kwargs,
    )
    dialog.canceled.connect(worker.cancel)
    QTimer.singleShot(0, lambda: dialog.setValue(0))
    return worker
