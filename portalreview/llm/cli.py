"""``portalreview suggest``: precompute a model's suggestions (or its full answers, as a pseudo
annotator) for a unit set, with a progress bar on stderr. It resumes where it stopped (units
this model file and template set already answered are skipped), and Ctrl-C stops after the
unit in progress is dropped: everything finished before is saved (one transaction per unit).

Suggestions the quality gates refuse (``portalreview.llm.gates``: empty, echoes of the prompt,
the same text in every box, spans over the whole draft, text loops) are stored with the reason
for the PI and never offered; the summary counts them by reason.

Exit status: 0 all done, 1 some answers did not fit or were refused by the quality gates
(listed), 2 bad input, 130 stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from portalreview.llm.model_server import looks_like_address
from portalreview.llm.runtime import where_it_ran
from portalreview.store.models import KINDS


def at_least_one(text: str) -> int:
    """An option that counts something (units, tokens, threads): a whole number >= 1. (0 or
    less gave "every unit" for --limit, a model context of 256 tokens for --ctx.)"""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


EXIT_REFUSED, EXIT_USAGE, EXIT_STOPPED = 1, 2, 130


def add_suggest_parser(verbs: argparse._SubParsersAction) -> None:
    """Register the ``suggest`` verb."""
    p = verbs.add_parser(
        "suggest",
        help="precompute local-model suggestions (or a model's answers) for a unit set",
        description="Run a local GGUF model over the units of a kind and store its suggestions "
        "with their provenance. Rerun the same command to continue after a stop.",
    )
    p.add_argument("path", help="the project file, or a server study's address")
    p.add_argument(
        "--model",
        required=True,
        metavar="FILE|URL",
        help="a .gguf model file, or the address of the study's model server (http://HOST:PORT, "
        "as set with 'portalreview model-server')",
    )
    p.add_argument(
        "--kind",
        required=True,
        choices=(*KINDS, "drafts"),
        help="the annotation kind; 'drafts' writes new draft replies for the cases of --units",
    )
    p.add_argument("--units", metavar="SET", help="only this unit set (default: all of the kind)")
    p.add_argument(
        "--as-annotator",
        metavar="NAME",
        help="also store the answers as those of a model pseudo annotator NAME (for agreement)",
    )
    p.add_argument(
        "--template",
        metavar="NAME",
        help="drafts: draft_zero_shot (default), draft_thematic, or a project template's name",
    )
    p.add_argument("--limit", type=at_least_one, metavar="N", help="at most N units (a trial run)")
    p.add_argument("--max-tokens", type=at_least_one, default=1024, help="per generated answer")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (reproducible)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads", type=at_least_one, help="CPU threads (default: one per physical core)"
    )
    p.add_argument(
        "--ctx", type=at_least_one, help="context size in tokens (default: from the model)"
    )
    p.add_argument("--cpu", action="store_true", help="do not offload to a GPU")
    p.add_argument("--no-themes", action="store_true", help="match: no sentence theme labels")
    p.set_defaults(func=cmd_suggest)
    add_prompt_parser(verbs)
    add_model_server_parser(verbs)
    add_own_examples_parser(verbs)


def add_own_examples_parser(verbs: argparse._SubParsersAction) -> None:
    """Register the ``own-examples`` verb: drafts from a clinician's own replies (PI only)."""
    p = verbs.add_parser(
        "own-examples",
        help="let respond suggestions show the model the clinician's own similar replies",
        description="Without options: say what the study does. With --examples N (1-5), a "
        "respond suggestion for a clinician puts their N earlier replies to the most similar "
        "messages into the prompt (TF-IDF over the messages), made for them alone; 0 turns it "
        "off. See docs/llm.md.",
    )
    p.add_argument("path", help="the project file, or a server study's address")
    p.add_argument("--examples", type=int, metavar="N", help="1-5 replies; 0: off")
    p.set_defaults(func=cmd_own_examples)


