#!/usr/bin/env bash
# Remake the report-*.png screenshots in docs/screenshots/: the demo study's Excel
# agreement report as LibreOffice Calc prints it (PDF), one page per PNG.
#
#   demo project -> portalreview report --format xlsx -> soffice --convert-to pdf
#                -> pdftotext (find each page by its text) -> pdftoppm (PNG)
#
# Nothing is downloaded. It needs, already on this machine:
#   - the project's Python environment (portalreview importable; run from the repository
#     root with the venv active, or set PYTHON / PORTALREVIEW);
#   - LibreOffice (soffice). An installed one, or one unpacked from .deb files with
#     `dpkg-deb -x libreoffice-*.deb DIR` (then SOFFICE=DIR/usr/lib/libreoffice/program/soffice;
#     its libraries are found through LO_LIBS, see below);
#   - poppler-utils (pdftotext, pdftoppm). Installed, or unpacked the same way from
#     poppler-utils, libpoppler126 and libopenjp2-7 .debs (then set PDFTOPPM, PDFTOTEXT
#     and POPPLER_LIBS=DIR/usr/lib/x86_64-linux-gnu).
#
# Settings (environment variables):
#   SOFFICE       the soffice program (default: soffice on the PATH, else PORTALREVIEW_SOFFICE)
#   LO_LIBS       extra library folders for soffice, colon-separated (default: for an
#                 unpacked copy at .../usr/lib/libreoffice/program/soffice, its program
#                 folder and .../usr/lib/x86_64-linux-gnu; empty for an installed one)
#   LO_PROFILE    private LibreOffice user profile, as a file:// URL
#                 (default file:///tmp/lo-profile; it keeps your own profile untouched)
#   PDFTOPPM      pdftoppm program (default: pdftoppm on the PATH)
#   PDFTOTEXT     pdftotext program (default: next to PDFTOPPM)
#   POPPLER_LIBS  extra library folders for pdftoppm/pdftotext (default: none)
#   PYTHON        Python with portalreview (default: python)
#   PORTALREVIEW  the portalreview command (default: portalreview)
#   RESAMPLES     bootstrap resamples of the report (default 1000, the CLI's default)
#   WIDTH         width of each PNG in pixels (default 1400; a US-letter landscape page
#                 is then 1400 x 1082)
#   WORK          scratch folder for demo.prproj, report.xlsx, report.pdf (default /tmp/shots)
#   OUT_DIR       where the PNGs go (default: docs/screenshots next to this script)
#
# Example (LibreOffice and poppler unpacked under /tmp/lo and /tmp/poppler):
#   . .venv/bin/activate
#   SOFFICE=/tmp/lo/usr/lib/libreoffice/program/soffice \
#   PDFTOPPM=/tmp/poppler/usr/bin/pdftoppm POPPLER_LIBS=/tmp/poppler/usr/lib/x86_64-linux-gnu \
#   bash docs/screenshots/report_pages.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

SOFFICE="${SOFFICE:-$(command -v soffice || true)}"
SOFFICE="${SOFFICE:-${PORTALREVIEW_SOFFICE:-}}"
[ -n "$SOFFICE" ] || { echo "set SOFFICE=/path/to/soffice" >&2; exit 1; }
if [ -z "${LO_LIBS+set}" ]; then
    LO_LIBS=""
    program="$(dirname "$SOFFICE")"
    case "$program" in
        */usr/lib/libreoffice/program)   # an unpacked copy: its libraries are not on the loader's path
            root="${program%/usr/lib/libreoffice/program}"
            case "$root" in ""|/) ;; *) LO_LIBS="$program:$root/usr/lib/x86_64-linux-gnu" ;; esac ;;
    esac
fi
LO_PROFILE="${LO_PROFILE:-file:///tmp/lo-profile}"
PDFTOPPM="${PDFTOPPM:-$(command -v pdftoppm || true)}"
[ -n "$PDFTOPPM" ] || { echo "set PDFTOPPM=/path/to/pdftoppm" >&2; exit 1; }
PDFTOTEXT="${PDFTOTEXT:-$(dirname "$PDFTOPPM")/pdftotext}"
POPPLER_LIBS="${POPPLER_LIBS:-}"
PYTHON="${PYTHON:-python}"
PORTALREVIEW="${PORTALREVIEW:-portalreview}"
RESAMPLES="${RESAMPLES:-1000}"
WIDTH="${WIDTH:-1400}"
WORK="${WORK:-/tmp/shots}"
OUT_DIR="${OUT_DIR:-$here}"

# Library paths only for the programs that need them (not for Python).
with_libs() {  # with_libs LIBS program args...
    local libs="$1"; shift
    if [ -n "$libs" ]; then
        LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
    else
        "$@"
    fi
}

mkdir -p "$WORK" "$OUT_DIR"
rm -f "$WORK/demo.prproj" "$WORK/demo.prproj-shm" "$WORK/demo.prproj-wal" \
      "$WORK/report.xlsx" "$WORK/report.pdf"

# 1. The demo study (synthetic, deterministic answers).
"$PYTHON" -c "import sys; from portalreview.demo import build_demo; build_demo(sys.argv[1])" \
    "$WORK/demo.prproj"

# 2. The Excel workbook.
"$PORTALREVIEW" report "$WORK/demo.prproj" --format xlsx -o "$WORK/report.xlsx" \
    --resamples "$RESAMPLES"

# 3. The PDF, as LibreOffice prints the workbook (each sheet landscape, one page wide),
#    with a private profile, the way tests/reports/test_xlsx_report.py calls it.
with_libs "$LO_LIBS" "$SOFFICE" --headless --norestore "-env:UserInstallation=$LO_PROFILE" \
    --convert-to pdf --outdir "$WORK" "$WORK/report.xlsx"
[ -s "$WORK/report.pdf" ] || { echo "LibreOffice wrote no PDF" >&2; exit 1; }

# 4. Find each screenshot's page by a text only that page has (page numbers move when
#    tables grow), then render it. pdftotext separates pages by form feeds.
with_libs "$POPPLER_LIBS" "$PDFTOTEXT" "$WORK/report.pdf" "$WORK/report.txt"

page_with() {  # page_with TEXT -> number of the first page containing TEXT
    awk -v RS='\f' -v text="$1" 'index($0, text) { print NR; exit }' "$WORK/report.txt"
}

shots=(
    # PNG name               | text on the page
    "report-1-summary|Headline figures"                         # Summary, first page
    "report-2-respond|Share of responses including"             # Respond: theme shares + chart
    "report-3-match|Drafting quality from content matching"     # Match, first page (Edit-F1 charts)
    "report-4-rank|Ranking drafts (seed"                        # Rank: win rates, chart, heat map
    "report-5-urgency-ndcg|NDCG curve: "                        # Urgency: the NDCG line chart
    "report-6-eppc|EPPC coding (seed"                           # EPPC: kappa per batch, heat map
    "report-7-facts|Fact preservation of edits"                 # Facts, first page
    "report-8-raw-respond|Raw answers: theme-guided responses"  # Raw respond, first page
    "report-9-provenance|What these figures were computed from" # Provenance, first page
)
for shot in "${shots[@]}"; do
    name="${shot%%|*}"; text="${shot#*|}"
    page="$(page_with "$text")"
    [ -n "$page" ] || { echo "no page shows '$text'" >&2; exit 1; }
    with_libs "$POPPLER_LIBS" "$PDFTOPPM" -f "$page" -l "$page" -singlefile -png \
        -scale-to-x "$WIDTH" -scale-to-y -1 "$WORK/report.pdf" "$OUT_DIR/$name"
    echo "$name.png: page $page"
done
