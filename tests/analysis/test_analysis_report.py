"""The JSON report end to end on the demo study, with figures re-derived by other routes:
plain SQL on the project file, the service layer's payloads, and the metrics functions."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from portalreview import metrics
from portalreview.demo import build_demo
from portalreview.reports.json_report import build_report, write_json_report
from portalreview.store.project import Project
from portalreview.store.service import StudyService

DOCS = Path(__file__).resolve().parents[2] / "docs" / "report.md"
PEOPLE = "a.status = 'submitted' AND a.is_gold = 0 AND p.is_model = 0"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")


@pytest.fixture(scope="module")
def report(demo):
    return build_report(demo, seed=3, n_resamples=200)


@pytest.fixture(scope="module")
def db(demo):
    conn = sqlite3.connect(f"file:{demo}?mode=ro", uri=True)
    yield conn
    conn.close()


def test_report_is_json_and_reproducible(demo, report, tmp_path):
    text = json.dumps(report, allow_nan=False)
    assert json.dumps(build_report(demo, seed=3, n_resamples=200), allow_nan=False) == text
    other = build_report(demo, seed=4, n_resamples=200)
    assert (
        other["urgency"]["accuracy"]["total"]["accuracy"]["value"]
        == (report["urgency"]["accuracy"]["total"]["accuracy"]["value"])
    )
    assert (
        other["urgency"]["accuracy"]["total"]["accuracy"]["ci"]
        != (report["urgency"]["accuracy"]["total"]["accuracy"]["ci"])
    )
    out = write_json_report(demo, tmp_path / "r.json", seed=3, n_resamples=200)
    assert json.loads(out.read_text(encoding="utf-8")) == report
    assert report["settings"] == {
        "seed": 3,
        "n_resamples": 200,
        "confidence": 0.95,
        "ci_method": "percentile bootstrap over units",
        "include_drafts": False,
    }


def test_a_caller_can_stop_the_report_between_two_analyses(demo):
    """``before_each`` sees every kind in report order; raising there stops the report (the
    dashboard's Cancel), leaving the later analyses undone."""
    from portalreview.analysis import KINDS

    seen: list[str] = []

    class Stop(Exception):
        pass

    def before_each(kind: str) -> None:
        seen.append(kind)
        if kind == "urgency":
            raise Stop

    with pytest.raises(Stop):
        build_report(demo, n_resamples=0, before_each=before_each)
    assert seen == list(KINDS[: KINDS.index("urgency") + 1])
    seen.clear()
    build_report(demo, n_resamples=0, before_each=seen.append)
    assert seen == list(KINDS)


def test_every_headline_figure_has_a_ci_and_its_n(report):
    figures = []

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"value", "ci", "n_units", "n_resamples"}:
                figures.append(node)
                return
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(report)
    assert len(figures) > 300
    with_value = [f for f in figures if f["value"] is not None]
    assert all(f["n_units"] > 0 for f in with_value)
    assert sum(f["ci"] is not None for f in with_value) > 0.95 * len(with_value)
    # n_resamples: the resamples the interval rests on (of the 200 asked), 0 without one.
    assert all((f["ci"] is None) == (f["n_resamples"] == 0) for f in figures)
    assert all(0 <= f["n_resamples"] <= 200 for f in figures)


def test_docs_name_every_key(report):
    text = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"`([^`]+)`", text))
    for key, section in report.items():
        assert key in documented, f"docs/report.md does not document `{key}`"
        if isinstance(section, dict):
            for sub in section:
                assert sub in documented or f"{key}.{sub}" in documented, f"{key}.{sub}"


