"""The demo study: every kind has answers from 3 annotators, it is synthetic and reproducible."""

from __future__ import annotations

import json

import pytest

from portalreview.cli import main
from portalreview.demo import CLINICIANS, build_demo
from portalreview.resources import resource
from portalreview.store.project import Project
from portalreview.store.service import StudyService


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")


def test_every_kind_has_answers_from_three_annotators(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        info = StudyService(p).info()
    assert info["cases"] >= 30
    for kind, data in info["kinds"].items():
        answering = [n for n, d in data["annotators"].items() if d["submitted"] > 0]
        expected = 3
        assert len(answering) >= expected, kind
        assert set(answering) <= set(CLINICIANS)
    assert info["kinds"]["eppc"]["gold"] == info["kinds"]["eppc"]["units"]


def test_demo_covers_the_paper_sizes(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        info = StudyService(p).info()
    levels = [json.loads(line)["urgency_level"] for line in resource("demo", "cases.jsonl").open()]
    assert all(levels.count(level) >= 5 for level in range(1, 7))
    assert info["kinds"]["eppc"]["units"] >= 60
    assert info["kinds"]["respond"]["units"] >= 12


def test_third_annotator_has_work_left_for_the_tour(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        chloe = StudyService(p).as_viewer("np_chloe")
        progress = chloe.progress("rank")
        assert 0 < progress.done < progress.total
        assert chloe.queue("rank", status="todo")


def test_demo_is_marked_synthetic(demo_path):
    with Project.open(demo_path, read_only=True) as p:
        assert "synthetic" in p.meta("name")
    assert "synthetic" in resource("demo", "README.md").read_text().lower()


def test_demo_build_is_reproducible(demo_path, tmp_path):
    again = build_demo(tmp_path / "again.prproj")

    def answers(path):
        with Project.open(path, read_only=True) as p:
            svc = StudyService(p)
            ben = svc.as_viewer("dr_ben")
            return [ben.get_answer(i.unit_id).payload for i in ben.queue("urgency")][:30]

    assert answers(demo_path) == answers(again)


def test_cli_demo_create_refuses_an_existing_file(tmp_path, capsys):
    target = tmp_path / "d.prproj"
    target.write_text("keep me")
    assert main(["demo", "--create", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert target.read_text() == "keep me"
