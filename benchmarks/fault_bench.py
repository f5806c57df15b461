"""Benchmark: OffsetResets under injected Connect REST faults, driven by the real operator process.

For each fault rate (default 5 %, 20 %, 50 % of calls), in a fresh namespace:

1. A ``FaultProxy`` (``tests/env/faultproxy.py``) is started in front of the real Connect worker and
   the ConnectCluster's ``restUrl`` points at it, so *every* call the operator makes to Connect
   crosses it. The benchmark's own checks go straight to the worker and are never faulted.
2. With the proxy quiet, M FileStreamSource connectors are created (each reads a small temp file
   into its own topic) and waited for: Ready, the lines in the topic, offsets committed. Setup is
   not what is measured, so it runs without faults.
3. The fault rules are switched on (seeded, so a rerun draws the same decisions for the same
   request sequence), then one ``OffsetReset`` (``action: reset``) per connector is created, all
   in flight at once. The rate is split over the failure kinds Connect and its network produce:
   409 "stale configuration" (a rebalance), 500, 503, a slow answer (2 s before the call reaches
   Connect; 4 s after Connect applied it), a connection dropped before reaching Connect and one
   dropped after it (the change happened, the answer was lost). The operator's per-call timeout
   is 10 s (``--request-timeout``), so slow answers are slow, not timeouts; the worker's own
   latencies (reported) decide whether real timeouts happen.
4. Each reset is classified once terminal or at the deadline:

   * **succeeded**: phase Succeeded, and verified for real: the topic holds every line twice (the
     source re-read its file exactly once), the connector is RUNNING in Connect, no Lease left;
   * **failed-with-reason**: phase Failed with a non-empty ``Succeeded`` condition message, and the
     connector is either RUNNING or its STOPPED state is what the message says; no Lease left
     unless the message says it stays locked; if the message says offsets were not changed, the
     topic must not have been re-read;
   * **stuck**: everything else: not terminal by the deadline, or terminal with the world
     contradicting the status (connector silently STOPPED, a Lease silently left, offsets changed
     although the status says they were not, a Succeeded reset that did not re-read).

Stuck must be 0 and the canary Secret value must appear nowhere the operator wrote; the exit code is 1
otherwise.

    .venv/bin/python benchmarks/fault_bench.py                      # 6 resets x 5 %, 20 %, 50 %
    .venv/bin/python benchmarks/fault_bench.py --smoke              # 1 reset per rate (CI)
    .venv/bin/python benchmarks/fault_bench.py --rates 0.2 --resets 10 --seed 7 --deadline 300

Results: ``benchmarks/results/faults.json`` (every reset's steps, attempts, messages, timings;
proxy counters; hygiene scan of everything the operator wrote).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `harness` next to this file

import httpx
import kubernetes
from kubernetes.client.exceptions import ApiException

from connectops.adapters.kube import lock_name
from harness import (
    GROUP,
    OPERATOR_ENV,
    VERSION,
    Bench,
    bench_env,
    connector_ready,
    log,
    percentile,
    table,
    wait,
    write_result,
)
from tests.e2e.conftest import topic_record_count  # defined there or re-exported: works either way
from tests.env.faultproxy import FaultProxy, FaultRule, RecordedRequest

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = ["alpha", "bravo", "charlie", "delta", "echo"]
TERMINAL = ("Succeeded", "Failed")
CLUSTER = "main"
#: the operator's per-call timeout (ConnectCluster.spec.requestTimeoutSeconds). Not the e2e
#: tests' 3 s: on a busy 2-CPU machine the real worker alone takes 3-5 s for some PUT /stop and
#: GET /offsets calls (measured: unfaulted latencies are in the result file), and a benchmark of
#: *injected* faults must not be dominated by the worker's own timeouts. Above the injected delays.
REQUEST_TIMEOUT_SECONDS = 10.0

#: (name, share of the rate, rule factory). Shares sum to 1: the rate is the chance that a call
#: meets *some* fault. The proxy evaluates rules in order and the first that fires wins, so each
#: rule's own probability is conditional on the earlier ones not firing (see ``fault_rules``).
FAULT_MIX: tuple[tuple[str, float, dict[str, Any]], ...] = (
    ("409-stale-config", 0.25, {"kind": "status", "status_code": 409}),
    ("500", 0.15, {"kind": "status", "status_code": 500}),
    ("503", 0.15, {"kind": "status", "status_code": 503}),
    ("slow-2s", 0.15, {"kind": "delay", "seconds": 2.0}),
    # the change is applied at once, the answer comes 4 s later
    ("slow-4s-after-upstream", 0.10, {"kind": "delay", "seconds": 4.0, "after_upstream": True}),
    ("drop-before-upstream", 0.10, {"kind": "drop"}),
    ("drop-after-upstream", 0.10, {"kind": "drop", "after_upstream": True}),
)


def fault_rules(rate: float, seed: int) -> list[FaultRule]:
    """Rules that together fault ``rate`` of all calls, split by ``FAULT_MIX``."""
    rules: list[FaultRule] = []
    taken = 0.0  # the unconditional probability already claimed by earlier rules
    for i, (name, share, shape) in enumerate(FAULT_MIX):
        wanted = rate * share
        conditional = min(1.0, wanted / (1.0 - taken)) if taken < 1.0 else 0.0
        taken += wanted
        kwargs: dict[str, Any] = {"probability": conditional, "seed": seed * 1000 + i, "name": name}
        kind = shape["kind"]
        if kind == "status":
            code = shape["status_code"]
            rule = (
                FaultRule.stale_config(**kwargs)
                if code == 409
                else FaultRule.status(code, f"injected fault: HTTP {code}", **kwargs)
            )
        else:
            rule = FaultRule(
                kind, seconds=shape.get("seconds", 0.0), after_upstream=shape.get("after_upstream", False), **kwargs
            )
        rules.append(rule)
    return rules


# -- direct observation (never through the proxy) ------------------------------------------------


class Worker:
    """The Connect worker, asked directly: what is really there."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=15)

    def close(self) -> None:
        self.http.close()

    @staticmethod
    def path(name: str) -> str:
        return f"/connectors/{quote(name, safe='')}"

    def state(self, name: str) -> str | None:
        response = self.http.get(self.path(name) + "/status")
        if response.status_code != 200:
            return None
        return str(response.json()["connector"]["state"])

    def offsets(self, name: str) -> list[dict[str, Any]]:
        response = self.http.get(self.path(name) + "/offsets")
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json().get("offsets", [])
        return result

    def delete(self, name: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self.http.delete(self.path(name))


def lease_present(b: Bench, ns: str, connector: str) -> bool:
    coord = kubernetes.client.CoordinationV1Api(b.api)
    try:
        coord.read_namespaced_lease(lock_name(CLUSTER, connector), ns)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def reset_events(b: Bench, ns: str, name: str) -> list[dict[str, str]]:
    items = b.core.list_namespaced_event(ns).items
    return [
        {"type": e.type, "reason": e.reason, "message": (e.message or "")[:300]}
        for e in items
        if e.involved_object.name == name and e.involved_object.kind == "OffsetReset"
    ]


# -- one reset's record --------------------------------------------------------------------------


@dataclass
class ResetRecord:
    name: str
    connector: str
    topic: str
    created: float
    finished: float | None = None
    phase: str | None = None
    seconds: float | None = None
    current_step: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    condition: dict[str, Any] | None = None
    connector_state: str | None = None
    lease_left: bool | None = None
    topic_records: int | None = None
    events: list[dict[str, str]] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    verdict: str = "stuck"
    why: list[str] = field(default_factory=list)

    def observe(self, status: dict[str, Any], now: float) -> None:
        self.phase = status.get("phase")
        self.current_step = status.get("currentStep")
        self.steps = [
            {k: s.get(k) for k in ("name", "state", "attempts", "message")} for s in status.get("steps") or []
        ]
        self.condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Succeeded"), None)
        self.history = [f"{h.get('time')} {h.get('message')}" for h in status.get("history") or []]
        if self.phase in TERMINAL and self.finished is None:
            self.finished = now
            self.seconds = now - self.created


def classify(b: Bench, ns: str, worker: Worker, rec: ResetRecord) -> None:
    """Decide succeeded / failed-with-reason / stuck from what Connect, Kafka and Kubernetes hold."""
    n = len(LINES)
    rec.connector_state = worker.state(rec.connector)
    rec.lease_left = lease_present(b, ns, rec.connector)
    rec.events = reset_events(b, ns, rec.name)
    why: list[str] = []
    if rec.phase not in TERMINAL:
        rec.topic_records = topic_record_count(b.env.connect.bootstrap, rec.topic)
        why.append(f"not terminal by the deadline (phase {rec.phase}, step {rec.current_step})")
        rec.verdict, rec.why = "stuck", why
        return
    message = str((rec.condition or {}).get("message") or "")
    if rec.phase == "Succeeded":
        # the source re-reads its file once after its offsets were deleted: 2x the lines, exactly
        with contextlib.suppress(TimeoutError):
            wait(lambda: topic_record_count(b.env.connect.bootstrap, rec.topic) >= 2 * n, 60, "re-read", 1.0)
        rec.topic_records = topic_record_count(b.env.connect.bootstrap, rec.topic)
        if rec.topic_records != 2 * n:
            why.append(f"Succeeded but the topic holds {rec.topic_records} records, expected {2 * n}")
        if rec.connector_state != "RUNNING":
            why.append(f"Succeeded but the connector is {rec.connector_state} in Connect")
        if rec.lease_left:
            why.append("Succeeded but its Lease is still there")
        rec.verdict, rec.why = ("succeeded" if not why else "stuck"), why
        return
    # Failed: the message must explain, and the world must match the explanation
    if not message:
        why.append("Failed without a message")
    says_stopped = "STOPPED" in message
    says_locked = "locked" in message
    says_unchanged = "not changed" in message
    if rec.connector_state == "STOPPED" and not says_stopped:
        why.append("the connector is STOPPED but the status does not say so")
    elif rec.connector_state not in ("RUNNING", "STOPPED"):
        why.append(f"the connector is {rec.connector_state} in Connect")
    if rec.lease_left and not says_locked:
        why.append("its Lease is left (Connector changes stay blocked) but the status does not say so")
    if rec.connector_state == "RUNNING":
        # a resumed connector whose offsets were deleted re-reads within seconds: give it time
        with contextlib.suppress(TimeoutError):
            wait(lambda: topic_record_count(b.env.connect.bootstrap, rec.topic) >= 2 * n, 15, "re-read", 1.0)
    rec.topic_records = topic_record_count(b.env.connect.bootstrap, rec.topic)
    if says_unchanged and rec.topic_records != n:
        why.append(f"the status says offsets were not changed, but the topic holds {rec.topic_records} records")
    rec.verdict, rec.why = ("failed-with-reason" if not why else "stuck"), why


def settled(b: Bench, ns: str, worker: Worker, name: str, topic: str) -> None:
    """A new connector is Ready, has copied its file, and has committed offsets (something to reset)."""
    bootstrap = b.env.connect.bootstrap
    wait(lambda: connector_ready(b.get(ns, "connectors", name)), 120, f"Connector {name} Ready", 0.5)
    wait(lambda: topic_record_count(bootstrap, topic, idle=1.0) == len(LINES), 60, f"{topic} copied")
    wait(lambda: worker.offsets(name), 60, f"{name} offsets committed", 0.5)


# -- one rate ------------------------------------------------------------------------------------


def upstream_latency(seen: Sequence[RecordedRequest]) -> dict[str, dict[str, float]]:
    """What the real worker took per kind of call, on the calls that were not faulted."""
    by_call: dict[str, list[float]] = {}
    for r in seen:
        if r.fault is None and r.upstream_status is not None:
            call = re.sub(r"^/connectors/[^/]+", "/connectors/{name}", r.path)
            by_call.setdefault(f"{r.method} {call}", []).append(r.seconds)
    return {k: {"n": len(v), "p50": round(percentile(v, 50), 3), "max": round(max(v), 3)} for k, v in by_call.items()}


def run_rate(b: Bench, rate: float, resets: int, seed: int, deadline: float, request_timeout: float) -> dict[str, Any]:
    pct = round(rate * 100)
    ns = b.namespace(f"faults-{pct}")
    worker = Worker(b.env.connect.url)
    proxy = FaultProxy(b.env.connect.url).start()
    op = b.operator([ns])
    connectors: list[tuple[str, str]] = []
    try:
        b.cluster(ns, rest_url=proxy.url)
        b.custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "connectclusters", CLUSTER, {"spec": {"requestTimeoutSeconds": request_timeout}}
        )
        op.start()
        wait(lambda: connector_ready(b.get(ns, "connectclusters", CLUSTER)), 60, "ConnectCluster Ready", 0.5)

        # setup, proxy quiet
        config_from = b.connector_secret(ns)
        files = b.workdir / ns
        files.mkdir()
        for i in range(resets):
            suffix = uuid.uuid4().hex[:5]
            name, topic = f"src-{pct}-{i}-{suffix}", f"lines-{pct}-{i}-{suffix}"
            src = files / f"{name}.txt"
            src.write_text("".join(line + "\n" for line in LINES))
            spec = {
                "clusterRef": {"name": CLUSTER},
                "class": SOURCE,
                "config": {"file": str(src), "topic": topic},
                "configFrom": config_from,
            }
            b.create(ns, "connectors", "Connector", name, spec)
            connectors.append((name, topic))
        for name, topic in connectors:
            settled(b, ns, worker, name, topic)
        log(f"rate {pct}%: {resets} connectors ready; faults on")

        # faults on, then every reset at once
        rules = fault_rules(rate, seed + pct)
        proxy.clear_requests()
        proxy.set_rules(rules)
        t0 = time.monotonic()
        records: list[ResetRecord] = []
        for i, (name, topic) in enumerate(connectors):
            reset = f"reset-{i}"
            b.create(ns, "offsetresets", "OffsetReset", reset, {"connectorRef": {"name": name}, "action": "reset"})
            records.append(ResetRecord(reset, name, topic, time.monotonic()))
        by_name = {r.name: r for r in records}
        end = t0 + deadline
        while time.monotonic() < end:
            now = time.monotonic()
            for item in b.items(ns, "offsetresets"):
                rec = by_name.get(item["metadata"]["name"])
                if rec is not None:
                    rec.observe(item.get("status") or {}, now)
            if all(r.phase in TERMINAL for r in records):
                break
            time.sleep(0.5)
        window = time.monotonic() - t0

        # what the proxy saw while resets ran; then the faults stop (verification is direct anyway)
        seen = proxy.requests
        counters = proxy.counters()
        proxy.clear_rules()
        log(f"rate {pct}%: resets done or deadline after {window:.0f}s; verifying")

        # verification waits on topic reads (seconds each): in parallel, few threads
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda r: classify(b, ns, worker, r), records))

        op_log = op.log_paths[-1].read_text(errors="replace") if op.log_paths else ""
    finally:
        op.stop()
        proxy.stop()
        # keep the shared worker light for the next rate: its connectors go (no operator runs now)
        for name, _ in connectors:
            worker.delete(name)
        worker.close()

    verdicts = Counter(r.verdict for r in records)
    by_kind = Counter(r.rule for r in seen if r.rule is not None)
    attempts: dict[str, list[int]] = {}
    for rec in records:
        for step in rec.steps:
            attempts.setdefault(step["name"], []).append(int(step.get("attempts") or 0))
    done_seconds = [r.seconds for r in records if r.verdict == "succeeded" and r.seconds is not None]
    failed_seconds = [r.seconds for r in records if r.verdict == "failed-with-reason" and r.seconds is not None]
    return {
        "rate": rate,
        "namespace": ns,
        "resets": len(records),
        "succeeded": verdicts["succeeded"],
        "failed_with_reason": verdicts["failed-with-reason"],
        "stuck": verdicts["stuck"],
        "window_seconds": round(window, 1),
        "calls": len(seen),
        "faults_injected": sum(by_kind.values()),
        "faults_by_kind": dict(by_kind),
        "rule_counters": {k: {"matched": m, "fired": f} for k, (m, f) in counters.items()},
        "calls_by_method": dict(Counter(r.method for r in seen)),
        "unfaulted_upstream_seconds": upstream_latency(seen),
        "succeeded_seconds": _stats(done_seconds),
        "failed_seconds": _stats(failed_seconds),
        "attempts_per_step": {
            k: {"mean": round(statistics.fmean(v), 2), "max": max(v)} for k, v in attempts.items() if v
        },
        "operator_log": {
            "unexpected_errors": op_log.count("unexpected "),
            "tracebacks": op_log.count("Traceback"),
        },
        "records": [asdict(r) for r in records],
    }


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 2),
        "max": round(max(values), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.20, 0.50], help="fault rates, 0..1")
    parser.add_argument("--resets", type=int, default=None, help="concurrent resets per rate (default 6; smoke 1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault rules")
    parser.add_argument("--smoke", action="store_true", help="1 reset per rate (CI)")
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds for every reset to be terminal")
    parser.add_argument("--output", type=Path, default=None, help="default benchmarks/results/faults.json")
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_TIMEOUT_SECONDS,
        help="ConnectCluster requestTimeoutSeconds (the operator's per-call timeout)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dir (server and operator logs)")
    args = parser.parse_args(argv)
    resets = args.resets or (1 if args.smoke else 6)
    if not all(0.0 < r <= 1.0 for r in args.rates):
        parser.error("--rates must be within (0, 1]")

    results: list[dict[str, Any]] = []
    with bench_env(keep=args.keep) as b:
        for rate in args.rates:
            results.append(run_rate(b, rate, resets, args.seed, args.deadline, args.request_timeout))
            r = results[-1]
            log(f"rate {rate:.0%}: {r['succeeded']} succeeded, {r['failed_with_reason']} failed, {r['stuck']} stuck")
        hygiene = b.hygiene()
        startup = b.env.startup_seconds
        workdir = str(b.workdir)

    header = ["rate", "resets", "succeeded", "failed-with-reason", "stuck", "faults injected", "calls", "p50 reset s"]
    rows = [
        [
            f"{r['rate']:.0%}",
            r["resets"],
            r["succeeded"],
            r["failed_with_reason"],
            r["stuck"],
            r["faults_injected"],
            r["calls"],
            (r["succeeded_seconds"] or {}).get("p50", "-"),
        ]
        for r in results
    ]
    print(table(header, rows))
    for r in results:
        for rec in r["records"]:
            if rec["verdict"] != "succeeded":
                print(
                    f"- {r['rate']:.0%} {rec['name']} ({rec['connector']}): {rec['verdict']}: "
                    f"{'; '.join(rec['why']) or (rec['condition'] or {}).get('message', '')}"
                )
    if hygiene["hits"]:
        print(f"hygiene: canary found in {hygiene['hits']}")
    write_result(
        "faults",
        {
            "settings": {
                "rates": args.rates,
                "resets_per_rate": resets,
                "seed": args.seed,
                "deadline_seconds": args.deadline,
                "request_timeout_seconds": args.request_timeout,
                "fault_mix": [{"name": n, "share": s, **shape} for n, s, shape in FAULT_MIX],
                "faults_during_setup": False,
                "operator_env": OPERATOR_ENV,
                "workdir": workdir if args.keep else None,
            },
            "server_startup_seconds": startup,
            "results": results,
            "hygiene": hygiene,
        },
        args.output,
    )
    stuck = sum(r["stuck"] for r in results)
    return 1 if stuck or hygiene["hits"] else 0


if __name__ == "__main__":
    sys.exit(main())
