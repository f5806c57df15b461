"""MirrorMaker 2's loss detection on a healthy flow, with the operator at its production resync
(60 s): no false alarm through MM2 task restarts, then a real source topic re-creation caught
within one period.

The session's operator resyncs every 3 s (tests/e2e/test_mm2_check.py runs the detections
there); this one runs ``connectops run`` on the production defaults, as test_restart_pace.py
does, with its ``--metrics-port``. The flow is tests/e2e/mm2_fixtures.py's (source cluster
``a``, the session's broker as ``b``, the shared MM2 worker).

The healthy part: a producer writes steadily on ``a`` while MM2 replicates to ``b``, and MM2's
source task is restarted again and again through Connect's REST API (a task restart, a
connector restart with its tasks, a pause and resume, a stop and resume) and through the
operator (a ``connectops.io/restart`` token). Sampled through the run from the API server and
the operator's /metrics: MirrorComplete never False, no loss Warning Event, the lost-records
gauge 0, status.mirrorLoss without losses, and the looks (``checkedAt``) saw the stored offsets
move. At the end every record the producer had acknowledged is on ``b``, by content (MM2 is
at-least-once: duplicates after restarts are counted, losses are failures), and the check's
own collection says nothing was lost.

Then the source topic is deleted and re-created under the stopped MM2 (as in
test_mm2_check.py), its producer writing until MM2 has stopped: the condition and its Event
must come within one resync period plus a margin, and the records the operator counts lost are
the ones that never reach ``b``, counted from MM2's commit as its task stopped (which the look
of the stop's own reconcile may not have seen yet).

benchmarks/mm2_soak_bench.py runs the healthy part for 10 minutes through :func:`soak`.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from connectops.settings import load
from connectops_check.collect import collect_snapshot
from connectops_check.job import run_check
from connectops_check.verdict import Settings
from tests.e2e.conftest import K8s, OperatorProcess, wait_for
from tests.e2e.mm2_fixtures import Flow, cluster_a, mm2_worker, start_flow
from tests.e2e.test_restart_pace import PRODUCTION, production
from tests.env.records import batching_producer
from tests.env.servers import ConnectWorker, KafkaBroker, free_port
from tests.spark.conftest import spark

pytestmark = [pytest.mark.timeout(900), pytest.mark.spark]
# the shared MM2 fixtures, the operator at the production defaults, the Spark session
__all__ = ["cluster_a", "mm2_worker", "production", "spark"]

CONDITION = "MirrorComplete"
LOSS_REASONS = frozenset({"SourceTruncated", "SourceTopicRecreated"})
METRIC = "connectops_connector_mirror_records_lost"
#: the healthy run in CI, and the pause between two restarts of MM2's task
SOAK_SECONDS, RESTART_EVERY = 180.0, 25.0
#: how late after a period a look may come: the sweep's jitter (a tenth of the period) and a
#: reconcile's own time on a loaded machine
MARGIN = 20.0


def gauge(port: int, namespace: str, name: str) -> float | None:
    """The lost-records gauge of one Connector, from the operator process's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{port}/", params={"name[]": METRIC}, timeout=10).text
    for line in text.splitlines():
        if line.startswith(METRIC + "{") and f'name="{name}"' in line and f'namespace="{namespace}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def loss_status(k8s: K8s, name: str) -> dict[str, Any]:
    return dict((k8s.get("connectors", name).get("status") or {}).get("mirrorLoss") or {})


def loss_events(k8s: K8s, name: str) -> list[str]:
    return [f"{e.reason}: {e.message}" for e in k8s.events(name) if e.type == "Warning" and e.reason in LOSS_REASONS]


