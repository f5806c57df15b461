"""The verdict's producer block: producer pressure on a source connector's tasks, the overrides
that would cure it, and what the last overrides change did.

Why a module of its own: ``pressure`` judges one task's figures and stays pure; this turns a
snapshot's scrapes (and the previous check's, as the "before") into the verdict's typed producer
block (``document.Producer``: the JSON the operator reads), and the reasons the verdict counts.
A diagnosis on the pre-3.1 form (offset commits fail) is UNHEALTHY, since every failed commit is
a replay waiting to happen; the 3.1+ form (commits trail) is DEGRADED.

A task whose own series are served but none of its producer's (``worker_metrics.producer_served``)
is flagged ``producerMetricsServed: false`` with an INFO reason: its pressure is not judged, the
operator words the condition and restarts the task (connectops.planning.producer_metrics), and
the block carries its "before" on (``carriedBaseline``) so that the check after the restart still
judges the change against the last check that read the producer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from connectops_check.document import (
    DiagnosisEntry,
    EffectEntry,
    FigureChangeEntry,
    Producer,
    ProducerTask,
    RecommendationEntry,
    ScrapeEntry,
    Severity,
)
from connectops_check.pressure import (
    CommitForm,
    Diagnosis,
    Effect,
    ProducerSettings,
    WorkerSettings,
    compare,
    diagnose,
    summarize,
)
from connectops_check.snapshot import Scrape, Snapshot, figures_from_dict
from connectops_check.worker_metrics import TaskFigures, producer_served

CODE = "PRODUCER_PRESSURE"
NOT_SERVED_CODE = "PRODUCER_METRICS_NOT_SERVED"
#: tasks reported in one verdict (the ConfigMap it travels in holds 1 MiB)
MAX_TASKS = 64

AddReason = Callable[[Severity, str, str], None]


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


def _diagnosis(d: Diagnosis) -> DiagnosisEntry:
    rec = d.recommendation
    return DiagnosisEntry(
        form=d.form,
        message=d.message,
        evidence=list(d.evidence),
        recommendation=None
        if rec is None
        else RecommendationEntry(
            batch_size=rec.batch_size,
            linger_ms=rec.linger_ms,
            capped=rec.capped,
            records_per_batch=rec.records_per_batch,
            reasoning=list(rec.reasoning),
            properties={f"producer.override.{k}": v for k, v in rec.as_properties().items()},
            patch=rec.as_patch(),
            alternatives=list(rec.alternatives),
        ),
    )


def _effect(effect: Effect) -> EffectEntry:
    return EffectEntry(
        verdict=effect.verdict,
        message=effect.message,
        changes=[
            FigureChangeEntry(figure=c.figure, before=c.before, after=c.after, verdict=c.verdict)
            for c in effect.changes
        ],
    )


def _scrapes(scrapes: list[Scrape]) -> list[ScrapeEntry]:
    return [ScrapeEntry(ts_ms=sc.ts_ms, tasks=list(sc.tasks[:MAX_TASKS])) for sc in scrapes]


def producer_block(
    snapshot: Snapshot,
    flush_timeout_ms: int,
    flush_interval_ms: int,
    baseline: list[Scrape],
    add_reason: AddReason,
) -> Producer | None:
    """None when the workers' metrics were not read (no ``--metrics-url``)."""
    if not snapshot.scrapes:
        return None
    worker = WorkerSettings(flush_timeout_ms, flush_interval_ms, snapshot.worker_version)
    block = Producer(
        worker_version=snapshot.worker_version,
        offset_flush_timeout_ms=flush_timeout_ms,
        offset_flush_interval_ms=flush_interval_ms,
        scrapes=len(snapshot.scrapes),
        tasks=[],
        samples=_scrapes(snapshot.scrapes),
    )
    config = {f"producer.override.{k}": v for k, v in snapshot.producer_overrides.items()}
    try:
        producer = ProducerSettings.from_connector_config(config, snapshot.worker_version)
    except ValueError as error:
        add_reason(Severity.INFO, "PRODUCER_NOT_JUDGED", f"producer overrides not understood: {error}")
        return block
    block.producer_settings = producer
    tasks = _by_task(snapshot.scrapes)
    if not tasks:
        add_reason(
            Severity.INFO, "PRODUCER_NOT_MEASURED", "the workers' metrics served no figures for this connector's tasks"
        )
        return block
    before = _by_task(baseline)
    unserved: list[int] = []
    for task, samples in sorted(tasks.items())[:MAX_TASKS]:
        served = producer_served(samples)
        if not served:
            unserved.append(task)
        found = diagnose(samples, worker, producer)
        if found is not None:
            severity = Severity.UNHEALTHY if found.form is CommitForm.COMMITS_FAIL else Severity.DEGRADED
            add_reason(severity, CODE, found.message[:1500])
        effect = compare(before[task], samples) if task in before else None
        if effect is not None:
            add_reason(Severity.INFO, "OVERRIDES_EFFECT", effect.message[:1500])
        block.tasks.append(
            ProducerTask(
                task=task,
                producer_metrics_served=served,
                figures=summarize(samples, worker, producer),
                diagnosis=None if found is None else _diagnosis(found),
                effect=None if effect is None else _effect(effect),
            )
        )
    if unserved:
        add_reason(
            Severity.INFO,
            NOT_SERVED_CODE,
            f"task(s) {unserved}: the workers' metrics serve the task's series but none of its producer's "
            "(connector-producer-<connector>-<task>): its producer MBeans are not registered, so "
            "producer pressure cannot be judged",
        )
        if baseline:
            block.carried_baseline = _scrapes(baseline)
    return block
