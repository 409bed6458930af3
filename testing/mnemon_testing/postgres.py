"""A private PostgreSQL server for tests: initdb into a temporary folder, a Unix socket there.

`PostgresServer.start()` finds the server's binaries (on `PATH`, through `pg_config
--bindir`, or in `/usr/lib/postgresql/*/bin`), creates a cluster in a new temporary folder,
and starts it listening only on a Unix socket in that folder (no TCP port), with `fsync` and
`synchronous_commit` left on so durability tests mean what they say. Run as root, the server
runs as an unprivileged user (`mnemon-postgres`, created when missing), because PostgreSQL
refuses to run as root. `stop()` stops it and removes the folder.

`pgvector_bindir()` finds a server with the pgvector extension: the one the `pgserver`
wheel ships (PostgreSQL 16 with pgvector), so a plugin's tests can prove both ways of keeping
vectors on any machine. The `postgres_server` and `pgvector_server` fixtures of this kit's
pytest plugin start one server each per test session, on first use; when the binaries are
missing they skip, except under `CI=true`, where they fail.

Importing this module imports only the standard library: pytest is imported by
`start_test_server` alone, and psycopg not at all (the tests connect with their own driver).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "PostgresServer",
    "PostgresUnavailable",
    "find_bindir",
    "pgvector_bindir",
    "start_test_server",
]

SERVER_USER = "mnemon-postgres"
SUPERUSER = "postgres"
_START_TIMEOUT = 60


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries are missing, or the server could not start."""


def find_bindir() -> Path:
    """The folder holding `initdb`, `pg_ctl` and `postgres`.

    Raises:
        PostgresUnavailable: no such folder on this machine.
    """
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if found and (Path(found) / "initdb").exists():
            return Path(found)
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise PostgresUnavailable("initdb and pg_ctl were not found (install PostgreSQL)")


def pgvector_bindir() -> Path:
    """The bin folder of the PostgreSQL with pgvector that the `pgserver` wheel ships.

    Only its binaries are used (this module's server runs them), not its Python API, so
    nothing of it is imported.

    Raises:
        PostgresUnavailable: `pgserver` is not installed, or holds no server.
    """
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("pgserver is not installed (pip install pgserver)")
    bindir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bindir / "initdb").exists():
        raise PostgresUnavailable(f"pgserver holds no initdb in {bindir}")
    return bindir


def _reachable_by_anyone(path: Path) -> bool:
    """Whether a user other than the owner may reach `path` (every folder above it included)."""
    return all(
        folder.stat().st_mode & stat.S_IXOTH for folder in (path, *path.parents) if folder.exists()
    )


def _copy_installation(bindir: Path, into: Path) -> Path:
    """Copy the installation `bindir` belongs to under `into`; the copy's bin folder.

    The binaries of a wheel find their shared libraries relative to themselves, in the
    `<package>.libs` folder beside the package (auditwheel's layout: `pgserver.libs` for
    `pgserver/pginstall/bin`), so the copy keeps the layout two folders up, with that folder.
    """
    installation = bindir.parent
    top = installation.parent.parent
    target = into / installation.relative_to(top)
    shutil.copytree(
        installation, target, symlinks=True, ignore=shutil.ignore_patterns("include", "*.a")
    )
    libraries = top / f"{installation.parent.name}.libs"
    if libraries.is_dir():
        shutil.copytree(libraries, into / libraries.name, symlinks=True)
    return target / bindir.name


