"""Kafka Connect's own rules, as both the operator and the check job rely on them.

The sink's consumer group: ``connect-<connector name>`` (Connect's
``SinkUtils.consumerGroupId``), unless the connector overrides ``group.id`` through
``consumer.override.group.id`` (KIP-458; the worker's client override policy decides whether
Connect accepts it, which the operator cannot see, so the override is taken as given).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SINK_GROUP_PREFIX: Final = "connect-"
SINK_GROUP_OVERRIDE: Final = "consumer.override.group.id"

#: the workers' ``offset.flush.timeout.ms`` and ``offset.flush.interval.ms`` when nothing says
#: otherwise (Connect's defaults; REST does not show a worker's settings)
OFFSET_FLUSH_TIMEOUT_MS: Final = 5000
OFFSET_FLUSH_INTERVAL_MS: Final = 60000


def sink_group(connector: str, config: Mapping[str, str]) -> str:
    """The consumer group a sink connector named ``connector`` with ``config`` commits to."""
    return config.get(SINK_GROUP_OVERRIDE) or f"{SINK_GROUP_PREFIX}{connector}"
