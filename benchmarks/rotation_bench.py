"""Benchmark: what noticing rotated Secrets costs with 1,000 Connectors, the Secret watch on
(``CONNECTOPS_SECRET_ROTATION=true``, the default) and off, side by side on one population.

Population: N Connectors (stopped FileStreamSourceConnectors, as in apply_bench: real connectors
in Connect, no task), each reading its own Secret through ``configFrom`` (N referenced Secrets:
the worst case for the watch), plus U Secrets nobody references, 2 KiB each (what else lives in a
namespace: the watch lists and follows those too, the operator must not keep them).

The same operator is started once per mode on that population (off first, then on) and measured:

* start: seconds until it has reconciled every Connector (its ``connectops_reconciles_total``,
  from ``--metrics-port``), then RSS and peak RSS;
* idle: ``--idle`` seconds (one resync period by default: each mode's window holds one resync of
  every Connector, 10 s after the start-up) in which nothing changes. The API server's own counters (its
  ``/metrics``: ``apiserver_request_total`` by verb and resource, ``apiserver_watch_events_total``
  for Secrets) are read before and after: the requests per second the operator made (nothing else
  calls the API server meanwhile) and the Secret watch events sent. RSS at the end;
* rotation: K Secrets get a new value of the key their Connector reads, and one other Secret a new
  value of a key nobody reads, at once. Seconds until Connect's config holds every new value (GET
  ``/connectors/<name>/config`` straight to the worker), the config PUTs the proxy saw (K: nothing
  for the other key), and the Events: ``SecretRotated`` with the watch, ``DriftCorrected`` (at the
  next resync, 60 s by default) without.

    .venv/bin/python benchmarks/rotation_bench.py                     # N=1000, U=1000, K=10, 60 s resync
    .venv/bin/python benchmarks/rotation_bench.py --smoke             # N=20, U=20, K=3, 10 s resync (CI)
    .venv/bin/python benchmarks/rotation_bench.py --connectors 200 --unreferenced 0 --idle 20
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
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
    table,
    vm_hwm_mib,
    wait,
    write_result,
)

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} ([0-9.e+]+)$")


class ApiServerCounters:
    """The API server's request and watch-event counters, read from its /metrics."""

    def __init__(self, bench: Bench) -> None:
        kube = bench.env.kube
        self.http = httpx.Client(
            base_url=kube.url, verify=str(kube.ca_path), headers={"Authorization": f"Bearer {kube.token}"}, timeout=30
        )

    def read(self) -> Counter[str]:
        """``"<VERB> <resource>"`` -> requests so far, and ``"watch-events <Kind>"`` -> events sent."""
        counts: Counter[str] = Counter()
        response = self.http.get("/metrics")
        response.raise_for_status()
        for line in response.text.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            name, raw_labels, value = match.groups()
            labels = dict(re.findall(r'(\w+)="([^"]*)"', raw_labels))
            if name == "apiserver_request_total" and labels.get("resource"):
                counts[f"{labels['verb']} {labels['resource']}"] += int(float(value))
            elif name == "apiserver_watch_events_total":
                counts[f"watch-events {labels.get('kind', '?')}"] += int(float(value))
        return counts


def spec(name: str, workdir: Path) -> dict[str, Any]:
    return {
        "clusterRef": {"name": "main"},
        "class": SOURCE,
        "state": "stopped",
        "config": {"file": str(workdir / f"{name}.txt"), "topic": f"t-{name}"},
        "configFrom": {"bench.token": {"secretKeyRef": {"name": f"s-{name}", "key": "token"}}},
    }


def config(connect: httpx.Client, name: str) -> dict[str, str]:
    response = connect.get(f"/connectors/{quote(name, safe='')}/config")
    return dict(response.json()) if response.status_code == 200 else {}


