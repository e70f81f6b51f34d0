"""A facts answer saying "no medical facts on either side" in the portable answers format:
imported as submitted, exported with the flag and imported again the same; the flag beside a
fact, or an empty submitted check without it, is an error naming the line and changes nothing."""

from __future__ import annotations

import json

import pytest
from io_support import fingerprint, write_jsonl

from portalreview.store.exporters import export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

UNIT = {"set": "facts set", "position": 0}


def _row(answer: dict, status: str = "submitted") -> dict:
    return {"kind": "facts", "unit": UNIT, "annotator": "cleo", "status": status,
            "answer": answer}  # fmt: skip


@pytest.fixture
def study(project):
    return build_small_study(project)


def test_a_submitted_no_facts_check_imports_and_exports(project, study, tmp_path):
    rows = [_row({"facts": [], "no_facts": True})]
    report = import_files(project, [write_jsonl(tmp_path / "answers.jsonl", rows)])
    assert report.added["answers"] == 1
    svc = StudyService(project)
    cleo = next(a.id for a in svc.annotators() if a.name == "cleo")
    saved = svc.get_answer(study.units["facts"], cleo)
    assert saved.status == "submitted"
    assert saved.payload == {"facts": [], "no_facts": True}
    out = tmp_path / "out"
    export_project(project, "jsonl", out)
    exported = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    (mine,) = [r for r in exported if r["annotator"] == "cleo"]
    assert mine["answer"] == {"facts": [], "no_facts": True} and mine["status"] == "submitted"
    with Project.create(tmp_path / "again.prproj") as again:
        build_small_study(again)
        import_files(again, [out / "answers.jsonl"])
        svc = StudyService(again)
        cleo = next(a.id for a in svc.annotators() if a.name == "cleo")
        assert svc.get_answer(study.units["facts"], cleo).payload == saved.payload


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"facts": [{"side": "original", "text": "Come Friday.", "entailed": True}],
             "no_facts": True},
            r"line 1.*'no_facts' says neither response holds a medical fact, but 1 fact\(s\)",
        ),
        ({"facts": []}, "line 1.*cannot submit yet: no facts listed yet"),
        ({"facts": [], "no_facts": "yes"}, "line 1.*'no_facts' must be bool"),
    ],
)  # fmt: skip
def test_a_wrong_no_facts_check_is_refused(project, study, tmp_path, answer, message):
    before = fingerprint(project)
    with pytest.raises(ImportFailed, match=message):
        import_files(project, [write_jsonl(tmp_path / "answers.jsonl", [_row(answer)])])
    assert fingerprint(project) == before
