#!/usr/bin/env bash
# Build PortalReview for Linux workstations and prove the build works, in one go (CI can run it):
#
#   1. a build environment (a venv with PortalReview, PyInstaller and gguf; llama-cpp-python
#      built WITHOUT the build machine's native CPU flags), unless FREEZE_VENV names one;
#   2. the one-folder program with PyInstaller (packaging/portalreview.spec);
#   3. the smoke test of that folder (packaging/smoke_test.py);
#   4. the .deb (packaging/linux/build_deb.py);
#   5. the .deb installed with dpkg into a temporary root (its own dpkg database), the smoke test
#      again on the installed files, through a link like /usr/bin/portalreview, and the package
#      removed again (every file gone).
#
# Usage: packaging/build_linux.sh            (outputs in build/packaging/)
# Environment: FREEZE_VENV=path (reuse a build venv), OUT=folder, PYTHON=python3.11,
#              CMAKE_ARGS (llama.cpp build options; default: portable CPU build),
#              SKIP_DEB=1 (stop after step 3), SKIP_FREEZE=1 (reuse an existing build).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$REPO/build/packaging}"
VENV="${FREEZE_VENV:-$OUT/venv}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
step() { printf '\n=== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

if [ ! -x "$VENV/bin/pyinstaller" ]; then
  step "build environment in $VENV"
  "$PYTHON" -m venv "$VENV"
  # -DGGML_NATIVE=OFF: the program must run on other CPUs than this machine's.
  CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF}" \
    "$VENV/bin/pip" install -q -e "$REPO[packaging]" gguf
fi
VERSION="$("$VENV/bin/python" -c 'import portalreview; print(portalreview.__version__)')"

if [ "${SKIP_FREEZE:-}" = "1" ] && [ -x "$OUT/dist/portalreview/portalreview" ]; then
  step "reusing the one-folder build in $OUT/dist/portalreview (SKIP_FREEZE=1)"
else
  step "PyInstaller one-folder build of portalreview $VERSION"
  started=$SECONDS
  "$VENV/bin/pyinstaller" --noconfirm --clean --log-level WARN \
    --distpath "$OUT/dist" --workpath "$OUT/work" "$REPO/packaging/portalreview.spec" \
    >"$OUT/pyinstaller.log" 2>&1 || { tail -n 40 "$OUT/pyinstaller.log"; exit 1; }
  echo "built $OUT/dist/portalreview in $((SECONDS - started)) s ($(du -sh "$OUT/dist/portalreview" | cut -f1))"
  grep -E "WARNING: (Library not found|Hidden import)" "$OUT/pyinstaller.log" | sed 's/^[0-9]* //' | sort -u | head -n 20 || true
fi

step "smoke test of the one-folder build"
"$VENV/bin/python" "$REPO/packaging/smoke_test.py" \
  --exe "$OUT/dist/portalreview/portalreview" --log "$OUT/smoke-frozen.log"

if [ "${SKIP_DEB:-}" = "1" ]; then exit 0; fi

DEB="$OUT/portalreview_${VERSION}_amd64.deb"
step "the .deb"
"$VENV/bin/python" "$REPO/packaging/linux/build_deb.py" "$OUT/dist/portalreview" "$VERSION" "$DEB"
dpkg-deb --info "$DEB" | sed -n '1,20p'

step "install the .deb into a temporary root"
ROOT="$(mktemp -d "${TMPDIR:-/tmp}/portalreview-root.XXXXXX")"
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT/var/lib/dpkg/updates" "$ROOT/var/lib/dpkg/info"
touch "$ROOT/var/lib/dpkg/status"
# --force-depends: the temporary root's dpkg database knows none of the system's packages.
DPKG=(dpkg --root="$ROOT" --force-not-root --force-bad-path --force-depends --force-script-chrootless)
fakeroot "${DPKG[@]}" --install "$DEB" 2>"$OUT/dpkg-install.log" \
  || { cat "$OUT/dpkg-install.log"; exit 1; }
"${DPKG[@]}" --status portalreview | sed -n '1,3p'
test "$(readlink "$ROOT/usr/bin/portalreview")" = /opt/portalreview/portalreview
test -f "$ROOT/usr/share/applications/portalreview.desktop"
# /usr/bin/portalreview points at /opt/portalreview/portalreview; inside the temporary root
# the same link is made to the installed copy.
mkdir -p "$ROOT/run-bin"
ln -s "$ROOT/opt/portalreview/portalreview" "$ROOT/run-bin/portalreview"

step "smoke test of the installed package"
"$VENV/bin/python" "$REPO/packaging/smoke_test.py" \
  --exe "$ROOT/run-bin/portalreview" --log "$OUT/smoke-deb.log"

step "remove the package"
fakeroot "${DPKG[@]}" --remove portalreview
left="$( (find "$ROOT/opt" "$ROOT/usr" -type f 2>/dev/null || true) | wc -l)"
test "$left" -eq 0 || { echo "files left after removal: $left"; exit 1; }
echo "removed: no file left in /opt or /usr"

step "done: $OUT/dist/portalreview, $DEB"
