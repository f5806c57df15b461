"""A task served without its producer (its MBeans unregistered by an earlier producer of the same
client id): the check flags it instead of calling the producer healthy, and hands its "before" on
so the next check still judges the change against the last one that measured the producer."""

from __future__ import annotations

from typing import Any

from connectops_check.producer_check import NOT_SERVED_CODE, baseline_scrapes, producer_block
from connectops_check.serialize import to_json
from connectops_check.snapshot import ConnectorKind, Scrape, Snapshot
from connectops_check.worker_metrics import PRODUCER_BEAN_FIGURES, TaskFigures, parse_worker_metrics, producer_served

TASK_ONLY = """# TYPE kafka_connect_source_task_source_record_poll_rate gauge
kafka_connect_source_task_source_record_poll_rate{connector="flood",task="0",} 2000.0
# TYPE kafka_connect_source_task_source_record_active_count gauge
kafka_connect_source_task_source_record_active_count{connector="flood",task="0",} 150.0
"""
PRODUCER = """# TYPE kafka_producer_buffer_total counter
kafka_producer_buffer_total{clientid="connector-producer-flood-0",} 3.3554432E7
# TYPE kafka_producer_records_per_request_avg gauge
kafka_producer_records_per_request_avg{clientid="connector-producer-flood-0",} NaN
"""


def _figures(**values: float) -> TaskFigures:
    return TaskFigures("flood", 0, **values)


def test_the_producer_bean_figures_are_the_producer_wide_ones() -> None:
    assert "buffer_total_bytes" in PRODUCER_BEAN_FIGURES
    assert "records_per_request_avg" in PRODUCER_BEAN_FIGURES
    # per topic (summed) or the task's own series: not the producer's MBean
    assert "record_send_rate" not in PRODUCER_BEAN_FIGURES
    assert "source_record_active_count" not in PRODUCER_BEAN_FIGURES


def test_served_is_read_from_the_exposition() -> None:
    alone = parse_worker_metrics(TASK_ONLY, "flood")[("flood", 0)]
    assert not producer_served([alone])
    # a producer that has not sent yet: averages NaN, buffer-total-bytes a number from construction
    fresh = parse_worker_metrics(TASK_ONLY + PRODUCER, "flood")[("flood", 0)]
    assert fresh.records_per_request_avg is None
    assert producer_served([fresh])
    # one scrape with it is enough: a series seen is registered
    assert producer_served([alone, fresh])


def _snapshot(*scrapes: Scrape) -> Snapshot:
    return Snapshot(connector="flood", kind=ConnectorKind.SOURCE, worker_version="4.3.1", scrapes=list(scrapes))


def test_the_block_flags_the_task_and_carries_the_baseline_on() -> None:
    reasons: list[tuple[str, str, str]] = []
    before = [Scrape(1_000, [_figures(source_record_active_count=30_000.0, records_per_request_avg=16.0)])]
    now = _snapshot(
        Scrape(10_000, [_figures(source_record_active_count=150.0, source_record_poll_rate=2000.0)]),
        Scrape(12_000, [_figures(source_record_active_count=120.0, source_record_poll_rate=2000.0)]),
    )
    produced = producer_block(now, 5000, 1000, before, lambda *r: reasons.append(r))
    assert produced is not None
    block = to_json(produced)
    (task,) = block["tasks"]
    assert task["producerMetricsServed"] is False
    assert task["diagnosis"] is None
    assert [code for _, code, _ in reasons if code == NOT_SERVED_CODE] == [NOT_SERVED_CODE]
    # the next check compares with what this one had as its "before", not with its own samples
    carried = baseline_scrapes({"producer": block})
    assert [s.ts_ms for s in carried] == [1_000]
    assert carried[0].tasks[0].records_per_request_avg == 16.0


def test_a_served_producer_changes_nothing() -> None:
    reasons: list[Any] = []
    now = _snapshot(Scrape(10_000, [_figures(source_record_active_count=150.0, buffer_total_bytes=33554432.0)]))
    before = [Scrape(1_000, [_figures(source_record_active_count=100.0, buffer_total_bytes=33554432.0)])]
    produced = producer_block(now, 5000, 1000, before, lambda *r: reasons.append(r))
    assert produced is not None
    block = to_json(produced)
    assert block["tasks"][0]["producerMetricsServed"] is True
    assert "carriedBaseline" not in block
    assert NOT_SERVED_CODE not in [code for _, code, _ in reasons]
    assert [s.ts_ms for s in baseline_scrapes({"producer": block})] == [10_000]
