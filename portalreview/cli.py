"""The ``portalreview`` command: with no verb it opens the desktop app (``portalreview PATH``
opens a project in it); verbs ``new``, ``info``, ``import``, ``export``, ``report``, ``demo``...

Every verb prints a clear message and exits with status 2 when its input is wrong; nothing is
changed then.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from sqlalchemy.exc import DBAPIError

from portalreview import __version__
from portalreview.applog import setup_logging
from portalreview.llm.model_server import looks_like_address
from portalreview.store.backends import (
    AnyProject,
    create_project,
    project_target,
    shown_target,
    target_name,
)
from portalreview.store.errors import FEATURE_NOT_SUPPORTED, INSUFFICIENT_PRIVILEGE
from portalreview.store.project import SUFFIX, Project, ProjectError
from portalreview.store.service import StudyService, person_name

if TYPE_CHECKING:
    from portalreview.store.merge import Conflict
    from portalreview.store.study_setup import SecondAssignment


def open_project(target, read_only: bool = False, **options) -> AnyProject:
    """Open the study at ``target`` (``store.backends.open_project``), saying on stderr when
    the automatic backup made on opening for writing failed: a command changed the project
    with no backup and said nothing, where the app warns."""
    from portalreview.store import backends

    project = backends.open_project(target, read_only=read_only, **options)
    problem = getattr(project, "backup_problem", None)
    if problem:
        print(f"Warning: {problem}", file=sys.stderr)
    return project

EXIT_USAGE = 2
STUDY_HELP = "the project file, or a server study's address (postgresql://user@host/database)"
log = logging.getLogger(__name__)


class CliError(Exception):
    """A problem to report to the person at the terminal (no traceback)."""


def ask_server_passwords_at_terminal() -> None:
    """Where stdin is a terminal, a server study whose password is in neither the address,
    PGPASSWORD nor ~/.pgpass asks for it there (every command, and the self-test)."""
    from portalreview.store import backends

    if sys.stdin is not None and sys.stdin.isatty():
        backends.password_prompt = _password_from_terminal


def _password_from_terminal(where: str) -> str:
    """The password typed for ``where``; end of input (Ctrl-D), Ctrl-C or an empty answer is
    a CliError: one line and status 2, not a traceback."""
    import getpass

    try:
        password = getpass.getpass(f"Password for {where}: ")
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)  # the prompt's line was left open
        password = ""
    if not password:
        raise CliError(f"no password was given for {where}; nothing was done")
    return password


def _project_path(value: str) -> Path | str:
    """A project file's path, or a server study's address (store/backends)."""
    return project_target(value)


def cmd_new(args: argparse.Namespace) -> int:
    path = _project_path(args.path)

    def add_people(project: AnyProject) -> None:
        service = StudyService(project)
        for name in args.annotator or []:
            service.add_annotator(name)
        if args.pi:
            service.add_annotator(args.pi, role="pi")

    if isinstance(path, Path):
        _new_project_file(path, args.name, add_people)
    else:
        with create_project(path, name=args.name) as project:
            add_people(project)
    print(f"Created {shown_target(path)}")
    return 0


def _new_project_file(path: Path, name: str | None, fill: Callable[[Project], None]) -> None:
    """Make the project file whole, people included, or leave nothing (store/building.py):
    a kill part-way used to leave a half-made file that would not open and blocked a new
    attempt under the same name."""
    from portalreview.store.building import create_project_file

    create_project_file(path, name=name, fill=fill)  # a failure names path, as asked for


def format_info(info: dict) -> str:
    """The human-readable ``info`` report."""
    lines = [
        f"Project   {info['name']}  ({info['path']})",
        f"Codebook  {info['catalogs']}",
        f"Cases     {info['cases']}    Responses {info['responses']}    "
        f"Audit entries {info['audit_entries']}",
        "Annotators "
        + (
            ", ".join(
                f"{a['name']} ({a['role']}{', model' if a['is_model'] else ''})"
                for a in info["annotators"]
            )
            or "none"
        ),
        "",
        f"{'kind':<9}{'units':>7}{'gold':>6}   annotator: submitted/assigned (drafts)",
    ]
    for kind, data in info["kinds"].items():
        people = "  ".join(
            f"{name}: {d['submitted']}/{d['assigned']}"
            + (f" ({d['answered'] - d['submitted']})" if d["answered"] > d["submitted"] else "")
            for name, d in data["annotators"].items()
        )
        lines.append(f"{kind:<9}{data['units']:>7}{data['gold']:>6}   {people or '-'}")
    return "\n".join(lines)


def cmd_member(args: argparse.Namespace) -> int:
    """Let a database role work in a server study as one of its annotators (IT, as the
    study's owner; docs/deployment.md)."""
    from portalreview.store.backends import ServerProject, is_server_url

    if not is_server_url(args.path):
        raise CliError("members are for server studies: give its postgresql:// address")
    with open_project(args.path) as project:
        assert isinstance(project, ServerProject)
        study_role = project.add_member(args.role, args.annotator)
    kind = (
        "the PI: reads and writes everything"
        if study_role == "pi"
        else ("a clinician: reads only their own units and answers, blinded")
    )
    print(f"Database role {args.role} now works as {args.annotator} ({kind}).")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Bring a study to this version's format: a server study with its Alembic steps (IT, as
    the owner, once for everyone), a file as opening it does (after a backup beside it)."""
    from portalreview.store.backends import is_server_url, upgrade_server_study
    from portalreview.store.migrations import SCHEMA_VERSION

    if is_server_url(args.path):
        before, after = upgrade_server_study(args.path)
    else:
        path = _project_path(args.path)
        with open_project(path) as project:  # opening for writing upgrades a file
            after = SCHEMA_VERSION
            before = project.upgraded_from or after
    if before == after:
        print(f"{target_name(_project_path(args.path))} is already in format {after}.")
    else:
        print(f"Upgraded {target_name(_project_path(args.path))} from format {before} to {after}.")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    with open_project(_project_path(args.path), read_only=True) as project:
        info = StudyService(project).info()
        partial = _partial_view_note(project)
    if args.json:
        print(json.dumps({**info, "own_work_only": partial is not None}, indent=2))
        return 0
    print(format_info(info))
    if partial:
        print(partial)
    return 0


def _partial_view_note(project: AnyProject) -> str | None:
    """What a clinician's login on a server is told under counts it reads: row-level security
    shows her own answers, assignments and entries only (None for a login that sees all)."""
    from portalreview.store.audit_verify import sees_everything

    with project.read() as session:
        if sees_everything(session):
            return None
    return (
        "Your own work only: a clinician's login sees only its own answers, assignments and "
        "audit entries; the PI's login shows the whole study."
    )


def cmd_verify(args: argparse.Namespace) -> int:
    """The audit log's hash chain, and every answer against the log's last entry for it (a
    project file, checked in an upgraded temporary copy when of an older format; or a server
    study, as its PI or owner); or the chain of an export. 0: intact, 1: problems."""
    from portalreview.store.audit_verify import verify_export, verify_file, verify_project
    from portalreview.store.backends import is_server_url

    export = Path(args.path)
    target = _project_path(args.path)
    if is_server_url(target):
        with open_project(target, read_only=True) as project:
            result = verify_project(project, args.last)
    elif export.is_dir() or export.suffix.lower() in (".jsonl", ".csv", ".xlsx"):
        result = verify_export(export, args.last)
    else:
        result = verify_file(Path(target), args.last)
    print(result.describe())
    return 0 if result.ok else 1


def cmd_codebook(args: argparse.Namespace) -> int:
    """Show the project's catalogs, or extend them from a JSON file (PI)."""
    from portalreview.domain.catalogs import load_catalog_extension

    path = _project_path(args.path)
    if args.extend:
        extension = load_catalog_extension(args.extend)
        with open_project(path) as project:
            catalogs = StudyService(project).extend_catalogs(extension)
        print(f"{target_name(path)}: codebook is now {catalogs.version}")
        return 0
    with open_project(path, read_only=True) as project:
        catalogs = StudyService(project).catalogs
    if args.json:
        print(json.dumps(catalogs.to_dict(), indent=2, ensure_ascii=False))
        return 0
    print(f"Codebook {catalogs.version}")
    print("Themes: " + ", ".join(f"{t.id} ({t.name})" for t in catalogs.themes))
    print("Urgency: " + ", ".join(f"{lv.level} {lv.name}" for lv in catalogs.urgency_levels))
    for code in catalogs.eppc_codes:
        print(f"EPPC {code.id}: " + ", ".join(s.id for s in code.subcodes))
    print("Criteria: " + ", ".join(f"{c.id} {c.name}" for c in catalogs.criteria))
    print("Error categories: " + ", ".join(e.id for e in catalogs.error_categories))
    return 0


