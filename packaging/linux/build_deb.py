"""Build the PortalReview .deb from the one-folder build (standard library only).

    python packaging/linux/build_deb.py DIST_FOLDER VERSION OUT.deb

Layout of the package:

    /opt/portalreview/                      the one-folder program (read-only for users)
    /usr/bin/portalreview                -> /opt/portalreview/portalreview
    /usr/share/applications/portalreview.desktop
    /usr/share/doc/portalreview/README      what is where, and docs/deployment.md's address

No maintainer scripts: installing and removing only adds and removes these files. Nothing is
written in users' home folders; settings appear in ~/.config/PortalReview/ when a person
changes one.

``Depends`` is computed: every system library the bundle's binaries load from outside the
bundle (``ldd``), mapped to its package on the build machine (``dpkg -S``), plus the libraries
Qt's xcb platform plugin needs on a desktop. Build on the oldest distribution you deploy to
(its glibc is the oldest the program runs on).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "portalreview"
# Qt's xcb platform plugin (the desktop on X11/XWayland) loads these; a headless build machine
# may not have them installed, so ldd cannot see them there.
DESKTOP_DEPENDS = [
    "libxcb-cursor0",
    "libxkbcommon-x11-0",
    "libxcb-icccm4",
    "libxcb-keysyms1",
    "libxcb-shape0",
    "libxcb-randr0",
    "libxcb-render-util0",
    "libxcb-image0",
    "libegl1",
    "libgl1",
    "libfontconfig1",
    "libdbus-1-3",
]
DESKTOP_FILE = """[Desktop Entry]
Type=Application
Name=PortalReview
GenericName=Clinical annotation study
Comment=Annotate patient-portal messages and review drafted replies, offline
Exec=/usr/bin/portalreview %f
Terminal=false
Categories=Office;Science;MedicalSoftware;
Keywords=annotation;patient portal;agreement;
"""
README = """PortalReview (offline annotation of patient-portal messages)

Installed in /opt/portalreview (program, libraries, bundled demo and prompt templates);
/usr/bin/portalreview starts it. Nothing is installed elsewhere and nothing runs at boot.
The program never uses the network. Per-person settings: ~/.config/PortalReview/.
Deployment notes for IT (models, CPU/CUDA builds, backups, file permissions):
docs/deployment.md in the PortalReview source.
Check an installation: portalreview selftest
"""


def _elf_files(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def system_libraries(root: Path) -> tuple[set[str], set[str]]:
    """(libraries the bundle's ELF files load from the system, libraries no one provides).

    ``ldd`` does not know the bundle's own search path (the frozen program's loader sets it),
    so a library is the bundle's whenever a file of that name is in the bundle."""
    bundled = {p.name for p in root.rglob("*")}
    outside, missing = set(), set()
    line = re.compile(r"^\s*(\S+)\s*=>\s*(not found|\S+)")
    for elf in _elf_files(root):
        result = subprocess.run(["ldd", str(elf)], capture_output=True, text=True)
        for text in result.stdout.splitlines():
            match = line.match(text)
            if not match:
                continue
            name, where = match.groups()
            if name in bundled:
                continue
            if where == "not found":
                missing.add(name)
            else:
                outside.add(str(Path(where).resolve()))
    return outside, missing


def packages_of(libraries: set[str]) -> set[str]:
    packages = set()
    for library in sorted(libraries):
        result = subprocess.run(["dpkg", "-S", library], capture_output=True, text=True)
        if result.returncode != 0:  # /usr/lib vs /lib (merged /usr): try the other name
            other = library.replace("/usr/lib/", "/lib/", 1)
            result = subprocess.run(["dpkg", "-S", other], capture_output=True, text=True)
        if result.returncode == 0:
            packages.add(result.stdout.split(":")[0].strip())
    return packages


def build(dist: Path, version: str, out: Path) -> Path:
    dist = dist.resolve()
    if not (dist / PACKAGE).is_file():
        raise SystemExit(f"{dist} is not the one-folder build (no {PACKAGE} in it)")
    outside, missing = system_libraries(dist)
    if missing:
        # Optional Qt plugins (GTK theme, Wayland) whose libraries this machine lacks: they
        # load only where the desktop has them.
        print(f"note: libraries not on this machine: {', '.join(sorted(missing))}")
    depends = sorted(packages_of(outside) | set(DESKTOP_DEPENDS))
    with tempfile.TemporaryDirectory(prefix="portalreview-deb-") as temp:
        stage = Path(temp) / "root"
        target = stage / "opt" / PACKAGE
        shutil.copytree(dist, target, symlinks=True)
        for link in [p for p in target.rglob("*") if p.is_symlink() and not p.exists()]:
            link.unlink()  # a link to a library the build left out
        for path in [target, *target.rglob("*")]:  # readable by all, writable by root only
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            executable = path.is_dir() or mode & stat.S_IXUSR
            path.chmod(0o755 if executable else 0o644)
        (stage / "usr" / "bin").mkdir(parents=True)
        os.symlink(f"/opt/{PACKAGE}/{PACKAGE}", stage / "usr" / "bin" / PACKAGE)
        apps = stage / "usr" / "share" / "applications"
        apps.mkdir(parents=True)
        (apps / f"{PACKAGE}.desktop").write_text(DESKTOP_FILE)
        doc = stage / "usr" / "share" / "doc" / PACKAGE
        doc.mkdir(parents=True)
        (doc / "README").write_text(README)
        size_kb = sum(p.lstat().st_size for p in stage.rglob("*")) // 1024
        control = stage / "DEBIAN"
        control.mkdir()
        (control / "control").write_text(
            f"Package: {PACKAGE}\n"
            f"Version: {version}\n"
            "Section: science\n"
            "Priority: optional\n"
            "Architecture: amd64\n"
            f"Installed-Size: {size_kb}\n"
            f"Depends: {', '.join(depends)}\n"
            "Maintainer: PortalReview maintainers <portalreview@localhost>\n"
            "Description: offline annotation of patient-portal messages\n"
            " Clinicians annotate patient-portal messages and review LLM-drafted replies in\n"
            " one SQLite project file, fully offline; local GGUF models through llama.cpp.\n"
            " Nothing is sent over the network.\n"
        )
        for path in [stage, *stage.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        out.parent.mkdir(parents=True, exist_ok=True)
        command = ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(stage), str(out)]
        if shutil.which("fakeroot"):
            command = ["fakeroot", *command]
        subprocess.run(command, check=True)
    print(f"built {out} ({out.stat().st_size / 1e6:.0f} MB); Depends: {', '.join(depends)}")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.split("\n\n")[1])
    build(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
