"""Export, re-import into a new project, export again: the same study, byte for byte."""

from __future__ import annotations

import filecmp
import itertools
import json
import shutil

import pytest
from io_support import as_earlier_export, fingerprint, full_study, payloads
from sqlalchemy import select, update

from portalreview.store.adaptive import adaptive_settings
from portalreview.store.exporters import ExportFailed, export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.models import Case, UnitSet
from portalreview.store.project import Project
from portalreview.store.service import GENESIS_HASH, StoreError, StudyService
from portalreview.store.study_setup import (
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)
from portalreview.store.templates import latest_suggestion, refused_suggestions, suggestion_counts

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


def test_xlsx_export_counts_a_cell_as_excel_does(project, tmp_path):
    """Excel's limit counts UTF-16 units: 20,000 emoji are 40,000 of them (the cell used to be
    written, and Excel opened the workbook only to repair it, cutting the text)."""
    svc = StudyService(project)
    svc.add_case("fits", "\U0001f622" * 16_383)  # 32,766 units
    export_project(project, "xlsx", tmp_path / "fits.xlsx")
    svc.add_case("long", "Dear doctor, " + "\U0001f622" * 20_000)
    with pytest.raises(ExportFailed, match=r"field 'message': 40,013 characters as Excel"):
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


def _reworded_notes_box(c: dict) -> None:
    c["notes_box"]["name"] = "Internal notes (never sent)"


def _reworded_empathy_choice(c: dict) -> None:
    c["empathy_choices"][0]["name"] = "Left one"


def _no_legacy_spellings(c: dict) -> None:
    c["eppc_legacy_spellings"] = {}


def _themes_reordered(c: dict) -> None:
    c["themes"] = c["themes"][:-1][::-1] + c["themes"][-1:]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_reworded_notes_box, "the notes box"),
        (_reworded_empathy_choice, "the empathy choices"),
        (_no_legacy_spellings, "the EPPC legacy spellings"),
        (_themes_reordered, "the themes or their order"),
    ],
)
def test_catalogs_changed_beyond_an_extension_are_refused(project, tmp_path, change, named):
    """docs/formats.md, project.json: only a superset extends the project's catalogs. Parts
    that are not entries (the notes box, the empathy choices, the legacy spellings, the
    themes' order) were taken whole, rewording what the annotators answered with."""
    full_study(project)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    meta = json.loads((out / "project.json").read_text())
    change(meta["catalogs"])
    meta["catalogs"]["version"] = "theirs"
    (out / "project.json").write_text(json.dumps(meta))
    fresh = Project.create(tmp_path / "fresh.prproj")
    before = fingerprint(fresh)
    with pytest.raises(ImportFailed, match=f"its catalogs differ from this project's in {named}"):
        import_files(fresh, [out])
    assert fingerprint(fresh) == before
    fresh.close()


def test_the_same_catalogs_under_another_version_name_keep_the_project_s(project, tmp_path):
    full_study(project)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    meta = json.loads((out / "project.json").read_text())
    meta["catalogs"]["version"] = "another-name"
    (out / "project.json").write_text(json.dumps(meta))
    fresh = Project.create(tmp_path / "fresh.prproj")
    version = StudyService(fresh).catalogs.version
    report = import_files(fresh, [out])
    assert StudyService(fresh).catalogs.version == version
    assert any("another-name" in note and "is kept" in note for note in report.notes)
    fresh.close()


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx"])
def test_a_suggestion_made_for_one_clinician_stays_theirs(project, tmp_path, fmt):
    """A suggestion made from ava's own replies (its prompt holds them) is ava's alone after
    an export and import too: never offered to ben."""
    study = full_study(project)
    study.service.add_suggestion(
        study.units["respond"],
        {"mode": "theme_guided", "parts": {"empathy": "In ava's own words"}, "notes": ""},
        model_file="tiny.gguf",
        model_sha256="ab" * 32,
        template_id="respond@own",
        template_text="Replies ava wrote before: ...",
        for_annotator_id=study.ava,
    )
    out = tmp_path / ("study.xlsx" if fmt == "xlsx" else "export1")
    export_project(project, fmt, out)
    fresh = _reimport(tmp_path, out, "copy")
    service = StudyService(fresh)
    unit = service.as_viewer("ava").queue("respond")[0].unit_id
    offered_to_ava = latest_suggestion(service.as_viewer("ava"), unit)
    assert offered_to_ava is not None and offered_to_ava.template_id == "respond@own"
    offered_to_ben = latest_suggestion(service.as_viewer("ben"), unit)
    assert offered_to_ben is None or offered_to_ben.template_id != "respond@own"
    fresh.close()


