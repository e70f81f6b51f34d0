"""A fact check marked "no medical facts on either side" in the Excel report: counted in the
Facts sheet's flow table and shown as a row of its own on the Raw facts sheet."""

from __future__ import annotations

from openpyxl import load_workbook

from portalreview.reports.xlsx_report import write_xlsx_report
from tests.conftest import build_small_study


def _rows(ws) -> list[list]:
    return [[c.value for c in row] for row in ws.iter_rows()]


def test_a_no_facts_check_in_the_workbook(project, tmp_path):
    study = build_small_study(project)
    unit = study.units["facts"]
    study.service.as_viewer("ava").save_answer(
        unit, {"facts": [], "no_facts": True}, status="submitted"
    )
    fact = {"side": "edited", "text": "You will be fine.", "entailed": False}
    study.service.as_viewer("ben").save_answer(unit, {"facts": [fact]}, status="submitted")
    book = load_workbook(write_xlsx_report(project, tmp_path / "r.xlsx", n_resamples=0))

    rows = _rows(book["Facts"])
    (header_at,) = [i for i, r in enumerate(rows) if r[:2] == ["Group", "Pairs with no facts"]]
    first = rows[header_at + 1]
    assert first[:2] == ["all pairs", 1]
    by_person = {r[0]: r[1] for r in rows[header_at + 1 :] if str(r[0]).startswith("annotator")}
    assert by_person == {"annotator ava": 1, "annotator ben": 0}

    raw = _rows(book["Raw facts"])
    said = [r for r in raw if "(no medical facts on either side)" in r]
    assert len(said) == 1 and "ava" in said[0]
    assert sum("You will be fine." in r for r in raw) == 1
