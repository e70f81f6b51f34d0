"""The command line: `new`, `info`, help, and clear errors with exit status 2."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import portalreview
from portalreview.cli import EXIT_BROKEN_PIPE, main
from portalreview.store.project import Project
from tests.conftest import build_small_study, open_in_excel


def test_new_on_a_full_disk_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from portalreview.store.service import StudyService

    def disk_full(*args, **kwargs) -> None:
        raise OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(StudyService, "add_annotator", disk_full)
    assert main(["new", str(tmp_path / "s.prproj"), "--annotator", "ava"]) == 2
    assert "s.prproj could not be made (database or disk is full" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


KILLED_NEW = r"""
import os, signal, sys
import portalreview.store.project as project
from portalreview.cli import EXIT_BROKEN_PIPE, main
from portalreview.store.service import StudyService

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # a crash, a power cut, the task manager

if sys.argv[1] == "creating":  # the file made, its schema written, no study in it yet
    project.start_study = killed
else:  # the study made, its people not yet added
    StudyService.add_annotator = killed
main(["new", "s.prproj", "--annotator", "ava", "--pi", "pat"])
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("when", ["creating", "adding people"])
def test_a_killed_new_leaves_no_project_and_can_be_run_again(tmp_path, capsys, monkeypatch, when):
    """Killed part-way, `new` used to leave a half-made s.prproj: it would not open ("making
    it was cut short ... Delete it and make it again"), or opened without its people, and
    running `new` again was refused because the file existed."""
    env = dict(os.environ, PYTHONPATH=str(Path(portalreview.__file__).parents[1]))
    done = subprocess.run([sys.executable, "-c", KILLED_NEW, when], cwd=tmp_path, env=env)
    assert done.returncode == -signal.SIGKILL
    assert not (tmp_path / "s.prproj").exists()
    monkeypatch.chdir(tmp_path)
    assert main(["new", "s.prproj", "--annotator", "ava", "--pi", "pat"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.prproj"]  # the killed one's gone
    assert main(["info", "s.prproj"]) == 0
    assert "ava (clinician)" in capsys.readouterr().out


def test_a_half_made_project_left_by_an_older_version_is_named_so(tmp_path, capsys):
    path = tmp_path / "s.prproj"
    Project.create_empty(path).close()  # what an interrupted `new` used to leave
    assert main(["info", str(path)]) == 2
    assert "making it was cut short" in capsys.readouterr().err


def test_new_then_info(tmp_path, capsys):
    path = tmp_path / "pilot"
    assert main(["new", str(path), "--name", "Pilot", "--annotator", "ava", "--pi", "pat"]) == 0
    assert (tmp_path / "pilot.prproj").exists()
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Pilot" in out and "ava (clinician)" in out and "pat (pi)" in out


def test_info_counts_per_kind_and_annotator(tmp_path, capsys):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        study = build_small_study(p)
        ava = study.service.as_viewer("ava")
        ava.save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
        ava.save_answer(study.units["empathy"], {"equal": True})
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cases"] == 2 and info["responses"] == 5
    assert info["kinds"]["urgency"]["annotators"]["ava"] == {
        "assigned": 1,
        "answered": 1,
        "submitted": 1,
    }
    assert info["kinds"]["empathy"]["annotators"]["ava"]["answered"] == 1
    assert info["kinds"]["empathy"]["annotators"]["ava"]["submitted"] == 0
    assert all(info["kinds"][k]["units"] == 1 for k in info["kinds"])
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "urgency" in text and "ava: 1/1" in text and "ava: 0/1 (1)" in text


def test_errors_are_one_clear_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.prproj"
    bad.write_bytes(b"\x00garbage")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("portalreview info: ") and "not an SQLite" in err
    assert "Traceback" not in err
    assert main(["new", str(bad)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_python_dash_m_and_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "new" in capsys.readouterr().out
    done = subprocess.run(
        [sys.executable, "-m", "portalreview", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("portalreview ")


def test_help_says_how_to_open_the_app(capsys):
    """--help listed the verbs only: nothing said that `portalreview` alone, or
    `portalreview PATH [--as NAME]`, opens the app."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "[PATH [--as NAME] | VERB ...]" in out
    assert "opens the desktop app" in " ".join(out.split())


@pytest.mark.parametrize(
    "args", [["--as", "ava", "{p}"], ["--as=ava", "{p}"], ["{p}", "--as", "ava"]]
)
def test_the_name_may_come_before_the_path(tmp_path, monkeypatch, args):
    """`portalreview --as np_chloe d.prproj` failed: "invalid choice: 'np_chloe'"."""
    from portalreview import cli

    path = tmp_path / "s.prproj"
    Project.create(path).close()
    opened = []
    monkeypatch.setattr(cli, "open_app", lambda path=None, who=None: opened.append((path, who)))
    main([a.format(p=path) for a in args])
    assert opened == [(path, "ava")]


@pytest.mark.parametrize("verb", ["info", "verify", "export"])
@pytest.mark.parametrize("given", [".", "", "{folder}"])
def test_a_folder_given_for_a_project_is_said_to_be_one(tmp_path, capsys, monkeypatch, verb, given):
    """`verify .` said "PosixPath('.') has an empty name", `info FOLDER` "There is no file
    FOLDER.prproj": the app says the folder is not a PortalReview project file."""
    folder = tmp_path / "exports"
    folder.mkdir()
    monkeypatch.chdir(folder)
    extra = ["-o", str(tmp_path / "out")] if verb == "export" else []
    assert main([verb, given.format(folder=folder), *extra]) == 2
    err = capsys.readouterr().err
    assert "empty name" not in err and ".prproj" not in err, err
    if verb == "verify":  # a folder it reads as an export's
        assert "holds no audit.jsonl or audit.csv" in err
    else:
        assert f"{folder} is a folder, not a PortalReview project file" in err


def test_codebook_extension_from_a_file(tmp_path, capsys):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    extension = tmp_path / "ext.json"
    extension.write_text(
        json.dumps(
            {
                "version": "site-1",
                "themes": [
                    {
                        "id": "education",
                        "name": "Patient education",
                        "short": "Edu",
                        "definition": "Teaches the patient about the condition.",
                        "question": "What should the patient learn?",
                    }
                ],
            }
        )
    )
    assert main(["codebook", str(path), "--extend", str(extension)]) == 0
    assert "site-1" in capsys.readouterr().out
    assert main(["codebook", str(path)]) == 0
    out = capsys.readouterr().out
    assert "education (Patient education)" in out and "InfoSeek" in out
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "themes": [
                    {
                        "id": "empathy",
                        "name": "Changed",
                        "short": "E",
                        "definition": "d",
                        "question": "q",
                    }
                ]
            }
        )
    )
    assert main(["codebook", str(path), "--extend", str(bad)]) == 2
    assert '"empathy" already exists' in capsys.readouterr().err
    assert main(["codebook", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "site-1"


def test_export_then_import_through_the_cli(tmp_path, capsys):
    source = tmp_path / "s.prproj"
    with Project.create(source) as p:
        study = build_small_study(p)
        study.service.as_viewer("ava").save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
    assert main(["export", str(source), "--format", "jsonl", "-o", str(tmp_path / "out")]) == 0
    assert main(["new", str(tmp_path / "copy")]) == 0
    assert main(["import", str(tmp_path / "copy.prproj"), str(tmp_path / "out")]) == 0
    assert "added 2 cases" in capsys.readouterr().out
    assert main(["info", str(source), "--json"]) == 0
    original = json.loads(capsys.readouterr().out)
    assert main(["info", str(tmp_path / "copy.prproj"), "--json"]) == 0
    copied = json.loads(capsys.readouterr().out)
    assert copied["kinds"] == original["kinds"]
    assert copied["cases"] == original["cases"] and copied["responses"] == original["responses"]


def test_an_export_says_where_it_wrote_and_needs_a_name(tmp_path, capsys, monkeypatch):
    """An Excel export to "out" (an existing folder) wrote out.xlsx and said "to out"; an empty
    -o wrote ten files into the current folder."""
    source = tmp_path / "s.prproj"
    with Project.create(source) as p:
        build_small_study(p)
    (tmp_path / "out").mkdir()
    assert main(["export", str(source), "--format", "xlsx", "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote {tmp_path / 'out.xlsx'}"
    assert main(["export", str(source), "--format", "jsonl", "-o", str(tmp_path / "e")]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote 10 files to {tmp_path / 'e'}"
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["export", str(source), "--format", "jsonl", "-o", ""]) == 2
    assert "-o needs the name" in capsys.readouterr().err and not list(here.iterdir())


def test_conflicts_take_without_resolve_is_refused(tmp_path, capsys):
    source = tmp_path / "s.prproj"
    Project.create(source).close()
    assert main(["conflicts", str(source), "--take", "copy"]) == 2  # was ignored, status 0
    assert "--take goes with --resolve N" in capsys.readouterr().err


def _one_conflict(project, tmp_path: Path) -> None:
    """The small study, whose urgency answer ava changed both in her offline copy and in the
    study before the copy was merged: one open conflict."""
    from portalreview.store.merge import make_copy, merge_copies
    from portalreview.store.service import StudyService

    study = build_small_study(project)
    unit, ava = study.units["urgency"], study.service.as_viewer("ava")
    ava.save_answer(unit, {"more_urgent_case_id": study.case1}, status="submitted")
    copy = make_copy(project, tmp_path / "ava.prproj", annotator="ava").path
    with Project.open(copy) as taken:
        StudyService(taken).as_viewer("ava").save_answer(
            unit, {"more_urgent_case_id": study.case2}, status="submitted"
        )
    ava.save_answer(unit, {"more_urgent_case_id": study.case1}, comment="checked")
    assert merge_copies(project, [copy])[0].conflicts


def test_conflicts_name_cases_by_their_ids_not_database_numbers(tmp_path, capsys):
    """``conflicts`` printed each version's stored JSON ("more_urgent_case_id": 21 against 26):
    the PI could not tell which case was which. Now the decisions are read as the adjudication
    window shows them, the unit numbered from 1 as there."""
    source = tmp_path / "s.prproj"
    with Project.create(source) as project:
        _one_conflict(project, tmp_path)
    capsys.readouterr()
    assert main(["conflicts", str(source)]) == 0
    out = capsys.readouterr().out
    assert "urgency unit 1 of 'urgency set'" in out
    assert "master: ≠ More urgent: case c1" in out and "copy:   ≠ More urgent: case c2" in out
    assert "more_urgent_case_id" not in out


def _three_conflicts(source: Path, tmp_path: Path) -> dict[tuple[str, int], dict]:
    """A study in ``source`` whose merged whole-study copy left three conflicts: ava's and
    ben's urgency answers and ava's empathy answer, each changed in the copy (its decision)
    and in the master (its comment). (annotator, unit) -> the copy's payload."""
    from portalreview.store.merge import make_copy, merge_copies
    from portalreview.store.service import StudyService

    with Project.create(source) as project:
        study = build_small_study(project)
        urgency, empathy = study.units["urgency"], study.units["empathy"]
        first = {
            ("ava", urgency): {"more_urgent_case_id": study.case1},
            ("ben", urgency): {"more_urgent_case_id": study.case1},
            ("ava", empathy): {"equal": True},
        }
        in_copy = {
            ("ava", urgency): {"more_urgent_case_id": study.case2},
            ("ben", urgency): {"more_urgent_case_id": study.case2},
            ("ava", empathy): {"more_empathetic_response_id": study.edited},
        }
        for (name, unit), payload in first.items():
            study.service.as_viewer(name).save_answer(unit, payload, status="submitted")
        copy = make_copy(project, tmp_path / "whole.prproj").path
        with Project.open(copy) as taken:
            for (name, unit), payload in in_copy.items():
                StudyService(taken).as_viewer(name).save_answer(unit, payload, status="submitted")
        for (name, unit), payload in first.items():
            study.service.as_viewer(name).save_answer(unit, payload, comment="checked")
        (merged,) = merge_copies(project, [copy])
        assert [c.number for c in merged.conflicts] == [1, 2, 3]  # as the log will number them
        assert "  conflict #3: " in merged.summary()
    return in_copy


def test_a_conflict_keeps_its_number_while_others_are_resolved(tmp_path, capsys):
    """``--resolve N`` took N as a place in the list as it was then, and the list renumbered
    after each resolve: a PI who listed three conflicts and resolved #1 then #2 as listed
    replaced the third one's answer (another unit) and left the second, and "Resolved conflict
    2" named no unit. Each conflict now keeps its number, and the confirmation names it."""
    from portalreview.store.service import StudyService

    source = tmp_path / "s.prproj"
    in_copy = _three_conflicts(source, tmp_path)
    capsys.readouterr()
    assert main(["conflicts", str(source)]) == 0
    headings = [line for line in capsys.readouterr().out.splitlines() if line[:1] not in " "]
    listed = []  # (the number shown, (annotator, unit)), in the order listed
    for heading in headings:
        number = heading.split()[0].strip("#.")
        (answer,) = [a for a in in_copy if f"(unit {a[1]}): {a[0]}'s answer" in heading]
        listed.append((number, answer))
    assert len(listed) == 3

    said = []
    for number, _answer in listed[:2]:  # the PI takes the copy's for the first two
        assert main(["conflicts", str(source), "--resolve", number, "--take", "copy"]) == 0
        said.append(capsys.readouterr().out.strip())
    with Project.open(source, read_only=True) as project:
        service = StudyService(project)
        ids = {a.name: a.id for a in service.annotators()}
        payloads = {a: service.get_answer(a[1], ids[a[0]]).payload for a in in_copy}
    now = {a: {key: payloads[a].get(key) for key in in_copy[a]} for a in in_copy}  # decisions
    for _number, answer in listed[:2]:
        assert now[answer] == in_copy[answer]
    (_number, untouched) = listed[2]
    assert now[untouched] != in_copy[untouched]  # the master's answer, as the PI left it
    for confirmation, (number, (name, unit)) in zip(said, listed, strict=False):
        assert confirmation.startswith(f"Resolved conflict #{number}, {name}'s answer to ")
        assert confirmation.endswith(f"(unit {unit}): kept whole.prproj's answer")

    assert main(["conflicts", str(source)]) == 0
    assert capsys.readouterr().out.startswith(f"#{listed[2][0]} ")
    assert main(["conflicts", str(source), "--resolve", listed[0][0], "--take", "copy"]) == 2
    assert f"there is no open conflict #{listed[0][0]} (open: #{listed[2][0]})" in (
        capsys.readouterr().err
    )


def test_a_clinicians_login_may_not_list_or_resolve_conflicts(postgres_server, tmp_path, capsys):
    """Row-level security shows a clinician none of the merges' records: her login was told
    "No open conflicts." (status 0) while one about her own answer was open, and --resolve 1
    "there is no open conflict". Both are refused, as verify is; the PI's login lists it."""
    from portalreview.store.backends import ServerProject
    from portalreview.store.errors import StoreError
    from portalreview.store.merge import open_conflicts

    server = postgres_server
    database = server.new_database()
    with ServerProject.create(server.url(database)) as project:
        _one_conflict(project, tmp_path)
        clinician = server.url(database, *server.member_login(project, "ava"))
        pi = server.url(database, *server.member_login(project, "pat"))
    refused = "only the PI or the study's owner can list or resolve the conflicts"
    with ServerProject.open(clinician) as as_ava, pytest.raises(StoreError, match=refused):
        open_conflicts(as_ava)
    capsys.readouterr()
    for extra in ([], ["--json"], ["--resolve", "1", "--take", "copy"]):
        assert main(["conflicts", clinician, *extra]) == 2
        captured = capsys.readouterr()
        assert refused in captured.err and not captured.out
    assert main(["conflicts", pi]) == 0
    assert capsys.readouterr().out.startswith("#1 urgency unit 1 of 'urgency set'")


def test_import_error_names_file_and_row_and_changes_nothing(tmp_path, capsys):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    bad = tmp_path / "cases.csv"
    bad.write_text("case_id,message,urgency_level\nc1,Hello,3\nc2,Chest pain,7\n")
    assert main(["import", str(path), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cases.csv" in err and "row 3" in err and "urgency_level" in err
    assert main(["info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cases"] == 0


def test_report_json_on_a_small_study(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        study = build_small_study(p)
        for name in ("ava", "ben"):
            study.service.as_viewer(name).save_answer(
                study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
            )
    out = tmp_path / "report.json"
    assert main(["report", str(path), "-o", str(out), "--resamples", "50"]) == 0
    report = json.loads(out.read_text())
    accuracy = report["urgency"]["accuracy"]["total"]
    # Both annotators chose case 1 (level 1) over case 2 (level 6): 2 of 2 correct.
    assert accuracy["n"] == 2 and accuracy["correct"] == 2


@pytest.mark.parametrize(
    "command",
    [
        ["report", "--format", "json"],
        ["report", "--format", "xlsx"],
        ["export", "--format", "xlsx"],
    ],
)
@pytest.mark.parametrize("target", ["s.prproj", "alias.prproj", "hard.prproj", "s.prproj-wal"])
def test_a_report_or_export_over_the_project_file_is_refused(tmp_path, capsys, command, target):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    (tmp_path / "alias.prproj").symlink_to(path)
    os.link(path, tmp_path / "hard.prproj")
    before = path.read_bytes()
    verb, *options = command
    assert main([verb, str(path), *options, "-o", str(tmp_path / target)]) == 2
    assert "would write over the project file s.prproj" in capsys.readouterr().err
    assert path.read_bytes() == before
    wal = tmp_path / "s.prproj-wal"  # SQLite's own, if any: no report or workbook in it
    assert not wal.exists() or not wal.read_bytes().startswith((b"{", b"PK"))


@pytest.mark.parametrize(
    "command, name",
    [
        (["report", "--format", "xlsx", "--resamples", "5"], "r.xlsx"),
        (["report", "--format", "json", "--resamples", "5"], "r.json"),
        (["export", "--format", "xlsx"], "r.xlsx"),
    ],
)
def test_a_report_or_workbook_into_a_missing_folder_makes_it(tmp_path, capsys, command, name):
    """As a CSV report, a jsonl or csv export, copy -o and new make theirs: the JSON report
    was computed whole, then refused with the system's words; the workbooks said "no such
    folder"."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    out = tmp_path / "weekly" / "new" / name
    verb, *options = command
    assert main([verb, str(path), *options, "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.is_file() and out.stat().st_size > 0


def test_a_json_report_whose_folder_cannot_be_made_is_refused_before_the_work(
    tmp_path, capsys, monkeypatch
):
    from portalreview.reports import json_report

    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    (tmp_path / "weekly").write_text("a file where the folder would be")
    monkeypatch.setattr(json_report, "build_report", lambda *_a, **_k: pytest.fail("computed"))
    out = tmp_path / "weekly" / "r.json"
    assert main(["report", str(path), "--format", "json", "-o", str(out)]) == 2
    assert str(tmp_path / "weekly") in capsys.readouterr().err


@pytest.mark.parametrize(
    "command, name",
    [
        (["report", "--format", "xlsx", "--resamples", "5"], "r.xlsx"),
        (["report", "--format", "json", "--resamples", "5"], "r.json"),
        (["report", "--format", "csv", "--resamples", "5"], "r/report.json"),
        (["export", "--format", "xlsx"], "r.xlsx"),
        (["export", "--format", "csv"], "r/cases.csv"),
    ],
)
def test_a_report_or_export_open_in_excel_is_named_with_what_to_do(
    tmp_path, capsys, monkeypatch, command, name
):
    """On Windows a file open in Excel cannot be written over: the message names it (not the
    temporary file the system names) and says to close it."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    out = tmp_path / name.split("/")[0]
    verb, *options = command
    args = [verb, str(path), *options, "-o", str(out)]
    assert main(args) == 0
    before = (tmp_path / name).read_bytes()
    open_in_excel(monkeypatch, tmp_path / name)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / name} cannot be written over (access is denied): it may be open in " in err
    assert "Close it there and try again." in err and ".tmp" not in err
    assert (tmp_path / name).read_bytes() == before
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_refused_rename_names_its_target_not_the_temporary_file():
    from portalreview.cli import _worded

    refused = PermissionError(13, "Access is denied", "c.prproj.part", 5, "c.prproj")
    assert _worded(refused) == "c.prproj: access is denied"
    missing = FileNotFoundError(2, "No such file or directory", "a.csv", None, "b.csv")
    assert _worded(missing) == "a.csv: no such file or directory"


_READ_ONLY_FOLDER = """
import io, sys
from openpyxl.worksheet import _writer
from portalreview.cli import EXIT_BROKEN_PIPE, main

opener = io.open

def read_only_folder(file, mode="r", *args, **kwargs):
    if "w" in mode and str(file).endswith(".xlsx.tmp"):
        raise PermissionError(13, "Permission denied", str(file))
    return opener(file, mode, *args, **kwargs)

io.open = read_only_folder
status = main(sys.argv[1:])
print(status, len(_writer.ALL_TEMP_FILES))  # the sheets' files still in the temporary folder
"""


@pytest.mark.parametrize("verb, options", [("report", ["--resamples", "5"]), ("export", [])])
def test_an_xlsx_file_that_cannot_be_created_leaves_no_stray_tracebacks(tmp_path, verb, options):
    """A workbook that cannot be saved (a read-only folder) is closed then, not left to the
    garbage collector: no "Exception ignored ... I/O operation on closed file" tracebacks
    after the message, no sheet files left in the temporary folder."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    out = tmp_path / "r.xlsx"
    args = [verb, str(path), "--format", "xlsx", *options, "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", _READ_ONLY_FOLDER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stderr == (
        f"portalreview {verb}: {out} could not be written: you may not write to it or its "
        "folder (Permission denied). Write it to another folder, or ask for the right to "
        "write there.\n"
    )
    assert done.stdout.split()[-2:] == ["2", "0"]


def _disk_full_for_temporary_files(monkeypatch) -> None:
    """Writing an output's temporary file (or a file staged with others to replace a folder's
    together) fails as a full disk does: an error naming no file."""
    import errno

    from portalreview.store.output_files import STAGING_PREFIX

    real = {name: getattr(Path, name) for name in ("write_text", "write_bytes")}

    def full(name):
        def write(self, *args, **kwargs):
            if self.name.endswith(".tmp") or self.parent.name.startswith(STAGING_PREFIX):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real[name](self, *args, **kwargs)

        return write

    for name in real:
        monkeypatch.setattr(Path, name, full(name))


@pytest.mark.parametrize(
    "verb, options, written",
    [
        ("report", ["--format", "json", "--resamples", "5"], "out"),
        ("report", ["--format", "csv", "--resamples", "5"], "out/"),
        ("export", ["--format", "jsonl"], "out/"),
    ],
)
def test_an_output_on_a_full_disk_is_named_and_the_disk_said_full(
    tmp_path, capsys, monkeypatch, verb, options, written
):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    _disk_full_for_temporary_files(monkeypatch)
    out = tmp_path / "out"
    assert main([verb, str(path), *options, "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert err.startswith(f"portalreview {verb}: The disk holding {tmp_path / written}"), err
    assert "is full (No space left on device)" in err and "[Errno" not in err
    assert err.rstrip().endswith("Make room on that disk, then try again.")


def test_an_offline_copy_on_a_full_disk_is_named_and_the_disk_said_full(
    tmp_path, capsys, monkeypatch
):
    import errno
    import shutil

    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfileobj", full)
    out = tmp_path / "for-ava.prproj"
    assert main(["copy", str(path), "--whole-study", "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert err == (
        f"portalreview copy: The disk holding {out} is full (No space left on device): "
        "for-ava.prproj was not written. Make room on that disk, then try again.\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.backups", "s.prproj"]  # no part


def test_an_offline_copy_with_the_temporary_folder_full_names_that_folder(
    tmp_path, capsys, monkeypatch
):
    """The copy is put together in the system's temporary folder first: that disk full is
    said as such, naming the folder, in words (no traceback), with the master unchanged.
    TMPDIR names a full folder, where SQLite keeps its scratch files; Python fell back to
    another one for the copy's work folder: both are named."""
    import tempfile

    from portalreview.store import merge

    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    entries = _audit_entries(path)
    full_folder, fallback = tmp_path / "tmp", tmp_path / "fallback"
    full_folder.mkdir()
    fallback.mkdir()
    monkeypatch.delenv("SQLITE_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(full_folder))
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))

    def full(*args, **kwargs):
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorname = "SQLITE_FULL"
        raise error

    monkeypatch.setattr(merge, "_restrict", full)
    out = tmp_path / "for-ava.prproj"
    assert main(["copy", str(path), "--for", "ava", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("portalreview copy: the copy could not be made in the system's "), err
    assert f"temporary folder {full_folder} or {fallback}, " in err, err
    assert "its disk is full" in err and "Nothing was changed" in err, err
    assert not out.exists() and list(fallback.iterdir()) == []
    assert _audit_entries(path) == entries


def _audit_entries(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    finally:
        conn.close()


def test_report_takes_the_figures_the_dashboard_kept(tmp_path, monkeypatch):
    """After the dashboard computed the report (LiveReport keeps it in the project), the
    command writes the same file without reading the study; --fresh computes it all."""
    from portalreview.reports import json_report
    from portalreview.reports.live_report import LiveReport
    from portalreview.store import frames

    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        study = build_small_study(p)
        study.service.as_viewer("ava").save_answer(
            study.units["urgency"], {"more_urgent_case_id": study.case1}, status="submitted"
        )
        LiveReport().refresh(p, seed=0, n_resamples=50)
    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.json"
    assert main(["report", str(path), "-o", str(fresh), "--resamples", "50", "--fresh"]) == 0

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the study was read")

    monkeypatch.setattr(json_report, "read_all", no_reading)
    assert main(["report", str(path), "-o", str(kept), "--resamples", "50"]) == 0
    assert kept.read_bytes() == fresh.read_bytes()
    monkeypatch.setattr(frames, "read_all", no_reading)
    with pytest.raises(AssertionError, match="the study was read"):
        main(["report", str(path), "-o", str(kept), "--resamples", "50", "--fresh"])


def _redcap_files(folder):
    (folder / "cases.csv").write_text("case_id,message\nc1,hello there.\n")
    (folder / "dict.csv").write_text(
        "Variable / Field Name,Form Name,Field Type,Field Label\n"
        "record_id,f,text,Record ID\ncase_id,f,text,Case ID\nempathy,f,notes,Empathy\n"
    )
    (folder / "rec.csv").write_text(
        "record_id,redcap_survey_identifier,case_id,empathy,f_complete\n1,ava,c1,So sorry,2\n"
    )
    return [str(folder / n) for n in ("cases.csv", "rec.csv", "dict.csv")]


def test_show_mapping_only_shows_even_without_the_dictionary_option(tmp_path, capsys):
    from tests.io.io_support import fingerprint

    path = tmp_path / "s.prproj"
    Project.create(path).close()
    files = _redcap_files(tmp_path)
    with Project.open(path, read_only=True) as p:
        before = fingerprint(p)
    assert main(["import", str(path), *files, "--show-mapping"]) == 0
    out = capsys.readouterr().out
    assert "REDCap form 'f'" in out and "case_id" in out and "Imported." not in out
    assert main(["import", str(path), files[0], files[1], "--show-mapping"]) == 2
    assert "none of the files is a REDCap data dictionary" in capsys.readouterr().err
    with Project.open(path, read_only=True) as p:
        assert fingerprint(p) == before


def test_a_redcap_mapping_can_be_given_as_json_on_the_command_line(tmp_path, capsys):
    """The option said JSON and took a file name only: '{...}' "does not exist"."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    files = _redcap_files(tmp_path)
    assert main(["import", str(path), *files, "--show-mapping"]) == 0
    assert "To confirm it, import with --redcap-mapping FILE.json" in capsys.readouterr().out
    confirmed = '{"case_id": "case_id", "empathy": "other"}'
    assert main(["import", str(path), *files, "--redcap-mapping", confirmed]) == 0
    with Project.open(path, read_only=True) as p:
        from portalreview.store.exports.snapshot import read_snapshot

        [answer] = read_snapshot(p).answers
    assert answer["answer"]["parts"] == {"other": "So sorry"}  # as confirmed, not proposed
    assert main(["import", str(path), *files, "--redcap-mapping", "{not json"]) == 2
    assert "the REDCap mapping given is not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["file", "inline"])
def test_a_redcap_mapping_nested_too_deeply_is_refused(tmp_path, capsys, given):
    """It ended in a RecursionError traceback."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    files = _redcap_files(tmp_path)
    mapping = '{"case_id": ' + "[" * 100_000 + "]" * 100_000 + "}"
    if given == "file":
        (tmp_path / "deep.json").write_text(mapping, encoding="utf-8")
        mapping = str(tmp_path / "deep.json")
    assert main(["import", str(path), *files, "--redcap-mapping", mapping]) == 2
    err = capsys.readouterr().err
    named = "deep.json" if given == "file" else "given"
    assert f"{named} is not valid JSON: nested too deeply" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args, named",
    [
        (["import", "{p}", "cases.csv", "--redcap-mapping", "missing.json"], "missing.json"),
        (["import", "{p}", "cases.csv", "--redcap-mapping", "copies"], "copies"),
        (["import", "{p}", "cases.csv", "--redcap-mapping", "bad.json"], "bad.json"),
        (["import", "{p}", "dict.csv", "--redcap-dictionary", "dict.csv", "--show-mapping"],
         "dict.csv"),
        (["report", "{p}", "--format", "json", "-o", "copies"], "copies"),
        (["merge", "{p}", "copies"], "copies"),
    ],
)  # fmt: skip
def test_bad_paths_get_a_clear_message_naming_them(tmp_path, capsys, monkeypatch, args, named):
    from tests.io.io_support import fingerprint

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    _redcap_files(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "copies").mkdir()
    with Project.open(path, read_only=True) as p:
        before = fingerprint(p)
    assert main([a.format(p=path) for a in args]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and "Errno" not in err
    with Project.open(path, read_only=True) as p:
        assert fingerprint(p) == before


def test_names_outside_the_ansi_code_page_are_written_to_a_redirected_output(tmp_path):
    """Windows writes a redirected output in the ANSI code page (cp1252: no "Ł", no "Ş"),
    as PYTHONIOENCODING=cp1252 does here: `info > out.txt` printed only a codec error."""
    path = tmp_path / "study.prproj"
    assert main(["new", str(path), "--annotator", "Łukasz", "--annotator", "Ayşe Şahin"]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "portalreview", "info", str(path)],
        env={**os.environ, "PYTHONIOENCODING": "cp1252", "PYTHONUTF8": "0"},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    out = done.stdout.decode("utf-8")
    assert "Łukasz" in out and "Ayşe Şahin" in out


def test_new_failing_while_creating_names_the_file_asked_for(tmp_path, capsys, monkeypatch):
    """The file is made under a hidden temporary name; a failure names the one asked for."""
    import portalreview.store.project as project

    def disk_full(*args, **kwargs) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(project, "start_study", disk_full)
    assert main(["new", str(tmp_path / "s.prproj")]) == 2
    err = capsys.readouterr().err
    assert "s.prproj could not be created (database or disk is full" in err, err
    assert ".portalreview-new-" not in err
    assert list(tmp_path.iterdir()) == []


def _full_disk_in_the_transaction(monkeypatch) -> None:
    """Adding a person fails as a full disk does inside the save (service.py words it as
    SaveFailed, naming the project by its file name: here the hidden one it is made under)."""
    from sqlalchemy.exc import OperationalError

    from portalreview.store.service import StudyService

    def full(*args, **kwargs) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorname = "SQLITE_FULL"
        raise OperationalError("INSERT", {}, error)

    monkeypatch.setattr(StudyService, "_audit", full)


def test_new_failing_while_adding_people_names_the_file_asked_for(tmp_path, capsys, monkeypatch):
    """It said "The disk holding .portalreview-new-<pid>-<random>.prproj is full ... Nothing
    was saved ... save again": a file nobody will find, and a save nobody asked for."""
    _full_disk_in_the_transaction(monkeypatch)
    assert main(["new", str(tmp_path / "s.prproj"), "--annotator", "ava"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "portalreview new: s.prproj could not be made (database or disk is full). "
        "Nothing was left behind.\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "code, words",
    [
        (errno.ENOSPC, "is full"),
        (errno.EROFS, "its disk is read-only"),
        (errno.EACCES, "you may not write"),
    ],
)
def test_new_failing_to_give_the_file_its_name_names_the_file_asked_for(
    tmp_path, capsys, monkeypatch, code, words
):
    import portalreview.store.building as building

    def refused(partial, target) -> None:
        raise OSError(code, os.strerror(code), str(partial), None, str(target))

    monkeypatch.setattr(building, "name_without_replacing", refused)
    assert main(["new", str(tmp_path / "s.prproj"), "--annotator", "ava"]) == 2
    err = capsys.readouterr().err
    assert words in err and f"{tmp_path / 's.prproj'}" in err, err
    assert ".portalreview-new-" not in err and "[Errno" not in err
    assert err.rstrip().endswith("Nothing was left behind.")
    assert list(tmp_path.iterdir()) == []


def test_output_nobody_reads_any_more_ends_quietly(tmp_path):
    """`portalreview progress study.prproj | head -1`: the reader closes the pipe early. The
    command used to say "portalreview progress: [Errno 32] Broken pipe" and exit with 2."""
    path = tmp_path / "s.prproj"
    project = Project.create(path)
    build_small_study(project)
    project.close()
    command = [sys.executable, "-m", "portalreview", "progress", str(path)]
    running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    running.stdout.close()  # before it writes a line: its first write finds the pipe broken
    error = running.stderr.read().decode()
    running.stderr.close()
    assert running.wait(timeout=120) == EXIT_BROKEN_PIPE  # (128 + SIGPIPE, as a killed one)
    assert error == ""


def test_a_failed_automatic_backup_is_said_on_the_command_line(tmp_path, capsys, caplog):
    """A writing command changed the project with no backup and said nothing (the app warns)."""
    path = tmp_path / "study.prproj"
    Project.create(path).close()
    (tmp_path / "study.backups").write_text("a file where the backups' folder goes")
    assert main(["setup", str(path), "--add-annotator", "dr_new"]) == 0
    err = capsys.readouterr().err
    assert "Warning: The automatic backup of study.prproj into study.backups/ failed" in err
    assert any("automatic backup" in r.getMessage() for r in caplog.records)


def test_the_report_s_format_follows_its_file_name(tmp_path, capsys):
    """`report study.prproj -o report.xlsx` wrote JSON into report.xlsx, which Excel cannot
    open (found by an explorer): without --format the suffix decides; a --format that the
    suffix contradicts is refused, nothing written."""
    path = tmp_path / "s.prproj"
    with Project.create(path, name="S") as project:
        build_small_study(project)
    assert main(["report", str(path), "-o", str(tmp_path / "r.xlsx"), "--resamples", "0"]) == 0
    assert zipfile.is_zipfile(tmp_path / "r.xlsx")
    assert main(["report", str(path), "-o", str(tmp_path / "r.json"), "--resamples", "0"]) == 0
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    wrong = ["report", str(path), "--format", "json", "-o", str(tmp_path / "w.xlsx")]
    assert main(wrong) == 2
    assert "whose name says xlsx" in capsys.readouterr().err
    assert not (tmp_path / "w.xlsx").exists()


def test_a_csv_report_s_folder_is_written_as_csv_without_format(tmp_path, capsys):
    """`report -o report-csv/` (pi-guide's folder spelling) or `-o report.csv` without
    --format wrote JSON under that name (found by an explorer)."""
    path = tmp_path / "s.prproj"
    with Project.create(path, name="S") as project:
        build_small_study(project)
    for name in ("report-csv", "report.csv"):
        output = str(tmp_path / name) + (os.sep if name == "report-csv" else "")
        assert main(["report", str(path), "-o", output, "--resamples", "0"]) == 0
        assert (tmp_path / name / "report.json").is_file()
        assert (tmp_path / name / "summary_kinds.csv").is_file()


@pytest.mark.parametrize(
    "given, output, expected",
    [
        (None, "r.xlsx", "xlsx"),
        (None, "R.JSON", "json"),
        (None, "report", "json"),
        (None, "r.csv", "csv"),
        (None, f"out{os.sep}", "csv"),
        (None, "a-folder", "csv"),
        ("csv", "report-csv", "csv"),
        ("json", "r.txt", "json"),  # the format given: the name is the person's choice
    ],
)
def test_the_report_s_format_from_its_output(tmp_path, monkeypatch, given, output, expected):
    from portalreview.cli import _report_format

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-folder").mkdir()
    assert _report_format(given, output) == expected


@pytest.mark.parametrize(
    "given, output, said",
    [
        (None, "r.txt", "which report is r.txt? End its name in .json, .xlsx or .csv"),
        ("json", "r.csv", "whose name says csv: give --format csv"),
        ("csv", "r.xlsx", "whose name says xlsx: give --format xlsx"),
        ("json", f"out{os.sep}", "a folder, the CSV report's: give --format csv"),
        ("xlsx", "a-folder", "a folder, the CSV report's: give --format csv"),
    ],
)
def test_a_report_format_the_output_contradicts_is_refused(
    tmp_path, monkeypatch, given, output, said
):
    from portalreview.cli import CliError, _report_format

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-folder").mkdir()
    with pytest.raises(CliError, match=re.escape(said)):
        _report_format(given, output)
