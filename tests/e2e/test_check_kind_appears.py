"""The spark-operator installed after a Connector's check was refused for its absence: the operator,
as the chart runs it (its arguments, environment, RBAC and ServiceAccount) at the production
defaults (60 s resync, 5 s batch window, the probe's 5 s first look doubling up to the resync
period), notices the SparkApplication kind being served and asks the check again, once. Two Connectors
wait: one refused under an earlier process (the next one has only its status to go by: its
start-up pass waits on the kind again), one under the process running when the kind appears;
both are asked again together, in one SparkApplication.

On an API server of its own: the session's serves the SparkApplication CRD for the other check
tests from whenever the first of them installs it, and a CRD is cluster-wide, so its absence
cannot be had there (nor undone after). Measured: from the CRD's create to the SparkApplication's
(printed; docs/checks.md gives the bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from kubernetes import client

from connectops.adapters.kube import KubeClient
from connectops.planning.checks import NOT_SERVED, SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION
from connectops.reconcilers.checks import ASKS_AGAIN
from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.e2e.test_leader_election import source
from tests.env.servers import ConnectWorker, KubeAPI, ManagedProcess
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.helm.chart import apply, chart_crds
from tests.helm.rbac_env import AUDIENCE, Env, install_rbac, operator_argv, service_account_kubeconfig

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


@pytest.fixture
def bare_kube(testenv_root: Path) -> Iterator[KubeAPI]:
    """An API server of its own, with connectops' CRDs and no SparkApplication CRD."""
    api = KubeAPI(testenv_root, name=f"kube-nospark-{uuid.uuid4().hex[:6]}")
    try:
        yield api.start()
    finally:
        api.stop()


def _established(admin: Any, names: list[str]) -> None:
    ext: Any = client.ApiextensionsV1Api(admin)
    for name in names:

        def established(name: str = name) -> bool:
            conditions = ext.read_custom_resource_definition(name).status.conditions or ()
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        wait_for(established, 30, f"{name} Established", interval=0.2)


def _serves(kubeconfig: Path) -> bool:
    """The operator's own discovery read, with the operator's identity (the contract of the double's)."""
    api_client: Any = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]

    async def read() -> bool:
        return await KubeClient(api_client).serves(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, timeout=10)

    try:
        return asyncio.run(read())
    finally:
        api_client.close()


def test_the_kind_installed_later_is_noticed_and_each_waiting_check_asked_once(
    bare_kube: KubeAPI, connect: ConnectWorker, tmp_path: Path
) -> None:
    admin: Any = kubernetes.config.new_client_from_config(config_file=str(bare_kube.kubeconfig_path))  # type: ignore[no-untyped-call]
    ns = f"kind-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    crds = chart_crds()
    apply(admin, crds)
    _established(admin, [c["metadata"]["name"] for c in crds])
    install = install_rbac(admin, ns, "kind")
    env = Env(bare_kube.url, bare_kube.ca_path, bare_kube.kubeconfig_path, connect.url, {}, tmp_path)
    kubeconfig = service_account_kubeconfig(
        admin, env, ns, install.service_account, tmp_path / "kubeconfig", audience=AUDIENCE
    )
    # the chart's environment alone: its production periods, not the suite's fast ones
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECTOPS_", "KUBERNETES_SERVICE"))}
    proc_env |= {**install.env, "KUBECONFIG": str(kubeconfig)}
    assert (proc_env["CONNECTOPS_RESYNC_SECONDS"], proc_env["CONNECTOPS_CHECK_BATCH_WINDOW_SECONDS"]) == ("60", "5")
    assert proc_env["CONNECTOPS_CHECKS_ENABLED"] == "true"

    def operator(run: str) -> ManagedProcess:
        log = tmp_path / f"operator-{run}.log"
        return ManagedProcess(f"operator[{run}]", operator_argv(install.args), cwd=tmp_path, log_path=log, env=proc_env)

    k8s = K8s(admin, ns)
    custom = client.CustomObjectsApi(admin)
    processes = [operator("first")]
    names: list[str] = []
    try:
        processes[0].start()
        assert not _serves(kubeconfig)  # discovery, as the operator's ServiceAccount reads it
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")

        def refused(name: str) -> float:
            """Seconds from the Connector's create to its CheckNotSubmitted, said as it should be."""
            created = time.monotonic()
            lag = k8s.wait_condition("connectors", name, "LagHealthy", "Unknown", "CheckNotSubmitted", timeout=120)
            assert lag["message"] == f"{NOT_SERVED}. {ASKS_AGAIN}"
            assert k8s.get("connectors", name)["status"]["lastCheck"]["state"] == "NOT_SUBMITTED"
            return time.monotonic() - created

        # the first Connector is refused under one process, which then stops: the next one has
        # only its status to go by (its start-up pass waits on the kind again) ...
        names.append(source(k8s, connect, tmp_path)[0])
        said = [refused(names[0])]
        processes[0].stop(grace=10)
        processes.append(operator("second"))
        processes[1].start()
        # ... and the second is refused under the process that is running when the kind appears
        names.append(source(k8s, connect, tmp_path)[0])
        said.append(refused(names[1]))

        # the spark-operator is installed: its CRD, created and served
        crd_at = time.monotonic()
        apply_sparkapplication_crd(admin)
        served = time.monotonic() - crd_at
        assert _serves(kubeconfig)

        def applications() -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = custom.list_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, ns, SPARK_PLURAL
            )["items"]
            return items

        # at most: the probe's look at its cap (the resync period, 60 s), a pass, the batch window (5 s)
        [app] = wait_for(applications, 90, "the SparkApplication created", interval=0.2)
        latency = time.monotonic() - crd_at
        uids = {k8s.get("connectors", name)["metadata"]["uid"] for name in names}
        # one application for both (their checks are asked together, batched as any)
        assert {o["uid"] for o in app["metadata"]["ownerReferences"]} == uids
        for name in names:
            assert any(f"--connector={name}" in a for a in app["spec"]["arguments"])  # in its --each

        def following(name: str) -> dict[str, Any] | None:
            last: dict[str, Any] = k8s.get("connectors", name)["status"]["lastCheck"]
            return last if last["state"] != "NOT_SUBMITTED" else None

        for name in names:
            last = wait_for(lambda name=name: following(name), 30, f"{name} following the new check")
            assert last["application"] == app["metadata"]["name"]
            assert last["state"] in ("QUEUED", "PENDING")
            events = [e for e in k8s.events(name) if e.reason == "CheckNotSubmitted"]
            assert len(events) == 1, events
            assert events[0].count in (None, 1), events
        print(
            f"\nkind appears: CheckNotSubmitted {said[0]:.1f} s / {said[1]:.1f} s after each Connector's create;"
            f" the CRD served {served:.1f} s after its create; the SparkApplication created {latency:.1f} s"
            f" after the CRD's create ({latency - served:.1f} s after it was served); own API server started"
            f" in {sum(bare_kube.startup_seconds.values()):.1f} s"
        )
        assert len(applications()) == 1
        logged = processes[1].log_path.read_text(errors="replace")
        assert logged.count("SparkApplication is served now") == 1, logged[-3000:]
        assert "cannot tell whether SparkApplication is served" not in logged
    finally:
        for process in processes:
            process.stop(grace=10)
        for name in names:  # the shared worker must not keep this test's connectors
            with contextlib.suppress(httpx.HTTPError):
                httpx.delete(f"{connect.url}/connectors/{name}", timeout=30)
        admin.close()
