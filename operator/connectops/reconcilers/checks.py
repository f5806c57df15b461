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
from connectops.models.checks import CheckSpec, CheckState, LastCheck, SparkCheckDefaults
from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.planning.checks import (
    BUILTIN_DEFAULTS,
    NOT_SERVED,
    SPARK_GROUP,
    SPARK_PLURAL,
    SPARK_VERSION,
    TERMINAL_STATES,
    VERDICT_KEY,
    BatchMember,
    CheckConditions,
    CheckContext,
    CheckPolicy,
    CheckTarget,
    application_name,
    batch_group,
    conditions_for,
    merge_defaults,
    not_allowed,
    producer_summary,
    spark_application,
    summarize_reasons,
    verdict_config_map,
)
from connectops.reconcilers.check_batches import BatchState, CheckBatcher
from connectops.reconcilers.check_kind import FIRST_SECONDS
from connectops.reconcilers.common import Conditions
from connectops.settings import Settings

log = logging.getLogger(__name__)

#: lastCheck states after which nothing is polled any more
FINAL = frozenset({*TERMINAL_STATES, CheckState.TIMEOUT, CheckState.NOT_SUBMITTED, CheckState.MISSING})
#: what the conditions add to NOT_SERVED: the operator does ask again, by itself (check_kind)
ASKS_AGAIN = "The operator asks again once SparkApplications are served."


