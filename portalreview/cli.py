"""The ``portalreview`` command: ``new``, ``info`` and the verbs later modules add.

Every verb prints a clear message and exits with status 2 when its input is wrong; nothing is
changed then.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from portalreview import __version__
from portalreview.store.project import SUFFIX, Project, ProjectError
from portalreview.store.service import StudyService

EXIT_USAGE = 2


class CliError(Exception):
    """A problem to report to the person at the terminal (no traceback)."""


def _project_path(value: str) -> Path:
    path = Path(value)
    return path if path.suffix else path.with_suffix(SUFFIX)


def cmd_new(args: argparse.Namespace) -> int:
    path = _project_path(args.path)
    with Project.create(path, name=args.name) as project:
        service = StudyService(project)
        for name in args.annotator or []:
            service.add_annotator(name)
        if args.pi:
            service.add_annotator(args.pi, role="pi")
    print(f"Created {path}")
    return 0


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


def cmd_info(args: argparse.Namespace) -> int:
    with Project.open(_project_path(args.path), read_only=True) as project:
        info = StudyService(project).info()
    print(json.dumps(info, indent=2) if args.json else format_info(info))
    return 0


def cmd_codebook(args: argparse.Namespace) -> int:
    """Show the project's catalogs, or extend them from a JSON file (PI)."""
    from portalreview.domain.catalogs import load_catalog_extension

    path = _project_path(args.path)
    if args.extend:
        extension = load_catalog_extension(args.extend)
        with Project.open(path) as project:
            catalogs = StudyService(project).extend_catalogs(extension)
        print(f"{path.name}: codebook is now {catalogs.version}")
        return 0
    with Project.open(path, read_only=True) as project:
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
    from portalreview.store.importers import import_files, propose_redcap_mapping

    path = _project_path(args.path)
    files = [Path(f) for f in args.files]
    with Project.open(path) as project:
        if args.redcap_dictionary and args.show_mapping:
            records = next(f for f in files if f != Path(args.redcap_dictionary))
            mapping = propose_redcap_mapping(project, records, Path(args.redcap_dictionary))
            print(mapping.describe())
            return 0
        mapping = json.loads(Path(args.redcap_mapping).read_text()) if args.redcap_mapping else None
        if args.redcap_dictionary and Path(args.redcap_dictionary) not in files:
            files.append(Path(args.redcap_dictionary))
        report = import_files(
            project, files, kind=args.kind, redcap_mapping=mapping, dry_run=args.dry_run
        )
    print(format_import_report(report))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from portalreview.store.exporters import export_project

    with Project.open(_project_path(args.path), read_only=True) as project:
        written = export_project(project, args.format, Path(args.output))
    print(f"Wrote {len(written)} file(s) to {args.output}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """The agreement report (docs/report.md), computed live from the project."""
    from portalreview.reports.json_report import write_json_report

    with Project.open(_project_path(args.path), read_only=True) as project:
        write_json_report(project, Path(args.output), seed=args.seed, n_resamples=args.resamples)
    print(f"Wrote {args.output}")
    return 0


DEFAULT_DEMO = Path("portalreview-demo.prproj")


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the demo study (``--create PATH``), or open the default one, building it first
    when it is not there yet."""
    from portalreview.demo import build_demo

    if args.create:
        path = _project_path(args.create)
        if path.exists():
            raise CliError(f"{path} already exists; choose another name.")
        build_demo(path)
        print(f"Built the demo study in {path}")
        return 0
    path = DEFAULT_DEMO
    if not path.exists():
        print(f"Building the demo study in {path} ...")
        build_demo(path)
    with Project.open(path, read_only=True) as project:
        print(format_info(StudyService(project).info()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portalreview",
        description="Annotate patient-portal messages and review LLM-drafted replies, offline.",
    )
    parser.add_argument("--version", action="version", version=f"portalreview {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    new = verbs.add_parser("new", help="create an empty project file")
    new.add_argument("path", help=f"the new project file (suffix {SUFFIX} added if none)")
    new.add_argument("--name", help="the study's name (default: the file name)")
    new.add_argument("--annotator", action="append", help="add a clinician (repeatable)")
    new.add_argument("--pi", help="add the principal investigator")
    new.set_defaults(func=cmd_new)

    info = verbs.add_parser("info", help="counts per kind and annotator, and progress")
    info.add_argument("path", help="the project file")
    info.add_argument("--json", action="store_true", help="print the counts as JSON")
    info.set_defaults(func=cmd_info)

    imp = verbs.add_parser(
        "import", help="import cases, responses, pair/inbox files, REDCap, EPPC or answers"
    )
    imp.add_argument("path", help="the project file")
    imp.add_argument("files", nargs="+", help="CSV, XLSX or JSONL files, or an export folder")
    imp.add_argument("--kind", help="force the format instead of detecting it")
    imp.add_argument("--dry-run", action="store_true", help="check everything, save nothing")
    imp.add_argument("--redcap-dictionary", metavar="CSV", help="the REDCap data dictionary")
    imp.add_argument(
        "--show-mapping", action="store_true", help="print the proposed REDCap mapping and stop"
    )
    imp.add_argument(
        "--redcap-mapping", metavar="JSON", help="a confirmed mapping {field: theme id|notes|...}"
    )
    imp.set_defaults(func=cmd_import)

    exp = verbs.add_parser("export", help="export the whole study (see docs/formats.md)")
    exp.add_argument("path", help="the project file")
    exp.add_argument("--format", choices=("jsonl", "csv", "xlsx"), default="jsonl")
    exp.add_argument("-o", "--output", required=True, help="a folder (jsonl, csv) or .xlsx file")
    exp.set_defaults(func=cmd_export)

    rep = verbs.add_parser("report", help="agreement and every measure of the papers")
    rep.add_argument("path", help="the project file")
    rep.add_argument("--format", choices=("json",), default="json")
    rep.add_argument("-o", "--output", required=True, help="the report file")
    rep.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rep.add_argument(
        "--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)"
    )
    rep.set_defaults(func=cmd_report)

    codebook = verbs.add_parser(
        "codebook", help="show the project's catalogs, or extend them from a JSON file"
    )
    codebook.add_argument("path", help="the project file")
    codebook.add_argument("--extend", metavar="FILE", help="add the entries of FILE (JSON)")
    codebook.add_argument("--json", action="store_true", help="print the catalogs as JSON")
    codebook.set_defaults(func=cmd_codebook)

    demo = verbs.add_parser(
        "demo", help="the built-in demo study (synthetic): build it, or show the default one"
    )
    demo.add_argument("--create", metavar="PATH", help="build the demo study at PATH")
    demo.set_defaults(func=cmd_demo)

    for register in EXTRA_VERBS:
        register(verbs)
    return parser


# Modules that add verbs (import, export, report, demo...) append a function here that
# registers their sub-parser.
EXTRA_VERBS: list[Callable[[argparse._SubParsersAction], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (ProjectError, CliError, ValueError, PermissionError) as exc:
        print(f"portalreview {args.verb}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
