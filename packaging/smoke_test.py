"""Smoke test of a frozen (installed) PortalReview: start it as a person or a script would and
fail on anything a missing module or library would cause.

    python packaging/smoke_test.py --exe dist/portalreview/portalreview [--log smoke.log]
    python packaging/smoke_test.py --exe "C:/Program Files/PortalReview/portalreview-cli.exe" \
        --gui-exe "C:/Program Files/PortalReview/PortalReview.exe"

Runs with any Python 3.11+ (the standard library only), except that writing the small GGUF
model it loads needs the ``gguf`` package and PortalReview's source (``--model FILE`` gives a
model instead). The program runs in a clean environment: its own HOME and settings folders, no
PYTHONPATH, no LD_LIBRARY_PATH, ``QT_QPA_PLATFORM=offscreen``. Steps:

 1. ``--version``;
 2. ``demo --create`` builds the demo study (the project file must be private to its owner);
 3. ``info --json``: every kind of work is in it;
 4. ``report`` as JSON and as an Excel workbook;
 5. ``suggest`` runs the generated model over a unit with the frozen llama.cpp (CPU); exit 1
    is fine: the quality gates refuse a random model's urgency answer (stored for the PI);
 6. ``selftest``: every module imports, the bundled files are there, llama.cpp loads, Qt starts
    offscreen and the main window shows every kind's editor on the demo, the model generates;
 7. the program with no arguments (the desktop app) starts offscreen and keeps running until
    it is closed;
 8. a team study on PostgreSQL, where this machine has PostgreSQL's server programs (``initdb``,
    ``pg_ctl``; ``--no-server`` skips it, and the log says when it is skipped): a temporary
    server is started (``portalreview.store.testing_postgres``, from the source), the frozen
    program copies the demo study into it (``copy --to``: libpq, psycopg and the Alembic
    steps, which are data files), verifies it and reports from it as JSON, with the same
    figures as from the file, and as an Excel workbook;
 9. every output is searched for the marks of a broken build (import errors, libraries or Qt
    plugins that cannot be loaded, tracebacks).

Exit status 0 when all passed. The whole output goes to ``--log``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# The marks of a broken frozen build, in any output.
BROKEN = re.compile(
    r"Traceback \(most recent call last\)"
    r"|ModuleNotFoundError|ImportError|No module named"
    r"|cannot open shared object file|Failed to load shared library|Failed to load dynlib"
    r"|error while loading shared libraries|DLL load failed|Library not loaded|image not found"
    r"|Could not load the Qt platform plugin|qt\.qpa\.plugin: Could not"
    r"|This application failed to start"
    r"|Failed to execute script|Unhandled exception in script"
    r"|selftest: .*FAILED",
)


#: The report's analyses (its JSON's keys besides the header: report, project, settings, study).
ANALYSES = ("respond", "match", "rank", "urgency", "eppc", "empathy", "facts")


class SmokeFailure(Exception):
    pass


class Smoke:
    def __init__(self, exe: Path, workdir: Path, log) -> None:
        self.exe = exe
        self.workdir = workdir
        self.log = log
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        keep = ("PATH", "SYSTEMROOT", "WINDIR", "TEMP", "TMP", "COMSPEC", "LANG", "TZ")
        self.env = {k: v for k, v in os.environ.items() if k.upper() in keep}
        self.env.update(
            QT_QPA_PLATFORM="offscreen",
            HOME=str(home),
            USERPROFILE=str(home),
            APPDATA=str(home / "AppData" / "Roaming"),
            LOCALAPPDATA=str(home / "AppData" / "Local"),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_CACHE_HOME=str(home / ".cache"),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            XDG_RUNTIME_DIR=str(home / "runtime"),
        )
        (home / "runtime").mkdir(mode=0o700, exist_ok=True)
        self.outputs: list[str] = []

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def run(self, *args: str, exe: Path | None = None, timeout: float = 600, ok=(0,)) -> str:
        command = [str(exe or self.exe), *args]
        self.say("$ " + " ".join(command))
        started = time.perf_counter()
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            env=self.env,
            cwd=self.workdir,
            timeout=timeout,
        )
        output = result.stdout + result.stderr
        self.outputs.append(output)
        for line in output.splitlines():
            self.log.write("  | " + line + "\n")
        self.say(f"  -> exit {result.returncode} in {time.perf_counter() - started:.1f} s")
        if result.returncode not in ok:
            raise SmokeFailure(
                f"{' '.join(args) or 'the program'} exited {result.returncode}:\n" + output[-3000:]
            )
        return result.stdout

    def start_and_close_the_app(self, exe: Path, seconds: float = 8.0) -> None:
        """The desktop app, with no arguments: it must still be running after ``seconds``."""
        self.say(f"$ {exe}   (the desktop app, offscreen, for {seconds:.0f} s)")
        out = self.workdir / "app-output.txt"
        with out.open("w") as fh:
            process = subprocess.Popen(
                [str(exe)],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.workdir,
            )
            try:
                process.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                running = True
            else:
                running = False
        output = out.read_text(errors="replace")
        self.outputs.append(output)
        for line in output.splitlines():
            self.log.write("  | " + line + "\n")
        if not running:
            raise SmokeFailure(
                f"the app stopped by itself (exit {process.returncode}):\n" + output[-3000:]
            )
        self.say("  -> still running; closed")


def write_model(path: Path) -> Path:
    """A tiny random GGUF model (portalreview.llm.testing_model; needs the gguf package)."""
    sys.path.insert(0, str(REPO))
    from portalreview.llm.testing_model import TINY, prompt_corpus
    from portalreview.llm.testing_model import write_model as write

    return write(path, TINY, corpus=prompt_corpus())


def check_team_study(smoke: Smoke, demo: Path, file_report: dict) -> None:
    """Step 8: the demo study copied to a temporary PostgreSQL server, verified and reported
    from by the frozen program (see the module docstring)."""
    if os.name != "posix":  # (testing_postgres runs the server as another Unix account)
        smoke.say("team study on PostgreSQL: SKIPPED (the test server is started on Unix only)")
        return
    sys.path.insert(0, str(REPO))
    from portalreview.store import testing_postgres

    if testing_postgres.find_programs() is None:
        smoke.say("team study on PostgreSQL: SKIPPED (no initdb / pg_ctl on this machine)")
        return
    folder = Path(tempfile.mkdtemp(prefix="portalreview-smoke-pg-"))
    folder.chmod(0o755)  # the server may run as another account (never as root)
    try:
        with testing_postgres.running(folder / "cluster") as server:
            address = server.dsn(server.new_database())
            smoke.run("copy", str(demo), "--to", address)
            smoke.run("verify", address)
            smoke.run(
                "report", address, "--format", "json", "-o", "server.json", "--resamples", "50"
            )
            # The workbook's provenance sheet asks the database for its tables (a frozen
            # program needs SQLAlchemy's PostgreSQL inspection modules bundled).
            smoke.run(
                "report", address, "--format", "xlsx", "-o", "server.xlsx", "--resamples", "50"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report = json.loads((smoke.workdir / "server.json").read_text(encoding="utf-8"))
    differ = [part for part in (*ANALYSES, "study") if report.get(part) != file_report.get(part)]
    if differ:
        raise SmokeFailure(f"the server study's report differs from the file's: {differ}")
    if (smoke.workdir / "server.xlsx").read_bytes()[:2] != b"PK":
        raise SmokeFailure("server.xlsx is not a workbook")
    smoke.say(
        "team study on PostgreSQL: copied, verified, reported as JSON (the same figures)"
        " and as a workbook"
    )


def check_tree(exe: Path, smoke: Smoke, allow_native: bool) -> None:
    """What must be in the folder beside the program."""
    root = exe.resolve().parent
    internal = root / "_internal"
    if not internal.is_dir():  # a macOS .app keeps it in Contents/Frameworks
        internal = root.parent / "Frameworks" if (root.parent / "Frameworks").is_dir() else root
    llama = [p for p in (internal / "llama_cpp" / "lib").glob("*")] if internal.is_dir() else []
    offscreen = [p for p in internal.rglob("*qoffscreen*")]
    smoke.say(f"bundle: {internal}")
    smoke.say(f"  llama.cpp libraries: {', '.join(sorted(p.name for p in llama)) or 'NONE'}")
    smoke.say(
        f"  Qt offscreen plugin: {', '.join(str(p.relative_to(internal)) for p in offscreen)}"
    )
    if not llama:
        raise SmokeFailure("llama.cpp's libraries are not in the bundle")
    if not offscreen:
        raise SmokeFailure("Qt's offscreen platform plugin is not in the bundle")
    if not (internal / "resources" / "prompts").is_dir():
        raise SmokeFailure("resources/prompts is not in the bundle")
    if not (internal / "README.md").is_file() or not (internal / "docs" / "formats.md").is_file():
        raise SmokeFailure("the user guide (README.md, docs/) is not in the bundle")
    networking = [  # (a link left pointing at nothing holds no code)
        p.name for p in internal.rglob("*") if re.search(r"Qt6?Network|qvnc", p.name) and p.exists()
    ]
    if networking:
        raise SmokeFailure(f"Qt networking code is in the bundle: {', '.join(networking)}")
    objdump = shutil.which("objdump")
    cpu = [p for p in internal.rglob("libggml-cpu*.so*")]
    if objdump and cpu and not allow_native:
        # A build for other machines must not use the build machine's own CPU features: the
        # portable x86-64 build of ggml uses AVX2 at most, never AVX-512 (zmm registers).
        code = subprocess.run([objdump, "-d", str(cpu[0])], capture_output=True, text=True)
        zmm = code.stdout.count("%zmm")
        smoke.say(f"  {cpu[0].name}: {zmm} AVX-512 instructions")
        if zmm:
            raise SmokeFailure(
                f"{cpu[0].name} uses AVX-512: llama.cpp was built with the build machine's "
                "native CPU flags; rebuild with CMAKE_ARGS=-DGGML_NATIVE=OFF"
            )


def smoke_test(args: argparse.Namespace) -> None:
    exe = Path(args.exe).absolute()  # run through a link as given (/usr/bin/portalreview)
    if not exe.exists():
        raise SmokeFailure(f"{exe} does not exist")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="portalreview-smoke-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log) if args.log else workdir / "smoke.log"
    with log_path.open("w", encoding="utf-8") as log:
        smoke = Smoke(exe, workdir, log)
        started = time.perf_counter()
        check_tree(exe, smoke, args.allow_native)

        version = smoke.run("--version").strip()
        if not version.startswith("portalreview "):
            raise SmokeFailure(f"unexpected --version output {version!r}")

        demo = workdir / "demo.prproj"
        smoke.run("demo", "--create", str(demo))
        if os.name == "posix" and stat.S_IMODE(demo.stat().st_mode) != 0o600:
            raise SmokeFailure(f"the project file is not private: {oct(demo.stat().st_mode)}")
        info = json.loads(smoke.run("info", str(demo), "--json"))
        kinds = {kind for kind, data in info["kinds"].items() if data["units"]}
        if len(kinds) < 7:
            raise SmokeFailure(f"the demo study lacks kinds of work: {sorted(kinds)}")

        smoke.run("report", str(demo), "--format", "json", "-o", "report.json", "--resamples", "50")
        report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
        if not report:
            raise SmokeFailure("the JSON report is empty")
        smoke.run("report", str(demo), "--format", "xlsx", "-o", "report.xlsx", "--resamples", "50")
        if (workdir / "report.xlsx").read_bytes()[:2] != b"PK":
            raise SmokeFailure("report.xlsx is not a workbook")

        model = Path(args.model) if args.model else write_model(workdir / "tiny.gguf")
        smoke.run(
            "suggest",
            str(demo),
            "--model",
            str(model),
            "--kind",
            "urgency",
            "--limit",
            "1",
            "--cpu",
            ok=(0, 1),  # 1: the gates refused the random weights' answer, stored all the same
        )
        selftest = [
            "selftest",
            "--project",
            str(demo),
            "--as",
            "np_chloe",
            "--model",
            str(model),
            "--cpu",
        ]
        smoke.run(*selftest, "--log", str(workdir / "selftest.log"))
        if args.gui_exe:  # Windows: the program without a console writes only its log
            gui_log = workdir / "selftest-gui.log"
            smoke.run(*selftest, "--log", str(gui_log), exe=Path(args.gui_exe))
            smoke.outputs.append(gui_log.read_text(encoding="utf-8", errors="replace"))
        smoke.start_and_close_the_app(Path(args.gui_exe) if args.gui_exe else exe)
        if args.no_server:
            smoke.say("team study on PostgreSQL: SKIPPED (--no-server)")
        else:
            check_team_study(smoke, demo, report)

        broken = [m.group(0) for out in smoke.outputs for m in BROKEN.finditer(out)]
        if broken:
            raise SmokeFailure("the output shows a broken build: " + ", ".join(sorted(set(broken))))
        smoke.say(
            f"SMOKE TEST PASSED in {time.perf_counter() - started:.0f} s ({version}; "
            f"log {log_path})"
        )
    if not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exe", required=True, help="the frozen program (the console one)")
    parser.add_argument("--gui-exe", help="Windows: the program without a console as well")
    parser.add_argument("--model", help="a GGUF model to load (default: write a tiny one)")
    parser.add_argument("--workdir", help="where to work (default: a temporary folder)")
    parser.add_argument("--log", help="write the whole output here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--no-server", action="store_true", help="skip the team study on PostgreSQL (step 8)"
    )
    parser.add_argument(
        "--allow-native", action="store_true", help="do not fail on an AVX-512 llama.cpp build"
    )
    args = parser.parse_args(argv)
    try:
        smoke_test(args)
    except (SmokeFailure, subprocess.TimeoutExpired, OSError) as exc:
        print(f"SMOKE TEST FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
