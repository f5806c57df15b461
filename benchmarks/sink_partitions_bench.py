"""Benchmark: a sink over as many topic partitions as one broker holds here, reset through the
operator on both strategies, its status size at each size to show it stays flat.

One real Apache Kafka broker (``tests/env``), one Connect worker, the operator as a process. For
each N (default 2,000 / 5,000 / 10,000 / 20,000) the broker is grown to N topic partitions
(topics of ``--per-topic`` partitions, kept from one size to the next), ``RECORDS`` records are
produced to every new partition, and a fresh FileStreamSink (Connect's own, not managed by a
Connector object) reads all N until ``GET /connectors/<n>/offsets`` lists every partition at
``RECORDS``. Then, through the operator (``connectorName`` + ``clusterRef``, ``resume: stopped``
so that what is read afterwards cannot move):

(a) ``strategy: rest``, ``action: toEarliest``: the group's offsets become each partition's log
    start, read here with ListOffsets (earliest) before the reset. The connector is then resumed
    by hand and must write every record once more (its file gains exactly N x RECORDS lines)
    and commit ``RECORDS`` on every partition again;
(b) ``strategy: tombstone``, ``action: reset``: the group's offsets deleted through the admin
    API; afterwards the group has no committed offset and ``GET /offsets`` lists none.

After each, truth is read from the system: the group's committed offsets on the broker
(AdminClient ``list_consumer_group_offsets``) and Connect's ``GET /offsets``, both compared for
every partition with the expectation computed here; the reset's status size in bytes as the API
server returns it (``json`` of ``.status``); the backup's ConfigMaps (head and pieces) and their
bytes; the reset's duration (create call -> final phase seen, polled every 0.5 s).

The broker is measured at every size: open file descriptors (``/proc/<pid>/fd``), its
``Max open files`` (``/proc/<pid>/limits``), memory maps against ``vm.max_map_count``, RSS, and
the time to create the partitions and to produce to them. Kafka keeps one descriptor open per
log segment and maps two index files per partition, so the descriptor limit is the ceiling: a
size the measured descriptors per partition say would cross it (less a margin for sockets) is
run at the largest multiple of ``--per-topic`` that fits instead, the reason recorded, and the
sizes after it are not run: a broker that exhausts its descriptors takes its log directory
offline and stops. Here the limit is the environment's (``ulimit -n``: soft = hard), which an
unprivileged process cannot raise.

Two settings differ from the tests' broker, each for a limit measured here (see the constants):
a 2 GiB heap (``--broker-heap``) and ``__consumer_offsets``' ``max.message.bytes`` at 8 MiB
(``--offsets-max-message-bytes``; 0 keeps Kafka's 1 MiB, with which the sink cannot commit
10,000 partitions at all).

    .venv/bin/python benchmarks/sink_partitions_bench.py                    # 2k, 5k, 10k, 20k
    .venv/bin/python benchmarks/sink_partitions_bench.py --smoke            # 200, 500 (CI)
    .venv/bin/python benchmarks/sink_partitions_bench.py --sizes 1000,3000 --per-topic 100

One file, as every benchmark here is one script: the broker's growth, the truth read back and the
table are one run's steps, used nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

# confluent_kafka.admin re-exports these without declaring them public (no __all__ entry)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from connectops.models.bounds import STATUS_MAX_BYTES
from harness import Bench, bench_env, log, rss_mib, table, vm_hwm_mib, wait, write_result
from tests.env.records import batching_producer
from tests.env.servers import KafkaBroker

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING = "org.apache.kafka.connect.storage.StringConverter"
SIZES = (2_000, 5_000, 10_000, 20_000)
SMOKE_SIZES = (200, 500)
RECORDS = 2
#: descriptors kept free for the broker's sockets and the files it opens briefly
FD_MARGIN = 400
#: The test broker's 512 MiB heap (tests/env/servers.py) is full at 10,000 partitions here
#: (old generation 99.8 %, 190 full collections, 336 s of GC; requests time out): 2 GiB.
BROKER_HEAP = "2g"
#: Kafka writes one OffsetCommit as one batch to __consumer_offsets, under the topic's
#: max.message.bytes (1 MiB by default): ~110 bytes per partition with these names, so a group
#: cannot commit 10,000 partitions at once ("Failed to write a batch of 10000 record(s) ... larger
#: than the maximum batch size of 1048588 bytes"). Raised on that topic for the run: 8 MiB.
OFFSETS_MAX_MESSAGE_BYTES = 8 << 20
#: partitions per CreateTopics request (KRaft takes up to 10,000 records in one)
CREATE_PARTITIONS_PER_REQUEST = 5_000
#: the annotation naming a chunked document's other ConfigMaps (reconcilers.reset_chunks)
PIECES = "connectops.io/chunks"
TP = tuple[str, int]


def broker_facts(pid: int) -> dict[str, Any]:
    soft = hard = None
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            parts = line.split()
            soft, hard = int(parts[3]), int(parts[4])
    maps = len(Path(f"/proc/{pid}/maps").read_text().splitlines())
    return {
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "fd_limit_soft": soft,
        "fd_limit_hard": hard,
        "maps": maps,
        "max_map_count": int(Path("/proc/sys/vm/max_map_count").read_text()),
        "rss_mib": round(rss_mib(pid), 1),
        "hwm_mib": round(vm_hwm_mib(pid), 1),
    }


def status_bytes(status: dict[str, Any]) -> int:
    return len(json.dumps(status, separators=(",", ":")))


class World:
    """The broker's topics (grown from size to size), the operator, the ConnectCluster."""

    def __init__(self, bench: Bench, per_topic: int, timeout: float) -> None:
        self.bench = bench
        self.per_topic = per_topic
        self.timeout = timeout
        self.bootstrap = bench.env.kafka.bootstrap
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.http = httpx.Client(base_url=bench.env.connect.url, timeout=120)
        self.run = uuid.uuid4().hex[:6]
        self.topics: list[str] = []
        self.ns = bench.namespace("bench-sinkparts")
        bench.cluster(self.ns)
        self.operator = bench.operator([self.ns])
        self.operator.start()
        pid = bench.env.kafka.processes[0].pid
        assert pid is not None
        self.broker_pid = pid
        self.baseline = broker_facts(pid)

    def offsets_topic_max_message_bytes(self, value: int) -> None:
        entry = ConfigEntry("max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets", incremental_configs=[entry])
        for future in self.admin.incremental_alter_configs([resource], request_timeout=120).values():
            future.result(timeout=130)

    @property
    def partitions(self) -> int:
        return len(self.topics) * self.per_topic

    def all_tps(self) -> list[TP]:
        return [(t, p) for t in self.topics for p in range(self.per_topic)]

    def fit(self, n: int, per_partition: float) -> tuple[int, str | None]:
        """The size to run instead of ``n`` if the broker's descriptors would not hold it."""
        facts = broker_facts(self.broker_pid)
        limit = facts["fd_limit_soft"] or 0
        predicted = facts["fds"] + (n - self.partitions) * per_partition
        if predicted <= limit - FD_MARGIN:
            return n, None
        room = int((limit - FD_MARGIN - facts["fds"]) / per_partition)
        fitted = (self.partitions + room) // self.per_topic * self.per_topic
        why = (
            f"{n} partitions need ~{predicted:.0f} open files in the broker ({facts['fds']} open at "
            f"{self.partitions} partitions, {per_partition:.3f} per partition measured), over its limit of "
            f"{limit} less {FD_MARGIN} kept for sockets: run at {fitted} instead"
        )
        return fitted, why

    def grow(self, n: int) -> dict[str, Any]:
        """Topics until the broker holds ``n`` partitions of this run; RECORDS records in each new one."""
        wanted = -(-n // self.per_topic)
        new = [f"sinkparts-{self.run}-{i:03d}" for i in range(len(self.topics), wanted)]
        started = time.perf_counter()
        # KRaft's controller refuses a CreateTopics of more than 10,000 records (one per partition
        # and per topic): "Unable to perform excessively large batch operation"
        per_request = max(1, CREATE_PARTITIONS_PER_REQUEST // self.per_topic)
        for i in range(0, len(new), per_request):
            batch = [NewTopic(t, self.per_topic, 1) for t in new[i : i + per_request]]
            for future in self.admin.create_topics(batch, request_timeout=self.timeout).values():
                future.result(timeout=self.timeout)
        for topic in new:
            self.bench.env.kafka.wait_for_leaders(topic, self.per_topic, timeout=self.timeout)
        created = time.perf_counter() - started
        started = time.perf_counter()
        producer = batching_producer(self.bootstrap)
        for topic in new:
            for partition in range(self.per_topic):
                for i in range(RECORDS):
                    while True:
                        try:
                            producer.produce(topic, value=f"{topic}-{partition}-{i}".encode(), partition=partition)
                            break
                        except BufferError:
                            producer.poll(0.5)
        left = producer.flush(self.timeout)
        if left:
            raise RuntimeError(f"{left} records not delivered")
        produced = time.perf_counter() - started
        self.topics += new
        facts = broker_facts(self.broker_pid)
        log(
            f"broker at {self.partitions} partitions: created {len(new)} topics in {created:.1f} s, produced in "
            f"{produced:.1f} s; {facts['fds']} fds (limit {facts['fd_limit_soft']}), {facts['maps']} maps, "
            f"RSS {facts['rss_mib']} MiB"
        )
        return {
            "new_topics": len(new),
            "create_seconds": round(created, 2),
            "produce_seconds": round(produced, 2),
            **facts,
        }

    # -- what the system holds -------------------------------------------------------------

    def committed(self, group: str) -> dict[TP, int]:
        """The group's committed offsets as the broker holds them (none: an empty map)."""
        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        try:
            result = futures[group].result(timeout=self.timeout)
        except KafkaException as exc:
            if "GROUP_ID_NOT_FOUND" in str(exc):
                return {}
            raise
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}

    def connect_offsets(self, name: str) -> dict[TP, int]:
        """GET /offsets straight from the worker (asked again on a 5xx: a loaded worker times out
        reading its group's offsets)."""

        def answered() -> tuple[dict[TP, int]] | None:
            response = self.http.get(f"/connectors/{name}/offsets")
            if response.status_code >= 500:
                return None
            response.raise_for_status()
            return (
                {
                    (e["partition"]["kafka_topic"], e["partition"]["kafka_partition"]): e["offset"]["kafka_offset"]
                    for e in response.json()["offsets"]
                },
            )

        result: tuple[dict[TP, int]] = wait(answered, self.timeout, f"{name}'s offsets from Connect", 2.0)
        return result[0]

    def earliest(self) -> dict[TP, int]:
        """Each partition's log start, from ListOffsets: the independent expectation of toEarliest."""
        request = {
            TopicPartition(t, p): OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            for t, p in self.all_tps()
        }
        futures = self.admin.list_offsets(request, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): f.result(timeout=self.timeout).offset for tp, f in futures.items()}

    def connector_state(self, name: str) -> str:
        response = self.http.get(f"/connectors/{name}/status")
        return str(response.json()["connector"]["state"]) if response.status_code == 200 else str(response.status_code)

    def backup(self, status: dict[str, Any]) -> dict[str, Any]:
        head = (status.get("backup") or {}).get("configMap")
        if not head:
            return {"config_maps": 0, "bytes": 0, "offsets": 0}
        first = self.bench.core.read_namespaced_config_map(head, self.ns)
        names = [head, *[n for n in ((first.metadata.annotations or {}).get(PIECES) or "").split(",") if n]]
        size = 0
        for cm_name in names:
            cm = first if cm_name == head else self.bench.core.read_namespaced_config_map(cm_name, self.ns)
            size += len(json.dumps(self.bench.api.sanitize_for_serialization(cm), separators=(",", ":")))
        return {"config_maps": len(names), "bytes": size, "offsets": status["backup"].get("offsets")}

    # -- one size --------------------------------------------------------------------------

    def reset(self, name: str, spec: dict[str, Any]) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        self.bench.create(self.ns, "offsetresets", "OffsetReset", name, spec)
        status: dict[str, Any] = wait(
            lambda: (
                (s := self.bench.get(self.ns, "offsetresets", name).get("status") or {}).get("phase")
                in ("Succeeded", "Failed")
                and s
            ),
            self.timeout,
            f"OffsetReset {name}",
            0.5,
        )
        return status, time.perf_counter() - started

    def size(self, n: int) -> dict[str, Any]:
        tps = self.all_tps()
        assert len(tps) == n
        name = f"sink-{self.run}-{n}"
        group = f"connect-{name}"
        out = self.bench.workdir / f"{name}.out"
        config = {
            "connector.class": SINK,
            "tasks.max": "1",
            "topics": ",".join(self.topics),
            "file": str(out),
            "key.converter": STRING,
            "value.converter": STRING,
        }
        problems: list[str] = []
        started = time.perf_counter()
        self.http.put(f"/connectors/{name}/config", json=config).raise_for_status()
        before = dict.fromkeys(tps, RECORDS)
        wait(lambda: self.connect_offsets(name) == before, self.timeout, f"{name} to commit {RECORDS} on {n}", 2.0)
        consumed = time.perf_counter() - started
        if self.committed(group) != before:
            problems.append("broker's committed offsets differ from Connect's before the reset")
        lines = len(out.read_text().splitlines())
        if lines != n * RECORDS:
            problems.append(f"sink file has {lines} lines before the reset, expected {n * RECORDS}")
        log(f"{name}: {n} partitions consumed and committed in {consumed:.1f} s")
        target = {"connectorName": name, "clusterRef": {"name": "main"}, "resume": "stopped"}
        row: dict[str, Any] = {"partitions": n, "topics": len(self.topics), "consume_seconds": round(consumed, 1)}

        # (a) rest toEarliest
        earliest = self.earliest()
        status, took = self.reset(f"earliest-{n}", {**target, "strategy": "rest", "action": "toEarliest"})
        row["rest_to_earliest"] = self.outcome(status, took, earliest, name, group, problems)
        self.http.put(f"/connectors/{name}/resume").raise_for_status()
        try:
            wait(
                lambda: len(out.read_text().splitlines()) >= 2 * n * RECORDS and self.connect_offsets(name) == before,
                self.timeout,
                f"{name} to re-read every partition",
                2.0,
            )
            time.sleep(2.0)
            lines = len(out.read_text().splitlines())
            if lines != 2 * n * RECORDS:
                problems.append(f"after toEarliest the sink wrote {lines - n * RECORDS} lines, expected {n * RECORDS}")
        except TimeoutError as exc:
            problems.append(str(exc)[:300])
        # (b) tombstone reset: the group's offsets deleted through the admin API
        status, took = self.reset(f"tombstone-{n}", {**target, "strategy": "tombstone", "action": "reset"})
        row["tombstone_reset"] = self.outcome(status, took, {}, name, group, problems)
        operator = self.operator
        row["operator_rss_mib"] = round(rss_mib(operator.pid), 1) if operator.alive() else None
        row["operator_hwm_mib"] = round(vm_hwm_mib(operator.pid), 1) if operator.alive() else None
        self.http.delete(f"/connectors/{name}")
        with contextlib.suppress(KafkaException):
            for future in self.admin.delete_consumer_groups([group], request_timeout=60).values():
                future.result(timeout=60)
        with contextlib.suppress(OSError):
            out.unlink()
        row["problems"] = problems
        return row

    def outcome(
        self,
        status: dict[str, Any],
        took: float,
        expected: dict[TP, int],
        name: str,
        group: str,
        problems: list[str],
    ) -> dict[str, Any]:
        """The reset's figures and what the broker and Connect hold afterwards, against ``expected``."""
        label = f"{status.get('strategy')} {status.get('action') or ''}".strip()
        if status.get("phase") != "Succeeded":
            problems.append(f"{label}: phase {status.get('phase')}: {json.dumps(status.get('conditions'))[:600]}")
        size = status_bytes(status)
        if size >= STATUS_MAX_BYTES:
            problems.append(f"{label}: status {size} bytes, over {STATUS_MAX_BYTES}")
        broker = self.committed(group)
        connect = self.connect_offsets(name)
        wrong_broker = sum(broker.get(tp) != off for tp, off in expected.items()) + len(set(broker) - set(expected))
        wrong_connect = sum(connect.get(tp) != off for tp, off in expected.items()) + len(set(connect) - set(expected))
        if wrong_broker or wrong_connect:
            problems.append(f"{label}: {wrong_broker} partitions wrong on the broker, {wrong_connect} in Connect")
        state = self.connector_state(name)
        if state != "STOPPED":
            problems.append(f"{label}: connector {state} after resume: stopped")
        backup = self.backup(status)
        steps = {
            s["name"]: s.get("state") for s in status.get("steps", []) if s.get("state") not in ("Done", "Skipped")
        }
        if steps:
            problems.append(f"{label}: steps not done: {steps}")
        figures = {
            "phase": status.get("phase"),
            "seconds": round(took, 1),
            "status_bytes": size,
            "backup_config_maps": backup["config_maps"],
            "backup_bytes": backup["bytes"],
            "backup_offsets": backup["offsets"],
            "partitions_checked": len(expected) if expected else len(broker) + len(connect),
            "wrong_on_broker": wrong_broker,
            "wrong_in_connect": wrong_connect,
        }
        log(f"{name} {label}: {figures}")
        return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help="comma-separated partition counts (default 2000,5000,10000,20000)")
    parser.add_argument("--smoke", action="store_true", help="200 and 500 partitions (CI)")
    parser.add_argument("--per-topic", type=int, help="partitions per topic (default 250; smoke 100)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds any one wait may take")
    parser.add_argument("--broker-heap", default=BROKER_HEAP, help=f"the broker's -Xmx (default {BROKER_HEAP})")
    parser.add_argument(
        "--offsets-max-message-bytes",
        type=int,
        default=OFFSETS_MAX_MESSAGE_BYTES,
        help=f"__consumer_offsets' max.message.bytes (default {OFFSETS_MAX_MESSAGE_BYTES}; 0: Kafka's, 1 MiB)",
    )
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SMOKE_SIZES if args.smoke else SIZES)
    per_topic = args.per_topic or (100 if args.smoke else 250)

    result: dict[str, Any] = {
        "records_per_partition": RECORDS,
        "partitions_per_topic": per_topic,
        "broker_heap": args.broker_heap,
        "offsets_topic_max_message_bytes": args.offsets_max_message_bytes or None,
        "sizes": [],
    }
    ok = False
    # TestEnv builds its broker with the test heap; only this run's broker gets another
    defaults = KafkaBroker.__init__.__kwdefaults__
    assert defaults is not None
    test_heap, defaults["heap"] = defaults["heap"], args.broker_heap
    try:
        with bench_env(keep=args.keep) as bench:
            defaults["heap"] = test_heap
            ok = run(bench, args, sizes, per_topic, result)
    finally:
        defaults["heap"] = test_heap
    write_result("sink_partitions", result, args.output)
    print_table(result)
    return 0 if ok and not result["hygiene"]["hits"] else 1


