"""Exports for other tools: Label Studio, Prodigy and REDCap files, checked against each tool's
published rules (external_rules.py) and, by hand, against what the annotators answered."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest
from external_rules import check_label_studio, check_prodigy, check_redcap, read_csv
from io_support import full_study

from portalreview.cli import main
from portalreview.store import leftovers
from portalreview.store.exporters import ExportFailed
from portalreview.store.exports import export_external
from portalreview.store.exports.redcap import field_name
from portalreview.store.exports.snapshot import read_snapshot
from portalreview.store.exports.tokens import token_range, tokenize
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.output_files import STAGING_PREFIX, OutputInUse
from portalreview.store.project import Project
from tests.conftest import build_small_study, open_in_excel

SENTENCE = "I have had crushing chest pain since this morning."


@pytest.fixture
def full(project):
    study = full_study(project)
    svc = study.service
    # ben: a tie in the ranking (submitted), a draft EPPC coding and a draft response
    svc.save_answer(
        study.units["rank"],
        {
            "entries": [
                {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
                {"response_id": study.draft2, "rank": 1, "correct": True, "criteria": []},
            ]
        },
        status="submitted",
        annotator_id=study.ben,
    )
    svc.save_answer(
        study.units["eppc"],
        {"labels": [{"code": "InfoSeek", "subcode": None, "spans": []}]},
        annotator_id=study.ben,
    )
    svc.save_answer(
        study.units["respond"],
        {"mode": "theme_guided", "parts": {"planning": "Call me, =1+1"}, "notes": ""},
        annotator_id=study.ben,
    )
    return study


def _by_annotator(tasks: list[dict], emails: dict[str, str]) -> dict[str, dict]:
    names = {email: name for name, email in emails.items()}
    return {names[a["completed_by"]["email"]]: a for t in tasks for a in t["annotations"]}


# --- Label Studio ------------------------------------------------------------------------------


def test_label_studio_files_follow_label_studio_rules(project, full, tmp_path):
    paths = export_external(project, "labelstudio", tmp_path / "ls")
    names = sorted(p.name for p in paths)
    kinds = ("eppc", "match", "rank", "respond", "urgency")
    assert names == sorted(
        ["annotators.csv", *(f"{k}.json" for k in kinds), *(f"{k}.xml" for k in kinds)]
    )
    for kind in kinds:
        tasks = json.loads((tmp_path / "ls" / f"{kind}.json").read_text(encoding="utf-8"))
        config = (tmp_path / "ls" / f"{kind}.xml").read_text(encoding="utf-8")
        assert check_label_studio(tasks, config) == [], kind
        assert len(tasks) == 1  # the small study has one unit per kind


def test_a_label_studio_export_given_to_import_is_named_as_such(project, full, tmp_path):
    """It was refused as "a JSON array: tables are imported from JSON Lines", and converted as
    told it was then "a format that cannot be recognised"."""
    paths = export_external(project, "labelstudio", tmp_path / "ls")
    tasks = next(p for p in paths if p.name == "rank.json")
    refused = pytest.raises(ImportFailed, match=r"is a Label Studio export .* does not read them")
    with Project.create(tmp_path / "other.prproj") as other, refused:
        import_files(other, [tasks])


def test_label_studio_sdk_accepts_configs_and_regions(project, full, tmp_path):
    """Label Studio's own SDK, where installed (not a dependency of PortalReview): it parses
    each config and checks each region against its control tag."""
    sdk = pytest.importorskip("label_studio_sdk.label_interface")
    export_external(project, "labelstudio", tmp_path / "ls")
    for kind in ("respond", "rank", "urgency", "eppc", "match"):
        interface = sdk.LabelInterface((tmp_path / "ls" / f"{kind}.xml").read_text("utf-8"))
        interface.validate()
        tasks = json.loads((tmp_path / "ls" / f"{kind}.json").read_text(encoding="utf-8"))
        for region in (r for t in tasks for a in t["annotations"] for r in a["result"]):
            if region["type"] == "pairwise":
                # the SDK's validator wants a compared object as to_name, where the editor
                # writes the Pairwise tag's own name (see external_rules._ls_region)
                region = {**region, "to_name": "case_a"}
            assert interface.validate_region(region, return_errors=True) == [], (kind, region)


def test_label_studio_rules_catch_what_label_studio_refuses(project, full, tmp_path):
    export_external(project, "labelstudio", tmp_path / "ls")
    tasks = json.loads((tmp_path / "ls" / "eppc.json").read_text(encoding="utf-8"))
    config = (tmp_path / "ls" / "eppc.xml").read_text(encoding="utf-8")
    tasks[0]["annotations"][0]["completed_by"] = "ava"  # a name: Label Studio refuses it
    tasks[0]["annotations"][1]["result"][1]["value"]["labels"] = ["NotACode"]
    del tasks[0]["data"]["next"]
    errors = "\n".join(check_label_studio(tasks, config))
    assert "data lacks 'next'" in errors
    assert "annotations[0].completed_by: does not match" in errors
    assert "'NotACode' is not a label of the config" in errors


def test_label_studio_regions_carry_the_answers(project, full, tmp_path):
    export_external(project, "labelstudio", tmp_path / "ls")
    emails = dict(read_csv(tmp_path / "ls" / "annotators.csv")[1:])
    assert emails == {
        "ava": "ava@portalreview.invalid",
        "ben": "ben@portalreview.invalid",
        "pat": "pat@portalreview.invalid",
    }

    def load(kind):
        return json.loads((tmp_path / "ls" / f"{kind}.json").read_text(encoding="utf-8"))

    eppc = _by_annotator(load("eppc"), emails)
    assert set(eppc) == {"ava", "pat"}  # ben's coding is a draft: not exported
    start = SENTENCE.index("crushing chest pain")
    assert eppc["ava"]["result"][1]["value"] == {
        "start": start,
        "end": start + 19,
        "text": "crushing chest pain",
        "labels": ["InfoGive: Symptoms"],
    }
    assert eppc["ava"]["result"][0]["value"] == {"choices": ["InfoGive: Symptoms"]}
    assert (eppc["pat"]["ground_truth"], eppc["ava"]["ground_truth"]) == (True, False)
    assert eppc["ava"]["lead_time"] == 12.5

    rank = _by_annotator(load("rank"), emails)
    assert rank["ava"]["result"][0]["value"] == {"ranker": {"rank_1": ["d1"], "rank_2": ["d2"]}}
    assert rank["ben"]["result"][0]["value"] == {"ranker": {"rank_1": ["d1", "d2"]}}  # a tie

    urgency = _by_annotator(load("urgency"), emails)
    assert set(urgency) == {"ava"}
    values = {r["from_name"]: r["value"] for r in urgency["ava"]["result"]}
    # the unit is c1 (A, left) x c2 (B, right); ava chose c1 and gave levels 1 and 6
    assert values == {
        "more_urgent": {"selected": "left"},
        "level_a": {"choices": ["1"]},
        "level_b": {"choices": ["6"]},
    }

    respond = _by_annotator(load("respond"), emails)
    texts = {r["from_name"]: r["value"]["text"] for r in respond["ava"]["result"]}
    assert texts == {"theme_empathy": ["So sorry."], "notes": ["n"]}

    match = _by_annotator(load("match"), emails)
    (region,) = match["ava"]["result"]
    assert region["value"]["labels"] == ["S2"] and region["value"]["text"] == "Please"
    data = load("match")[0]["data"]
    assert data["reference"].splitlines()[1] == "S2. Please go to the emergency room now."


# --- Prodigy -----------------------------------------------------------------------------------


def test_prodigy_tasks_follow_prodigy_rules(project, full, tmp_path):
    export_external(project, "prodigy", tmp_path / "pg")
    lines = {}
    for kind in ("eppc", "match"):
        text = (tmp_path / "pg" / f"{kind}.jsonl").read_text(encoding="utf-8")
        lines[kind] = [json.loads(line) for line in text.splitlines()]
        for task in lines[kind]:
            assert check_prodigy(task) == [], task
    eppc = {t["meta"]["annotator"]: t for t in lines["eppc"]}
    assert eppc["ava"]["text"] == SENTENCE
    (span,) = eppc["ava"]["spans"]
    words = [t["text"] for t in eppc["ava"]["tokens"]]
    assert words[span["token_start"] : span["token_end"] + 1] == ["crushing", "chest", "pain"]
    assert (span["label"], eppc["ava"]["accept"], eppc["ava"]["answer"]) == (
        "InfoGive: Symptoms",
        ["InfoGive: Symptoms"],
        "accept",
    )
    assert (eppc["ben"]["answer"], eppc["ben"]["accept"]) == ("ignore", ["InfoSeek"])
    assert eppc["pat"]["meta"]["gold"] is True
    assert eppc["ava"]["meta"]["previous"] == "Hi Dr. Lee,"
    # match: one task per reference sentence; only the second has a match ("Please")
    assert [t["answer"] for t in lines["match"]] == ["reject", "accept", "reject"]
    accepted = lines["match"][1]
    (span,) = accepted["spans"]
    assert accepted["text"][span["start"] : span["end"]] == "Please"
    assert accepted["meta"]["reference_text"] == "Please go to the emergency room now."
    assert accepted["meta"]["reference_theme"] == "planning"


def test_prodigy_rules_catch_an_exclusive_token_end(project, full, tmp_path):
    export_external(project, "prodigy", tmp_path / "pg")
    task = json.loads((tmp_path / "pg" / "eppc.jsonl").read_text(encoding="utf-8").splitlines()[0])
    task["spans"][0]["token_end"] += 1  # Prodigy's token_end is the last token, not one past
    assert any("first and last token" in e for e in check_prodigy(task))


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("Hi Dr. Lee,\nI have  crushing chest-pain.", [(12, 13), (21, 29)]),
        ("  leading and trailing  ", [(2, 9)]),
        ("naïve café — 5mg/day ", [(6, 10), (13, 20)]),
        ("a b", [(1, 2)]),  # a span that is just the space
        ("", []),
    ],
)
def test_tokens_rebuild_the_text_and_fall_on_span_bounds(text, spans):
    tokens = tokenize(text, spans)
    rebuilt = "".join(text[t.start : t.end] + (" " if t.ws else "") for t in tokens)
    assert rebuilt == text
    for start, end in spans:
        first, last = token_range(tokens, start, end)
        assert (tokens[first].start, tokens[last].end) == (start, end)


def test_prodigy_without_span_answers_is_refused(project, study, tmp_path):
    with pytest.raises(ExportFailed, match="no eppc or match answers"):
        export_external(project, "prodigy", tmp_path / "pg")
    assert not (tmp_path / "pg").exists()


# --- REDCap ------------------------------------------------------------------------------------


def test_redcap_files_follow_redcap_rules(project, full, tmp_path):
    export_external(project, "redcap", tmp_path / "rc")
    records, dictionary = (
        tmp_path / "rc" / "redcap_records.csv",
        tmp_path / "rc" / "redcap_dictionary.csv",
    )
    assert check_redcap(records, dictionary) == []
    rows = read_csv(records)
    assert rows[0][:3] == ["record_id", "case_id", "annotator"]
    assert rows[0][-1] == "theme_guided_response_complete"
    by_name = {r[2]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert by_name["ava"]["empathy"] == "So sorry." and by_name["ava"]["notes"] == "n"
    assert by_name["ava"]["theme_guided_response_complete"] == "2"
    assert by_name["ben"]["planning"] == "Call me, =1+1"
    assert by_name["ben"]["theme_guided_response_complete"] == "0"  # a draft: Incomplete
    assert sorted(r[1] for r in rows[1:]) == ["c1", "c1"]


def test_redcap_rules_catch_bad_names(project, full, tmp_path):
    export_external(project, "redcap", tmp_path / "rc")
    dictionary = tmp_path / "rc" / "redcap_dictionary.csv"
    text = dictionary.read_text(encoding="utf-8").replace("\nannotator,", "\nAnnotator_Name,")
    dictionary.write_text(text, encoding="utf-8")
    errors = check_redcap(tmp_path / "rc" / "redcap_records.csv", dictionary)
    assert any("'Annotator_Name' breaks" in e for e in errors)
    assert any("'annotator' is not a field" in e for e in errors)


def test_redcap_export_imports_back(project, full, tmp_path):
    """The importer of REDCap surveys reads the two files back with its own proposed mapping:
    the same answers, status included, for the same case and clinician."""
    export_external(project, "redcap", tmp_path / "rc")
    with Project.create(tmp_path / "copy.prj") as copy:
        build_small_study(copy)  # the same cases c1, c2
        import_files(
            copy,
            [tmp_path / "rc" / "redcap_records.csv", tmp_path / "rc" / "redcap_dictionary.csv"],
        )
        back = read_snapshot(copy)
    got = {
        (back.unit_of(a)["case_id"], a["annotator"]): (a["status"], a["answer"])
        for a in back.answers
    }
    assert got == {
        ("c1", "ava"): (
            "submitted",
            {"mode": "theme_guided", "notes": "n", "parts": {"empathy": "So sorry."}},
        ),
        ("c1", "ben"): (
            "draft",
            {"mode": "theme_guided", "notes": "", "parts": {"planning": "Call me, =1+1"}},
        ),
    }


def test_a_gold_respond_answer_comes_back_gold(project, full, tmp_path):
    """The PI's adjudicated answer was written as an ordinary record of the PI, and an import
    made it one more answer of hers (gold 1 -> 0)."""
    full.service.save_answer(
        full.units["respond"],
        {"mode": "theme_guided", "parts": {"empathy": "Adjudicated."}, "notes": ""},
        status="submitted",
        annotator_id=full.pi,
        gold=True,
    )
    export_external(project, "redcap", tmp_path / "rc")
    files = [tmp_path / "rc" / "redcap_records.csv", tmp_path / "rc" / "redcap_dictionary.csv"]
    assert check_redcap(*files) == []
    with Project.create(tmp_path / "copy.prj") as copy:
        build_small_study(copy)  # the same cases, and pat the PI
        import_files(copy, files)
        back = read_snapshot(copy)
    got = {(a["annotator"], a["gold"]): (a["status"], a["answer"]["parts"]) for a in back.answers}
    assert got == {
        ("ava", False): ("submitted", {"empathy": "So sorry."}),
        ("ben", False): ("draft", {"planning": "Call me, =1+1"}),
        ("pat", True): ("submitted", {"empathy": "Adjudicated."}),
    }


@pytest.mark.parametrize(
    ("text", "taken", "expected"),
    [
        ("empathy", set(), "empathy"),
        ("Medication-Questions about the very long theme", set(), "medication_questions_about"),
        ("notes", {"notes"}, "notes_2"),
        ("1st line", set(), "f_1st_line"),
        ("record", set(), "record_2"),
        ("form_complete", set(), "form_complete_2"),
        ("a" * 30, {"a" * 26}, "a" * 24 + "_2"),
        ("???", set(), "field"),
    ],
)
def test_redcap_field_names(text, taken, expected):
    assert field_name(text, set(taken)) == expected


def test_redcap_two_answers_of_one_clinician_to_one_case_are_refused(project, full, tmp_path):
    svc = full.service
    second = svc.create_unit_set("respond again", "respond")
    unit = svc.add_unit(second, full.case1)
    svc.assign(unit, full.ava)
    svc.save_answer(unit, {"mode": "theme_guided", "parts": {"other": "x"}}, annotator_id=full.ava)
    with pytest.raises(
        ExportFailed, match="ava answered case c1 in unit sets 'respond set' and 'respond again'"
    ):
        export_external(project, "redcap", tmp_path / "rc")
    assert not (tmp_path / "rc").exists()
    written = export_external(project, "redcap", tmp_path / "rc", unit_sets=["respond again"])
    rows = read_csv(written[0])
    assert [r[2] for r in rows[1:]] == ["ava"]


# --- the command line --------------------------------------------------------------------------


def test_cli_exports_each_format(project, full, tmp_path, capsys):
    path = project.path
    project.close()
    for fmt in ("labelstudio", "prodigy", "redcap"):
        assert main(["export", str(path), "--format", fmt, "-o", str(tmp_path / fmt)]) == 0
    assert (tmp_path / "labelstudio" / "rank.xml").exists()
    assert (
        main(
            [
                "export",
                str(path),
                "--format",
                "redcap",
                "--unit-set",
                "nope",
                "-o",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "no unit set named 'nope'" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                str(path),
                "--format",
                "jsonl",
                "--unit-set",
                "rank set",
                "-o",
                str(tmp_path / "y"),
            ]
        )
        == 2
    )


def test_an_edited_draft_goes_to_label_studio_not_redcap(project, full, tmp_path):
    svc = full.service
    edit_set = svc.create_unit_set("edit drafts", "respond")
    unit = svc.add_unit(edit_set, full.case1, response_id=full.draft2)
    svc.assign(unit, full.ben)
    final = "I am sorry you are in pain. Please go to the ER now."
    svc.save_answer(
        unit,
        {"mode": "edit_draft", "base_response_id": full.draft2, "final_text": final},
        status="submitted",
        annotator_id=full.ben,
    )
    export_external(project, "labelstudio", tmp_path / "ls")
    tasks = json.loads((tmp_path / "ls" / "respond.json").read_text(encoding="utf-8"))
    config = (tmp_path / "ls" / "respond.xml").read_text(encoding="utf-8")
    assert check_label_studio(tasks, config) == []
    (task,) = [t for t in tasks if t["meta"]["unit_set"] == "edit drafts"]
    assert (
        task["data"]["draft"]
        == "I am sorry you are in pain. Please go to the emergency room right away."
    )
    (region,) = task["annotations"][0]["result"]
    assert (region["from_name"], region["to_name"], region["value"]) == (
        "edited_text",
        "draft",
        {"text": [final]},
    )
    export_external(project, "redcap", tmp_path / "rc")
    rows = read_csv(tmp_path / "rc" / "redcap_records.csv")
    assert sorted(r[2] for r in rows[1:]) == ["ava", "ben"]  # ben's theme-guided draft only


# --- writing over an earlier export ------------------------------------------------------------


def _fail_on_write(monkeypatch, number: int) -> None:
    """Make the ``number``-th file opened to be written (whole, or as it is made: the
    preferences' pairs) fail, as a full disk would."""
    opened = []
    real = Path.open

    def open_(self: Path, mode: str = "r", *args, **kwargs):
        if "w" in mode:
            opened.append(self)
            if len(opened) == number:
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)


