"""A default offline copy (``portalreview copy ... --for NAME``, no option) holds that person's
work only, read with plain sqlite3 and searched byte by byte: no other person's answer (nor its
old versions), no draft author or source, no reference urgency level, none of them in the audit
log, and nothing left in free pages. The same search finds everything in a ``--whole-study``
copy, which the command warns about; a copy for no one needs that option.

SQLite as some platforms build it (Debian's, this machine's) zeroes what it deletes
(``secure_delete``); Python's own builds for Windows and macOS do not, and a deleted row then
stays in the file's free space. The fixture turns it off for every connection, so that the
copy's vacuum is what the byte search tests, as it would be on a clinician's laptop."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from portalreview.cli import main
from portalreview.store.merge import merge_copies
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study
from tests.store.test_migration_v2 import schema

MINE = "AVA-OWN-ANSWER-4242"
# What only the other people's work, the drafts' provenance or the reference urgency put in the
# master.
THEIRS = {
    "ben's respond answer": "ZEBRA-BEN-RESPOND-7781",
    "ben's earlier draft of it": "OLD-BEN-DRAFT-5150",
    "ben's fact": "QUOKKA-BEN-FACT-3141",
    "ben's comment": "BEN-COMMENT-2718",
    "ben's flag note": "BEN-FLAG-1618",
    "the PI's adjudication": "GOLD-PAT-ANSWER-9999",
    "a draft's author": "llama-8b",
    "a draft's source": "qwen-7b/thematic",
    "a draft's id naming its model": "draft-by-mistral-7b",
    "an inbox relevancy tag (from the reference)": "RELEVANCY-TAG-77",
    "a pair's difficulty (from the reference levels)": "DIFFICULTY-EASY-88",
}


def _respond(text: str) -> dict:
    return {"mode": "theme_guided", "parts": {"planning": text}, "notes": ""}


@pytest.fixture
def no_secure_delete(monkeypatch):
    """Every sqlite3 connection (the app's through SQLAlchemy, and the copy's own) leaves
    deleted content in place, as SQLite does by default."""
    plain = sqlite3.dbapi2.connect

    def connect(*args, **kwargs):
        conn = plain(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(sqlite3.dbapi2, "connect", connect)


@pytest.fixture
def master(tmp_path, no_secure_delete) -> Path:
    path = tmp_path / "study.prproj"
    with Project.create(path, name="Copies") as project:
        study = build_small_study(project)
        svc = study.service
        extra = svc.add_response(
            study.case1,
            THEIRS["a draft's id naming its model"],
            "Please go to the emergency room now.",
            author_kind="model",
            production="zero_shot",
        )
        case3 = svc.add_case(
            "c3",
            "Can you refill my inhaler?",
            urgency_filter="SUPPORTIVE CARE",  # (also in the schema's text: checked by SQL)
            tags={"relevancy": THEIRS["an inbox relevancy tag (from the reference)"]},
        )
        pairs = svc.create_unit_set("more pairs", "urgency")
        hard = THEIRS["a pair's difficulty (from the reference levels)"]
        svc.assign(svc.add_unit(pairs, study.case2, case_b_id=case3, batch=hard), study.ava)
        edit_set = svc.create_unit_set("edit a draft", "respond")
        svc.assign(svc.add_unit(edit_set, study.case1, response_id=extra), study.ava)
        ava, ben = svc.as_viewer("ava"), svc.as_viewer("ben")
        respond = study.units["respond"]
        ava.save_answer(respond, _respond(MINE), status="submitted")
        ben.save_answer(respond, _respond(THEIRS["ben's earlier draft of it"]))
        ben.save_answer(
            respond,
            _respond(THEIRS["ben's respond answer"]),
            status="submitted",
            comment=THEIRS["ben's comment"],
            flagged=True,
            flag_note=THEIRS["ben's flag note"],
        )
        fact = {"side": "original", "text": THEIRS["ben's fact"], "entailed": True}
        ben.save_answer(study.units["facts"], {"facts": [fact]}, status="submitted")
        ben.save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
        svc.save_answer(
            respond,
            _respond(THEIRS["the PI's adjudication"]),
            status="submitted",
            annotator_id=study.pi,
            gold=True,
        )
    return path


def test_the_master_does_keep_deleted_text_in_its_free_space(master):
    """The premise of the byte search: the master file still holds ben's overwritten draft
    (only in free space or the audit log), so a copy has something to leave behind."""
    assert THEIRS["ben's earlier draft of it"].encode() in master.read_bytes()
    conn = sqlite3.connect(master)
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 0
    conn.close()


def _raw(path: Path) -> bytes:
    assert not Path(f"{path}-wal").exists()  # the file alone is the whole copy
    return path.read_bytes()


def test_a_default_copy_holds_nothing_of_the_others(master, tmp_path, capsys):
    copy = tmp_path / "for-ava.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava"]) == 0
    out, err = capsys.readouterr()
    assert "their assignments and answers only" in out and "warning" not in err

    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        people = dict(conn.execute("SELECT id, name FROM annotators"))
        whose = {people[a] for (a,) in conn.execute("SELECT annotator_id FROM answers")}
        assigned = {people[a] for (a,) in conn.execute("SELECT annotator_id FROM assignments")}
        provenance = set(
            conn.execute("SELECT author, source, author_kind, production FROM responses")
        )
        external = {i: e for i, e in conn.execute("SELECT id, external_id FROM responses")}
        levels = set(conn.execute("SELECT urgency_level, urgency_filter FROM cases"))
        audit = conn.execute("SELECT action, actor_id, answer_id, new_json FROM audit_log")
        audit = audit.fetchall()
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        meta = dict(conn.execute("SELECT key, value FROM project_meta"))
    finally:
        conn.close()
    assert whose == {"ava"} and assigned == {"ava"}
    assert provenance == {("", "", "imported", "other")}
    assert external == {i: f"response-{i}" for i in external}
    assert levels == {(None, None)}
    assert [(a, actor, answer) for a, actor, answer, _ in audit] == [("copy", None, None)]
    assert free == 0 and journal == "delete"  # vacuumed: no page of the others left over
    assert meta["copy_only_assigned"] == "1" and meta["copy_for"] == "ava"

    raw = _raw(copy)
    assert MINE.encode() in raw  # the search does find what is there
    found = [what for what, text in THEIRS.items() if text.encode() in raw]
    assert found == []


def test_a_default_copy_merges_back(master, tmp_path):
    copy = tmp_path / "for-ava.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava"]) == 0
    with Project.open(master, read_only=True) as project:
        svc = StudyService(project)
        (edit_unit,) = [
            u for u in svc.as_viewer("ava").queue("respond") if svc.read_unit(u.unit_id).responses
        ]
        draft = svc.read_unit(edit_unit.unit_id).responses[0].id
        rank_unit = next(iter(svc.as_viewer("ava").queue("rank"))).unit_id
        members = {r.text: r.id for r in svc.read_unit(rank_unit).responses}
    with Project.open(copy) as project:
        ava = StudyService(project).as_viewer("ava")
        # (the copy has ids of its own for the drafts: read them there, as the app does)
        draft_here = ava.read_unit(edit_unit.unit_id).responses[0].id
        edited = {"mode": "edit_draft", "base_response_id": draft_here, "final_text": "Go now.",
                  "notes": ""}  # fmt: skip
        ava.save_answer(edit_unit.unit_id, edited, status="submitted")
        shown = ava.read_unit(rank_unit).responses
        entries = [
            {"response_id": r.id, "rank": i + 1, "correct": True, "criteria": []}
            for i, r in enumerate(shown)
        ]
        ava.save_answer(rank_unit, {"entries": entries}, status="submitted")
    with Project.open(master) as project:
        (report,) = merge_copies(project, [copy])
        assert len(report.added) == 2 and report.skipped == []
        ava = StudyService(project).as_viewer("ava")
        assert ava.get_answer(edit_unit.unit_id).payload["base_response_id"] == draft
        ranks = {e["response_id"]: e["rank"] for e in ava.get_answer(rank_unit).payload["entries"]}
        assert ranks == {members[r.text]: i + 1 for i, r in enumerate(shown)}


def test_only_assigned_is_still_accepted_and_means_the_same(master, tmp_path, capsys):
    copy = tmp_path / "for-ava.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava", "--only-assigned"]) == 0
    raw = _raw(copy)
    assert MINE.encode() in raw
    assert not any(text.encode() in raw for text in THEIRS.values())


def test_a_whole_study_copy_is_explicit_and_warns_what_it_holds(master, tmp_path, capsys):
    copy = tmp_path / "whole.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava", "--whole-study"]) == 0
    out, err = capsys.readouterr()
    assert "(the whole study)" in out
    (warning,) = [line for line in err.splitlines() if line.startswith("warning:")]
    # 4 answers by ben (respond, facts, urgency) and pat (gold): by 2 other people
    assert "whole.prproj holds the whole study: 4 answer(s) by 2 other person(s)" in warning
    assert "reference urgency levels of 2 case(s)" in warning and "audit log" in warning
    # (c3 has a filter label, not a level)
    raw = _raw(copy)
    missing = [what for what, text in THEIRS.items() if text.encode() not in raw]
    assert missing == []  # the same search finds all of it here


def test_a_copy_for_no_one_needs_the_whole_study_option(master, tmp_path, capsys):
    copy = tmp_path / "anyone.prproj"
    assert main(["copy", str(master), "-o", str(copy)]) == 2
    assert "--for NAME" in capsys.readouterr().err and not copy.exists()
    assert main(["copy", str(master), "-o", str(copy), "--whole-study"]) == 0
    assert "5 answer(s) by 3 person(s)" in capsys.readouterr().err  # ava's too


def test_whole_study_and_only_assigned_exclude_each_other(master, tmp_path, capsys):
    copy = tmp_path / "c.prproj"
    with pytest.raises(SystemExit):
        main(["copy", str(master), "-o", str(copy), "--for", "ava", "--whole-study",
              "--only-assigned"])  # fmt: skip
    assert "not allowed with argument" in capsys.readouterr().err and not copy.exists()


def test_a_gold_answer_under_a_clinician_s_name_stays_out_of_her_copy(master, tmp_path):
    """Gold answers are the PI's; one stored under ava's name (an import before that was
    refused) must not reach ava's copy with the adjudication in it."""
    conn = sqlite3.connect(master)
    with conn:
        conn.execute(
            "UPDATE answers SET annotator_id = (SELECT id FROM annotators WHERE name = 'ava') "
            "WHERE is_gold"
        )
    conn.close()
    copy = tmp_path / "for-ava.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava"]) == 0
    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    gold = conn.execute("SELECT count(*) FROM answers WHERE is_gold").fetchone()[0]
    conn.close()
    assert gold == 0
    assert THEIRS["the PI's adjudication"].encode() not in _raw(copy)


