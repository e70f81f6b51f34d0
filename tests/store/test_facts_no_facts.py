"""A fact check may say "no medical facts on either side" (seed 004's both-sets-empty case):
the codec stores and reads the flag, lets such an answer be submitted, refuses the flag beside a
listed fact with a message naming both, and the database refuses that mix too; a version-2 file
upgrades to a schema equal to a new file's."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from test_migration_v2 import schema

from portalreview.store.kinds import PayloadError
from portalreview.store.migrations import SCHEMA_VERSION
from portalreview.store.project import Project
from portalreview.store.service import StoreError

pytestmark = pytest.mark.both_backends

FACT = {"side": "original", "text": "Come in on Friday.", "entailed": True}


def test_no_facts_is_complete_and_reads_back(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["facts"]
    saved = ava.save_answer(unit, {"facts": [], "no_facts": True}, status="submitted")
    assert saved.status == "submitted"
    assert ava.get_answer(unit).payload == {"facts": [], "no_facts": True}
    assert ava.progress("facts").done == 1


def test_an_empty_list_without_the_flag_is_not_done_yet(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["facts"]
    with pytest.raises(PayloadError, match=r"no facts listed yet.*No medical facts on either"):
        ava.save_answer(unit, {"facts": [], "no_facts": False}, status="submitted")
    draft = ava.save_answer(unit, {"facts": [], "no_facts": False})
    assert draft.payload == {"facts": []}  # false is not written back: the old shape


def test_the_flag_with_a_fact_is_refused_and_changes_nothing(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["facts"]
    ava.save_answer(unit, {"facts": [], "no_facts": True})
    with pytest.raises(PayloadError, match=r"'no_facts'.*1 fact\(s\) are listed"):
        ava.save_answer(unit, {"facts": [FACT], "no_facts": True})
    assert ava.get_answer(unit).payload == {"facts": [], "no_facts": True}


@pytest.mark.parametrize("value", ["yes", 1])
def test_the_flag_must_be_true_or_false(study, value):
    ava = study.service.as_viewer("ava")
    with pytest.raises(PayloadError, match="'no_facts' must be bool"):
        ava.save_answer(study.units["facts"], {"facts": [], "no_facts": value})


def test_unticking_keeps_the_facts_listed_later(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["facts"]
    ava.save_answer(unit, {"facts": [], "no_facts": True}, status="submitted")
    again = ava.save_answer(unit, {"facts": [FACT]}, status="submitted")
    assert again.payload == {"facts": [{**FACT, "error_category": None}]}


def test_the_database_refuses_a_fact_in_a_no_facts_check(study):
    ava = study.service.as_viewer("ava")
    unit = study.units["facts"]
    answer_id = ava.save_answer(unit, {"facts": [], "no_facts": True}).answer_id
    with pytest.raises(StoreError, match="cannot list a fact"), study.service._write() as s:
        s.execute(
            text(
                "INSERT INTO facts (answer_id, kind, side, position, text) "
                "VALUES (:a, 'facts', 'original', 0, 'x')"
            ),
            {"a": answer_id},
        )
    other = ava.save_answer(unit, {"facts": [FACT]}).answer_id
    refused = pytest.raises(StoreError, match="cannot be marked 'no medical facts")
    with refused, study.service._write() as s:
        s.execute(text("UPDATE fact_checks SET no_facts = true WHERE answer_id = :a"), {"a": other})


def test_a_version_2_file_upgrades_to_the_schema_of_a_new_file(tmp_path):
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    old = tmp_path / "old.prproj"  # a file the version-2 code wrote (kept in tests/store/data)
    shutil.copyfile(Path(__file__).parent / "data" / "v2-small.prproj", old)
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'fact_checks'").fetchall()
    conn.close()
    with Project.open(old) as project:
        assert project.integrity_check() == "ok"
    assert schema(old) == schema(fresh)
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
