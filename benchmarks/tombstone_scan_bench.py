"""Benchmark: the offsets-topic scan of the tombstone reset path vs kcat reading the same topic.

What it measures: the full read of a Connect offsets topic that an ``OffsetReset`` with the
tombstone action does before it writes tombstones, called exactly as the reconciler calls it
(``KafkaOffsets(bootstrap, client_config).scan_connector_offsets(topic, {connector})`` in a fresh
adapter; ``read_connector_offsets`` is that call without the counts). That is: the metadata and
watermark lookups, one consumer reading every partition from the start to its end offset, the
per-record filtering of keys by connector and the latest-record-per-key selection. Against it,
in the same run and on the same topic, ``kcat -C -o beginning -e -q -f '%k\\t%s\\n'`` reads and
prints every record, its output piped into this process and counted line by line. Both sides
run ``--repeat`` times, interleaved in an order that rotates each round, and the report gives
the median seconds and records/s of each and ``ratio = connectops rate / kcat rate`` (target
>= 1.0, issue 17; it was 0.5).

Neither side gets credit for being fast and wrong: the scan must have read every record and
return exactly the keys (partition, key bytes, latest value) that were produced for the chosen
connector, and kcat must print exactly N lines. Either failing exits 1. Missing the ratio target
does not: the JSON says whether it was met.

Excluded from the timings, reported separately: starting the broker, generating the records
(with ``java_partition``, the product's murmur2 partitioner, so every key sits in the partition
Connect would pick) and producing them.

The broker is Apache Kafka (``tests/env``). The end offsets are checked: their sum must equal N.
``--kcat-librdkafka auto`` (the default) runs Debian's kcat on its system librdkafka and, if it
cannot read metadata with it, on the librdkafka that ships in the confluent-kafka wheel (the one
connectops uses) through ``LD_LIBRARY_PATH``. The JSON records which one ran.

Reading small runs: both readers have a fixed cost that dwarfs the reading itself. kcat's
``-e`` waits for an empty fetch at the end of every partition, which the broker holds for
``fetch.wait.max.ms`` (500 ms); the scan's last ``consume()`` waits up to 0.1 s for a full batch.

The first run of this benchmark found the scan at 0.17x kcat: librdkafka's
``fetch.queue.backoff.ms`` (1 s) idled it whenever its local queue passed
``queued.min.messages``, and a 1 s ``consume()`` timeout at the end of every read. Both are
fixed in ``connectops.adapters.kafka`` (``client.py``: 10 ms; ``reader.py``: 0.1 s).

    .venv/bin/python benchmarks/tombstone_scan_bench.py                 # 1,000,000 records, 3 rounds
    .venv/bin/python benchmarks/tombstone_scan_bench.py --smoke         # 20,000 records (CI)
    .venv/bin/python benchmarks/tombstone_scan_bench.py --records 200000 --connectors 200 --repeat 5

Results go to ``benchmarks/results/tombstone_scan.json`` (``--output`` to change).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Runnable from a checkout without an install: the harness, tests.env and the operator package.
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT), str(ROOT / "operator")]

import confluent_kafka  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

# isort: off
# confluent_kafka.admin re-exports NewTopic without declaring it public (no __all__ entry).
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # noqa: E402
# isort: on

from connectops.adapters.kafka import (  # noqa: E402
    KafkaOffsets,
    KafkaOffsetsError,
    OffsetScan,
    java_partition,
)
from harness import log, summary, table, write_result  # noqa: E402
from tests.env.servers import KAFKA_VERSION, KafkaBroker  # noqa: E402

NAME = "tombstone_scan"
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / f"{NAME}.json"
TARGET_RATIO = 1.0
KCAT_FORMAT = "%k\t%s\n"

Record = tuple[int, bytes, bytes]  # (Kafka partition, key, value)


# --------------------------------------------------------------------------------------------------
# The data: a Connect offsets topic
# --------------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    topic: str
    records: int
    partitions: int
    connectors: int
    versions: int
    keys_per_connector: int
    target: str
    #: (partition, key) -> latest value, for the target connector only
    expected: dict[tuple[int, bytes], bytes]
    #: records of the target connector, all versions
    expected_matched: int
    generate_seconds: float = 0.0
    produce_seconds: float = 0.0
    end_offsets_total: int = 0


def connector_name(index: int, connectors: int) -> str:
    return f"bench-{index:0{len(str(max(connectors - 1, 1)))}d}"


def offset_key(name: str, index: int, slot: int) -> bytes:
    """``[name, partitionMap]`` as Connect's JsonConverter (schemas disabled) writes it: compact
    JSON, fields in insertion order. Even connectors look like file sources, odd ones carry a
    topic/partition map like MirrorMaker's or a sink-style tool's."""
    if index % 2 == 0:
        return f'["{name}",{{"filename":"/data/{name}/f-{slot:06d}.txt"}}]'.encode()
    return f'["{name}",{{"kafka_topic":"orders-{index}","kafka_partition":{slot}}}]'.encode()


def generate(records: int, partitions: int, connectors: int, versions: int) -> tuple[list[Record], Dataset]:
    """Records interleaved across connectors, as many workers committing side by side write them.

    Record ``i`` belongs to connector ``i % connectors`` and that connector's key ``slot``; with
    ``versions > 1`` every key is written that many times (later records are newer offsets).
    """
    started = time.perf_counter()
    keys_per_connector = max(1, math.ceil(records / (connectors * versions)))
    target_index = connectors // 2
    target = connector_name(target_index, connectors)
    names = [connector_name(c, connectors) for c in range(connectors)]
    cache: dict[tuple[int, int], tuple[int, bytes]] = {}
    out: list[Record] = []
    expected: dict[tuple[int, bytes], bytes] = {}
    matched = 0
    for i in range(records):
        c = i % connectors
        slot = (i // connectors) % keys_per_connector
        placed = cache.get((c, slot)) if versions > 1 else None
        if placed is None:
            key = offset_key(names[c], c, slot)
            placed = (java_partition(key, partitions), key)
            if versions > 1:
                cache[(c, slot)] = placed
        partition, key = placed
        value = b'{"position":%d}' % i
        out.append((partition, key, value))
        if c == target_index:
            expected[(partition, key)] = value
            matched += 1
    # The f-string keys must be byte-for-byte what JsonConverter writes, or the scan would be
    # measured on keys no Connect worker produces.
    for _, key, _ in out[: min(len(out), 2 * connectors)]:
        assert key == json.dumps(json.loads(key), separators=(",", ":")).encode(), key
    dataset = Dataset(
        topic=f"connect-offsets-bench-{uuid.uuid4().hex[:6]}",
        records=records,
        partitions=partitions,
        connectors=connectors,
        versions=versions,
        keys_per_connector=keys_per_connector,
        target=target,
        expected=expected,
        expected_matched=matched,
        generate_seconds=time.perf_counter() - started,
    )
    return out, dataset


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, records: list[Record], compression: str) -> float:
    """Produce in big batches; the last record of each partition after the rest (it is also the
    last record of its partition in generation order, so every key's versions stay in order)."""
    last: dict[int, int] = {}
    for i, (partition, _, _) in enumerate(records):
        last[partition] = i
    tail = set(last.values())
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "compression.type": compression,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            # One request in flight per connection: a retried batch cannot overtake a newer one
            # (the correctness check relies on each key's versions landing in order).
            "max.in.flight.requests.per.connection": 1,
        }
    )
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    def send(partition: int, key: bytes, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
            else:
                return

    started = time.perf_counter()
    for i, (partition, key, value) in enumerate(records):
        if i not in tail:
            send(partition, key, value)
            if i % 50_000 == 0:
                producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError("produce: records still queued after 600 s")
    for i in sorted(tail):
        send(*records[i])
    if producer.flush(60) != 0:
        raise RuntimeError("produce: tail records still queued after 60 s")
    seconds = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"produce: {len(failures)} records failed, first: {failures[0]}")
    return seconds


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------


