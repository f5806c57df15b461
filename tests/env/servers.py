"""Start and stop the real test servers on loopback: etcd + kube-apiserver, Apache Kafka, Kafka Connect.

Used by ``tests/conftest.py`` (session fixtures) and, for demos, as a CLI::

    python -m tests.env.servers up --dir DIR

which starts everything, prints (and writes to ``DIR/env.json``) the endpoints, and stays in the
foreground until SIGINT/SIGTERM.

The binaries come from ``tests/env/provision.sh`` and are looked up in
``$CONNECTOPS_TESTENV_CACHE`` (default ``~/.cache/connectops-testenv``), etcd and kube-apiserver
keyed by version; java comes from the system. Every server gets its own free loopback ports and
its own working directory (with its log file) under a caller-given root, so several environments
can coexist on one machine.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Protocol, Self

import httpx
import yaml
from confluent_kafka.admin import AdminClient

PROVISION_HINT: Final = (
    "run tests/env/provision.sh first (idempotent; it caches into $CONNECTOPS_TESTENV_CACHE, "
    "default ~/.cache/connectops-testenv)"
)
FILESTREAM_SOURCE: Final = "org.apache.kafka.connect.file.FileStreamSourceConnector"


class MissingTestEnvError(RuntimeError):
    """A provisioned binary or jar directory is missing."""


class ServerStartError(RuntimeError):
    """A server did not come up (it exited, or a readiness check timed out)."""


def cache_dir() -> Path:
    # Read at call time so a test session (or CI) can point to another cache via the environment.
    default = Path.home() / ".cache" / "connectops-testenv"
    return Path(os.environ.get("CONNECTOPS_TESTENV_CACHE", str(default)))


def _require_executable(path: Path | None, what: str) -> Path:
    if path is None or not path.is_file() or not os.access(path, os.X_OK):
        raise MissingTestEnvError(f"{what} not found (looked at {path or 'PATH'}); {PROVISION_HINT}")
    return path


def _which(name: str) -> Path | None:
    found = shutil.which(name)
    return Path(found) if found else None


#: The Kubernetes and etcd versions of the test environment, built from Go modules by
#: tests/env/kube/build.sh (through provision.sh) and kept equal to what tests/env/kube/*/go.mod
#: require (a test checks it). ``CONNECTOPS_KUBE_VERSION`` picks another build in the cache (a
#: module like tests/env/kube/apiserver at another release, built by build.sh).
KUBE_VERSION: Final = "v1.37.2"
ETCD_VERSION: Final = "v3.7.3"
KUBE_MODULES: Final = Path(__file__).resolve().parent / "kube"


def kube_version() -> str:
    return os.environ.get("CONNECTOPS_KUBE_VERSION") or KUBE_VERSION


def etcd_binary() -> Path:
    return _require_executable(cache_dir() / f"etcd-{ETCD_VERSION}", f"etcd {ETCD_VERSION}")


def kube_apiserver_path(version: str) -> Path:
    """Where tests/env/kube/build.sh puts that version's kube-apiserver."""
    return cache_dir() / f"kube-apiserver-{version}"


def kube_apiserver_binary(version: str | None = None) -> Path:
    version = version or kube_version()
    return _require_executable(kube_apiserver_path(version), f"kube-apiserver {version}")


#: The one Apache Kafka version of the test environment: broker, Connect and MirrorMaker 2.
#: Kept equal to ``kafka.version`` in tests/env/kafka/pom.xml (a test checks it).
KAFKA_VERSION: Final = "4.3.1"


def java_binary() -> Path:
    return _require_executable(_which("java"), "java (Debian package default-jdk-headless)")


def kafka_lib_dir() -> Path:
    """Apache Kafka's jars (broker, Connect, MirrorMaker 2), as Maven resolved them."""
    jars = cache_dir() / f"kafka-{KAFKA_VERSION}" / "libs"
    # provision.sh writes .complete last, so a half-finished resolution is never mistaken for a cache.
    if not (jars / ".complete").is_file():
        raise MissingTestEnvError(f"Apache Kafka {KAFKA_VERSION} jars not found in {jars}; {PROVISION_HINT}")
    return jars


def connect_jar_dir() -> Path:
    """The Connect worker's classpath: Kafka's own libs, as ``bin/connect-distributed.sh`` uses."""
    return kafka_lib_dir()


