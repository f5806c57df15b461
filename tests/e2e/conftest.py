"""End-to-end fixtures: CRDs applied to the real API server, and the operator running in-process
through ``kopf.testing.KopfRunner`` against it and the real Connect worker."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.env.records import topic_record_count
from tests.env.servers import ConnectWorker, KubeAPI

__all__ = ["topic_record_count"]  # tests import it from here

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "connectops.io", "v1alpha1"

# The operator reads these at import; tests want fast resyncs and retries.
#: where the operators of the tests record Connectors' claims (created with the CRDs)
CLAIM_NAMESPACE = "connectops-claims"
OPERATOR_ENV = {
    "CONNECTOPS_RESYNC_SECONDS": "3",
    "CONNECTOPS_RETRY_SECONDS": "2",
    "CONNECTOPS_RETRY_MAX_SECONDS": "5",
    "CONNECTOPS_SETTLE_SECONDS": "10",
    "CONNECTOPS_CAPABILITIES_TTL_SECONDS": "5",
    # no spark-operator runs the applications of most tests: they never finish, and under the
    # chart's cap of 4 the session's first four batches would hold every later test's check
    # back for their 30-minute timeout (CI28). The cap itself: test_check_batches, the bench.
    "CONNECTOPS_CHECK_MAX_RUNNING": "10000",
    # a check is requested once its change has settled (every task RUNNING, so that it judges a
    # running connector); the window counts from the first request. Two sinks made together on
    # a loaded CI machine came up more than the default 5 s apart (CI32: two applications where
    # test_check_runs_after_each_change_and_reports wants one), so the e2e window is wider
    "CONNECTOPS_CHECK_BATCH_WINDOW_SECONDS": "10",
    # the in-process operator's scope (kopf run --namespace t-*): its startup LIST of claims
    # covers the same namespaces (`connectops run` sets this from its own arguments)
    "CONNECTOPS_WATCH_NAMESPACES": "t-*",
    # Connectors' claims are recorded where the chart records them, in a namespace of the
    # operator's own (the chart's lock namespace); the session's reset locks stay in each
    # reset's namespace, as a bare `connectops run` keeps them
    "CONNECTOPS_CLAIM_NAMESPACE": CLAIM_NAMESPACE,
}


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition", interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (ApiException, httpx.HTTPError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test in a row of those using MirrorMaker 2's shared servers, stop them
    (tests/e2e/mm2_fixtures.py): an idle broker and worker do not outlive the modules using them."""
    try:
        yield
    finally:
        shared = sys.modules.get("tests.e2e.mm2_fixtures")
        names = getattr(nextitem, "fixturenames", ())
        uses = any(f in names for f in getattr(shared, "FIXTURES", ()))
        if shared is not None and not uses:
            shared.stop_idle()


@pytest.fixture(scope="session")
def crds(kube: KubeAPI, kube_client: Any) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(kube_client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        try:
            ext.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise

        def established(name: str = body["metadata"]["name"]) -> bool:
            crd = ext.read_custom_resource_definition(name)
            return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))

        wait_for(established, 30, f"CRD {body['metadata']['name']} Established")
    try:
        kubernetes.client.CoreV1Api(kube_client).create_namespace(
            kubernetes.client.V1Namespace(metadata={"name": CLAIM_NAMESPACE})
        )
    except ApiException as exc:
        if exc.status != 409:
            raise


@pytest.fixture(scope="session")
def operator(crds: None, kube: KubeAPI) -> Iterator[Any]:
    """The operator, in-process, watching all namespaces, for the whole session."""
    # connectops.handlers reads its settings (and kopf its timer intervals) once, at import: a
    # test of this worker that imported it earlier would run the operator on the defaults, and
    # every resync-paced wait of the session would time out (CI51: 13 failed)
    assert "connectops.handlers" not in sys.modules, "connectops.handlers was imported before OPERATOR_ENV was set"
    os.environ.update(OPERATOR_ENV)
    from kopf.testing import KopfRunner

    # Only the t-* namespaces: crash tests run their own operator processes in crash-* ones.
    with KopfRunner(
        ["run", "--namespace", "t-*", "--standalone", "-m", "connectops.handlers"],
        timeout=60,
    ) as runner:
        yield runner
    assert runner.exception is None, runner.exception


