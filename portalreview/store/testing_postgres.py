"""Start a real PostgreSQL server on this machine, for tests and benchmarks.

The program never starts a database server: hospital IT runs one (docs/deployment.md). The
tests and ``benchmarks/bench_team_server.py`` start one from the machine's own PostgreSQL
programs (``initdb``, ``pg_ctl``) in a temporary folder, listening on 127.0.0.1 and a free port
only, with password (SCRAM) authentication, and stop it again. PostgreSQL refuses to run as
root, so as root the server runs as the ``postgres`` (or ``nobody``) account.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ADMIN = "portalreview_admin"


def find_programs() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``, or None where PostgreSQL is not installed
    (``PORTALREVIEW_PG_BIN`` overrides)."""
    if os.environ.get("PORTALREVIEW_PG_BIN"):
        folder = Path(os.environ["PORTALREVIEW_PG_BIN"])
        return folder if (folder / "initdb").is_file() else None
    initdb = shutil.which("initdb")
    if initdb is None:
        for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True):
            return candidate.parent
        return None
    return Path(initdb).resolve().parent  # Debian links initdb alone into /usr/local/bin


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_account() -> str | None:
    """The account the server runs as: None (this one) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root, and there is no postgres or nobody account")


@dataclass
class RunningPostgres:
    """A server started by :func:`start`; ``admin_password`` is its superuser's."""

    folder: Path
    port: int
    admin_password: str
    bin: Path
    account: str | None

    def url(self, database: str, user: str = ADMIN, password: str | None = None) -> str:
        """A SQLAlchemy URL (``postgresql+psycopg://``) for ``user`` on ``database``."""
        password = self.admin_password if password is None and user == ADMIN else password
        auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str, user: str = ADMIN, password: str | None = None) -> str:
        """The same as :meth:`url` for plain psycopg (``postgresql://``)."""
        return self.url(database, user, password).replace("postgresql+psycopg://", "postgresql://")

    def admin_sql(self, *statements: str, database: str = "postgres") -> None:
        """Run statements as the superuser outside a transaction (CREATE DATABASE...)."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def member_login(self, project, annotator: str) -> tuple[str, str]:
        """A new database login role working as ``annotator`` in the server study
        ``project`` (``add_member``): its name and password."""
        role, password = f"{annotator}_{secrets.token_hex(3)}", secrets.token_urlsafe(12)
        self.admin_sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        project.add_member(role, annotator)
        return role, password

    def new_database(self, prefix: str = "study") -> str:
        """A new, empty database; its name."""
        name = f"{prefix}_{secrets.token_hex(6)}"
        self.admin_sql(f'CREATE DATABASE "{name}"')
        return name

    def clone_database(self, template: str, prefix: str = "study") -> str:
        """A new database copied from ``template`` (which nobody may be connected to)."""
        name = f"{prefix}_{secrets.token_hex(6)}"
        self.admin_sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args],
            user=self.account,
            capture_output=True,
            text=True,
            check=check,
            timeout=PG_CTL_WAIT_S + 30,
        )

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("stop", "-m", mode, "-w", "-t", str(PG_CTL_WAIT_S), check=False)

    def restart(self) -> None:
        """Start the server again after :meth:`stop` (same folder, port and passwords)."""
        log = str(self.folder / "server.log")
        self.pg_ctl("start", "-w", "-t", str(PG_CTL_WAIT_S), "-l", log)

    def checkpoint(self) -> None:
        """Write everything to the data files, so that a start after an immediate stop has
        only what came after to replay (seconds, not the minutes a loaded machine took to
        replay the run's database copies)."""
        self.admin_sql("CHECKPOINT")


#: How long ``pg_ctl`` waits for the server to start or stop. Its own default (60 s) was too
#: short for a crash recovery on a loaded 2-core machine.
PG_CTL_WAIT_S = 300


def start(folder: Path, bin_folder: Path | None = None) -> RunningPostgres:
    """A new cluster in ``folder`` (which must be empty or absent), started and answering."""
    bin_folder = bin_folder or find_programs()
    if bin_folder is None:
        raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    account = _server_account()
    folder.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    pwfile = folder / "admin.pw"
    pwfile.write_text(password + "\n")
    if account is not None:
        entry = pwd.getpwnam(account)
        for path in (folder, pwfile):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    data = folder / "data"
    subprocess.run(
        [
            str(bin_folder / "initdb"), "-D", str(data), "-U", ADMIN, f"--pwfile={pwfile}",
            "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8",
        ],
        user=account, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    pwfile.unlink()
    port = _free_port()
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"\nlisten_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{folder}'\nfsync = on\nmax_connections = 200\n"
            "checkpoint_timeout = 30s\n"  # little to replay after an immediate stop
        )
    server = RunningPostgres(folder, port, password, bin_folder, account)
    server.restart()
    return server


@contextlib.contextmanager
def running(folder: Path, bin_folder: Path | None = None) -> Iterator[RunningPostgres]:
    """:func:`start`, stopped (immediately) when the block ends."""
    server = start(folder, bin_folder)
    try:
        yield server
    finally:
        server.stop("immediate")
        _wait_gone(server)


def _wait_gone(server: RunningPostgres, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while (server.folder / "data" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
