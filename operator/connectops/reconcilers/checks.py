"""Launching lag/balance checks as SparkApplications and reading their verdicts back.

The owner's reconciler is the only writer of the owner's status: it launches a check after a
change and, on later passes, polls the application until it is terminal, then turns the verdict
into conditions. No second writer races it for the conditions list.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from connectops import metrics
from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing
from connectops.models.base import epoch_of, utcnow_iso
from connectops.models.checks import CheckSpec, LastCheck, SparkCheckDefaults
from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.planning.checks import (
    BUILTIN_DEFAULTS,
    SPARK_GROUP,
    SPARK_PLURAL,
    SPARK_VERSION,
    TERMINAL_STATES,
    VERDICT_KEY,
    CheckConditions,
    CheckContext,
    CheckPolicy,
    CheckTarget,
    application_name,
    conditions_for,
    merge_defaults,
    not_allowed,
    producer_summary,
    spark_application,
    summarize_reasons,
    verdict_config_map,
)
from connectops.reconcilers.common import Conditions
from connectops.settings import Settings

log = logging.getLogger(__name__)

#: lastCheck states after which nothing is polled any more
FINAL = frozenset({*TERMINAL_STATES, "TIMEOUT", "NOT_SUBMITTED", "MISSING"})


class CheckRunner:
    def __init__(self, kube: KubeClient, settings: Settings, defaults: SparkCheckDefaults) -> None:
        self._kube = kube
        self._settings = settings
        self._defaults = defaults
        self.policy = check_policy(settings)

    def enabled(self, check: CheckSpec) -> bool:
        return check.enabled if check.enabled is not None else self._settings.checks_enabled

    async def launch(
        self,
        *,
        namespace: str,
        owner: dict[str, Any],
        suffix: str,
        connector: str,
        cluster: ConnectClusterSpec,
        check: CheckSpec,
        trigger: str,
        context: CheckContext | None = None,
    ) -> LastCheck | None:
        """Create the SparkApplication for this change (once: its name is deterministic) and
        return the ``lastCheck`` status to record, or None when checks are off."""
        if not self.enabled(check):
            return None
        meta = owner["metadata"]
        name = application_name(meta["name"], suffix)
        last = LastCheck(application=name, trigger=trigger, started_at=utcnow_iso())

        def not_submitted(reasons: list[str]) -> LastCheck:
            return last.model_copy(update={"state": "NOT_SUBMITTED", "reasons": reasons})

        if cluster.kafka is None:
            return not_submitted(["the ConnectCluster has no spec.kafka (bootstrap)"])
        target = CheckTarget(
            namespace=namespace,
            owner_kind=owner["kind"],
            owner_name=meta["name"],
            owner_uid=meta["uid"],
            owner_api_version=owner["apiVersion"],
            connector=connector,
            connect_url=cluster.rest_url,
            bootstrap=cluster.kafka.bootstrap_servers,
            metrics_urls=tuple(cluster.worker_metrics.urls) if cluster.worker_metrics else (),
            offset_flush_timeout_ms=cluster.worker_metrics.offset_flush_timeout_ms if cluster.worker_metrics else None,
            offset_flush_interval_ms=(
                cluster.worker_metrics.offset_flush_interval_ms if cluster.worker_metrics else None
            ),
            client_config=dict(cluster.kafka.config),
            client_config_from=dict(cluster.kafka.config_from),
        )
        refused = not_allowed(cluster.spark_check, self._defaults, self.policy)
        if refused:
            # the ConnectCluster says so too (condition ChecksAllowed): nothing is created
            return not_submitted(list(refused))
        manifest = spark_application(
            target, check, merge_defaults(self._defaults, cluster.spark_check), name, trigger, context
        )
        try:
            await self._kube.create_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, manifest)
        except KubeObjectMissing:
            return not_submitted(
                [
                    "SparkApplication (sparkoperator.k8s.io/v1beta2) is not served: install the "
                    "kubeflow spark-operator, or disable checks"
                ]
            )
        except KubeError as exc:
            # a check must never block the change it follows (e.g. RBAC without sparkapplications)
            log.warning("check not submitted: %s", exc)
            return not_submitted([f"could not create the SparkApplication: {exc}"])
        return last.model_copy(update={"state": "PENDING"})

    async def poll(self, namespace: str, last: LastCheck, check: CheckSpec) -> tuple[LastCheck, CheckConditions | None]:
        """Advance ``lastCheck``; conditions are returned once the check is over."""
        if last.state in FINAL:
            return last, None
        name = last.application
        try:
            app = await self._kube.get_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
        except KubeObjectMissing:
            updated = last.model_copy(update={"state": "MISSING", "finished_at": utcnow_iso()})
            return updated, conditions_for("MISSING", None, f"SparkApplication {name} disappeared")
        except KubeError as exc:
            log.warning("check %s not readable now: %s", name, exc)
            app = {}  # judged by its age alone; read again at the next resync
        state = str(((app.get("status") or {}).get("applicationState") or {}).get("state") or last.state or "PENDING")
        if state not in TERMINAL_STATES:
            started = epoch_of(last.started_at)
            if started is not None and time.time() - started > check.timeout_seconds:
                try:
                    await self._kube.delete_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
                except KubeError as exc:
                    log.warning("could not delete the timed-out check: %s", exc)
                updated = last.model_copy(update={"state": "TIMEOUT", "finished_at": utcnow_iso()})
                return updated, conditions_for(
                    "TIMEOUT", None, f"no verdict after {check.timeout_seconds}s (last state {state})"
                )
            return last.model_copy(update={"state": state}), None
        verdict: dict[str, Any] | None = None
        error = ((app.get("status") or {}).get("applicationState") or {}).get("errorMessage")
        if state == "COMPLETED":
            try:
                cm = await self._kube.config_map(namespace, verdict_config_map(name))
                verdict = json.loads((cm.data or {})[VERDICT_KEY])
            except (KubeError, KeyError, ValueError) as exc:
                error = f"verdict ConfigMap {verdict_config_map(name)} unreadable: {exc}"
        values: dict[str, Any] = {"state": state, "finished_at": utcnow_iso()}
        metrics.CHECKS.labels(state=state, verdict=(verdict or {}).get("verdict", "none")).inc()
        if verdict is not None:
            values["verdict"] = None if verdict.get("verdict") is None else str(verdict.get("verdict"))[:40]
            # nulls would vanish in the merge patch anyway; leaving them out keeps status == stored
            values["headline"] = {k: v for k, v in (verdict.get("headline") or {}).items() if v is not None}
            values["reasons"] = summarize_reasons(verdict)
            producer = producer_summary(verdict)
            if producer:
                values["producer"] = producer
        elif error:
            values["reasons"] = [str(error)[:500]]
        # validated: the verdict is the job's answer, read from a ConfigMap
        updated = LastCheck.model_validate({**last.model_dump(), **values})
        return updated, conditions_for(state, verdict, error)


def check_defaults(settings: Settings) -> SparkCheckDefaults:
    """Built-in defaults overlaid with the operator's environment (the Helm chart's values)."""
    env = SparkCheckDefaults(
        image=settings.check_image,
        service_account=settings.check_service_account,
        spark_version=settings.check_spark_version,
    )
    return merge_defaults(BUILTIN_DEFAULTS, env)


def check_policy(settings: Settings) -> CheckPolicy:
    return CheckPolicy(
        images=settings.check_allowed_images,
        service_accounts=settings.check_allowed_service_accounts,
        application_files=settings.check_allowed_application_files,
    )


def apply_check_conditions(conditions: Conditions, result: CheckConditions) -> None:
    lag_ok, lag_reason, lag_msg = result.lag
    conditions.set("LagHealthy", lag_ok, lag_reason, lag_msg, event_on_change=True, warning=lag_ok is False)
    bal_ok, bal_reason, bal_msg = result.balance
    conditions.set("PartitionsBalanced", bal_ok, bal_reason, bal_msg, event_on_change=True, warning=bal_ok is False)
    if result.producer is not None:
        ok, reason, message = result.producer
        conditions.set("ProducerHealthy", ok, reason, message, event_on_change=True, warning=ok is False)
