"""Live without polling (store/backends/postgres_listen.py): a server study tells listeners of
each saved change, by kind, at commit; a file tells no one."""

from __future__ import annotations

import queue

import pytest

from portalreview.store.backends import ServerProject
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


def _heard(heard: queue.Queue, seconds: float = 10.0) -> str:
    return heard.get(timeout=seconds)


@pytest.mark.both_backends
def test_saves_by_another_connection_are_heard_by_kind(project, backend, postgres_server):
    study = build_small_study(project)
    heard: queue.Queue = queue.Queue()
    listener = project.listen(heard.put)
    if backend == "file":
        assert listener is None
        return
    try:
        assert listener.listening.wait(10)
        where = project.url.render_as_string(hide_password=False)
        with ServerProject.open(where) as elsewhere:  # another clinician's app
            service = StudyService(elsewhere).as_viewer("ava")
            service.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
            assert _heard(heard) == "urgency"
            service.save_answer(study.units["empathy"], {"equal": True})
            assert _heard(heard) == "empathy"
            with pytest.raises(queue.Empty):  # nothing else was saved
                heard.get(timeout=1.0)
            with elsewhere.write():  # a transaction that saves nothing says nothing
                pass
            with pytest.raises(queue.Empty):
                heard.get(timeout=1.0)
    finally:
        listener.stop()


def test_a_listener_comes_back_after_the_server_did(postgres_server):
    project = ServerProject.create(postgres_server.url(postgres_server.new_database()))
    study = build_small_study(project)
    heard: queue.Queue = queue.Queue()
    listener = project.listen(heard.put)
    try:
        assert listener.listening.wait(10)
        postgres_server.stop()
        postgres_server.restart()
        assert _heard(heard, 20) == "study"  # it cannot know what it missed
        assert listener.listening.wait(10)
        service = StudyService(project).as_viewer("ben")
        service.save_answer(study.units["rank"], {"entries": []})
        assert _heard(heard) == "rank"
    finally:
        listener.stop()
        project.close()


def test_a_listener_signs_in_with_a_password_given_without_a_user_name(postgres_server):
    """An address without a user name (libpq then takes the computer's), the password typed in
    its own box: the study opened, but the listener's address, written back as text, lost the
    password, so it never connected and the dashboard never followed anyone's saves (found by
    an explorer)."""
    import getpass

    from portalreview.store.backends.postgres import parse_url
    from portalreview.store.backends.postgres_listen import Listener

    server, me = postgres_server, getpass.getuser()
    database = server.new_database()
    server.admin_sql(f'CREATE ROLE "{me}" LOGIN PASSWORD \'pw-47\'')
    try:
        server.admin_sql(f'GRANT CONNECT ON DATABASE "{database}" TO "{me}"')
        address = parse_url(f"postgresql://127.0.0.1:{server.port}/{database}")
        assert address.username is None
        listener = Listener(address.set(password="pw-47"), lambda _kind: None)
        try:
            assert listener.listening.wait(10)
        finally:
            listener.stop()
    finally:
        server.admin_sql(f'DROP OWNED BY "{me}"', f'DROP ROLE "{me}"')
