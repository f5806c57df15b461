"""A local SparkSession shared by every Spark test (one JVM per test session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from connectops_check.job import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]")
    try:
        yield session
    finally:
        session.stop()