def run(bench: Bench, args: argparse.Namespace, sizes: list[int], per_topic: int, result: dict[str, Any]) -> bool:
    """Every size in turn, the result file written after each; False when a check failed."""
    ok = True
    world = World(bench, per_topic, args.timeout)
    if args.offsets_max_message_bytes:
        world.offsets_topic_max_message_bytes(args.offsets_max_message_bytes)
    result["broker_at_start"] = world.baseline | broker_facts(world.broker_pid)
    per_partition = 1.0
    for wanted in sizes:
        n, why = world.fit(wanted, per_partition)
        entry: dict[str, Any] = {"requested": wanted}
        if why:
            log(why)
            entry["limited_by"] = why
        if n <= world.partitions and why:
            entry["skipped"] = True
            result["sizes"].append(entry)
            break
        fds_before, parts_before = broker_facts(world.broker_pid)["fds"], world.partitions
        try:
            entry["broker"] = world.grow(n)
            if world.partitions > parts_before:
                per_partition = max(
                    per_partition, (entry["broker"]["fds"] - fds_before) / (world.partitions - parts_before)
                )
            entry.update(world.size(world.partitions))
        except Exception as exc:  # a size that fails is the finding: recorded, the rest not run
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            entry["broker_alive"] = bench.env.kafka.alive
            entry["operator_log_tail"] = world.operator.log_tail(1500)
            log(f"size {wanted} failed: {entry['error'][:500]}")
            result["sizes"].append(entry)
            ok = False
            break
        ok = ok and not entry["problems"]
        result["sizes"].append(entry)
        write_result("sink_partitions", result, args.output)  # each size kept if a later one fails
        if why:
            break
    result["hygiene"] = bench.hygiene()
    return ok


def print_table(result: dict[str, Any]) -> None:
    rows = []
    for e in result["sizes"]:
        if "partitions" not in e:
            continue
        a, b = e["rest_to_earliest"], e["tombstone_reset"]
        rows.append(
            [
                e["partitions"],
                a["status_bytes"],
                b["status_bytes"],
                f"{a['backup_config_maps']} / {b['backup_config_maps']}",
                a["seconds"],
                b["seconds"],
                e["broker"]["fds"],
                e["broker"]["rss_mib"],
                e["broker"]["create_seconds"],
                "ok" if not e["problems"] else "; ".join(e["problems"])[:200],
            ]
        )
    header = [
        "partitions",
        "status B (rest toEarliest)",
        "status B (tombstone reset)",
        "backup ConfigMaps",
        "rest s",
        "tombstone s",
        "broker fds",
        "broker RSS MiB",
        "create s",
        "checks",
    ]
    print(table(header, rows))
    for e in result["sizes"]:
        for key in ("limited_by", "error"):
            if key in e:
                print(f"{e['requested']}: {e[key]}")


if __name__ == "__main__":
    raise SystemExit(main())
