"""Pydantic specs and statuses: the single source of the CRD schemas in ``crds/``."""

from connectops.models.base import API_VERSION, GROUP, VERSION, Condition
from connectops.models.connect_cluster import ConnectClusterSpec, ConnectClusterStatus
from connectops.models.connector import ConnectorSpec, ConnectorStatus, DesiredState

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Condition",
    "ConnectClusterSpec",
    "ConnectClusterStatus",
    "ConnectorSpec",
    "ConnectorStatus",
    "DesiredState",
]
