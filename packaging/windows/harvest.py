"""Write the WiX fragment that lists every file of the one-folder build (standard library only).

    python packaging/windows/harvest.py DIST_FOLDER OUT.wxs

WiX v4 has no built-in harvesting (heat is a separate, deprecated package; the ``Files``
element came with v5), so the fragment is generated here: one component per file (the
recommended layout: each file its own key path, so repairs and upgrades replace exactly what
changed), directories mirrored under ``INSTALLFOLDER``, all in the component group
``ProgramFiles`` that PortalReview.wxs references. Ids are derived from the relative path, so
the same build gives the same fragment; component GUIDs are left to WiX (generated from the
key path, stable across builds).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr

NAMESPACE = "http://wixtoolset.org/schemas/v4/wxs"


def _id(prefix: str, relative: str) -> str:
    return prefix + hashlib.sha1(relative.encode("utf-8")).hexdigest()[:30]


def harvest(dist: Path) -> str:
    dist = dist.resolve()
    files = sorted(p for p in dist.rglob("*") if p.is_file())
    if not any(p.name.lower() == "portalreview.exe" for p in files):
        raise SystemExit(f"{dist} is not the Windows one-folder build (no PortalReview.exe)")
    folders = {p.parent.relative_to(dist) for p in files}
    folders |= {ancestor for folder in folders for ancestor in folder.parents}
    directories = sorted(
        {f.as_posix() for f in folders} - {"."},
        key=lambda d: (d.count("/"), d),
    )
    dir_ids = {".": "INSTALLFOLDER"} | {d: _id("d", d) for d in directories}

    lines = ['<?xml version="1.0" encoding="utf-8"?>', f'<Wix xmlns="{NAMESPACE}">', "  <Fragment>"]

    def emit(parent: str, depth: int) -> None:
        children = [d for d in directories if (d.rsplit("/", 1)[0] if "/" in d else ".") == parent]
        for child in children:
            name = child.rsplit("/", 1)[-1]
            lines.append(
                "  " * depth + f"<Directory Id={quoteattr(dir_ids[child])} Name={quoteattr(name)}>"
            )
            emit(child, depth + 1)
            lines.append("  " * depth + "</Directory>")

    lines.append('    <DirectoryRef Id="INSTALLFOLDER">')
    emit(".", 3)
    lines.append("    </DirectoryRef>")
    lines.append('    <ComponentGroup Id="ProgramFiles">')
    for path in files:
        relative = path.relative_to(dist).as_posix()
        folder = path.parent.relative_to(dist).as_posix()
        component, file_id = _id("c", relative), _id("f", relative)
        lines.append(
            f"      <Component Id={quoteattr(component)} Directory={quoteattr(dir_ids[folder])}>"
        )
        lines.append(
            f'        <File Id={quoteattr(file_id)} Source={quoteattr(str(path))} KeyPath="yes" />'
        )
        lines.append("      </Component>")
    lines += ["    </ComponentGroup>", "  </Fragment>", "</Wix>", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    text = harvest(Path(sys.argv[1]))
    Path(sys.argv[2]).write_text(text, encoding="utf-8")
    print(f"wrote {sys.argv[2]}: {text.count('<File ')} files")
