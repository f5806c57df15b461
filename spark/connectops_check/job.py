"""Wiring: a SparkSession suited to the job, and snapshot -> metrics -> verdict.

Why the session settings: the job's DataFrames are modest (partitions x samples rows), so the
default 200 shuffle partitions would mostly schedule empty tasks; locally 8 is plenty, and on
a cluster adaptive query execution coalesces whatever is left. The UI is off because nobody
looks at a run that lasts seconds, and it would take a port inside a driver pod.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from connectops_check import metrics
from connectops_check.frames import snapshot_tables
from connectops_check.serialize import document
from connectops_check.snapshot import ConnectorKind, Scrape, Snapshot
from connectops_check.verdict import Settings, build

APP_NAME = "connectops-check"

# Spark logs at INFO/WARN to stderr from the moment the JVM starts, before ``setLogLevel``
# can run; the verdict goes to stdout, and a job log should show errors only.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / "connectops-check-log4j2.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
        path.write_text(_LOG4J2, encoding="utf-8")
    return path


def spark_session(master: str | None = "local[*]", driver_memory: str | None = None) -> SparkSession:
    """A quiet session; ``master=None`` keeps whatever spark-submit or the operator set.

    The log4j2 file and ``driver_memory`` only take effect when this call launches the JVM
    (local runs, where the driver also executes every task); under spark-submit the driver's
    JVM is already sized and configured by the deployment.
    """
    builder = (
        SparkSession.builder.appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j2_file()}")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master is not None:
        builder = builder.master(master)
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    if master is not None and master.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "8")
    with warnings.catch_warnings():
        # PySpark imports its test helpers while starting, which warn that pandas >= 3 is not
        # fully supported. This job hands Spark Arrow tables, never pandas objects.
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def needs_spark(snapshot: Snapshot) -> bool:
    """A check with nothing to measure never pays for starting a JVM."""
    return (
        snapshot.kind is not ConnectorKind.SOURCE
        and snapshot.not_applicable_reason is None
        and any(s.partitions for s in snapshot.samples)
    )


def run_check(
    snapshot: Snapshot, settings: Settings, spark: SparkSession | None, baseline: list[Scrape] | None = None
) -> dict[str, Any]:
    """The verdict document (its JSON value) for one snapshot; ``spark`` may be None only when
    ``needs_spark`` is False."""
    if not needs_spark(snapshot):
        return document(build(snapshot, None, settings, baseline))
    if spark is None:
        raise ValueError("this snapshot has partitions to measure: a SparkSession is required")
    results = metrics.compute(
        spark,
        snapshot_tables(snapshot),
        window=settings.window,
        top_n=settings.top_n,
        allowed_lag=settings.allowed_lag,
        minimum_complete=settings.minimum_complete,
    )
    return document(build(snapshot, results, settings, baseline))
