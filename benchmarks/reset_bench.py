"""Benchmark: an offset reset driven by the operator vs the same REST calls made directly.

Operator side: an ``OffsetReset`` (action reset, REST strategy) on a running
FileStreamSourceConnector managed by a ``Connector``; timed from the create call to
``status.phase == Succeeded`` as a client watching the object sees it (``kubectl wait`` watches):
the API server sends the status write at once. Until 2026-11-28 the figure was taken by a client
polling every 50 ms, which added half a poll interval and a GET's round trip (10-30 ms here) to
the operator's time on average; that figure is still reported (``operator_seconds_polled``).
The operator's step machine does lock -> inspect -> stop -> backup -> reset (+ read-back) -> resume -> verify ->
unlock, writing status after every step.

Baseline, same worker, same run, alternating with the operator: a second connector of the same
shape, not managed by the operator, reset by hand with httpx: ``PUT /stop``, poll status until
STOPPED with no tasks, ``DELETE /offsets``, ``PUT /resume``, poll until RUNNING with every task
RUNNING. The baseline polls every 50 ms: it sees Connect's own transitions within 50 ms, so
operator - direct (per pair, median) is what the operator adds to the time Connect takes: its
polling slack (50 ms doubling to 100 ms in the stop and resume waits) and its guarantees (lock,
backup, read-back while stopped, a status write per step).

Second figure, on the same connector (the issue's definition, and free of the two connectors'
different timings: a FileStreamSource task's stop and start vary by a few hundred ms from run
to run): the worker's own request log says when each of the operator's calls reached it and how
long it took to answer (no proxy in between: a Python hop costs the operator more than its
overhead), and an observer polls the managed connector's status every 50 ms during the reset.
Connect's own time is (PUT /stop received -> first observed STOPPED with no tasks, or the DELETE's
arrival if that came first: its caller saw STOPPED) + (DELETE
/offsets answered) + (PUT /resume received -> first observed RUNNING with every task RUNNING);
operator overhead = create call -> Succeeded seen, minus that. Target: < 0.15 s, median of the runs (the
Kubernetes API calls the guarantees need cost ~0.1 s on their own: reset_floor_bench.py).

    .venv/bin/python benchmarks/reset_bench.py               # 5 of each, alternating
    .venv/bin/python benchmarks/reset_bench.py --smoke       # 1 of each (CI)
    .venv/bin/python benchmarks/reset_bench.py --repeat 3 --timeline   # where the overhead goes

The worker runs with Connect's defaults, ``fetch.max.wait.ms`` included (500 ms): Apache Kafka
answers a fetch waiting at the log end as soon as a record arrives (tests/adapters/
test_kafka_offsets.py ``test_a_waiting_fetch_is_answered_when_a_record_arrives``), so a REST call
that must see the worker's own write first waits for that write, not for the wait.
``--worker-fetch-wait-ms N`` sets another value for both sides of the comparison.

``--timeline``: while the operator's reset runs, a thread reads the OffsetReset's status and the
connector's Connect status every 10 ms and prints, per run, when each step was first seen
Running and Done and when Connect was first seen STOPPED and RUNNING again, in ms from the
create call (the 10 ms reads slow both sides a little; use it to find the gaps, not as the
figure).
"""

from __future__ import annotations

import argparse
import re
import statistics
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import kubernetes

from harness import GROUP, VERSION, Bench, bench_env, log, summary, table, wait, write_result

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = [f"line-{i}" for i in range(20)]
POLL = 0.05  # the baseline sees Connect's transitions within 50 ms
TARGET_RATIO = 1.15
#: see the module docstring
WORKER_FETCH_WAIT_MS = 0
TARGET_OVERHEAD_SECONDS = 0.15


