"""A rolling update of two replicas, with the processes the chart starts, as a kubelet would run them.

No kubelet runs here, so the Deployment's rollout is played step by step with the chart's own
command, arguments, environment and ServiceAccount (tests/helm/rbac_env.py renders and applies
them), at the chart's production Lease timings (15 s lease, 10 s renew deadline, 2 s retry):

- each process runs as PID 1 of its own PID namespace (``unshare --pid --fork``), as in a
  container: there the kernel drops a SIGTERM that the process has no handler for, so a Python
  operator without one is only ever stopped by the kubelet's SIGKILL;
- ``strategy: RollingUpdate, maxSurge 1, maxUnavailable 0``: the new pod starts beside the old
  leader; the old one is stopped (SIGTERM) only once the new one's readiness probe
  (``/healthz?ready`` on the health port, as the chart's probe asks it) answers 200;
- the old leader is stopped while an OffsetReset is in flight.

Measured from the Lease (its own microsecond times): the leaderless gap, from the old holder's
last renewal to the new holder's acquisition. Also checked: the old leader and a standby exit on
SIGTERM by themselves (code 0, well within the grace period), and the reset finishes, with one
backup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
import yaml

from tests.e2e.conftest import OPERATOR_ENV, K8s, connect_cluster_spec, wait_for
from tests.e2e.test_leader_election import finished, source
from tests.env.servers import ConnectWorker, KubeAPI, free_port
from tests.helm.chart import CHART_DIR
from tests.helm.rbac_env import (
    AUDIENCE,
    Env,
    install_rbac,
    operator_argv,
    service_account_kubeconfig,
    uninstall_cluster_scoped,
)

pytestmark = pytest.mark.timeout(600)

#: the chart's default terminationGracePeriodSeconds: a process still alive after it is SIGKILLed
GRACE = 30.0


class Pod:
    """One replica: ``connectops run`` with the chart's arguments, PID 1 of its own PID namespace."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.health = free_port()
        self.log_path = log
        argv = ["unshare", "--pid", "--fork", "--kill-child=SIGKILL", *operator_argv(args)]
        argv += ["--liveness", f"http://127.0.0.1:{self.health}/healthz"]
        with log.open("wb") as out:
            self.unshare = subprocess.Popen(
                argv, env={**env, "POD_NAME": name}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pid = int(wait_for(self._child, 10, f"{name}'s PID 1", interval=0.05))

    def _child(self) -> int | None:
        try:
            children = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        """The chart's readiness probe: GET /healthz?ready on the health port."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.health}/healthz?ready", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def sigterm(self) -> float:
        os.kill(self.pid, signal.SIGTERM)
        return time.monotonic()

    def wait(self, timeout: float) -> int | None:
        """The exit code (the PID-1 child's, which unshare passes on), or None if still running."""
        try:
            return self.unshare.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.unshare.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.unshare.wait(10)


@dataclass
class LeaseWatch:
    """Polls the Lease every 50 ms: each holder's last renewal and acquisition, as the server wrote them."""

    api: Any
    name: str
    namespace: str
    renewed: dict[str, datetime] = field(default_factory=dict)
    acquired: dict[str, datetime] = field(default_factory=dict)
    #: when this test first saw each holder (monotonic), None = released
    seen: dict[str | None, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):
                spec = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=5).spec
                who = spec.holder_identity
                self.seen.setdefault(who, time.monotonic())
                if who and spec.renew_time:
                    self.renewed[who] = spec.renew_time
                if who and spec.acquire_time:
                    self.acquired.setdefault(who, spec.acquire_time)
            self.stop.wait(0.05)


@pytest.fixture
def rollout_env(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> tuple[K8s, Any, Env]:
    ns = f"roll-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    env = Env(kube.url, kube.ca_path, kube.kubeconfig_path, connect.url, connect_cluster_spec(connect), tmp_path)
    return K8s(kube_client, ns), kube_client, env


def test_rolling_update_of_two_replicas_hands_the_lease_over(
    rollout_env: tuple[K8s, Any, Env], connect: ConnectWorker, tmp_path: Path
) -> None:
    k8s, admin, env = rollout_env
    release = f"ro-{uuid.uuid4().hex[:6]}"
    # production Lease timings: the chart's defaults (chart_values shortens them for the RBAC proof)
    install = install_rbac(admin, k8s.ns, release)
    pods: list[Pod] = []
    watch: LeaseWatch | None = None
    name = ""
    try:
        args = _with_default_lease_timings(install.args)
        kubeconfig = service_account_kubeconfig(
            admin, env, k8s.ns, install.service_account, tmp_path / "kubeconfig", audience=AUDIENCE
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECTOPS_", "KUBERNETES_SERVICE"))}
        # the suite's fast resyncs and retries; where the operator's own objects live is the chart's
        fast = {k: v for k, v in OPERATOR_ENV.items() if not k.endswith("_NAMESPACE")}
        proc_env = {**base, **fast, **install.env, "KUBECONFIG": str(kubeconfig)}
        lease = args[args.index("--lease-name") + 1]
        coordination = kubernetes.client.CoordinationV1Api(admin)

        old = Pod("old", args, proc_env, tmp_path / "old.log")
        pods.append(old)
        wait_for(lambda: "leading: this process" in old.log(), 90, "the old pod leads")
        watch = LeaseWatch(coordination, lease, k8s.ns)
        threading.Thread(target=watch.run, name="lease-watch", daemon=True).start()
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
        name, _ = source(k8s, connect, tmp_path)
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=90)

        # a standby stops on SIGTERM by itself (as PID 1, without a handler it would ignore it)
        spare = Pod("spare", args, proc_env, tmp_path / "spare.log")
        pods.append(spare)
        wait_for(lambda: "standing by" in spare.log(), 90, "the spare stands by")
        wait_for(spare.ready, 30, "the spare's readiness")
        sent = spare.sigterm()
        assert spare.wait(GRACE) == 0, spare.log()[-3000:]
        standby_exit = time.monotonic() - sent
        assert "stopped while standing by" in spare.log()

        # the rollout: the surge pod starts and stands by; maxUnavailable 0 waits for its readiness
        new = Pod("new", args, proc_env, tmp_path / "new.log")
        pods.append(new)
        wait_for(lambda: "standing by" in new.log(), 90, "the new pod stands by")
        wait_for(new.ready, 30, "the new pod's readiness")
        old_identity = coordination.read_namespaced_lease(lease, k8s.ns).spec.holder_identity
        assert old_identity.startswith("old-")

        # a reset in flight when the old leader is told to stop
        k8s.create("offsetresets", "r1", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
        wait_for(
            lambda: (k8s.get("offsetresets", "r1").get("status") or {}).get("phase") == "Running",
            60,
            "the reset running",
            interval=0.02,
        )
        in_flight = k8s.get("offsetresets", "r1")["status"]
        stopped_at = old.sigterm()
        code = old.wait(GRACE)
        old_exit = time.monotonic() - stopped_at
        assert code == 0, old.log()[-3000:]

        def new_holder() -> str | None:
            return next((who for who in watch.acquired if who.startswith("new-")), None)

        new_identity = wait_for(new_holder, 30, "the new pod holds the Lease", interval=0.05)
        took_over = watch.seen[new_identity] - stopped_at
        gap = (watch.acquired[new_identity] - watch.renewed[old_identity]).total_seconds()
        print(
            f"\nrollout: old leader exited {old_exit:.2f} s after SIGTERM; Lease gap (old's last renewal"
            f" -> new's acquisition) {gap:.2f} s; new holder seen {took_over:.2f} s after SIGTERM;"
            f" standby exited {standby_exit:.2f} s after SIGTERM; reset at SIGTERM: "
            f"{[(s['name'], s['state']) for s in in_flight.get('steps') or []]}"
        )
        # a hand-over, not an expiry: well inside the 15 s lease duration
        assert gap < 10, gap
        assert "released Lease" in old.log()

        status = finished(k8s, "r1")
        assert status["phase"] == "Succeeded", status
        assert "leading: this process" in new.log()
        backups = kubernetes.client.CoreV1Api(admin).list_namespaced_config_map(
            k8s.ns, label_selector="connectops.io/backup=offsets"
        )
        assert [cm.metadata.name for cm in backups.items] == [status["backup"]["configMap"]]

        sent = new.sigterm()
        assert new.wait(GRACE) == 0, new.log()[-3000:]
        assert coordination.read_namespaced_lease(lease, k8s.ns).spec.holder_identity is None
    finally:
        if watch is not None:
            watch.stop.set()
        for pod in pods:
            pod.kill()
        if name:  # the shared worker must not keep this test's connector
            with contextlib.suppress(httpx.HTTPError):
                httpx.delete(f"{connect.url}/connectors/{name}", timeout=30)
        uninstall_cluster_scoped(admin, install)


def _with_default_lease_timings(args: list[str]) -> list[str]:
    """install_rbac renders with the RBAC proof's short Lease timings: put values.yaml's back."""
    election = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["leaderElection"]
    defaults = {
        "--lease-duration": election["leaseDurationSeconds"],
        "--renew-deadline": election["renewDeadlineSeconds"],
        "--retry-period": election["retryPeriodSeconds"],
    }
    out = list(args)
    for flag, value in defaults.items():
        out[out.index(flag) + 1] = str(value)
    return out
