"""The errors of the local-model layer. Every message is meant for the person at the screen:
it names the file or the answer and says what to do. The GUI shows it and carries on without
suggestions."""

from __future__ import annotations


class LlmError(Exception):
    """Base class: something about local models went wrong; the message says what."""


class ModelFileError(LlmError):
    """A model file cannot be used (missing, not GGUF, truncated, too large for memory...).

    Raised before llama.cpp ever sees the file."""


class EngineClosedError(LlmError):
    """The engine was closed (or is closing); load the model again to continue."""


class EngineBusyError(LlmError):
    """The engine is already working for another caller; one model serves one thread at a
    time."""


class PromptTooLongError(LlmError):
    """The prompt does not fit the model's context window."""


class GrammarError(LlmError):
    """A grammar is invalid; it never reaches llama.cpp (an invalid grammar crashes the
    process in the current bindings)."""


class TemplateError(LlmError):
    """A prompt template is invalid (unknown or missing placeholders, empty text)."""


class AnswerError(LlmError):
    """A model's answer does not fit the kind's answer: the reasons list every problem found."""

    def __init__(self, what: str, reasons: list[str], raw: str = "") -> None:
        self.reasons = list(reasons)
        self.raw = raw
        super().__init__(f"{what}: " + "; ".join(self.reasons))


class Cancelled(LlmError):
    """The work was cancelled by the user (or the engine was closed)."""


class ModelProcessDied(LlmError):
    """The separate process that runs the model stopped (a crash inside llama.cpp, the system
    ending it when memory ran out, someone killing it). Every pending and later call of that
    engine raises it; the program itself goes on, and loading the model again starts a new
    process. ``exitcode`` is the process's exit status (negative: the signal that ended it)."""

    def __init__(self, message: str, exitcode: int | None = None) -> None:
        super().__init__(message)
        self.exitcode = exitcode

    def __reduce__(self) -> tuple:
        return (type(self), (str(self), self.exitcode))


class ModelServerError(LlmError):
    """The shared model server did not answer, refused a request, or went away during one.
    Like a dead model process, it stops a batch (each further unit would fail the same way);
    what was stored before is kept."""


class ModelFileChanged(LlmError):
    """The model file on disk is no longer the one that was loaded: it was written over in
    place (``cp new.gguf model.gguf``) or replaced. llama.cpp maps the file into memory, so the
    model may now answer with the new file's weights while its recorded SHA-256 names the old
    one; nothing is stored with that hash. Like a dead model process, it stops a batch; what
    was stored before is kept, and loading the model again goes on."""
