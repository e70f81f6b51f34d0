"""The frozen program's entry point: the ``portalreview`` command (``portalreview.cli:main``),
whose hidden ``selftest`` verb packaging/smoke_test.py and hospital IT use to check an
installed build (``portalreview selftest --help``)."""

import multiprocessing
import sys

if __name__ == "__main__":
    # First: in the model's process (portalreview.llm.engines.process, started with "spawn")
    # this runs the child and exits, before anything below imports numpy or SQLAlchemy, which
    # must not come before llama_cpp there.
    multiprocessing.freeze_support()
    from portalreview import cli

    sys.exit(cli.main())