class Direct:
    """The baseline: Connect's REST API with nothing in between."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def path(self, name: str) -> str:
        return f"/connectors/{quote(name, safe='')}"

    def status(self, name: str) -> dict[str, Any] | None:
        response = self.http.get(self.path(name) + "/status")
        return response.json() if response.status_code == 200 else None

    def offsets(self, name: str) -> list[Any]:
        response = self.http.get(self.path(name) + "/offsets")
        return list(response.json().get("offsets", [])) if response.status_code == 200 else []

    def running(self, name: str) -> bool:
        s = self.status(name)
        return bool(s and running(s["connector"]["state"], [t["state"] for t in s["tasks"]]))

    def stopped(self, name: str) -> bool:
        s = self.status(name)
        return bool(s and s["connector"]["state"] == "STOPPED" and not s["tasks"])

    def reset(self, name: str) -> float:
        started = time.perf_counter()
        self.http.put(self.path(name) + "/stop").raise_for_status()
        wait(lambda: self.stopped(name), 60, f"{name} STOPPED", interval=POLL)
        self.http.delete(self.path(name) + "/offsets").raise_for_status()
        self.http.put(self.path(name) + "/resume").raise_for_status()
        wait(lambda: self.running(name), 60, f"{name} RUNNING", interval=POLL)
        return time.perf_counter() - started


def step_seconds(status: dict[str, Any]) -> dict[str, float]:
    """Per-step wall time from the reset's history ("<step>: <message> (1.23s)")."""
    out: dict[str, float] = {}
    for entry in status.get("history") or []:
        match = re.match(r"^(\w+): .*\((\d+\.\d+)s\)$", entry["message"])
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def running(state: str, tasks: list[str]) -> bool:
    return state == "RUNNING" and bool(tasks) and all(t == "RUNNING" for t in tasks)


class Observer:
    """Polls one connector's Connect status every 50 ms (as the baseline does): each sample is
    (sent, answered, state, task states), wall clock."""

    def __init__(self, direct: Direct, connector: str) -> None:
        self.samples: list[tuple[float, float, str, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(direct, connector), daemon=True)
        self._thread.start()

    def _poll(self, direct: Direct, connector: str) -> None:
        while not self._stop.is_set():
            sent = time.time()
            status = direct.status(connector)
            if status is not None:
                tasks = [t["state"] for t in status["tasks"]]
                self.samples.append((sent, time.time(), status["connector"]["state"], tasks))
            time.sleep(POLL)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def seen_running_since(self, after: float) -> bool:
        return any(sent >= after and running(state, tasks) for sent, _, state, tasks in list(self.samples))

    def first(self, after: float, ok: Any, default: float | None = None) -> float:
        """When the first sample sent after ``after`` that satisfies ``ok`` was answered."""
        for sent, answered, state, tasks in self.samples:
            if sent >= after and ok(state, tasks):
                return answered
        if default is not None:
            return default
        raise RuntimeError(f"no sample after {after} satisfied the check")


#: a REST request as the worker logs it: when the line was written (after the answer) ... the
#: request line ... how long the answer took, in ms
REQUEST_LOG = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \S+ - - \[[^]]+\] "
    r'"(\w+) (\S+) HTTP/[\d.]+" \d+ \S+ "[^"]*" "[^"]*" (\d+) '
)