def populate(bench: Bench, ns: str, connect: httpx.Client, names: list[str], unreferenced: int) -> float:
    started = time.perf_counter()
    filler = "x" * 2048
    with ThreadPoolExecutor(8) as pool:
        # the canary in every referenced Secret: the hygiene scan looks for it afterwards
        list(pool.map(lambda n: bench.secret(ns, f"s-{n}", {"token": bench.canary, "other": "0"}), names))
        list(pool.map(lambda i: bench.secret(ns, f"unreferenced-{i:04d}", {"blob": filler}), range(unreferenced)))
        list(pool.map(lambda n: bench.create(ns, "connectors", "Connector", n, spec(n, bench.workdir)), names))
    wanted = set(names)
    wait(lambda: wanted <= set(connect.get("/connectors").json()), 120 + len(names), "connectors in Connect", 1.0)

    def all_ready() -> bool:
        ready = {i["metadata"]["name"] for i in bench.items(ns, "connectors") if connector_ready(i)}
        return wanted <= ready

    # every status written: a measured operator must not inherit the creator's unfinished work
    wait(all_ready, 300 + len(names), "every Connector Ready", 2.0)
    return time.perf_counter() - started


def measure(  # noqa: PLR0913 - one measured scenario's fixtures and knobs
    bench: Bench,
    ns: str,
    proxy: FaultProxy,
    connect: httpx.Client,
    counters: ApiServerCounters,
    names: list[str],
    rotate: list[str],
    untouched: str,
    *,
    on: bool,
    idle: float,
    resync: float,
) -> dict[str, Any]:
    mode = "on" if on else "off"
    operator = bench.operator([ns], CONNECTOPS_SECRET_ROTATION=str(on).lower(), CONNECTOPS_RESYNC_SECONDS=str(resync))
    proxy.reset()
    port = free_port()
    started = time.perf_counter()
    operator.start(args=["--metrics-port", str(port)])
    # every Connector reconciled once (its resume), read from the operator's own counter (they
    # are observed through one expanded listing, not a GET per connector)
    wait(lambda: reconciled(port) >= len(names), 600, f"[{mode}] every Connector reconciled", interval=0.5)
    start_seconds = time.perf_counter() - started
    start_rss = rss_mib(operator.pid)
    time.sleep(10)  # the start-up burst's tail out of the idle window
    before = counters.read()
    time.sleep(idle)
    after = counters.read()
    delta = {k: after[k] - before[k] for k in after if after[k] - before[k] > 0}
    idle_rss = rss_mib(operator.pid)
    requests = sum(v for k, v in delta.items() if not k.startswith("watch-events"))

    proxy.reset()
    values = {name: f"rotated-{mode}-{i}-{bench.canary}" for i, name in enumerate(rotate)}
    rotated_at = time.perf_counter()
    for name, value in values.items():
        bench.core.patch_namespaced_secret(f"s-{name}", ns, {"stringData": {"token": value}})
    bench.core.patch_namespaced_secret(f"s-{untouched}", ns, {"stringData": {"other": mode}})
    pending = set(rotate)

    def applied() -> bool:
        for name in list(pending):
            if config(connect, name).get("bench.token") == values[name]:
                pending.discard(name)
        return not pending

    wait(applied, resync * 1.2 + 30, f"[{mode}] rotated values in Connect", interval=0.1)
    rotation_seconds = time.perf_counter() - rotated_at
    time.sleep(2)  # a write that should not happen would land by now (the watch is immediate)
    puts = Counter(
        unquote(r.path.split("/")[2]) for r in proxy.requests if r.method == "PUT" and r.path.endswith("/config")
    )
    events = Counter(
        str(e.reason)
        for e in bench.core.list_namespaced_event(ns).items
        # each mode rotates other Connectors: these Events are this mode's
        if e.reason in ("SecretRotated", "DriftCorrected") and e.involved_object.name in values
    )
    result = {
        "mode": mode,
        "start_seconds": start_seconds,
        "start_rss_mib": start_rss,
        "idle_seconds": idle,
        "idle_api_requests": requests,
        "idle_api_requests_per_second": requests / idle,
        "idle_api_requests_by_verb_resource": dict(sorted(delta.items())),
        "idle_secret_watch_events": delta.get("watch-events Secret", 0),
        "idle_rss_mib": idle_rss,
        "peak_rss_mib": vm_hwm_mib(operator.pid),
        "rotated": len(rotate),
        "rotation_seconds_until_all_in_connect": rotation_seconds,
        "config_puts": sum(puts.values()),
        "config_puts_to_untouched": puts.get(untouched, 0),
        "events": dict(events),
    }
    operator.stop()
    log(
        f"[{mode}] start {start_seconds:.1f} s, idle {result['idle_api_requests_per_second']:.2f} API req/s, "
        f"RSS {idle_rss:.0f} MiB (peak {result['peak_rss_mib']:.0f}), {len(rotate)} rotations in Connect after "
        f"{rotation_seconds:.1f} s, {result['config_puts']} PUTs, events {dict(events)}"
    )
    return result


