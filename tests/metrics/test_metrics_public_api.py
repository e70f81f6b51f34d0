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


def test_public_names_are_the_modules_own_objects():
    # The package imports its modules lazily (PEP 562): each name resolves to the object of
    # the module that defines it, and dir() lists every public name.
    import importlib

    for name, module in metrics._SUBMODULE_OF.items():
        assert getattr(metrics, name) is getattr(
            importlib.import_module(f"portalreview.metrics.{module}"), name
        )
    assert set(metrics.__all__) == set(metrics._SUBMODULE_OF)
    assert set(metrics.__all__) <= set(dir(metrics))


def test_edit_f1_loads_and_scores_without_the_scientific_stack():
    # The desktop editors import edit_f1 and score while the clinician works: neither the
    # import nor a first Content / Theme Edit-F1 or editing load may load numpy, pandas,
    # scipy or scikit-learn (about a second and a half of start-up).
    code = (
        "import sys\n"
        "from portalreview.metrics.edit_f1 import content_edit_f1, editing_load, "
        "theme_edit_f1\n"
        "content_edit_f1('Take it. Rest now.', [(0, 8), None], segment=lambda t: t.split('.'))\n"
        "theme_edit_f1([['a', 'b']], [['a']])\n"
        "editing_load('take it now', 'take it later')\n"
        "heavy = ('numpy', 'pandas', 'scipy', 'sklearn')\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules if m.startswith(heavy)})\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no_such_metric"):
        _ = metrics.no_such_metric
