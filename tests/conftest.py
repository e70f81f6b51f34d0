"""Shared fixtures: a fresh project, and a small study with one unit of every kind."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The program's log file (portalreview/applog.py) goes to a temporary folder, never the
# real per-user one; tests of the log point it at their own folder.
if "PORTALREVIEW_LOG_DIR" not in os.environ:
    _LOG_DIR = tempfile.mkdtemp(prefix="portalreview-test-log-")
    os.environ["PORTALREVIEW_LOG_DIR"] = _LOG_DIR
    # Each run made a folder of its own and left it behind (169 of them on one machine).
    atexit.register(shutil.rmtree, _LOG_DIR, ignore_errors=True)
# Likewise answers a failed save keeps on this computer (portalreview/ui/unsaved_work.py); the
# GUI tests give each test a folder of its own (tests/ui/conftest.py).
if "PORTALREVIEW_UNSAVED_DIR" not in os.environ:
    _UNSAVED_DIR = tempfile.mkdtemp(prefix="portalreview-test-unsaved-")
    os.environ["PORTALREVIEW_UNSAVED_DIR"] = _UNSAVED_DIR
    atexit.register(shutil.rmtree, _UNSAVED_DIR, ignore_errors=True)

from portalreview.store.project import Project
from portalreview.store.service import StudyService


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``both_backends`` run once on a project file and once on a study in a real
    PostgreSQL server (the ``backend`` parameter; everything else runs on a file)."""
    marked = metafunc.definition.get_closest_marker
    if "backend" in metafunc.fixturenames and marked("both_backends") and not marked("file_only"):
        metafunc.parametrize("backend", ["file", "server"])


