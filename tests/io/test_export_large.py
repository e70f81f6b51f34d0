"""A whole-study export of a large study (docs/formats.md, "Export"): the answers' payloads
are read a batch of answers at a time, never one answer at a time (294,800 answers took
about 900,000 queries and 97-201 s), and the files are byte for byte those of reading them
one at a time."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from io_support import full_study
from sqlalchemy import event
from sqlalchemy.engine import Engine

from portalreview.store import exporters
from portalreview.store.exporters import export_project
from portalreview.store.project import Project

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_report.py"
PAYLOAD_TABLES = (
    "respond_answers",
    "respond_parts",
    "rank_entries",
    "rank_criteria",
    "match_decisions",
    "match_spans",
    "sentence_themes",
    "urgency_answers",
    "urgency_case_levels",
    "eppc_labels",
    "eppc_spans",
    "empathy_answers",
    "facts",
    "fact_checks",
)


def _bench():
    spec = importlib.util.spec_from_file_location("portalreview_bench_report", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def synthetic_studies(tmp_path_factory) -> dict[int, Path]:
    """bench_report's synthetic studies of 10 and 20 cases (4 clinicians answer a unit of
    every kind for every case: 430 and 710 answers)."""
    bench = _bench()
    folder = tmp_path_factory.mktemp("synthetic")
    studies = {}
    for cases in (10, 20):
        studies[cases] = folder / f"synthetic-{cases}.prproj"
        bench.build_synthetic_study(studies[cases], cases)
    return studies


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _payload_queries(path: Path, out: Path) -> int:
    """How many statements the jsonl export of the study at ``path`` runs on payload tables."""
    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        with Project.open(path, read_only=True) as project:
            export_project(project, "jsonl", out)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    payload_table = re.compile(rf"\bFROM ({'|'.join(PAYLOAD_TABLES)})\b")
    return sum(bool(payload_table.search(s)) for s in statements)


def test_the_payload_queries_do_not_grow_with_the_answers(synthetic_studies, tmp_path):
    small = _payload_queries(synthetic_studies[10], tmp_path / "small")
    large = _payload_queries(synthetic_studies[20], tmp_path / "large")
    assert 0 < small == large <= 14  # one read_many per kind: 14 queries in all


@pytest.mark.parametrize("batch", [1, 3, 100])
def test_the_files_are_the_same_whatever_the_batch(project, tmp_path, monkeypatch, batch):
    """A batch of 1 reads each answer's payload alone, as the export did before batches; a
    batch of 3 ends in the middle of kinds and annotators (the small study has drafts, a
    flagged answer, a gold answer, answers with suggestions)."""
    full_study(project)
    export_project(project, "jsonl", tmp_path / "default")
    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", batch)
    export_project(project, "jsonl", tmp_path / "batched")
    assert _files(tmp_path / "batched") == _files(tmp_path / "default")


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_synthetic_study_is_exported_the_same_in_batches(
    synthetic_studies, tmp_path, monkeypatch, fmt
):
    with Project.open(synthetic_studies[20], read_only=True) as project:
        monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 1)
        export_project(project, fmt, tmp_path / "one-by-one")
        monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 64)
        export_project(project, fmt, tmp_path / "batched")
    assert _files(tmp_path / "batched") == _files(tmp_path / "one-by-one")
