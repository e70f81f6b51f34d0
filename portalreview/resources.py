"""Where the program's bundled files (demo data, templates) are, installed or frozen."""

from __future__ import annotations

import sys
from pathlib import Path


def resources_dir() -> Path:
    """The ``resources/`` folder: beside the package in a checkout or an editable install,
    inside the bundle of a frozen (PyInstaller) build."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


def resource(*parts: str) -> Path:
    path = resources_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"the bundled file {path} is missing: reinstall PortalReview")
    return path
