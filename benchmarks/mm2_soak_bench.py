"""Benchmark: MirrorMaker 2's loss detection on a healthy flow for 10 minutes, with the operator at
its production resync (60 s): no false alarm.

The healthy part of tests/e2e/test_mm2_soak.py (which CI runs for 3 minutes), for longer: a
second Apache Kafka broker as the source cluster ``a``, the environment's broker as ``b``, the
environment's Connect worker running real MirrorMaker 2 (connect-mirror) with the three
connectors managed by Connector objects (tests/e2e/mm2_fixtures.py's ``start_flow``), a
producer writing steadily on ``a``, MM2's source task restarted every ``--every`` seconds (a task
restart, a connector restart with its tasks, a pause and resume, a stop and resume through
Connect's REST API, and the operator's ``connectops.io/restart`` verb, in turn), and the
operator's word sampled every 2 s: its MirrorComplete condition, status.mirrorLoss, its loss
Warning Events and its ``connectops_connector_mirror_records_lost`` gauge (from its
``--metrics-port``). Any "lost" from any of them is a false alarm. At the end every record the
broker acknowledged to the producer is looked for on ``b`` by content (MM2 is at-least-once:
duplicates after restarts are counted apart).

    .venv/bin/python benchmarks/mm2_soak_bench.py                  # 10 minutes (~12 with set-up)
    .venv/bin/python benchmarks/mm2_soak_bench.py --minutes 30 --every 20
    .venv/bin/python benchmarks/mm2_soak_bench.py --smoke          # 1.5 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import httpx
from kubernetes.client.exceptions import ApiException

from harness import bench_env, free_port, log, wait, write_result
from tests.e2e.conftest import K8s
from tests.e2e.mm2_fixtures import ROLES, start_flow
from tests.e2e.test_mm2_soak import KINDS, gauge, soak
from tests.env.servers import KafkaBroker

#: the harness's fast retries unset again (an empty value is the setting's default): the
#: operator runs as installed, resync 60 s (the harness's own value, the default)
PRODUCTION = {"CONNECTOPS_RETRY_SECONDS": "", "CONNECTOPS_RETRY_MAX_SECONDS": "", "CONNECTOPS_RESYNC_SECONDS": ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="the healthy run's length")
    parser.add_argument("--every", type=float, default=25.0, help="seconds between two restarts of MM2's task")
    parser.add_argument("--rate", type=float, default=20.0, help="records a second produced on the source")
    parser.add_argument("--smoke", action="store_true", help="1.5 minutes")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    seconds = 90.0 if args.smoke else args.minutes * 60
    with bench_env() as bench:
        source = KafkaBroker(bench.workdir / "servers", name="mm2-cluster-a")
        source.start()
        try:
            worker = bench.env.connect
            plugins = {p["class"] for p in httpx.get(f"{worker.url}/connector-plugins", timeout=30).json()}
            assert set(ROLES.values()) <= plugins, plugins
            ns = bench.namespace("soak")
            k8s = K8s(bench.api, ns)
            operator = bench.operator([ns], **PRODUCTION)
            port = free_port()
            operator.start(args=["--metrics-port", str(port)])
            flow = start_flow(k8s, source, bench.env.kafka, worker)
            log(f"flow {flow.topic} mirrored; soaking {seconds:.0f} s, a restart every {args.every:.0f} s")
            run = soak(k8s, flow, port, seconds, args.every, args.rate)
            result = run.summary()
            name = flow.names["source"]
            final = k8s.condition("connectors", name, "MirrorComplete") or {}
            result.update(
                {
                    "smoke": args.smoke,
                    "operator_resync_seconds": 60,
                    "restart_every_seconds": args.every,
                    "rate_per_second": args.rate,
                    "restart_kinds_cycled": list(KINDS),
                    "final_condition": {k: final.get(k) for k in ("status", "reason", "message")},
                    "final_gauge": gauge(port, ns, name),
                    "lost_by_partition": run.lost,
                    "operator_alive": operator.alive(),
                }
            )
            log(f"result: {result}")
            write_result("mm2_soak", result, args.output)
            for connector in flow.names.values():
                with contextlib.suppress(ApiException):
                    k8s.delete("connectors", connector)
            wait(lambda: not any(k8s.exists("connectors", c) for c in flow.names.values()), 90, "Connectors gone", 1)
            time.sleep(1)
        finally:
            source.stop()
    ok = result["false_alarms"] == 0 and result["records_lost"] == 0 and result["operator_alive"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