def run(bench: Bench, connectors: int, unreferenced: int, rotations: int, idle: float, resync: float) -> dict[str, Any]:
    ns = bench.namespace("bench-rotation")
    connect = httpx.Client(base_url=bench.env.connect.url, timeout=30)
    proxy = FaultProxy(bench.env.connect.url).start()
    counters = ApiServerCounters(bench)
    try:
        bench.cluster(ns, rest_url=proxy.url)
        names = [f"rot-{i:04d}" for i in range(connectors)]
        # the population is created by an operator without the watch (not measured)
        creator = bench.operator([ns], CONNECTOPS_SECRET_ROTATION="false")
        creator.start()
        populate_seconds = populate(bench, ns, connect, names, unreferenced)
        creator.stop()
        log(f"{connectors} connectors, {connectors + unreferenced + 2} Secrets, populated in {populate_seconds:.1f} s")
        step = max(len(names) // (2 * rotations + 2), 1)
        off_rotate = names[0 : step * rotations : step][:rotations]
        on_rotate = names[step * rotations + 1 :: step][:rotations]
        untouched = names[-1]
        off = measure(
            bench, ns, proxy, connect, counters, names, off_rotate, untouched, on=False, idle=idle, resync=resync
        )
        on = measure(
            bench, ns, proxy, connect, counters, names, on_rotate, untouched, on=True, idle=idle, resync=resync
        )
        return {
            "connectors": connectors,
            "referenced_secrets": connectors,
            "unreferenced_secrets": unreferenced,
            "resync_seconds": resync,
            "populate_seconds": populate_seconds,
            "off": off,
            "on": on,
        }
    finally:
        proxy.stop()
        connect.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--unreferenced", type=int, default=1000, help="Secrets nobody references (2 KiB each)")
    parser.add_argument("--rotations", type=int, default=10)
    parser.add_argument(
        "--idle",
        type=float,
        help="seconds of the idle window (default: one resync period, so both modes hold one resync)",
    )
    parser.add_argument("--resync", type=float, default=60.0, help="CONNECTOPS_RESYNC_SECONDS (the default: 60)")
    parser.add_argument(
        "--smoke", action="store_true", help="20 Connectors, 20 other Secrets, 3 rotations, 10 s resync (CI)"
    )
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.connectors, args.unreferenced, args.rotations, args.resync = 20, 20, 3, 10.0
    if args.idle is None:
        args.idle = args.resync

    with bench_env(keep=args.keep, standalone_connect=False) as bench:
        result = run(bench, args.connectors, args.unreferenced, args.rotations, args.idle, args.resync)
        result["hygiene"] = bench.hygiene()
    write_result("rotation", result, args.output)
    rows = []
    for mode in ("off", "on"):
        r = result[mode]
        rows.append(
            [
                mode,
                round(r["idle_api_requests_per_second"], 2),
                r["idle_secret_watch_events"],
                round(r["idle_rss_mib"], 1),
                round(r["peak_rss_mib"], 1),
                round(r["rotation_seconds_until_all_in_connect"], 2),
                r["config_puts"],
                r["config_puts_to_untouched"],
                ", ".join(f"{k} {v}" for k, v in sorted(r["events"].items())) or "-",
            ]
        )
    print(
        table(
            [
                "rotation watch",
                "idle API req/s",
                "Secret watch events (idle)",
                "RSS MiB",
                "peak RSS MiB",
                f"{result['on']['rotated']} rotations in Connect after s",
                "config PUTs",
                "PUTs for another key",
                "Events",
            ],
            rows,
        )
    )
    print(
        f"{result['connectors']} Connectors, {result['referenced_secrets']} referenced and "
        f"{result['unreferenced_secrets']} unreferenced Secrets; resync {result['resync_seconds']:.0f} s"
    )
    return 1 if result["hygiene"]["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