@pytest.mark.parametrize("fmt", ["labelstudio", "redcap", "preferences"])
def test_an_export_failing_part_way_leaves_the_earlier_export_whole(
    project, full, tmp_path, monkeypatch, fmt
):
    out = tmp_path / fmt
    names = [p.name for p in export_external(project, fmt, out)]
    assert len(names) >= 2
    for name in names:  # an earlier export, different from the one about to be written
        (out / name).write_bytes(b"the earlier export\n")
    _fail_on_write(monkeypatch, 2)
    with pytest.raises(OSError, match="No space left"):
        export_external(project, fmt, out)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no half or staging file
    assert all((out / name).read_bytes() == b"the earlier export\n" for name in names)
    export_external(project, fmt, out)
    assert all((out / name).read_bytes() != b"the earlier export\n" for name in names)


def test_what_a_killed_export_left_is_removed_by_the_next(project, full, tmp_path):
    out = tmp_path / "ls"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = out / f"{STAGING_PREFIX}{dead.pid}-{leftovers.machine_tag()}-0badf00d"
    killed.mkdir()
    (killed / "respond.json").write_bytes(b'[{"half": ')
    export_external(project, "labelstudio", out)
    assert not killed.exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("fmt", ["labelstudio", "preferences"])
def test_a_file_open_in_excel_leaves_the_earlier_export_whole(
    project, full, tmp_path, monkeypatch, fmt
):
    """Windows refuses to rename over a file that Excel holds open: the files renamed before
    it get their earlier content back, and the message names the file held."""
    out = tmp_path / fmt
    names = [p.name for p in export_external(project, fmt, out)]
    for name in names:
        (out / name).write_bytes(b"the earlier export\n")
    held = out / names[-1]  # the last one: every other file is renamed before it
    open_in_excel(monkeypatch, held)
    with pytest.raises(OutputInUse, match=f"{held} cannot be written over"):
        export_external(project, fmt, out)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert all((out / name).read_bytes() == b"the earlier export\n" for name in names)