def format_import_report(report) -> str:
    lines = ["Dry run: nothing was saved." if report.dry_run else "Imported."]
    lines += [f"  read {name} as {fmt}" for name, fmt in report.files.items()]
    lines += [f"  added {n} {table}" for table, n in report.added.items()]
    lines += [f"  updated {n} {table}" for table, n in report.updated.items()]
    for name, columns in report.ignored_columns.items():
        lines.append(f"  ignored columns of {name}: {', '.join(columns)}")
    lines += [f"  mapped {text} ({n}x)" for text, n in report.eppc_mappings.items()]
    lines += [f"  note: {note}" for note in report.notes]
    return "\n".join(lines)


def cmd_import(args: argparse.Namespace) -> int:
    """Import files into a project, in one transaction (nothing changes on an error)."""
    from portalreview.store.importers import import_files

    path = _project_path(args.path)
    files = [Path(f) for f in args.files]
    if args.show_mapping:
        return _show_mapping(path, files, args.redcap_dictionary)
    mapping = _load_mapping(args.redcap_mapping) if args.redcap_mapping else None
    with open_project(path) as project:
        if args.redcap_dictionary and Path(args.redcap_dictionary) not in files:
            files.append(Path(args.redcap_dictionary))
        report = import_files(
            project, files, kind=args.kind, redcap_mapping=mapping, dry_run=args.dry_run
        )
    print(format_import_report(report))
    return 0