def cmd_own_examples(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from portalreview.store.backends import open_project, project_target
    from portalreview.store.project import ProjectError
    from portalreview.store.service import StoreError, StudyService

    out = out or sys.stdout
    try:
        with open_project(project_target(args.path), read_only=args.examples is None) as project:
            service = StudyService(project)
            if args.examples is not None:
                service.set_own_examples(args.examples)
            count = service.own_examples()
    except (StoreError, ProjectError) as exc:
        print(f"portalreview own-examples: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if count:
        print(f"Respond suggestions for a clinician show the model their {count} most similar "
              "earlier replies (made for them alone).", file=out)
    else:
        print("Respond suggestions show the model no clinician's own replies (off).", file=out)
    return 0


def add_model_server_parser(verbs: argparse._SubParsersAction) -> None:
    """Register the ``model-server`` verb: the study's shared llama.cpp server (PI only)."""
    p = verbs.add_parser(
        "model-server",
        help="name the study's shared model server (a llama.cpp server IT runs), or check it",
        description="Without options: show the model server this project would use (its own "
        "setting, else the machine's) and check that it answers. The program connects to no "
        "other address. See docs/deployment.md.",
    )
    p.add_argument("path", help="the project file, or a server study's address")
    p.add_argument("--set", metavar="URL", help="http(s)://HOST:PORT of the server")
    p.add_argument("--sha256", metavar="HEX", help="with --set: SHA-256 of the model file the "
                   "server runs (IT: sha256sum MODEL.gguf); suggestions record it")
    p.add_argument("--ca-file", metavar="PEM", help="with --set: the certificate authority that "
                   "signed the server's TLS certificate (https)")
    p.add_argument("--clear", action="store_true", help="forget the project's setting")
    p.set_defaults(func=cmd_model_server)


def cmd_model_server(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from portalreview.llm.errors import LlmError
    from portalreview.llm.model_server import ServerSetting, configured_setting
    from portalreview.store.backends import open_project, project_target
    from portalreview.store.project import ProjectError
    from portalreview.store.service import StoreError, StudyService

    out = out or sys.stdout
    path = project_target(args.path)
    try:
        with open_project(path) as project:
            service = StudyService(project)
            if args.clear:
                service.set_model_server(None)
                print("The project names no model server now.", file=out)
            elif args.set:
                setting = ServerSetting.from_dict(
                    {"url": args.set, "sha256": args.sha256 or "", "ca_file": args.ca_file},
                    "the command line",
                )
                service.set_model_server(setting.to_json())
                print(f"The project's model server is {setting.address}.", file=out)
            setting = configured_setting(project)
            return _check_server(setting, out)
    except (LlmError, StoreError, ProjectError) as exc:
        print(f"portalreview model-server: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _check_server(setting, out: TextIO) -> int:
    from portalreview.llm.engines.server import ServerEngine

    if setting is None:
        print("No model server is configured: the program opens no network connection.",
              file=out)
        return 0
    print(f"Model server {setting.address} (from {setting.origin}), model SHA-256 "
          f"{setting.sha256[:16]}...", file=out)
    with ServerEngine.connect(setting) as engine:
        print(f"It answers: {engine.info.describe()}", file=out)
        print(f"Prompt format: {engine.prompt_format.get('format')}", file=out)
    return 0


def add_prompt_parser(verbs: argparse._SubParsersAction) -> None:
    """Register the ``prompt`` verb: the exact prompts behind a stored suggestion."""
    p = verbs.add_parser(
        "prompt",
        help="show the exact prompts a model read to make a suggestion (for the PI)",
        description="Print a suggestion's prompt format (the model's chat template or plain "
        "completion) and every prompt exactly as the model read it, chat markup included.",
    )
    p.add_argument("path", help="the project file, or a server study's address")
    p.add_argument("suggestion", type=int, help="the suggestion's id")
    p.set_defaults(func=cmd_prompt)


def cmd_prompt(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from portalreview.store.backends import open_project, project_target
    from portalreview.store.project import ProjectError
    from portalreview.store.service import StoreError, StudyService
    from portalreview.store.templates import suggestion_prompts

    path = project_target(args.path)
    try:
        with open_project(path, read_only=True) as project:
            found = suggestion_prompts(StudyService(project), args.suggestion)
    except (StoreError, ProjectError) as exc:
        print(f"portalreview prompt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(describe_prompts(found), file=out)
    return 0


def describe_prompts(found) -> str:
    """A suggestion's prompts as text: a header, then each prompt between rules."""
    fmt = found.prompt_format
    if fmt.get("format") == "chat":
        how = f"the model's chat template (sha256 {fmt.get('chat_template_sha256', '?')[:12]})"
    elif fmt.get("format") == "completion":
        how = "plain completion" + (f" ({fmt['why']})" if fmt.get("why") else "")
    else:
        how = "not recorded (a suggestion stored before prompts were recorded)"
    lines = [
        f"Suggestion {found.suggestion_id} by {found.model_file}, template {found.template_id}",
        f"Ran on: {where_it_ran(found.runtime)}",
        f"Prompt format: {how}",
    ]
    if not found.prompts:
        lines += ["No rendered prompt was recorded; the template was:", found.template_text]
    for number, prompt in enumerate(found.prompts, 1):
        lines += [f"----- prompt {number} of {len(found.prompts)} -----", prompt]
    return "\n".join(lines)


class ProgressBar:
    """A one-line bar on a terminal; a line every tenth of the work otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None, unit: str = "units") -> None:
        self.total, self.unit = total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.started = time.perf_counter()
        self._last_step = -1

    def update(self, done: int, stored: int, skipped: int, failed: int, refused: int = 0) -> None:
        elapsed = time.perf_counter() - self.started
        worked = stored + failed + refused
        eta = (self.total - done) * elapsed / worked if worked else 0.0
        width = 28
        filled = int(width * done / self.total) if self.total else width
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {self.unit}: "
            f"{stored} new, {skipped} already done, {failed} did not fit, "
            f"{refused} refused by the gates; "
            f"{elapsed:.0f} s, about {eta:.0f} s left"
        )
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
            return
        step = done * 10 // self.total if self.total else 10
        if step != self._last_step:
            self._last_step = step
            print(line, file=self.stream, flush=True)

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class _CtrlC:
    """The first Ctrl-C asks the run to stop at the next token; a second one interrupts."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self._old = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt
        self.cancel.set()
        print("\nStopping after the current unit (Ctrl-C again to quit now)...", file=sys.stderr)

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def cmd_suggest(args: argparse.Namespace) -> int:
    from portalreview.llm.errors import LlmError
    from portalreview.store.project import ProjectError
    from portalreview.store.service import StoreError

    try:
        return _suggest(args)
    except (LlmError, StoreError, ProjectError) as exc:
        print(f"portalreview suggest: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _suggest(args: argparse.Namespace) -> int:
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.engines import load_engine
    from portalreview.store.backends import open_project, project_target
    from portalreview.store.service import StudyService

    if args.kind == "drafts" and args.as_annotator:
        print(
            "portalreview suggest: drafts are replies, not answers: drop --as-annotator",
            file=sys.stderr,
        )
        return EXIT_USAGE
    path = project_target(args.path)
    params = GenerationParams(
        max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed
    )
    with open_project(path) as project:
        service = StudyService(project)
        service.catalogs  # noqa: B018 - a damaged study is refused before anything is written
        if args.as_annotator:  # a person's account is refused before the model is loaded
            from portalreview.llm.suggest import existing_model_annotator

            existing_model_annotator(service, args.as_annotator)
        units = _units_to_work_on(args, service)  # bad input refused before anything is written
        if not units:
            print(f"There are no {args.kind} units to work on.", file=sys.stderr)
            return 0
        if looks_like_address(args.model):
            with _connect(args.model, project) as engine:
                return _run(args, service, engine, params, units)
        print(f"Loading {Path(args.model).name}...", file=sys.stderr)
        # in a process of its own: a crash in llama.cpp ends the run with a message, and the
        # answers stored so far stay (each unit is stored in its own transaction)
        with load_engine(
            args.model, n_ctx=args.ctx, n_threads=args.threads, gpu=False if args.cpu else None
        ) as engine:
            print(
                f"Loaded {engine.info.describe()} in {engine.info.load_seconds:.1f} s",
                file=sys.stderr,
            )
            if not engine.sha256_remembered:  # (a file hashed before is not read again)
                print("Hashing the model file (once per file)...", file=sys.stderr)
            print(f"SHA-256 {engine.sha256}", file=sys.stderr)
            return _run(args, service, engine, params, units)


def _units_to_work_on(args: argparse.Namespace, service) -> list[int]:
    """The units the run works on (``--units``, ``--limit``); a unit set that is not there or
    holds another kind, drafts without ``--units`` and an unknown drafting ``--template`` are
    refused (:class:`StoreError`, :class:`TemplateError`)."""
    from portalreview.llm.suggest import drafting_template
    from portalreview.store.service import StoreError
    from portalreview.store.templates import unit_ids

    if args.kind == "drafts":
        if not args.units:
            raise StoreError("drafts need --units SET: the unit set whose cases get drafts")
        drafting_template(service, args.template)  # (the run takes it once defaults are in)
    units = unit_ids(service, None if args.kind == "drafts" else args.kind, args.units)
    return units[: args.limit] if args.limit else units


def _connect(address: str, project):
    """The study's model server, when ``address`` is the one configured for it (the program
    reaches no other)."""
    from portalreview.llm.engines.server import ServerEngine
    from portalreview.llm.model_server import check_allowed, configured_setting

    setting = configured_setting(project)
    check_allowed(address, setting)
    print(f"Connecting to the model server {setting.address}...", file=sys.stderr)
    engine = ServerEngine.connect(setting)
    print(f"Connected: {engine.info.describe()}", file=sys.stderr)
    print(f"SHA-256 {engine.sha256} (as configured for {setting.origin})", file=sys.stderr)
    return engine


def _run(args: argparse.Namespace, service, engine, params, units: list[int]) -> int:
    from portalreview.llm.templates import PromptLibrary
    from portalreview.store.project import ProjectError
    from portalreview.store.service import StoreError

    library = PromptLibrary(service)
    added = library.install_defaults()
    if added:
        print(
            f"Stored the default prompt templates in the project: {', '.join(added)}",
            file=sys.stderr,
        )
    cancel = threading.Event()
    bar = ProgressBar(len(units), unit="cases" if args.kind == "drafts" else "units")
    latest: list = []  # the run's report as of its last unit

    def progress(report, _unit: int) -> None:
        latest[:] = [report]
        bar.update(
            report.done,
            len(report.stored),
            len(report.skipped),
            len(report.failed),
            len(getattr(report, "refused", {})),
        )

    from portalreview.llm.suggest import MODEL_GONE, BatchReport

    try:
        with _CtrlC(cancel):
            report = _batch_or_drafts(
                args, service, engine, params, library, units, cancel, progress, bar
            )
    except (StoreError, ProjectError) as exc:
        bar.finish()
        if not latest:  # refused before any unit was done: bad input, nothing to resume
            raise
        return _stopped_by_the_study(exc, latest[0])  # the study stopped taking saves
    except MODEL_GONE as exc:  # the model went away: as a drafts run, a rerun continues
        bar.finish()
        _summary(latest[0] if latest else BatchReport(len(units)), cut_short=True)
        print(model_gone_message(exc), file=sys.stderr)
        return EXIT_STOPPED
    bar.finish()
    return _summary(report)


def _batch_or_drafts(args, service, engine, params, library, units, cancel, progress, bar):
    """The run itself: drafts for the units' cases, or suggestions (answers) for the units."""
    from portalreview.llm import suggest as sg

    if args.kind == "drafts":
        cases = sg.cases_of_units(service, units)
        bar.total = len(cases)
        template = sg.drafting_template(service, args.template, library)
        return sg.run_drafts(
            service, engine, cases, template, params=params, cancel=cancel, progress=progress
        )
    return sg.run_batch(
        service,
        engine,
        args.kind,
        units,
        library=library,
        annotator=args.as_annotator,
        params=params,
        cancel=cancel,
        progress=progress,
        match_themes=not args.no_themes,
    )


def _stopped_by_the_study(exc: Exception, report) -> int:
    """A save the study refused or could not take (a server that went away, a full disk)
    after some units were done ends the run: what was stored before it stays, and a rerun
    continues from there."""
    _summary(report, cut_short=True)
    print(save_failed_message(exc), file=sys.stderr)
    return EXIT_STOPPED


def save_failed_message(exc: Exception) -> str:
    """What a model run says when a save fails part way (``suggest`` and ``evaluate-model``
    alike): why, that what it stored is kept, and that running it again continues."""
    return (
        f"Stopped: a save failed: {exc}\nWhat the run stored before it is kept. Run the same "
        "command again to continue where it stopped."
    )


def model_gone_message(exc: Exception) -> str:
    """What a model run says when its model went away part way (``suggest`` and
    ``evaluate-model`` alike): why, in command-line words, and that running it again
    continues."""
    from portalreview.llm.engines.process import describe_exit
    from portalreview.llm.errors import ModelProcessDied

    if isinstance(exc, ModelProcessDied):  # its own message speaks to the app's user
        why = f"the model process {describe_exit(exc.exitcode)}"
    else:
        why = str(exc).rstrip(".")
    return (
        f"Stopped: {why}.\nWhat the run stored before it is kept. Run the same command again "
        "to continue where it stopped."
    )


def _summary(report, cut_short: bool = False) -> int:
    """Print what the run did; its exit status (``cut_short``: the counts only, the caller
    says why it stopped)."""
    refused = getattr(report, "refused", {})  # drafts have no quality gates
    print(
        f"{len(report.stored)} stored, {len(refused)} refused by the quality gates"
        f"{_by_reason(refused)}, {len(report.skipped)} already done, "
        f"{len(report.failed)} did not fit, in {report.seconds:.0f} s.",
        file=sys.stderr,
    )
    _listing("Did not fit", report.failed, report.named)
    _listing("Refused by the quality gates (stored for the PI, not offered)", refused, report.named)
    if cut_short:
        return EXIT_STOPPED
    stopped = report.stopped  # the model went away (drafts)
    if report.cancelled or stopped:
        why = f": {stopped.rstrip('.')}" if stopped else ""
        print(
            f"Stopped{why}. Run the same command again to continue where it stopped.",
            file=sys.stderr,
        )
        return EXIT_STOPPED
    return EXIT_REFUSED if report.failed or refused else 0


def _by_reason(refused: dict[int, str]) -> str:
    """The refusals counted by the kind of reason: " (3 echo, 1 text loop)"."""
    from collections import Counter

    from portalreview.llm.gates import category

    if not refused:
        return ""
    counts = Counter(category(reason) for reason in refused.values())
    return " (" + ", ".join(f"{n} {name}" for name, n in counts.most_common()) + ")"


def _listing(title: str, reasons: dict[int, str], named: Callable[[int], str]) -> None:
    """Up to ten reasons, each after its unit or case as ``named`` names it."""
    if not reasons:
        return
    print(f"{title}:", file=sys.stderr)
    for key, reason in list(reasons.items())[:10]:
        print(f"  {named(key)}: {reason}", file=sys.stderr)
    if len(reasons) > 10:
        print(f"  ... and {len(reasons) - 10} more", file=sys.stderr)