def _plant(path: Path) -> None:
    """What a database tool, or someone with the file, may leave in a master: a table (a
    backup of everyone's answers), a view and indexes, and triggers that keep what a copy's
    clean-up removes (the others' answers, the reference levels), one of them in the place of
    a trigger of the program's."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE stash (what, who, payload)")
        conn.execute("CREATE VIEW everyone AS SELECT * FROM answers")
        conn.execute("CREATE INDEX stash_who ON stash (who)")
        conn.execute("CREATE INDEX answers_by_status ON answers (status)")
        conn.execute(
            "CREATE TRIGGER keep_answers BEFORE DELETE ON answers BEGIN "
            "INSERT INTO stash SELECT 'answer', OLD.annotator_id, text FROM respond_parts "
            "WHERE answer_id = OLD.id; END"
        )
        conn.execute("DROP TRIGGER units_no_update")
        conn.execute(
            "CREATE TRIGGER units_no_update BEFORE UPDATE OF urgency_level ON cases BEGIN "
            "INSERT INTO stash VALUES ('level', NULL, OLD.urgency_level); END"
        )
    conn.close()


def test_a_table_and_triggers_planted_in_the_master_do_not_reach_her_copy(master, tmp_path):
    """Her copy holds the program's schema alone: what else the master holds is dropped before
    the copy's clean-up, so no planted trigger runs then to keep the others' work."""
    _plant(master)
    copy = tmp_path / "for-ava.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava"]) == 0
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(copy) == schema(fresh)  # the program's own triggers among them, as made
    raw = _raw(copy)
    assert MINE.encode() in raw
    assert [what for what, text in THEIRS.items() if text.encode() in raw] == []


def test_a_whole_study_copy_leaves_what_is_not_the_program_s_behind(master, tmp_path):
    _plant(master)
    copy = tmp_path / "whole.prproj"
    assert main(["copy", str(master), "-o", str(copy), "--for", "ava", "--whole-study"]) == 0
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(copy) == schema(fresh)
    assert b"answers_by_status" not in _raw(copy)  # vacuumed: not even in free pages
