"""A ``str`` subclass for the process-engine tests: a prompt segment that must reach the model
process as itself (this module imports nothing, so the child can unpickle it cheaply)."""


class Marked(str):
    """A prompt segment that carries a meaning beyond its text."""
