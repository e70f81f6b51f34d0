"""The report cache (reports/report_cache.py): results kept in the project are taken only where
the live report would have kept them (analysis.DEPENDS_ON), and a report made with them equals
one computed from scratch, bit for bit."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

import portalreview
from portalreview.analysis import DEPENDS_ON, KINDS, OWN_DEPENDS_ON
from portalreview.reports import json_report, report_cache
from portalreview.reports.json_report import build_report
from portalreview.reports.live_report import LiveReport, stored_report
from portalreview.source_digest import STAMP_NAME, digest_of_sources
from portalreview.store.backends import open_project
from portalreview.store.frames import read_frames
from portalreview.store.service import StudyService
from tests.reports.test_live_report import SETTINGS, _flag_one_answer
from tests.store.test_store_live_frames import NOT_ANSWERS, _write_of

pytestmark = pytest.mark.both_backends


@pytest.fixture
def demo(fresh_demo):
    return fresh_demo


def _same(report: dict, project) -> bool:
    """Whether ``report`` is, byte for byte as JSON, the one computed from scratch now."""
    fresh = build_report(project, **SETTINGS)
    return json.dumps(report, allow_nan=False) == json.dumps(fresh, allow_nan=False)


def _kept_rows(project) -> int:
    with project.read() as s:
        return s.execute(text("SELECT count(*) FROM report_cache")).scalar_one()


def test_a_restart_takes_every_analysis_from_the_project(demo):
    first = LiveReport().refresh(demo, **SETTINGS)
    assert first.recomputed == KINDS and first.from_cache == ()
    assert _kept_rows(demo) == len(KINDS) + 1  # and the study's counts

    again = LiveReport().refresh(demo, **SETTINGS)
    assert again.recomputed == ()
    assert again.from_cache == KINDS
    assert _same(again.report, demo)


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_answer_leaves_only_the_analyses_it_does_not_feed(demo, kind):
    LiveReport().refresh(demo, **SETTINGS)
    _flag_one_answer(demo, kind)
    result = LiveReport().refresh(demo, **SETTINGS)
    fed = tuple(k for k in KINDS if kind in DEPENDS_ON[k])
    assert result.recomputed == fed
    # an analysis fed in a piece only (respond's editing load by a match answer) is taken,
    # and that piece computed again
    pieces_only = tuple(k for k in fed if k in OWN_DEPENDS_ON and kind not in OWN_DEPENDS_ON[k])
    assert result.from_cache == tuple(k for k in KINDS if k not in fed or k in pieces_only)
    assert _same(result.report, demo)


def test_time_on_task_alone_makes_its_kind_stale(demo):
    """A save that changes nothing but the time on task writes no audit entry: the answers'
    summed time per kind still shows it."""
    LiveReport().refresh(demo, **SETTINGS)
    service = StudyService(demo)
    answers = read_frames(demo).answers
    row = answers[(answers.kind == "eppc") & ~answers.is_gold.astype(bool)].iloc[0]
    annotator = next(a for a in service.annotators() if a.name == row.annotator)
    view = service.get_answer(int(row.unit_id), annotator.id)
    with demo.read() as s:
        entries = s.execute(text("SELECT count(*) FROM audit_log")).scalar_one()
    service.save_answer(
        view.unit_id,
        view.payload,
        status="submitted",
        active_seconds=float(row.active_seconds) + 7.5,
        annotator_id=annotator.id,
    )
    with demo.read() as s:
        assert s.execute(text("SELECT count(*) FROM audit_log")).scalar_one() == entries
    result = LiveReport().refresh(demo, **SETTINGS)
    # every kind with an answer among those 256 ids (live_frames.BLOCK_BITS) is computed again
    with demo.read() as s:
        block = int(row.answer_id) >> 8
        near = set(
            s.execute(
                text("SELECT DISTINCT kind FROM answers WHERE id >= :low AND id < :high"),
                {"low": block << 8, "high": (block + 1) << 8},
            ).scalars()
        )
        fed = {k for k in KINDS if DEPENDS_ON[k] & near}
    assert "eppc" in fed and set(result.recomputed) == fed
    assert _same(result.report, demo)


def test_a_new_case_or_other_settings_take_nothing(demo):
    LiveReport().refresh(demo, **SETTINGS)
    other = LiveReport().refresh(demo, seed=SETTINGS["seed"] + 1, n_resamples=50)
    assert other.from_cache == () and other.recomputed == KINDS
    service = StudyService(demo)
    service.add_case("cache-test-case", "A new message arrived.")
    result = LiveReport().refresh(demo, **SETTINGS)
    assert result.from_cache == ()
    assert _same(result.report, demo)


def test_the_stored_report_is_shown_with_what_is_out_of_date(demo):
    assert stored_report(demo, **SETTINGS) is None  # nothing computed yet
    computed = LiveReport().refresh(demo, **SETTINGS)
    stored = stored_report(demo, **SETTINGS)
    assert stored is not None and stored.stale == ()
    assert stored.report == computed.report
    _flag_one_answer(demo, "match")
    stored = stored_report(demo, **SETTINGS)
    assert set(stored.stale) == {"study", "respond", "match"}
    assert stored.report == computed.report  # the figures as they were, marked out of date
    assert stored_report(demo, seed=99, n_resamples=50) is None


def test_build_report_with_the_cache_reads_no_answers_when_all_is_kept(demo, monkeypatch):
    LiveReport().refresh(demo, **SETTINGS)

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the study was read although every part is kept")

    monkeypatch.setattr(json_report, "read_all", no_reading)
    cached = build_report(demo, use_cache=True, **SETTINGS)
    monkeypatch.undo()
    assert _same(cached, demo)
    _flag_one_answer(demo, "rank")
    assert _same(build_report(demo, use_cache=True, **SETTINGS), demo)


def test_a_damaged_entry_is_computed_again(demo):
    LiveReport().refresh(demo, **SETTINGS)
    with demo.write() as s:
        s.execute(text("UPDATE report_cache SET result_json = '{not json' WHERE part = 'rank'"))
    result = LiveReport().refresh(demo, **SETTINGS)
    assert result.recomputed == ("rank",)
    assert _same(result.report, demo)
    assert _same(build_report(demo, use_cache=True, **SETTINGS), demo)


def test_a_rewritten_audit_log_takes_nothing(demo):
    """An audit entry at the stored position with another hash (another copy of the study, a
    file restored from a backup): nothing stored is used."""
    with demo.read() as s:
        now = report_cache.read_snapshot(s)
        moved = report_cache.Snapshot(now.audit_id, "another hash", now.fingerprint, now.blocks)
        assert report_cache.changed_kinds(s, now, now) == frozenset()
        assert report_cache.changed_kinds(s, moved, now) == frozenset(KINDS)
        # a block that held more answers before: answers went missing, every kind
        fewer = [list(b) for b in now.blocks]
        fewer[0][0] += 1
        lost = report_cache.Snapshot(now.audit_id, now.audit_hash, now.fingerprint, fewer)
        assert report_cache.changed_kinds(s, lost, now) == frozenset(KINDS)
        # a block added since (new answers without audit entries): the kinds found in it
        earlier = report_cache.Snapshot(
            now.audit_id, now.audit_hash, now.fingerprint, now.blocks[:-1]
        )
        last = len(now.blocks) - 1
        found = set(
            s.execute(
                text("SELECT DISTINCT kind FROM answers WHERE id >= :low"), {"low": last << 8}
            ).scalars()
        )
        assert found and report_cache.changed_kinds(s, earlier, now) == frozenset(found)


def test_other_code_is_another_key(monkeypatch):
    settings = report_cache.CacheSettings(0, 10, "{}", False, "1")
    key = settings.key
    monkeypatch.setattr(report_cache, "code_digest", lambda: "other code")
    assert settings.key != key


def test_another_version_of_a_computing_library_is_another_key(monkeypatch):
    """numpy, pandas, scipy, scikit-learn or krippendorff upgraded under the same program:
    figures kept by the old version are computed again."""
    before = report_cache.code_digest()
    real = report_cache._version
    monkeypatch.setattr(
        report_cache, "_version", lambda name: "9.9" if name == "scipy" else real(name)
    )
    report_cache.code_digest.cache_clear()
    try:
        assert report_cache.code_digest() != before
    finally:
        report_cache.code_digest.cache_clear()


def _frozen_build(folder: Path, other_code: bool = False) -> Path:
    """The package laid out as a frozen build holds it: compiled modules only, a server
    study's upgrade steps kept as .py data files, and the stamp packaging/portalreview.spec
    writes (the digest of the source built from); ``other_code`` changes one analysis."""
    package = folder / "portalreview"
    shutil.copytree(
        Path(portalreview.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    if other_code:
        respond = package / "analysis" / "respond.py"
        respond.write_text(respond.read_text() + "\n# another build's code\n")
    stamp = digest_of_sources(package)
    compileall.compile_dir(package, legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        if "server_migrations" not in source.parts:
            source.unlink()
    (package / STAMP_NAME).write_text(f"{stamp}\n", encoding="ascii")
    return folder


def _digest_in(folder: Path) -> str:
    script = (
        "import portalreview; from portalreview.reports.report_cache import code_digest; "
        "print(portalreview.__file__); print(code_digest())"
    )
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    where, digest = done.stdout.split()
    assert Path(where).is_relative_to(folder)  # the frozen layout's modules, not the source
    return digest


def test_a_frozen_build_is_keyed_by_the_source_it_was_built_from(tmp_path):
    """A frozen build has no .py files but a server study's upgrade steps: the key hashed those
    alone, so two builds of different report code shared their kept figures, and a newer
    build showed an older build's numbers (found by an explorer). The build's stamp of its
    source is used instead: the same key as the source install of the same code, another key
    for other code."""
    same = _digest_in(_frozen_build(tmp_path / "same"))
    other = _digest_in(_frozen_build(tmp_path / "other", other_code=True))
    assert same == report_cache.code_digest()
    assert other != same


AHEAD, PUT_RIGHT = "2027-12-01T00:00:00.000+00:00", "2026-11-27T00:00:00.000+00:00"


def _settings(seed: int) -> report_cache.CacheSettings:
    return report_cache.CacheSettings(seed, 10, "{}", False, 1)


def _kept_seeds(project, snapshot) -> list[int]:
    with project.read() as s:
        kept = {n: report_cache.stored_parts(s, _settings(n), snapshot) for n in range(101)}
    return [n for n, parts in kept.items() if parts]


def _store_seeds(project, snapshot, seeds) -> None:
    for seed in seeds:
        assert report_cache.store(project, _settings(seed), snapshot, {"study": {"n": seed}})


def test_settings_written_after_the_clock_was_put_right_are_kept(demo, monkeypatch):
    """The clock a year ahead for a while, then put right: the settings written since were
    the oldest by their time, and dropped as soon as written (computed again every time)."""
    with demo.write() as s:
        s.execute(text("DELETE FROM report_cache"))
        snapshot = report_cache.read_snapshot(s)
    monkeypatch.setattr(report_cache, "utc_now", lambda: AHEAD)
    _store_seeds(demo, snapshot, range(report_cache.MAX_SETTINGS))
    monkeypatch.setattr(report_cache, "utc_now", lambda: PUT_RIGHT)
    _store_seeds(demo, snapshot, [100])
    with demo.read() as s:
        kept = report_cache.stored_parts(s, _settings(100), snapshot)["study"]
    assert kept.result() == {"n": 100} and kept.computed_at == PUT_RIGHT  # the true time
    # the settings written first make room, whatever the clock said
    assert _kept_seeds(demo, snapshot) == [*range(1, report_cache.MAX_SETTINGS), 100]


def test_settings_kept_by_an_earlier_version_count_as_older(demo, monkeypatch):
    """Rows without a write number (kept before there was one) make room first, the oldest
    by their time first."""
    with demo.write() as s:
        s.execute(text("DELETE FROM report_cache"))
        snapshot = report_cache.read_snapshot(s)
    for seed in range(report_cache.MAX_SETTINGS):  # all ahead of the clock, seed 0 the most
        monkeypatch.setattr(report_cache, "utc_now", lambda seed=seed: f"{2040 - seed}-01-01")
        _store_seeds(demo, snapshot, [seed])
    with demo.write() as s:  # as an earlier version kept them
        s.execute(text("UPDATE report_cache SET state_json = :v"), {"v": snapshot.state_json()})
    assert _kept_seeds(demo, snapshot) == list(range(report_cache.MAX_SETTINGS))
    monkeypatch.setattr(report_cache, "utc_now", lambda: PUT_RIGHT)
    _store_seeds(demo, snapshot, [100, 99])
    assert _kept_seeds(demo, snapshot) == [*range(report_cache.MAX_SETTINGS - 2), 99, 100]


def test_a_project_open_read_only_is_not_written(demo):
    where = demo.path or demo.url.render_as_string(hide_password=False)
    reader = open_project(where, read_only=True)
    try:
        result = LiveReport().refresh(reader, **SETTINGS)
    finally:
        reader.close()
    assert result.recomputed == KINDS
    assert _kept_rows(demo) == 0


@pytest.mark.file_only
def test_a_clinicians_offline_copy_keeps_no_figures(demo, tmp_path):
    from portalreview.store.merge import make_copy
    from portalreview.store.project import Project

    LiveReport().refresh(demo, **SETTINGS)
    assert _kept_rows(demo) > 0
    person = next(a.name for a in StudyService(demo).annotators() if a.role != "pi")
    copy = make_copy(demo, tmp_path / "copy.prproj", annotator=person, only_assigned=True)
    with Project.open(copy.path, read_only=True) as opened:
        assert _kept_rows(opened) == 0


@pytest.mark.parametrize("write", NOT_ANSWERS)
def test_a_restart_after_a_write_other_than_an_answer_takes_nothing(demo, tmp_path, write):
    """A case, response, unit, set, annotator, catalog entry or imported answer added, or rows
    changed in place behind the program's back (the frames' fingerprint sees them): nothing
    kept before is taken, and the report equals one computed from scratch."""
    LiveReport().refresh(demo, **SETTINGS)
    _write_of(write, demo, StudyService(demo), tmp_path)
    result = LiveReport().refresh(demo, **SETTINGS)
    assert result.from_cache == () and result.recomputed == KINDS
    assert _same(result.report, demo)