_handed_out_ports: set[int] = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A loopback TCP port that is free now and was not handed out before by this process.

    The port is released before the server binds it, so another process could grab it in between;
    remembering what we handed out at least rules out collisions between our own servers, which
    are started concurrently.
    """
    with _ports_lock:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port: int = sock.getsockname()[1]
            if port not in _handed_out_ports:
                _handed_out_ports.add(port)
                return port
    raise RuntimeError("could not find a free loopback port")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ManagedProcess:
    """A child process in its own session (so signals reach all its children), logging to a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.cwd = cwd
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def start(self) -> None:
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self._close_log()
        self._log = self.log_path.open("ab")
        # A marker line keeps restarts apart when one log collects several runs of the same server.
        self._log.write(f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self._popen = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _live_processes.add(self)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it if it has not exited after ``grace`` seconds."""
        if self._popen is not None and self._popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self._popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._popen.wait(timeout=10)
            self._kill_stragglers()
        self._release()

    def kill(self) -> None:
        """SIGKILL the process group at once: an abrupt outage, no graceful shutdown."""
        if self._popen is not None and self._popen.poll() is None:
            self._signal_group(signal.SIGKILL)
            self._popen.wait(timeout=10)
        self._release()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._popen is not None
        # ESRCH: the whole group is gone already.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)

    def _kill_stragglers(self) -> None:
        # Children that outlived a gracefully stopped leader (same group) must not leak either.
        # Only right after our own wait(): for a leader that died long ago the group id could
        # in principle belong to someone else by now, so it is never signalled then.
        self._signal_group(signal.SIGKILL)

    def _release(self) -> None:
        _live_processes.discard(self)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


_live_processes: set[ManagedProcess] = set()


@atexit.register
def _kill_leftovers() -> None:
    # Last line of defence when a fixture finalizer or the CLI did not get to run stop().
    for proc in list(_live_processes):
        proc.stop(grace=3.0)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: ManagedProcess | None = None,
    interval: float = 0.1,
) -> float:
    """Poll ``check`` until it returns True; return the seconds it took.

    Exceptions from ``check`` count as "not yet". Fails fast when ``proc`` exits meanwhile, and
    puts the tail of its log into the error so a failed start explains itself.
    """
    started = time.monotonic()
    deadline = started + timeout
    last_error: BaseException | None = None
    while True:
        if proc is not None and not proc.alive:
            raise ServerStartError(
                f"{proc.name} exited (code {proc.returncode}) while waiting for {what}; "
                f"log {proc.log_path}:\n{proc.log_tail()}"
            )
        try:
            ok = check()
        except Exception as exc:
            ok, last_error = False, exc
        if ok:
            return time.monotonic() - started
        if time.monotonic() >= deadline:
            tail = f"; log {proc.log_path}:\n{proc.log_tail()}" if proc is not None else ""
            raise ServerStartError(
                f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error!r}){tail}"
            )
        time.sleep(interval)


class _Server:
    """Context-manager plumbing shared by the servers: ``with KubeAPI(root) as kube: ...``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _unique_workdir(root: Path, name: str) -> Path:
    workdir = root / name
    workdir.mkdir(parents=True, exist_ok=False)
    return workdir


# --------------------------------------------------------------------------------------------------
# etcd + kube-apiserver
# --------------------------------------------------------------------------------------------------


class KubeAPI(_Server):
    """etcd + kube-apiserver (``KUBE_VERSION``, or ``version``) on loopback, token authentication,
    RBAC authorization.

    Identities:
      * ``token``: user ``admin`` in group ``system:masters`` (the kubeconfig at
        ``kubeconfig_path`` uses it).
      * ``user_tokens``: plain users (no groups, so RBAC grants them nothing beyond discovery)
        for RBAC tests; ``kubeconfig_for(user)`` writes a kubeconfig for one of them.
      * ServiceAccounts: no kube-controller-manager runs, so no token controller creates
        ServiceAccount token Secrets. Tests must mint tokens with the TokenRequest API
        (``CoreV1Api.create_namespaced_service_account_token``), which this apiserver serves
        because it has a signing key, an issuer and API audiences (checked by
        tests/test_env_smoke.py). The ServiceAccount object must exist: tokens are looked up.

    Only the apiserver runs: no controllers, no scheduler, no kubelet (so no pods ever run, and
    namespaces deleted stay Terminating because the namespace controller is absent).
    """

    ADMIN_USER: Final = "admin"
    EXTRA_USERS: Final = ("rbac-test", "rbac-test-2")
    SA_ISSUER: Final = "https://kubernetes.default.svc"

    def __init__(self, root: Path, *, name: str = "kube", timeout: float = 60.0, version: str | None = None) -> None:
        self.version = version or kube_version()
        self.workdir = _unique_workdir(root, name)
        self.timeout = timeout
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(24)
        self.user_tokens: dict[str, str] = {user: secrets.token_hex(24) for user in self.EXTRA_USERS}
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self.cert_dir = self.workdir / "certs"
        # Written by kube-apiserver itself: its self-signed serving cert followed by the signing CA.
        self.ca_path = self.cert_dir / "apiserver.crt"
        self.startup_seconds: dict[str, float] = {}
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "kube-apiserver.log"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def processes(self) -> list[ManagedProcess]:
        return [p for p in (self._apiserver, self._etcd) if p is not None]

    def start(self) -> Self:
        etcd, apiserver = etcd_binary(), kube_apiserver_binary(self.version)
        try:
            self._start_etcd(etcd)
            self._start_apiserver(apiserver)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # Apiserver first: etcd vanishing under a live apiserver only produces noise in its log.
        for proc in self.processes:
            proc.stop()

    def kubeconfig_for(self, user: str) -> Path:
        """Write (once) and return a kubeconfig that authenticates as one of ``EXTRA_USERS``."""
        path = self.workdir / f"kubeconfig-{user}"
        if not path.exists():
            self._write_kubeconfig(path, user, self.user_tokens[user])
        return path

    def _start_etcd(self, binary: Path) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        self._etcd = ManagedProcess(
            "etcd",
            [
                str(binary),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # Test data is disposable; skipping fsync makes etcd (and so the apiserver) fast.
                "--unsafe-no-fsync",
                "--logger=zap",
                "--log-level=warn",
            ],
            cwd=self.workdir,
            log_path=self.workdir / "etcd.log",
        )
        t0 = time.monotonic()
        self._etcd.start()
        wait_until(
            lambda: httpx.get(f"{self.etcd_url}/health", timeout=2).json().get("health") == "true",
            timeout=self.timeout,
            what="etcd /health",
            proc=self._etcd,
        )
        self.startup_seconds["etcd"] = time.monotonic() - t0

    def _start_apiserver(self, binary: Path) -> None:
        sa_key, sa_pub = self._make_service_account_keys()
        tokens = self.workdir / "tokens.csv"
        # Static token file format: token,user,uid[,"group1,group2"].
        lines = [f'{self.token},{self.ADMIN_USER},{self.ADMIN_USER},"system:masters"']
        lines += [f"{tok},{user},{user}" for user, tok in self.user_tokens.items()]
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        self.cert_dir.mkdir()
        self._apiserver = ManagedProcess(
            "kube-apiserver",
            [
                str(binary),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                # No --tls-cert-file: the apiserver self-signs a serving cert (incl. 127.0.0.1) here.
                f"--cert-dir={self.cert_dir}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer={self.SA_ISSUER}",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                # TokenRequest needs audiences; these are also what the authenticator accepts.
                f"--api-audiences={self.SA_ISSUER}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                # The default reconciler would publish 127.0.0.1 as the endpoint of the `kubernetes`
                # Service, which endpoint validation rejects (loopback) and logs about forever.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
            ],
            cwd=self.workdir,
            log_path=self.log_path,
        )
        t0 = time.monotonic()
        self._apiserver.start()
        headers = {"Authorization": f"Bearer {self.token}"}

        def ready() -> bool:
            # verify=False only while waiting: the CA file appears during startup, checked below.
            resp = httpx.get(f"{self.url}/readyz", headers=headers, verify=False, timeout=5)
            return resp.status_code == 200

        wait_until(ready, timeout=self.timeout, what="kube-apiserver /readyz", proc=self._apiserver)
        self.startup_seconds["kube-apiserver"] = time.monotonic() - t0
        # Prove the kubeconfig we hand out verifies TLS with the apiserver's own CA.
        httpx.get(f"{self.url}/version", verify=self.ssl_context(), timeout=5).raise_for_status()
        self._write_kubeconfig(self.kubeconfig_path, self.ADMIN_USER, self.token)

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_path))

    def _make_service_account_keys(self) -> tuple[Path, Path]:
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        openssl = _require_executable(_which("openssl"), "openssl")
        for argv in (
            [str(openssl), "genrsa", "-out", str(key), "2048"],
            [str(openssl), "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
        ):
            subprocess.run(argv, check=True, capture_output=True, timeout=60)
        return key, pub

    def _write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        ca_data = base64.b64encode(self.ca_path.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "connectops-test",
                    "cluster": {"server": self.url, "certificate-authority-data": ca_data},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {
                    "name": f"{user}@connectops-test",
                    "context": {"cluster": "connectops-test", "user": user, "namespace": "default"},
                }
            ],
            "current-context": f"{user}@connectops-test",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)


