"""``portalreview evaluate-model`` with the real SmolLM2-135M-Instruct on the demo study: the
model answers one unit of each kind as a pseudo annotator, then every measure is printed with
its interval (or the reason it has none) and its n. A 135M model is not expected to do well;
the test checks the real code path and the report's honesty, not the figures."""

from __future__ import annotations

import re

import pytest

from portalreview.analysis import model_eval
from portalreview.cli import main
from portalreview.demo import build_demo

pytestmark = pytest.mark.real_model

FIGURE = re.compile(
    r"(-?\d\.\d{3} (\[-?\d\.\d{3}, -?\d\.\d{3}\]|\[no interval\]) n=[1-9]\d*"
    r"|n=\d+ — not enough data( \(.+\))?)$"
)
MEASURES = {  # every measure of a kind, as the model's rows name them
    "urgency": set(model_eval.DIFFICULTY.values()),
    "eppc": set(model_eval.EPPC_MEASURES.values()),
    "match": set(model_eval.MATCH_MEASURES.values()),
    "rank": {"Kendall's tau-b of the rankings"},
    "empathy": {"verdict: percent agreement", "verdict: Krippendorff's alpha"},
    "facts": set(model_eval.FACT_MEASURES.values()),
}


def test_smollm2_is_evaluated_on_the_demo(real_model_path, tmp_path, capsys):
    demo = build_demo(tmp_path / "demo.prproj")
    argv = ["evaluate-model", str(demo), "--model", str(real_model_path), "--limit", "1"]
    options = ["--threads", "1", "--ctx", "4096", "--max-tokens", "512", "--resamples", "200"]
    assert main([*argv, *options]) == 0
    captured = capsys.readouterr()
    name = real_model_path.name.removesuffix(".gguf")
    for kind in model_eval.KINDS:
        assert re.search(rf"^{kind}: \d answered, .* in \d+ s$", captured.err, re.M), kind
    lines = captured.out.splitlines()
    assert f"== {name} (model) beside the clinicians, on the units {name} answered ==" in lines
    sections = [x.split(" (")[0] for x in lines if re.match(r"^[a-z]+ \(", x)]
    assert sections == [*model_eval.KINDS, "suggestions"]
    rows = [x for x in lines if x.startswith("  ") and not x.strip().startswith("measure")]
    for line in rows:  # every figure: its value with its interval (or why none) and n
        assert FIGURE.search(line), line
    # the model's own rows: every measure of each kind it answered, or n=0 with the reason
    own = {}
    kind = None
    for line in lines:
        if re.match(r"^[a-z]+ \(", line):
            kind = line.split(" (")[0]
        elif line.startswith("  ") and f" {name} * " in line:
            own.setdefault(kind, []).append(line)
    for kind, measures in MEASURES.items():
        shown = own[kind]
        if any("n=0 — not enough data (" in x for x in shown) and len(shown) == 1:
            continue  # the model gave no usable answer of this kind: said so, with n=0
        assert {m for m in measures if any(x.strip().startswith(m) for x in shown)} == measures
    refused = [x for x in own["suggestions"] if "all kinds" in x]
    assert len(refused) == 1 and FIGURE.search(refused[0])
