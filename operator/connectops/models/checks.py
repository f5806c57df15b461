"""Lag and partition-balance checks: what to run after a change, and where."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from connectops.models.base import CamelModel, StatusModel
from connectops_rules import thresholds


class CheckState(StrEnum):
    """The ``lastCheck.state`` values the operator writes itself; the field also holds the
    SparkApplication's own state while it runs (the spark-operator's, an open set), so it stays
    text."""

    #: waiting for its batch to be launched
    QUEUED = "QUEUED"
    #: its SparkApplication is created, and the spark-operator has not given it a state yet
    PENDING = "PENDING"
    #: no verdict within the check's timeout
    TIMEOUT = "TIMEOUT"
    #: the check could not be submitted (``reasons`` says why)
    NOT_SUBMITTED = "NOT_SUBMITTED"
    #: its SparkApplication disappeared before a verdict
    MISSING = "MISSING"


class CheckSpec(CamelModel):
    """A PySpark check (lag, Burrow-style status, partition balance) after every change.

    A failing check never undoes a change: it reports through the LagHealthy and
    PartitionsBalanced conditions and ``status.lastCheck``.

    An unset threshold is the job's default; names, defaults and bounds come from
    ``connectops_rules.thresholds``, which the job reads too.
    """

    enabled: bool | None = Field(default=None, description="Run checks; unset = the operator's default.")
    max_lag: int | None = Field(default=None, ge=thresholds.MAX_LAG.minimum, description="Total lag limit (records).")
    max_skew: float | None = Field(
        default=None, ge=thresholds.MAX_SKEW.minimum, description="Traffic max/mean limit per topic."
    )
    max_gini: float | None = Field(
        default=None,
        ge=thresholds.MAX_GINI.minimum,
        le=thresholds.MAX_GINI.maximum,
        description="Traffic Gini limit per topic.",
    )
    assignment_threshold: float | None = Field(
        default=None,
        ge=thresholds.ASSIGNMENT_THRESHOLD.minimum,
        description="Partitions per member max/mean limit "
        f"(Cruise Control: {thresholds.ASSIGNMENT_THRESHOLD.default:.2f}).",
    )
    allowed_lag: int | None = Field(
        default=None,
        ge=thresholds.ALLOWED_LAG.minimum,
        description="Burrow allowed-lag: a partition this many records behind is OK.",
    )
    minimum_complete: float | None = Field(
        default=None,
        ge=thresholds.MINIMUM_COMPLETE.minimum,
        le=thresholds.MINIMUM_COMPLETE.maximum,
        description="Burrow minimum-complete: partitions with fewer samples are not judged.",
    )
    max_lag_while_paused: int | None = Field(
        default=None,
        ge=thresholds.MAX_LAG_WHILE_PAUSED.minimum,
        description="While paused or stopped by the spec, the verdict is PAUSED/STOPPED until the lag "
        "exceeds this many records (unset: no limit).",
    )
    max_time_lag_while_paused_seconds: int | None = Field(
        default=None,
        ge=thresholds.MAX_TIME_LAG_WHILE_PAUSED.minimum,
        description="While paused or stopped by the spec, the verdict is PAUSED/STOPPED until the oldest "
        "unread record is this many seconds old (unset: no limit).",
    )
    samples: int = Field(default=6, ge=1, le=120, description="Offset samples taken.")
    interval_seconds: int = Field(default=10, ge=1, le=600, description="Time between samples.")
    timeout_seconds: int = Field(default=1800, ge=60, description="Give up on a check after this long.")


class SparkResources(CamelModel):
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores.")
    memory: str = Field(
        default="1g", max_length=12, pattern=r"^[0-9]{1,7}[kKmMgGtT]?$", description="JVM memory, e.g. 1g."
    )
    instances: int | None = Field(default=None, ge=1, le=100, description="Executors (executor only).")


class SparkCheckDefaults(CamelModel):
    """Where and how the check's SparkApplication runs (kubeflow spark-operator, v1beta2)."""

    image: str | None = Field(
        default=None,
        max_length=512,
        description="Image with the connectops-check job: the operator's, or one its settings allow.",
    )
    service_account: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Driver service account: the operator's, or one its settings allow.",
    )
    spark_version: str | None = Field(default=None, max_length=32, description="Spark version of the image.")
    main_application_file: str | None = Field(
        default=None,
        max_length=1024,
        description="The job's entry file in the image: the operator's, or one its settings allow.",
    )
    ttl_seconds: int | None = Field(default=None, ge=0, description="timeToLiveSeconds of finished checks.")
    driver: SparkResources | None = Field(default=None, description="Driver resources.")
    executor: SparkResources | None = Field(default=None, description="Executor resources.")


class LastCheck(StatusModel):
    application: str = Field(description="SparkApplication name (checks of one Connect cluster share one application).")
    verdict_config_map: str | None = Field(
        default=None,
        description="ConfigMap holding this connector's verdict (unset: <application>-verdict).",
    )
    trigger: str | None = Field(default=None, description="What change the check follows.")
    state: str | None = Field(
        default=None,
        description="QUEUED (waiting for its batch to be launched), the SparkApplication state, or "
        "TIMEOUT, NOT_SUBMITTED, MISSING.",
    )
    started_at: str | None = Field(default=None, description="When it was requested.")
    finished_at: str | None = Field(default=None, description="When the verdict was read.")
    verdict: str | None = Field(default=None, description="HEALTHY, DEGRADED, UNHEALTHY, NOT_APPLICABLE.")
    headline: dict[str, Any] | None = Field(default=None, description="Headline numbers.")
    reasons: list[str] = Field(default_factory=list, description="Reasons (severity code: message).")
    producer: dict[str, Any] | None = Field(
        default=None,
        description="Producer pressure: the diagnosis, the recommended producerOverrides patch, the effect "
        "of the last change (when the ConnectCluster names its workers' metrics).",
    )
