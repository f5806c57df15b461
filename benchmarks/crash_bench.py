"""Benchmark: the crash matrix. The operator is killed with SIGKILL in the middle of offset
resets, started again, and every reset must end in its planned final state.

Two kinds of kill points, on one namespace, one operator, one running FileStreamSourceConnector
(each reset re-reads its 8-line file once, so after k resets the topic holds (k + 1) x 8 records):

* step boundaries: for every step of the REST reset (lock, inspect, stop, backup, reset,
  resume, verify, unlock) the process SIGKILLs itself right after the step acted and before its
  completion was written (``CONNECTOPS_FAILPOINT=<step>:effects:kill``), and, for the two steps
  whose aftermath is most dangerous (connector stopped; offsets gone), right after the
  completion was written (``<step>:done:kill``).
* random points: ``--random N`` kills (default 50) at a seeded random delay after the
  OffsetReset is created, between 0 and the duration of an uninterrupted reset measured first:
  ``kill -9`` from outside, wherever the process happens to be (a REST call in flight, a status
  patch half sent, asyncio between awaits).

After each kill a fresh process is started and the reset must reach ``Succeeded`` with every
step Done, the connector RUNNING in Connect, its Connector Ready, no Lease left, and the file
re-read exactly once (more records: a step repeated its effect; fewer: offsets not reset).

    .venv/bin/python benchmarks/crash_bench.py                 # 10 boundaries + 50 random kills
    .venv/bin/python benchmarks/crash_bench.py --smoke         # 1 boundary + 1 random (CI)
    .venv/bin/python benchmarks/crash_bench.py --random 200 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import kubernetes

from connectops.planning.offset_reset import Step
from harness import Bench, OperatorProcess, bench_env, connector_ready, log, table, wait, write_result
from tests.env.records import topic_record_count

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = [f"line-{i}" for i in range(8)]
REST_STEPS = [s for s in Step if s is not Step.OFFSET_SYNCS]
BOUNDARIES = [f"{s}:effects" for s in REST_STEPS] + [f"{Step.STOP}:done", f"{Step.RESET}:done"]


class Case:
    def __init__(self, kind: str, point: str) -> None:
        self.kind = kind
        self.point = point
        self.killed_in: str | None = None  # the step status showed right after the kill
        self.outcome = "pending"
        self.problems: list[str] = []
        self.seconds = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "point": self.point,
            "killed_in": self.killed_in,
            "outcome": self.outcome,
            "problems": self.problems,
            "seconds": round(self.seconds, 2),
        }


class World:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.ns = bench.namespace("bench-crash")
        bench.cluster(self.ns)
        self.operator: OperatorProcess = bench.operator([self.ns])
        self.http = httpx.Client(base_url=bench.env.connect.url, timeout=10)
        self.name = f"c-{uuid.uuid4().hex[:6]}"
        self.topic = f"crash-{self.name}"
        self.resets = 0
        source = Path(bench.workdir) / f"{self.name}.txt"
        source.write_text("".join(f"{line}\n" for line in LINES))
        self.operator.start()
        bench.create(
            self.ns,
            "connectors",
            "Connector",
            self.name,
            {
                "clusterRef": {"name": "main"},
                "class": SOURCE,
                "config": {"file": str(source), "topic": self.topic},
                "configFrom": bench.connector_secret(self.ns),
            },
        )
        wait(lambda: connector_ready(bench.get(self.ns, "connectors", self.name)), 120, "connector Ready", 0.2)
        self.settled(len(LINES))

    def records(self) -> int:
        return topic_record_count(self.bench.env.kafka.bootstrap, self.topic, idle=1.0)

    def settled(self, expected: int) -> None:
        """Connector running, its file fully copied and its offsets committed: ready for a reset."""
        wait(lambda: self.records() >= expected, 60, f"{expected} records", 0.5)
        wait(lambda: self.http.get(f"/connectors/{self.name}/offsets").json().get("offsets"), 60, "offsets", 0.2)

    def create_reset(self) -> str:
        self.resets += 1
        name = f"r{self.resets}"
        self.bench.create(self.ns, "offsetresets", "OffsetReset", name, {"connectorRef": {"name": self.name}})
        return name

    def status(self, reset: str) -> dict[str, Any]:
        return self.bench.get(self.ns, "offsetresets", reset).get("status") or {}

    def finished(self, reset: str, timeout: float = 240) -> dict[str, Any]:
        result: dict[str, Any] = wait(
            lambda: (s := self.status(reset)).get("phase") in ("Succeeded", "Failed") and s, timeout, reset, 0.1
        )
        return result

    def check_final(self, case: Case, reset: str) -> None:
        """The planned final state, checked against Connect, Kafka and the API server."""
        status = self.finished(reset)
        if status["phase"] != "Succeeded":
            case.problems.append(f"phase {status['phase']}: {status.get('conditions')}")
        not_done = [s["name"] for s in status.get("steps", []) if s["state"] not in ("Done", "Skipped")]
        if not_done:
            case.problems.append(f"steps not done: {not_done}")
        expected = (self.resets + 1) * len(LINES)
        try:
            wait(lambda: self.records() >= expected, 60, f"{expected} records", 0.5)
        except TimeoutError:
            case.problems.append(f"file not re-read: {self.records()} records, expected {expected}")
        time.sleep(1.0)
        got = self.records()
        if got != expected:
            case.problems.append(f"{got} records, expected {expected} (re-read more than once)")
        state = self.http.get(f"/connectors/{self.name}/status").json()["connector"]["state"]
        if state != "RUNNING":
            case.problems.append(f"connector {state}")
        try:
            wait(lambda: connector_ready(self.bench.get(self.ns, "connectors", self.name)), 15, "Ready", 0.2)
        except TimeoutError:
            case.problems.append("Connector not Ready")
        leases = kubernetes.client.CoordinationV1Api(self.bench.api).list_namespaced_lease(self.ns).items
        if leases:
            case.problems.append(f"{len(leases)} lease(s) left")
        case.outcome = "planned final state" if not case.problems else "WRONG"
        self.settled(expected)


def boundary_case(world: World, point: str) -> Case:
    case = Case("boundary", point)
    started = time.perf_counter()
    world.operator.stop()
    world.operator.start(failpoint=f"{point}:kill")
    reset = world.create_reset()
    code = world.operator.wait_exit(240)
    if code != -signal.SIGKILL:
        case.problems.append(f"operator exited {code}, not by SIGKILL at {point}: {world.operator.log_tail(800)}")
    case.killed_in = world.status(reset).get("currentStep")
    world.operator.start()
    world.check_final(case, reset)
    case.seconds = time.perf_counter() - started
    return case


def random_case(world: World, delay: float) -> Case:
    case = Case("random", f"{delay:.2f}s")
    started = time.perf_counter()
    reset = world.create_reset()
    time.sleep(max(0.0, delay - (time.perf_counter() - started)))
    world.operator.kill9()
    status = world.status(reset)
    case.killed_in = status.get("currentStep") or status.get("phase") or "not started"
    world.operator.start()
    world.check_final(case, reset)
    case.seconds = time.perf_counter() - started
    return case


def run(bench: Bench, boundaries: list[str], kills: int, seed: int) -> dict[str, Any]:
    world = World(bench)
    # One uninterrupted reset: the span the random kill points are drawn from.
    started = time.perf_counter()
    warm = Case("uninterrupted", "-")
    reset = world.create_reset()
    world.finished(reset)
    span = time.perf_counter() - started
    world.check_final(warm, reset)
    log(f"uninterrupted reset: {span:.1f} s ({warm.outcome})")

    cases: list[Case] = []
    for point in boundaries:
        cases.append(boundary_case(world, point))
        log(f"boundary {point}: killed in {cases[-1].killed_in}, {cases[-1].outcome} {cases[-1].problems or ''}")
    rng = random.Random(seed)
    for i in range(kills):
        cases.append(random_case(world, rng.uniform(0.0, span)))
        c = cases[-1]
        log(f"random {i + 1}/{kills} at {c.point}: killed in {c.killed_in}, {c.outcome} {c.problems or ''}")

    by_step = collections.Counter(c.killed_in or "?" for c in cases if c.kind == "random")
    return {
        "seed": seed,
        "uninterrupted_seconds": span,
        "uninterrupted_ok": warm.outcome == "planned final state",
        "boundary_kills": len(boundaries),
        "random_kills": kills,
        "planned_final_state": sum(c.outcome == "planned final state" for c in cases),
        "wrong": sum(c.outcome != "planned final state" for c in cases),
        "random_kills_by_step": dict(sorted(by_step.items())),
        "cases": [c.as_dict() for c in cases],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", type=int, default=50, help="random kill points")
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--smoke", action="store_true", help="1 boundary, 1 random kill (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    # the smoke shows the bench works; tests/e2e/test_offset_reset_crash.py kills at every boundary
    boundaries = [f"{Step.RESET}:effects"] if args.smoke else BOUNDARIES
    kills = 1 if args.smoke else args.random

    with bench_env(keep=args.keep) as bench:
        result = run(bench, boundaries, kills, args.seed)
        result["hygiene"] = bench.hygiene()
    write_result("crash", result, args.output)
    rows = [
        ["step boundaries (SIGKILL at failpoint)", result["boundary_kills"],
         sum(1 for c in result["cases"] if c["kind"] == "boundary" and c["outcome"] == "planned final state")],
        [f"random points (seed {result['seed']})", result["random_kills"],
         sum(1 for c in result["cases"] if c["kind"] == "random" and c["outcome"] == "planned final state")],
    ]  # fmt: skip
    print(table(["kill points", "kills", "reset ended in planned final state"], rows))
    print("random kills landed in: " + ", ".join(f"{k} {v}" for k, v in result["random_kills_by_step"].items()))
    ok = result["wrong"] == 0 and result["uninterrupted_ok"] and not result["hygiene"]["hits"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
