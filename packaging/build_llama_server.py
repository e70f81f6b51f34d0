"""Build llama.cpp's own HTTP server (``llama-server``) from the llama.cpp source that the
installed llama-cpp-python was built from, for the shared-model-server tests and benchmark.

The program itself never starts or builds a server: in a hospital, IT runs ``llama-server`` on
a GPU box (docs/deployment.md). This script gives the tests (``.ci/run``, the README's test
command) and the benchmark a real server of exactly the llama.cpp version our local engine
uses, so that the two can be compared token for token.

Usage::

    python packaging/build_llama_server.py            # CPU build, prints the binary's path
    python packaging/build_llama_server.py --cuda 90  # CUDA build for compute capability 9.0
    python packaging/build_llama_server.py --source DIR --out DIR --shared

The source is llama-cpp-python's source distribution (``pip download --no-binary``, from
pip's cache when it is there); only its ``vendor/llama.cpp`` is extracted. The binary is kept
in the per-user cache (``~/.cache/portalreview/llama-server/<version>-<flavour>/``) and the
build is skipped when it is there. About 7 CPU-minutes for the CPU build (3 min 40 s on two
cores).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "llama-cpp-python"
VENDORED = "vendor/llama.cpp/"
# Top-level folders of llama.cpp the build never reads (test models, documentation, images).
SKIPPED = ("models/", "docs/", "media/", "tools/ui/dist/", ".git")


def llama_cpp_version() -> str:
    return importlib.metadata.version(PACKAGE)


def fetch_source(version: str, into: Path) -> Path:
    """Download the source distribution and extract its vendored llama.cpp into ``into``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             "-d", tmp, f"{PACKAGE}=={version}"],
            check=True,
        )
        archive = next(Path(tmp).glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if _needed(m.name)]
            tar.extractall(into, members=members, filter="data")
    return next(into.glob("*/vendor/llama.cpp"))


def _needed(name: str) -> bool:
    if VENDORED not in name:
        return False
    inside = name.split(VENDORED, 1)[1]
    return not inside.startswith(SKIPPED)


def cmake_options(cuda: str | None, shared: bool) -> list[str]:
    options = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",  # it would download the web page at configure time
        "-DLLAMA_CURL=OFF",
        "-DGGML_NATIVE=OFF",
        f"-DBUILD_SHARED_LIBS={'ON' if shared else 'OFF'}",
    ]
    if cuda:
        options += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda}"]
    return options


def build(source: Path, build_dir: Path, cuda: str | None, shared: bool, jobs: int) -> Path:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build_dir), *generator,
         *cmake_options(cuda, shared)],
        check=True,
    )
    targets = ["llama-server"] + (["llama"] if shared else [])
    subprocess.run(
        ["cmake", "--build", str(build_dir), "-j", str(jobs), "--target", *targets], check=True
    )
    name = "llama-server.exe" if sys.platform == "win32" else "llama-server"
    found = [p for p in build_dir.rglob(name) if p.is_file()]
    if not found:
        raise SystemExit(f"the build finished but {name} is not in {build_dir}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", metavar="ARCH", help="build for CUDA (e.g. 90 for H100/H200)")
    parser.add_argument("--source", type=Path, help="an extracted llama.cpp source folder")
    parser.add_argument("--out", type=Path, help="build here and keep the build folder")
    parser.add_argument("--shared", action="store_true", help="also build libllama as a "
                        "shared library (for llama-cpp-python's LLAMA_CPP_LIB_PATH)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)

    version = llama_cpp_version() if args.source is None else "source"
    flavour = f"cuda{args.cuda}" if args.cuda else "cpu"
    target = None
    if args.out is None:  # the cache the tests look in (portalreview.llm.testing_server)
        from portalreview.llm.testing_server import built_binary

        target = built_binary(version, flavour)
    if target is not None and target.is_file():
        print(target)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source or fetch_source(version, Path(tmp) / "src")
        build_dir = args.out or Path(tmp) / "build"
        binary = build(source, build_dir, args.cuda, args.shared, args.jobs)
        if target is None:
            print(binary)
            return 0
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        shutil.copy2(binary, partial)
        partial.replace(target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
