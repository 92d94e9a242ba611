"""A throwaway PostgreSQL server for the DuckLake tests: initdb into a temporary directory,
``postgres`` on a free 127.0.0.1 port, stopped and deleted afterwards.

The binaries are looked up on PATH, then in Debian's /usr/lib/postgresql/*/bin (where
``apt-get install postgresql`` puts them, off PATH). PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` user (Debian's package creates it) or else
``nobody``; its directory is made outside pytest's tmp_path, which other users cannot enter.
Where the binaries are missing, the tests that need the server are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

READY_SECONDS = 60.0
SUPERUSER = "juryflow"
_BINARIES = ("initdb", "postgres", "createdb")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here; the message says why."""


@dataclass(frozen=True, slots=True)
class PgServer:
    """A running server: trust authentication on 127.0.0.1 only."""

    host: str
    port: int
    user: str
    bindir: Path
    directory: Path

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string, as ``ducklake:postgres:`` takes it."""
        return f"dbname={dbname} host={self.host} port={self.port} user={self.user}"

    def create_database(self, name: str) -> str:
        """A new empty database (one lake each); returns its DSN."""
        subprocess.run(
            [str(self.bindir / "createdb"), "-h", self.host, "-p", str(self.port),
             "-U", self.user, name],
            check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return self.dsn(name)


def find_bindir() -> Path:
    """The directory holding initdb, postgres and createdb; PostgresUnavailable if none."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        # newest major version first
        versions = sorted(debian.glob("*/bin"), key=lambda p: _major(p.parent.name), reverse=True)
        candidates.extend(versions)
    for bindir in candidates:
        if all((bindir / name).is_file() for name in _BINARIES):
            return bindir
    raise PostgresUnavailable(
        "PostgreSQL binaries (initdb, postgres) not found on PATH or in "
        "/usr/lib/postgresql/*/bin; install them with `apt-get install postgresql`"
    )


def _major(name: str) -> int:
    return int(name) if name.isdigit() else -1


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: None (this user) unless root, whom PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable(
        "running as root and neither a `postgres` nor a `nobody` user exists; "
        "PostgreSQL refuses to run as root"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class _Identity:
    """Popen's user/group/extra_groups: None each to stay who we are."""

    user: int | None = None
    group: int | None = None
    extra_groups: list[int] | None = None


def _as(account: pwd.struct_passwd | None) -> _Identity:
    if account is None:
        return _Identity()
    return _Identity(account.pw_uid, account.pw_gid, [])


@contextlib.contextmanager
def running_postgres() -> Iterator[PgServer]:
    """Start a server, yield it, stop it (fast shutdown, then SIGKILL) and delete its files."""
    bindir = find_bindir()
    account = _server_user()
    who = _as(account)
    directory = Path(tempfile.mkdtemp(prefix="juryflow-pg-"))
    try:
        if account is not None:
            os.chown(directory, account.pw_uid, account.pw_gid)
        data, sockets, log = directory / "data", directory / "sockets", directory / "server.log"
        env = {**os.environ, "LC_ALL": "C", "HOME": str(directory)}
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
             "-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True, text=True, timeout=120, env=env, cwd=directory,
            user=who.user, group=who.group, extra_groups=who.extra_groups,
        )  # fmt: skip
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
        sockets.mkdir()
        if account is not None:
            os.chown(sockets, account.pw_uid, account.pw_gid)
        port = _free_port()
        with log.open("wb") as log_file:
            server = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-p", str(port),
                 "-h", "127.0.0.1", "-k", str(sockets),
                 # a test server: durability is not worth the fsyncs
                 "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=directory,
                start_new_session=True,
                user=who.user, group=who.group, extra_groups=who.extra_groups,
            )  # fmt: skip
        try:
            _wait_ready(server, log)
            yield PgServer("127.0.0.1", port, SUPERUSER, bindir, directory)
        finally:
            _stop(server)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _wait_ready(server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "ready to accept connections" in text:
            return
        if server.poll() is not None:
            raise PostgresUnavailable(f"postgres exited at start: {text.strip()[-500:]}")
        time.sleep(0.05)
    raise PostgresUnavailable(f"postgres not ready after {READY_SECONDS:.0f} s")


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the test session; skipped (with the reason) if impossible."""
    try:
        with running_postgres() as server:
            yield server
    except PostgresUnavailable as error:
        pytest.skip(f"no PostgreSQL server for the DuckLake tests: {error}")
