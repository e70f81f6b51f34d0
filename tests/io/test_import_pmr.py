"""PMR-Bench urgency pairs and inboxes."""

from __future__ import annotations

import pytest
from io_support import fingerprint, write_csv, write_jsonl
from sqlalchemy import select

from portalreview.store.importers import ImportFailed, import_files, message_id
from portalreview.store.models import Case, CaseTag, Unit, UnitSet

pytestmark = pytest.mark.both_backends

CHEST = "I have crushing chest pain and my left arm is numb."
RASH = "I have a small itchy rash on my elbow."
FORM = "Can you fill out my school physical form?"


def _pairs(tmp_path, name="pairs_dev"):
    return write_csv(
        tmp_path / f"{name}.csv",
        [
            ["chosen", "chosen_level", "rejected", "rejected_level", "difficulty"],
            [CHEST, "1", RASH, "5", "easy"],
            [RASH, "5", FORM, "6", "hard"],
            [CHEST, "1", FORM, "6", "easy"],
        ],
    )


def test_pairs_make_one_case_per_message_and_one_unit_per_row(project, tmp_path):
    report = import_files(project, [_pairs(tmp_path)])
    assert report.added["cases"] == 3
    assert report.added["unit_sets"] == 1 and report.added["units"] == 3
    with project.read() as s:
        levels = dict(s.execute(select(Case.external_id, Case.urgency_level)).all())
        units = s.execute(
            select(Unit.case_id, Unit.case_b_id, Unit.batch, UnitSet.name, UnitSet.kind)
            .join(UnitSet, UnitSet.id == Unit.unit_set_id)
            .order_by(Unit.position)
        ).all()
        ids = dict(s.execute(select(Case.external_id, Case.id)).all())
    assert levels == {message_id(CHEST): 1, message_id(RASH): 5, message_id(FORM): 6}
    first = units[0]  # (on sides drawn at random: the next test)
    assert {first.case_id, first.case_b_id} == {ids[message_id(CHEST)], ids[message_id(RASH)]}
    assert [u.batch for u in units] == ["easy", "hard", "easy"]
    assert {(u.name, u.kind) for u in units} == {("pairs_dev", "urgency")}


def test_the_same_message_in_two_files_is_one_case(project, tmp_path):
    inbox = write_jsonl(
        tmp_path / "inbox-1.jsonl",
        [
            {"text": CHEST, "level": 1, "relevancy": 5},
            {"text": "My cough is better, thanks!", "level": 6},
        ],
    )
    report = import_files(project, [_pairs(tmp_path), inbox])
    assert report.added["cases"] == 4  # three from the pairs, one new from the inbox
    with project.read() as s:
        tags = s.execute(
            select(Case.external_id, CaseTag.key, CaseTag.value).join(Case).order_by(CaseTag.key)
        ).all()
    assert (message_id(CHEST), "inbox", "inbox-1") in tags
    assert (message_id(CHEST), "relevancy", "5") in tags


def test_message_ids_ignore_line_endings_and_outer_space():
    assert message_id("A\r\nB ") == message_id(" A\nB")
    assert message_id("A") != message_id("B")


def test_conflicting_levels_for_one_message_are_refused(project, tmp_path):
    before = fingerprint(project)
    path = write_csv(
        tmp_path / "p.csv",
        [
            ["chosen", "chosen_level", "rejected", "rejected_level", "difficulty"],
            [CHEST, "1", RASH, "5", "easy"],
            [RASH, "4", FORM, "6", "medium"],
        ],
    )
    with pytest.raises(ImportFailed) as err:
        import_files(project, [path])
    message = str(err.value)
    assert "p.csv, row 3, field 'chosen_level'" in message
    assert "level 4 here but 5 in p.csv, row 2, field 'rejected_level'" in message
    assert fingerprint(project) == before


def test_an_inbox_level_must_agree_with_the_project(project, tmp_path):
    import_files(project, [_pairs(tmp_path)])
    inbox = write_csv(tmp_path / "inbox.csv", [["text", "level"], [FORM, "3"]])
    with pytest.raises(ImportFailed, match="level 3 here but 6 in the project"):
        import_files(project, [inbox])