def test_pairwise_accuracy_from_sql(report, db):
    rows = db.execute(
        f"""SELECT ua.more_urgent_case_id, u.case_id, u.case_b_id, ca.urgency_level,
                   cb.urgency_level
            FROM answers a JOIN annotators p ON p.id = a.annotator_id
            JOIN units u ON u.id = a.unit_id JOIN urgency_answers ua ON ua.answer_id = a.id
            JOIN cases ca ON ca.id = u.case_id JOIN cases cb ON cb.id = u.case_b_id
            WHERE {PEOPLE}"""
    ).fetchall()
    valid = [r for r in rows if r[3] is not None and r[4] is not None and r[3] != r[4]]
    correct = sum(chosen == (a if la < lb else b) for chosen, a, b, la, lb in valid)
    total = report["urgency"]["accuracy"]["total"]
    assert (total["n"], total["correct"]) == (len(valid), correct)
    assert total["accuracy"]["value"] == pytest.approx(correct / len(valid))
    assert report["urgency"]["accuracy"]["n_excluded_equal_levels"] == len(rows) - len(valid)


def test_percent_correct_and_win_rates_from_sql(report, db):
    rows = db.execute(
        f"""SELECT a.id, r.source, e.rank, e.correct
            FROM rank_entries e JOIN answers a ON a.id = e.answer_id
            JOIN annotators p ON p.id = a.annotator_id JOIN responses r ON r.id = e.response_id
            WHERE {PEOPLE}"""
    ).fetchall()
    by_source = defaultdict(list)
    rankings = defaultdict(dict)
    for answer, source, rank, correct in rows:
        by_source[source].append(correct)
        rankings[answer][source] = rank
    got = {row["source"]: row for row in report["rank"]["by_source"]}
    for source, flags in by_source.items():
        assert got[source]["percent_correct"]["value"] == pytest.approx(
            100 * sum(flags) / len(flags)
        )
    wins = defaultdict(int)
    met = defaultdict(int)
    for ranks in rankings.values():
        for s, t in itertools.permutations(ranks, 2):
            met[s, t] += 1
            wins[s, t] += ranks[s] < ranks[t]
    for row in report["rank"]["win_rates"]:
        key = (row["source"], row["opponent"])
        assert row["win_rate"]["value"] == pytest.approx(wins[key] / met[key])


def test_eppc_code_micro_f1_against_gold_from_sql(report, db):
    rows = db.execute(
        """SELECT a.unit_id, p.name, a.is_gold, l.code_id
           FROM answers a JOIN annotators p ON p.id = a.annotator_id
           LEFT JOIN eppc_labels l ON l.answer_id = a.id
           WHERE a.kind = 'eppc' AND a.status = 'submitted'"""
    ).fetchall()
    sets: dict = {}
    for unit, name, gold, code in rows:
        key = (unit, "GOLD" if gold else name)
        codes = sets.setdefault(key, set())  # an answer without a code has an empty set
        if code is not None:
            codes.add(code)
    for entry in report["eppc"]["vs_gold"]:
        units = sorted(u for u, n in sets if n == entry["annotator"] and (u, "GOLD") in sets)
        expected = metrics.micro_prf(
            [sets[u, "GOLD"] for u in units], [sets[u, entry["annotator"]] for u in units]
        )
        assert entry["n_units"] == len(units)
        assert entry["codes"]["f1"]["value"] == pytest.approx(expected.f1)
        assert (entry["codes"]["tp"], entry["codes"]["fn"]) == (expected.tp, expected.fn)


def test_fact_recall_from_sql(report, db):
    (original, preserved, edited, grounded) = db.execute(
        f"""SELECT sum(f.side = 'original'), sum(f.side = 'original' AND f.entailed),
                   sum(f.side = 'edited'), sum(f.side = 'edited' AND f.entailed)
            FROM facts f JOIN answers a ON a.id = f.answer_id
            JOIN annotators p ON p.id = a.annotator_id WHERE {PEOPLE}"""
    ).fetchone()
    overall = report["facts"]["overall"]
    assert overall["micro"]["recall"]["value"] == pytest.approx(preserved / original)
    assert overall["micro"]["precision"]["value"] == pytest.approx(grounded / edited)
    assert overall["flow"]["new_facts"] == edited - grounded