# --------------------------------------------------------------------------------------------------
# Apache Kafka broker (KRaft, combined broker + controller)
# --------------------------------------------------------------------------------------------------

# Written to the process's stdout, which ManagedProcess sends to the server's log file; INFO, as
# Kafka's own config/log4j2.yaml, with the request and state-change noise left out.
_BROKER_LOG4J2_PROPERTIES: Final = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""

#: The broker's heap. Kafka's scripts default to 1 GiB; a test broker holds a few thousand
#: partitions at most, and several run at once (one per pytest-xdist worker, two for
#: MirrorMaker 2), beside a kube-apiserver and Connect workers on 24 GiB: 512 MiB, measured
#: ~280 MiB RSS when idle.
BROKER_HEAP: Final = "512m"
#: C1 only, as for the Connect worker: the broker answers metadata ~3.5 s after exec instead of ~6.
BROKER_JVM_OPTIONS: Final = ("-XX:TieredStopAtLevel=1", "-XX:+UseG1GC")


def kraft_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` makes it: 16 random bytes, URL-safe
    base64 without padding (Kafka's Uuid.toString)."""
    while True:
        raw = os.urandom(16)
        # Kafka's Uuid.randomUuid redraws ids whose text starts with '-' (not a valid CLI argument).
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker(_Server):
    """One Apache Kafka broker in KRaft mode (``process.roles=broker,controller``) on loopback.

    The jars are Apache Kafka's own, from Maven Central (``tests/env/kafka/pom.xml``, resolved by
    provision.sh); the storage is formatted by Kafka's StorageTool with a static one-voter quorum.
    Broker settings are Kafka's defaults except what a single node needs (replication factor 1
    for the internal topics) and ``group.initial.rebalance.delay.ms=0``, the value Kafka's own
    ``config/server.properties`` ships for development. Data lives on disk under ``workdir``, so
    ``stop()`` + ``start()`` is a broker restart that keeps every topic and committed offset.
    Several brokers (independent clusters) can run at once: each has its own ports and cluster id.
    """

    def __init__(
        self,
        root: Path,
        *,
        name: str = "kafka",
        timeout: float = 60.0,
        advertised_port: int | None = None,
        extra_properties: Mapping[str, str] | None = None,
        heap: str = BROKER_HEAP,
    ) -> None:
        self.workdir = _unique_workdir(root, name)
        self.name = name
        self.timeout = timeout
        self.port = free_port()
        self.controller_port = free_port()
        # Metadata tells clients to connect here after bootstrap (e.g. a proxy in front of the broker).
        self.advertised_port = advertised_port or self.port
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.cluster_id = kraft_cluster_id()
        self.extra_properties = dict(extra_properties or {})
        self.heap = heap
        self.properties_path = self.workdir / "server.properties"
        self.startup_seconds: dict[str, float] = {}
        self._formatted = False
        self._proc: ManagedProcess | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "kafka.log"

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self._proc] if self._proc is not None else []

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive

    def server_properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.advertised_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.extra_properties)
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        return [
            str(java_binary()),
            f"-Xmx{self.heap}",
            *BROKER_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{kafka_lib_dir()}/*",
            main,
            *args,
        ]

    def _format(self) -> None:
        (self.workdir / "log4j2.properties").write_text(_BROKER_LOG4J2_PROPERTIES)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        argv = self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(self.properties_path))
        done = subprocess.run(argv, cwd=self.workdir, capture_output=True, timeout=self.timeout, check=False)
        if done.returncode != 0:
            raise ServerStartError(
                f"kafka-storage format failed ({done.returncode}): {done.stdout.decode(errors='replace')[-2000:]}"
                f"{done.stderr.decode(errors='replace')[-2000:]}"
            )
        self._formatted = True

    def start(self) -> Self:
        if self.alive:
            raise RuntimeError(f"Kafka broker {self.name} is already running")
        t0 = time.monotonic()
        try:
            if not self._formatted:
                self._format()
                self.startup_seconds["format"] = time.monotonic() - t0
            self._proc = ManagedProcess(
                f"kafka[{self.name}]",
                self._java("kafka.Kafka", str(self.properties_path)),
                cwd=self.workdir,
                log_path=self.log_path,
            )
            self._proc.start()
            wait_until(lambda: port_open(self.port), timeout=self.timeout, what="kafka port", proc=self._proc)
            self.startup_seconds["port"] = time.monotonic() - t0
            wait_until(self._metadata_ok, timeout=self.timeout, what="kafka metadata", proc=self._proc)
            self.startup_seconds["kafka"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 20.0) -> None:
        """Controlled shutdown (SIGTERM): the broker closes its logs cleanly."""
        if self._proc is not None:
            self._proc.stop(grace=grace)

    def kill(self) -> None:
        """SIGKILL: an abrupt broker outage; ``start()`` recovers its logs on the same ports."""
        if self._proc is not None:
            self._proc.kill()

    def admin_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap}

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        """A test consumer's settings: Kafka's defaults, reading from the start of a new group."""
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            **overrides,
        }

    def _metadata_ok(self) -> bool:
        admin = AdminClient(self.admin_config())
        metadata = admin.list_topics(timeout=3)
        return bool(metadata.brokers)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Until every partition of a just-created ``topic`` has a leader in the metadata clients
        see. CreateTopics answers when the controller has the topic; the broker takes leadership
        a moment later, and a request in between gets NOT_LEADER_OR_FOLLOWER (retryable, as the
        operator treats it). Tests that act on a topic the moment they created it wait here, as
        Kafka's own test utilities do."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        admin = AdminClient(self.admin_config())

        def led() -> bool:
            meta = admin.list_topics(topic, timeout=5).topics.get(topic)
            if not (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
            ):
                return False
            # The metadata can name the leader a moment before the broker acts as one: a request
            # to every partition must be answered (raises NOT_LEADER_OR_FOLLOWER until then).
            asked = {TopicPartition(topic, p): OffsetSpec.earliest() for p in range(partitions)}
            for future in admin.list_offsets(asked, request_timeout=5).values():
                future.result(timeout=10)
            return True

        wait_until(led, timeout=timeout, what=f"leaders for {topic}", proc=self._proc)


# --------------------------------------------------------------------------------------------------
# Kafka Connect distributed worker
# --------------------------------------------------------------------------------------------------

# Connect 4.x logs through log4j2, whose built-in default is ERROR-only to the console; an explicit
# INFO config makes the worker log useful when a test fails.
_LOG4J2_PROPERTIES: Final = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c:%L)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""

# Connect 3.x logs through reload4j (log4j 1.x), configured by -Dlog4j.configuration: the same
# INFO-to-stdout as above, in log4j 1 syntax.
_LOG4J1_PROPERTIES: Final = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c:%L)%n
log4j.logger.org.reflections=ERROR
log4j.logger.org.apache.kafka.clients=WARN
"""


# C1 only: the worker's REST comes up in ~4 s instead of ~8 s on 2 cores (measured); the slower
# steady state of unoptimised code does not matter for test-sized traffic.
CONNECT_JVM_OPTIONS: Final = ("-XX:TieredStopAtLevel=1",)

#: The Prometheus JMX exporter's agent (tests/env/jmx/pom.xml) and Strimzi's Connect rules for it.
JMX_EXPORTER_VERSION: Final = "1.0.1"
STRIMZI_CONNECT_METRICS_RULES: Final = Path(__file__).resolve().parent / "jmx" / "kafka-connect-metrics.yml"


def jmx_exporter_agent() -> Path:
    """The ``jmx_prometheus_javaagent`` jar provision.sh resolved (and checked) into the cache."""
    jar = cache_dir() / f"jmx-exporter-{JMX_EXPORTER_VERSION}" / f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
    if not (jar.parent / ".complete").is_file() or not jar.is_file():
        raise MissingTestEnvError(f"JMX exporter agent {JMX_EXPORTER_VERSION} not found at {jar}; {PROVISION_HINT}")
    return jar


class ConnectWorker(_Server):
    """One Kafka Connect distributed worker (a one-worker group) against a Kafka bootstrap.

    ``group_id`` and the three storage topics are derived from ``name`` unless given, so several
    independent worker groups can share one broker. The worker keeps its port, group and topics
    across ``kill()``/``stop()`` + ``start()``, like a restarted pod: it rejoins and re-reads its
    connectors from the config topic. Group settings are Connect's defaults: ready some seconds
    after a cold start or a ``stop()`` (the worker leaves its group), up to a session
    (``session.timeout.ms``, 10 s) longer after a ``kill()``, while the broker still counts the
    killed member in the group.
    """

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        *,
        name: str = "connect",
        group_id: str | None = None,
        offset_partitions: int = 25,
        override_policy: str = "All",
        extra_properties: Mapping[str, str] | None = None,
        plugin_path: Sequence[Path] = (),
        extra_classpath: Sequence[Path] = (),
        heap: str = "512m",
        jvm_options: Sequence[str] = CONNECT_JVM_OPTIONS,
        timeout: float = 90.0,
        standalone: bool = False,
        metrics_port: int | None = None,
        jar_dir: Path | None = None,
        version: str = KAFKA_VERSION,
        metrics_rules: Path = STRIMZI_CONNECT_METRICS_RULES,
    ) -> None:
        self.workdir = _unique_workdir(root, name)
        # Another Connect release (tests/env/connect_versions): its classpath, and its version,
        # which picks the logging backend (log4j 1 before 4.0) and the readiness probe (/health 3.9+).
        self.jar_dir = jar_dir
        self.version = version
        # Standalone mode: the same REST API and runtime without a worker group, so creating a
        # connector costs no group rebalance. For benchmarks that compare with it; offsets live
        # in a local file.
        self.standalone = standalone
        self.name = name
        self.bootstrap = bootstrap
        self.group_id = group_id or f"connectops-test-{name}"
        self.config_topic = f"{self.group_id}-configs"
        self.offset_topic = f"{self.group_id}-offsets"
        self.status_topic = f"{self.group_id}-status"
        self.offset_partitions = offset_partitions
        self.override_policy = override_policy
        self.extra_properties = dict(extra_properties or {})
        self.plugin_path = list(plugin_path)
        self.extra_classpath = list(extra_classpath)
        self.heap = heap
        self.jvm_options = list(jvm_options)
        self.timeout = timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # As Strimzi runs a worker: the JMX exporter's agent in the worker's JVM, serving the
        # MBeans of Kafka's JmxReporter (on by default) through Strimzi's Connect rules.
        self.metrics_port = metrics_port
        # the exporter's rules: Strimzi's Connect rules unless a test serves other MBeans (MM2's)
        self.metrics_rules = metrics_rules
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port is not None else None
        self.properties_path = self.workdir / "worker.properties"
        self.log_path = self.workdir / "connect.log"
        # One entry per start(): seconds until GET / answered and until the worker was ready.
        self.startup_seconds: list[dict[str, float]] = []
        self._proc: ManagedProcess | None = None

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self._proc] if self._proc is not None else []

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive

    def worker_properties(self) -> dict[str, str]:
        props = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offset_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": str(self.offset_partitions),
            "offset.flush.interval.ms": "1000",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # Scanning only the classpath/plugin.path avoids needing ServiceLoader manifests.
            "plugin.discovery": "only_scan",
            "connector.client.config.override.policy": self.override_policy,
        }
        if self.plugin_path:
            props["plugin.path"] = ",".join(str(p) for p in self.plugin_path)
        if self.standalone:
            for key in list(props):
                if key.startswith(("config.storage.", "status.storage.", "offset.storage.")) or key == "group.id":
                    del props[key]
            props["offset.storage.file.filename"] = str(self.workdir / "offsets.dat")
        props.update(self.extra_properties)
        return props

    def start(self) -> Self:
        if self.alive:
            raise RuntimeError(f"Connect worker {self.name} is already running")
        java, jars = java_binary(), self.jar_dir or connect_jar_dir()
        self.properties_path.write_text("".join(f"{key}={value}\n" for key, value in self.worker_properties().items()))
        if self._version_at_least(4, 0):
            log4j = self.workdir / "log4j2.properties"
            log4j.write_text(_LOG4J2_PROPERTIES)
            log_option = f"-Dlog4j2.configurationFile={log4j}"
        else:
            log4j = self.workdir / "log4j.properties"
            log4j.write_text(_LOG4J1_PROPERTIES)
            log_option = f"-Dlog4j.configuration=file:{log4j}"
        classpath = ":".join([f"{jars}/*", *(str(p) for p in self.extra_classpath)])
        agent: list[str] = []
        if self.metrics_port is not None:
            agent = [f"-javaagent:{jmx_exporter_agent()}=127.0.0.1:{self.metrics_port}:{self.metrics_rules}"]
        self._proc = ManagedProcess(
            f"connect[{self.name}]",
            [
                str(java),
                f"-Xmx{self.heap}",
                *self.jvm_options,
                *agent,
                log_option,
                "-cp",
                classpath,
                "org.apache.kafka.connect.cli.ConnectStandalone"
                if self.standalone
                else "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.properties_path),
            ],
            cwd=self.workdir,
            log_path=self.log_path,
        )
        t0 = time.monotonic()
        self._proc.start()
        try:
            rest = wait_until(self._root_ok, timeout=self.timeout, what="Connect GET /", proc=self._proc)
            wait_until(self._ready, timeout=self.timeout, what="Connect worker ready", proc=self._proc)
        except BaseException:
            self._proc.kill()
            raise
        self.startup_seconds.append({"rest": rest, "ready": time.monotonic() - t0})
        return self

    def stop(self, grace: float = 20.0) -> None:
        """Graceful shutdown (SIGTERM: the worker leaves its group, commits offsets)."""
        if self._proc is not None:
            self._proc.stop(grace=grace)

    def kill(self) -> None:
        """SIGKILL: an abrupt worker outage; ``start()`` brings it back on the same port."""
        if self._proc is not None:
            self._proc.kill()

    def log_tail(self, lines: int = 60) -> str:
        return self._proc.log_tail(lines) if self._proc is not None else "(not started)"

    def _root_ok(self) -> bool:
        return httpx.get(f"{self.url}/", timeout=2).status_code == 200

    def _version_at_least(self, major: int, minor: int) -> bool:
        parts = self.version.split(".")
        return (int(parts[0]), int(parts[1])) >= (major, minor)

    def _ready(self) -> bool:
        # /health (KIP-1017) turns 200 once the herder thread runs, which can be before the worker
        # joined its group; GET /connectors is answered by the herder only outside a rebalance
        # (409 during one), so together they mean "can take connector writes now".
        # /connector-plugins proves the plugin scan found the FileStream connectors.
        # Before 3.9 there is no /health: GET / naming this worker's version stands in for it.
        if self._version_at_least(3, 9):
            paths: tuple[str, ...] = ("/health", "/connectors")
        elif httpx.get(f"{self.url}/", timeout=5).json().get("version") == self.version:
            paths = ("/connectors",)
        else:
            return False
        for path in paths:
            if httpx.get(f"{self.url}{path}", timeout=5).status_code != 200:
                return False
        plugins = httpx.get(f"{self.url}/connector-plugins", timeout=5)
        return plugins.status_code == 200 and any(p.get("class") == FILESTREAM_SOURCE for p in plugins.json())


class ConnectFactory(Protocol):
    """The ``connect_factory`` fixture: start one more worker group on the session's broker."""

    def __call__(
        self,
        name: str | None = None,
        *,
        override_policy: str = "All",
        offset_partitions: int = 25,
        extra_properties: Mapping[str, str] | None = None,
        plugin_path: Sequence[Path] = (),
        extra_classpath: Sequence[Path] = (),
    ) -> ConnectWorker: ...


# --------------------------------------------------------------------------------------------------
# Everything together
# --------------------------------------------------------------------------------------------------


class TestEnv(_Server):
    """kube-apiserver, an Apache Kafka broker and one Connect worker; kube starts concurrently with
    Kafka+Connect."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        root: Path,
        *,
        override_policy: str = "All",
        standalone_connect: bool = False,
        connect_heap: str = "512m",
        connect_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.kube = KubeAPI(root)
        self.kafka = KafkaBroker(root)
        self.connect = ConnectWorker(
            root,
            self.kafka.bootstrap,
            override_policy=override_policy,
            standalone=standalone_connect,
            heap=connect_heap,
            extra_properties=connect_properties,
        )
        self.startup_seconds: float | None = None

    def start(self) -> Self:
        t0 = time.monotonic()
        kube_error: list[BaseException] = []

        def start_kube() -> None:
            try:
                self.kube.start()
            except BaseException as exc:  # re-raised in the caller's thread below
                kube_error.append(exc)

        def join_kube() -> None:
            kube_thread.join(timeout=self.kube.timeout * 2)
            if kube_error:
                raise kube_error[0]
            if kube_thread.is_alive():
                raise ServerStartError("kube-apiserver start did not finish")

        kube_thread = threading.Thread(target=start_kube, name="start-kube", daemon=True)
        kube_thread.start()
        try:
            self.kafka.start()
            self.connect.start()
            join_kube()
        except BaseException:
            # Also on Ctrl-C: let the kube thread finish first, or it could spawn the apiserver
            # after stop() ran and leave it orphaned.
            kube_thread.join(timeout=self.kube.timeout * 2)
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        self.connect.stop()
        self.kafka.stop()
        self.kube.stop()

    @property
    def processes(self) -> list[ManagedProcess]:
        return [*self.kube.processes, *self.kafka.processes, *self.connect.processes]

    def describe(self) -> dict[str, Any]:
        return {
            "kube": {
                "url": self.kube.url,
                "kubeconfig": str(self.kube.kubeconfig_path),
                "token": self.kube.token,
                "ca": str(self.kube.ca_path),
                "user_tokens": self.kube.user_tokens,
                "log": str(self.kube.log_path),
            },
            "kafka": {"bootstrap": self.kafka.bootstrap, "log": str(self.kafka.log_path)},
            "connect": {
                "url": self.connect.url,
                "group_id": self.connect.group_id,
                "topics": {
                    "config": self.connect.config_topic,
                    "offset": self.connect.offset_topic,
                    "status": self.connect.status_topic,
                },
                "log": str(self.connect.log_path),
            },
            "pids": {p.name: p.pid for p in self.processes},
            "startup_seconds": {
                "kube": self.kube.startup_seconds,
                "kafka": self.kafka.startup_seconds,
                "connect": self.connect.startup_seconds[-1] if self.connect.startup_seconds else None,
                "total": self.startup_seconds,
            },
        }


class _Stop(Exception):
    """Raised from the SIGTERM handler so the CLI unwinds through its ``finally``."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def _cmd_up(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    if root.exists() and any(root.iterdir()):
        print(f"{root} is not empty; give a fresh --dir", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    env = TestEnv(root, override_policy=args.connect_policy)
    try:
        env.start()
        info = env.describe()
        (root / "env.json").write_text(json.dumps(info, indent=2) + "\n")
        print(json.dumps(info, indent=2), flush=True)
        reported: set[str] = set()
        while True:
            time.sleep(1)
            for proc in env.processes:
                if not proc.alive and proc.name not in reported:
                    reported.add(proc.name)
                    print(
                        f"warning: {proc.name} exited (code {proc.returncode}), see {proc.log_path}",
                        file=sys.stderr,
                        flush=True,
                    )
    except _Stop as stop:
        print(f"{stop}: stopping test servers", file=sys.stderr, flush=True)
    except (MissingTestEnvError, ServerStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        # Ignore further signals while shutting down so a second Ctrl-C cannot orphan servers.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        env.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.env.servers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start all servers and stay in the foreground until SIGINT/SIGTERM")
    up.add_argument("--dir", required=True, help="working directory (fresh or empty) for logs and data")
    up.add_argument(
        "--connect-policy",
        default="All",
        help="connector.client.config.override.policy of the Connect worker (default: All)",
    )
    args = parser.parse_args(argv)
    if args.command == "up":
        return _cmd_up(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
