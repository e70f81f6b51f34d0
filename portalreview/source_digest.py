"""A digest of the program's own source, which the report's kept results are keyed by
(``reports/report_cache.code_digest``): figures computed by other code are never taken for
this code's.

A source install digests its ``.py`` files where it runs. A frozen build (PyInstaller) holds
compiled modules only, and a few ``.py`` files kept as data (a server study's upgrade steps),
so ``packaging/portalreview.spec`` computes the digest of the source it builds from and
bundles it as :data:`STAMP_NAME` beside the package; the build reads that. The same source
gives the same digest either way. Standard library only: the spec imports this module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

#: The file a frozen build carries in its ``portalreview`` folder: the digest of its source.
STAMP_NAME = "source-digest.txt"

#: The package's own folder (``portalreview/``), in a source install and in a frozen build.
PACKAGE_ROOT = Path(__file__).resolve().parent


def digest_of_sources(root: Path) -> str | None:
    """The SHA-256 of every ``.py`` file under ``root`` (names and contents, in name order);
    None when there is none."""
    files = sorted(root.rglob("*.py"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def source_digest(root: Path = PACKAGE_ROOT) -> str | None:
    """The digest of the program's source: a frozen build's stamp when ``root`` has one, else
    the ``.py`` files under ``root``; None when neither is there."""
    stamp = root / STAMP_NAME
    if stamp.is_file():
        return stamp.read_text(encoding="ascii").strip()
    return digest_of_sources(root)
