"""The package's layers (DESIGN.md, "Dependency direction"): nothing below imports from above,
and the layers that are plain Python, or plain data, import no Qt (and domain and metrics no
SQLAlchemy). Every import counts, a function's own included: a lazy import from above is still
a dependency on it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "portalreview"
# lowest first; analysis and reports (the papers' tables and their files) sit on the store and
# the models (model_eval) and below the editors and the shell, which show them
LAYERS = ["domain", "metrics", "store", "llm", "analysis", "reports", "tasks", "ui"]
NO_QT = {"domain", "metrics", "store", "llm", "analysis", "reports"}
NO_SQL = {"domain", "metrics"}


def imported(path: Path) -> set[str]:
    """The modules ``path`` imports anywhere in it (absolute imports; the package uses no
    relative ones)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def modules_of(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_nothing_from_above(layer):
    above = {f"portalreview.{name}" for name in LAYERS[LAYERS.index(layer) + 1 :]}
    wrong = {
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules_of(layer)
        for name in imported(path)
        if any(name == top or name.startswith(f"{top}.") for top in above)
    }
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("layer", sorted(NO_QT | NO_SQL))
def test_the_plain_layers_import_no_qt_and_no_sql(layer):
    banned = {"PySide6", "shiboken6"} if layer in NO_QT else set()
    banned |= {"sqlalchemy"} if layer in NO_SQL else set()
    wrong = {
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules_of(layer)
        for name in imported(path)
        if name.split(".")[0] in banned
    }
    assert not wrong, sorted(wrong)


def test_every_layer_is_a_folder_of_the_package():
    assert all((PACKAGE / layer / "__init__.py").is_file() for layer in LAYERS)
