"""Export, re-import into a new project, export again: the same study, byte for byte."""

from __future__ import annotations

import filecmp
import itertools
import json
import shutil

import pytest
from io_support import fingerprint, full_study, payloads

from portalreview.store.exporters import ExportFailed, export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.project import Project
from portalreview.store.service import GENESIS_HASH, StudyService
from portalreview.store.templates import refused_suggestions, suggestion_counts

TABLES = (
    "annotators",
    "cases",
    "responses",
    "unit_sets",
    "units",
    "assignments",
    "answers",
    "suggestions",
)


@pytest.fixture
def exported(project, tmp_path):
    full_study(project)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    return out


def _reimport(tmp_path, source, name: str) -> Project:
    fresh = Project.create(tmp_path / f"{name}.prproj", name="Test study")
    import_files(fresh, [source])
    return fresh


def test_jsonl_export_writes_one_file_per_table(exported):
    names = sorted(p.name for p in exported.iterdir())
    assert names == sorted([f"{t}.jsonl" for t in (*TABLES, "audit")] + ["project.json"])
    meta = json.loads((exported / "project.json").read_text())
    assert meta["name"] == "Test study"
    assert {t["id"] for t in meta["catalogs"]["themes"]} >= {"empathy", "other"}


def test_jsonl_round_trip_is_byte_identical(exported, tmp_path):
    fresh = _reimport(tmp_path, exported, "copy")
    again = tmp_path / "export2"
    export_project(fresh, "jsonl", again)
    for table in TABLES:
        assert filecmp.cmp(exported / f"{table}.jsonl", again / f"{table}.jsonl", shallow=False), (
            table
        )
    fresh.close()


def test_round_trip_keeps_why_a_suggestion_was_refused(exported, tmp_path):
    rows = [json.loads(line) for line in (exported / "suggestions.jsonl").open()]
    assert [r["refused_reason"] for r in rows] == [
        None,
        "echo: 1 of 1 boxes repeat the prompt's own words",
    ]
    fresh = _reimport(tmp_path, exported, "refused")
    service = StudyService(fresh)
    assert suggestion_counts(service) == (1, 1)
    (refused,) = refused_suggestions(service)
    assert (refused.kind, refused.reason) == ("respond", rows[1]["refused_reason"])
    fresh.close()


def test_round_trip_keeps_answers_of_every_kind(exported):
    kinds = [json.loads(line)["kind"] for line in (exported / "answers.jsonl").open()]
    assert sorted(set(kinds)) == sorted(
        ["respond", "rank", "match", "urgency", "eppc", "empathy", "facts"]
    )
    answers = [json.loads(line) for line in (exported / "answers.jsonl").open()]
    rank = next(a for a in answers if a["kind"] == "rank")
    assert [e["response_id"] for e in rank["answer"]["entries"]] == ["d1", "d2"]
    urgency = next(a for a in answers if a["kind"] == "urgency" and a["annotator"] == "ava")
    assert urgency["answer"]["levels"] == {"c1": 1, "c2": 6}
    match = next(a for a in answers if a["kind"] == "match")
    assert match["answer"]["decisions"][0]["sentence_id"] == {
        "owner": "ref1",
        "of": "response",
        "position": 0,
    }
    assert any(a["gold"] for a in answers)
    empathy = next(a for a in answers if a["kind"] == "empathy")
    assert (empathy["suggestion"], empathy["suggestion_use"]) == (1, "edited")


def test_reimported_study_reads_the_same(exported, tmp_path):
    fresh = _reimport(tmp_path, exported, "copy")
    svc = StudyService(fresh)
    ava = svc.as_viewer("ava")
    assert ava.progress("eppc").done == 1
    info = svc.info()
    assert info["cases"] == 2 and info["responses"] == 5
    assert info["kinds"]["eppc"]["gold"] == 1
    fresh.close()


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_csv_and_xlsx_exports_import_back(project, tmp_path, fmt):
    full_study(project)
    reference = tmp_path / "reference"
    export_project(project, "jsonl", reference)
    out = tmp_path / ("table.xlsx" if fmt == "xlsx" else "tables")
    written = export_project(project, fmt, out)
    assert all(p.exists() for p in written)
    fresh = _reimport(tmp_path, out, "copy")
    again = tmp_path / "again"
    export_project(fresh, "jsonl", again)
    for table in TABLES:
        assert filecmp.cmp(reference / f"{table}.jsonl", again / f"{table}.jsonl", shallow=False)
    fresh.close()


def test_audit_export_carries_the_hash_chain(exported):
    rows = [json.loads(line) for line in (exported / "audit.jsonl").open()]
    assert rows[0]["prev_hash"] == GENESIS_HASH
    for before, after in itertools.pairwise(rows):
        assert after["prev_hash"] == before["hash"]
    assert {"old_json", "new_json", "actor", "unit"} <= set(rows[0])