def _adaptive_inbox(project: Project, judgements: int) -> None:
    """Six messages of an inbox as an adaptive set of ``judgements`` judgements, handed to
    ava and ben."""
    service = StudyService(project)
    for i in range(6):
        service.add_case(f"m{i}", f"Message {i}.", urgency_level=1 + i, tags={"inbox": "ward"})
    plan = plan_units(project, "adaptive-inbox", inbox="ward", judgements=judgements)
    made = create_unit_set(project, plan)
    assign_units(project, plan_assignment(project, made.name, ["ava", "ben"]))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx"])
def test_study_settings_travel_with_the_export(project, tmp_path, fmt):
    """An adaptive inbox stays adaptive (one pair at a time, the same number of judgements)
    and the PI's own-examples setting is kept."""
    study = full_study(project)
    _adaptive_inbox(project, judgements=7)
    study.service.set_own_examples(3)
    out = tmp_path / ("study.xlsx" if fmt == "xlsx" else "export1")
    export_project(project, fmt, out)
    fresh = _reimport(tmp_path, out, "copy")
    service = StudyService(fresh)
    with fresh.read() as s:
        (setting,) = adaptive_settings(s).values()
    assert setting.judgements == 7
    ava = service.as_viewer("ava")
    assert len(ava.queue("urgency")) == 1 + 1  # the small study's pair and the adaptive one
    assert ava.progress("urgency").total == 1 + 7
    assert service.own_examples() == 3
    fresh.close()


def test_a_setting_the_project_has_otherwise_is_kept_and_said(project, tmp_path):
    full_study(project)
    StudyService(project).set_own_examples(3)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    fresh = Project.create(tmp_path / "other.prproj", name="Other")
    StudyService(fresh).set_own_examples(5)
    report = import_files(fresh, [out])
    assert StudyService(fresh).own_examples() == 5
    assert any("own examples" in note and "5" in note for note in report.notes)
    fresh.close()


def test_settings_that_are_not_an_object_are_refused_in_words(project, tmp_path):
    """A list was reported as "settings.own_examples must be a whole number, not None"."""
    full_study(project)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    whole = json.loads((out / "project.json").read_text())
    whole["settings"] = [1]
    (out / "project.json").write_text(json.dumps(whole))
    fresh = Project.create(tmp_path / "copy.prproj")
    before = fingerprint(fresh)
    with pytest.raises(ImportFailed, match=r"settings must be a JSON object \{\.\.\.\}, not"):
        import_files(fresh, [out])
    assert fingerprint(fresh) == before
    fresh.close()