def test_a_messages_relevancy_must_agree_everywhere(project, tmp_path):
    """Relevancy follows from urgency (002 Sec. 4.2), one value per message, as its level is:
    two inboxes that disagreed kept both tags without a word."""
    north = write_csv(tmp_path / "inbox_north.csv", [["text", "level", "relevancy"],
                                                     ["Chest pain now", "1", "high"],
                                                     ["Need refill", "5", "low"]])  # fmt: skip
    import_files(project, [north])
    before = fingerprint(project)
    south = write_csv(tmp_path / "inbox_south.csv", [["text", "level", "relevancy"],
                                                     ["Chest pain now", "1", "low"]])  # fmt: skip
    with pytest.raises(ImportFailed, match="relevancy low here but high in the project"):
        import_files(project, [south])
    assert fingerprint(project) == before
    both = write_csv(tmp_path / "both.csv", [["text", "level", "relevancy"],
                                             ["Back pain", "3", "mid"],
                                             ["Back pain", "3", "high"]])  # fmt: skip
    with pytest.raises(ImportFailed, match=r"row 3.*relevancy high here but mid in both.csv, row"):
        import_files(project, [both])
    same = write_csv(tmp_path / "again.csv", [["text", "level", "relevancy"],
                                              ["Chest pain now", "1", "high"]])  # fmt: skip
    import_files(project, [same])  # the same relevancy again: nothing to refuse


def test_a_pairs_file_cannot_be_imported_twice(project, tmp_path):
    import_files(project, [_pairs(tmp_path)])
    with pytest.raises(ImportFailed, match="unit set 'pairs_dev' already exists"):
        import_files(project, [_pairs(tmp_path)])


def test_inverted_pairs_are_reported(project, tmp_path):
    path = write_csv(
        tmp_path / "inv.csv",
        [["chosen", "chosen_level", "rejected", "rejected_level"], [RASH, "5", CHEST, "1"]],
    )
    report = import_files(project, [path])
    assert any("less urgent" in n for n in report.notes)


def test_pairs_of_equal_levels_are_reported(project, tmp_path):
    """Seed 002's pairs are never tied; a tied row was imported without a word, while the
    report leaves it out of accuracy."""
    header = ["chosen", "chosen_level", "rejected", "rejected_level"]
    rows = [header, [RASH, "3", CHEST, "3"], [FORM, "6", RASH, "3"]]
    report = import_files(project, [write_csv(tmp_path / "tied.csv", rows)])
    (tied,) = [n for n in report.notes if "same level" in n]
    assert "in 1 row(s) chosen and rejected have the same level" in tied
    assert any("in 1 row(s) chosen has a less urgent" in n for n in report.notes)


def test_nothing_stored_tells_which_message_of_a_pair_is_the_chosen_one(project, tmp_path):
    """A clinician reading her offline copy or the server with her own SQL read the reference
    answer of every pair: the chosen message was always case A, and, added first, mostly had
    the lower case id. Both are drawn at random now (all 45 pairs one way by chance: 2**-44 for
    the sides, 2/10! for the ids); the report still scores answers against the cases' levels."""
    from portalreview.analysis import urgency
    from portalreview.store.frames import read_frames
    from portalreview.store.service import StudyService

    header = ["chosen", "chosen_level", "rejected", "rejected_level"]
    messages = [(f"Message {i}: my symptom number {i} is back.", 1 + i // 2) for i in range(10)]
    rows = [  # every pair, the more urgent message first, as a sorted file lists them
        [text_a, level_a, text_b, level_b]
        for i, (text_a, level_a) in enumerate(messages)
        for text_b, level_b in messages[i + 1 :]
    ]
    import_files(project, [write_csv(tmp_path / "sorted.csv", [header, *rows])])
    with project.read() as s:
        order = {text: i for i, (text, _level) in enumerate(messages)}
        place = {case: order[text] for case, text in s.execute(select(Case.id, Case.message))}
        units = s.execute(select(Unit.id, Unit.case_id, Unit.case_b_id)).all()
    assert len(units) == 45
    assert 0 < sum(place[a] < place[b] for _, a, b in units) < 45  # case A is the chosen
    assert 0 < sum(place[min(a, b)] < place[max(a, b)] for _, a, b in units) < 45  # the lower id
    svc = StudyService(project)
    ava = svc.add_annotator("ava", "Ava")
    for unit_id, a, b in units:  # she always names the file's chosen message
        svc.assign(unit_id, ava)
        chosen = a if place[a] < place[b] else b
        svc.save_answer(unit_id, {"more_urgent_case_id": chosen}, status="submitted",
                        annotator_id=ava)  # fmt: skip
    figures = urgency.analyse(read_frames(project), n_resamples=0)["accuracy"]
    assert figures["total"]["correct"] == figures["total"]["n"] == 45 - 5  # (5 pairs tied)