def _load_mapping(value: str) -> dict:
    """A confirmed REDCap mapping: the JSON itself (``{"field": "target", ...}``) or a JSON
    file holding it (its shape is checked by the import)."""
    inline = value.strip().startswith("{")
    what = "the REDCap mapping given" if inline else f"the REDCap mapping {value}"
    path = Path(value)
    if not inline and not path.is_file():
        problem = "is a folder, not a JSON file" if path.is_dir() else "does not exist"
        raise CliError(f"{what} {problem}")
    try:
        return json.loads(value if inline else path.read_text(encoding="utf-8"))
    except RecursionError:
        raise CliError(f"{what} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # bad JSON or not UTF-8
        raise CliError(f"{what} is not valid JSON: {exc}") from exc


def _show_mapping(path: Path | str, files: list[Path], dictionary: str | None) -> int:
    """--show-mapping: print the proposed REDCap mapping and stop; nothing is imported."""
    from portalreview.store.importers.core import read_all
    from portalreview.store.importers.redcap import propose_mapping_for_files

    if dictionary and Path(dictionary) not in files:
        files.append(Path(dictionary))
    parts, _ = read_all(files)
    with open_project(path, read_only=True) as project:
        mapping = propose_mapping_for_files(
            project, parts, Path(dictionary) if dictionary else None
        )
    print(mapping.describe())
    print(
        "To confirm it, import with --redcap-mapping FILE.json (or the JSON itself): "
        '{"field": "target", ...}, each ? field given a target or "ignore".'
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export the study; a long export shows its progress on the terminal, and Ctrl+C stops
    it (status 130) with nothing written: each file is written whole before it is renamed."""
    from portalreview.llm.cli import EXIT_STOPPED
    from portalreview.store.exporters import export_project
    from portalreview.store.exports import EXTERNAL_FORMATS, export_external

    external = args.format in EXTERNAL_FORMATS
    if args.unit_set and not external:
        raise CliError(f"--unit-set applies to the {', '.join(EXTERNAL_FORMATS)} exports")
    if args.annotator and args.format != "preferences":
        raise CliError("--as applies to the preferences export")
    if not str(args.output).strip():
        raise CliError("-o needs the name of the folder (or file) to export to")
    progress = _ExportProgress.on(sys.stderr)
    try:
        with open_project(_project_path(args.path), read_only=True) as project:
            if args.format != "preferences":
                _refuse_a_partial_view(project, f"export the study as {args.format}")
            else:
                _refuse_others_preferences(project, args.annotator)
            if external:
                written = export_external(
                    project,
                    args.format,
                    Path(args.output),
                    unit_sets=args.unit_set,
                    annotator=args.annotator,
                    progress=progress,
                )
            else:
                written = export_project(project, args.format, Path(args.output), progress)
    except KeyboardInterrupt:
        _ExportProgress.clear(progress)
        print(_export_stopped(Path(args.output), args.format), file=sys.stderr)
        return EXIT_STOPPED
    finally:
        _ExportProgress.clear(progress)
    print(_where_written(written))
    return 0


class _ExportProgress:
    """The rows an export has written, on one line of the terminal, rewritten in place."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.width, self.shown = stream, 0, False

    @classmethod
    def on(cls, stream: TextIO) -> _ExportProgress | None:
        """Progress shown on ``stream`` when it is a terminal; None for a file or a pipe,
        which get the result alone."""
        return cls(stream) if getattr(stream, "isatty", lambda: False)() else None

    def __call__(self, table: str, done: int, total: int) -> None:
        self._show(f"Exporting {table}: {done:,} of {total:,} rows")

    @staticmethod
    def clear(progress: _ExportProgress | None) -> None:
        """Clear the line shown, if any (the result is printed in its place)."""
        if progress is not None and progress.shown:
            progress._show("")
            progress.stream.write("\r")
            progress.stream.flush()
            progress.shown = False

    def _show(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self.width))  # spaces over a longer line
        self.stream.flush()
        self.width, self.shown = len(line), True


def _export_stopped(out: Path, fmt: str) -> str:
    """What a stopped export left: nothing, unless it was stopped in the moment its folder's
    files were being renamed over an earlier export's (the folder then says so)."""
    from portalreview.store.export_manifest import check_export_folder

    if fmt in ("jsonl", "csv") and out.is_dir() and check_export_folder(out).problems:
        return (
            f"portalreview export: stopped while the files in {out} were being replaced: "
            "they are not one export now; export again"
        )
    return f"portalreview export: stopped; nothing was written ({out} is as it was)"


def _refuse_others_preferences(project: AnyProject, annotator: str | None) -> None:
    """A clinician's login exports her own preferences only (``--as`` her): the whole study's,
    or another's, would hold her pairs alone, or none, and look complete."""
    if _partial_view_note(project) is None:
        return
    if annotator is not None and person_name(annotator) == person_name(project.member()):
        return  # her own name, however its letters or spaces were typed
    raise CliError(
        "a clinician's login exports only its own preferences, as it sees only its own "
        f"answers: add --as {project.member()}; the PI's login exports everyone's"
    )


def _refuse_a_partial_view(project: AnyProject, what: str) -> None:
    """On a server, a clinician's login reads only her own answers and entries (row-level
    security): a report would count everyone else's as none, and an export would look whole
    while holding part of the log (verify then calls it tampered). Refused, as verify is."""
    from portalreview.store.audit_verify import require_whole_view

    with project.read() as session:
        require_whole_view(
            session, what, "a clinician's login sees only their own answers and entries"
        )


def _where_written(written: list[Path]) -> str:
    """Where an export went, as written (an Excel export to "out" is "out.xlsx")."""
    if len(written) == 1:
        return f"Wrote {written[0]}"
    folders = {Path(p).parent for p in written}
    where = folders.pop() if len(folders) == 1 else "several folders"
    return f"Wrote {len(written)} files to {where}"


class _ReportProgress:
    """How far the workbook or the CSV report has got, and the sheet (or file) being written,
    on one line of a terminal (stderr): on a big study they take a while. Nothing where
    stderr is not a terminal (a script's log)."""

    def __init__(self) -> None:
        self.stream = sys.stderr
        self.shown = self.stream is not None and self.stream.isatty()
        self.part, self.percent, self.width = "", 0, 0

    def progress(self, done: int, total: int) -> None:
        self.percent = 100 * done // total if total else 0
        self._show()

    def begun(self, part: str) -> None:
        self.part = part
        self._show()

    def _show(self) -> None:
        if not self.shown:
            return
        line = f"Writing the report: {self.percent:3d}%  {self.part}"
        self.stream.write("\r" + line.ljust(self.width))  # over the last line, all of it
        self.stream.flush()
        self.width = len(line)

    def finish(self) -> None:
        if self.shown and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0


_REPORT_SUFFIXES = {".xlsx": "xlsx", ".json": "json", ".csv": "csv"}


def _report_format(given: str | None, output: str) -> str:
    """The report's format: the one given, else the one ``-o`` names: a folder (one that
    exists, or a name ending in a path separator) or a .csv name is the CSV report's folder,
    a .xlsx name a workbook, a .json name or one without a suffix JSON. A format that
    contradicts ``-o`` is refused (JSON written to report.xlsx is a file Excel cannot open),
    and so is another suffix without --format (JSON in report.txt would be a surprise)."""
    path = Path(output)
    folder = _names_a_folder(output)
    named = "csv" if folder else _REPORT_SUFFIXES.get(path.suffix.lower())
    if given is not None and named is not None and named != given:
        what = "a folder, the CSV report's" if folder else f"whose name says {named}"
        raise CliError(
            f"--format {given} would write {output}, {what}: give --format {named}, or another name"
        )
    if given is not None:
        return given
    if named is not None:
        return named
    if path.suffix:
        raise CliError(
            f"which report is {output}? End its name in .json, .xlsx or .csv (a folder of CSV "
            f"files; or end it in {os.sep}), or give --format"
        )
    return "json"


def _names_a_folder(output: str) -> bool:
    """``-o`` names a folder: one that exists, or it ends in a path separator."""
    separators = tuple(sep for sep in (os.sep, os.altsep) if sep)
    return output.endswith(separators) or Path(output).is_dir()


def cmd_report(args: argparse.Namespace) -> int:
    """The agreement report (docs/report.md), computed live from the project: JSON, an Excel
    workbook (docs/pi-guide.md) or a folder of CSV files."""
    from portalreview.reports.json_report import write_json_report

    args.format = _report_format(args.format, args.output)
    options = {"seed": args.seed, "n_resamples": args.resamples, "use_cache": not args.fresh}
    shown = _ReportProgress()
    if args.format in ("xlsx", "csv"):
        options |= {"progress": shown.progress, "on_part": shown.begun}
    with open_project(_project_path(args.path), read_only=True) as project:
        _refuse_a_partial_view(project, "write the agreement report")
        try:
            if args.format == "xlsx":
                from portalreview.reports.xlsx_report import write_xlsx_report

                said = f"Wrote {write_xlsx_report(project, Path(args.output), **options)}"
            elif args.format == "csv":
                from portalreview.reports.xlsx_report import write_csv_report

                files = write_csv_report(project, Path(args.output), **options)
                said = f"Wrote {len(files)} file(s) to {args.output}"
            else:
                said = f"Wrote {write_json_report(project, Path(args.output), **options)}"
        finally:
            shown.finish()  # the line ended before anything else is said
    print(said)
    return 0


# --- study set-up, offline copies (the PI's verbs; docs/pi-guide.md) ---------------------------


def cmd_setup(args: argparse.Namespace) -> int:
    """Add annotators and/or make a unit set from the project's cases with a recipe."""
    from portalreview.store import study_setup as setup

    if not args.recipe and not args.add_annotator and not args.add_pi:
        raise CliError("name a recipe (" + ", ".join(setup.RECIPES) + ") or --add-annotator")
    path = _project_path(args.path)
    with open_project(path, read_only=args.dry_run and not args.add_annotator) as project:
        if args.add_annotator and not args.dry_run:
            setup.add_annotators(project, args.add_annotator)
            print(f"Added {', '.join(person_name(n) for n in args.add_annotator)}")
        if args.add_pi and not args.dry_run:
            setup.add_annotators(project, [args.add_pi], role="pi")
            print(f"Added {person_name(args.add_pi)} (PI)")
        if not args.recipe:
            return 0
        plan = setup.plan_units(
            project,
            args.recipe,
            cases=setup.CaseFilter.parse(args.tag or [], args.case or []),
            first=setup.ResponseFilter.parse(args.first) if args.first else None,
            second=setup.ResponseFilter.parse(args.second) if args.second else None,
            inbox=args.inbox,
            name=args.name,
            description=args.description,
            batch_size=args.batch_size,
            seed=args.seed,
            comparisons_per_message=args.comparisons_per_message,
            judgements=args.judgements,
        )
        print(plan.summary())
        if args.dry_run:
            print("Dry run: nothing was saved.")
            return 0
        made = setup.create_unit_set(project, plan)
    print(f"Created unit set {made.name!r} ({made.n_units} {made.kind} units)")
    return 0


def cmd_assign(args: argparse.Namespace) -> int:
    """Hand out a unit set's unassigned units with an overlap, reproducibly from a seed."""
    from portalreview.store import study_setup as setup

    with open_project(_project_path(args.path), read_only=args.dry_run) as project:
        plan = setup.plan_assignment(
            project,
            args.unit_set,  # a name, or an id where no set has that name
            args.annotator,
            overlap=args.overlap,
            raters_per_unit=args.raters_per_unit,
            seed=args.seed,
        )
        print(plan.summary())
        if args.dry_run:
            print("Dry run: nothing was saved.")
            return 0
        setup.assign_units(project, plan, shuffle_order=args.shuffle)
    print("Assigned.")
    return 0


def cmd_hard_pairs(args: argparse.Namespace) -> int:
    """List the urgency pairs whose only annotator asked for a second one, or (``--to``) give
    them to a second annotator as the same units (seed 002 App. A.5.1)."""
    from portalreview.store import study_setup as setup

    with open_project(_project_path(args.path), read_only=not args.to or args.dry_run) as project:
        pairs = setup.hard_pairs(project)
        if not args.to:
            _print_hard_pairs(pairs)
            return 0
        units = args.unit or [p.unit_id for p in pairs if p.asked_by != args.to]
        if not units and not pairs:  # (given out already, or never asked for: nothing to do)
            setup.check_second_annotator(project, args.to)  # a misspelt name is still said
            print("No pair is waiting for a second annotator: nothing was given.")
            return 0
        if not units:
            raise CliError(f"{args.to} asked for a second annotator on every pair listed")
        if args.dry_run:  # the same checks as the hand-out itself
            plan = setup.plan_second_annotator(project, units, args.to)
            print(_would(plan))
            return 0
        done = setup.assign_second_annotator(project, units, args.to)
    print(done.summary() + ".")
    return 0


def _would(plan: SecondAssignment) -> str:
    """A dry run's sentence about a hand-out of hard pairs."""
    text = f"Would give {len(plan.assigned)} hard pair(s) to {plan.annotator}"
    if plan.already:
        text += f" ({len(plan.already)} they have already, left as they are)"
    return text + ". Dry run: nothing was saved."


def _print_hard_pairs(pairs: Sequence) -> None:
    if not pairs:
        print("No pair is waiting for a second annotator.")
        return
    print(f"{len(pairs)} pair(s) waiting for a second annotator:")
    for pair in pairs:
        print(f"  {pair.describe()}")


def cmd_progress(args: argparse.Namespace) -> int:
    """Progress per unit set (or kind) and annotator."""
    from dataclasses import asdict

    from portalreview.store.study_setup import progress_by_kind, study_progress

    with open_project(_project_path(args.path), read_only=True) as project:
        rows = study_progress(project)
        partial = _partial_view_note(project)
    if args.by_kind:
        rows = progress_by_kind(rows)
    if partial:
        print(partial, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps([{**asdict(r), "todo": r.todo} for r in rows], indent=2))
        return 0
    label = "kind" if args.by_kind else "unit set"
    names = [r.kind if args.by_kind else f"{r.unit_set} ({r.kind})" for r in rows]
    # each column as wide as its longest entry: a name cut short could name another set
    wide = max(map(len, [label, *names])) + 2
    who = max(map(len, ["annotator", *(r.annotator for r in rows)])) + 2
    print(
        f"{label:<{wide}}{'annotator':<{who}}{'assigned':>9}{'shared':>8}{'drafts':>8}{'done':>7}"
    )
    for name, r in zip(names, rows, strict=True):
        print(
            f"{name:<{wide}}{r.annotator:<{who}}{r.assigned:>9}{r.shared:>8}{r.drafts:>8}"
            f"{r.submitted:>7}"
        )
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    """Write a copy of the project for a clinician to annotate offline: by default only their
    own assignments and answers (the others' work, the drafts' authors and sources, the
    reference levels and the audit log are not in the file); ``--whole-study`` copies
    everything and warns what that hands over. ``--only-assigned`` is the default, still
    accepted."""
    from portalreview.store.merge import make_copy, whole_study_contents

    if args.to:
        return _move_study(args)
    if not args.output:
        raise CliError("say where the offline copy goes with -o FILE (or --to for a move)")
    if not args.whole_study and not args.for_:
        raise CliError(
            "say who the copy is for with --for NAME (it then holds only their assignments and "
            "answers), or pass --whole-study for a copy of everything"
        )
    with open_project(_project_path(args.path)) as project:
        holds = whole_study_contents(project, args.for_) if args.whole_study else ""
        info = make_copy(
            project, Path(args.output), annotator=args.for_, only_assigned=not args.whole_study
        )
    if info.only_assigned:
        print(
            f"Wrote {info.path} for {info.annotator} (their assignments and answers only: no "
            "other person's answers, no drafts' authors or sources, no reference levels, no "
            "earlier audit log)"
        )
    else:
        print(f"Wrote {info.path} for {info.annotator or 'anyone'} (the whole study)")
        print(f"warning: {info.path.name} holds the whole study: {holds}", file=sys.stderr)
    return 0


def _move_study(args: argparse.Namespace) -> int:
    """The whole study, as it is, into a new file or an empty server database (either way)."""
    from portalreview.store.transfer import copy_study

    if args.output or args.for_ or args.whole_study:
        raise CliError("--to copies the whole study as it is: leave out -o, --for, --whole-study")
    target = project_target(args.to)
    with open_project(_project_path(args.path), read_only=True) as source:
        copy_study(source, target).close()
    print(f"Copied the whole study to {shown_target(target)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge clinicians' copies back into the master project."""
    from portalreview.store.merge import merge_copies, write_conflicts

    if args.conflicts:  # checked first: a merge is saved before the conflicts are written
        _check_conflicts_file(Path(args.conflicts), [args.path, *args.copies])
    reports: list = []
    stopped: Exception | None = None
    with open_project(_project_path(args.path), read_only=args.dry_run) as project:
        for copy in args.copies:  # each copy is merged in its own transaction
            try:
                reports += merge_copies(project, [Path(copy)], dry_run=args.dry_run)
            except (ProjectError, ValueError, OSError) as exc:  # (what main words)
                if not reports:
                    raise
                stopped = exc  # the copies before it are merged: say so, then stop
                break
    for report in reports:
        print(report.summary())
    if args.dry_run:
        print("Dry run: nothing was saved.")
    if args.conflicts:
        out = write_conflicts([c for r in reports for c in r.conflicts], args.conflicts)
        print(f"Wrote the conflicts to {out}")
    if stopped is not None:
        merged = ", ".join(Path(r.copy_file).name for r in reports)
        verb = "checked" if args.dry_run else "merged"
        raise CliError(
            f"{_worded(stopped)}\nThe merge stopped there: {merged} {verb} (above), the copies "
            "after it not touched. Merging the same copies again finds the merged ones done."
        )
    return 0


def _check_conflicts_file(out: Path, projects: list[str]) -> None:
    """Refuse a conflicts file that could not be written, or would write over the master or
    a copy (and destroy it), before anything is merged."""
    from portalreview.store.project import refuse_project_output

    for project in map(project_target, projects):
        if isinstance(project, Path):  # (a server study has no file to overwrite)
            refuse_project_output(project, out)
    if out.is_dir():
        raise CliError(f"--conflicts {out}: that is a folder; name a .csv or .json file")
    if not out.parent.is_dir():
        raise CliError(f"--conflicts {out}: the folder {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise CliError(f"--conflicts {out}: the folder {out.parent} cannot be written to")


def cmd_conflicts(args: argparse.Namespace) -> int:
    """List the conflicts merges left for the PI, or resolve one."""
    from portalreview.store.merge import open_conflicts, resolve_conflict

    path = _project_path(args.path)
    if args.take and args.resolve is None:
        raise CliError("--take goes with --resolve N: which conflict to resolve that way")
    if args.resolve is not None:
        if not args.take:
            raise CliError("say which version to keep: --take master or --take copy")
        with open_project(path) as project:
            conflict = _open_conflict(project, args.resolve)
            resolve_conflict(project, conflict, args.take)
        kept = "the master's answer" if args.take == "master" else f"{conflict.copy_file}'s answer"
        print(f"Resolved conflict #{conflict.number}, {conflict.answer_named}: kept {kept}")
        return 0
    with open_project(path, read_only=True) as project:
        found = open_conflicts(project)
        if args.json:
            print(json.dumps([c.to_dict() for c in found], indent=2, ensure_ascii=False))
            return 0
        if not found:
            print("No open conflicts.")
        service = StudyService(project)
        for conflict in found:
            print(f"#{conflict.number} {conflict.describe()}")
            for line in conflict_lines(conflict, service):
                print(f"   {line}")
    return 0


def _open_conflict(project: AnyProject, number: int) -> Conflict:
    """The open conflict numbered ``number`` (a number stays the conflict's while others are
    resolved: the list is not renumbered)."""
    from portalreview.store.merge import open_conflicts

    found = open_conflicts(project)
    for conflict in found:
        if conflict.number == number:
            return conflict
    open_now = ", ".join(f"#{c.number}" for c in sorted(found, key=lambda c: c.number))
    raise CliError(
        f"there is no open conflict #{number} (open: {open_now or 'none'}); a conflict keeps "
        "its number, and is no longer open once resolved or settled"
    )


def conflict_lines(conflict, service: StudyService) -> list[str]:
    """The two versions of a conflicting answer as a person reads them: the answer's
    decisions one a line (cases by their ids, drafts by their letters: the database's numbers
    said nothing to the PI), "≠" before a line the other version lacks; then the other fields
    that differ."""
    from portalreview.store.answer_summary import summary_lines

    unit = service.read_unit(conflict.unit_id)
    versions = {
        side: summary_lines(conflict.kind, state.get("payload", {}), unit, service.catalogs)
        for side, state in (("master", conflict.master), ("copy", conflict.copy))
    }
    lines = []
    for side, other in (("master", "copy"), ("copy", "master")):
        for n, line in enumerate(versions[side]):
            mark = "  " if line in versions[other] else "≠ "
            lines.append(f"{side + ':' if n == 0 else '':<8}{mark}{line}")
    for field, (master, copy) in conflict.differences().items():
        if field != "payload":
            lines.append(f"{field}: master {json.dumps(master, sort_keys=True)}")
            lines.append(f"{' ' * len(field)}  copy   {json.dumps(copy, sort_keys=True)}")
    return lines


# --- model quality (evaluate-model) ------------------------------------------------------------


def format_model_evaluation(evaluation) -> str:
    """The ``evaluate-model`` report: per model and kind, every measure with its 95% interval
    and n, the model's rows first and the clinicians' on the same units beside them."""
    from portalreview.analysis.model_eval import N_UNITS, SOURCES, format_figure

    if not evaluation.models:
        return (
            "No model pseudo-annotator has answers in this study: run "
            "`portalreview evaluate-model PATH --model FILE.gguf --limit N` to add one."
        )
    lines = [
        f"95% percentile bootstrap intervals over the model's units ({evaluation.n_resamples} "
        f"resamples, seed {evaluation.seed}); n = the units a figure rests on.",
    ]
    for model in evaluation.models:
        lines += ["", f"== {model} (model) beside the clinicians, on the units {model} answered =="]
        lines += _where_the_model_ran(evaluation.ran_on.get(model, {}))
        rows = evaluation.rows_of(model)
        width = {  # each column as wide as its longest entry
            "measure": max(len(r.measure) for r in rows),
            "who": max([len(r.who) + 2 for r in rows] + [len("answers of")]),
            "against": max([len(r.against) for r in rows] + [len("against")]),
        }
        for kind in dict.fromkeys(r.kind for r in rows):
            lines += ["", f"{kind} ({SOURCES[kind]}; n counts {N_UNITS[kind]})"]
            lines.append(
                f"  {'measure':<{width['measure']}}  {'answers of':<{width['who']}}  "
                f"{'against':<{width['against']}}  value [95% CI] n"
            )
            for row in evaluation.rows_of(model, kind):
                who = f"{row.who} *" if row.is_model else row.who
                lines.append(
                    f"  {row.measure:<{width['measure']}}  {who:<{width['who']}}  "
                    f"{row.against or '-':<{width['against']}}  {format_figure(row.figure)}"
                )
    lines += ["", "* the model's own figure; the rows below it are the clinicians' on its units."]
    return "\n".join(lines)


def _where_the_model_ran(ran_on: dict[str, int]) -> list[str]:
    """Where a model's answers were made; a warning when they pool more than one device or
    build (a GPU and a CPU can answer the same prompt otherwise: docs/llm.md)."""
    if not ran_on:
        return []
    lines = [f"Ran on: {where} ({n} answer{'s' * (n != 1)})" for where, n in ran_on.items()]
    if len(ran_on) > 1:
        lines.append(
            "Note: these answers were made on different hardware or llama.cpp builds and are "
            "pooled below; the same model can answer otherwise on a GPU than on a CPU. Store "
            "each run under its own name (--as-annotator NAME) to compare them."
        )
    return lines


def cmd_evaluate_model(args: argparse.Namespace) -> int:
    """Put each model pseudo-annotator beside the clinicians with the papers' measures; with
    ``--model``, first run that model over ``--limit`` units of each kind as a pseudo
    annotator."""
    from portalreview.analysis.model_eval import evaluate, read_suggestions
    from portalreview.store.frames import read_frames

    path = _project_path(args.path)
    if args.model is None and args.limit is not None:
        raise CliError("--limit needs --model (the model to run over that many units)")
    if args.model is not None and looks_like_address(args.model):
        raise CliError(
            "evaluate-model --model runs a model file (.gguf) here; a model server's answers "
            "are stored with `portalreview suggest STUDY --model ADDRESS --as-annotator NAME`, "
            "then evaluated with evaluate-model STUDY (no --model)"
        )
    if args.own_examples is not None:
        return _compare_own_examples(path, args)
    name = args.as_annotator
    if args.model is not None:
        name = name or Path(args.model).stem
        status = _run_model_as_annotator(path, args, name)
        if status:
            return status
    with open_project(path, read_only=True) as project:
        frames = read_frames(project)
        catalogs = StudyService(project).catalogs
        suggestions = read_suggestions(project)
    evaluation = evaluate(
        frames,
        models=[name] if name else None,
        seed=args.seed,
        n_resamples=args.resamples,
        catalogs=catalogs,
        suggestions=suggestions,
    )
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(r) for r in evaluation.rows], indent=2, ensure_ascii=False))
    else:
        print(format_model_evaluation(evaluation))
    return 0