def test_adaptive_judgements_only_for_an_urgency_set(project, tmp_path):
    full_study(project)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    rows = [json.loads(line) for line in (out / "unit_sets.jsonl").open()]
    respond = next(r for r in rows if r["kind"] == "respond")
    respond["adaptive_judgements"] = 5
    (out / "unit_sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fresh = Project.create(tmp_path / "copy.prproj")
    before = fingerprint(fresh)
    with pytest.raises(ImportFailed, match="adaptive_judgements"):
        import_files(fresh, [out])
    assert fingerprint(fresh) == before
    fresh.close()


def test_a_set_name_with_outer_spaces_imports_back(project, tmp_path):
    """A project made before names were trimmed may hold "Respond set " (a name typed with a
    trailing space): its export imports back, the name trimmed."""
    full_study(project)
    with project.write() as s:
        s.execute(
            update(UnitSet).where(UnitSet.kind == "respond").values(name="Respond set ")
        )
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    fresh = _reimport(tmp_path, out, "copy")
    with fresh.read() as s:
        assert s.scalar(select(UnitSet.name).where(UnitSet.kind == "respond")) == "Respond set"
    assert StudyService(fresh).as_viewer("ava").progress("respond").done == 1
    fresh.close()


def test_a_new_set_name_is_trimmed(project):
    full_study(project)
    plan = plan_units(project, "respond", name="  Round 2 ")
    assert create_unit_set(project, plan).name == "Round 2"
    handed = assign_units(project, plan_assignment(project, "Round 2 ", ["ava"]))
    assert handed.unit_set == "Round 2"
    with pytest.raises(StoreError, match="needs a name"):
        StudyService(project).create_unit_set("   ", "respond")


def test_an_export_that_words_a_code_differently_is_refused(project, tmp_path):
    """Site A's codebook has InfoSeek/Billing "Asks about a bill."; site B's export has the
    same subcode worded otherwise (and one more): importing it would silently reword what
    A's annotators coded with, so it is refused and nothing changes."""
    ours = {"version": "site-a", "eppc_codes": [{"id": "InfoSeek", "subcodes": [
        {"id": "Billing", "name": "Billing", "definition": "Asks about a bill."}]}]}  # fmt: skip
    theirs = {"version": "site-b", "eppc_codes": [{"id": "InfoSeek", "subcodes": [
        {"id": "Billing", "name": "Billing", "definition": "Any money question."},
        {"id": "Parking", "name": "Parking", "definition": "Asks where to park."}]}]}  # fmt: skip
    full_study(project)
    StudyService(project).extend_catalogs(theirs)
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    site_a = Project.create(tmp_path / "site-a.prproj")
    StudyService(site_a).extend_catalogs(ours)
    before = fingerprint(site_a)
    with pytest.raises(ImportFailed, match=r"differently \(subcode InfoSeek/Billing\)"):
        import_files(site_a, [out])
    assert fingerprint(site_a) == before
    site_a.close()


def test_xlsx_keeps_a_noncharacter(project, tmp_path):
    """U+FFFE / U+FFFF (mis-decoded pasted text) are not allowed in XML: the workbook keeps
    them as OOXML escapes and the import reads them back."""
    study = full_study(project)
    text = "Copied from the portal \ufffe and \uffff it looks odd."
    study.service.add_case("c-odd", text)
    out = tmp_path / "study.xlsx"
    export_project(project, "xlsx", out)
    fresh = _reimport(tmp_path, out, "copy")
    with fresh.read() as s:
        assert s.scalar(select(Case.message).where(Case.external_id == "c-odd")) == text
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
    old = as_earlier_export(shutil.copytree(out, tmp_path / "old-export"))
    with (old / "assignments.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if k != "gold_holder"}) + "\n")
    with _reimport(tmp_path, old, "old") as fresh:
        assert _pis_work(fresh) == _pis_work(project)


def test_a_gold_answer_under_a_clinician_s_name_is_refused(exported, tmp_path):
    rows = [json.loads(line) for line in (exported / "answers.jsonl").open()]
    for row in rows:
        if row["gold"]:
            row["annotator"] = "ben"
    (exported / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fresh = Project.create(tmp_path / "copy.prproj", name="Test study")
    before = fingerprint(fresh)
    edited = sorted(exported.iterdir())  # an edited file is imported when named, not its folder
    with pytest.raises(ImportFailed, match="gold answer is the PI's decision; ben is a clinician"):
        import_files(fresh, edited)
    assert fingerprint(fresh) == before
    fresh.close()


def test_names_and_ids_with_outer_spaces_come_back_the_same(project, tmp_path):
    """The service stored " ava ", " c1 " and "d1\\t" as typed, but an import strips ids, so
    after an export and an import ava's sign-in name was "ava" and the case "c1": the service
    now stores them as the import reads them."""
    svc = StudyService(project)
    who = svc.add_annotator(" ava ")
    case = svc.add_case(" c1 ", "Hello there. I have a cough.")
    svc.add_response(case, "d1\t", "Please rest.")
    unit = svc.add_unit(svc.create_unit_set(" respond set ", "respond"), case)
    svc.assign(unit, who)
    respond = {"mode": "theme_guided", "parts": {"empathy": "x"}, "notes": ""}
    svc.save_answer(unit, respond, annotator_id=who)
    assert [a.name for a in svc.annotators()] == ["ava"]
    assert svc.as_viewer("ava").read_unit(unit).cases[0].external_id == "c1"
    out = tmp_path / "export1"
    export_project(project, "jsonl", out)
    assert '"response_id": "d1"' in (out / "responses.jsonl").read_text()
    fresh = _reimport(tmp_path, out, "copy")
    again = tmp_path / "export2"
    export_project(fresh, "jsonl", again)
    for table in ("annotators", "cases", "responses", "units", "assignments", "answers"):
        assert filecmp.cmp(out / f"{table}.jsonl", again / f"{table}.jsonl", shallow=False), table
    fresh.close()


@pytest.mark.parametrize(
    ("add", "message"),
    [
        (lambda svc: svc.add_annotator("  "), "an annotator needs a name"),
        (lambda svc: svc.add_case(" ", "Hello."), "a case needs an id"),
        (lambda svc: svc.add_response(svc.add_case("c9", "Hi."), "\t", "Hi."), "a response needs"),
    ],
)
def test_a_blank_name_or_id_is_refused(project, add, message):
    with pytest.raises(StoreError, match=message):
        add(StudyService(project))
