"""A save only over the answer it read (``save_answer(if_updated_at=...)``): the same person
signed in at two workstations of a team study, one left open on a unit while the other saved
it, must not put the older answer over the newer one."""

from __future__ import annotations

import pytest

from portalreview.store.service import UNCHECKED, SavedElsewhere, StoreError

pytestmark = pytest.mark.both_backends

RESPOND = {"mode": "theme_guided", "parts": {"empathy": "Here."}, "notes": ""}
THERE = {"mode": "theme_guided", "parts": {"empathy": "Saved there."}, "notes": ""}
LATE = {"mode": "theme_guided", "parts": {"empathy": "Typed here, late."}, "notes": ""}


def test_a_save_over_an_answer_saved_since_is_refused_and_changes_nothing(study):
    here = study.service.as_viewer("ava")
    there = study.service.as_viewer("ava")
    unit = study.units["respond"]
    shown = here.save_answer(unit, RESPOND, if_updated_at=None)  # none yet: made
    again = here.save_answer(unit, RESPOND, if_updated_at=shown.updated_at)
    assert again.payload == RESPOND
    newer = there.save_answer(unit, THERE, status="submitted")
    entries = len(here.history(unit))
    with pytest.raises(SavedElsewhere, match="saved from another computer") as refused:
        here.save_answer(unit, LATE, if_updated_at=shown.updated_at)
    assert refused.value.stored == newer
    assert here.get_answer(unit) == newer and len(here.history(unit)) == entries
    replaced = here.save_answer(unit, LATE, if_updated_at=UNCHECKED)  # the person chose
    assert replaced.payload == LATE and replaced.status == "draft"


def test_an_answer_made_elsewhere_first_is_not_overwritten(study):
    unit = study.units["respond"]
    study.service.as_viewer("ava").save_answer(unit, THERE)
    with pytest.raises(SavedElsewhere):
        study.service.as_viewer("ava").save_answer(unit, LATE, if_updated_at=None)


def test_time_on_task_saved_elsewhere_is_no_conflict(study):
    """Only a change to the answer moves ``updated_at``; the time another visit added does
    not stop a save."""
    here = study.service.as_viewer("ava")
    unit = study.units["respond"]
    shown = here.save_answer(unit, RESPOND, active_seconds=5.0)
    here.save_answer(unit, RESPOND, active_seconds=9.0)  # the same answer, more time
    saved = here.save_answer(unit, LATE, active_seconds=12.0, if_updated_at=shown.updated_at)
    assert saved.payload == LATE


def test_without_the_check_saves_replace_as_before(study):
    here = study.service.as_viewer("ava")
    unit = study.units["respond"]
    here.save_answer(unit, THERE)
    assert here.save_answer(unit, LATE).payload == LATE


def test_time_on_task_adds_up_across_workstations(study):
    """Each desk sends the seconds it counted, added in the save's transaction: desk A, still
    on the unit, sent its old total plus its own seconds, so 300 s added at desk B dropped to
    0.7 s."""
    desk_a = study.service.as_viewer("ava")
    desk_b = study.service.as_viewer("ava")
    unit = study.units["respond"]
    shown = desk_a.save_answer(unit, RESPOND, add_seconds=2.0)
    desk_b.save_answer(unit, RESPOND, add_seconds=300.0)  # re-read there, nothing changed
    after = desk_a.save_answer(unit, LATE, add_seconds=0.7, if_updated_at=shown.updated_at)
    assert after.active_seconds == pytest.approx(302.7)


def test_time_on_task_is_a_total_or_an_increment_not_both(study):
    with pytest.raises(StoreError, match="not both"):
        study.service.as_viewer("ava").save_answer(
            study.units["respond"], RESPOND, active_seconds=5.0, add_seconds=1.0
        )
    with pytest.raises(StoreError, match="finite number of seconds"):
        study.service.as_viewer("ava").save_answer(
            study.units["respond"], RESPOND, add_seconds=float("nan")
        )
