"""ConnectCluster reconciler: is the worker group reachable, which version, what can it do."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from connectops.adapters.connect_rest import (
    ConnectAddressRefused,
    ConnectError,
    ConnectResponseTooLarge,
    NotKafkaConnect,
    WorkerHealth,
)
from connectops.adapters.kube import KubeError
from connectops.errors import SpecInvalid, WorkerStarting
from connectops.models.checks import SparkCheckDefaults
from connectops.models.connect_cluster import ConnectClusterStatus, WorkerHealthStatus
from connectops.planning.checks import not_allowed
from connectops.planning.secrets import RotationBook, cluster_rotation_message, cluster_secret_keys
from connectops.reconcilers.checks import check_defaults, check_policy
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.common import Conditions, EmitEvent, Outcome
from connectops.settings import Settings


class ConnectClusterReconciler:
    def __init__(self, clusters: ClusterRegistry, settings: Settings, rotations: RotationBook | None = None) -> None:
        self._clusters = clusters
        self._rotations = rotations or RotationBook(0.0)
        self._settings = settings
        self._check_defaults = check_defaults(settings)

    async def reconcile(
        self,
        namespace: str,
        name: str,
        generation: int | None,
        status_in: Mapping[str, Any],
        emit: EmitEvent,
    ) -> Outcome:
        """``status_in``: the status as stored (only its conditions are carried over)."""
        conditions = Conditions(ConnectClusterStatus.salvage(status_in).conditions, generation, emit)
        status = ConnectClusterStatus(observed_generation=generation)
        outcome = Outcome()
        handle: ClusterHandle | None = None
        try:
            before = self._clusters.fingerprint(namespace, name)
            handle = await self._clusters.resolve(namespace, name, max_age=0)
            if before is not None and handle.fingerprint != before:
                self._report_rotation(namespace, handle, emit)
            # capabilities are re-read on every cluster resync: a worker upgrade shows up here
            version, caps = await handle.capabilities(0.0)
            info = await handle.client.server_info()
        except SpecInvalid as exc:
            conditions.set("Ready", False, exc.reason, str(exc), event_on_change=True, warning=True)
        except ConnectAddressRefused as exc:
            # its name leads where the operator never connects: nothing was sent, nor is /health
            conditions.set("Ready", False, exc.reason, str(exc), event_on_change=True, warning=True)
            outcome.error = exc
        except (NotKafkaConnect, ConnectResponseTooLarge) as exc:
            # it answered, so it is reachable, but it is not a worker: nothing it says is used
            status.reachable = True
            conditions.set("Ready", False, exc.reason, str(exc), event_on_change=True, warning=True)
            outcome.error = exc
        except ConnectError as exc:
            health = await _health(handle)
            if health is not None and health.status == "starting":
                # it answers, and says why it cannot serve yet: no warning, a short wait
                status.reachable = True
                status.worker_health = WorkerHealthStatus(status=health.status, message=health.message)
                message = f"the worker is starting: {health.message or 'GET /health says starting'}"
                conditions.set("Ready", False, "WorkerStarting", message, event_on_change=True)
                conditions.set("WorkerHealthy", False, "Starting", message)
                outcome.error = WorkerStarting(message)
            else:
                status.reachable = False
                conditions.set("Ready", False, "Unreachable", str(exc), event_on_change=True, warning=True)
                outcome.error = exc
        except KubeError as exc:
            conditions.set("Ready", False, "ReferenceNotFound", str(exc), event_on_change=True, warning=True)
            outcome.error = exc
        else:
            status.reachable = True
            status.worker_version = version
            status.kafka_cluster_id = info.kafka_cluster_id
            status.capabilities = caps
            conditions.set("Ready", True, "Reachable", f"Kafka Connect {version} answered", event_on_change=True)
            health = await _health(handle)
            if health is not None:
                status.worker_health = WorkerHealthStatus(status=health.status, message=health.message)
                healthy = {"healthy": True, "unknown": None}.get(health.status, False)
                conditions.set(
                    "WorkerHealthy",
                    healthy,
                    health.status.capitalize(),
                    health.message or health.status,
                    event_on_change=True,
                    warning=healthy is False,
                )
        if handle is not None:
            self._check_settings(conditions, handle.spec.spark_check)
        status.conditions = conditions.items
        outcome.status = status.patch()
        return outcome

    def _report_rotation(self, namespace: str, handle: ClusterHandle, emit: EmitEvent) -> None:
        """A new client was built: ``SecretRotated`` when a Secret it reads was seen changing
        (else the spec changed, which its own Events and generation say)."""
        now = time.monotonic()
        read = cluster_secret_keys(handle.spec.model_dump(by_alias=True, exclude_none=True))
        rotated = {secret: self._rotations.recent(namespace, secret, now) & keys for secret, keys in read.items()}
        rotated = {secret: keys for secret, keys in rotated.items() if keys}
        if rotated:
            emit("Normal", "SecretRotated", cluster_rotation_message(rotated))

    def _check_settings(self, conditions: Conditions, requested: SparkCheckDefaults | None) -> None:
        """Whether the check pods this object asks for are ones the platform team allows; the
        check runner refuses the same ones, this says so where the ConnectCluster's author looks."""
        refused = not_allowed(requested, self._check_defaults, check_policy(self._settings))
        if refused:
            conditions.set("ChecksAllowed", False, "NotAllowed", "; ".join(refused), event_on_change=True, warning=True)
        else:
            conditions.set("ChecksAllowed", True, "Allowed", "check settings are the operator's or allowed by it")


async def _health(handle: ClusterHandle | None) -> WorkerHealth | None:
    """The worker's GET /health, or None when even that cannot be read."""
    if handle is None:
        return None
    try:
        return await handle.client.health()
    except ConnectError:
        return None
