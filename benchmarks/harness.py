"""Shared plumbing of the benchmarks: the real test servers, the operator as a process, canary
Secrets, machine facts, the result files and tables.

Every benchmark runs on the same servers the tests use (``tests/env``: kube-apiserver, Apache Kafka,
one Kafka Connect worker) and drives the operator as a real ``connectops run`` process, so what
is measured is what a user runs. Every Secret the operator reads in a benchmark holds the run's
canary value; ``Bench.hygiene()`` then looks for it in everything the operator wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import kubernetes  # noqa: E402
import yaml  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from tests.env.faultproxy import FaultProxy, FaultRule  # noqa: E402
from tests.env.servers import ConnectWorker, TestEnv, free_port  # noqa: E402

# re-exported: scripts import through harness, which fixes sys.path
__all__ = ["ConnectWorker", "FaultProxy", "FaultRule", "TestEnv", "free_port"]

GROUP, VERSION = "connectops.io", "v1alpha1"
RESULTS = ROOT / "benchmarks" / "results"

# Fast retries and resyncs, as in the e2e tests: a benchmark measures work, not back-off sleeps.
# Checks are off: no spark-operator runs here and each check is a SparkApplication of its own.
OPERATOR_ENV = {
    "CONNECTOPS_RESYNC_SECONDS": "60",
    "CONNECTOPS_RETRY_SECONDS": "1",
    "CONNECTOPS_RETRY_MAX_SECONDS": "5",
    "CONNECTOPS_SETTLE_SECONDS": "10",
    "CONNECTOPS_CAPABILITIES_TTL_SECONDS": "60",
    "CONNECTOPS_CHECKS_ENABLED": "false",
    # as the image sets it (Dockerfile): the benchmarks measure the process the image runs
    "MALLOC_ARENA_MAX": "2",
}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``check`` until truthy. Raises ``TimeoutError`` naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ApiException as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"[:2000])


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with 100 samples p99 is the 99th smallest value."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
    }


def machine() -> dict[str, Any]:
    """What the numbers came from."""
    mem_kb = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java[0] if java else None,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(name: str, data: dict[str, Any], output: Path | None = None) -> Path:
    path = output or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=2, default=str) + "\n")
    log(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (numbers right-aligned)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    numeric = [all(isinstance(row[i], int | float) for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


def rss_mib(pid: int) -> float:
    """Resident set size of one process (VmRSS), MiB."""
    return _status_mib(pid, "VmRSS")


def vm_hwm_mib(pid: int) -> float:
    """Peak resident set size of one process (VmHWM), MiB."""
    return _status_mib(pid, "VmHWM")


class OperatorProcess:
    """``connectops run`` as a real process, its output in a log file the hygiene scan reads."""

    def __init__(self, kubeconfig: Path, namespaces: Sequence[str], log_dir: Path, env: dict[str, str]) -> None:
        self.kubeconfig = kubeconfig
        self.namespaces = list(namespaces)
        self.log_dir = log_dir
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.log_paths: list[Path] = []

    def start(
        self,
        failpoint: str | None = None,
        extra_env: dict[str, str] | None = None,
        args: Sequence[str] = (),
        *,
        traced: bool = False,
    ) -> None:
        """``traced``: under tracemalloc (``benchmarks/traced_operator.py``; SIGUSR2 writes where
        the heap goes to ``$CONNECTOPS_TRACEMALLOC_OUT``)."""
        inherited = {k: v for k, v in os.environ.items() if k != "CONNECTOPS_CLAIM_NAMESPACE"}  # a test session's
        env = {**inherited, **OPERATOR_ENV, **self.env, **(extra_env or {}), "KUBECONFIG": str(self.kubeconfig)}
        env.pop("CONNECTOPS_FAILPOINT", None)
        if failpoint:
            env["CONNECTOPS_FAILPOINT"] = failpoint
        self.runs += 1
        path = self.log_dir / f"operator-{'-'.join(self.namespaces) or 'all'}-{self.runs}.log"
        self.log_paths.append(path)
        scope = [a for ns in self.namespaces for a in ("--namespace", ns)] or ["-A"]
        traced_entry = [sys.executable, str(ROOT / "benchmarks" / "traced_operator.py")]
        entry = traced_entry if traced else [sys.executable, "-m", "connectops.cli"]
        with path.open("wb") as out:
            self.proc = subprocess.Popen(
                [*entry, "run", *scope, "--standalone", *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL: no handler, no cleanup, no last status write."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_paths[-1].read_text(errors="replace")[-chars:] if self.log_paths else ""


@dataclass
class Bench:
    """One benchmark run's world: servers, CRDs, canary Secrets, operators, and their logs."""

    workdir: Path
    env: TestEnv
    api: Any
    canary: str = field(default_factory=lambda: "canary-" + secrets.token_hex(12))
    operators: list[OperatorProcess] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @property
    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.api)

    @property
    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.api)

    def namespace(self, prefix: str) -> str:
        ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
        self.namespaces.append(ns)
        return ns

    def operator(self, namespaces: Sequence[str], **env: str) -> OperatorProcess:
        op = OperatorProcess(self.env.kube.kubeconfig_path, namespaces, self.workdir / "logs", env)
        self.operators.append(op)
        return op

    # -- objects ------------------------------------------------------------------------------

    def create(self, ns: str, plural: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body)
        return result

    def get(self, ns: str, plural: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
        return result

    def items(self, ns: str, plural: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]
        return result

    def secret(self, ns: str, name: str, data: dict[str, str]) -> None:
        self.core.create_namespaced_secret(ns, kubernetes.client.V1Secret(metadata={"name": name}, string_data=data))

    def cluster(
        self, ns: str, rest_url: str | None = None, name: str = "main", connect: ConnectWorker | None = None
    ) -> None:
        """A ConnectCluster whose every Secret-sourced setting holds the canary.

        The worker runs without REST auth, so the basic-auth header is sent and ignored; the
        Kafka ``sasl.password`` is read and passed to librdkafka, which ignores it on PLAINTEXT.
        ``connect``: another worker group on the environment's broker (default: the environment's).
        """
        self.secret(ns, "connect-auth", {"username": "operator", "password": self.canary})
        self.secret(ns, "kafka-auth", {"password": self.canary})
        connect = connect or self.env.connect
        spec = {
            "restUrl": rest_url or connect.url,
            "basicAuth": {"secretName": "connect-auth"},
            "kafka": {
                "bootstrapServers": connect.bootstrap,
                "configFrom": {"sasl.password": {"name": "kafka-auth", "key": "password"}},
            },
            "topics": {
                "offsets": connect.offset_topic,
                "configs": connect.config_topic,
                "status": connect.status_topic,
            },
        }
        self.create(ns, "connectclusters", "ConnectCluster", name, spec)

    def connector_secret(self, ns: str) -> dict[str, Any]:
        """A ``configFrom`` entry holding the canary (a key the file connectors ignore)."""
        with contextlib.suppress(ApiException):
            self.secret(ns, "connector-secret", {"token": self.canary})
        return {"bench.token": {"secretKeyRef": {"name": "connector-secret", "key": "token"}}}

    # -- hygiene ------------------------------------------------------------------------------

    def hygiene(self) -> dict[str, Any]:
        """Look for the canary everywhere the operator writes: its logs (every process, every
        restart: exceptions and tracebacks included), Events, the custom objects (status and
        kopf's annotations) and ConfigMaps (offset backups) of every namespace the run made."""
        hits: list[str] = []
        logs = sorted((self.workdir / "logs").glob("*.log"))
        log_bytes = 0
        for path in logs:
            text = path.read_text(errors="replace")
            log_bytes += len(text)
            if self.canary in text:
                hits.append(f"log {path.name}")
        events = 0
        statuses = 0
        for ns in self.namespaces:
            with contextlib.suppress(ApiException):
                for event in self.core.list_namespaced_event(ns).items:
                    events += 1
                    if self.canary in json.dumps(self.api.sanitize_for_serialization(event)):
                        hits.append(f"event {ns}/{event.metadata.name}")
            for plural in ("connectclusters", "connectors", "offsetresets"):
                with contextlib.suppress(ApiException):
                    for item in self.items(ns, plural):
                        statuses += 1
                        if self.canary in json.dumps(item):
                            hits.append(f"{plural} {ns}/{item['metadata']['name']}")
            with contextlib.suppress(ApiException):
                for cm in self.core.list_namespaced_config_map(ns).items:
                    statuses += 1
                    if self.canary in json.dumps(self.api.sanitize_for_serialization(cm)):
                        hits.append(f"configmap {ns}/{cm.metadata.name}")
        return {
            "operator_logs": len(logs),
            "log_bytes": log_bytes,
            "events": events,
            "objects": statuses,
            "hits": hits,
        }


def apply_crds(api: Any) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        with contextlib.suppress(ApiException):
            ext.create_custom_resource_definition(body)
        name = body["metadata"]["name"]
        wait(
            lambda n=name: any(
                c.type == "Established" and c.status == "True"
                for c in (ext.read_custom_resource_definition(n).status.conditions or [])
            ),
            30,
            f"CRD {name} established",
        )


@contextlib.contextmanager
def bench_env(keep: bool = False, **testenv: Any) -> Iterator[Bench]:
    """Start the servers (about 10 s), apply the CRDs, yield a ``Bench``; stop everything after."""
    # SIGTERM (timeout, pkill) must run the cleanup below, or the servers outlive the script
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="connectops-bench-"))
    (workdir / "logs").mkdir()
    env = TestEnv(workdir / "servers", **testenv)
    log(f"starting servers in {workdir}")
    env.start()
    api: Any = kubernetes.config.new_client_from_config(config_file=str(env.kube.kubeconfig_path))  # type: ignore[no-untyped-call]
    bench = Bench(workdir, env, api)
    try:
        apply_crds(api)
        log(f"servers up in {env.startup_seconds:.1f} s")
        yield bench
    finally:
        for op in bench.operators:
            op.stop()
        api.close()
        env.stop()
        if not keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def reconciled(port: int, trigger: str | None = None) -> int:
    """How many Connector reconciles the operator counted (``trigger``: "change", a resume
    included, or "timer"; None: both). Only that counter is asked for: the whole exposition
    holds every Connector's series, and scraping it every 0.2 s took a quarter of the operator's
    CPU during a 3,000-Connector restart (py-spy), slowing down what was being timed."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/", params={"name[]": "connectops_reconciles_total"}, timeout=5).text
    except httpx.HTTPError:
        return 0
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("connectops_reconciles_total{")
        and 'kind="Connector"' in line
        and (trigger is None or f'trigger="{trigger}"' in line)
    )


def connector_ready(item: dict[str, Any]) -> bool:
    conds = (item.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def sanitize_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", text.lower())