def _compare_own_examples(path: Path, args: argparse.Namespace) -> int:
    """``evaluate-model --own-examples K``: drafts with and without the clinician's own replies
    (``llm/own_examples.compare_drafts``), printed with their intervals; nothing is stored."""
    import threading

    from portalreview.llm import own_examples
    from portalreview.llm.cli import EXIT_STOPPED, _CtrlC
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.engines import load_engine
    from portalreview.llm.templates import PromptLibrary
    from portalreview.store.service import MAX_OWN_EXAMPLES

    if args.model is None:
        raise CliError("--own-examples needs --model (the model that drafts and judges)")
    if not 1 <= args.own_examples <= MAX_OWN_EXAMPLES:
        raise CliError(f"--own-examples must be between 1 and {MAX_OWN_EXAMPLES}")
    params = GenerationParams(max_tokens=args.max_tokens, temperature=0.0, seed=args.seed)
    cancel = threading.Event()
    with open_project(path, read_only=True) as project:
        service = StudyService(project)
        print(f"Loading {Path(args.model).name}...", file=sys.stderr)
        with (
            load_engine(
                args.model, n_ctx=args.ctx, n_threads=args.threads, gpu=False if args.cpu else None
            ) as engine,
            _CtrlC(cancel),
        ):
            comparison = own_examples.compare_drafts(
                service,
                engine,
                PromptLibrary(service),
                examples=args.own_examples,
                limit=args.limit,
                params=params,
                cancel=cancel,
                progress=lambda done, total: print(
                    f"  {done}/{total} replies drafted twice and judged", file=sys.stderr
                ),
            )
    figures = comparison.figures(args.resamples, args.seed)
    if args.json:
        print(json.dumps({"figures": figures, "skipped": comparison.skipped}, indent=2))
    else:
        print(format_own_examples(figures, comparison, Path(args.model).name))
    return EXIT_STOPPED if comparison.cancelled else 0