class SteadyProducer(threading.Thread):
    """Writes ``rate`` records a second, round robin over the partitions; keeps what the
    broker acknowledged (the records that must reach ``b``)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, prefix: str = "soak") -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.prefix = prefix
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failed = 0
        self.stopping = threading.Event()

    def _done(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked[int(message.partition())].append(bytes(message.value()))
        else:
            self.failed += 1

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "enable.idempotence": True})
        due = time.monotonic()
        for i in itertools.count():
            if self.stopping.is_set():
                break
            p = i % self.partitions
            value = f"{self.prefix}{p}-{i}".encode()
            producer.produce(self.topic, key=value, value=value, partition=p, on_delivery=self._done)
            producer.poll(0)
            due += 1 / self.rate
            time.sleep(max(0.0, due - time.monotonic()))
        self.failed += producer.flush(30)

    def stop(self) -> int:
        self.stopping.set()
        self.join(60)
        return sum(len(v) for v in self.acked.values())


def _call(flow: Flow, method: str, suffix: str) -> None:
    """One REST call on the source connector; 409 (a rebalance under way) is asked again."""
    path = flow.rest.path(flow.names["source"]) + suffix

    def once() -> bool:
        response = flow.rest.http.request(method, path)
        if response.status_code == 409:
            return False
        response.raise_for_status()
        return True

    wait_for(once, 60, f"{method} {suffix} answered")


def _task_states(flow: Flow) -> list[str]:
    return [t["state"] for t in flow.rest.status(flow.names["source"])["tasks"]]


def _running(flow: Flow) -> None:
    wait_for(lambda: _task_states(flow) == ["RUNNING"], 90, "MM2's source task RUNNING again")


def _pause_resume(flow: Flow, verb: str, state: str) -> None:
    _call(flow, "PUT", f"/{verb}")
    wait_for(lambda: flow.rest.state(flow.names["source"]) == state, 60, f"the source {state}")
    time.sleep(2)
    _call(flow, "PUT", "/resume")


def restart(k8s: K8s, flow: Flow, kind: str) -> None:
    """One restart of MM2's source task, by ``kind``; returns once the task runs again."""
    if kind == "task restart":
        _call(flow, "POST", "/tasks/0/restart")
    elif kind == "connector restart":
        _call(flow, "POST", "/restart?includeTasks=true&onlyFailed=false")
    elif kind == "pause and resume":
        _pause_resume(flow, "pause", "PAUSED")
    elif kind == "stop and resume":
        _pause_resume(flow, "stop", "STOPPED")
    else:  # the operator's restart verb
        token = {"metadata": {"annotations": {"connectops.io/restart": uuid.uuid4().hex[:8]}}}
        k8s.custom.patch_namespaced_custom_object(
            "connectops.io", "v1alpha1", k8s.ns, "connectors", flow.names["source"], token
        )
    _running(flow)


KINDS = ("task restart", "connector restart", "pause and resume", "stop and resume", "operator restart verb")


@dataclass
class SoakRun:
    """What one healthy run did and what the system said through it."""

    seconds: float
    produced: dict[int, list[bytes]] = field(default_factory=dict)
    failed_sends: int = 0
    restarts: list[str] = field(default_factory=list)
    samples: int = 0
    #: each look's checkedAt -> the stored offsets it saw (their sum)
    looks: dict[str, int] = field(default_factory=dict)
    #: samples that found the condition Unknown (a look that could not read Connect or the source)
    not_observable: int = 0
    false_alarms: list[str] = field(default_factory=list)
    on_b: dict[int, list[bytes]] = field(default_factory=dict)

    @property
    def lost(self) -> dict[int, int]:
        return {p: len(set(v) - set(self.on_b.get(p, []))) for p, v in self.produced.items()}

    @property
    def duplicates(self) -> int:
        return sum(len(v) - len(set(v)) for v in self.on_b.values())

    def summary(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "records_produced": sum(len(v) for v in self.produced.values()),
            "failed_sends": self.failed_sends,
            "records_replicated": sum(len(set(v)) for v in self.on_b.values()),
            "duplicates_on_target": self.duplicates,
            "records_lost": sum(self.lost.values()),
            "restarts": len(self.restarts),
            "restart_kinds": sorted(set(self.restarts)),
            "samples": self.samples,
            "looks": len(self.looks),
            "samples_not_observable": self.not_observable,
            "false_alarms": len(self.false_alarms),
            "false_alarm_details": self.false_alarms[:20],
        }


def sample(k8s: K8s, flow: Flow, port: int, run: SoakRun) -> None:
    """Everything the operator says about loss now; anything but "nothing lost" is a false alarm."""
    name = flow.names["source"]
    run.samples += 1
    cond = k8s.condition("connectors", name, CONDITION) or {}
    status = loss_status(k8s, name)
    value = gauge(port, k8s.ns, name)
    if cond.get("status") == "False":
        run.false_alarms.append(f"{CONDITION}=False {cond.get('reason')}: {cond.get('message')}")
    if status.get("losses") or status.get("recordsLost"):
        run.false_alarms.append(f"status.mirrorLoss: {status.get('recordsLost')} {status.get('losses')}")
    if value not in (None, 0.0):
        run.false_alarms.append(f"{METRIC} = {value}")
    if cond.get("status") == "Unknown":
        run.not_observable += 1
    if status.get("checkedAt"):
        seen = sum(sum(t.get("stored", {}).values()) for t in status.get("topics", []))
        run.looks.setdefault(str(status["checkedAt"]), seen)


