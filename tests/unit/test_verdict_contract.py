"""The operator reads what the job writes: verdicts built by the job (typed, serialized by its one
serializer, through JSON text as in the ConfigMap) and read by the operator's planning.

The job's typed verdict is the reference: each condition the operator derives is compared with
what the typed verdict holds (its reasons, headline, producer block). A key renamed on either
side, or a part the serializer stops writing, fails here. The lag and balance figures come from
the pandas reference engine (no JVM); the Spark engine is held to it by tests/spark.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from connectops.planning import producer_metrics
from connectops.planning.checks import (
    BALANCE_CODES,
    INTENT_VERDICTS,
    LAG_CODES,
    conditions_for,
    producer_summary,
    summarize_reasons,
)
from connectops_check import reference
from connectops_check.document import Level, Severity, Verdict
from connectops_check.frames import snapshot_tables
from connectops_check.serialize import to_json
from connectops_check.snapshot import ConnectorKind, Scrape, Snapshot, TaskInfo
from connectops_check.synthetic import random_snapshot
from connectops_check.verdict import Settings, build
from connectops_check.worker_metrics import TaskFigures
from tests.spark.check_helpers import History, member, snapshot


def as_configmap(verdict: Verdict) -> dict[str, Any]:
    """The document as the operator gets it: JSON text in the ConfigMap, parsed."""
    parsed = json.loads(json.dumps(to_json(verdict), indent=2))
    assert isinstance(parsed, dict)
    return parsed


def measured(snap: Snapshot, settings: Settings) -> Verdict:
    results = reference.compute(snapshot_tables(snap), window=settings.window, top_n=settings.top_n)
    return build(snap, results, settings)


def expected_lag(verdict: Verdict) -> tuple[bool | None, str]:
    bad = [r.code for r in verdict.reasons if r.severity is not Severity.INFO and r.code in LAG_CODES]
    if verdict.verdict is Level.NOT_APPLICABLE or verdict.lag is None:
        return (None, "NotApplicable")
    if bad:
        return (False, bad[0])
    return (True, INTENT_VERDICTS.get(verdict.verdict, "LagOK"))


def expected_balance(verdict: Verdict) -> tuple[bool | None, str]:
    if verdict.balance is None:
        return (None, "NotApplicable")
    bad = [r.code for r in verdict.reasons if r.severity is not Severity.INFO and r.code in BALANCE_CODES]
    return (False, bad[0]) if bad else (True, "Balanced")


def hot_and_cold() -> Snapshot:
    """Two members, one holding the busy partitions and a paused consumer's lag."""
    histories = [
        History("t", 0, [0, 400, 800, 1200], [0, 0, 0, 0]),
        History("t", 1, [0, 10, 20, 30], [0, 10, 20, 30]),
        History("t", 2, [0, 10, 20, 30], [0, 10, 20, 30]),
        History("t", 3, [0, 10, 20, 30], [0, 10, 20, 30]),
    ]
    members = [member(0, ("t", 0)), member(1, ("t", 1), ("t", 2), ("t", 3))]
    tasks = [TaskInfo(0, "w:8083", "RUNNING"), TaskInfo(1, "w:8083", "RUNNING")]
    return snapshot(histories, members=members, tasks=tasks)


CASES = [
    ("random sink", lambda: random_snapshot(60, samples=12, seed=3), Settings()),
    (
        "random sink, paused on purpose",
        lambda: random_snapshot(40, samples=12, seed=5),
        Settings(desired_state="paused"),
    ),
    ("skewed and unbalanced", hot_and_cold, Settings(max_lag=100, min_traffic=10)),
    ("after a rewinding reset", hot_and_cold, Settings(after_reset="toEarliest", min_traffic=10)),
    ("ownership unknown", lambda: snapshot([History("t", 0, [0, 5, 9], [0, 5, 9])]), Settings()),
]


@pytest.mark.parametrize(("name", "make", "settings"), CASES, ids=[c[0] for c in CASES])
def test_lag_and_balance_conditions_read_the_jobs_verdict(name: str, make: Any, settings: Settings) -> None:
    verdict = measured(make(), settings)
    doc = as_configmap(verdict)
    conditions = conditions_for("COMPLETED", doc)
    assert conditions.lag[:2] == expected_lag(verdict), name
    assert conditions.balance[:2] == expected_balance(verdict), name
    if verdict.lag is None:
        assert doc["headline"] == {}
    else:
        assert doc["headline"]["totalLag"] == verdict.lag.total
    assert summarize_reasons(doc, limit=100) == [f"{r.severity} {r.code}: {r.message}"[:300] for r in verdict.reasons]
    assert conditions.producer is None  # no workers' metrics read


def figures(connector: str, task: int, **values: float) -> TaskFigures:
    return TaskFigures(connector, task, **values)


#: the seed case: full 16 KiB batches of ~25 records, tens of thousands of records outstanding
PRESSURE = {
    "batch_size_avg": 16290.0,
    "records_per_request_avg": 25.1,
    "record_size_avg": 712.0,
    "request_latency_avg_ms": 98.0,
    "source_record_poll_rate": 2520.0,
    "record_send_rate": 256.0,
    "offset_commit_max_time_ms": 5004.0,
    "buffer_available_bytes": 1_200_000.0,
    "buffer_total_bytes": 33554432.0,
}


def pressured(connector: str, t0: int) -> list[Scrape]:
    return [
        Scrape(
            t0 + 1000 * i,
            [
                figures(connector, 0, **PRESSURE, source_record_active_count=n, source_record_active_count_max=60000.0),
                # task 1: its own series only, none of its producer's
                figures(connector, 1, source_record_active_count=10.0, source_record_poll_rate=5.0),
            ],
        )
        for i, n in enumerate((40000.0, 55000.0, 58000.0))
    ]


@pytest.mark.parametrize("version", ["3.0.0", "4.1.0"])
def test_producer_condition_and_summary_read_the_jobs_producer_block(version: str) -> None:
    snap = Snapshot(
        connector="cdc", kind=ConnectorKind.SOURCE, worker_version=version, scrapes=pressured("cdc", 50_000)
    )
    verdict = build(snap, None, Settings(), baseline=pressured("cdc", 1_000))
    doc = as_configmap(verdict)
    block = verdict.producer
    assert block is not None
    diagnosed = [t for t in block.tasks if t.diagnosis is not None]
    assert [t.task for t in diagnosed] == [0]
    diagnosis = diagnosed[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.recommendation is not None

    conditions = conditions_for("COMPLETED", doc)
    assert conditions.producer == (False, "ProducerPressure", diagnosis.message[:1500])
    assert conditions.unserved_producer_tasks == producer_metrics.unserved_tasks(doc) == (1,)
    assert conditions.lag[:2] == (None, "NotApplicable")
    summary = producer_summary(doc)
    assert summary is not None
    assert summary["task"] == 0
    assert summary["recommendedPatch"] == diagnosis.recommendation.patch
    assert summary["recommendedProperties"] == diagnosis.recommendation.properties
    effect = diagnosed[0].effect
    assert effect is not None
    assert summary["effect"] == effect.message[:1500]
    # the task whose producer was not read passed its "before" on for the next check
    assert block.carried_baseline is not None
    assert "carriedBaseline" in doc["producer"]