def _missing(message: str) -> None:
    """Something the tests need is not on this machine: skip here, but fail in CI (``CI`` set),
    where these tests must run."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def backend() -> str:
    return "file"


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server of our own for the whole run, started from the machine's programs
    in a temporary folder (``portalreview.store.testing_postgres``). Skipped where PostgreSQL
    is not installed, except in CI (``CI`` set), where that fails: the server tests must run."""
    import shutil

    from portalreview.store import testing_postgres

    if testing_postgres.find_programs() is None:
        _missing("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    folder = Path(tempfile.mkdtemp(prefix="portalreview-pg-"))
    folder.chmod(0o755)  # the server may run as another account (never as root)
    try:
        with testing_postgres.running(folder / "cluster") as server:
            yield server
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def new_project(request: pytest.FixtureRequest, backend: str, tmp_path: Path):
    """Makes new, empty studies on this test's back end: ``new_project(name)``."""
    from portalreview.store.backends import ServerProject

    made = []

    def make(name: str = "Test study"):
        if backend == "server":
            server = request.getfixturevalue("postgres_server")
            made.append(ServerProject.create(server.url(server.new_database()), name=name))
        else:
            made.append(Project.create(tmp_path / f"study-{len(made)}.prproj", name=name))
        return made[-1]

    yield make
    for p in made:
        p.close()


@pytest.fixture(scope="session")
def demo_study_file(tmp_path_factory) -> Path:
    """The demo study, built once per run (copy it before writing)."""
    from portalreview.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo-study") / "demo.prproj")


@pytest.fixture(scope="session")
def demo_server_template(postgres_server, demo_study_file) -> str:
    """A server database holding the demo study, copied once per run, to clone from."""
    from portalreview.store.transfer import copy_study

    database = postgres_server.new_database("demo_template")
    with Project.open(demo_study_file, read_only=True) as demo:
        copy_study(demo, postgres_server.url(database)).close()
    return database


@pytest.fixture
def fresh_demo(request: pytest.FixtureRequest, backend: str, demo_study_file, tmp_path):
    """A fresh, writable copy of the demo study on this test's back end, open."""
    import shutil

    from portalreview.store.backends import ServerProject

    if backend == "server":
        server = request.getfixturevalue("postgres_server")
        template = request.getfixturevalue("demo_server_template")
        project = ServerProject.open(server.url(server.clone_database(template)))
    else:
        path = tmp_path / "demo.prproj"
        shutil.copy(demo_study_file, path)
        project = Project.open(path, automatic_backup=False)
    yield project
    project.close()


@pytest.fixture
def project(new_project):
    return new_project()


@dataclass
class SmallStudy:
    """Ids of everything :func:`build_small_study` made."""

    service: StudyService
    ava: int
    ben: int
    pi: int
    case1: int
    case2: int
    draft1: int
    draft2: int
    reference: int
    original: int
    edited: int
    units: dict[str, int]


def build_small_study(project: Project) -> SmallStudy:
    svc = StudyService(project)
    ava = svc.add_annotator("ava", "Ava (RN)")
    ben = svc.add_annotator("ben", "Dr. Ben")
    pi = svc.add_annotator("pat", "Pat (PI)", role="pi")
    case1 = svc.add_case(
        "c1",
        "Hi Dr. Lee,\nI have had crushing chest pain since this morning. Should I come in?",
        {"demographics": ["Age: 61", "Sex: Male"], "problems": ["Coronary artery disease"]},
        age_band="45-64",
        gender="male",
        urgency_level=1,
        tags={"inbox": "demo", "split": "test"},
    )
    case2 = svc.add_case(
        "c2", "Where can I get a copy of my flu shot record? Thanks!", urgency_level=6
    )
    draft1 = svc.add_response(
        case1,
        "d1",
        "Chest pain can have many causes. Please go to the emergency room now. Call 911 if it "
        "gets worse.",
        author_kind="model",
        author="llama-8b",
        source="llama-8b/zero-shot",
        production="zero_shot",
    )
    draft2 = svc.add_response(
        case1,
        "d2",
        "I am sorry you are in pain. Please go to the emergency room right away.",
        author_kind="model",
        author="qwen-7b",
        source="qwen-7b/thematic",
        production="thematic_prompt",
    )
    reference = svc.add_response(
        case1,
        "ref1",
        "I am sorry to hear that. Please go to the emergency room now. Do not drive yourself.",
        author_kind="clinician",
        author="ava",
        production="theme_guided",
    )
    original = svc.add_response(
        case1, "o1", "Go to the ER now.", author_kind="clinician", author="ben"
    )
    edited = svc.add_response(
        case1,
        "e1",
        "I am so sorry you are going through this. Please go to the ER now. You will be fine.",
        author_kind="model",
        author="llama-8b",
        production="edited_empathy",
    )
    units: dict[str, int] = {}
    for kind in ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts"):
        set_id = svc.create_unit_set(f"{kind} set", kind)
        if kind in ("respond",):
            units[kind] = svc.add_unit(set_id, case1)
        elif kind == "rank":
            units[kind] = svc.add_unit(set_id, case1, members=[draft1, draft2])
        elif kind == "match":
            units[kind] = svc.add_unit(set_id, case1, response_id=reference, response_b_id=draft1)
        elif kind == "urgency":
            units[kind] = svc.add_unit(set_id, case1, case_b_id=case2)
        elif kind == "eppc":
            sentence = svc.read_unit(units["respond"]).cases[0].sentences[1]
            units[kind] = svc.add_unit(set_id, case1, sentence_id=sentence.id)
        elif kind == "empathy":
            units[kind] = svc.add_unit(set_id, case1, response_id=original, response_b_id=edited)
        else:
            units[kind] = svc.add_unit(set_id, case1, response_id=original, response_b_id=edited)
        for person in (ava, ben):
            svc.assign(units[kind], person)
    return SmallStudy(
        svc, ava, ben, pi, case1, case2, draft1, draft2, reference, original, edited, units
    )


@pytest.fixture
def study(project: Project) -> SmallStudy:
    return build_small_study(project)


@pytest.fixture
def study_file(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A small study saved and closed (for commands that open it themselves): its path and
    the id of its unit of each kind."""
    path = tmp_path / "closed-study.prproj"
    with Project.create(path, name="Test study") as p:
        units = dict(build_small_study(p).units)
    return path, units


@pytest.fixture
def twin_study(study: SmallStudy, tmp_path: Path):
    """A copy of ``study`` made before anything else was saved in it: the same ids, and the
    same project seed (so units are shown in the same order)."""
    import sqlite3
    from dataclasses import replace

    target = tmp_path / "twin.prproj"
    source = sqlite3.connect(study.service.project.path)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    with Project.open(target) as p:
        yield replace(study, service=StudyService(p))


@pytest.fixture(scope="session")
def real_model_path() -> Path:
    """SmolLM2-135M-Instruct, fetched at install time by ``packaging/fetch_small_model.py``.
    Skipped where it was not fetched, except in CI (``CI`` set), where a missing model fails:
    the ``real_model`` tests must run there."""
    from portalreview.llm.model_file import small_model_path

    path = small_model_path()
    if path is None:
        _missing("the small model is missing: run `python packaging/fetch_small_model.py`")
    return path


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """llama.cpp's own server, built at install time by ``packaging/build_llama_server.py``.
    Skipped where it was not built, except in CI (``CI`` set), where a missing binary fails:
    the shared-model-server tests must run there."""
    from portalreview.llm.testing_server import find_binary

    path = find_binary()
    if path is None:
        _missing("llama-server is missing: run `python packaging/build_llama_server.py`")
    return path


def open_in_excel(monkeypatch: pytest.MonkeyPatch, held: Path) -> None:
    """What Windows does to a rename over a file that Excel (or another program) holds open:
    refuses it (winerror 5), naming the temporary source first and the target second."""
    rename = os.replace

    def refused(source, target, *args, **kwargs) -> None:
        if Path(target) == Path(held):
            raise PermissionError(13, "Access is denied", str(source), 5, str(target))
        rename(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", refused)