def test_reimport_records_itself_in_the_new_audit_log(exported, tmp_path):
    fresh = _reimport(tmp_path, exported, "copy")
    again = tmp_path / "again"
    export_project(fresh, "jsonl", again)
    actions = [json.loads(line)["action"] for line in (again / "audit.jsonl").open()]
    assert actions[-1] == "import"
    fresh.close()


def test_importing_the_same_export_twice_changes_nothing(exported, tmp_path):
    fresh = _reimport(tmp_path, exported, "copy")
    before = fingerprint(fresh)
    with pytest.raises(ImportFailed, match="already in the project"):
        import_files(fresh, [exported])
    assert fingerprint(fresh) == before
    fresh.close()


def test_export_is_refused_for_an_unknown_format(project, tmp_path):
    with pytest.raises(ExportFailed, match="jsonl, csv, xlsx"):
        export_project(project, "parquet", tmp_path / "x")


def test_xlsx_export_refuses_a_text_longer_than_a_cell(project, tmp_path):
    StudyService(project).add_case("long", "word " * 8000)
    with pytest.raises(ExportFailed, match="cases, row 2, field 'message'"):
        export_project(project, "xlsx", tmp_path / "t.xlsx")
    assert not (tmp_path / "t.xlsx").exists()


def test_xlsx_keeps_text_that_looks_like_a_formula(project, tmp_path):
    StudyService(project).add_case("f1", "=SUM(A1:A3) is what I typed")
    export_project(project, "xlsx", tmp_path / "t.xlsx")
    fresh = _reimport(tmp_path, tmp_path / "t.xlsx", "copy")
    out = tmp_path / "again"
    export_project(fresh, "jsonl", out)
    assert "=SUM(A1:A3) is what I typed" in (out / "cases.jsonl").read_text()
    fresh.close()


def test_an_extended_codebook_travels_with_the_export(project, tmp_path):
    study = full_study(project)
    extension = {"version": "site-2", "eppc_codes": [{"id": "InfoSeek", "subcodes": [
        {"id": "Billing", "name": "Billing", "definition": "Asks about a bill."}]}]}  # fmt: skip
    study.service.extend_catalogs(extension)
    study.service.save_answer(
        study.units["eppc"],
        {"labels": [{"code": "InfoSeek", "subcode": "Billing", "spans": []}]},
        annotator_id=study.ben,
    )
    first = tmp_path / "first"
    export_project(project, "jsonl", first)
    fresh = _reimport(tmp_path, first, "copy")
    report_again = tmp_path / "again"
    export_project(fresh, "jsonl", report_again)
    assert (
        json.loads((report_again / "project.json").read_text())["catalogs"]["version"] == "site-2"
    )
    assert filecmp.cmp(first / "answers.jsonl", report_again / "answers.jsonl", shallow=False)
    fresh.close()


def test_a_smaller_codebook_is_refused(project, tmp_path):
    full_study(project)
    first = tmp_path / "first"
    export_project(project, "jsonl", first)
    meta = json.loads((first / "project.json").read_text())
    meta["catalogs"]["themes"] = [t for t in meta["catalogs"]["themes"] if t["id"] != "logistics"]
    (first / "project.json").write_text(json.dumps(meta))
    fresh = Project.create(tmp_path / "copy.prproj")
    with pytest.raises(ImportFailed, match=r"project\.json: its catalogs lack entries"):
        import_files(fresh, [first])
    fresh.close()


def _pis_work(project: Project) -> dict[str, list[int]]:
    pat = StudyService(project).as_viewer("pat")
    return {kind: [q.unit_id for q in pat.queue(kind)] for kind in ("respond", "eppc")}


def test_a_gold_holder_stays_one_and_the_pis_own_unit_stays_work(project, tmp_path):
    """The PI's gold answer on a unit not given to them sits on a holder (no work of theirs);
    a unit given to them that they answered and adjudicated is their work. An export and
    import keeps each as it was, and so does an export older than format 7 (no
    ``gold_holder``), read as the migration reads an old file."""
    study = full_study(project)  # the PI's gold eppc answer: a holder
    svc, respond = study.service, study.units["respond"]
    svc.assign(respond, study.pi)
    for gold in (False, True):
        payload = payloads(study)["respond"]
        svc.save_answer(respond, payload, status="submitted", annotator_id=study.pi, gold=gold)
    assert _pis_work(project) == {"respond": [respond], "eppc": []}
    out = tmp_path / "export"
    export_project(project, "jsonl", out)
    rows = [json.loads(line) for line in (out / "assignments.jsonl").open()]
    assert [r["unit"]["set"] for r in rows if r["gold_holder"]] == ["eppc set"]
    with _reimport(tmp_path, out, "copy") as fresh:
        assert _pis_work(fresh) == _pis_work(project)
    old = tmp_path / "old-export"
    shutil.copytree(out, old)
    with (old / "assignments.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if k != "gold_holder"}) + "\n")
    with _reimport(tmp_path, old, "old") as fresh:
        assert _pis_work(fresh) == _pis_work(project)
