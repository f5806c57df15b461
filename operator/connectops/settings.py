"""Operator settings, from environment variables (the Helm chart sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def _list(name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in os.environ.get(name, "").split(",") if item.strip())


@dataclass(frozen=True)
class Settings:
    #: how often the C heap's free pages are handed back to the system (connectops.memory); 0: never
    malloc_trim_seconds: float = field(default_factory=lambda: max(0.0, _float("CONNECTOPS_MALLOC_TRIM_SECONDS", 60.0)))
    #: how often every object is re-checked for drift (Strimzi: 120 s)
    resync_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_RESYNC_SECONDS", 60.0))
    #: first retry delay after a temporary failure (Connect down, 409, missing Secret)
    retry_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_RETRY_SECONDS", 10.0))
    #: upper bound of the doubling retry delay
    retry_max_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_RETRY_MAX_SECONDS", 300.0))
    #: in-flight REST calls per Connect worker group
    connect_concurrency: int = field(default_factory=lambda: _int("CONNECTOPS_CONNECT_CONCURRENCY", 8))
    #: kopf's API requests waiting for an answer at once (see kopf_fixes.bound_requests)
    kube_api_concurrency: int = field(default_factory=lambda: _int("CONNECTOPS_KUBE_API_CONCURRENCY", 32))
    #: kopf workers (one per object with events to process) alive at once, per kopf watcher
    #: (one for all namespaces when watching them all): what bounds a start's memory
    #: (connectops.indexes). An object whose handler is retrying holds its worker through the
    #: backoff (kopf sleeps in the worker), so this many objects retrying at once hold every
    #: other object's change back until one of them ends its wait: the bound is high for that
    #: reason, and a per-namespace object-count quota is what keeps one tenant from reaching it
    kopf_workers: int = field(default_factory=lambda: _int("CONNECTOPS_KOPF_WORKERS", 1000))
    #: the largest answer read from a Connect endpoint (a worker, or whatever a restUrl points at)
    connect_max_response_bytes: int = field(
        default_factory=lambda: _int("CONNECTOPS_CONNECT_MAX_RESPONSE_BYTES", 32 << 20)
    )
    #: the Connect URLs a ConnectCluster may name (planning/urls.py has the grammar); empty: any
    #: other address than the link-local, metadata and API-server ones refused in any case
    allowed_rest_urls: tuple[str, ...] = field(default_factory=lambda: _list("CONNECTOPS_ALLOWED_REST_URLS"))
    #: how long a reconcile waits for Connect to report the state it just asked for
    settle_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_SETTLE_SECONDS", 10.0))
    #: how long Connector reconciles reuse a resolved ConnectCluster and its Secrets
    cluster_cache_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_CLUSTER_CACHE_SECONDS", 5.0))
    #: capabilities are per worker version; re-read it this often
    capabilities_ttl_seconds: float = field(default_factory=lambda: _float("CONNECTOPS_CAPABILITIES_TTL_SECONDS", 60.0))
    #: watch the Secrets of the watched namespaces and apply a rotated referenced key at once
    #: (needs list and watch on Secrets there); off: a rotation reaches Connect at the next resync
    secret_rotation: bool = field(
        default_factory=lambda: os.environ.get("CONNECTOPS_SECRET_ROTATION", "true").lower() == "true"
    )
    #: launch a SparkApplication check after every change (per Connector: spec.check.enabled)
    checks_enabled: bool = field(
        default_factory=lambda: os.environ.get("CONNECTOPS_CHECKS_ENABLED", "true").lower() == "true"
    )
    #: checks of one Connect cluster requested within this window share one SparkApplication
    #: (a GitOps sync changing 500 Connectors starts a few drivers, not 500)
    check_batch_window_seconds: float = field(
        default_factory=lambda: max(0.0, _float("CONNECTOPS_CHECK_BATCH_WINDOW_SECONDS", 5.0))
    )
    #: connectors per SparkApplication at most (its arguments grow with them)
    check_batch_max_connectors: int = field(
        default_factory=lambda: max(1, _int("CONNECTOPS_CHECK_BATCH_MAX_CONNECTORS", 50))
    )
    #: SparkApplications this operator keeps running at once; further batches wait (and fill up)
    check_max_running: int = field(default_factory=lambda: max(1, _int("CONNECTOPS_CHECK_MAX_RUNNING", 4)))
    check_image: str | None = field(default_factory=lambda: os.environ.get("CONNECTOPS_CHECK_IMAGE") or None)
    check_service_account: str | None = field(
        default_factory=lambda: os.environ.get("CONNECTOPS_CHECK_SERVICE_ACCOUNT") or None
    )
    check_spark_version: str | None = field(
        default_factory=lambda: os.environ.get("CONNECTOPS_CHECK_SPARK_VERSION") or None
    )
    #: where OffsetReset locks (Leases) live: the operator's own namespace (the chart sets it), so
    #: resets from different namespaces of one connector meet at one Lease, where no tenant can
    #: write. Empty (a bare ``connectops run``): each reset's own namespace, which excludes
    #: concurrent resets only within a namespace (the log says so at start).
    lock_namespace: str = field(default_factory=lambda: os.environ.get("CONNECTOPS_LOCK_NAMESPACE", ""))
    #: where Connectors' claims on their connectors are recorded (Leases; see
    #: connectops.reconcilers.claims): the lock namespace unless set apart. Empty: claims are
    #: decided from the objects this process has seen (the oldest wins), which two objects created
    #: in the same moment can both pass before either sees the other.
    claim_namespace: str = field(
        default_factory=lambda: (
            os.environ.get("CONNECTOPS_CLAIM_NAMESPACE") or os.environ.get("CONNECTOPS_LOCK_NAMESPACE", "")
        )
    )
    #: what a ConnectCluster's spec.sparkCheck may choose beyond the defaults above (glob patterns;
    #: empty: nothing else). Whoever may write a ConnectCluster must not pick the image, code or
    #: identity of the pods the operator creates for it.
    check_allowed_images: tuple[str, ...] = field(default_factory=lambda: _list("CONNECTOPS_CHECK_ALLOWED_IMAGES"))
    check_allowed_service_accounts: tuple[str, ...] = field(
        default_factory=lambda: _list("CONNECTOPS_CHECK_ALLOWED_SERVICE_ACCOUNTS")
    )
    check_allowed_application_files: tuple[str, ...] = field(
        default_factory=lambda: _list("CONNECTOPS_CHECK_ALLOWED_APPLICATION_FILES")
    )


def load() -> Settings:
    return Settings()