class K8s:
    """Tiny helper over the custom objects API for one namespace."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.ns = namespace
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.core = kubernetes.client.CoreV1Api(client)

    def create(self, plural: str, name: str, spec: dict[str, Any], kind: str) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, "namespace": self.ns},
            "spec": spec,
        }
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, body)
        return result

    def get(self, plural: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)
        return result

    def patch_spec(self, plural: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name, {"spec": spec})

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)

    def exists(self, plural: str, name: str) -> bool:
        try:
            self.get(plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def condition(self, plural: str, name: str, type_: str) -> dict[str, Any] | None:
        status = self.get(plural, name).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)

    def wait_condition(
        self, plural: str, name: str, type_: str, status: str, reason: str | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        seen: list[dict[str, Any] | None] = [None]

        def check() -> dict[str, Any] | None:
            cond = seen[0] = self.condition(plural, name, type_)
            if cond and cond["status"] == status and (reason is None or cond["reason"] == reason):
                return cond
            return None

        what = f"{plural}/{name} {type_}={status} {reason or ''}"
        try:
            result: dict[str, Any] = wait_for(check, timeout, what)
        except pytest.fail.Exception:
            # the failure names the condition as it last was, not just "None"
            pytest.fail(f"timed out after {timeout}s waiting for {what}; the condition was {seen[0]!r}")
        return result

    def events(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_event(self.ns).items
        return [e for e in items if e.involved_object.name == name]

    def create_secret(self, name: str, data: dict[str, str]) -> None:
        self.core.create_namespaced_secret(
            self.ns, kubernetes.client.V1Secret(metadata={"name": name}, string_data=data)
        )


@pytest.fixture
def k8s(kube_client: Any, operator: Any) -> Iterator[K8s]:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    yield K8s(kube_client, ns)
    # no namespace controller runs here: delete our objects explicitly so finalizers run now
    helper = K8s(kube_client, ns)
    for item in helper.custom.list_namespaced_custom_object(GROUP, VERSION, ns, "connectors")["items"]:
        with contextlib.suppress(ApiException):
            helper.delete("connectors", item["metadata"]["name"])


def connect_cluster_spec(worker: ConnectWorker) -> dict[str, Any]:
    return {
        "restUrl": worker.url,
        "kafka": {"bootstrapServers": worker.bootstrap},
        "topics": {
            "offsets": worker.offset_topic,
            "configs": worker.config_topic,
            "status": worker.status_topic,
        },
    }


class ConnectREST:
    """Direct, synchronous access to the worker for assertions (never through the operator)."""

    def __init__(self, worker: ConnectWorker) -> None:
        self.worker = worker
        # 30 s: a config PUT waits for the worker group's rebalance, which the test broker holds
        # for a join round; with both xdist workers busy on 2 cores that passed 10 s (CI46)
        self.http = httpx.Client(base_url=worker.url, timeout=30)

    def path(self, name: str) -> str:
        from urllib.parse import quote

        return f"/connectors/{quote(name, safe='')}"

    def exists(self, name: str) -> bool:
        return self.http.get(self.path(name)).status_code == 200

    def config(self, name: str) -> dict[str, str]:
        response = self.http.get(self.path(name) + "/config")
        response.raise_for_status()
        result: dict[str, str] = response.json()
        return result

    def status(self, name: str) -> dict[str, Any]:
        response = self.http.get(self.path(name) + "/status")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def state(self, name: str) -> str | None:
        response = self.http.get(self.path(name) + "/status")
        if response.status_code != 200:
            return None
        return str(response.json()["connector"]["state"])


@pytest.fixture(scope="session")
def connect_rest(connect: ConnectWorker) -> ConnectREST:
    return ConnectREST(connect)


def count_config_writes(worker: ConnectWorker, connector: str) -> int:
    """How many config records the worker wrote for ``connector``: one per applied PUT/create.

    Read from the worker's own config topic, so it counts what Connect did, not what the
    operator believes it did.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": worker.bootstrap,
            "group.id": f"count-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        meta = consumer.list_topics(worker.config_topic, timeout=10)
        partitions = list(meta.topics[worker.config_topic].partitions)
        ends = {}
        for p in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(worker.config_topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(worker.config_topic, p, 0) for p in partitions])
        count, seen = 0, dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition()] = msg.offset() + 1
            if msg.key() == f"connector-{connector}".encode() and msg.value() is not None:
                count += 1
        return count
    finally:
        consumer.close()


class OperatorProcess:
    """The operator as a real process (``connectops run``), for crash tests: it can die by
    ``os._exit`` at a failpoint or be SIGKILLed, then be started again."""

    def __init__(self, kube: KubeAPI, namespace: str, log_dir: Path) -> None:
        self.kube = kube
        self.namespace = namespace
        self.log_dir = log_dir
        self.proc: Any = None
        self.runs = 0

    def start(
        self,
        failpoint: str | None = None,
        election: list[str] | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        """``election``: leader-election arguments instead of ``--standalone``; ``env``: more
        settings; ``args``: more arguments of ``connectops run`` (``--log-level debug``)."""
        import subprocess
        import sys

        env = {**os.environ, **OPERATOR_ENV, **(env or {}), "KUBECONFIG": str(self.kube.kubeconfig_path)}
        env.pop("CONNECTOPS_FAILPOINT", None)
        if failpoint:
            env["CONNECTOPS_FAILPOINT"] = failpoint
        self.runs += 1
        log = (self.log_dir / f"operator-{self.namespace}-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "connectops.cli", "run", "--namespace", self.namespace),
                *(election or ["--standalone"]),
                *(args or []),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_exit(self, timeout: float) -> int:
        code: int = self.proc.wait(timeout)
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except Exception:
                self.proc.kill()
                self.proc.wait(5)

    def log(self) -> str:
        path = self.log_dir / f"operator-{self.namespace}-{self.runs}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_tail(self) -> str:
        return self.log()[-4000:]
