"""The demo study through the command line: `demo --create`, `export`, `new`, `import`, and
`export` again give the same study, table by table, byte for byte (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portalreview.cli import main

TABLES = (
    "annotators",
    "cases",
    "responses",
    "unit_sets",
    "units",
    "assignments",
    "suggestions",
    "answers",
)


def _rows(folder: Path, table: str) -> list[dict]:
    with (folder / f"{table}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _info(path: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    return {k: v for k, v in info.items() if k not in ("name", "path", "audit_entries")}


@pytest.fixture(scope="module")
def demo_export(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--create", str(root / "demo.prproj")]) == 0
    assert (
        main(["export", str(root / "demo.prproj"), "--format", "jsonl", "-o", str(root / "a")]) == 0
    )
    return root


def test_the_demo_holds_every_shape_the_round_trip_must_carry(demo_export):
    units = _rows(demo_export / "a", "units")
    answers = _rows(demo_export / "a", "answers")
    assert {u["kind"] for u in units} == {
        "respond", "rank", "match", "urgency", "eppc", "empathy", "facts"
    }  # fmt: skip
    assert any(u["kind"] == "respond" and u["response_id"] for u in units)  # edit a draft
    assert any(u["kind"] == "respond" and not u["response_id"] for u in units)
    assert any(a["answer"].get("mode") == "edit_draft" for a in answers)
    assert any(a["gold"] for a in answers)


def test_the_demo_survives_export_new_import_export(demo_export, capsys):
    root = demo_export
    assert main(["new", str(root / "copy.prproj")]) == 0
    status = main(["import", str(root / "copy.prproj"), str(root / "a")])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert "Imported." in printed.out
    assert (
        main(["export", str(root / "copy.prproj"), "--format", "jsonl", "-o", str(root / "b")]) == 0
    )
    for table in TABLES:
        first = (root / "a" / f"{table}.jsonl").read_bytes()
        again = (root / "b" / f"{table}.jsonl").read_bytes()
        assert again == first, table
    catalogs = [json.loads((root / d / "project.json").read_text())["catalogs"] for d in "ab"]
    assert catalogs[0] == catalogs[1]
    assert _info(root / "copy.prproj", capsys) == _info(root / "demo.prproj", capsys)
