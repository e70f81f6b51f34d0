"""Helpers shared by the import/export tests: file writers, a content fingerprint of a project,
and a small study with an answer of every kind."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.models import Base, Suggestion
from portalreview.store.project import Project
from tests.conftest import SmallStudy, build_small_study


def write_csv(path: Path, rows: list[list[Any]], encoding: str = "utf-8") -> Path:
    with path.open("w", encoding=encoding, newline="") as fh:
        csv.writer(fh).writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def fingerprint(project: Project) -> str:
    """A hash of every row of every table: equal fingerprints = the same content."""
    digest = hashlib.sha256()
    with project.read() as session:
        for table in Base.metadata.sorted_tables:
            rows = session.execute(select(table).order_by(*table.primary_key.columns)).all()
            digest.update(f"{table.name}:{[tuple(r) for r in rows]!r}".encode())
    return digest.hexdigest()


def payloads(study: SmallStudy) -> dict[str, dict]:
    """A complete (submittable) answer payload for each kind's unit of the small study."""
    svc = study.service
    reference, draft = svc.read_unit(study.units["match"]).responses
    sentence = svc.read_unit(study.units["eppc"]).sentence.text
    start = sentence.index("crushing chest pain")
    pay_start = draft.text.index("Please")
    return {
        "respond": {"mode": "theme_guided", "parts": {"empathy": "So sorry."}, "notes": "n"},
        "rank": {
            "entries": [
                {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
                {"response_id": study.draft2, "rank": 2, "correct": False, "criteria": ["C2"]},
            ]
        },
        "match": {
            "decisions": [
                {"sentence_id": s.id, "spans": [[pay_start, pay_start + 6]] if i == 1 else []}
                for i, s in enumerate(reference.sentences)
            ],
            "themes": [
                {"sentence_id": s.id, "theme": "planning"}
                for s in (*reference.sentences, *draft.sentences)
            ],
        },
        "urgency": {
            "more_urgent_case_id": study.case1,
            "ask_second": True,
            "levels": {str(study.case1): 1, str(study.case2): 6},
        },
        "eppc": {
            "labels": [
                {"code": "InfoGive", "subcode": "Symptoms", "spans": [[start, start + 19]]},
            ]
        },
        "empathy": {"more_empathetic_response_id": study.edited},
        "facts": {
            "facts": [
                {"side": "original", "text": "Go to the ER now.", "entailed": True},
                {
                    "side": "edited",
                    "text": "You will be fine.",
                    "entailed": False,
                    "error_category": "false_assurance",
                },
            ]
        },
    }


def full_study(project: Project) -> SmallStudy:
    """The small study with answers of every kind by ava, drafts by ben, a flagged answer,
    a gold answer by the PI, an LLM suggestion that ava edited and one that the quality gates
    refused."""
    study = build_small_study(project)
    svc = study.service
    with project.write() as session:
        suggestion = Suggestion(
            unit_id=study.units["empathy"],
            kind="empathy",
            payload_json=json.dumps({"more_empathetic_response_id": study.edited}),
            model_file="tiny.gguf",
            model_sha256="ab" * 32,
            template_id="empathy-v1",
            params_json=json.dumps({"temperature": 0.2}),
            seed=7,
            seconds=1.5,
        )
        session.add(suggestion)
        session.flush()
        suggestion_id = suggestion.id
        # one the quality gates refused: its reason must survive export and import
        session.add(
            Suggestion(
                unit_id=study.units["respond"],
                kind="respond",
                payload_json=json.dumps({"parts": {"empathy": "Empathy"}}),
                model_file="tiny.gguf",
                model_sha256="ab" * 32,
                template_id="respond-v1",
                refused_reason="echo: 1 of 1 boxes repeat the prompt's own words",
            )
        )
    for kind, payload in payloads(study).items():
        extra = {}
        if kind == "empathy":
            extra = {"suggestion_id": suggestion_id, "suggestion_use": "edited"}
        svc.save_answer(
            study.units[kind],
            payload,
            status="submitted",
            active_seconds=12.5,
            annotator_id=study.ava,
            **extra,
        )
    svc.save_answer(
        study.units["urgency"],
        {"more_urgent_case_id": study.case2},
        annotator_id=study.ben,
        flagged=True,
        flag_note="not sure",
        comment="hard one",
    )
    svc.save_answer(
        study.units["eppc"],
        payloads(study)["eppc"],
        status="submitted",
        annotator_id=study.pi,
        gold=True,
    )
    return study


def as_earlier_export(folder: Path) -> Path:
    """An export folder as versions before the record of an export's files wrote it: its
    project.json without the record, so that its files may be edited to look older."""
    meta = json.loads((folder / "project.json").read_text(encoding="utf-8"))
    meta.pop("export", None)
    (folder / "project.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def refused(project: Project, paths: list[Path]) -> str:
    """The message of an import of ``paths`` that must be refused and change nothing."""
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, paths)
    assert fingerprint(project) == before, "the project changed"
    return str(err.value)


def edit_sheet_xml(path: Path, sheet: str, pattern: bytes, replacement: bytes) -> None:
    """Put ``replacement`` where ``pattern`` (a regular expression, found once) is in the
    workbook's ``xl/worksheets/<sheet>.xml``, as another program would have written it."""
    edit_part(path, f"xl/worksheets/{sheet}.xml", pattern, replacement, times=1)


def edit_part(
    path: Path, part: str, pattern: bytes, replacement: bytes, times: int | None = None
) -> None:
    """Put ``replacement`` wherever ``pattern`` (a regular expression; found ``times`` times
    when given, else at least once) is in the workbook's ``part``."""
    with zipfile.ZipFile(path) as zin:
        items = [(item, zin.read(item.filename)) for item in zin.infolist()]
    with zipfile.ZipFile(path, "w") as zout:
        for item, data in items:
            if item.filename == part:
                data, found = re.subn(pattern, replacement, data)
                assert found == times if times else found, (part, pattern)
            zout.writestr(item, data)
