"""ConnectCluster reconciler: is the worker group reachable, which version, what can it do."""

from __future__ import annotations

from typing import Any

from connectops.adapters.connect_rest import ConnectError
from connectops.adapters.kube import KubeError
from connectops.errors import SpecInvalid
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import Conditions, EmitEvent, Outcome
from connectops.settings import Settings


class ConnectClusterReconciler:
    def __init__(self, clusters: ClusterRegistry, settings: Settings) -> None:
        self._clusters = clusters
        self._settings = settings

    async def reconcile(
        self,
        namespace: str,
        name: str,
        generation: int | None,
        status_in: dict[str, Any],
        emit: EmitEvent,
    ) -> Outcome:
        conditions = Conditions(status_in.get("conditions"), generation, emit)
        status: dict[str, Any] = {"observedGeneration": generation}
        outcome = Outcome(status=status)
        try:
            handle = await self._clusters.resolve(namespace, name, max_age=0)
            # capabilities are re-read on every cluster resync: a worker upgrade shows up here
            version, caps = await handle.capabilities(0.0)
            info = await handle.client.server_info()
        except SpecInvalid as exc:
            conditions.set("Ready", False, "InvalidSpec", str(exc), event_on_change=True, warning=True)
        except ConnectError as exc:
            status["reachable"] = False
            conditions.set("Ready", False, "Unreachable", str(exc), event_on_change=True, warning=True)
            outcome.error = exc
        except KubeError as exc:
            conditions.set("Ready", False, "ReferenceNotFound", str(exc), event_on_change=True, warning=True)
            outcome.error = exc
        else:
            status["reachable"] = True
            status["workerVersion"] = version
            status["kafkaClusterId"] = info.kafka_cluster_id
            status["capabilities"] = caps.model_dump(by_alias=True)
            conditions.set("Ready", True, "Reachable", f"Kafka Connect {version} answered", event_on_change=True)
        status["conditions"] = conditions.dump()
        return outcome