@dataclass
class Run:
    tool: str
    round: int
    seconds: float
    records: int
    #: CPU of the reader: this process for the scan, the kcat child for kcat
    cpu_seconds: float
    #: CPU the broker spent during the run (both share the machine's CPUs)
    broker_cpu_seconds: float
    ok: bool
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        wrong = "" if self.ok else "  WRONG: " + "; ".join(self.problems)
        return (
            f"{self.tool:26s} {self.seconds:7.2f} s {self.rate:11,.0f} records/s  cpu {self.cpu_seconds:5.2f} s"
            f"  broker cpu {self.broker_cpu_seconds:5.2f} s{wrong}"
        )


class ProcCpu:
    """CPU seconds (user + system) of another process, from /proc."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        if self.pid is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / self.tick


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def check_scan(scan: OffsetScan, data: Dataset) -> list[str]:
    """Everything that would make a fast scan a wrong one; empty when the scan is right."""
    problems: list[str] = []
    if scan.scanned != data.records:
        problems.append(f"scanned {scan.scanned} records, the topic holds {data.records}")
    if scan.unparseable:
        problems.append(f"{scan.unparseable} keys reported unparseable (all are Connect keys)")
    if scan.matched != data.expected_matched:
        problems.append(f"matched {scan.matched} records of {data.target}, expected {data.expected_matched}")
    found = {(r.partition, r.key): r.value for r in scan.records}
    if len(found) != len(scan.records):
        problems.append(f"{len(scan.records) - len(found)} duplicate (partition, key) records")
    missing = data.expected.keys() - found.keys()
    extra = found.keys() - data.expected.keys()
    stale = [k for k in data.expected.keys() & found.keys() if found[k] != data.expected[k]]
    for what, keys in (("missing", missing), ("unexpected", extra), ("not the latest value", stale)):
        if keys:
            sample = sorted(keys)[0]
            problems.append(f"{len(keys)} keys {what}, e.g. [{sample[0]}] {sample[1].decode(errors='replace')}")
    wrong = [
        r for r in scan.records if r.connector != data.target or java_partition(r.key, data.partitions) != r.partition
    ]
    if wrong:
        problems.append(f"{len(wrong)} records of another connector or partition")
    return problems


def time_scan(
    bootstrap: str,
    data: Dataset,
    broker: ProcCpu,
    round_: int,
) -> Run:
    """One scan, as the reconciler runs it: a fresh adapter (the cluster's Kafka config is empty
    here) and the connector's name as the only selection."""
    tool = "connectops"
    broker0, cpu0 = broker.seconds(), time.process_time()
    started = time.perf_counter()
    try:
        with KafkaOffsets(bootstrap, None) as kafka:
            scan = kafka.scan_connector_offsets(data.topic, {data.target})
    except KafkaOffsetsError as exc:
        seconds = time.perf_counter() - started
        return Run(tool, round_, seconds, 0, time.process_time() - cpu0, broker.seconds() - broker0, False, [str(exc)])
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    problems = check_scan(scan, data)
    return Run(tool, round_, seconds, scan.scanned, cpu, broker.seconds() - broker0, not problems, problems)


