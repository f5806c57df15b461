"""Benchmark: the founding case, producer pressure on a Connect source task, before and after
``producer.override.batch.size=327680``, next to the figures of the original incident.

The original incident (a Debezium source, a one-partition topic, a real network): with the
producer's default ``batch.size`` (16384) about 25 records went out per request, one request in
flight, the outstanding-record queue grew to about 60,000 and offset commits failed (the flush did
not drain within ``offset.flush.timeout.ms``); with ``batch.size=327680``, about 500 records per
request, a queue peak of 2,000-3,000, no commit errors, commit max time about 60 ms.

Here (tests/env/pressure.py): KafkaBroker behind a proxy that adds ``--latency-ms`` to every Kafka
request, one Connect 4.3 worker with Kafka 4.3's producer defaults, a FloodSource offering
``--rate`` records/s of ``--record-bytes`` each to a one-partition topic. The defaults are shaped
after the incident: 600-byte records fill a 16384-byte batch with about 25 of them and a
327680-byte one with about 500, and 6000 records/s over a 60 ms round trip keep the tuned producer
busy (about 380 records per request) without saturating it. Phase 1 runs the
connector as created; phase 2 applies the override with ``PUT /connectors/flood/config`` (the task
restarts) and measures again. Figures come from the worker's Prometheus JMX exporter agent with
Strimzi's rules (commit failures from PromReporter's ``/raw``, which those rules do not serve),
committed offsets from the offsets topic, requests on the wire from the proxy. When the change's
restart leaves the task's producer unserved (its stop was cancelled and the old producer's close
unregistered the new one's MBeans), the task is restarted once more, as the operator does, before
phase 2. Since Connect 3.1 (KAFKA-12226) commits cover acknowledged records only, so the pressure
shows as the queue and a committed offset far behind what was polled, not as commit failures.

    .venv/bin/python benchmarks/producer_pressure_bench.py            # 20 s per phase
    .venv/bin/python benchmarks/producer_pressure_bench.py --smoke    # 8 s per phase (CI)
    .venv/bin/python benchmarks/producer_pressure_bench.py --record-bytes 1000 --rate 3000 --latency-ms 40

Results: ``benchmarks/results/producer_pressure.json`` (every sample of both phases).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `harness` next to this file

from harness import ROOT, log, table, write_result

sys.path.insert(0, str(ROOT))
from tests.env.pressure import (
    KAFKA_DEFAULT_BATCH_SIZE,
    SEED_BATCH_SIZE,
    PressureEnv,
)

#: The original incident's figures (no exact measurements exist for the blanks).
SEED: dict[str, dict[str, Any]] = {
    "defaults": {
        "records_per_request": "~25",
        "queue_peak": "~60,000",
        "commit_failures": "yes (flush timeouts)",
        "commit_max_ms": "-",
    },
    "override": {
        "records_per_request": "~500",
        "queue_peak": "2,000-3,000",
        "commit_failures": "0",
        "commit_max_ms": "~60",
    },
}


def run(latency_ms: float, rate: float, record_bytes: int, seconds: float, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="connectops-pressure-"))
    log(f"starting Apache Kafka, latency proxy ({latency_ms} ms) and Connect in {workdir}")
    try:
        # the real JMX exporter; the change's restart can leave the task's producer unserved
        # (served_after_restart, tests/env/pressure.py), and then the task is restarted once more
        # as the operator does before the second phase is measured
        with PressureEnv(workdir, latency_ms=latency_ms) as env:
            log(f"servers up in {env.startup_seconds:.1f} s; metrics at {env.metrics_url}")
            env.create_topic("flood")
            env.create_flood("flood", "flood", rate=rate, record_bytes=record_bytes)
            defaults = env.measure("flood", f"batch.size {KAFKA_DEFAULT_BATCH_SIZE}", starts_before=0, seconds=seconds)
            log(defaults.summary())
            extra = {"producer.override.batch.size": SEED_BATCH_SIZE}
            env.put_config("flood", env.flood_config("flood", rate=rate, record_bytes=record_bytes, extra=extra))
            after = env.served_after_restart("flood", starts_before=1)
            log(f"after the change: {after.describe()}")
            override = env.measure(
                "flood", f"batch.size {SEED_BATCH_SIZE}", starts_before=after.starts, seconds=seconds
            )
            log(override.summary())
            proxy_requests = env.proxy.counts()
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {
        "config": {
            "latency_ms": latency_ms,
            "rate": rate,
            "record_bytes": record_bytes,
            "phase_seconds": seconds,
            "partitions": 1,
            "max_in_flight": 1,
            "linger_ms": 5,
            "offset_flush_interval_ms": 1000,
        },
        "seed": SEED,
        "after_change": {"served": after.served, "restarted": after.restarted, "cancelled_stops": after.cancelled},
        "defaults": defaults.as_dict(),
        "override": override.as_dict(),
        "proxy_requests_by_api_key": proxy_requests,
        "records_per_request_factor": ratio(
            override.last.records_per_request_avg, defaults.last.records_per_request_avg
        ),
        "queue_peak_factor": ratio(defaults.queue_peak(), override.queue_peak()),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 1) if a is not None and b else None


def rows(result: dict[str, Any]) -> list[list[Any]]:
    d, o = result["defaults"], result["override"]

    def fig(phase: dict[str, Any], key: str) -> Any:
        value = phase["last"][key]
        return "-" if value is None else value

    def failures(phase: dict[str, Any]) -> str:
        value = phase["last"]["commit_failure_percentage"]
        return "-" if value is None else f"{value:.1f} %"

    seed_d, seed_o = SEED["defaults"], SEED["override"]
    return [
        [
            "records per request (records-per-request-avg)",
            seed_d["records_per_request"],
            seed_o["records_per_request"],
            fig(d, "records_per_request_avg"),
            fig(o, "records_per_request_avg"),
        ],
        [
            "outstanding queue peak (source-record-active-count max)",
            seed_d["queue_peak"],
            seed_o["queue_peak"],
            d["queue_peak"],
            o["queue_peak"],
        ],
        [
            "offset commit failures (offset-commit-failure-percentage)",
            seed_d["commit_failures"],
            seed_o["commit_failures"],
            failures(d),
            failures(o),
        ],
        [
            "offset commit max time ms (offset-commit-max-time-ms)",
            seed_d["commit_max_ms"],
            seed_o["commit_max_ms"],
            fig(d, "commit_max_ms"),
            fig(o, "commit_max_ms"),
        ],
        ["committed offset lag, records (polled - committed)", "-", "-", d["commit_lag"], o["commit_lag"]],
        ["records acknowledged per s", "-", "-", d["acked_per_second"], o["acked_per_second"]],
        ["batch size avg, bytes", "-", "-", fig(d, "batch_size_avg"), fig(o, "batch_size_avg")],
        [
            "producer buffer available, bytes",
            "-",
            "-",
            fig(d, "buffer_available_bytes"),
            fig(o, "buffer_available_bytes"),
        ],
        ["record queue time avg, ms", "-", "-", fig(d, "record_queue_time_avg"), fig(o, "record_queue_time_avg")],
        ["request latency avg, ms", "-", "-", fig(d, "request_latency_avg"), fig(o, "request_latency_avg")],
        [
            "acked records per Produce request on the wire (proxy)",
            "-",
            "-",
            d["wire_records_per_request"] or "-",
            o["wire_records_per_request"] or "-",
        ],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=60.0, help="added to every Kafka request")
    parser.add_argument("--rate", type=float, default=6000.0, help="records/s the source offers")
    parser.add_argument("--record-bytes", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=20.0, help="measuring time per phase")
    parser.add_argument("--smoke", action="store_true", help="8 s per phase (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the servers' directory")
    args = parser.parse_args(argv)
    # SIGTERM (timeout, pkill) must run the cleanup, or the servers outlive the script
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seconds = 8.0 if args.smoke else args.seconds

    result = run(args.latency_ms, args.rate, args.record_bytes, seconds, args.keep)
    write_result("producer_pressure", result, args.output)
    print(
        table(
            [
                "figure",
                "seed: defaults",
                f"seed: batch.size {SEED_BATCH_SIZE}",
                f"measured: batch.size {KAFKA_DEFAULT_BATCH_SIZE}",
                f"measured: batch.size {SEED_BATCH_SIZE}",
            ],
            rows(result),
        )
    )
    print(
        f"latency {args.latency_ms:g} ms per request, {args.rate:g} records/s of {args.record_bytes} B offered, "
        f"one partition, {seconds:g} s per phase; records per request x{result['records_per_request_factor']}, "
        f"queue peak /{result['queue_peak_factor']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
