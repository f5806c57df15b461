"""The verdict's producer block: producer pressure on a source connector's tasks, the overrides
that would cure it, and what the last overrides change did.

Why a module of its own: ``pressure`` judges one task's figures and stays pure; this turns a
snapshot's scrapes (and the previous check's, as the "before") into the JSON the operator reads,
and the reasons the verdict counts. A diagnosis on the pre-3.1 form (offset commits fail) is
UNHEALTHY, since every failed commit is a replay waiting to happen; the 3.1+ form (commits
trail) is DEGRADED.

A task whose own series are served but none of its producer's (``worker_metrics.producer_served``)
is flagged ``producerMetricsServed: false`` with an INFO reason: its pressure is not judged, the
operator words the condition and restarts the task (connectops.planning.producer_metrics), and
the block carries its "before" on (``carriedBaseline``) so that the check after the restart still
judges the change against the last check that read the producer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from connectops_check.pressure import (
    CommitForm,
    Diagnosis,
    ProducerSettings,
    WorkerSettings,
    compare,
    diagnose,
    summarize,
)
from connectops_check.snapshot import Scrape, Snapshot, figures_from_dict, figures_to_dict
from connectops_check.worker_metrics import TaskFigures, producer_served

CODE = "PRODUCER_PRESSURE"
NOT_SERVED_CODE = "PRODUCER_METRICS_NOT_SERVED"
#: tasks reported in one verdict (the ConfigMap it travels in holds 1 MiB)
MAX_TASKS = 64

AddReason = Callable[[str, str, str], None]


def baseline_scrapes(previous_verdict: Mapping[str, Any] | None) -> list[Scrape]:
    """The scrapes a previous verdict recorded (its ``producer.samples``): the "before"."""
    producer = (previous_verdict or {}).get("producer")
    if not isinstance(producer, Mapping):
        return []
    scrapes = []
    # a check that could not read some task's producer passed its own "before" on (see
    # producer_block): the effect of a change is judged against the last check that measured it
    carried = producer.get("carriedBaseline")
    for raw in (carried if isinstance(carried, list) else None) or producer.get("samples") or []:
        if isinstance(raw, Mapping):
            scrapes.append(Scrape(int(raw["tsMs"]), [figures_from_dict(t) for t in raw.get("tasks", [])]))
    return scrapes


def _by_task(scrapes: list[Scrape]) -> dict[int, list[TaskFigures]]:
    tasks: dict[int, list[TaskFigures]] = {}
    for scrape in sorted(scrapes, key=lambda s: s.ts_ms):
        for figures in scrape.tasks:
            tasks.setdefault(figures.task, []).append(figures)
    return tasks


def _diagnosis(d: Diagnosis) -> dict[str, Any]:
    rec = d.recommendation
    return {
        "code": "ProducerPressure",
        "form": str(d.form),
        "message": d.message,
        "evidence": list(d.evidence),
        "recommendation": None
        if rec is None
        else {
            "batchSize": rec.batch_size,
            "lingerMs": rec.linger_ms,
            "capped": rec.capped,
            "recordsPerBatch": rec.records_per_batch,
            "reasoning": list(rec.reasoning),
            "properties": {f"producer.override.{k}": v for k, v in rec.as_properties().items()},
            "patch": rec.as_patch(),
            "alternatives": [dataclasses.asdict(a) for a in rec.alternatives],
        },
    }


def producer_block(
    snapshot: Snapshot,
    flush_timeout_ms: int,
    flush_interval_ms: int,
    baseline: list[Scrape],
    add_reason: AddReason,
) -> dict[str, Any] | None:
    """None when the workers' metrics were not read (no ``--metrics-url``)."""
    if not snapshot.scrapes:
        return None
    worker = WorkerSettings(flush_timeout_ms, flush_interval_ms, snapshot.worker_version)
    block: dict[str, Any] = {
        "workerVersion": snapshot.worker_version,
        "offsetFlushTimeoutMs": flush_timeout_ms,
        "offsetFlushIntervalMs": flush_interval_ms,
        "scrapes": len(snapshot.scrapes),
        "tasks": [],
        "samples": [
            {"tsMs": sc.ts_ms, "tasks": [figures_to_dict(t) for t in sc.tasks[:MAX_TASKS]]} for sc in snapshot.scrapes
        ],
    }
    config = {f"producer.override.{k}": v for k, v in snapshot.producer_overrides.items()}
    try:
        producer = ProducerSettings.from_connector_config(config, snapshot.worker_version)
    except ValueError as error:
        add_reason("INFO", "PRODUCER_NOT_JUDGED", f"producer overrides not understood: {error}")
        return block
    block["producerSettings"] = dataclasses.asdict(producer)
    tasks = _by_task(snapshot.scrapes)
    if not tasks:
        add_reason("INFO", "PRODUCER_NOT_MEASURED", "the workers' metrics served no figures for this connector's tasks")
        return block
    before = _by_task(baseline)
    unserved: list[int] = []
    for task, samples in sorted(tasks.items())[:MAX_TASKS]:
        served = producer_served(samples)
        entry: dict[str, Any] = {
            "task": task,
            "producerMetricsServed": served,
            "figures": dataclasses.asdict(summarize(samples, worker, producer)),
            "diagnosis": None,
            "effect": None,
        }
        if not served:
            unserved.append(task)
        found = diagnose(samples, worker, producer)
        if found is not None:
            entry["diagnosis"] = _diagnosis(found)
            severity = "UNHEALTHY" if found.form is CommitForm.COMMITS_FAIL else "DEGRADED"
            add_reason(severity, CODE, found.message[:1500])
        if task in before:
            effect = compare(before[task], samples)
            entry["effect"] = {
                "verdict": str(effect.verdict),
                "message": effect.message,
                "changes": [
                    {"figure": c.figure, "before": c.before, "after": c.after, "verdict": str(c.verdict)}
                    for c in effect.changes
                ],
            }
            add_reason("INFO", "OVERRIDES_EFFECT", effect.message[:1500])
        block["tasks"].append(entry)
    if unserved:
        add_reason(
            "INFO",
            NOT_SERVED_CODE,
            f"task(s) {unserved}: the workers' metrics serve the task's series but none of its producer's "
            "(connector-producer-<connector>-<task>): its producer MBeans are not registered, so "
            "producer pressure cannot be judged",
        )
        if baseline:
            block["carriedBaseline"] = [
                {"tsMs": sc.ts_ms, "tasks": [figures_to_dict(t) for t in sc.tasks[:MAX_TASKS]]} for sc in baseline
            ]
    return block
