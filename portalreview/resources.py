"""Where the program's bundled files (demo data, templates, the user guide) are, installed or
frozen."""

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


def user_guide() -> Path | None:
    """README.md, the user guide's first page (its links lead into ``docs/``): at the top of
    a checkout or an editable install, inside the bundle of a frozen build; None where it was
    not installed (a wheel carries the package only)."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    root = Path(frozen_root) if frozen_root else Path(__file__).resolve().parent.parent
    readme = root / "README.md"
    return readme if readme.is_file() else None


def resource(*parts: str) -> Path:
    path = resources_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"the bundled file {path} is missing: reinstall PortalReview")
    return path
