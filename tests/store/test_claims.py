"""Claims (store/claims.py): what a run of the model holds while it works on a unit, on a
project file (between the threads of one program) and on a study server (an advisory lock
that the server lets go of when the holder's connection is lost)."""

from __future__ import annotations

import threading
import time

from sqlalchemy import text

from portalreview.store import claims
from portalreview.store.backends import ServerProject
from portalreview.store.claims import LocalClaims, in_turn


def test_a_claim_is_had_once_and_free_again_when_let_go():
    local = LocalClaims()
    with local.claim("unit:1") as first:
        with local.claim("unit:1") as second, local.claim("unit:2") as other:
            assert (first, second, other) == (True, False, True)
        with local.claim("unit:1") as still:  # the refused claim let go of nothing
            assert not still
    with local.claim("unit:1") as again:
        assert again


def test_a_project_file_claims_between_its_threads(project):
    with project.claim("k") as mine:
        seen: list[bool] = []

        def other() -> None:
            with project.claim("k") as theirs:
                seen.append(theirs)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert mine and seen == [False]


def test_in_turn_passes_over_what_others_hold_and_comes_back_to_it(monkeypatch):
    monkeypatch.setattr(claims, "RECHECK_S", 0.01)
    local = LocalClaims()
    done: list[str] = []
    held = local.claim("b")
    held.__enter__()  # another run is working on b
    for item in in_turn(local, "abc", str):
        done.append(item)
        with local.claim(item) as again:
            assert not again  # the caller holds it while it works on it
        if item == "c":
            held.__exit__(None, None, None)  # the other run is done with b
    assert done == ["a", "c", "b"]


def test_in_turn_waits_for_others_and_stops_when_cancelled(monkeypatch):
    monkeypatch.setattr(claims, "RECHECK_S", 0.01)
    local = LocalClaims()
    cancel = threading.Event()
    with local.claim("a"):
        timer = threading.Timer(0.1, cancel.set)
        timer.start()
        assert list(in_turn(local, "a", str, cancel)) == []  # (returns once cancelled)
        timer.join()


def test_a_claim_let_go_early_by_a_caller_that_stops(monkeypatch):
    local = LocalClaims()
    for item in in_turn(local, "ab", str):
        assert item == "a"
        break
    with local.claim("a") as free:  # the generator was closed: its claim ended
        assert free


def test_a_server_claim_is_between_workstations_and_ends_with_its_connection(postgres_server):
    address = postgres_server.url(postgres_server.new_database())
    with ServerProject.create(address) as one, ServerProject.open(address) as two:
        with (
            one.claim("unit:7") as mine,
            two.claim("unit:7") as theirs,
            two.claim("unit:8") as other,
        ):
            assert (mine, theirs, other) == (True, False, True)
        with two.claim("unit:7") as after:
            assert after
        with one.claim("unit:9") as held:
            assert held
            # the first workstation's claim connection is lost (crash, network): the server
            # ends its claim, and the second may go on
            postgres_server.admin_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                f" WHERE locktype = 'advisory' AND classid = {claims_space()}",
                database=one.url.database,
            )
            _until_its_backend_is_gone(two)  # (the termination is asked for, not waited for)
            with two.claim("unit:9") as taken:
                assert taken
        # letting go on a lost connection is only logged; the next claim works
        with one.claim("unit:9") as later:
            assert later
        with one.read() as s:
            held_here = s.scalar(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database ="
                    " (SELECT oid FROM pg_database WHERE datname = current_database())"
                )
            )
        assert held_here == 0


def _until_its_backend_is_gone(project: ServerProject, seconds: float = 10.0) -> None:
    """Wait until no claim is held in the study: pg_terminate_backend only signals the
    backend, which lets its locks go when it has ended (caught by CI: a claim tried at once
    was refused)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with project.read() as s:
            held = s.scalar(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                    f" AND classid = {claims_space()}"
                )
            )
        if not held:
            return
        time.sleep(0.05)


def claims_space() -> int:
    from portalreview.store.backends.postgres import CLAIM_SPACE

    return CLAIM_SPACE


def test_claim_numbers_fit_an_advisory_lock_key():
    numbers = {claims.key_number(f"suggest:abc:t:{unit}") for unit in range(10_000)}
    assert len(numbers) == 10_000 and all(-(2**31) <= n < 2**31 for n in numbers)
