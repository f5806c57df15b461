"""Benchmark: the whole operator process's peak memory from its start through its first
reconciles and a few resyncs, with a 50,000-connector listing and 5,000-task statuses, against
the same operator on the same objects without them, side by side.

A worker shared by many teams lists every team's connectors, and a connector of thousands of
tasks that all fail answers a status of megabytes. ``listing_memory_bench.py`` measures the
listing's parse alone in a bare process; this measures what a user runs: ``connectops run``
(one namespace, ``MALLOC_ARENA_MAX=2`` as the image sets it) on the real kube-apiserver, its
ConnectCluster reaching a real distributed Connect worker through a pass-through proxy
(``tests/env/faultproxy.py``). The namespace holds ``--connectors`` Connector objects, real
connectors on the worker: all but ``--failed`` of them stopped FileStreamSource connectors, the
others FileStreamSink connectors whose file is a directory, so their task fails in ``start()``
with a real trace, restarted by ``autoRestart`` (so each resync reads their status afresh).

Two sides, each a fresh operator process started on the same objects and worker:

* ``adversarial``: the proxy answers the expanded listing (and the plain one) with the worker's
  own answer merged with ``--listed`` generated connectors (``listing_memory_bench.entry``,
  the shape ``tests/e2e/test_listing_shape.py`` holds to a real worker's listing), and each
  failed connector's ``GET /connectors/{name}/status`` with its real failed task repeated
  ``--tasks`` times, every trace made long (as ``tests/e2e/test_status_bounds.py`` does).
  The failed connectors' entries in the listing stay as the worker answers them: 5,000-task
  statuses there would take the listing past the 32 MiB response cap, which is then refused
  unread and never parsed, and that is the cheaper path.
* ``baseline``: the same proxy without rules: the worker's own answers (a listing of the
  namespace's connectors only), the memory the operator needs without the adversarial ones.

For each side, from the process start until it has resumed every Connector and then run
``--resyncs`` periodic resyncs (``connectops_reconciles_total``, trigger "timer", read from
``--metrics-port``): the peak RSS (VmHWM just before the stop: the process's own high-water mark
since its exec; ``ru_maxrss`` from ``wait4`` once it exited is recorded too, but it counts the
pages this process had when it spawned the operator), the RSS sampled every 0.1 s, the
expanded listings the proxy served and the status reads it multiplied; after the adversarial
side, the failed Connectors' stored status (read from the API server: bounded to 50 tasks,
under 256 KiB, counting every task).

    .venv/bin/python benchmarks/start_memory_bench.py                  # 50,000 listed, 100 Connectors, 2 failed
    .venv/bin/python benchmarks/start_memory_bench.py --failed 6 --output /tmp/start_memory_6.json
    .venv/bin/python benchmarks/start_memory_bench.py --smoke          # 2,000 listed, 6 Connectors, 10 s resync
    .venv/bin/python benchmarks/start_memory_bench.py --traced         # + the adversarial side under tracemalloc
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import signal
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from apply_bench import spec as source_spec
from harness import (
    Bench,
    FaultProxy,
    FaultRule,
    OperatorProcess,
    bench_env,
    connector_ready,
    free_port,
    log,
    reconciled,
    rss_mib,
    table,
    wait,
    write_result,
)
from listing_memory_bench import entry

TARGET_PEAK_MIB = 300.0
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SAMPLE_SECONDS = 0.1


def many_failed(status: dict[str, Any], tasks: int) -> dict[str, Any]:
    """The worker's status answer with its one real failed task repeated ``tasks`` times, every
    trace made long (its first line, which the operator keeps, included): as
    tests/e2e/test_status_bounds.py rewrites it."""
    real_tasks = status.get("tasks") or []
    if not real_tasks:
        return status
    out = copy.deepcopy(status)
    real = real_tasks[0]
    trace = str(real.get("trace") or "org.apache.kafka.connect.errors.ConnectException: failed")
    first, _, rest = trace.partition("\n")
    long_trace = f"{first} {'x' * 2000}\n{rest}" + "\n\tat some.Frame(Frame.java:1)" * 20
    out["tasks"] = [{**real, "id": i, "trace": long_trace} for i in range(tasks)]
    return out


class Listing:
    """The proxy's rewrite of ``GET /connectors`` (expanded or not): the worker's own answer with
    the generated connectors added, built once (the bench process's memory, not the operator's)."""

    def __init__(self, listed: int) -> None:
        self.generated = dict(entry(i) for i in range(listed))
        self.names = list(self.generated)
        self.served_bytes: list[int] = []

    def __call__(self, answer: Any) -> Any:
        if isinstance(answer, list):  # GET /connectors without expand: names
            return [*self.names, *answer]
        if not isinstance(answer, dict):
            return answer
        merged = dict(self.generated)
        merged.update(answer)  # the worker's own entries, the namespace's connectors among them
        return merged


class Sampler:
    """VmRSS of one process every ``SAMPLE_SECONDS``, from a thread, until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.started = time.monotonic()
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while not self._stop.is_set():
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.samples.append((time.monotonic() - self.started, int(line.split()[1]) / 1024))
                        break
            except OSError:
                return  # exited
            self._stop.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def at(self, seconds: float) -> float:
        """The highest sample up to ``seconds`` after the start."""
        return max((rss for t, rss in self.samples if t <= seconds), default=0.0)

    def timeline(self, bucket: float = 1.0) -> list[list[float]]:
        """The highest sample of each ``bucket`` seconds: [seconds, MiB]."""
        buckets: dict[int, float] = {}
        for t, rss in self.samples:
            key = int(t // bucket)
            buckets[key] = max(buckets.get(key, 0.0), rss)
        return [[round(k * bucket, 1), round(v, 1)] for k, v in sorted(buckets.items())]


def status_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def stop_and_reap(operator: OperatorProcess) -> tuple[float, int]:
    """SIGTERM, then ``wait4``: the exited process's ``ru_maxrss`` (MiB) and its exit status."""
    proc = operator.proc
    assert proc is not None
    proc.terminate()
    deadline = time.monotonic() + 30
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.1)
    # reaped here: Popen must not wait for it again
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, proc.returncode