def test_empathy_shares_from_sql(report, db):
    rows = db.execute(
        f"""SELECT e.more_empathetic_response_id, r.source
            FROM empathy_answers e JOIN answers a ON a.id = e.answer_id
            JOIN annotators p ON p.id = a.annotator_id
            LEFT JOIN responses r ON r.id = e.more_empathetic_response_id WHERE {PEOPLE}"""
    ).fetchall()
    (pair,) = report["empathy"]["by_source_pair"]
    first = sum(source == pair["first_source"] for _, source in rows)
    equal = sum(chosen is None for chosen, _ in rows)
    assert pair["n_answers"] == len(rows)
    assert pair["share_first_more"]["value"] == pytest.approx(first / len(rows))
    assert pair["share_equal"]["value"] == pytest.approx(equal / len(rows))


def test_content_edit_f1_from_service_payloads(report, demo):
    project = Project.open(demo, read_only=True)
    try:
        svc = StudyService(project)
        with project.read() as s:
            from sqlalchemy import select

            from portalreview.store.models import Response, Unit, UnitSet

            units = s.execute(
                select(Unit.id, Response.text, Response.source)
                .join(UnitSet, UnitSet.id == Unit.unit_set_id)
                .join(Response, Response.id == Unit.response_b_id)
                .where(UnitSet.name == "Match drafts to the reference")
            ).all()
        per_source = defaultdict(list)
        for unit, draft, source in units:
            for answer in svc.answers_for_unit(unit):
                if answer.status != "submitted":
                    continue
                decisions = [d["spans"] or None for d in answer.payload["decisions"]]
                per_source[source].append(metrics.content_edit_f1(draft, decisions))
    finally:
        project.close()
    got = {row["source"]: row for row in report["match"]["by_source"]}
    for source, results in per_source.items():
        expected = metrics.micro_edit_f1(results)
        content = got[source]["content"]
        assert (content["em"], content["ea"], content["ed"]) == (
            expected.em,
            expected.ea,
            expected.ed,
        )
        assert content["f1"]["value"] == pytest.approx(expected.f1)


def test_the_study_lists_every_annotator_with_their_submitted_answers(tmp_path):
    """One annotator with drafts only and one with nothing saved were left out of
    ``study.annotators`` (and the workbook's Annotators table): the PI could not see from the
    report who had not contributed. Counts from SQL: submitted answers, gold included."""
    path = tmp_path / "s.prproj"
    with Project.create(path, name="t") as project:
        svc = StudyService(project)
        ava, ben = svc.add_annotator("ava"), svc.add_annotator("ben")
        cal = svc.add_annotator("cal")
        svc.add_annotator("pat", role="pi")
        c1 = svc.add_case("c1", "Chest pain since this morning.", urgency_level=1)
        c2 = svc.add_case("c2", "Can I have my flu shot record?", urgency_level=6)
        unit = svc.add_unit(svc.create_unit_set("u", "urgency"), c1, case_b_id=c2)
        for who in (ava, ben, cal):
            svc.assign(unit, who)
        svc.save_answer(unit, {"more_urgent_case_id": c1}, status="submitted", annotator_id=ava)
        svc.save_answer(unit, {"more_urgent_case_id": c2}, status="draft", annotator_id=ben)
        listed = build_report(project, n_resamples=0)["study"]["annotators"]
    with sqlite3.connect(path) as conn:
        expected = [
            {"name": name, "is_model": bool(is_model), "n_answers": n}
            for name, is_model, n in conn.execute(
                "SELECT p.name, p.is_model, COUNT(a.id) FROM annotators p LEFT JOIN answers a"
                " ON a.annotator_id = p.id AND a.status = 'submitted' GROUP BY p.id"
                " ORDER BY p.name"
            )
        ]
    assert listed == expected
    assert [person["n_answers"] for person in listed] == [1, 0, 0, 0]
