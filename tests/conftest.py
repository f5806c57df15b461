"""Session fixtures for the real test servers (see tests/env/servers.py).

Servers start lazily: only tests that request ``kube``, ``kafka``, ``connect`` or
``connect_factory`` (directly or through other fixtures) start them, once per session, so unit
tests stay fast. Such tests are marked ``e2e`` automatically (``-m "not e2e"`` deselects them).
When the provisioned binaries are missing the fixtures fail, never skip: a silently skipped
end-to-end suite looks green.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest

# `.venv/bin/pytest` does not put the repository root on sys.path; tests import `tests.env.servers`
# (the same module `python -m tests.env.servers` runs), so make that importable.
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

from tests.env.plugins import versioned_plugin_dir  # noqa: E402
from tests.env.servers import (  # noqa: E402
    ConnectFactory,
    ConnectWorker,
    KafkaBroker,
    KubeAPI,
    MissingTestEnvError,
    ServerStartError,
)

SERVER_FIXTURES = frozenset({"kube", "kube_client", "kafka", "connect", "connect_factory"})

# Servers this session started, for the startup-time summary at the end of the run.
_started: list[KubeAPI | KafkaBroker | ConnectWorker] = []

_T = TypeVar("_T")


def _start_or_fail(start: Callable[[], _T]) -> _T:
    try:
        return start()
    except MissingTestEnvError as exc:
        message = f"test environment not provisioned: {exc}"
    except ServerStartError as exc:
        message = f"test server failed to start: {exc}"
    # Outside the except blocks, so the report shows the message, not a chained traceback.
    pytest.fail(message, pytrace=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _started:
        return
    terminalreporter.section("test servers: startup seconds")
    for server in _started:
        name = server.workdir.name
        if isinstance(server, ConnectWorker):
            runs = ", ".join(f"rest {r['rest']:.1f} ready {r['ready']:.1f}" for r in server.startup_seconds)
            terminalreporter.write_line(f"{name}: {runs}")
        else:
            timings = ", ".join(f"{k} {v:.1f}" for k, v in server.startup_seconds.items())
            terminalreporter.write_line(f"{name}: {timings}")


#: The longest files (seconds per file in CI57, a full run on 2 cores and 3 workers, with the
#: Connect workers' 2 s group sessions), longest first: with ``--dist=loadfile`` a worker takes
#: the next whole file when it is free, so a long file left for the end runs alone while the
#: other workers idle (CI53 ended on the 109 s rotation smoke, alone for 2 minutes).
SLOW_FIRST = (
    # first: on a cold cache its fixture builds kube-apiserver 1.30 (~10 min on 2 idle cores)
    # while the other workers run the rest; warm, 20 s
    "tests/e2e/test_kube_oldest.py",
    "tests/helm/test_rbac_proof.py",  # 310
    "tests/e2e/test_mm2_soak.py",  # 300-350 (a 3-minute healthy MM2 flow, then a re-creation at the 60 s resync)
    "tests/e2e/test_reset_many_partitions.py",  # 150-330 (20,000 source partitions, two operator processes)
    "tests/e2e/test_mm2_check.py",  # 250 (real MM2; one test with its own worker and the JMX exporter)
    "tests/e2e/test_offset_reset_mm2.py",  # 140 alone (two clusters, real MirrorMaker 2)
    "tests/e2e/test_debezium_postgres.py",  # 90 alone (PostgreSQL, its own worker)
    "tests/spark/test_ownership_protocol.py",  # 120 alone (two sinks settling their groups)
    "tests/e2e/test_connector_e2e.py",  # 209
    "tests/e2e/test_old_workers.py",  # 95 alone (three older Connect releases, fetched on first use)
    "tests/e2e/test_founding_case_pre31.py",  # 130-165 alone (a 3.0.0 worker under pressure)
    "tests/helm/test_upgrade.py",  # 60-90 alone (its own API server, two operator processes)
    "tests/e2e/test_check_kind_appears.py",  # 100-130 (its own API server, the 60 s defaults)
    "tests/e2e/test_offset_truth_sink.py",  # 190
    "tests/e2e/test_group_failover.py",  # 80-120 (a -> b and b -> a MirrorMaker 2 flows)
    "tests/e2e/test_reset_production.py",  # 100 (the production defaults)
    "tests/e2e/test_restart_pace.py",  # the production resync
    "tests/e2e/test_verbs_pace.py",  # the production resync
    "tests/e2e/test_offset_reset_crash.py",  # 176
    "tests/e2e/test_offset_reset_faults.py",  # 164
    "tests/e2e/test_offset_reset_e2e.py",  # 160
    "tests/e2e/test_offset_truth_source.py",  # 152
    "tests/e2e/test_producer_pressure_cr.py",  # 148
    "tests/e2e/test_rename.py",  # 142
    "tests/benchmarks/test_check_batch_bench.py",  # 134
    "tests/image/test_operator_image.py",  # 128
    "tests/e2e/test_checks_e2e.py",  # 110
    "tests/benchmarks/test_rotation_bench.py",  # 102
    "tests/spark/test_burrow_table.py",  # 96
    "tests/benchmarks/test_spark_check_bench.py",  # 94
    "tests/benchmarks/test_crash_bench.py",  # 87
    "tests/spark/test_check_burrow.py",  # 83
    "tests/e2e/test_offsets_on_create.py",  # 79
    "tests/spark/test_collect_integration.py",  # 78
    "tests/benchmarks/test_fault_bench.py",  # 77
    "tests/adapters/test_connect_contract.py",  # 74
    "tests/benchmarks/test_bad_input_bench.py",  # 73
    "tests/e2e/test_ownership.py",  # 73
    "tests/test_spark_operator_harness.py",  # 72
    "tests/adapters/test_kafka_offsets.py",  # 66
    "tests/e2e/test_reset_safety.py",  # 62
    "tests/test_dockerfile.py",  # 62
    "tests/e2e/test_producer_pressure_env.py",  # 59
    "tests/spark/test_mm2_lag.py",  # 55
    "tests/e2e/test_verbs.py",  # 55
    "tests/benchmarks/test_producer_pressure_bench.py",  # 53
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
    first = {path: rank for rank, path in enumerate(SLOW_FIRST)}
    # stable: within a file, and among the other files, the collection order stays
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))


@pytest.fixture(scope="session")
def testenv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Working directory of the session's servers (their data and logs)."""
    return tmp_path_factory.mktemp("testenv")