def populate(bench: Bench, ns: str, count: int, failed: int) -> tuple[list[str], list[str], float]:
    """The namespace's Connectors, created through an operator of this tree and settled: the
    sources Ready (stopped), the sinks' tasks FAILED on the worker. The operator is stopped."""
    creator = bench.operator([ns])
    creator.start()
    sources = [f"mem-{i:04d}" for i in range(count - failed)]
    sinks = [f"fail-{i:02d}" for i in range(failed)]
    sink_dir = bench.workdir / "a-directory"
    sink_dir.mkdir(exist_ok=True)

    def create(name: str) -> None:
        if name in sources:
            body = source_spec(name, bench.workdir, "stopped")
        else:
            body = {
                "clusterRef": {"name": "main"},
                "class": SINK,
                # a directory: the task fails in start(), with a real trace
                "config": {"file": str(sink_dir), "topics": f"t-{name}"},
                # restarted 2 s after a failure is seen, then at most every 10 s: each resync
                # of a failed connector then reads its status afresh (not from the listing)
                "autoRestart": {"enabled": True, "backoff": {"initialSeconds": 2, "maxSeconds": 10}},
            }
        bench.create(ns, "connectors", "Connector", name, body)

    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, [*sources, *sinks]))
    http = httpx.Client(base_url=bench.env.connect.url, timeout=30)

    def failed_on_worker(name: str) -> bool:
        answer = http.get(f"/connectors/{name}/status")
        tasks = (answer.json().get("tasks") or []) if answer.status_code == 200 else []
        return bool(tasks) and all(t["state"] == "FAILED" and t.get("trace") for t in tasks)

    wanted = set(sources)
    wait(
        lambda: wanted <= {i["metadata"]["name"] for i in bench.items(ns, "connectors") if connector_ready(i)},
        120 + count,
        f"{len(sources)} Connectors Ready",
        interval=1.0,
    )
    for name in sinks:
        wait(functools.partial(failed_on_worker, name), 120, f"{name}'s task FAILED on the worker", interval=0.5)
    seconds = time.perf_counter() - started
    http.close()
    creator.stop()
    return sources, sinks, seconds


