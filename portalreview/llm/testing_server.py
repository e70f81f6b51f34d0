"""Start a real llama.cpp server (``llama-server``) on this machine, for tests and benchmarks.

The program never starts a server: IT runs one on a GPU box (docs/deployment.md). The tests and
``benchmarks/bench_llm_server.py`` start the binary that ``packaging/build_llama_server.py``
built, on 127.0.0.1 and a free port, and stop it again. :func:`find_binary` says where it is
(``PORTALREVIEW_LLAMA_SERVER`` overrides).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


def built_binary(version: str | None = None, flavour: str = "cpu") -> Path:
    """Where ``packaging/build_llama_server.py`` keeps the llama-server it built for a
    llama-cpp-python version (this one's by default) and flavour ("cpu", "cuda90"...)."""
    import importlib.metadata

    base = os.environ.get("PORTALREVIEW_TOOL_CACHE")
    root = Path(base) if base else (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "portalreview"
    )
    version = version or importlib.metadata.version("llama-cpp-python")
    name = "llama-server.exe" if sys.platform == "win32" else "llama-server"
    return root / "llama-server" / f"{version}-{flavour}" / name


def find_binary() -> Path | None:
    """The llama-server built for this llama-cpp-python version, or None."""
    if os.environ.get("PORTALREVIEW_LLAMA_SERVER"):
        path = Path(os.environ["PORTALREVIEW_LLAMA_SERVER"])
        return path if path.is_file() else None
    path = built_binary()
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningServer:
    process: subprocess.Popen
    port: int
    log: Path
    tls: bool = False

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """Stop it at once, as a crash or a pulled cable would."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start(
    binary: Path,
    model: Path,
    *,
    port: int | None = None,
    slots: int = 2,
    ctx_per_slot: int = 4096,
    threads: int = 1,
    gpu: bool = False,
    flash_attn: str = "off",
    log: Path | None = None,
    extra: Sequence[str] = (),
    ready_seconds: float = 120.0,
    tls: tuple[Path, Path] | None = None,
) -> RunningServer:
    """Start llama-server on 127.0.0.1 and wait until ``/health`` says ok. ``tls``: a private
    key and certificate file (PEM) to serve HTTPS with.

    ``flash_attn`` "off" by default: the local engine does not use flash attention, and with it
    on, llama.cpp's probabilities differ from the local engine's by up to about 0.01."""
    port = port or free_port()
    log = log or Path(os.devnull)
    command = [
        str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
        "-np", str(slots), "-c", str(slots * ctx_per_slot), "-t", str(threads),
        "-ngl", "999" if gpu else "0", "-fa", flash_attn, "--no-webui", *extra,
    ]
    if tls is not None:
        command += ["--ssl-key-file", str(tls[0]), "--ssl-cert-file", str(tls[1])]
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = RunningServer(process, port, log, tls is not None)
    deadline = time.monotonic() + ready_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode}; see {log}")
        if _healthy(port, tls is not None):
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"llama-server did not become ready in {ready_seconds:.0f} s; see {log}")


@contextlib.contextmanager
def running(binary: Path, model: Path, **options) -> Iterator[RunningServer]:
    server = start(binary, model, **options)
    try:
        yield server
    finally:
        server.stop()


def _healthy(port: int, tls: bool = False) -> bool:
    if tls:  # the test's own certificate: this probe only asks whether it is up
        context = ssl._create_unverified_context()
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=2, context=context
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/health")
        response = conn.getresponse()
        return response.status == 200 and json.loads(response.read()).get("status") == "ok"
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()
