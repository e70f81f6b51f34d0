"""`python -m portalreview` runs the same entry point as the `portalreview` console script."""

import sys

from portalreview.cli import main

sys.exit(main())
