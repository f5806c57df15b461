"""Producer pressure on a Kafka Connect source task: diagnosis, a computed ``batch.size``, and the
before/after comparison of an overrides change. Pure: figures in, dataclasses out.

Why one module of ~800 lines: the diagnosis, the recommendation and the comparison share the
figures, the thresholds and the reasoning written below; split, that reasoning would be spread
over three files that only make sense together.

The case this encodes: a Debezium source task whose producer, at the default ``batch.size``
(16384 bytes), sent about 25 records per request to a one-partition topic. Unacknowledged records
piled up (peaks near 60,000) and offset commits failed with "Failed to flush, timed out while
waiting for producer to flush outstanding messages". ``producer.override.batch.size=327680``
(20x) made requests carry about 500 records; the pile-up fell to 2,000-3,000, commits stopped
failing and took at most 60 ms.

Upstream facts relied on (apache/kafka):

* Before Connect 3.0.1, ``WorkerSourceTask.commitOffsets`` waits for *every* outstanding record
  up to ``offset.flush.timeout.ms`` and, on timeout, logs the message above and calls
  ``recordCommitFailure(time.milliseconds() - started, null)`` (3.0.0), which
  ``TaskMetricsGroup.recordCommit`` counts as a *successful* commit, its error being null, that
  lasted at least that timeout: ``offset-commit-failure-percentage`` stays 0 and
  ``offset-commit-max-time-ms`` shows the failure (measured on a real 3.0.0 worker,
  tests/e2e/test_founding_case_pre31.py). KAFKA-12226 (commit f59471ee441a, Connect 3.1, and
  backported to 3.0.1) commits the offsets of the records already acknowledged instead: commits
  succeed, and the committed offsets trail what the task has produced by whatever is still
  outstanding. A commit then fails only when the offsets write itself times out.
* Connect's task producers run with ``max.in.flight.requests.per.connection=1``, ``acks=all``
  and idempotence off unless overridden (``Worker.baseProducerConfigs``): one request in flight,
  so for a one-partition topic each request waits for the previous one's answer.
* Producer defaults (``ProducerConfig``): ``batch.size`` 16384, ``buffer.memory`` 33554432,
  ``max.request.size`` 1048576, ``max.in.flight.requests.per.connection`` 5 (Connect sets 1, see
  above); ``linger.ms`` 5 since Kafka 4.0 and 0 before (KIP-1030; ProducerConfig's ``linger.ms``
  doc at apache/kafka 0106e705f28a: "The default changed from 0 to 5 in Apache Kafka 4.0").
* ``record-size-avg`` averages each batch's largest record (``Sender.updateProduceRequestMetrics``
  records ``batch.maxRecordSize``); ``batch-size-avg`` / ``records-per-request-avg`` is the mean
  size a record takes inside a batch when a request carries one batch (one partition).

Which names are served is ``worker_metrics``' business (Strimzi's example rules, with their gaps:
no ``offset-commit-failure-percentage``, no producer-wide ``record-send-rate``).

``diagnose`` takes a *series* of scrapes of one task rather than one aggregate: the 3.1+ form is
"the active count stays high", which one scrape cannot tell from a burst, and Kafka's ``-max`` and
``-avg`` figures only cover the metrics window (2 x 30 s by default), so a peak is only seen by
the scrape that falls in its window. One scrape is accepted; it can show the pre-3.1 form (a
failed commit) but the 3.1+ form then needs the committed-offset trail.

Conditions (all three must hold), with R the rate to carry, L the request latency, k the
requests in flight, T ``offset.flush.timeout.ms``:

1. Small batches. The batches are full (median ``batch-size-avg`` >= 90% of ``batch.size``:
   a batch closes when the next record does not fit, so a full batch sits within one record of
   the limit, and 10% allows records up to a tenth of it) or a request carries fewer records than
   the rate needs (``records-per-request-avg`` < R x L x h / k, the model below).
2. Pressure. The outstanding queue is more than the producer can deliver within T (peak of
   ``source-record-active-count-max`` and ``source-record-active-count`` > D x T, D the delivered
   rate: the task producer's ``record-send-rate``, else records-per-request x k / L). Before 3.1
   that is literally the failure condition of a commit; after, it is how far the committed
   offsets trail. Or the producer buffer is near exhaustion (lowest ``buffer-available-bytes``
   < 10% of ``buffer-total-bytes``, else of ``buffer.memory``): once it is empty ``send()``
   blocks, and Connect sets ``max.block.ms`` to Long.MAX_VALUE, so the task stalls.
3. Commits suffer. They fail: ``offset-commit-failure-percentage`` > 0, or, since Strimzi's rules
   do not serve it and 3.0.0 does not count a timed-out flush in it, ``offset-commit-max-time-ms``
   >= T (a failed flush lasts at least T). Or, on
   3.1+, they trail: the current active count stays above D x T in every one of at least two
   scrapes, or the committed-offset trail (records produced beyond the last committed offset)
   does in every sample given. Before 3.1 only failures count: there a commit covers everything
   or nothing.

The form follows the worker version: before 3.0.1 "commits fail", from 3.0.1 "commits trail"
(KAFKA-12226 shipped in 3.1.0 and was backported to 3.0.1: connect-runtime 3.0.1 and 3.0.2 have
``SubmittedRecords``, 3.0.0 and 2.8.2 still log "Failed to flush"); with no version, the
evidence decides (failures: "commits fail").

The recommendation (``recommend``): with one request in flight a partition gets one batch per
request latency L, so delivering N records/s needs N x L / k records per batch, and ``batch.size``
= N x L / k x record size, with N = max(R x h, Q / T), Q the outstanding queue peak. R x h: the
rate with headroom h = 2. Q / T: the producer must deliver what is outstanding within T, or
condition 2 holds again. The second term matters because under back-pressure the measured rate is
not the demand: Connect stops polling while ``send()`` blocks, and Kafka's rates divide by at
least (``metrics.num.samples`` - 1) x ``metrics.sample.window.ms`` (30 s by default; Kafka's
``Rate.windowSize``), so a task younger than that reads low. Measured on Connect 4.3 (a
FloodSource offering 3,000 records/s at 40 ms per request, tests/e2e/test_producer_pressure_cr.py):
the check read 873/s; R x h alone gave 81,920, which carries ~1,900/s, and the buffer ran out
again 30 s after the change; Q / T (33,268 outstanding within 5 s) gives 294,912, ~6,700/s. When
the queue is bounded by ``buffer.memory`` (the buffer ran out), Q / T x L x record size is about
``buffer.memory`` x L / T: 32 MiB x 50 ms / 5 s = 335 KiB, the size that cured the seed (320 KiB).
Rounded up to a multiple of 16 KiB, never below the
current ``batch.size``, capped below ``max.request.size`` (a batch must fit in a request; when
capped, raise ``max.request.size`` or add partitions). R is the highest ``source-record-poll-rate``
(what the connector hands over), else ``record-send-rate``; L the median
``request-latency-avg``; the record size ``batch-size-avg`` / ``records-per-request-avg``, else
``record-size-avg`` (which errs high, so errs towards a larger batch). ``linger.ms`` only helps
batches that leave before they fill: when they are not full, the time to fill the new batch at
rate R, at most 100 ms, if longer than the current ``linger.ms``.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from connectops_check.worker_metrics import TaskFigures
from connectops_rules import connect

CODE: Final = "ProducerPressure"

#: Kafka producer defaults (ProducerConfig) and Connect's own for task producers (Worker)
DEFAULT_BATCH_SIZE: Final = 16384
DEFAULT_BUFFER_MEMORY: Final = 33554432
DEFAULT_MAX_REQUEST_SIZE: Final = 1048576
CONNECT_MAX_IN_FLIGHT: Final = 1
LINGER_MS_SINCE_4_0: Final = 5
LINGER_MS_BEFORE_4_0: Final = 0

#: Thresholds; the module docstring says why each has its value.
FULL_BATCH_FRACTION: Final = 0.9
LOW_BUFFER_FRACTION: Final = 0.1
HEADROOM: Final = 2.0
BATCH_STEP: Final = 16 * 1024
LINGER_CAP_MS: Final = 100
MIN_TRAIL_SAMPLES: Final = 2
#: relative change below which ``compare`` calls a figure unchanged: Kafka's windowed averages
#: move by a few percent between scrapes of a steady load
CHANGE_TOLERANCE: Final = 0.1

_OVERRIDE_PREFIX: Final = "producer.override."


def kafka_version(text: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of an Apache Kafka version string such as ``3.0.2`` or ``4.1.0``."""
    if not text:
        return None
    match = re.match(r"\s*v?(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


#: The first release whose source-task commits cover acknowledged records only (see the module docstring).
COMMITS_TRAIL_SINCE: Final = (3, 0, 1)


def kafka_release(text: str | None) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of an Apache Kafka version string (``3.0`` reads as ``3.0.0``)."""
    if not text:
        return None
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def default_linger_ms(worker_version: str | None) -> int:
    """Kafka's ``linger.ms`` default for the worker's Kafka version (unknown: today's, 5)."""
    version = kafka_version(worker_version)
    return LINGER_MS_BEFORE_4_0 if version is not None and version < (4, 0) else LINGER_MS_SINCE_4_0


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """The worker's offset-commit settings (Connect defaults) and its Kafka version."""

    offset_flush_timeout_ms: int = connect.OFFSET_FLUSH_TIMEOUT_MS
    offset_flush_interval_ms: int = connect.OFFSET_FLUSH_INTERVAL_MS
    worker_version: str | None = None

    @property
    def version(self) -> tuple[int, int] | None:
        return kafka_version(self.worker_version)

    @property
    def commits_wait_for_all(self) -> bool | None:
        """Whether an offset commit waits for every outstanding record (before 3.0.1); None: no version."""
        release = kafka_release(self.worker_version)
        return None if release is None else release < COMMITS_TRAIL_SINCE


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """A task producer's effective settings.

    Defaults are what a task producer gets with no override: Kafka's, except the one request in
    flight Connect sets. Worker-level ``producer.*`` settings are not in a connector's config;
    pass them explicitly when the worker sets any.
    """

    batch_size: int = DEFAULT_BATCH_SIZE
    linger_ms: int = LINGER_MS_SINCE_4_0
    buffer_memory: int = DEFAULT_BUFFER_MEMORY
    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    max_in_flight: int = CONNECT_MAX_IN_FLIGHT

    @classmethod
    def from_connector_config(cls, config: Mapping[str, object], worker_version: str | None = None) -> ProducerSettings:
        """Read ``producer.override.*`` from a connector's config; defaults for the rest."""

        def setting(name: str, default: int) -> int:
            raw = config.get(_OVERRIDE_PREFIX + name)
            if raw is None:
                return default
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ValueError(f"{_OVERRIDE_PREFIX}{name}={raw!r} is not an integer") from None
            if value < 0:
                raise ValueError(f"{_OVERRIDE_PREFIX}{name}={value} is negative")
            return value

        return cls(
            batch_size=setting("batch.size", DEFAULT_BATCH_SIZE),
            linger_ms=setting("linger.ms", default_linger_ms(worker_version)),
            buffer_memory=setting("buffer.memory", DEFAULT_BUFFER_MEMORY),
            max_request_size=setting("max.request.size", DEFAULT_MAX_REQUEST_SIZE),
            max_in_flight=max(1, setting("max.in.flight.requests.per.connection", CONNECT_MAX_IN_FLIGHT)),
        )


class CommitForm(StrEnum):
    """How the pressure shows in offset commits."""

    #: before Connect 3.0.1: a commit waits for every outstanding record and times out
    COMMITS_FAIL = "commits fail"
    #: Connect 3.0.1+ (KAFKA-12226): commits cover acknowledged records and fall behind
    COMMITS_TRAIL = "commits trail"


@dataclass(frozen=True, slots=True)
class Alternative:
    """Another lever the seed case considered, and why it is not the first choice."""

    setting: str
    scope: str
    effect: str
    drawback: str


ALTERNATIVES: Final = (
    Alternative(
        setting="max.batch.size / max.queue.size (Debezium connector config)",
        scope="connector",
        effect="Debezium hands Connect smaller batches and holds fewer change events in memory",
        drawback=(
            "capture slows down, so the lag moves to the source database (the binlog/WAL is read "
            "later); the producer's requests stay just as small"
        ),
    ),
    Alternative(
        setting="producer.override.buffer.memory",
        scope="task producer",
        effect="more room for records waiting to be sent before send() blocks",
        drawback=(
            "more memory per task, and it only delays the symptom: delivery capacity is unchanged, "
            "so the queue still grows, just longer"
        ),
    ),
    Alternative(
        setting="offset.flush.timeout.ms (worker config)",
        scope="worker (every connector on it)",
        effect="a commit waits longer before giving up",
        drawback=(
            "changes every connector on the worker and hides the symptom: the outstanding queue and "
            "the records a restart replays stay as large"
        ),
    ),
)


def _fmt(value: float, digits: int = 1) -> str:
    # whole numbers (to the digits shown) and large ones read better without decimals
    if abs(value) >= 10_000 or abs(value - round(value)) < 10**-digits / 2:
        return f"{round(value):,}"
    return f"{value:,.{digits}f}"


@dataclass(frozen=True, slots=True)
class Recommendation:
    """Producer overrides computed from the task's own figures, with the arithmetic shown.

    ``linger_ms`` None: leave ``linger.ms`` as it is. ``capped``: the computed size did not fit
    below ``max.request.size``.
    """

    batch_size: int
    linger_ms: int | None
    current: ProducerSettings
    rate: float
    latency_ms: float
    record_bytes: float
    headroom: float
    records_per_batch: float
    unrounded_batch_bytes: float
    capped: bool
    reasoning: tuple[str, ...]
    alternatives: tuple[Alternative, ...] = ALTERNATIVES
    #: the queue peak the size must deliver within offset.flush.timeout.ms, and that rate (None: not given)
    backlog: float | None = None
    drain_needed: float | None = None

    @property
    def changes(self) -> bool:
        return self.batch_size != self.current.batch_size or self.linger_ms is not None

    def as_properties(self) -> dict[str, str]:
        """Producer properties without the ``producer.override.`` prefix, string values."""
        props = {"batch.size": str(self.batch_size)}
        if self.linger_ms is not None:
            props["linger.ms"] = str(self.linger_ms)
        return props

    def as_patch(self) -> dict[str, dict[str, dict[str, int]]]:
        """A merge patch for the Connector CR.

        The CRD's ``producerOverrides`` holds typed integer fields (``batchSize``, ``lingerMs``)
        and refuses unknown keys, so ``batch.size`` as a key would not be admitted; the operator
        renders these fields as ``producer.override.batch.size`` / ``producer.override.linger.ms``.
        """
        overrides = {"batchSize": self.batch_size}
        if self.linger_ms is not None:
            overrides["lingerMs"] = self.linger_ms
        return {"spec": {"producerOverrides": overrides}}


def recommend(
    *,
    rate: float,
    latency_ms: float,
    record_bytes: float,
    producer: ProducerSettings,
    batches_full: bool,
    headroom: float = HEADROOM,
    rate_source: str = "as given",
    record_source: str = "as given",
    backlog: float | None = None,
    flush_timeout_ms: int | None = None,
) -> Recommendation:
    """``batch.size`` (and ``linger.ms`` when it helps) to carry ``rate`` records/s, and to
    deliver a ``backlog`` of outstanding records within ``flush_timeout_ms`` when both are given.

    ``batch.size`` = max(rate x headroom, backlog / timeout) x latency / in-flight x record size,
    rounded up to 16 KiB, never below the current value, capped below ``max.request.size``.
    """
    if min(rate, latency_ms, record_bytes, headroom) <= 0:
        raise ValueError("rate, latency, record size and headroom must be positive")
    in_flight = producer.max_in_flight
    latency_s = latency_ms / 1000
    carried = rate * headroom
    drain_needed: float | None = None
    if backlog is not None and backlog > 0 and flush_timeout_ms is not None and flush_timeout_ms > 0:
        drain_needed = backlog / (flush_timeout_ms / 1000)
    per_second = max(carried, drain_needed or 0.0)
    records = per_second * latency_s / in_flight
    unrounded = records * record_bytes
    # a float product such as 327680.00000000006 must not cost a whole extra step
    rounded = math.ceil(unrounded / BATCH_STEP - 1e-9) * BATCH_STEP
    cap = (producer.max_request_size - 1) // BATCH_STEP * BATCH_STEP
    capped = rounded > cap
    batch = max(producer.batch_size, min(rounded, cap))

    lines = [
        f"Record size: {_fmt(record_bytes)} B ({record_source}).",
        f"Rate to carry: {_fmt(rate)} records/s ({rate_source}).",
        f"Request latency: {_fmt(latency_ms)} ms (request-latency-avg), {in_flight} request(s) in flight "
        "(max.in.flight.requests.per.connection; Connect sets 1 for task producers).",
        *(
            [
                f"Outstanding records to deliver within offset.flush.timeout.ms ({flush_timeout_ms:,} ms): "
                f"{_fmt(backlog or 0)} (the queue peak), i.e. {_fmt(drain_needed)}/s; "
                + (
                    f"more than the rate x headroom {_fmt(headroom)} = {_fmt(carried)}/s, so the batch is sized "
                    "for it (the polled rate is a floor while send() blocks, the queue is what commits wait for)."
                    if drain_needed > carried
                    else f"no more than the rate x headroom {_fmt(headroom)} = {_fmt(carried)}/s."
                ),
            ]
            if drain_needed is not None and flush_timeout_ms is not None
            else []
        ),
        (
            f"Records one batch must hold: {_fmt(drain_needed)}/s x {_fmt(latency_s, 3)} s / {in_flight} = "
            f"{_fmt(records)}."
            if drain_needed is not None and drain_needed > carried
            else f"Records one batch must hold: {_fmt(rate)}/s x {_fmt(latency_s, 3)} s x headroom "
            f"{_fmt(headroom)} / {in_flight} = {_fmt(records)}."
        ),
        f"batch.size = {_fmt(records)} x {_fmt(record_bytes)} B = {_fmt(unrounded)} B, rounded up to a "
        f"multiple of {BATCH_STEP:,} = {rounded:,} ({rounded // BATCH_STEP} x 16 KiB).",
    ]
    if capped:
        lines.append(
            f"That does not fit below max.request.size ({producer.max_request_size:,} B): capped at "
            f"{min(rounded, cap):,}. To carry the rate, raise max.request.size (and the topic's "
            "max.message.bytes) or add partitions to the topic so the load spreads over more batches."
        )
    if batch == producer.batch_size and rounded <= producer.batch_size:
        lines.append(
            f"The current batch.size ({producer.batch_size:,}) is already that large: batch.size is not "
            "what limits this producer; look at the request latency (broker load, acks, network)."
        )
    elif batch > producer.batch_size:
        lines.append(f"That is {batch / producer.batch_size:.1f} x the current batch.size ({producer.batch_size:,}).")

    linger: int | None = None
    if batches_full:
        lines.append(
            "linger.ms unchanged: batches already fill before they leave, so waiting longer only adds latency."
        )
    else:
        fill_ms = batch / record_bytes / rate * 1000
        wanted = min(LINGER_CAP_MS, math.ceil(fill_ms))
        if wanted > producer.linger_ms:
            linger = wanted
            lines.append(
                f"linger.ms = time to fill the batch at {_fmt(rate)}/s: {batch:,} B / {_fmt(record_bytes)} B / "
                f"{_fmt(rate)}/s = {_fmt(fill_ms)} ms, at most {LINGER_CAP_MS} ms -> {wanted}: batches leave "
                "before they fill, so a short wait lets each request carry more."
            )
        else:
            lines.append(
                f"linger.ms unchanged: {producer.linger_ms} ms already covers the {_fmt(fill_ms)} ms to fill a batch."
            )

    return Recommendation(
        batch_size=batch,
        linger_ms=linger,
        current=producer,
        rate=rate,
        latency_ms=latency_ms,
        record_bytes=record_bytes,
        headroom=headroom,
        records_per_batch=records,
        unrounded_batch_bytes=unrounded,
        capped=capped,
        reasoning=tuple(lines),
        backlog=backlog if drain_needed is not None else None,
        drain_needed=drain_needed,
    )


@dataclass(frozen=True, slots=True)
class PressureFigures:
    """What ``diagnose`` read from the scrapes, reduced as the module docstring says."""

    connector: str
    task: int
    samples: int
    batch_size: int
    max_in_flight: int
    batch_size_avg: float | None
    records_per_request: float | None
    record_bytes: float | None
    record_source: str
    rate: float | None
    rate_source: str
    latency_ms: float | None
    drain_rate: float | None
    drain_budget: float | None
    queue_peak: float | None
    queue_lowest: float | None
    buffer_available: float | None
    buffer_total: float
    commit_failure: float | None
    commit_max_time_ms: float | None


def _values(samples: Iterable[TaskFigures], get: Callable[[TaskFigures], float | None]) -> list[float]:
    return [v for v in map(get, samples) if v is not None]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _check_one_task(samples: Sequence[TaskFigures]) -> tuple[str, int]:
    if not samples:
        raise ValueError("no samples: diagnose needs at least one scrape of the task")
    keys = {(s.connector, s.task) for s in samples}
    if len(keys) > 1:
        raise ValueError(f"samples of several tasks {sorted(keys)}: diagnose one task at a time")
    return next(iter(keys))


def summarize(samples: Sequence[TaskFigures], settings: WorkerSettings, producer: ProducerSettings) -> PressureFigures:
    """Reduce one task's scrapes: medians of averages, the highest rate and peak, the lowest buffer."""
    connector, task = _check_one_task(samples)
    batch_avg = _median(_values(samples, lambda s: s.batch_size_avg))
    per_request = _median(_values(samples, lambda s: s.records_per_request_avg))

    ratios = [
        s.batch_size_avg / s.records_per_request_avg for s in samples if s.batch_size_avg and s.records_per_request_avg
    ]
    record_bytes = _median(ratios)
    record_source = "batch-size-avg / records-per-request-avg"
    if record_bytes is None:
        record_bytes = _median(_values(samples, lambda s: s.record_size_avg))
        record_source = "record-size-avg, the mean of each batch's largest record: errs high"

    polls = _values(samples, lambda s: s.source_record_poll_rate)
    sends = _values(samples, lambda s: s.record_send_rate)
    rate: float | None = max(polls) if polls else (max(sends) if sends else None)
    rate_source = "highest source-record-poll-rate" if polls else "highest record-send-rate"

    latency = _median([v for v in _values(samples, lambda s: s.request_latency_avg_ms) if v > 0])
    send_rate = _median(sends)
    drain: float | None = send_rate if send_rate else None
    if drain is None and per_request and latency:
        drain = per_request * producer.max_in_flight / (latency / 1000)
    budget = drain * settings.offset_flush_timeout_ms / 1000 if drain else None

    peaks = _values(samples, lambda s: s.source_record_active_count_max) + _values(
        samples, lambda s: s.source_record_active_count
    )
    current = _values(samples, lambda s: s.source_record_active_count)
    buffer_avail = _values(samples, lambda s: s.buffer_available_bytes)
    buffer_total = _values(samples, lambda s: s.buffer_total_bytes)
    failures = _values(samples, lambda s: s.offset_commit_failure_percentage)
    commit_max = _values(samples, lambda s: s.offset_commit_max_time_ms)
    return PressureFigures(
        connector=connector,
        task=task,
        samples=len(samples),
        batch_size=producer.batch_size,
        max_in_flight=producer.max_in_flight,
        batch_size_avg=batch_avg,
        records_per_request=per_request,
        record_bytes=record_bytes,
        record_source=record_source,
        rate=rate,
        rate_source=rate_source,
        latency_ms=latency,
        drain_rate=drain,
        drain_budget=budget,
        queue_peak=max(peaks) if peaks else None,
        queue_lowest=min(current) if len(current) == len(samples) else None,
        buffer_available=min(buffer_avail) if buffer_avail else None,
        buffer_total=max(buffer_total) if buffer_total else float(producer.buffer_memory),
        commit_failure=max(failures) if failures else None,
        commit_max_time_ms=max(commit_max) if commit_max else None,
    )


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """``ProducerPressure`` on one task: what is wrong in plain words, the evidence, the fix."""

    connector: str
    task: int
    form: CommitForm
    message: str
    evidence: tuple[str, ...]
    figures: PressureFigures
    recommendation: Recommendation | None
    code: str = CODE


def _small_batches(f: PressureFigures, headroom: float) -> str | None:
    if f.batch_size_avg is not None and f.batch_size_avg >= FULL_BATCH_FRACTION * f.batch_size:
        per_request = f" carrying {_fmt(f.records_per_request)} records per request" if f.records_per_request else ""
        return (
            f"batches are full: {_fmt(f.batch_size_avg)} B on average against batch.size {f.batch_size:,}{per_request}"
        )
    if f.records_per_request is not None and f.rate and f.latency_ms:
        needed = f.rate * f.latency_ms / 1000 * headroom / f.max_in_flight
        if f.records_per_request < needed:
            return (
                f"requests carry {_fmt(f.records_per_request)} records where {_fmt(f.rate)}/s at "
                f"{_fmt(f.latency_ms)} ms per request needs {_fmt(needed)}"
            )
    return None


def _pressure(f: PressureFigures, settings: WorkerSettings) -> list[str]:
    found = []
    if f.queue_peak is not None and f.drain_budget is not None and f.queue_peak > f.drain_budget:
        found.append(
            f"up to {_fmt(f.queue_peak)} records wait for acknowledgement while the producer delivers about "
            f"{_fmt(f.drain_rate or 0)}/s, i.e. {_fmt(f.drain_budget)} within offset.flush.timeout.ms "
            f"({settings.offset_flush_timeout_ms:,} ms); draining them takes about "
            f"{_fmt(f.queue_peak / (f.drain_rate or 1))} s"
        )
    if (
        f.buffer_available is not None
        and f.buffer_total > 0
        and f.buffer_available < LOW_BUFFER_FRACTION * f.buffer_total
    ):
        found.append(
            f"the producer buffer is nearly exhausted: {_fmt(f.buffer_available)} of {_fmt(f.buffer_total)} B "
            f"free ({100 * f.buffer_available / f.buffer_total:.1f}%); when it runs out send() blocks the task"
        )
    return found


def _failures(f: PressureFigures, settings: WorkerSettings) -> str | None:
    if f.commit_failure is not None and f.commit_failure > 0:
        return f"offset commits fail ({100 * f.commit_failure:.0f}% of attempts in the metrics window)"
    if f.commit_max_time_ms is not None and f.commit_max_time_ms >= settings.offset_flush_timeout_ms:
        return (
            f"an offset commit took {_fmt(f.commit_max_time_ms)} ms, at least offset.flush.timeout.ms "
            f"({settings.offset_flush_timeout_ms:,} ms): it timed out"
        )
    return None


def _trailing(
    samples: Sequence[TaskFigures], f: PressureFigures, trail: Sequence[float] | None, settings: WorkerSettings
) -> str | None:
    budget = f.drain_budget
    if budget is None:
        return None
    if trail and all(t > budget for t in trail):
        return (
            f"committed source offsets trail the produced records by at least {_fmt(min(trail))} records "
            f"in every sample, more than {_fmt(budget)} deliverable within offset.flush.timeout.ms"
        )
    if len(samples) >= MIN_TRAIL_SAMPLES and f.queue_lowest is not None and f.queue_lowest > budget:
        seconds = f.queue_lowest / (f.drain_rate or 1)
        beyond = (
            f", longer than offset.flush.interval.ms ({settings.offset_flush_interval_ms:,} ms)"
            if seconds * 1000 > settings.offset_flush_interval_ms
            else ""
        )
        return (
            f"the outstanding queue never fell below {_fmt(f.queue_lowest)} records in {f.samples} scrapes, "
            f"so each commit leaves about {_fmt(seconds)} s of produced records uncommitted{beyond}"
        )
    return None


def diagnose(
    before: Sequence[TaskFigures],
    settings: WorkerSettings,
    producer: ProducerSettings,
    trail: Sequence[float] | None = None,
    *,
    headroom: float = HEADROOM,
) -> Diagnosis | None:
    """``ProducerPressure`` when the three conditions of the module docstring hold, else None.

    ``before``: scrapes of one task over time (oldest first). ``trail``: optional committed-offset
    trail per sample, in records produced beyond the last committed source offset.
    """
    f = summarize(before, settings, producer)
    small = _small_batches(f, headroom)
    pressure = _pressure(f, settings)
    if small is None or not pressure:
        return None
    failing = _failures(f, settings)
    trailing = _trailing(before, f, trail, settings)
    waits = settings.commits_wait_for_all
    if waits:
        form = CommitForm.COMMITS_FAIL
        commits = [failing] if failing else []
    else:
        form = CommitForm.COMMITS_FAIL if waits is None and failing else CommitForm.COMMITS_TRAIL
        commits = [e for e in (trailing, failing) if e]
    if not commits:
        return None

    recommendation = None
    missing = [
        name
        for name, value in (
            ("a record size", f.record_bytes),
            ("a rate", f.rate),
            ("request-latency-avg", f.latency_ms),
        )
        if not value
    ]
    if f.rate and f.latency_ms and f.record_bytes:
        recommendation = recommend(
            rate=f.rate,
            latency_ms=f.latency_ms,
            record_bytes=f.record_bytes,
            producer=producer,
            batches_full=f.batch_size_avg is not None and f.batch_size_avg >= FULL_BATCH_FRACTION * f.batch_size,
            headroom=headroom,
            rate_source=f.rate_source,
            record_source=f.record_source,
            backlog=f.queue_peak,
            flush_timeout_ms=settings.offset_flush_timeout_ms,
        )
    evidence = (small, *pressure, *commits)
    return Diagnosis(
        connector=f.connector,
        task=f.task,
        form=form,
        message=_message(f, settings, form, evidence, recommendation, missing),
        evidence=evidence,
        figures=f,
        recommendation=recommendation,
    )


def _message(
    f: PressureFigures,
    settings: WorkerSettings,
    form: CommitForm,
    evidence: tuple[str, ...],
    recommendation: Recommendation | None,
    missing: list[str],
) -> str:
    who = f"Connector {f.connector!r} task {f.task}"
    version = settings.worker_version or "an unknown version"
    if form is CommitForm.COMMITS_FAIL:
        head = (
            f"{who}: its Kafka producer cannot deliver records as fast as the connector produces them, "
            f"so offset commits fail. On Kafka Connect {version} a commit waits for every outstanding "
            "record and gives up after offset.flush.timeout.ms ('Failed to flush, timed out while waiting "
            "for producer to flush outstanding messages')."
        )
    else:
        head = (
            f"{who}: its Kafka producer cannot deliver records as fast as the connector produces them, "
            f"so committed source offsets trail what the task has produced. On Kafka Connect {version} "
            "(3.0.1 and later, KAFKA-12226) a commit covers only acknowledged records: commits succeed, "
            "but a restart replays everything still outstanding."
        )
    body = " Evidence: " + "; ".join(evidence) + "."
    if recommendation is not None:
        linger = f" and linger.ms to {recommendation.linger_ms}" if recommendation.linger_ms is not None else ""
        if recommendation.batch_size > f.batch_size:
            fix = (
                f" Fix: raise producer.override.batch.size from {f.batch_size:,} to {recommendation.batch_size:,}"
                f"{linger} so each request carries about "
                f"{_fmt(recommendation.batch_size / recommendation.record_bytes)} records."
            )
        else:
            fix = f" batch.size {f.batch_size:,} is already large enough{linger}; see the recommendation's reasoning."
        if recommendation.capped:
            fix += " The size needed does not fit below max.request.size: raise it or add partitions."
    else:
        fix = f" No batch.size computed: the scrapes lack {', '.join(missing)}."
    return head + body + fix


# --- before / after ----------------------------------------------------------------------------


class Verdict(StrEnum):
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    WORSE = "worse"


@dataclass(frozen=True, slots=True)
class FigureChange:
    """One figure before and after, and whether that is better for the task."""

    figure: str
    before: float
    after: float
    verdict: Verdict
    message: str


@dataclass(frozen=True, slots=True)
class Effect:
    """What an overrides change did, per figure and overall (any worse figure makes it worse)."""

    changes: tuple[FigureChange, ...]
    verdict: Verdict
    message: str
    not_compared: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class _Figure:
    name: str
    unit: str
    higher_is_better: bool
    reduce: Callable[[Sequence[TaskFigures]], float | None]
    #: whether the figure decides the overall verdict: a commit taking 60 ms instead of 50 ms,
    #: far below offset.flush.timeout.ms, is reported but does not make a cure "worse"
    decides: bool = True


def _reduce(
    get: Callable[[TaskFigures], float | None], how: Callable[[list[float]], float]
) -> Callable[[Sequence[TaskFigures]], float | None]:
    def reduced(samples: Sequence[TaskFigures]) -> float | None:
        values = _values(samples, get)
        return how(values) if values else None

    return reduced


def _queue_peak(s: TaskFigures) -> float | None:
    values = [v for v in (s.source_record_active_count_max, s.source_record_active_count) if v is not None]
    return max(values) if values else None


_COMPARED: Final = (
    _Figure("records per request", "", True, _reduce(lambda s: s.records_per_request_avg, statistics.mean)),
    _Figure("outstanding queue peak", " records", False, _reduce(_queue_peak, max)),
    _Figure("lowest free producer buffer", " B", True, _reduce(lambda s: s.buffer_available_bytes, min)),
    _Figure(
        "offset commit failures",
        "",
        False,
        _reduce(lambda s: s.offset_commit_failure_percentage, max),
    ),
    _Figure("longest offset commit", " ms", False, _reduce(lambda s: s.offset_commit_max_time_ms, max), decides=False),
)


def _verdict(before: float, after: float, higher_is_better: bool) -> Verdict:
    scale = max(abs(before), abs(after))
    if scale == 0 or abs(after - before) <= CHANGE_TOLERANCE * scale:
        return Verdict.UNCHANGED
    better = after > before if higher_is_better else after < before
    return Verdict.IMPROVED if better else Verdict.WORSE


def _change_text(figure: _Figure, before: float, after: float, verdict: Verdict) -> str:
    if figure.name == "offset commit failures":
        b, a = f"{100 * before:.0f}%", f"{100 * after:.0f}%"
    else:
        b, a = _fmt(before) + figure.unit, _fmt(after) + figure.unit
    ratio = ""
    if before > 0 and after > 0 and verdict is not Verdict.UNCHANGED:
        ratio = f" ({after / before:.1f}x)" if after > before else f" ({100 * (1 - after / before):.0f}% less)"
    return f"{figure.name} {verdict}: {b} -> {a}{ratio}"


def compare(before: Sequence[TaskFigures], after: Sequence[TaskFigures]) -> Effect:
    """The same task's figures before and after an overrides change, judged figure by figure."""
    key_before = _check_one_task(before)
    key_after = _check_one_task(after)
    if key_before != key_after:
        raise ValueError(f"before is {key_before}, after is {key_after}: compare one task with itself")
    changes = []
    missing = []
    for figure in _COMPARED:
        b, a = figure.reduce(before), figure.reduce(after)
        if b is None or a is None:
            missing.append(figure.name)
            continue
        verdict = _verdict(b, a, figure.higher_is_better)
        changes.append(FigureChange(figure.name, b, a, verdict, _change_text(figure, b, a, verdict)))
    deciding = {f.name for f in _COMPARED if f.decides}
    verdicts = {c.verdict for c in changes if c.figure in deciding} or {c.verdict for c in changes}
    if Verdict.WORSE in verdicts:
        overall = Verdict.WORSE
    elif Verdict.IMPROVED in verdicts:
        overall = Verdict.IMPROVED
    else:
        overall = Verdict.UNCHANGED
    connector, task = key_before
    summary = "; ".join(c.message for c in changes) or "no figure served on both sides"
    unread = f" Not compared (not served): {', '.join(missing)}." if missing else ""
    message = f"Connector {connector!r} task {task}: {overall} after the change. {summary}.{unread}"
    return Effect(changes=tuple(changes), verdict=overall, message=message, not_compared=tuple(missing))