def format_own_examples(figures: dict, comparison, model: str) -> str:
    """The comparison as a person reads it: each figure with its interval and n."""
    n = figures["n_replies"]
    lines = [
        f"Respond drafts by {model}, without and with the clinician's {figures['examples']} most "
        "similar own replies as examples: content-level Edit-F1 against the held-out reply "
        "(seed 000 Sec. 3.1, Algorithm 1; the model judges the content matches). "
        f"95% bootstrap intervals over the {n} replies.",
    ]
    if not n and not comparison.failed:
        lines.append(
            "No reply could be compared: no clinician has two replies to similar messages."
        )
    for key, label in (
        ("without", "without examples"),
        ("with", "with own examples"),
        ("difference", "difference (with - without)"),
    ):
        if key in figures:
            ci = figures[key]["ci"]
            interval = "[no interval]" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
            lines.append(f"  {label:<28} {figures[key]['f1']:.3f} {interval} n={n}")
    if n:
        refused = figures["refused_by_gates"]
        lines.append(
            f"  drafts the quality gates would refuse: {refused['without']} of {n} without "
            f"examples, {refused['with']} of {n} with"
        )
    if comparison.failed:
        first = next(iter(comparison.failed.values()))
        lines.append(
            f"  {len(comparison.failed)} repl{'y' if len(comparison.failed) == 1 else 'ies'} "
            f"left out: a draft or a judgement did not fit (first: {first})"
        )
    for who, count in comparison.skipped.items():
        lines.append(
            f"  {who}: {count} repl{'y' if count == 1 else 'ies'} left out (no similar "
            "earlier reply of theirs)"
        )
    return "\n".join(lines)