@dataclass
class Kcat:
    path: str
    env: dict[str, str]
    library: str  # "system" or "confluent-kafka wheel"
    version: str

    def command(self, bootstrap: str, topic: str) -> list[str]:
        return [self.path, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", KCAT_FORMAT]


def kcat_version(path: str, env: Mapping[str, str]) -> str:
    out = subprocess.run([path, "-V"], capture_output=True, text=True, env=dict(env), check=False, timeout=30)
    match = re.search(r"Version (\S+) .*?librdkafka (\S+)", out.stdout)
    return f"kcat {match[1]}, librdkafka {match[2]}" if match else out.stdout.strip()[:200]


def wheel_librdkafka() -> Path | None:
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    return found[0] if found else None


def find_kcat(path: str, choice: str, bootstrap: str, topic: str, workdir: Path) -> Kcat:
    """kcat on the system librdkafka if that can talk to the broker, else on the wheel's."""
    system = Kcat(path, dict(os.environ), "system", kcat_version(path, os.environ))
    if choice == "system":
        return system
    if choice == "auto":
        probe = subprocess.run(
            [path, "-L", "-b", bootstrap, "-t", topic, "-m", "5"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if probe.returncode == 0 and "partitions" in probe.stdout:
            return system
        log(f"kcat on {system.version} cannot read metadata: {probe.stderr.strip()[:200]}")
    lib = wheel_librdkafka()
    if lib is None:
        raise RuntimeError("no librdkafka in the confluent-kafka wheel to run kcat on")
    libdir = workdir / "kcat-librdkafka"
    libdir.mkdir(exist_ok=True)
    # kcat links librdkafka.so.1 by that file name; the wheel's copy only differs in its name.
    link = libdir / "librdkafka.so.1"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(lib)
    search = os.pathsep.join(filter(None, [str(libdir), os.environ.get("LD_LIBRARY_PATH")]))
    env = {**os.environ, "LD_LIBRARY_PATH": search}
    kcat = Kcat(path, env, "confluent-kafka wheel", kcat_version(path, env))
    log(f"kcat runs on {kcat.version} ({lib.name})")
    return kcat


def time_kcat(kcat: Kcat, bootstrap: str, data: Dataset, broker: ProcCpu, round_: int, timeout: float) -> Run:
    """kcat's output read in 1 MiB chunks and its lines counted: what a shell pipe to wc costs."""
    with tempfile.TemporaryFile() as errors:
        broker0, cpu0 = broker.seconds(), children_cpu()
        started = time.perf_counter()
        command = kcat.command(bootstrap, data.topic)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=kcat.env)
        # -e waits for an end-of-partition event on every partition; a broker that never sends
        # one would hang the benchmark.
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        lines = 0
        try:
            assert proc.stdout is not None
            out = proc.stdout.fileno()
            while chunk := os.read(out, 1 << 20):
                lines += chunk.count(b"\n")
            rc = proc.wait()
        finally:
            watchdog.cancel()
        seconds = time.perf_counter() - started
        cpu = children_cpu() - cpu0
        broker_cpu = broker.seconds() - broker0
        errors.seek(0)
        stderr = errors.read().decode(errors="replace").strip()
    problems: list[str] = []
    if rc != 0:
        killed = f" (killed after {timeout:.0f} s)" if rc < 0 else ""
        problems.append(f"kcat exited {rc}{killed}: {stderr[:300]}")
    if lines != data.records:
        problems.append(f"kcat printed {lines} lines, the topic holds {data.records} records")
    return Run("kcat", round_, seconds, lines, cpu, broker_cpu, not problems, problems)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=None, help="records in the topic (default 1,000,000)")
    parser.add_argument("--partitions", type=int, default=25, help="partitions of the offsets topic (Connect: 25)")
    parser.add_argument("--connectors", type=int, default=1000, help="connectors whose offsets share the topic")
    parser.add_argument("--versions", type=int, default=1, help="records per key (offset commits of one partition)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each reader, alternating")
    parser.add_argument("--smoke", action="store_true", help="20,000 records (unless --records says otherwise)")
    parser.add_argument("--compression", default="none", choices=["none", "lz4", "snappy", "zstd", "gzip"])
    parser.add_argument("--kcat", default=shutil.which("kcat") or "/usr/bin/kcat", help="kcat binary")
    parser.add_argument("--kcat-librdkafka", choices=["auto", "system", "wheel"], default="auto")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="result JSON")
    args = parser.parse_args(argv)
    if args.records is None:
        args.records = 20_000 if args.smoke else 1_000_000
    for name in ("records", "partitions", "connectors", "versions", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def median_of(runs: list[Run], records: int) -> dict[str, Any]:
    seconds = [r.seconds for r in runs]
    med = statistics.median(seconds)
    return {
        "median_seconds": med,
        "records_per_second": records / med if med > 0 else 0.0,
        "median_cpu_seconds": statistics.median(r.cpu_seconds for r in runs),
        "median_broker_cpu_seconds": statistics.median(r.broker_cpu_seconds for r in runs),
        "seconds": summary(seconds),
        "ok": all(r.ok for r in runs),
    }


@contextlib.contextmanager
def broker(workdir: Path) -> Iterator[KafkaBroker]:
    kafka = KafkaBroker(workdir).start()
    try:
        yield kafka
    finally:
        kafka.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="tombstone-scan-bench-"))
    try:
        return bench(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def bench(args: argparse.Namespace, workdir: Path) -> int:
    log(f"generating {args.records:,} records: {args.connectors} connectors, {args.partitions} partitions")
    records, data = generate(args.records, args.partitions, args.connectors, args.versions)
    log(f"generated in {data.generate_seconds:.1f} s; target {data.target}: {len(data.expected)} keys")
    with broker(workdir) as server:
        bootstrap = server.bootstrap
        broker_pid = server.processes[0].pid if server.processes else None
        broker_cpu = ProcCpu(broker_pid)
        create_topic(bootstrap, data.topic, data.partitions)
        data.produce_seconds = produce(bootstrap, data.topic, records, args.compression)
        del records
        log(f"produced in {data.produce_seconds:.1f} s ({data.records / data.produce_seconds:,.0f} records/s)")
        with KafkaOffsets(bootstrap) as kafka:
            data.end_offsets_total = sum(end - low for low, end in kafka.watermarks(data.topic).values())
        if data.end_offsets_total != data.records:
            log(f"end offsets add up to {data.end_offsets_total}, not {data.records}: the scan stops early")

        kcat = find_kcat(args.kcat, args.kcat_librdkafka, bootstrap, data.topic, workdir)
        kcat_timeout = max(120.0, data.records / 5_000)
        readers = ["connectops", "kcat"]
        runs: list[Run] = []
        for round_ in range(args.repeat):
            # Rotating the order each round spreads warm-up effects and background load over
            # every reader instead of charging them to whichever always goes first.
            shift = round_ % len(readers)
            for tool in readers[shift:] + readers[:shift]:
                if tool == "kcat":
                    run = time_kcat(kcat, bootstrap, data, broker_cpu, round_, kcat_timeout)
                else:
                    run = time_scan(bootstrap, data, broker_cpu, round_)
                runs.append(run)
                log(f"round {round_ + 1}/{args.repeat} {run.describe()}")

    by_tool = {tool: median_of([r for r in runs if r.tool == tool], data.records) for tool in readers}
    kcat_rate = by_tool["kcat"]["records_per_second"]
    for stats in by_tool.values():
        stats["ratio_vs_kcat"] = stats["records_per_second"] / kcat_rate if kcat_rate else 0.0
    ratio = by_tool["connectops"]["ratio_vs_kcat"]
    problems = [f"{r.tool} round {r.round + 1}: {p}" for r in runs for p in r.problems]

    rows = [
        [
            tool,
            data.records,
            stats["median_seconds"],
            round(stats["records_per_second"]),
            stats["median_cpu_seconds"],
            stats["ratio_vs_kcat"],
            "yes" if stats["ok"] else "NO",
        ]
        for tool, stats in by_tool.items()
    ]
    print(table(["reader", "records", "median s", "records/s", "reader cpu s", "x kcat", "correct"], rows))
    print()
    met = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(
        f"ratio connectops/kcat = {ratio:.3f} (target >= {TARGET_RATIO}: {met}); "
        f"produce {data.produce_seconds:.1f} s; median of {args.repeat} runs each"
    )
    if problems:
        print("\nWRONG RESULTS:\n" + "\n".join(f"- {p}" for p in problems))

    write_result(
        NAME,
        {
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "data": {
                **{k: v for k, v in vars(data).items() if k != "expected"},
                "expected_keys": len(data.expected),
                "produce_records_per_second": data.records / data.produce_seconds if data.produce_seconds else 0.0,
            },
            "broker": {"name": "apache-kafka", "version": KAFKA_VERSION, "storage": "disk (KRaft, one node)"},
            "connectops": {
                "call": "KafkaOffsets(bootstrap, None).scan_connector_offsets(topic, {connector})",
                "confluent_kafka": str(confluent_kafka.version()),
                "librdkafka": confluent_kafka.libversion()[0],
            },
            "kcat": {
                "command": " ".join(kcat.command("<bootstrap>", data.topic)).replace("\t", "\\t").replace("\n", "\\n"),
                "version": kcat.version,
                "librdkafka_from": kcat.library,
            },
            "results": {"connectops": by_tool["connectops"], "kcat": by_tool["kcat"]},
            "ratio": ratio,
            "target_ratio": TARGET_RATIO,
            "target_met": ratio >= TARGET_RATIO,
            "correct": not problems,
            "problems": problems,
            "runs": [{**asdict(r), "rate": r.rate} for r in runs],
        },
        args.output,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
