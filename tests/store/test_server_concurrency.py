"""Many writers at once on a server study (portalreview/load_testing.py): clinicians in processes
of their own save answers of every kind as fast as they can while the PI's live dashboard
refreshes; every acknowledged save is there exactly once, and the audit chain verifies.
Writes are serialised by one advisory lock per transaction (store/backends/postgres.py)."""

from __future__ import annotations

from sqlalchemy import text

from portalreview.load_testing import build_load_study, check_load, run_load
from portalreview.store.backends import ServerProject

CLINICIANS = 20
SECONDS = 10.0


def test_many_clinicians_saving_at_once_lose_and_duplicate_nothing(postgres_server, tmp_path):
    address = postgres_server.url(postgres_server.new_database())
    with ServerProject.create(address) as project:
        units = build_load_study(project, CLINICIANS)
    result = run_load(address, units, CLINICIANS, SECONDS, tmp_path)
    assert result.errors == []
    workers = {save["worker"] for save in result.saves}
    assert len(workers) == CLINICIANS and result.refreshes >= 1
    assert len(result.saves) >= CLINICIANS * 7  # each got round every kind at least once
    with ServerProject.open(address) as project:
        assert check_load(project, result) == []


def test_the_check_finds_a_lost_and_a_doubled_save(postgres_server, tmp_path):
    """The check itself can fail: an acknowledged save that is not there, one logged twice,
    and a chain broken by that second entry."""
    address = postgres_server.url(postgres_server.new_database())
    with ServerProject.create(address) as project:
        units = build_load_study(project, 1)
    result = run_load(address, units, 1, 1.0, tmp_path, dashboard=False)
    assert result.errors == [] and result.saves
    result.saves.append({"worker": "c00", "unit": units["rank"], "token": "never-saved", "ms": 1})
    with ServerProject.open(address) as project:
        with project.write() as s:  # one save logged again, as a buggy writer might
            # (the owner, past the audit log's guard and its one-follower index, which
            # refuse such an entry)
            s.execute(text("ALTER TABLE audit_log DISABLE TRIGGER guard_audit_chain"))
            s.execute(text("DROP INDEX audit_log_one_follower"))
            s.execute(
                text(
                    "INSERT INTO audit_log (at, actor_id, action, answer_id, unit_id, old_json,"
                    " new_json, prev_hash, hash) SELECT at, actor_id, action, answer_id, unit_id,"
                    " old_json, new_json, prev_hash, md5(hash) || md5(prev_hash) FROM audit_log"
                    " WHERE answer_id IS NOT NULL ORDER BY id DESC LIMIT 1"
                )
            )
        problems = check_load(project, result)
    assert any("not in the log" in p and "never-saved" in p for p in problems)
    assert any("more than once" in p for p in problems)
    assert any("do not hold their last" in p for p in problems)
    assert any("audit chain does not verify" in p for p in problems)
