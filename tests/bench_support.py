"""The benchmarks' study builders, for tests that need a synthetic study (benchmarks/ is not a
package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_REPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_report.py"


def bench_report(module_name: str = "portalreview_bench_report") -> ModuleType:
    """``benchmarks/bench_report.py`` loaded as ``module_name`` (its dataclasses need the
    module in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(module_name, BENCH_REPORT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
