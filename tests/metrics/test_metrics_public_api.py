"""portalreview.metrics re-exports its public functions, and imports no GUI or database."""

from __future__ import annotations

import inspect
import subprocess
import sys

import portalreview.metrics as metrics


def test_everything_in_all_is_importable_and_documented():
    for name in metrics.__all__:
        obj = getattr(metrics, name)
        if inspect.isfunction(obj):
            assert obj.__doc__ and len(obj.__doc__) > 80, name
            doc = obj.__doc__.lower()
            assert "seed 00" in doc or "not from a paper" in doc, name


def test_metrics_do_not_import_qt_or_sqlalchemy():
    code = (
        "import sys, portalreview.metrics; "
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'sqlalchemy'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
