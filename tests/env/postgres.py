"""A PostgreSQL server on loopback for the Debezium tests, and Debezium's PostgreSQL plugin.

PostgreSQL is Debian's ``postgresql`` package (installed by ``tests/env/provision.sh``), Debezium's
connector the plugin directory provision.sh resolves from Maven Central. The server is started and
stopped like the servers of :mod:`tests.env.servers`: a fresh ``initdb`` into its own directory,
its own free loopback port, its log in ``workdir/postgres.log``, SIGTERM then SIGKILL to its
process group.

PostgreSQL refuses to run as root. When the tests run as root the server runs as the ``postgres``
account that Debian's package creates for exactly this (nothing is added to the system), switched
to with ``setpriv``, which execs the server in place: no intermediate process, so the process
group ManagedProcess signals is PostgreSQL's own. pytest's temporary directories are private to
root (0700), which that account cannot enter, so then the data directory and the unix socket live
in a private directory of their own under the system temp dir (``workdir/run`` links to it) that
:meth:`PostgresServer.close` removes; otherwise both are in the workdir.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Self

from tests.env.servers import (
    PROVISION_HINT,
    ManagedProcess,
    MissingTestEnvError,
    ServerStartError,
    _Server,
    _unique_workdir,
    cache_dir,
    free_port,
    wait_until,
)

#: Debian bookworm's PostgreSQL, the major version provision.sh installs.
POSTGRES_VERSION: Final = "15"
#: Kept equal to ``debezium.version`` in tests/env/debezium/pom.xml.
DEBEZIUM_VERSION: Final = "3.6.1.Final"
DEBEZIUM_POSTGRES_CONNECTOR: Final = "io.debezium.connector.postgresql.PostgresConnector"
#: The account PostgreSQL runs as when the tests run as root (created by Debian's package).
SERVER_ACCOUNT: Final = "postgres"


def postgres_bin_dir() -> Path:
    bindir = Path(f"/usr/lib/postgresql/{POSTGRES_VERSION}/bin")
    for tool in ("initdb", "postgres", "pg_isready", "psql"):
        if not os.access(bindir / tool, os.X_OK):
            raise MissingTestEnvError(
                f"PostgreSQL {POSTGRES_VERSION}'s {tool} not found in {bindir} (Debian package postgresql); "
                f"{PROVISION_HINT}"
            )
    return bindir


def debezium_postgres_plugin_dir() -> Path:
    """The directory holding Debezium's PostgreSQL connector and its dependencies' jars.

    Raises MissingTestEnvError (the fixtures turn it into a failure, never a skip) when
    provision.sh has not resolved it completely: it writes ``.complete`` last.
    """
    plugin = cache_dir() / f"debezium-{DEBEZIUM_VERSION}" / "debezium-connector-postgres"
    if not (plugin / ".complete").is_file():
        raise MissingTestEnvError(
            f"Debezium {DEBEZIUM_VERSION} PostgreSQL connector not found in {plugin}; {PROVISION_HINT}"
        )
    return plugin


def debezium_plugin_path() -> Path:
    """The ``plugin.path`` entry for Debezium's PostgreSQL connector: the directory *above* the
    plugin directory. Connect gives every child of a plugin.path entry its own class loader, so
    naming the plugin directory itself would load each of its jars alone (the connector without
    debezium-core) instead of all of them together."""
    return debezium_postgres_plugin_dir().parent


class PostgresServer(_Server):
    """One PostgreSQL server on 127.0.0.1 set up for logical decoding (Debezium's ``pgoutput``).

    The role named by ``superuser`` (its password in ``password``, random per server) owns database
    ``database``; TCP connections from loopback authenticate with SCRAM, the unix socket (in a
    directory only the server's account can enter) trusts. ``stop()`` + ``start()`` is a server
    restart that keeps the data; ``close()`` ends it for good.
    """

    def __init__(
        self,
        root: Path,
        *,
        name: str = "postgres",
        database: str = "app",
        max_replication_slots: int = 10,
        max_wal_senders: int = 10,
        timeout: float = 60.0,
    ) -> None:
        self.workdir = _unique_workdir(root, name)
        self.name = name
        self.database = database
        self.max_replication_slots = max_replication_slots
        self.max_wal_senders = max_wal_senders
        self.timeout = timeout
        self.port = free_port()
        self.host = "127.0.0.1"
        self.superuser = SERVER_ACCOUNT
        self.password = secrets.token_hex(12)
        self.log_path = self.workdir / "postgres.log"
        self.startup_seconds: dict[str, float] = {}
        # Set by _prepare_dirs: where the data and the socket live (see the module docstring).
        self.run_dir: Path | None = None
        self._private_run_dir = False
        self._created = False
        self._proc: ManagedProcess | None = None

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self._proc] if self._proc is not None else []

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive

    @property
    def data_dir(self) -> Path:
        assert self.run_dir is not None, "not initialised yet"
        return self.run_dir / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.run_dir is not None, "not initialised yet"
        return self.run_dir / "socket"

    def server_settings(self) -> dict[str, str]:
        """Passed as ``-c`` options: what Debezium needs, loopback only, and no fsync (test data is
        disposable, as etcd's here)."""
        return {
            "port": str(self.port),
            "listen_addresses": self.host,
            "unix_socket_directories": str(self.socket_dir),
            "wal_level": "logical",
            "max_replication_slots": str(self.max_replication_slots),
            "max_wal_senders": str(self.max_wal_senders),
            "fsync": "off",
            "full_page_writes": "off",
            "synchronous_commit": "off",
        }

    def start(self) -> Self:
        if self.alive:
            raise RuntimeError(f"PostgreSQL {self.name} is already running")
        bindir = postgres_bin_dir()
        t0 = time.monotonic()
        try:
            if self.run_dir is None:
                self._initdb(bindir)
                self.startup_seconds["initdb"] = time.monotonic() - t0
            options = [arg for key, value in self.server_settings().items() for arg in ("-c", f"{key}={value}")]
            self._proc = ManagedProcess(
                f"postgres[{self.name}]",
                [*self._as_server_account(), str(bindir / "postgres"), "-D", str(self.data_dir), *options],
                cwd=self.run_dir or self.workdir,
                log_path=self.log_path,
                env=self._env(),
            )
            self._proc.start()
            wait_until(self._ready, timeout=self.timeout, what="PostgreSQL accepting connections", proc=self._proc)
            self.startup_seconds["postgres"] = time.monotonic() - t0
            if not self._created:
                self.sql(f"CREATE DATABASE {self.database}", database="postgres")
                self._created = True
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM to the server's process group (postmaster and backends: a walsender of a
        connected Debezium task ends too, which a smart shutdown would wait for), then SIGKILL."""
        if self._proc is not None:
            self._proc.stop(grace=grace)

    def close(self) -> None:
        """Stop, and remove the private data directory if there is one (the log stays)."""
        self.stop()
        if self._private_run_dir and self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- SQL ---------------------------------------------------------------------------------------

    def sql(self, statement: str, *, database: str | None = None, timeout: float = 30.0) -> str:
        """Run ``statement`` with psql over TCP as the superuser; its unaligned, tuples-only output."""
        argv = [
            str(postgres_bin_dir() / "psql"),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-U",
            self.superuser,
            "-d",
            database or self.database,
            "-c",
            statement,
        ]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=self._env(password=True)
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}) on {statement!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def rows(self, query: str) -> list[list[str]]:
        """The rows of ``query``, each as its columns' text (psql's ``|``-separated output)."""
        out = self.sql(query)
        return [line.split("|") for line in out.splitlines()] if out else []

    def replication_slot(self, slot: str) -> dict[str, str] | None:
        """``pg_replication_slots``' row of ``slot`` (None: no such slot): plugin, active,
        restart_lsn, confirmed_flush_lsn (PostgreSQL's X/Y text)."""
        columns = ("plugin", "active", "restart_lsn", "confirmed_flush_lsn")
        found = self.rows(f"SELECT {', '.join(columns)} FROM pg_replication_slots WHERE slot_name = '{slot}'")
        return dict(zip(columns, found[0], strict=True)) if found else None

    def debezium_connection(self) -> dict[str, str]:
        """The connection settings of a Debezium PostgreSQL connector for this server."""
        return {
            "database.hostname": self.host,
            "database.port": str(self.port),
            "database.user": self.superuser,
            "database.password": self.password,
            "database.dbname": self.database,
        }

    # -- internals ---------------------------------------------------------------------------------

    def _env(self, *, password: bool = False) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            # the account's own home: tools that look at ~ do not trip over root's
            "HOME": self._account_home() if os.geteuid() == 0 else os.environ.get("HOME", "/"),
        }
        if password:
            env["PGPASSWORD"] = self.password
        return env

    def _as_server_account(self) -> Sequence[str]:
        if os.geteuid() != 0:
            return ()
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise MissingTestEnvError(
                "setpriv (Debian package util-linux) not found: needed to run PostgreSQL as non-root"
            )
        return (setpriv, f"--reuid={SERVER_ACCOUNT}", f"--regid={SERVER_ACCOUNT}", "--init-groups", "--")

    def _account_home(self) -> str:
        return self._account().pw_dir

    def _account(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(SERVER_ACCOUNT)
        except KeyError:
            raise MissingTestEnvError(
                f"no {SERVER_ACCOUNT!r} account to run PostgreSQL as (Debian's postgresql package creates it); "
                f"{PROVISION_HINT}"
            ) from None

    def _prepare_dirs(self) -> Path:
        if os.geteuid() != 0:
            run_dir = self.workdir
        else:
            account = self._account()
            run_dir = Path(tempfile.mkdtemp(prefix=f"connectops-{self.name}-"))
            self._private_run_dir = True
            os.chown(run_dir, account.pw_uid, account.pw_gid)
            (self.workdir / "run").symlink_to(run_dir)
        self.run_dir = run_dir
        return run_dir

    def _initdb(self, bindir: Path) -> None:
        run_dir = self._prepare_dirs()
        pwfile = run_dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        self._own(pwfile)
        argv = [
            *self._as_server_account(),
            str(bindir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.superuser,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            # disposable test data, as fsync=off for the server
            "--no-sync",
        ]
        done = subprocess.run(
            argv, cwd=run_dir, capture_output=True, text=True, timeout=self.timeout, check=False, env=self._env()
        )
        pwfile.unlink()
        with self.log_path.open("a") as log:
            log.write(f"=== initdb ({done.returncode})\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            raise ServerStartError(f"initdb failed ({done.returncode}): {done.stderr[-2000:]}")
        self.socket_dir.mkdir(mode=0o700)
        self._own(self.socket_dir)

    def _own(self, path: Path) -> None:
        if os.geteuid() == 0:
            account = self._account()
            os.chown(path, account.pw_uid, account.pw_gid)

    def _ready(self) -> bool:
        done = subprocess.run(
            [str(postgres_bin_dir() / "pg_isready"), "-q", "-h", self.host, "-p", str(self.port)],
            capture_output=True,
            timeout=5,
            check=False,
        )
        return done.returncode == 0