def soak(k8s: K8s, flow: Flow, port: int, seconds: float, every: float, rate: float = 20.0) -> SoakRun:
    """A steady producer on ``a`` for ``seconds``, MM2's source task restarted every ``every``
    seconds (each kind in turn), the operator's word sampled every 2 s; then every acknowledged
    record looked for on ``b``."""
    run = SoakRun(seconds)
    producer = SteadyProducer(flow.a.bootstrap, flow.topic, len(flow.produced), rate)
    started = time.monotonic()
    producer.start()
    kinds = itertools.cycle(KINDS)
    next_restart = started + every
    while time.monotonic() - started < seconds:
        sample(k8s, flow, port, run)
        if time.monotonic() >= next_restart and time.monotonic() - started < seconds - every / 2:
            kind = next(kinds)
            restart(k8s, flow, kind)
            run.restarts.append(kind)
            next_restart = time.monotonic() + every
        time.sleep(2.0)
    producer.stop()
    run.seconds, run.failed_sends = time.monotonic() - started, producer.failed
    run.produced = {p: flow.produced[p] + producer.acked[p] for p in flow.produced}

    def arrived() -> bool:
        run.on_b = flow.target_values()
        return not any(run.lost.values())

    wait_for(arrived, 120, "every acknowledged record on b", interval=3)
    sample(k8s, flow, port, run)
    run.false_alarms += loss_events(k8s, flow.names["source"])
    return run


