"""The benchmark's study builder still writes a valid study (the benchmark itself is not run
by the tests: ``benchmarks/bench_report.py``)."""

from __future__ import annotations

import json
import re

from portalreview.analysis import ANALYSES
from portalreview.store.project import Project
from tests.bench_support import bench_report


def _bench():
    return bench_report()


def test_builder_writes_a_valid_study_and_the_report_runs(tmp_path):
    bench = _bench()
    path = tmp_path / "bench.prproj"
    rows = bench.build_synthetic_study(path, 50, n_annotators=4)
    # 4 annotators answer 7 units per case; the 50 EPPC units also have a gold answer; the
    # inbox (30 cases) adds its extra urgency pairs.
    assert rows["answers"] == 4 * 7 * 50 + 50 + 4 * bench.INBOX_PAIRS
    with Project.open(path, read_only=True) as project:
        assert project.integrity_check() == "ok"
    result = bench.time_report(path, n_resamples=20)
    assert set(result["per_kind"]) == set(ANALYSES)
    assert result["total"] > 0
    report = result["report"]
    for kind in ANALYSES:
        assert report[kind]["n_answers"] > 0, kind
        assert report[kind]["n_annotators"] == 4, kind
    assert len(report["urgency"]["inboxes"]) == 1
    json.dumps(report, allow_nan=False)


def test_the_benchmark_runs_and_holds_its_figures_against_the_aims(tmp_path, capsys):
    """The whole benchmark on a tiny study: every line it prints is there, the live refresh
    after one saved answer of each kind, and the aims line naming the slowest of them."""
    bench = _bench()
    bench.main(["--sizes", "30", "--n-resamples", "20", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert "30 cases, n_resamples=20: reading frames" in out
    for kind in ("respond", "match", "rank", "urgency", "eppc", "empathy", "facts"):
        assert f"one {kind} answer saved" in out
        assert f"one {kind} answer's content saved" in out
    aims = [line for line in out.splitlines() if "aims at 30 cases" in line]
    assert len(aims) == 1 and "against 2.0 s" in aims[0] and "against 0.5 s" in aims[0]
    assert re.search(r"\(one \w+ answer('s content)? saved\)", aims[0])
    checked = "live report equals a report computed from scratch: after the saves: yes; "
    assert checked + "restart: yes; restart, one match saved: yes" in out