def measure(  # noqa: PLR0913 - one side's settings, each its own
    bench: Bench,
    ns: str,
    proxy: FaultProxy,
    side: str,
    count: int,
    sinks: list[str],
    listing: Listing | None,
    tasks: int,
    resyncs: int,
    resync_seconds: float,
    traced: bool,
) -> dict[str, Any]:
    """One operator process from its start until it resumed every Connector and ran
    ``resyncs`` resyncs; its memory and what it was served."""
    # a listing the last process asked is still being built until Connect answers (restart_bench)
    wait(lambda: proxy.in_flight == 0, 900, "Connect done with the last process's calls", interval=0.5)
    proxy.reset()
    listing_rule = status_rule = None
    if listing is not None:
        listing_rule = proxy.add_rule(FaultRule.rewritten(listing, method="GET", path=r"^/connectors$"))
        if sinks:
            status_rule = proxy.add_rule(
                FaultRule.rewritten(
                    lambda s: many_failed(s, tasks), method="GET", path=rf"^/connectors/({'|'.join(sinks)})/status$"
                )
            )
    operator = bench.operator([ns])
    port = free_port()
    out = bench.workdir / f"tracemalloc-{side}.json"
    wall = time.time()
    # wait4's ru_maxrss counts the pages this (large: it holds the generated listing) process
    # had when it spawned the operator, which the child shared until its exec; VmHWM is the
    # operator's own memory since its exec, the figure
    parent_rss = rss_mib(os.getpid())
    operator.start(
        extra_env={"CONNECTOPS_RESYNC_SECONDS": str(resync_seconds), "CONNECTOPS_TRACEMALLOC_OUT": str(out)},
        args=["--metrics-port", str(port)],
        traced=traced,
    )
    sampler = Sampler(operator.pid)
    started = time.monotonic()
    heap: dict[str, Any] | None = None
    try:
        wait(lambda: reconciled(port, "change") >= count, 600, f"{side}: every Connector resumed", interval=0.2)
        resumed = time.monotonic() - started
        rss_resumed = sampler.at(resumed)
        wait(
            lambda: reconciled(port, "timer") >= resyncs * count,
            (resyncs + 2) * resync_seconds + 300,
            f"{side}: {resyncs} resyncs",
            interval=0.5,
        )
        done = time.monotonic() - started
        hwm = status_hwm_mib(operator.pid)
        if traced:
            os.kill(operator.pid, signal.SIGUSR2)
            wait(out.exists, 60, "the tracemalloc report", interval=0.5)
            time.sleep(1)  # written whole
            heap = json.loads(out.read_text())
    finally:
        sampler.stop()
        maxrss, code = stop_and_reap(operator)
    listings = [
        r
        for r in proxy.requests
        if r.method == "GET" and r.path == "/connectors" and "expand" in r.query and r.received_at >= wall
    ]
    log_text = operator.log_tail(10**7)
    result: dict[str, Any] = {
        "traced": traced,
        "peak_rss_mib": hwm,
        "ru_maxrss_mib": maxrss,
        "bench_process_rss_at_spawn_mib": parent_rss,
        "exit_code": code,
        "rss_at_resumed_mib": rss_resumed,
        "rss_at_end_mib": sampler.samples[-1][1] if sampler.samples else 0.0,
        "sampled_max_mib": max((rss for _, rss in sampler.samples), default=0.0),
        "sampled_median_mib": statistics.median(rss for _, rss in sampler.samples) if sampler.samples else 0.0,
        "resumed_seconds": resumed,
        "seconds": done,
        "expanded_listings": len(listings),
        "expanded_listings_ok": sum(1 for r in listings if r.status == 200),
        "listing_rewrites": listing_rule.fired if listing_rule else 0,
        "status_rewrites": status_rule.fired if status_rule else 0,
        "listings": [
            {"asked_at": round(r.received_at - wall, 2), "seconds": round(r.seconds, 2), "status": r.status}
            for r in listings
        ],
        "connect_requests": len(proxy.requests),
        # the operator says so when it could not use a listing (too large, unreadable)
        "listing_refused": "no expanded listing" in log_text,
        "timeline": sampler.timeline(),
    }
    if heap is not None:
        result["tracemalloc"] = {k: heap[k] for k in ("traced_bytes", "by_package", "top_sites")}
    log(
        f"{side}: resumed {count} in {resumed:.1f} s, {resyncs} resyncs by {done:.0f} s; peak {hwm:.0f} MiB "
        f"(ru_maxrss {maxrss:.0f}), RSS at resumed {rss_resumed:.0f}, at end {result['rss_at_end_mib']:.0f}; "
        f"{len(listings)} listings, {result['status_rewrites']} multiplied statuses"
    )
    return result


