"""Benchmark: apply latency, memory and full-resync time with 10, 100 and 1,000 Connectors.

One operator process (``connectops run``) serves one namespace; its ConnectCluster reaches the
worker through a pass-through proxy (``tests/env/faultproxy.py``, no fault rules) that counts
the requests in flight, so the operator's bound on concurrent Connect calls is observed from
outside.

For each population size (Connector CRs present and applied, each a stopped
FileStreamSourceConnector: a real connector in Connect, no task; sampling starts once every one
is Ready, so a sample measures a change while resyncs run, not one queued behind the creations
just made; the resync period is 60 s and 30 samples at 1,000 span at least one):

The worker is a distributed worker (a one-worker group), as users run it: Apache Kafka
completes a one-member rejoin at once, so a connector created costs a rebalance of
milliseconds. ``--connect standalone`` runs the standalone worker for comparison.

* apply latency: a new Connector CR (running) is created and the clock stops when its config
  is live in Connect (``GET /connectors/<name>/config`` answers, polled every 10 ms directly,
  not through the proxy). Baseline, side by side: the same config PUT straight to Connect,
  timed to the same observation. Operator overhead = operator latency - direct latency, per
  sample pair (each pair runs back to back); and each side split at the proxy where Connect
  answered its config write (``Pair``), the target judged on the operator's time until its
  write reached Connect. Each sample is deleted again before the next, so
  the population stays the size it says.
* memory: the operator's RSS (VmRSS) and peak RSS (VmHWM) once the population is applied.
* full resync (largest size): the operator is stopped and started again; the time from the
  start until it has reconciled every Connector (its own counter,
  ``connectops_reconciles_total``, read from ``--metrics-port``), the calls that reached the
  proxy (expanded listings, per-connector reads) and their high-water mark of concurrency.

    .venv/bin/python benchmarks/apply_bench.py                        # 10, 100, 1000; 30 samples
    .venv/bin/python benchmarks/apply_bench.py --smoke                # 10 only, 5 samples (CI)
    .venv/bin/python benchmarks/apply_bench.py --sizes 10 100 --samples 50 --concurrency 4
    .venv/bin/python benchmarks/apply_bench.py --sizes 1000 --samples 5 --tracemalloc 70   # where the heap goes
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx

from harness import (
    Bench,
    FaultProxy,
    bench_env,
    connector_ready,
    free_port,
    log,
    reconciled,
    rss_mib,
    summary,
    table,
    vm_hwm_mib,
    wait,
    write_result,
)

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
TARGET_OVERHEAD_P50 = 0.1
TARGET_OVERHEAD_P99 = 1.0
TARGET_RSS_MIB = 150.0
TARGET_RESYNC_SECONDS = 10.0


class Connect:
    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def path(self, name: str) -> str:
        return f"/connectors/{quote(name, safe='')}"

    def live(self, name: str) -> bool:
        return self.http.get(self.path(name) + "/config").status_code == 200

    def running(self, name: str) -> bool:
        response = self.http.get(self.path(name) + "/status")
        if response.status_code != 200:
            return False
        status = response.json()
        return bool(status["connector"]["state"] == "RUNNING" and status["tasks"])

    def gone(self, name: str) -> bool:
        return self.http.get(self.path(name)).status_code == 404

    def names(self) -> set[str]:
        return set(self.http.get("/connectors").json())


def spec(name: str, workdir: Path, state: str) -> dict[str, Any]:
    return {
        "clusterRef": {"name": "main"},
        "class": SOURCE,
        "state": state,
        "config": {"file": str(workdir / f"{name}.txt"), "topic": f"t-{name}"},
    }


def populate(bench: Bench, ns: str, connect: Connect, names: list[str]) -> float:
    """Create Connector CRs (stopped) and wait until every one is in Connect; seconds taken."""
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(lambda n: bench.create(ns, "connectors", "Connector", n, spec(n, bench.workdir, "stopped")), names)
        )
    wanted = set(names)
    wait(lambda: wanted <= connect.names(), 60 + len(names), f"{len(names)} connectors in Connect", interval=1.0)
    # settled: the operator has finished with every one of them (Ready written), so a sample
    # measures a change while resyncs run, not a change queued behind this burst of creations
    wait(
        lambda: wanted <= {i["metadata"]["name"] for i in bench.items(ns, "connectors") if connector_ready(i)},
        60 + len(names),
        f"{len(names)} Connectors Ready",
        interval=1.0,
    )
    return time.perf_counter() - started


@dataclass
class Pair:
    """One sample pair, each side split where Connect answered its config write.

    Each side's time is three parts: until its config write reached Connect, Connect answering
    that write, and from that answer until the config reads back live. The direct side's first
    part is nil (the PUT is its first act); the operator's is its own work: the watch event, its
    reads of the connector, the validate call. The third part is Connect's alone, whoever wrote:
    the herder reading the write back from the config topic and rebalancing. At 1,000
    connectors it is steady (tens of ms); at 10,000 it runs from 0.6 to 4.6 s from one write to
    the next (and the write's own answer from 15 ms to 1.7 s), so the per-pair difference there
    is mostly two draws of Connect's time. The target is judged on the operator's time until its
    write reached Connect.
    """

    operator: float
    direct: float
    #: seconds from the create call until the operator's config write (the POST that creates)
    #: reached Connect, as the proxy saw it
    operator_write_at: float
    #: seconds Connect took to answer that write
    operator_write_seconds: float
    #: seconds during which its other calls for it (reads, validation) were being answered
    operator_others_in_connect: float
    #: seconds from the create call until the operator's first Connect call for it arrived
    operator_lead_in: float
    #: the operator's Connect calls for it, in order ("POST /connectors" ...)
    operator_calls: list[str]
    #: seconds the direct side's PUT took to be answered
    direct_write_seconds: float

    @property
    def overhead(self) -> float:
        return self.operator - self.direct

    @property
    def write_overhead(self) -> float:
        """What the operator adds until Connect has answered the config write: the two sides'
        times to that answer, per pair (the part after it is Connect's, see the class)."""
        return (self.operator_write_at + self.operator_write_seconds) - self.direct_write_seconds

    @property
    def operator_catch_up(self) -> float:
        return self.operator - self.operator_write_at - self.operator_write_seconds

    @property
    def direct_catch_up(self) -> float:
        return self.direct - self.direct_write_seconds


def call_kind(r: Any) -> str:
    """A recorded call as its method and path with the connector's name left out."""
    return f"{r.method} {re.sub(r'^/connectors/[^/]+', '/connectors/{name}', r.path)}"


def _union_seconds(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def sample_pair(bench: Bench, ns: str, connect: Connect, proxy: FaultProxy, i: int) -> Pair:
    """One operator apply and one direct PUT of the same config, in alternating order.

    Each connector is let settle (running) and is deleted before the other side starts: a create
    makes the worker group rebalance, and a request made during that waits for it, which would
    bill one side for the other's rebalance.
    """
    name = f"apply-{i}-{uuid.uuid4().hex[:4]}"
    direct_name = f"direct-{name}"
    (bench.workdir / f"{name}.txt").write_text("x\n")
    config = {"connector.class": SOURCE, "tasks.max": "1", "file": str(bench.workdir / f"{name}.txt"), "topic": "t-d"}

    def through_operator() -> dict[str, Any]:
        proxy.clear_requests()
        wall = time.time()
        started = time.perf_counter()
        bench.create(ns, "connectors", "Connector", name, spec(name, bench.workdir, "running"))
        wait(lambda: connect.live(name), 60, f"{name} live", interval=0.01)
        seconds = time.perf_counter() - started
        observed = wall + seconds

        # the operator's calls for this connector made before its config was seen live (the
        # resyncs' listings of the others are not on its path); validation names the class, and
        # a creation is a POST to the collection
        def calls_made() -> list[Any]:
            return [
                r
                for r in proxy.requests
                if wall <= r.received_at <= observed
                and (
                    f"/connectors/{quote(name, safe='')}" in r.path
                    or "/config/validate" in r.path
                    or (r.method == "POST" and r.path == "/connectors")
                )
            ]

        def is_write(r: Any) -> bool:
            return r.method in ("POST", "PUT") and "/config/validate" not in r.path

        # the proxy logs a call once its answer is sent, and the config can read back live a
        # moment before that: wait for the write's entry
        wait(lambda: any(is_write(r) for r in calls_made()), 10, f"{name}: the operator's write logged", interval=0.01)
        calls = calls_made()
        # the config write is the one call both sides make; the operator's reads and its
        # validation are its own work, before it
        writes = [r for r in calls if is_write(r)]
        write = writes[-1]
        parts = {
            "operator": seconds,
            "operator_write_at": write.received_at - wall,
            "operator_write_seconds": write.seconds,
            "operator_others_in_connect": _union_seconds(
                [(r.received_at, min(r.received_at + r.seconds, observed)) for r in calls if r not in writes]
            ),
            "operator_lead_in": min(r.received_at for r in calls) - wall,
            "operator_calls": [call_kind(r) for r in calls],
        }
        wait(lambda: connect.running(name), 60, f"{name} running", interval=0.1)
        bench.custom.delete_namespaced_custom_object("connectops.io", "v1alpha1", ns, "connectors", name)
        wait(lambda: connect.gone(name), 60, f"{name} deleted", interval=0.05)
        return parts

    def direct() -> dict[str, Any]:
        started = time.perf_counter()
        connect.http.put(connect.path(direct_name) + "/config", json=config).raise_for_status()
        put_seconds = time.perf_counter() - started
        wait(lambda: connect.live(direct_name), 60, f"{direct_name} live", interval=0.01)
        parts = {"direct": time.perf_counter() - started, "direct_write_seconds": put_seconds}
        wait(lambda: connect.running(direct_name), 60, f"{direct_name} running", interval=0.1)
        connect.http.delete(connect.path(direct_name))
        wait(lambda: connect.gone(direct_name), 60, f"{direct_name} deleted", interval=0.05)
        return parts

    sides = (through_operator, direct) if i % 2 == 0 else (direct, through_operator)
    first, second = (side() for side in sides)
    return Pair(**first, **second)


def full_resync(bench: Bench, ns: str, proxy: FaultProxy, names: list[str], concurrency: int) -> dict[str, Any]:
    operator = bench.operators[0]
    operator.stop()
    # a listing the stopped process asked (its sweep's) is still being built by Connect until
    # it answers: a restart begun beside it would share the worker with it (restart_bench)
    wait(lambda: proxy.in_flight == 0, 900, "Connect done with the stopped process's calls", interval=0.5)
    proxy.reset()
    port = free_port()
    started = time.perf_counter()
    operator.start(extra_env={"CONNECTOPS_CONNECT_CONCURRENCY": str(concurrency)}, args=["--metrics-port", str(port)])
    # every Connector reconciled once (its resume), read from the operator's own counter; the
    # resumes only ("change"): the periodic sweep runs beside them, and counting its resyncs
    # too reached the population before every Connector's resume was done
    wait(lambda: reconciled(port, "change") >= len(names), 600, "every Connector resumed after restart", interval=0.2)
    seconds = time.perf_counter() - started
    wanted = set(names)
    single = [
        r
        for r in proxy.requests
        if r.method == "GET" and r.path.startswith("/connectors/") and unquote(r.path.split("/")[2]) in wanted
    ]
    listings = [r for r in proxy.requests if r.method == "GET" and r.path == "/connectors" and "expand" in r.query]
    # what the calls were, by method and path with connector names taken out
    kinds = collections.Counter(call_kind(r) for r in proxy.requests)
    return {
        "connectors": len(names),
        "seconds": seconds,
        "connect_requests": len(proxy.requests),
        "listing_requests": len(listings),
        "single_connector_reads": len(single),
        "requests_by_kind": dict(kinds.most_common()),
        "max_concurrent_connect_requests": proxy.max_in_flight,
        "concurrency_setting": concurrency,
        "rss_mib": rss_mib(operator.pid),
        "peak_rss_mib": vm_hwm_mib(operator.pid),
        "target_seconds": TARGET_RESYNC_SECONDS,
        "target_met": seconds < TARGET_RESYNC_SECONDS and proxy.max_in_flight <= concurrency,
    }


def memory_attribution(bench: Bench, names: list[str], wait_seconds: float) -> dict[str, Any]:
    """The operator restarted under tracemalloc with the population present; once every Connector
    is reconciled and ``wait_seconds`` more have passed (a resync period includes the resyncs'
    state), where its Python heap goes, by package and by allocation site."""
    operator = bench.operators[0]
    operator.stop()
    out = bench.workdir / "tracemalloc.json"
    port = free_port()
    operator.start(extra_env={"CONNECTOPS_TRACEMALLOC_OUT": str(out)}, args=["--metrics-port", str(port)], traced=True)
    wait(lambda: reconciled(port, "change") >= len(names), 900, "every Connector reconciled (traced)", interval=0.5)
    time.sleep(wait_seconds)
    os.kill(operator.pid, signal.SIGUSR2)
    wait(out.exists, 120, "tracemalloc snapshot written", interval=0.5)
    time.sleep(1)  # the file is written in one call; let it finish
    report: dict[str, Any] = json.loads(out.read_text())
    report["connectors"] = len(names)
    report["traced_rss_mib"] = rss_mib(operator.pid)
    operator.stop()
    return report


def run(
    bench: Bench, sizes: list[int], samples: int, concurrency: int, trace_after: float | None = None
) -> dict[str, Any]:
    ns = bench.namespace("bench-apply")
    connect = Connect(bench.env.connect.url)
    # the proxy waits for Connect as long as the operator may (a listing's deadline is up to
    # 600 s): with its 60 s default, a 10,000-connector listing was cut by the proxy (HTTP 502),
    # and the operator read the connectors one by one, which a direct client never makes it do
    proxy = FaultProxy(bench.env.connect.url, upstream_timeout=660).start()
    try:
        bench.cluster(ns, rest_url=proxy.url)
        operator = bench.operator([ns], CONNECTOPS_CONNECT_CONCURRENCY=str(concurrency))
        port = free_port()
        operator.start(args=["--metrics-port", str(port)])
        present: list[str] = []
        results: list[dict[str, Any]] = []
        for size in sizes:
            more = [f"pop-{i:04d}" for i in range(len(present), size)]
            populate_seconds = populate(bench, ns, connect, more)
            present += more
            log(f"{size} connectors applied (+{len(more)} in {populate_seconds:.1f} s)")
            resyncs_before = reconciled(port, "timer")
            pairs = [sample_pair(bench, ns, connect, proxy, i) for i in range(samples)]
            resyncs_during = reconciled(port, "timer") - resyncs_before
            op = [p.operator for p in pairs]
            direct = [p.direct for p in pairs]
            overhead = [p.overhead for p in pairs]
            to_answer = [p.write_overhead for p in pairs]
            op_catch = [p.operator_catch_up for p in pairs]
            direct_catch = [p.direct_catch_up for p in pairs]
            entry = {
                "connectors_present": size,
                "populate_seconds": populate_seconds,
                "operator_seconds": summary(op) | {"runs": op},
                "direct_seconds": summary(direct) | {"runs": direct},
                "overhead_seconds": summary(overhead) | {"runs": overhead},
                # each side split where Connect answered its config write (see Pair)
                "operator_write_at_seconds": summary([p.operator_write_at for p in pairs]),
                "operator_write_seconds": summary([p.operator_write_seconds for p in pairs]),
                "direct_write_seconds": summary([p.direct_write_seconds for p in pairs]),
                "operator_others_in_connect_seconds": summary([p.operator_others_in_connect for p in pairs]),
                "write_overhead_seconds": summary(to_answer) | {"runs": to_answer},
                "operator_catch_up_seconds": summary(op_catch) | {"runs": op_catch},
                "direct_catch_up_seconds": summary(direct_catch) | {"runs": direct_catch},
                "operator_lead_in_seconds": summary([p.operator_lead_in for p in pairs]),
                "operator_calls": collections.Counter(c for p in pairs for c in p.operator_calls).most_common(),
                "rss_mib": rss_mib(operator.pid),
                "peak_rss_mib": vm_hwm_mib(operator.pid),
                "max_concurrent_connect_requests": proxy.max_in_flight,
                # the resyncs that ran while the samples were taken (the operator's own counter)
                "resyncs_during_samples": resyncs_during,
            }
            # judged on what the operator adds before its write reaches Connect (the direct side's
            # is nil): Connect's answer to that write and its catch-up after it are the same work
            # whoever wrote, and two draws of them differ by seconds at 10,000 (see Pair); the
            # per-pair difference's verdict is kept beside it
            entry["target_met"] = (
                entry["operator_write_at_seconds"]["p50"] < TARGET_OVERHEAD_P50
                and entry["operator_write_at_seconds"]["p99"] < TARGET_OVERHEAD_P99
            )
            entry["pair_target_met"] = (
                entry["overhead_seconds"]["p50"] < TARGET_OVERHEAD_P50
                and entry["overhead_seconds"]["p99"] < TARGET_OVERHEAD_P99
            )
            results.append(entry)
            log(
                f"{size}: operator p50 {statistics.median(op):.3f} s, direct p50 {statistics.median(direct):.3f} s, "
                f"overhead p50 {entry['overhead_seconds']['p50']:.3f} s, RSS {entry['rss_mib']:.0f} MiB"
            )
        resync = full_resync(bench, ns, proxy, present, concurrency)
        log(
            f"full resync of {len(present)}: {resync['seconds']:.1f} s, "
            f"max in flight {resync['max_concurrent_connect_requests']}"
        )
        memory = memory_attribution(bench, present, trace_after) if trace_after is not None else None
        return {
            "memory_attribution": memory,
            "samples": samples,
            "concurrency": concurrency,
            "sizes": results,
            "full_resync": resync,
            "targets": {
                "overhead_p50_seconds": TARGET_OVERHEAD_P50,
                "overhead_p99_seconds": TARGET_OVERHEAD_P99,
                "rss_mib": TARGET_RSS_MIB,
                "full_resync_seconds": TARGET_RESYNC_SECONDS,
            },
        }
    finally:
        proxy.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=8, help="CONNECTOPS_CONNECT_CONCURRENCY")
    parser.add_argument("--smoke", action="store_true", help="10 connectors, 5 samples (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument(
        "--connect",
        choices=["standalone", "distributed"],
        default="distributed",
        help="Connect worker mode (distributed, as users run it; standalone: no worker group)",
    )
    parser.add_argument("--connect-heap", default="512m", help="the worker's -Xmx (10,000 connectors need more)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--tracemalloc",
        type=float,
        metavar="SECONDS",
        help="at the end, restart the operator under tracemalloc and, SECONDS after every Connector "
        "is reconciled, record where its heap goes (memory_attribution in the JSON)",
    )
    args = parser.parse_args(argv)
    sizes, samples = ([10], 5) if args.smoke else (sorted(args.sizes), args.samples)

    standalone = args.connect == "standalone"
    with bench_env(keep=args.keep, standalone_connect=standalone, connect_heap=args.connect_heap) as bench:
        result = run(bench, sizes, samples, args.concurrency, args.tracemalloc)
        result["connect_mode"] = args.connect
        result["hygiene"] = bench.hygiene()
    write_result("apply", result, args.output)
    rows = [
        [
            s["connectors_present"],
            s["operator_seconds"]["p50"],
            s["operator_seconds"]["p99"],
            s["direct_seconds"]["p50"],
            s["direct_seconds"]["p99"],
            s["overhead_seconds"]["p50"],
            s["rss_mib"],
        ]
        for s in result["sizes"]
    ]
    print(table(["CRs", "operator p50 s", "p99 s", "direct PUT p50 s", "p99 s", "overhead p50 s", "RSS MiB"], rows))
    r = result["full_resync"]
    print(
        f"full resync of {r['connectors']}: {r['seconds']:.1f} s, "
        f"RSS {r['rss_mib']:.0f} MiB (peak {r['peak_rss_mib']:.0f}),"
        f" at most {r['max_concurrent_connect_requests']} concurrent Connect calls (setting {r['concurrency_setting']})"
    )
    if memory := result.get("memory_attribution"):
        total = memory["traced_bytes"] or 1
        print(f"Python heap with {memory['connectors']} Connectors (tracemalloc): {total / 2**20:.1f} MiB")
        print(
            table(
                ["package", "MiB", "share"],
                [[name, size / 2**20, size / total] for name, size in memory["by_package"][:15]],
            )
        )
    return 1 if result["hygiene"]["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