@pytest.fixture(scope="session")
def kube(testenv_root: Path) -> Iterator[KubeAPI]:
    """etcd + kube-apiserver; KUBECONFIG points at its admin kubeconfig for the session."""
    api = _start_or_fail(KubeAPI(testenv_root).start)
    _started.append(api)
    previous = os.environ.get("KUBECONFIG")
    # kopf and kubernetes.config.load_kube_config() read KUBECONFIG when they log in.
    os.environ["KUBECONFIG"] = str(api.kubeconfig_path)
    try:
        yield api
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        api.stop()


@pytest.fixture(scope="session")
def kube_client(kube: KubeAPI) -> Iterator[kubernetes.client.ApiClient]:
    """A kubernetes ``ApiClient`` logged in as the admin user."""
    # Through the kubeconfig on purpose: it is what kopf and the operator consume.
    # Any: this loader and ApiClient.close() are not annotated in the kubernetes package.
    client: Any = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kube.kubeconfig_path)
    )
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def kafka(testenv_root: Path) -> Iterator[KafkaBroker]:
    """An Apache Kafka broker (KRaft, one node, from Maven Central's jars)."""
    broker = _start_or_fail(KafkaBroker(testenv_root).start)
    _started.append(broker)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def connect_factory(testenv_root: Path, kafka: KafkaBroker) -> Iterator[ConnectFactory]:
    """Start extra, independent Connect worker groups on the session broker; all stop at the end."""
    workers: list[ConnectWorker] = []

    def make(
        name: str | None = None,
        *,
        override_policy: str = "All",
        offset_partitions: int = 25,
        extra_properties: Mapping[str, str] | None = None,
        plugin_path: Sequence[Path] = (),
        extra_classpath: Sequence[Path] = (),
    ) -> ConnectWorker:
        if name is None:
            taken = {w.name for w in workers}
            name = next(f"connect-{i}" for i in range(1, len(workers) + 2) if f"connect-{i}" not in taken)
        worker = ConnectWorker(
            testenv_root,
            kafka.bootstrap,
            name=name,
            override_policy=override_policy,
            offset_partitions=offset_partitions,
            extra_properties=extra_properties,
            plugin_path=plugin_path,
            extra_classpath=extra_classpath,
        )
        workers.append(worker)
        _started.append(worker)
        return _start_or_fail(worker.start)

    try:
        yield make
    finally:
        for worker in reversed(workers):
            worker.stop()


@pytest.fixture(scope="session")
def connect(connect_factory: ConnectFactory) -> ConnectWorker:
    """The session's main Connect worker group (override policy ``All``), with the two versions of
    the ``versioned`` test plugin on its plugin.path (KIP-891; two small jars, no extra start time)."""
    plugins = _start_or_fail(versioned_plugin_dir)
    return connect_factory("connect", override_policy="All", plugin_path=[plugins])
