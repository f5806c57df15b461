"""The founding case as users first met it, on a real Connect worker whose offset commits wait
for every outstanding record: 3.0.0 (tests/env/connect_versions; KAFKA-12226 reached 3.1.0 and,
backported, 3.0.1, so 3.0.0 is the newest release with the old commit path), on Java 17,
against the session-independent 4.3.1 broker of the pressure environment (tests/env/pressure.py:
a latency proxy in front of the broker, the JMX exporter with Strimzi's rules, the FloodSource
standing in for Debezium).

With the producer defaults of 3.0 (``batch.size`` 16384, ``linger.ms`` 0) and one request in
flight, the task's producer delivers a few hundred of the 2,000 records/s offered; every commit
waits for the whole pile and gives up after ``offset.flush.timeout.ms`` (5 s): "Failed to flush,
timed out while waiting for producer to flush outstanding N messages" in the worker's log, and a
commit time of the whole timeout in its metrics (``offset-commit-max-time-ms``; 3.0.0 counts the
timed-out flush as a successful commit, so ``offset-commit-failure-percentage`` stays 0: read
from its bytecode and its live metrics here). The operator's check
(ConnectCluster + Connector, the real check job through the spark-operator stand-in) diagnoses
ProducerPressure in its "commits fail" form from the exporter's live series and recommends a
``producer.override.batch.size``; the founding case's 327680, applied through the Connector,
ends the failures (counted in the log and the metrics afterwards), and the next check proves it.
"""

from __future__ import annotations

import json
import math
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import K8s, wait_for
from tests.e2e.test_producer_pressure_cr import (
    check_application,
    flood_diagnosed,
    producer_metrics_restart,
    verdict_of,
)
from tests.env.connect_versions import CONNECT_30, connect_libs, expected_sums, mismatched
from tests.env.pressure import KAFKA_DEFAULT_BATCH_SIZE, SEED_BATCH_SIZE, PressureEnv
from tests.env.servers import KubeAPI, MissingTestEnvError, ServerStartError
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.env.spark.harness import FakeSparkOperator

pytestmark = pytest.mark.e2e

LATENCY_MS = 40.0
#: 2 MB/s offered: at 16 KiB per request and 40 ms per round trip the producer delivers ~400/s;
#: at 327680 up to ~8,000/s, so the cure holds on a loaded machine (see test_producer_pressure_env).
RATE = 2000.0
RECORD_BYTES = 1000
#: Connect's default offset.flush.timeout.ms, which the test workers keep
FLUSH_TIMEOUT_MS = 5000
FAILED_FLUSH = re.compile(r"Failed to flush, timed out while waiting for producer to flush outstanding (\d+) messages")
#: how long the cured task is watched for a failed commit (the test workers commit every second)
CURED_WATCH_SECONDS = 20.0


@pytest.fixture(scope="module")
def pressure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PressureEnv]:
    try:
        env = PressureEnv(
            tmp_path_factory.mktemp("founding-30"),
            latency_ms=LATENCY_MS,
            # 3.0's own producer defaults: linger.ms was 0 before 4.0 (KIP-1030)
            worker_properties={"producer.linger.ms": "0"},
            name="founding",
            jar_dir=connect_libs(CONNECT_30),
            version=CONNECT_30,
        )
        env.start()
    except (MissingTestEnvError, ServerStartError) as exc:
        pytest.fail(f"pressure environment on Connect {CONNECT_30} did not start: {exc}", pytrace=False)
    try:
        yield env
    finally:
        env.stop()


def failed_flushes(env: PressureEnv) -> list[int]:
    """The outstanding-record counts of every "Failed to flush" the worker logged, in order."""
    return [int(m[1]) for m in FAILED_FLUSH.finditer(env.connect.log_path.read_text(errors="replace"))]


def raw_task_figure(env: PressureEnv, attribute: str) -> float | None:
    """One connector-task-metrics attribute of task flood-0 from Kafka's own metrics (PromReporter's /raw)."""
    bean = "kafka.connect:type=connector-task-metrics,connector=flood,task=0"
    for line in httpx.get(env.raw_metrics_url, timeout=10).text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == bean and parts[1] == attribute:
            return float(parts[2])
    return None


