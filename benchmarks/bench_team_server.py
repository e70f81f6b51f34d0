"""Many clinicians saving at once on a team server, against one alone (issue 15).

Starts a PostgreSQL server of its own (portalreview.store.testing_postgres), then measures, on
the same machine in the same run:

1. ``--clinicians`` clinicians (processes) saving answers of every kind as fast as they can
   for ``--seconds`` while the PI's live dashboard refreshes (another process);
2. one clinician alone on the same server, for the same time;
3. one clinician alone on a project file (SQLite), for the same time.

Each prints saves per second and the p50/p95 latency of a save, and is checked: every
acknowledged save in the audit log exactly once, every answer at its last acknowledged save,
the hash chain verified, no errors (load_testing.check_load). A benchmark, not a test:
the figures depend on the machine (print them with ``--json`` to keep them).

    .venv/bin/python benchmarks/bench_team_server.py [--clinicians 20] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from portalreview.load_testing import build_load_study, check_load, cpu_count, run_load
from portalreview.store import testing_postgres
from portalreview.store.backends import Project, ServerProject


def _row(name: str, result, problems: list[str]) -> dict:
    return {
        "run": name,
        "saves": len(result.saves),
        "seconds": round(result.seconds, 2),
        "saves_per_s": round(result.saves_per_second, 1),
        "p50_ms": round(result.latency_ms(0.5), 2),
        "p95_ms": round(result.latency_ms(0.95), 2),
        "dashboard_refreshes": result.refreshes,
        "errors": len(result.errors),
        "problems": problems,
    }


def _server_run(server, clinicians: int, seconds: float, folder: Path, dashboard: bool) -> dict:
    address = server.url(server.new_database())
    with ServerProject.create(address) as project:
        units = build_load_study(project, clinicians)
    result = run_load(address, units, clinicians, seconds, folder, dashboard=dashboard)
    with ServerProject.open(address) as project:
        problems = check_load(project, result)
    name = f"server, {clinicians} clinician(s)" + (" + dashboard" if dashboard else "")
    return _row(name, result, problems + result.errors[:3])


def _file_run(seconds: float, folder: Path) -> dict:
    path = folder / "alone.prproj"
    with Project.create(path) as project:
        units = build_load_study(project, 1)
    result = run_load(str(path), units, 1, seconds, folder / "file", dashboard=False)
    with Project.open(path, read_only=True) as project:
        problems = check_load(project, result)
    return _row("file (SQLite), 1 clinician", result, problems + result.errors[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clinicians", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)  # the server may run as another account
        for sub in ("many", "alone", "file"):
            (folder / sub).mkdir()
        (folder / "file" / "file").mkdir()
        with testing_postgres.running(folder / "cluster") as server:
            rows.append(_server_run(server, args.clinicians, args.seconds, folder / "many", True))
            rows.append(_server_run(server, 1, args.seconds, folder / "alone", False))
        rows.append(_file_run(args.seconds, folder / "file"))
    alone = rows[1]
    print(f"{'run':<42}{'saves/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'vs alone':>10}  check")
    for row in rows:
        ratio = row["saves_per_s"] / alone["saves_per_s"] if alone["saves_per_s"] else 0.0
        check = "nothing lost" if not row["problems"] and not row["errors"] else row["problems"]
        print(
            f"{row['run']:<42}{row['saves_per_s']:>9}{row['p50_ms']:>9}{row['p95_ms']:>9}"
            f"{ratio:>9.2f}x  {check}"
        )
    refreshes = rows[0]["dashboard_refreshes"]
    print(f"({cpu_count()} CPUs; dashboard refreshes during the team run: {refreshes})")
    if args.json:
        record = {
            "when": time.strftime("%Y-%m-%d"),
            "machine": f"{platform.machine()}, {cpu_count()} CPUs",
            "clinicians": args.clinicians,
            "seconds": args.seconds,
            "rows": rows,
        }
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(not r["problems"] and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