def _server_account() -> tuple[int, int] | None:
    """The (uid, gid) to run the server as; None when this process is not root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(SERVER_USER)
    return entry.pw_uid, entry.pw_gid


class PostgresServer:
    """One private PostgreSQL cluster: start, stop (or kill), restart, connection strings."""

    def __init__(
        self, bindir: Path | None = None, settings: Mapping[str, str] | None = None
    ) -> None:
        """A server not started yet; `settings` are extra server settings (`-c name=value`).

        Raises:
            PostgresUnavailable: a setting's name or value holds more than letters, digits
                and `._-`.
        """
        for name, value in (settings or {}).items():
            if not all(
                part.replace(".", "").replace("_", "").replace("-", "").isalnum()
                for part in (name, value)
            ):
                raise PostgresUnavailable(f"setting {name!r}: letters, digits and ._- only")
        self._settings = dict(settings or {})
        self._bindir = bindir
        self._account: tuple[int, int] | None = None
        self.folder: Path | None = None

    @property
    def data_directory(self) -> Path:
        """The cluster's data folder."""
        return self._folder / "data"

    @property
    def socket_directory(self) -> Path:
        """The folder holding the server's Unix socket."""
        return self._folder

    @property
    def _folder(self) -> Path:
        if self.folder is None:
            raise PostgresUnavailable("the server was not started")
        return self.folder

    def dsn(self, database: str = "postgres") -> str:
        """A libpq connection string for `database` on this server (no password: trust)."""
        return f"host={self.socket_directory} dbname={database} user={SUPERUSER}"

    def _run(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        bindir = self._bindir or find_bindir()
        extra: dict[str, Any] = {}
        if self._account is not None:
            extra = {"user": self._account[0], "group": self._account[1], "extra_groups": []}
        result = subprocess.run(
            [str(bindir / arguments[0]), *arguments[1:]],
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
            env=self._environment(),
            timeout=_START_TIMEOUT,
            **extra,
        )
        if check and result.returncode != 0:
            raise PostgresUnavailable(
                f"{arguments[0]} failed ({result.returncode}): {result.stderr.strip()[-2000:]}"
            )
        return result

    def _environment(self) -> Mapping[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TZ")
        return {key: value for key, value in os.environ.items() if key in keep}

    def start(self) -> PostgresServer:
        """Create the cluster and start the server.

        Raises:
            PostgresUnavailable: the binaries are missing or the server did not start.
        """
        self._bindir = self._bindir or find_bindir()
        if not (self._bindir / "initdb").exists():
            raise PostgresUnavailable(f"no initdb in {self._bindir}")
        self._account = _server_account()
        self.folder = Path(tempfile.mkdtemp(prefix="mnemon-pg-"))
        if self._account is not None:
            os.chown(self.folder, *self._account)
            if not _reachable_by_anyone(self._bindir):
                # the server's user cannot reach binaries under a private folder (a virtual
                # environment in a 0700 temporary folder): it runs a copy in its own folder
                self._bindir = _copy_installation(self._bindir, self.folder / "installation")
        self.folder.chmod(0o700)
        self._run(
            "initdb",
            "--pgdata",
            str(self.data_directory),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-instructions",
            # only initdb's own final flush is skipped; the server runs with fsync on
            "--no-sync",
        )
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server on the existing cluster (after `stop(keep=True)` or `kill()`).

        Raises:
            PostgresUnavailable: the server did not start.
        """
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_directory}' "
            "-c max_connections=120 -c shared_buffers=32MB"
        )
        options += "".join(f" -c {name}={value}" for name, value in self._settings.items())
        self._run(
            "pg_ctl",
            "start",
            "--wait",
            "--timeout",
            str(_START_TIMEOUT),
            "--pgdata",
            str(self.data_directory),
            "--log",
            str(self._folder / "server.log"),
            "-o",
            options,
        )

    def kill(self) -> None:
        """Stop the server at once, as a crash would (`pg_ctl stop -m immediate`)."""
        self._run(
            "pg_ctl", "stop", "--wait", "-m", "immediate", "--pgdata", str(self.data_directory)
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its folder; idempotent."""
        if self.folder is None:
            return
        self._run(
            "pg_ctl",
            "stop",
            "--wait",
            "-m",
            "fast",
            "--pgdata",
            str(self.data_directory),
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None


def start_test_server(
    server: PostgresServer | None = None, *, pgvector: bool = False
) -> PostgresServer:
    """Start `server` (a new one by default) for a test session, or skip, or fail in CI.

    With `pgvector=True` the new server is the `pgserver` wheel's PostgreSQL, which has the
    pgvector extension. Without PostgreSQL (or pgserver) the tests that need it are skipped
    with the reason, except when `CI=true`: a CI run must prove the PostgreSQL code, so there
    it is a failure.
    """
    import pytest  # only here: importing this module does not import pytest

    try:
        server = server or PostgresServer(pgvector_bindir() if pgvector else None)
        return server.start()
    except PostgresUnavailable as exc:
        if server is not None:
            server.stop()
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL could not start in CI: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL is not available here: {exc}")
