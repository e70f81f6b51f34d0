"""Rounds of random changes in a clinician's copy and in the master, merged after each round,
against a three-way model of what a merge must do with each answer.

The model keeps, per answer, the state the copy and the master last agreed on (the master's
answer when the copy was made; then what a merge took in, what the two came to alike, or the
copy's version of a conflict the PI settled). After each merge, for every answer in the copy:

* the copy did not change it since: the master's answer stays;
* only the copy changed it, or both to the same answer: the master now holds the copy's;
* both changed it, differently: the master's stays and one conflict offers the copy's.

The PI settles some conflicts each round, either way; merging the same copy again changes
nothing.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import select

from portalreview.store.merge import (
    _digest,
    _key_text,
    _rows,
    make_copy,
    merge_copy,
    open_conflicts,
    resolve_conflict,
)
from portalreview.store.models import Annotator, Assignment
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.store.test_store_live_frames import payload

pytestmark = pytest.mark.both_backends

WHO = "nurse_ava"
ROUNDS, EDITS = 4, 8


def _states(project) -> dict[str, str]:
    """Answer key -> the digest of its state, as the merge compares them."""
    with project.read() as s:
        return {_key_text(*key): _digest(row.state) for key, row in _rows(s).items()}


def _assigned(project, name: str) -> list[int]:
    with project.read() as s:
        person = s.scalar(select(Annotator.id).where(Annotator.name == name))
        query = select(Assignment.unit_id).where(Assignment.annotator_id == person)
        return list(s.scalars(query))


def _save(project, name: str, unit: int, answer: dict, rng: random.Random) -> None:
    StudyService(project).as_viewer(name).save_answer(
        unit, answer, status="submitted" if rng.random() < 0.7 else "draft"
    )


class _Study:
    """The master, the clinician's copy, and random saves in each."""

    def __init__(self, master, copy_path: Path, rng: random.Random) -> None:
        self.master, self.copy_path, self.rng = master, copy_path, rng
        # a few units of hers, so that both sides change the same answers often
        self.hers = rng.sample(_assigned(master, WHO), 5)
        svc = StudyService(master)
        self.others = [a.name for a in svc.annotators() if a.name != WHO and a.role != "pi"]

    def random_answer(self, unit: int) -> dict:
        return payload(StudyService(self.master), unit, self.rng)

    def in_copy(self, unit: int, answer: dict) -> None:
        with Project.open(self.copy_path) as copy:
            _save(copy, WHO, unit, answer, random.Random(unit))

    def round_of_changes(self) -> None:
        rng = self.rng
        if rng.random() < 0.6:  # the same answer given in both
            unit = rng.choice(self.hers)
            answer = self.random_answer(unit)
            self.in_copy(unit, answer)
            _save(self.master, WHO, unit, answer, random.Random(unit))
        for _ in range(EDITS):
            unit = rng.choice(self.hers)
            self.in_copy(unit, self.random_answer(unit))
        for _ in range(EDITS):
            if rng.random() < 0.5:
                unit = rng.choice(self.hers)
                _save(self.master, WHO, unit, self.random_answer(unit), rng)
            else:
                name = rng.choice(self.others)
                unit = rng.choice(_assigned(self.master, name))
                _save(self.master, name, unit, self.random_answer(unit), rng)


def _expected(agreed: str | None, copy: str, master: str | None) -> tuple[str | None, bool]:
    """(the master's answer after the merge, whether a conflict offers the copy's)."""
    if copy == agreed:
        return master, False
    if master in (agreed, copy):
        return copy, False
    return master, True


# Both seeds failed before the merge fixes of 2026-11-27 (an answer changed back in the copy
# lost, needless conflicts, two conflicts offered for one answer); so did 1, 4, 5 and 6.
@pytest.mark.parametrize("seed", [2, 3])
def test_random_rounds_of_merges_follow_the_three_way_model(fresh_demo, tmp_path, seed):
    rng = random.Random(seed)
    master = fresh_demo
    copy_path = make_copy(master, tmp_path / "ava.prproj", annotator=WHO).path
    study = _Study(master, copy_path, rng)
    agreed = _states(master)
    seen = {"took": 0, "kept": 0, "conflict": 0}
    for round_ in range(ROUNDS):
        study.round_of_changes()
        with Project.open(copy_path) as copy:
            copied = _states(copy)
        before = _states(master)
        report = merge_copy(master, copy_path)
        after = _states(master)
        offered = {c.key: c.copy_hash for c in open_conflicts(master)}
        assert not report.skipped, report.skipped
        for key, state in copied.items():
            want, conflict = _expected(agreed.get(key), state, before.get(key))
            assert after.get(key) == want, (round_, key)
            assert (offered.get(key) == state) == conflict, (round_, key)
            if conflict:
                seen["conflict"] += 1
            elif state != agreed.get(key):  # changed in the copy: the master took it
                seen["took"] += 1
                agreed[key] = state
            elif want != state:  # changed in the master only: kept
                seen["kept"] += 1
        assert len(offered) == len(open_conflicts(master))  # one per answer
        for conflict in open_conflicts(master):
            if rng.random() < 0.5:  # the PI settles it, either way
                resolve_conflict(master, conflict, rng.choice(["copy", "master"]))
                agreed[conflict.key] = conflict.copy_hash
        settled = _states(master)
        again = merge_copy(master, copy_path)
        assert _states(master) == settled and not again.changed and not again.recorded
    assert seen["conflict"] and seen["took"] and seen["kept"]