def production_operator(k8s: K8s, operator: OperatorProcess) -> int:
    """Starts the operator on the production defaults with its /metrics; its port."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in PRODUCTION.items():
            env.setenv(key, value)
        assert load().resync_seconds == 60.0, "the operator under test must resync at the production default"
    port = free_port()
    operator.start(env=PRODUCTION, args=["--metrics-port", str(port)])
    wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200, 60, "the /metrics port")
    return port


def recreate_topic(a: KafkaBroker, topic: str, partitions: int) -> None:
    admin = AdminClient(a.admin_config())
    admin.delete_topics([topic], operation_timeout=15)[topic].result(timeout=30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "the topic deleted")

    def create() -> bool:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)
        except Exception as error:  # TOPIC_ALREADY_EXISTS while the deletion completes
            return "marked for deletion" not in str(error) and "already exists" not in str(error).lower()
        return True

    wait_for(create, 60, "the topic re-created")
    a.wait_for_leaders(topic, partitions)


def test_mm2_healthy_through_restarts_then_a_recreation_caught_within_a_production_resync(
    production: tuple[K8s, OperatorProcess],
    cluster_a: KafkaBroker,
    kafka: KafkaBroker,
    mm2_worker: ConnectWorker,
    spark: SparkSession,
) -> None:
    k8s, operator = production
    port = production_operator(k8s, operator)
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker)
    name = flow.names["source"]
    try:
        run = soak(k8s, flow, port, SOAK_SECONDS, RESTART_EVERY)
        print(f"mm2 soak: {run.summary()}", file=sys.__stdout__)
        assert run.false_alarms == [], run.false_alarms
        assert run.failed_sends == 0
        assert len(run.restarts) >= 5, run.restarts
        assert set(run.restarts) == set(KINDS), run.restarts
        # the looks came at the production pace and saw the flow move: three resyncs at least,
        # and MM2's stored offsets further on at each
        assert len(run.looks) >= 3, run.looks
        moved = list(run.looks.values())
        assert moved == sorted(moved), run.looks
        assert moved[-1] > moved[0], run.looks
        cond = k8s.condition("connectors", name, CONDITION)
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("True", "NothingLost"), cond
        assert gauge(port, k8s.ns, name) == 0
        # the check's own collection of the running connector: nothing lost either
        doc = run_check(collect_snapshot(kafka.bootstrap, mm2_worker.url, name, 1, 0.0), Settings(), spark)
        assert doc["loss"]["total"] == 0, doc["loss"]
        assert not any(r["code"] == "MIRROR_RECORDS_LOST" for r in doc["reasons"]), doc["reasons"]

        # -- the source topic re-created under the stopped MM2 -------------------------------
        # the source goes on writing while MM2 stops (its producers do not wait for MM2): MM2's
        # last commit comes as its task stops, which can be after the look the stop's reconcile
        # makes; the look that finds the new topic must count from that commit
        old_id = loss_status(k8s, name)["topics"][0]["topicId"]
        writer = SteadyProducer(cluster_a.bootstrap, flow.topic, len(flow.produced), 20.0, prefix="tail")
        writer.start()
        time.sleep(3)
        k8s.patch_spec("connectors", name, {"state": "stopped"})
        wait_for(lambda: flow.rest.state(name) == "STOPPED" and _task_states(flow) == [], 90, "MM2 stopped")
        time.sleep(1)
        writer.stop()
        assert writer.failed == 0
        last = {p: flow.source_offsets()[(flow.source_alias, p)] for p in flow.produced}
        looked = loss_status(k8s, name)["topics"][0]["stored"]
        print(f"mm2 soak: MM2 stopped at {last}; the operator's last look saw {looked}", file=sys.__stdout__)
        # what MM2 had not copied when it stopped goes with the old topic (the operator cannot
        # know writes after its last look of it): counted for the record
        on_b = set(itertools.chain(*flow.target_values().values()))
        tail = sum(1 for v in itertools.chain(*writer.acked.values()) if v not in on_b)
        print(f"mm2 soak: {tail} records written after MM2 stopped, gone with the old topic", file=sys.__stdout__)
        recreate_topic(cluster_a, flow.topic, len(flow.produced))
        recreated = time.monotonic()
        # partition 0 holds MM2's next offset already (its records below it are skipped);
        # partition 1 does not (MM2 starts it from the earliest: nothing lost)
        new = {0: [f"new0-{i}".encode() for i in range(last[0] + 1 + 20)], 1: [f"new1-{i}".encode() for i in range(5)]}
        producer = batching_producer(cluster_a.bootstrap)
        for p, values in new.items():
            for value in values:
                producer.produce(flow.topic, key=value, value=value, partition=p)
        assert producer.flush(30) == 0
        k8s.wait_condition("connectors", name, CONDITION, "False", "SourceTopicRecreated", timeout=60 + MARGIN)
        delay = time.monotonic() - recreated
        print(f"mm2 soak: re-creation -> SourceTopicRecreated in {delay:.1f} s", file=sys.__stdout__)
        assert delay <= 60 + MARGIN, delay
        wait_for(lambda: loss_events(k8s, name), 30, "the SourceTopicRecreated Warning Event")
        assert loss_status(k8s, name)["topics"][0]["topicId"] != old_id
        # a look may have fallen between the re-creation and the new records: MM2 not running and
        # not moved, the next one counts them
        skipped = last[0] + 1
        wait_for(lambda: loss_status(k8s, name)["recordsLost"] == skipped, 60 + MARGIN, f"{skipped} lost")
        status = loss_status(k8s, name)

        # what never reaches b, by content, once MM2 runs again
        k8s.patch_spec("connectors", name, {"state": "running"})
        _running(flow)
        wait_for(
            lambda: set(new[0][last[0] + 1 :]) | set(new[1]) <= set(itertools.chain(*flow.target_values().values())),
            120,
            "the new topic's records past MM2's offset on b",
        )
        on_b = set(itertools.chain(*flow.target_values().values()))
        gone = {p: [v for v in values if v not in on_b] for p, values in new.items()}
        counted = {p: len(v) for p, v in gone.items()}
        assert counted == {0: skipped, 1: 0}, counted  # the scenario held
        assert {x["partition"]: x["lost"] for x in status["losses"]} == counted
        assert loss_status(k8s, name)["recordsLost"] == sum(counted.values())  # and stays
        assert {x["reason"] for x in status["losses"]} == {"SourceTopicRecreated"}
        assert gauge(port, k8s.ns, name) == sum(counted.values())
    finally:
        for role in flow.names.values():
            k8s.delete("connectors", role)
        names = list(flow.names.values())
        wait_for(lambda: not any(k8s.exists("connectors", n) for n in names), 90, "the flow's Connectors deleted")
