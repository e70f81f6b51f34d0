"""Would DuckDB read a project faster? The report's reader against DuckDB's SQLite scanner.

Issue 18 names "an embedded columnar engine that reads the SQLite file (for example DuckDB's
SQLite scanner)". DuckDB's ``sqlite_scanner`` extension is on PyPI
(``duckdb-extension-sqlite-scanner``, the same version as ``duckdb``), so it could be bundled
without a download at run time. This script times, alternating, in separate processes:

* **the report's reader**: ``store.frames.read_frames`` in this project's environment - every
  frame the report reads, joins and types included (the reference);
* **DuckDB**: ``SELECT *`` of the same tables, unjoined, into pandas, through the extension,
  in an environment that has DuckDB (``--duckdb-python``), with 1 and 2 DuckDB threads.

DuckDB does less here than the reference (no joins, no typed columns), so its time is a floor
for a reader built on it. Printed: each run's seconds and the ratio DuckDB / reference of the
medians.

Usage (DuckDB is not one of the project's dependencies; make a separate environment)::

    python3 -m venv /tmp/ddb
    /tmp/ddb/bin/pip install duckdb==1.5.5 duckdb-extension-sqlite-scanner==1.5.5 pandas
    .venv/bin/python benchmarks/bench_duckdb_read.py --study /tmp/bench/synthetic-10000.prproj \\
        --duckdb-python /tmp/ddb/bin/python

The study is one ``bench_report.py --keep /tmp/bench`` keeps, upgraded to the current format
(opened read-only). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

#: The tables the report's frames are read from (store/frames.py), the same for DuckDB.
TABLES = [
    "answers",
    "respond_answers",
    "rank_entries",
    "match_decisions",
    "sentence_themes",
    "urgency_answers",
    "urgency_case_levels",
    "eppc_labels",
    "empathy_answers",
    "fact_checks",
    "respond_parts",
    "rank_criteria",
    "match_spans",
    "eppc_spans",
    "units",
    "cases",
    "responses",
    "sentences",
]

#: Run by ``--duckdb-python``: prints the seconds DuckDB took to read every table, and rows.
DUCKDB_READ = """
import glob, json, sys, time
import duckdb, duckdb_extension_sqlite_scanner as ext
study, threads, tables = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
started = time.perf_counter()
extension = glob.glob(ext.__path__[0] + "/extensions/*/sqlite_scanner.duckdb_extension")[0]
con = duckdb.connect(config={"allow_unsigned_extensions": True, "threads": threads})
con.execute(f"LOAD '{extension}'")
con.execute(f"ATTACH '{study}' AS p (TYPE sqlite, READ_ONLY)")
rows = sum(len(con.execute(f"SELECT * FROM p.{table}").df()) for table in tables)
print(json.dumps({"seconds": time.perf_counter() - started, "rows": rows}))
"""

#: Run by this environment's Python: the report's reader.
REFERENCE_READ = """
import json, sys, time
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
project = Project.open(sys.argv[1], read_only=True)
started = time.perf_counter()
frames = read_frames(project)
print(json.dumps({"seconds": time.perf_counter() - started, "rows": len(frames.answers)}))
"""


def _timed(python: str, script: str, *args: str) -> dict:
    done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True)
    parser.add_argument("--duckdb-python", required=True, help="a Python that has DuckDB")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    study, tables = str(args.study.resolve()), " ".join(TABLES)
    runs: dict[str, list[float]] = {"reference": [], "duckdb 1 thread": [], "duckdb 2 threads": []}
    for repeat in range(args.repeats):
        reference = _timed(sys.executable, REFERENCE_READ, study)
        runs["reference"].append(reference["seconds"])
        for threads in (1, 2):
            read = _timed(args.duckdb_python, DUCKDB_READ, study, str(threads), tables)
            runs[f"duckdb {threads} thread{'s' if threads > 1 else ''}"].append(read["seconds"])
        print(f"run {repeat + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()))
    print(f"DuckDB read {read['rows']:,} rows of {len(TABLES)} tables, unjoined")
    reference_median = statistics.median(runs["reference"])
    for name, seconds in runs.items():
        median = statistics.median(seconds)
        print(f"{name:>18}: median {median:.2f} s, {median / reference_median:.2f}x the reference")


if __name__ == "__main__":
    main()