def _run_model_as_annotator(path: Path, args: argparse.Namespace, name: str) -> int:
    """Run the model over ``args.limit`` units of each evaluated kind (those with gold or
    clinicians' answers first) and store its answers as the pseudo annotator ``name``;
    0 when done, 130 when stopped with Ctrl-C."""
    import threading

    from portalreview.analysis.model_eval import KINDS, units_to_run
    from portalreview.llm import suggest as sg
    from portalreview.llm.cli import (
        EXIT_STOPPED,
        ProgressBar,
        _CtrlC,
        model_gone_message,
        save_failed_message,
    )
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.engines import load_engine
    from portalreview.llm.errors import LlmError
    from portalreview.llm.templates import PromptLibrary
    from portalreview.store.frames import read_frames
    from portalreview.store.service import StoreError
    from portalreview.store.templates import unit_ids

    params = GenerationParams(max_tokens=args.max_tokens, temperature=0.0, seed=args.seed)
    cancel = threading.Event()
    try:
        with open_project(path) as project:
            service = StudyService(project)
            # a person's name is refused before loading; the model's account is made only
            # once the model has loaded (a model that does not load leaves nothing behind)
            sg.existing_model_annotator(service, name)
            library = PromptLibrary(service)
            frames = read_frames(project)
            plan = {}
            for kind in KINDS:
                units = unit_ids(service, kind)
                if units:
                    plan[kind] = units_to_run(frames, kind, units, args.limit or len(units))
            print(f"Loading {Path(args.model).name}...", file=sys.stderr)
            with (
                load_engine(  # in a process of its own: a crash in llama.cpp ends only it
                    args.model,
                    n_ctx=args.ctx,
                    n_threads=args.threads,
                    gpu=False if args.cpu else None,
                ) as engine,
                _CtrlC(cancel),
            ):
                library.install_defaults()  # (run_batch makes the model's account)
                for kind, units in plan.items():
                    bar = ProgressBar(len(units), unit=f"{kind} units")
                    bar.update(0, 0, 0, 0)
                    latest: list = []  # the kind's report as of its last unit

                    def progress(r, _u, bar=bar, latest=latest) -> None:
                        latest[:] = [r]
                        bar.update(
                            r.done, len(r.stored), len(r.skipped), len(r.failed), len(r.refused)
                        )

                    try:
                        report = sg.run_batch(
                            service,
                            engine,
                            kind,
                            units,
                            library=library,
                            annotator=name,
                            params=params,
                            cancel=cancel,
                            progress=progress,
                        )
                    except (StoreError, ProjectError) as exc:  # a save failed part-way
                        bar.finish()
                        if not latest and kind == next(iter(plan)):
                            raise  # before anything was done: said as bad input (exit 2)
                        if latest:
                            _print_model_run(kind, latest[0])
                        print(save_failed_message(exc), file=sys.stderr)
                        return EXIT_STOPPED
                    except sg.MODEL_GONE as exc:  # the model went away: a rerun continues
                        bar.finish()
                        if latest:
                            _print_model_run(kind, latest[0])
                        print(model_gone_message(exc), file=sys.stderr)
                        return EXIT_STOPPED
                    bar.finish()
                    _print_model_run(kind, report)
                    if report.cancelled:
                        print("Stopped: the answers so far are kept.", file=sys.stderr)
                        return EXIT_STOPPED
    except (LlmError, StoreError) as exc:
        raise CliError(str(exc)) from exc
    return 0


def _print_model_run(kind: str, report) -> None:
    """One line of what a model run as an annotator did for ``kind``."""
    print(
        f"{kind}: {len(report.stored)} answered, {len(report.skipped)} already "
        f"done, {len(report.refused)} refused by the quality gates, "
        f"{len(report.failed)} did not fit the kind, in {report.seconds:.0f} s",
        file=sys.stderr,
    )