def stored_statuses(bench: Bench, ns: str, sinks: list[str], tasks: int) -> list[dict[str, Any]]:
    """What the API server holds for the failed Connectors: their status's size and task count."""
    out = []
    for name in sinks:
        status = bench.get(ns, "connectors", name).get("status") or {}
        out.append(
            {
                "name": name,
                "bytes": len(json.dumps(status, separators=(",", ":")).encode()),
                "tasks_shown": len(status.get("tasks") or []),
                "tasks_omitted": status.get("tasksOmitted"),
                "tasks_running": status.get("tasksRunning"),
                "counts_every_task": status.get("tasksRunning") == f"0/{tasks}",
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listed", type=int, default=50_000, help="generated connectors in the listing")
    parser.add_argument("--connectors", type=int, default=100, help="the namespace's Connectors (real connectors)")
    parser.add_argument("--failed", type=int, default=2, help="of them, failed ones with a multiplied status")
    parser.add_argument("--tasks", type=int, default=5000, help="tasks in a multiplied status")
    parser.add_argument("--resyncs", type=int, default=3)
    parser.add_argument("--resync-seconds", type=float, default=60.0, help="the operator's (its default: 60)")
    parser.add_argument("--rounds", type=int, default=1, help="baseline/adversarial pairs, alternating the order")
    parser.add_argument("--traced", action="store_true", help="then one adversarial run under tracemalloc")
    parser.add_argument("--smoke", action="store_true", help="2,000 listed, 6 Connectors, 500 tasks, 10 s resync")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.listed, args.connectors, args.failed, args.tasks = 2000, 6, 1, 500
        args.resyncs, args.resync_seconds, args.rounds = 1, 10.0, 1
    log(f"building a listing of {args.listed} connectors")
    listing = Listing(args.listed)
    generated_bytes = len(json.dumps(listing.generated).encode())
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "adversarial": []}
    with bench_env(keep=args.keep, standalone_connect=False) as bench:
        ns = bench.namespace("bench-startmem")
        proxy = FaultProxy(bench.env.connect.url, upstream_timeout=660).start()
        try:
            bench.cluster(ns, rest_url=proxy.url)
            sources, sinks, populate_seconds = populate(bench, ns, args.connectors, args.failed)
            log(f"{len(sources)} Connectors Ready and {len(sinks)} failed in {populate_seconds:.1f} s")
            with httpx.Client(base_url=bench.env.connect.url, timeout=30) as http:
                real_status = [http.get(f"/connectors/{n}/status").json() for n in sinks]
            status_bytes = [len(json.dumps(many_failed(s, args.tasks)).encode()) for s in real_status]
            stored: list[dict[str, Any]] = []
            for r in range(args.rounds):
                order = ["baseline", "adversarial"] if r % 2 == 0 else ["adversarial", "baseline"]
                for side in order:
                    runs[side].append(
                        measure(
                            bench,
                            ns,
                            proxy,
                            side,
                            args.connectors,
                            sinks,
                            listing if side == "adversarial" else None,
                            args.tasks,
                            args.resyncs,
                            args.resync_seconds,
                            traced=False,
                        )
                    )
                    if side == "adversarial":
                        # as that run left them (a baseline run after it rewrites them)
                        stored += stored_statuses(bench, ns, sinks, args.tasks)
            traced_run = None
            if args.traced:
                traced_run = measure(
                    bench,
                    ns,
                    proxy,
                    "adversarial-traced",
                    args.connectors,
                    sinks,
                    listing,
                    args.tasks,
                    args.resyncs,
                    args.resync_seconds,
                    traced=True,
                )
        finally:
            proxy.stop()
        hygiene = bench.hygiene()

    def median(side: str, key: str) -> float:
        return float(statistics.median(run[key] for run in runs[side]))

    peak = {side: median(side, "peak_rss_mib") for side in runs}
    result: dict[str, Any] = {
        "listed": args.listed,
        "listing_bytes": generated_bytes,
        "connectors": args.connectors,
        "failed": args.failed,
        "tasks": args.tasks,
        "status_bytes": status_bytes,
        "resyncs": args.resyncs,
        "resync_seconds": args.resync_seconds,
        "rounds": args.rounds,
        "smoke": args.smoke,
        "populate_seconds": populate_seconds,
        "peak_rss_mib": peak,
        "ru_maxrss_mib": {side: median(side, "ru_maxrss_mib") for side in runs},
        "rss_at_end_mib": {side: median(side, "rss_at_end_mib") for side in runs},
        "peak_ratio": peak["adversarial"] / peak["baseline"],
        "target_peak_mib": TARGET_PEAK_MIB,
        "target_met": peak["adversarial"] < TARGET_PEAK_MIB,
        "stored_statuses": stored,
        "runs": runs,
        "traced_run": traced_run,
        "hygiene": hygiene,
    }
    write_result("start_memory", result, args.output)
    print(
        table(
            ["side", "peak RSS (VmHWM) MiB", "ru_maxrss MiB", "RSS at resumed MiB", "RSS at end MiB", "listings"],
            [
                [
                    side,
                    peak[side],
                    result["ru_maxrss_mib"][side],
                    median(side, "rss_at_resumed_mib"),
                    result["rss_at_end_mib"][side],
                    runs[side][-1]["expanded_listings_ok"],
                ]
                for side in runs
            ],
        )
    )
    print(
        f"listing of {args.listed:,} generated connectors ({generated_bytes / (1 << 20):.1f} MiB) + "
        f"{args.connectors} real, {args.failed} status(es) of {args.tasks:,} failed tasks "
        f"({', '.join(f'{b / (1 << 20):.1f}' for b in status_bytes)} MiB): peak {peak['adversarial']:.0f} vs "
        f"{peak['baseline']:.0f} MiB, {result['peak_ratio']:.2f}x; target < {TARGET_PEAK_MIB:.0f} MiB "
        f"{'met' if result['target_met'] else 'NOT met'}"
    )
    bad = [s for s in stored if not s["counts_every_task"] or s["tasks_shown"] > 50 or s["bytes"] >= 256 << 10]
    refused = [side for side in runs for run in runs[side] if run["listing_refused"] or not run["expanded_listings_ok"]]
    if bad:
        log(f"stored statuses not as bounded: {bad}")
    if refused:
        log(f"a run did not parse its listing: {refused}")
    # the target's verdict is in the result and the table; a run that did not measure what it
    # says (a listing not parsed, a status not bounded) or leaked the canary fails
    return 1 if hygiene["hits"] or bad or refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