class CheckRunner:
    def __init__(
        self,
        kube: KubeClient,
        settings: Settings,
        defaults: SparkCheckDefaults,
        *,
        kind_first_seconds: float = FIRST_SECONDS,
    ) -> None:
        """``kind_first_seconds``: the first look for the SparkApplication kind after a check is
        refused for its absence; the looks then double up to the resync period (check_kind)."""
        self._kube = kube
        self._settings = settings
        self._defaults = defaults
        self.policy = check_policy(settings)
        self.batches = CheckBatcher(
            kube,
            window_seconds=settings.check_batch_window_seconds,
            max_connectors=settings.check_batch_max_connectors,
            max_running=settings.check_max_running,
            kind_cap_seconds=settings.resync_seconds,
            kind_first_seconds=kind_first_seconds,
        )

    def enabled(self, check: CheckSpec) -> bool:
        return check.enabled if check.enabled is not None else self._settings.checks_enabled

    def _target(
        self, namespace: str, owner: dict[str, Any], connector: str, cluster: ConnectClusterSpec
    ) -> CheckTarget | list[str]:
        """The check's target, or why it cannot run (no Kafka settings; a choice of image, entry
        file or service account the policy does not allow: the ConnectCluster's ChecksAllowed
        condition says so too, and nothing is created)."""
        if cluster.kafka is None:
            return ["the ConnectCluster has no spec.kafka (bootstrap)"]
        refused = not_allowed(cluster.spark_check, self._defaults, self.policy)
        if refused:
            return list(refused)
        meta = owner["metadata"]
        return CheckTarget(
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
            connect_auth=cluster.basic_auth,
            metrics_auth=cluster.worker_metrics.basic_auth if cluster.worker_metrics else None,
        )

    async def request(  # noqa: PLR0913 - keyword-only facts of one check request
        self,
        *,
        namespace: str,
        owner: dict[str, Any],
        suffix: str,
        connector: str,
        cluster: ConnectClusterSpec,
        cluster_name: str,
        check: CheckSpec,
        trigger: str,
        context: CheckContext | None = None,
    ) -> LastCheck | None:
        """Queue this change's check in its Connect cluster's batch (see CheckBatcher) and return
        the ``lastCheck`` to record (QUEUED, or NOT_SUBMITTED), or None when checks are off. The
        verdict ConfigMap is named after the change, as a check of its own would be."""
        if not self.enabled(check):
            return None
        check_name = application_name(owner["metadata"]["name"], suffix)
        last = LastCheck(
            application=check_name,
            verdict_config_map=verdict_config_map(check_name),
            trigger=trigger,
            started_at=utcnow_iso(),
        )
        target = self._target(namespace, owner, connector, cluster)
        if isinstance(target, list):
            return last.model_copy(update={"state": CheckState.NOT_SUBMITTED, "reasons": target})
        settings = merge_defaults(self._defaults, cluster.spark_check)
        member = BatchMember(target, check, verdict_config_map(check_name), context or CheckContext())
        batch = self.batches.request(
            target.owner_uid,
            member,
            group=batch_group(target, settings),
            cluster=cluster_name,
            settings=settings,
            timeout_seconds=check.timeout_seconds,
        )
        return last.model_copy(update={"application": batch, "state": CheckState.QUEUED})

    async def lost(self, namespace: str, last: LastCheck, uid: str, check: CheckSpec | None = None) -> bool:
        """Whether ``last`` must be requested again: a QUEUED check that no batch of this process
        holds and whose application does not exist (the operator restarted before launching it),
        or one refused because SparkApplications were not served that are served now (once: the
        probe woke this object). Any other refused one for that reason waits on the kind from
        here (after a restart, its status is all that is left of the refusal), unless ``check``
        says checks are now off for it."""
        if last.state == CheckState.NOT_SUBMITTED and list(last.reasons) == [NOT_SERVED]:
            if check is not None and not self.enabled(check):
                self.batches.kind.forget(uid)
                return False
            if self.batches.kind.take(uid):
                return True
            self.batches.kind.wait(uid)
            return False
        if last.state != CheckState.QUEUED or self.batches.knows(last.application, uid):
            return False
        try:
            await self._kube.get_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, last.application)
        except KubeObjectMissing:
            return True
        except KubeError:
            return False  # not knowable now: the next pass asks again
        return False

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
        return the ``lastCheck`` status to record, or None when checks are off. An OffsetReset's
        check runs alone: resets are rare, and its verdict is wanted as soon as it can be had."""
        if not self.enabled(check):
            return None
        name = application_name(owner["metadata"]["name"], suffix)
        last = LastCheck(application=name, trigger=trigger, started_at=utcnow_iso())

        def not_submitted(reasons: list[str]) -> LastCheck:
            return last.model_copy(update={"state": CheckState.NOT_SUBMITTED, "reasons": reasons})

        target = self._target(namespace, owner, connector, cluster)
        if isinstance(target, list):
            return not_submitted(target)
        manifest = spark_application(
            target, check, merge_defaults(self._defaults, cluster.spark_check), name, trigger, context
        )
        try:
            await self._kube.create_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, manifest)
        except KubeObjectMissing:
            return not_submitted([NOT_SERVED])
        except KubeError as exc:
            # a check must never block the change it follows (e.g. RBAC without sparkapplications)
            log.warning("check not submitted: %s", exc)
            return not_submitted([f"could not create the SparkApplication: {exc}"])
        return last.model_copy(update={"state": CheckState.PENDING})

    async def poll(self, namespace: str, last: LastCheck, check: CheckSpec) -> tuple[LastCheck, CheckConditions | None]:
        """Advance ``lastCheck``; conditions are returned once the check is over."""
        if last.state in FINAL:
            return last, None
        name = last.application
        if last.state == CheckState.QUEUED:
            waiting = self._queued(last, check)
            if waiting is not None:
                return waiting
        try:
            app = await self._kube.get_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
        except KubeObjectMissing:
            updated = last.model_copy(update={"state": CheckState.MISSING, "finished_at": utcnow_iso()})
            return updated, conditions_for(CheckState.MISSING, None, f"SparkApplication {name} disappeared")
        except KubeError as exc:
            log.warning("check %s not readable now: %s", name, exc)
            app = {}  # judged by its age alone; read again at the next resync
        # a launched batch has no state until the spark-operator writes one: it is PENDING, no longer QUEUED
        stored = None if last.state == CheckState.QUEUED else last.state
        state = str(
            ((app.get("status") or {}).get("applicationState") or {}).get("state") or stored or CheckState.PENDING
        )
        if state not in TERMINAL_STATES:
            return await self._in_flight(namespace, last, check, state)
        self.batches.finished(namespace, name)
        verdict: dict[str, Any] | None = None
        error = ((app.get("status") or {}).get("applicationState") or {}).get("errorMessage")
        if state == "COMPLETED":
            state, verdict, error = await self._verdict(namespace, last)
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

    async def _in_flight(
        self, namespace: str, last: LastCheck, check: CheckSpec, state: str
    ) -> tuple[LastCheck, CheckConditions | None]:
        started = epoch_of(last.started_at)
        if started is None or time.time() - started <= check.timeout_seconds:
            return last.model_copy(update={"state": state}), None
        # a batch is shared: the batcher deletes it once its longest timeout has passed
        if last.verdict_config_map is None:
            try:
                await self._kube.delete_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, last.application)
            except KubeError as exc:
                log.warning("could not delete the timed-out check: %s", exc)
        updated = last.model_copy(update={"state": CheckState.TIMEOUT, "finished_at": utcnow_iso()})
        return updated, conditions_for(
            CheckState.TIMEOUT, None, f"no verdict after {check.timeout_seconds}s (last state {state})"
        )

    def _queued(self, last: LastCheck, check: CheckSpec) -> tuple[LastCheck, CheckConditions | None] | None:
        """A QUEUED check's next state while its batch is not launched; None once it is (or when
        this process does not know the batch: then the application tells)."""
        outcome = self.batches.outcome(last.application)
        if outcome is not None and outcome.state == BatchState.REFUSED:
            reason = "; ".join(outcome.reasons)
            if list(outcome.reasons) == [NOT_SERVED]:
                reason = f"{reason}. {ASKS_AGAIN}"
            updated = last.model_copy(
                update={
                    "state": CheckState.NOT_SUBMITTED,
                    "reasons": list(outcome.reasons),
                    "finished_at": utcnow_iso(),
                }
            )
            return updated, CheckConditions((None, "CheckNotSubmitted", reason), (None, "CheckNotSubmitted", reason))
        if outcome is not None and outcome.state == BatchState.QUEUED:
            started = epoch_of(last.started_at)
            if started is not None and time.time() - started > check.timeout_seconds:
                updated = last.model_copy(update={"state": CheckState.TIMEOUT, "finished_at": utcnow_iso()})
                return updated, conditions_for(
                    CheckState.TIMEOUT, None, f"no verdict after {check.timeout_seconds}s (still queued)"
                )
            return last, None
        return None

    async def _verdict(self, namespace: str, last: LastCheck) -> tuple[str, dict[str, Any] | None, str | None]:
        """(state, verdict, error) of a COMPLETED application for this check: FAILED when its
        ConfigMap holds no verdict, or the error of its part of a batch (the others' stand)."""
        where = last.verdict_config_map or verdict_config_map(last.application)
        try:
            cm = await self._kube.config_map(namespace, where)
            verdict = json.loads((cm.data or {})[VERDICT_KEY])
        except (KubeError, KeyError, ValueError) as exc:
            return "COMPLETED", None, f"verdict ConfigMap {where} unreadable: {exc}"
        if not isinstance(verdict, dict):
            return "COMPLETED", None, f"verdict ConfigMap {where} holds no verdict document"
        if verdict.get("error"):
            return "FAILED", None, str(verdict["error"])
        return "COMPLETED", verdict, None


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
    # a check that gave no verdict (not submitted, timed out, failed) says so in both conditions
    # with the same words: one Event for one cause
    one_cause = (bal_reason, bal_msg) == (lag_reason, lag_msg)
    conditions.set(
        "PartitionsBalanced", bal_ok, bal_reason, bal_msg, event_on_change=not one_cause, warning=bal_ok is False
    )
    if result.producer is not None:
        ok, reason, message = result.producer
        conditions.set("ProducerHealthy", ok, reason, message, event_on_change=True, warning=ok is False)