DEFAULT_DEMO = Path("portalreview-demo.prproj")


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the demo study (``--create PATH``), or open the default one, building it first
    when it is not there yet."""
    from portalreview.demo import build_demo, remove_abandoned_builds

    if args.create:
        path = _project_path(args.create)
        if path.exists():
            raise CliError(f"{path} already exists; choose another name.")
        build_demo(path)
        print(f"Built the demo study in {path}")
        return 0
    path = DEFAULT_DEMO
    remove_abandoned_builds(path.absolute().parent)  # what a killed build left
    if not path.exists():
        print(f"Building the demo study in {path} (a few seconds) ...", flush=True)
        build_demo(path)
    if args.no_gui:
        with open_project(path, read_only=True) as project:
            print(format_info(StudyService(project).info()))
        return 0
    return open_app(path, args.as_annotator)


def open_app(
    path: Path | None = None, annotator: str | None = None, server_address: str | None = None
) -> int:
    """Start the desktop app (imported here so the other verbs never load Qt)."""
    from portalreview.ui.app import run_app

    return run_app(path, annotator, server_address)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portalreview",
        usage="%(prog)s [-h] [--version] [PATH [--as NAME] | VERB ...]",
        description="Annotate patient-portal messages and review LLM-drafted replies, offline.",
        epilog="Without a verb, portalreview opens the desktop app: on its welcome page, or "
        "with PATH (a project file or a server study's address) on that study, signed in as "
        "NAME with --as. 'portalreview VERB --help' explains a verb.",
    )
    parser.add_argument("--version", action="version", version=f"portalreview {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    new = verbs.add_parser("new", help="create an empty project file")
    new.add_argument(
        "path",
        help=f"the new project file (suffix {SUFFIX} added if none), or an empty server "
        "database's address (postgresql://user@host/database)",
    )
    new.add_argument("--name", help="the study's name (default: the file name)")
    new.add_argument("--annotator", action="append", help="add a clinician (repeatable)")
    new.add_argument("--pi", help="add the principal investigator")
    new.set_defaults(func=cmd_new)

    info = verbs.add_parser("info", help="counts per kind and annotator, and progress")
    info.add_argument("path", help=STUDY_HELP)
    info.add_argument("--json", action="store_true", help="print the counts as JSON")
    info.set_defaults(func=cmd_info)

    verify = verbs.add_parser(
        "verify",
        help="check the audit log, and that every answer is what the log last recorded",
    )
    verify.add_argument("path", help=STUDY_HELP + ", or an export (folder or .xlsx)")
    verify.add_argument("--last", metavar="HASH", help="the last hash recorded earlier")
    verify.set_defaults(func=cmd_verify)

    upgrade = verbs.add_parser(
        "upgrade", help="bring a study to this version's format (a server study: IT, once)"
    )
    upgrade.add_argument("path", help=STUDY_HELP)
    upgrade.set_defaults(func=cmd_upgrade)

    member = verbs.add_parser(
        "member", help="let a database role work in a server study as one of its annotators"
    )
    member.add_argument("path", help="the server study's address (as its owner)")
    member.add_argument("role", help="the PostgreSQL role (IT creates it, with its password)")
    member.add_argument("--as", dest="annotator", required=True, help="the study's annotator")
    member.set_defaults(func=cmd_member)

    imp = verbs.add_parser(
        "import", help="import cases, responses, pair/inbox files, REDCap, EPPC or answers"
    )
    imp.add_argument("path", help=STUDY_HELP)
    imp.add_argument("files", nargs="+", help="CSV, XLSX or JSONL files, or an export folder")
    imp.add_argument("--kind", help="force the format instead of detecting it")
    imp.add_argument("--dry-run", action="store_true", help="check everything, save nothing")
    imp.add_argument("--redcap-dictionary", metavar="CSV", help="the REDCap data dictionary")
    imp.add_argument(
        "--show-mapping", action="store_true", help="print the proposed REDCap mapping and stop"
    )
    imp.add_argument(
        "--redcap-mapping",
        metavar="FILE.json|JSON",
        help='a confirmed mapping, in a JSON file or given itself: {"field": "theme id", ...} '
        "(targets: theme ids, notes, case_id, annotator, gold, ignore)",
    )
    imp.set_defaults(func=cmd_import)

    exp = verbs.add_parser("export", help="export the whole study (see docs/formats.md)")
    exp.add_argument("path", help=STUDY_HELP)
    exp.add_argument(
        "--format",
        choices=("jsonl", "csv", "xlsx", "labelstudio", "prodigy", "redcap", "preferences"),
        default="jsonl",
    )
    exp.add_argument(
        "--as",
        dest="annotator",
        metavar="NAME",
        help="preferences: only this clinician's own answers (what their blinding lets them see)",
    )
    exp.add_argument("-o", "--output", required=True, help="a folder, or the .xlsx file")
    exp.add_argument(
        "--unit-set",
        action="append",
        metavar="NAME",
        help="labelstudio/prodigy/redcap: only the units of this set (may repeat)",
    )
    exp.set_defaults(func=cmd_export)

    rep = verbs.add_parser("report", help="agreement and every measure of the papers")
    rep.add_argument("path", help=STUDY_HELP)
    rep.add_argument(
        "--format",
        choices=("json", "xlsx", "csv"),
        help="json, xlsx or csv (default: from -o: a folder, or a name ending in .csv or a "
        "path separator, csv; .xlsx xlsx; .json or no suffix json)",
    )
    rep.add_argument(
        "-o", "--output", required=True, help="the report file (a folder for csv: report-csv/)"
    )
    rep.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rep.add_argument(
        "--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)"
    )
    rep.add_argument(
        "--fresh",
        action="store_true",
        help="compute every figure, not taking those the project keeps from an earlier "
        "computation with the same settings and answers (docs/report.md)",
    )
    rep.set_defaults(func=cmd_report)

    _add_pi_verbs(verbs)

    codebook = verbs.add_parser(
        "codebook", help="show the project's catalogs, or extend them from a JSON file"
    )
    codebook.add_argument("path", help=STUDY_HELP)
    codebook.add_argument("--extend", metavar="FILE", help="add the entries of FILE (JSON)")
    codebook.add_argument("--json", action="store_true", help="print the catalogs as JSON")
    codebook.set_defaults(func=cmd_codebook)

    demo = verbs.add_parser(
        "demo", help="open the built-in demo study (synthetic) in the app, building it first"
    )
    demo.add_argument("--create", metavar="PATH", help="build the demo study at PATH")
    demo.add_argument(
        "--no-gui", action="store_true", help="print the demo's counts instead of opening it"
    )
    demo.add_argument("--as", dest="as_annotator", metavar="NAME", help="sign in as NAME")
    demo.set_defaults(func=cmd_demo)

    from portalreview.llm.cli import add_suggest_parser, at_least_one
    from portalreview.selftest import register as add_selftest_parser

    ev = verbs.add_parser(
        "evaluate-model",
        help="each model pseudo-annotator beside the clinicians, with the papers' measures",
        description="Model quality, measured: urgency accuracy and inbox NDCG, EPPC P/R/F1 "
        "against gold, content-match agreement, Kendall's tau, empathy agreement and fact "
        "scores of each model pseudo-annotator beside the clinicians, each with its 95% "
        "bootstrap interval and n. With --model, first run that model over --limit units of "
        "each kind and store its answers as a pseudo annotator.",
    )
    ev.add_argument("path", help=STUDY_HELP)
    ev.add_argument("--model", metavar="FILE", help="a .gguf model to run first")
    ev.add_argument(
        "--limit", type=at_least_one, metavar="N", help="with --model: N units of each kind"
    )
    ev.add_argument(
        "--as-annotator",
        metavar="NAME",
        help="the model pseudo-annotator (default with --model: the file's name; "
        "without: every model in the study)",
    )
    ev.add_argument("--seed", type=int, default=0, help="bootstrap and model seed (default 0)")
    ev.add_argument(
        "--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)"
    )
    ev.add_argument("--json", action="store_true", help="print the rows as JSON")
    ev.add_argument("--max-tokens", type=at_least_one, default=1024, help="per generated answer")
    ev.add_argument(
        "--threads", type=at_least_one, help="CPU threads (default: one per physical core)"
    )
    ev.add_argument(
        "--ctx", type=at_least_one, help="context size in tokens (default: from the model)"
    )
    ev.add_argument("--cpu", action="store_true", help="do not offload to a GPU")
    ev.add_argument(
        "--own-examples",
        type=int,
        metavar="K",
        help="with --model: instead, compare respond drafts made with each clinician's K most "
        "similar own replies against drafts made without (content Edit-F1 against the "
        "held-out reply; --limit replies per clinician)",
    )
    ev.set_defaults(func=cmd_evaluate_model)
    add_suggest_parser(verbs)
    add_selftest_parser(verbs)  # (no help line: docs/deployment.md's installation check)

    for register in EXTRA_VERBS:
        register(verbs)
    return parser


def _add_pi_verbs(verbs: argparse._SubParsersAction) -> None:
    """``setup``, ``assign``, ``hard-pairs``, ``progress``, ``copy``, ``merge``, ``conflicts``."""
    from portalreview.store.study_setup import RECIPES

    setup = verbs.add_parser("setup", help="add annotators, or make a unit set from the cases")
    setup.add_argument("path", help=STUDY_HELP)
    setup.add_argument("recipe", nargs="?", choices=RECIPES, help="which units to make")
    setup.add_argument("--add-annotator", action="append", metavar="NAME", help="add a clinician")
    setup.add_argument("--add-pi", metavar="NAME", help="add a PI")
    setup.add_argument("--name", help="the unit set's name")
    setup.add_argument("--description", help="what the annotators are asked")
    setup.add_argument("--inbox", help="urgency, adaptive-inbox: pair the cases tagged inbox=NAME")
    setup.add_argument("--tag", action="append", metavar="KEY=VALUE", help="only cases tagged so")
    setup.add_argument("--case", action="append", metavar="ID", help="only these cases")
    setup.add_argument(
        "--first",
        action="append",
        metavar="KEY=VALUE",
        help="responses: the reference, original or rank set (author_kind, production, "
        "source, author)",
    )
    setup.add_argument(
        "--second", action="append", metavar="KEY=VALUE", help="responses: the draft or edit"
    )
    setup.add_argument(
        "--batch-size",
        type=int,
        default=0,
        metavar="N",
        help="label batches of N units (eppc: of N messages, a message's sentences in one batch)",
    )
    setup.add_argument(
        "--comparisons-per-message",
        type=int,
        default=0,
        metavar="K",
        help="urgency: a sample of pairs, each message compared K times (default: all pairs)",
    )
    setup.add_argument(
        "--judgements",
        type=int,
        default=0,
        metavar="N",
        help="adaptive-inbox: pairs each clinician judges (default: n log2 n for n messages)",
    )
    setup.add_argument("--seed", type=int, help="shuffle the units' order with this seed")
    setup.add_argument("--dry-run", action="store_true", help="show the plan, save nothing")
    setup.set_defaults(func=cmd_setup)

    assign = verbs.add_parser("assign", help="hand out a unit set with an overlap")
    assign.add_argument("path", help=STUDY_HELP)
    assign.add_argument(
        "unit_set", help="the unit set's name (or its id, where no set has that name)"
    )
    assign.add_argument(
        "--annotator", action="append", required=True, metavar="NAME", help="repeatable"
    )
    assign.add_argument("--overlap", type=int, default=0, help="units answered by everyone")
    assign.add_argument(
        "--raters-per-unit", type=int, default=1, help="annotators per other unit (default 1)"
    )
    assign.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    assign.add_argument("--shuffle", action="store_true", help="each queue in its own order")
    assign.add_argument("--dry-run", action="store_true", help="show the plan, save nothing")
    assign.set_defaults(func=cmd_assign)

    hard = verbs.add_parser(
        "hard-pairs",
        help="urgency pairs whose annotator asked for a second one: list them, or give them "
        "to a second annotator (--to)",
    )
    hard.add_argument("path", help=STUDY_HELP)
    hard.add_argument(
        "--to", metavar="NAME", help="give the pairs to NAME, as the same units (a second answer)"
    )
    hard.add_argument(
        "--unit",
        action="append",
        type=int,
        metavar="ID",
        help="only this pair (repeatable; default: every pair listed that NAME did not ask about)",
    )
    hard.add_argument(
        "--dry-run", action="store_true", help="show what would be given, save nothing"
    )
    hard.set_defaults(func=cmd_hard_pairs)

    prog = verbs.add_parser("progress", help="progress per unit set and annotator")
    prog.add_argument("path", help=STUDY_HELP)
    prog.add_argument("--by-kind", action="store_true", help="sum the sets of each kind")
    prog.add_argument("--json", action="store_true", help="print the rows as JSON")
    prog.set_defaults(func=cmd_progress)

    copy = verbs.add_parser(
        "copy",
        help="write a copy for a clinician to annotate offline, or move the whole study "
        "between a file and a server (--to)",
    )
    copy.add_argument("path", help="the master project file, or a server study's address")
    copy.add_argument("-o", "--output", help="the offline copy's file")
    copy.add_argument(
        "--to",
        metavar="TARGET",
        help="copy the whole study, as it is, into a new file or an empty server database "
        "(postgresql://...): the same study, ids, audit log and all",
    )
    copy.add_argument(
        "--for",
        dest="for_",
        metavar="NAME",
        help="the clinician it is for: the copy holds only their assignments and answers",
    )
    scope = copy.add_mutually_exclusive_group()
    scope.add_argument(
        "--whole-study",
        action="store_true",
        help="copy everything (every person's answers, the drafts' authors and sources, the "
        "reference levels, the audit log); prints a warning saying what it holds",
    )
    scope.add_argument(
        "--only-assigned",
        action="store_true",
        help="the default (kept for old scripts): only their assignments and answers",
    )
    copy.set_defaults(func=cmd_copy)

    merge = verbs.add_parser("merge", help="merge clinicians' copies into the master")
    merge.add_argument("path", help="the master project file")
    merge.add_argument("copies", nargs="+", help="the copies, merged in this order")
    merge.add_argument("--dry-run", action="store_true", help="report, save nothing")
    merge.add_argument("--conflicts", metavar="FILE", help="write the conflicts (.csv or .json)")
    merge.set_defaults(func=cmd_merge)

    conflicts = verbs.add_parser("conflicts", help="list or resolve conflicts left by merges")
    conflicts.add_argument("path", help="the master project file")
    conflicts.add_argument("--json", action="store_true", help="print them as JSON")
    conflicts.add_argument(
        "--resolve", type=int, metavar="N", help="resolve conflict #N (its number in the list)"
    )
    conflicts.add_argument("--take", choices=("master", "copy"), help="the version to keep")
    conflicts.set_defaults(func=cmd_conflicts)


# Modules that add verbs (import, export, report, demo...) append a function here that
# registers their sub-parser.
EXTRA_VERBS: list[Callable[[argparse._SubParsersAction], None]] = []


def _open_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portalreview", description="Open a project in the desktop app."
    )
    parser.add_argument("path", help=STUDY_HELP)
    parser.add_argument("--as", dest="as_annotator", metavar="NAME", help="sign in as NAME")
    return parser


def _opens_the_app(first: str, verbs: Collection[str]) -> bool:
    """Whether a command line starting with ``first`` opens the app: a path, or ``--as``
    (``portalreview --as NAME PATH``, the name before the path), rather than a verb or an
    option of the verbs' parser (--help, --version)."""
    return (
        first == "--as"
        or first.startswith("--as=")
        or (first not in verbs and not first.startswith("-"))
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices  # the registered verbs
    if not argv:
        return open_app()
    if _opens_the_app(argv[0], verbs):
        from portalreview.store.backends import is_server_url

        opened = _open_parser().parse_args(argv)
        if is_server_url(opened.path):  # asked for its password in the app's dialog
            if opened.as_annotator:
                print(
                    "portalreview: on a server study the database account decides who signs "
                    "in: leave out --as",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            return open_app(server_address=opened.path)
        path = Path(opened.path)
        if not path.exists():
            print(
                f"portalreview: {path} does not exist (and is not a verb: {', '.join(verbs)})",
                file=sys.stderr,
            )
            return EXIT_USAGE
        return open_app(path, opened.as_annotator)
    args = parser.parse_args(argv)
    write_any_text()
    setup_logging("cli")
    ask_server_passwords_at_terminal()
    started = time.perf_counter()
    log.info("command %s", args.verb)  # only the verb: arguments may name patient files
    try:
        status = args.func(args)
    except BrokenPipeError:  # the reader stopped reading (`portalreview progress | head`)
        _nowhere_more_to_write()
        return EXIT_BROKEN_PIPE
    except (ProjectError, CliError, ValueError, OSError) as exc:
        print(f"portalreview {args.verb}: {_worded(exc)}", file=sys.stderr)
        log.warning("command %s failed: %s", args.verb, exc)  # applog.error_text
        return EXIT_USAGE
    except DBAPIError as exc:
        refused = _not_this_accounts(exc)
        if refused is None:
            raise
        print(f"portalreview {args.verb}: {refused}", file=sys.stderr)
        log.warning("command %s refused by the study server: %s", args.verb, refused)
        return EXIT_USAGE
    log.info("command %s done (status %s) in %.3f s", args.verb, status, _since(started))
    return status


#: The status of a command whose output nobody reads any more: a program killed by SIGPIPE's.
EXIT_BROKEN_PIPE = 128 + 13


def _nowhere_more_to_write() -> None:
    """Standard output sent nowhere from now on: Python flushes it at exit, and the broken
    pipe would raise again there ("Exception ignored ... BrokenPipeError")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_any_text() -> None:
    """Standard output and error write every character. Redirected to a file on Windows they
    use the ANSI code page (cp1252 in Western Europe), which has no "Ł" or "Ş": printing such
    a clinician's name failed and the file stayed empty. A stream that is not UTF-8 is made
    UTF-8 (a Windows console is not affected: Python writes to it in UTF-16)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if encoding and codecs.lookup(encoding).name != "utf-8" and hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8")


def _worded(exc: Exception) -> str:
    """The message for the terminal; a file error (the last resort) names its file in words
    rather than as "[Errno 21] Is a directory: 'x'". A rename refused names its target: the
    source is a temporary file, gone by now."""
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        refused = isinstance(exc, PermissionError) and exc.filename2
        file = exc.filename2 if refused else exc.filename
        return f"{file}: {exc.strerror[:1].lower()}{exc.strerror[1:]}"
    return str(exc)


def _not_this_accounts(exc: DBAPIError) -> str | None:
    """A study server's refusal of the signed-in account (a clinician's role running a PI's
    command: setup, member, import...) in words; None for any other database error. The
    server checks every right itself; this only says what it refused, without a traceback."""
    state = getattr(exc.orig, "sqlstate", None) or ""
    if state not in (INSUFFICIENT_PRIVILEGE, FEATURE_NOT_SUPPORTED):
        return None
    first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
    return (
        "the study server refused this to your database account, which works as a "
        f"clinician or lacks this right ({first}); the study's PI, or IT with the study "
        "owner's account, runs it. If it is yours to run, your account is not fully set up "
        "as a member of the study: IT sets it up again, with the study owner's account "
        "(portalreview member ADDRESS ROLE --as NAME; docs/deployment.md)"
    )


def _since(started: float) -> float:
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