def test_the_pinned_30_commits_wait_for_every_record() -> None:
    """The pin is the release that has the old commit path, read from its own bytecode: 3.0.0's
    WorkerSourceTask logs "Failed to flush" and there is no SubmittedRecords (KAFKA-12226's
    class, in 3.0.1 and later); its jars are the recorded ones."""
    libs = connect_libs(CONNECT_30)
    sums = expected_sums(CONNECT_30)
    assert {name.rsplit("-", 1)[0] for name in sums} == {
        *("connect-api", "connect-file", "connect-json", "connect-runtime", "connect-transforms", "kafka-clients")
    }
    assert mismatched(libs, sums) == {}
    with zipfile.ZipFile(libs / f"connect-runtime-{CONNECT_30}.jar") as jar:
        names = jar.namelist()
        task = jar.read("org/apache/kafka/connect/runtime/WorkerSourceTask.class")
    assert b"Failed to flush, timed out while waiting for producer to flush outstanding" in task
    assert not [n for n in names if "SubmittedRecords" in n]


def test_founding_case_on_a_pre_31_worker(
    k8s: K8s, kube: KubeAPI, kube_client: Any, pressure: PressureEnv, tmp_path: Path
) -> None:
    apply_sparkapplication_crd(kube_client)
    topic = "founding"
    pressure.create_topic(topic)
    worker = pressure.connect
    # the worker is the release pinned, by its own word
    assert httpx.get(f"{pressure.connect_url}/", timeout=10).json()["version"] == CONNECT_30
    k8s.create(
        "connectclusters",
        "pressure",
        {
            "restUrl": pressure.connect_url,
            "kafka": {"bootstrapServers": pressure.bootstrap},
            "topics": {"offsets": worker.offset_topic, "configs": worker.config_topic, "status": worker.status_topic},
            # the test workers flush offsets every second (tests/env/servers.py)
            "workerMetrics": {"urls": [pressure.metrics_url], "offsetFlushIntervalMs": 1000},
        },
        "ConnectCluster",
    )
    k8s.wait_condition("connectclusters", "pressure", "Ready", "True")
    assert k8s.get("connectclusters", "pressure")["status"]["workerVersion"] == CONNECT_30
    with FakeSparkOperator(kube_client, k8s.ns, kubeconfig_path=kube.kubeconfig_path, log_dir=tmp_path / "spark") as h:
        diagnosed = flood_diagnosed(k8s, h, pressure, topic, rate=RATE, record_bytes=RECORD_BYTES)

        # the symptom as users met it, from the worker itself: its log and Kafka's own metrics
        failed = failed_flushes(pressure)
        assert failed, pressure.connect.log_tail()
        # each failed flush left more records outstanding than 40 ms round trips of 16 KiB deliver in 5 s
        assert max(failed) > RATE * FLUSH_TIMEOUT_MS / 1000 / 4, failed
        # Kafka's own metrics: 3.0.0 records the timed-out flush through recordCommitFailure(duration,
        # null), and TaskMetricsGroup.recordCommit counts a null error as a success, so the failure
        # percentage stays 0 while the commit time shows the whole flush timeout
        assert raw_task_figure(pressure, "offset-commit-failure-percentage") == 0
        raw_max = raw_task_figure(pressure, "offset-commit-max-time-ms")
        assert raw_max is not None
        assert raw_max >= FLUSH_TIMEOUT_MS
        # and the exporter's series, which the check reads (Strimzi's rules serve no -percentage)
        live = pressure.figures("flood")
        assert live.commit_max_ms is not None
        assert live.commit_max_ms >= FLUSH_TIMEOUT_MS, live.as_dict()

        # the check's diagnosis: the pre-3.1 form, from the exporter's live series
        assert "offset commits fail" in diagnosed["message"]
        assert "Failed to flush" in diagnosed["message"]
        verdict = verdict_of(k8s, "flood-check-g1")["producer"]
        assert verdict["workerVersion"] == CONNECT_30
        before = verdict["tasks"][0]
        diagnosis = before["diagnosis"]
        assert diagnosis["form"] == "commits fail"
        assert any("at least offset.flush.timeout.ms" in e for e in diagnosis["evidence"]), diagnosis["evidence"]
        figures = before["figures"]
        assert figures["batch_size"] == KAFKA_DEFAULT_BATCH_SIZE
        assert figures["commit_max_time_ms"] >= FLUSH_TIMEOUT_MS
        assert figures["records_per_request"] < 30  # ~16 records of 1 KB fill a 16 KiB batch
        # the recommendation follows the data (the same rule as test_producer_pressure_cr.py)
        rec = diagnosis["recommendation"]
        rate, latency_s, record = figures["rate"], figures["latency_ms"] / 1000, figures["record_bytes"]
        per_second = max(rate * 2, figures["queue_peak"] / (verdict["offsetFlushTimeoutMs"] / 1000))
        rounded = math.ceil(per_second * latency_s * record / 16384) * 16384
        assert rec["batchSize"] == max(KAFKA_DEFAULT_BATCH_SIZE, min(rounded, 1048576 - 16384))
        assert rec["properties"]["producer.override.batch.size"] == str(rec["batchSize"])
        assert "producer.override.batch.size" in diagnosed["message"]
        # UNHEALTHY, not DEGRADED: every failed commit is a replay waiting to happen
        reasons = verdict_of(k8s, "flood-check-g1").get("reasons") or []
        assert any(r.get("code") == "PRODUCER_PRESSURE" and r.get("severity") == "UNHEALTHY" for r in reasons), reasons

        # the founding case's cure, applied through the Connector as a user would
        k8s.patch_spec("connectors", "flood", {"producerOverrides": {"batchSize": SEED_BATCH_SIZE}})
        h.wait_for_state(check_application(k8s, 2), "COMPLETED", timeout=240)
        proof = producer_metrics_restart(k8s, h, pressure)
        try:
            cured = k8s.wait_condition("connectors", "flood", "ProducerHealthy", "True", "NoProducerPressure", 120)
        except pytest.fail.Exception as exc:
            seen = verdict_of(k8s, proof).get("producer")
            pytest.fail(f"{exc}\nthe {proof} producer verdict: {json.dumps(seen)}", pytrace=False)
        assert "improved" in cured["message"]
        live_config = httpx.get(f"{pressure.connect_url}/connectors/flood/config", timeout=10).json()
        assert live_config["producer.override.batch.size"] == str(SEED_BATCH_SIZE)
        after = verdict_of(k8s, proof)["producer"]["tasks"][0]
        assert after["diagnosis"] is None
        effect = {c["figure"]: c for c in after["effect"]["changes"]}
        assert effect["records per request"]["verdict"] == "improved"
        assert after["effect"]["verdict"] == "improved"

    # the failures stopped, measured: the running (cured) task logs no failed flush while it
    # commits every second, no commit of it lasts the flush timeout (Kafka's own metrics and the
    # exporter's), and its committed offset keeps up with what it polled
    starts = len(pressure.task_starts("flood"))
    failed_before = len(failed_flushes(pressure))
    committed_before = pressure.committed("flood") or 0
    time.sleep(CURED_WATCH_SECONDS)
    assert len(pressure.task_starts("flood")) == starts, "the task restarted while watched"
    assert len(failed_flushes(pressure)) == failed_before, failed_flushes(pressure)[failed_before:]
    cured_max = raw_task_figure(pressure, "offset-commit-max-time-ms")
    assert cured_max is not None
    assert cured_max < FLUSH_TIMEOUT_MS
    steady = pressure.figures("flood")
    assert steady.commit_max_ms is not None
    assert steady.commit_max_ms < FLUSH_TIMEOUT_MS, steady.as_dict()
    committed = wait_for(lambda: pressure.committed("flood"), 10, "a committed offset")
    # ~RATE x 20 s more committed; at least half of it, on a loaded machine
    assert committed - committed_before > RATE * CURED_WATCH_SECONDS / 2, (committed_before, committed)
    assert steady.poll_total is not None
    start_seq = pressure.task_starts("flood")[-1]
    # within a few seconds of records of what the task polled (one-second commits)
    assert start_seq + steady.poll_total - committed < RATE * 3, (start_seq, steady.poll_total, committed)
    changes = "; ".join(f"{c['figure']} {c['before']} -> {c['after']}" for c in after["effect"]["changes"])
    # what was measured, next to the worker's log (the figures behind docs/producer-pressure.md)
    (pressure.root / "measured.txt").write_text(
        f"Connect {CONNECT_30}: failed flushes with {failed} outstanding, commit max {raw_max} ms, "
        f"records/request {figures['records_per_request']}, queue peak {figures['queue_peak']}, "
        f"recommended batch.size {rec['batchSize']}; after {SEED_BATCH_SIZE} ({proof}): {changes}; "
        f"cured commit max {cured_max} ms, {committed - committed_before} committed in {CURED_WATCH_SECONDS:.0f} s, "
        f"starts at seq {pressure.task_starts('flood')}\n"
    )