def connect_requests(log: Path, offset: int) -> list[tuple[str, str, float, float]]:
    """(method, path, started, seconds) of each REST request the worker logged after ``offset``
    (its own request log: when the call reached Connect and how long Connect took, with nothing
    between the operator and the worker)."""
    out = []
    with log.open("rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            if match := REQUEST_LOG.match(line):
                logged = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
                seconds = int(match.group(4)) / 1000
                out.append((match.group(2), match.group(3), logged - seconds, seconds))
    return out


def connect_own_seconds(
    requests: list[tuple[str, str, float, float]], observer: Observer, connector: str
) -> dict[str, float]:
    """Connect's own time in one reset of ``connector`` (see the module docstring)."""
    path = f"/connectors/{quote(connector, safe='')}"

    def call(method: str, suffix: str) -> tuple[float, float]:
        matches = [(at, took) for m, p, at, took in requests if m == method and p == path + suffix]
        if len(matches) != 1:
            raise RuntimeError(f"expected one {method} {path + suffix} in the worker's log, found {len(matches)}")
        return matches[0]

    (stop, _), (delete_at, delete), (resume, _) = (
        call("PUT", "/stop"),
        call("DELETE", "/offsets"),
        call("PUT", "/resume"),
    )
    # The DELETE is sent only once its caller saw STOPPED, so it bounds the moment from above
    # when the stopped spell fell between two of the observer's samples.
    stopped = min(observer.first(stop, lambda state, tasks: state == "STOPPED" and not tasks, delete_at), delete_at)
    running_at = observer.first(resume, running)
    return {"stop": stopped - stop, "delete_offsets": delete, "resume": running_at - resume}


def readback_seconds(requests: list[tuple[str, str, float, float]], connector: str) -> float:
    """How long Connect took to answer the operator's read-back of the offsets while the
    connector is stopped (``GET /offsets`` between the DELETE's answer and the resume): part
    of the overhead by the issue's definition (the baseline makes no such read), reported
    beside it because its time is the worker's (it reads its offsets topic to the end)."""
    path = f"/connectors/{quote(connector, safe='')}"
    (delete_at, delete), (resume_at, _) = (
        next((at, took) for m, p, at, took in requests if (m, p) == ("DELETE", path + "/offsets")),
        next((at, took) for m, p, at, took in requests if (m, p) == ("PUT", path + "/resume")),
    )
    return sum(
        took
        for m, p, at, took in requests
        if (m, p) == ("GET", path + "/offsets") and delete_at + delete <= at + 0.001 and at < resume_at
    )


class Witness:
    """Connect's own side of one reset of ``connector``: the worker's request log from now on
    and a 50 ms observer; :meth:`end` gives the calls it logged and Connect's own seconds."""

    def __init__(self, log: Path, direct: Direct, connector: str) -> None:
        self._log, self._offset, self._connector = log, log.stat().st_size, connector
        self._observer = Observer(direct, connector)

    def end(self) -> tuple[list[tuple[str, str, float, float]], dict[str, float]]:
        # The caller saw RUNNING with its own poll; the observer's last sample may have been sent
        # just before that (CI: "no sample after <resume> satisfied the check"). It runs until one
        # of its own samples, sent from now on, sees RUNNING too, so the first one after the
        # resume exists.
        now = time.time()
        wait(lambda: self._observer.seen_running_since(now), 30, "the observer seeing RUNNING", interval=POLL)
        self._observer.stop()
        time.sleep(0.5)  # the worker's log is written by another process
        requests = connect_requests(self._log, self._offset)
        return requests, connect_own_seconds(requests, self._observer, self._connector)


class Finish:
    """When a client watching the OffsetReset ``name`` first sees it Succeeded or Failed
    (``perf_counter``). The watch opens before the create call: the API server then sends the
    object as it is when the watch starts, and every write after it."""

    def __init__(self, bench: Bench, ns: str, name: str) -> None:
        self.at: float | None = None
        self._watch = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        self._thread = threading.Thread(target=self._run, args=(bench, ns, name), daemon=True)
        self._thread.start()

    def _run(self, bench: Bench, ns: str, name: str) -> None:
        for event in self._watch.stream(
            bench.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            ns,
            "offsetresets",
            field_selector=f"metadata.name={name}",
            timeout_seconds=180,
        ):
            if ((event["object"].get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
                self.at = time.perf_counter()
                self._watch.stop()
                return

    def end(self) -> float:
        self._thread.join(30)
        if self.at is None:
            raise RuntimeError("the watch never saw the reset finish")
        return self.at


class Timeline:
    """First sightings (ms from the create call) of each step state and each Connect state."""

    def __init__(self, bench: Bench, direct: Direct, ns: str, reset: str, connector: str) -> None:
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self.started = time.time()
        self._thread = threading.Thread(target=self._poll, args=(bench, direct, ns, reset, connector), daemon=True)
        self._thread.start()

    def _mark(self, what: str) -> None:
        self.seen.setdefault(what, (time.time() - self.started) * 1000)

    def _poll(self, bench: Bench, direct: Direct, ns: str, reset: str, connector: str) -> None:
        while not self._stop.is_set():
            try:
                status = bench.get(ns, "offsetresets", reset).get("status") or {}
            except Exception:  # not created yet
                status = {}
            for step in status.get("steps") or []:
                self._mark(f"{step.get('name')} {step.get('state')}")
            if status.get("phase"):
                self._mark(f"phase {status['phase']}")
            connect = direct.status(connector)
            if connect:
                tasks = ",".join(t["state"] for t in connect["tasks"])
                self._mark(f"connect {connect['connector']['state']} [{tasks}]")
            time.sleep(0.01)

    def stop(self) -> list[tuple[float, str]]:
        self._stop.set()
        self._thread.join()
        return sorted((ms, what) for what, ms in self.seen.items())


def run(bench: Bench, repeat: int, timeline: bool = False) -> dict[str, Any]:
    ns = bench.namespace("bench-reset")
    bench.cluster(ns)
    worker_log = bench.env.connect.log_path
    operator = bench.operator([ns])
    operator.start()
    direct = Direct(bench.env.connect.url)
    files = Path(bench.workdir)

    managed, manual = f"op-{uuid.uuid4().hex[:6]}", f"direct-{uuid.uuid4().hex[:6]}"
    for name in (managed, manual):
        (files / f"{name}.txt").write_text("".join(f"{line}\n" for line in LINES))
    config = {"connector.class": SOURCE, "tasks.max": "1"}
    bench.create(
        ns,
        "connectors",
        "Connector",
        managed,
        {
            "clusterRef": {"name": "main"},
            "class": SOURCE,
            "config": {"file": str(files / f"{managed}.txt"), "topic": f"t-{managed}"},
            "configFrom": bench.connector_secret(ns),
        },
    )
    direct.http.put(
        direct.path(manual) + "/config", json={**config, "file": str(files / f"{manual}.txt"), "topic": f"t-{manual}"}
    ).raise_for_status()

    operator_runs: list[float] = []
    polled_runs: list[float] = []
    connect_own: list[dict[str, float]] = []
    overheads: list[float] = []
    readbacks: list[float] = []
    direct_overheads: list[float] = []
    baseline_runs: list[float] = []
    steps: list[dict[str, float]] = []
    for i in range(repeat):
        for name in (managed, manual):
            wait(lambda n=name: direct.running(n) and direct.offsets(n), 120, f"{name} running with offsets", 0.2)

        witness = Witness(worker_log, direct, managed)
        finish = Finish(bench, ns, f"r{i}")
        time.sleep(0.2)  # the watch's request reaches the API server before the create does
        probe = Timeline(bench, direct, ns, f"r{i}", managed) if timeline else None
        started = time.perf_counter()
        bench.create(ns, "offsetresets", "OffsetReset", f"r{i}", {"connectorRef": {"name": managed}})
        status = wait(
            lambda i=i: (
                (s := bench.get(ns, "offsetresets", f"r{i}").get("status") or {}).get("phase")
                in ("Succeeded", "Failed")
                and s
            ),
            180,
            f"reset r{i}",
        )
        polled_runs.append(time.perf_counter() - started)
        operator_runs.append(finish.end() - started)
        requests, own = witness.end()
        connect_own.append(own)
        overheads.append(operator_runs[-1] - sum(own.values()))
        readbacks.append(readback_seconds(requests, managed))
        if probe is not None:
            calls = [
                ((at - probe.started) * 1000, f"connect {method} {path} ({took * 1000:.0f} ms)")
                for method, path, at, took in requests
                if managed in path
            ]
            log(f"  r{i} t0 = {probe.started:.4f} (wall clock)")
            for ms, what in sorted(probe.stop() + calls):
                log(f"  r{i} {ms:8.0f} ms  {what}")
        if status["phase"] != "Succeeded":
            raise RuntimeError(f"reset r{i} failed: {status}")
        steps.append(step_seconds(status))

        witness = Witness(worker_log, direct, manual)
        baseline_runs.append(direct.reset(manual))
        _, own_direct = witness.end()
        direct_overheads.append(baseline_runs[-1] - sum(own_direct.values()))
        if probe is not None:
            log("  direct, Connect's own: " + ", ".join(f"{k} {v:.2f} s" for k, v in own_direct.items()))
        log(
            f"run {i + 1}/{repeat}: operator {operator_runs[-1]:.2f} s, direct {baseline_runs[-1]:.2f} s; "
            f"Connect's own {sum(own.values()):.2f} s ("
            + ", ".join(f"{k} {v:.2f}" for k, v in own.items())
            + f"), overhead {overheads[-1]:.3f} s (of which Connect answering the read-back "
            f"{readbacks[-1]:.3f} s); the direct sequence's by the same measure "
            f"{direct_overheads[-1]:.3f} s"
        )

    operator.stop()
    direct.http.delete(direct.path(manual))
    op, base = statistics.median(operator_runs), statistics.median(baseline_runs)
    overhead_vs_direct = statistics.median(a - b for a, b in zip(operator_runs, baseline_runs, strict=True))
    overhead = statistics.median(overheads)
    step_names = sorted({k for s in steps for k in s})
    return {
        "repeat": repeat,
        "operator_seconds": summary(operator_runs) | {"runs": operator_runs},
        "operator_seconds_polled": summary(polled_runs) | {"runs": polled_runs},
        "overhead_seconds_polled_median": statistics.median(
            p - sum(own.values()) for p, own in zip(polled_runs, connect_own, strict=True)
        ),
        "direct_seconds": summary(baseline_runs) | {"runs": baseline_runs},
        "ratio_median": op / base,
        "overhead_vs_direct_seconds_median": overhead_vs_direct,
        # the target's figure: the operator's time minus Connect's own on the same connector
        "overhead_seconds_median": overhead,
        "overhead_seconds_runs": overheads,
        "readback_seconds_runs": readbacks,
        "overhead_less_readback_seconds_median": statistics.median(
            o - r for o, r in zip(overheads, readbacks, strict=True)
        ),
        "connect_own_seconds_runs": connect_own,
        "target_ratio": TARGET_RATIO,
        "target_overhead_seconds": TARGET_OVERHEAD_SECONDS,
        "target_met": op / base <= TARGET_RATIO and overhead < TARGET_OVERHEAD_SECONDS,
        "operator_step_seconds_median": {k: statistics.median([s.get(k, 0.0) for s in steps]) for k in step_names},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one reset of each kind (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the servers' directory")
    parser.add_argument("--timeline", action="store_true", help="print when each step and Connect state was seen")
    parser.add_argument(
        "--worker-fetch-wait-ms",
        type=int,
        default=WORKER_FETCH_WAIT_MS,
        help="the worker's fetch.max.wait.ms for its own topics (0: Connect's default, 500; see the module docstring)",
    )
    args = parser.parse_args(argv)
    repeat = 1 if args.smoke else args.repeat

    wait_ms = args.worker_fetch_wait_ms
    properties = {"fetch.max.wait.ms": str(wait_ms)} if wait_ms else {}
    with bench_env(keep=args.keep, connect_properties=properties) as bench:
        result = run(bench, repeat, args.timeline)
        result["worker_fetch_max_wait_ms"] = wait_ms or 500
        result["hygiene"] = bench.hygiene()
    write_result("reset", result, args.output)
    print(
        table(
            ["path", "median s", "min s", "max s", "ratio"],
            [
                [
                    "operator (OffsetReset)",
                    result["operator_seconds"]["p50"],
                    result["operator_seconds"]["min"],
                    result["operator_seconds"]["max"],
                    result["ratio_median"],
                ],
                [
                    "direct httpx",
                    result["direct_seconds"]["p50"],
                    result["direct_seconds"]["min"],
                    result["direct_seconds"]["max"],
                    1.0,
                ],
            ],
        )
    )
    print(
        f"operator overhead over Connect's own transitions (median of {result['repeat']}): "
        f"{result['overhead_seconds_median']:.3f} s (target < {TARGET_OVERHEAD_SECONDS} s); "
        f"over the direct connector: {result['overhead_vs_direct_seconds_median']:.3f} s; "
        f"less Connect's answer to the read-back: {result['overhead_less_readback_seconds_median']:.3f} s"
    )
    print(
        "operator steps (median s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in result["operator_step_seconds_median"].items())
    )
    return 1 if result["hygiene"]["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
