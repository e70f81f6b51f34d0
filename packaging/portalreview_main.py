"""The frozen program's entry point: the ``portalreview`` command (``portalreview.cli:main``),
plus the hidden ``selftest`` verb that packaging/smoke_test.py and hospital IT use to check an
installed build (``portalreview selftest --help``)."""

import multiprocessing
import sys

from portalreview import cli, selftest

if __name__ == "__main__":
    multiprocessing.freeze_support()  # no-op unless a library starts worker processes
    cli.EXTRA_VERBS.append(selftest.register)
    sys.exit(cli.main())
