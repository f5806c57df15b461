"""Pure planning of lag/balance checks: the SparkApplication to create and how to read its
outcome. The SparkApplication (kubeflow spark-operator ``v1beta2``) runs ``connectops-check``;
the driver writes its verdict JSON into a ConfigMap named after the application.

One module (~520 lines) because both halves are one contract with the job: the arguments written
into the manifest and the verdict read back name the same things, and a change to one is a
change to the other."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from connectops.models.base import SecretKeyRef
from connectops.models.checks import CheckSpec, SparkCheckDefaults, SparkResources
from connectops.models.connect_cluster import BasicAuth
from connectops.models.connector import DesiredState
from connectops.planning import producer_metrics
from connectops.redact import without_userinfo
from connectops_rules import connect, thresholds

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
#: terminal per the spark-operator API: SUBMISSION_FAILED becomes FAILED once retries are
#: exhausted, UNKNOWN is re-evaluated; everything else is still in flight
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED"})
VERDICT_KEY = "verdict.json"
LABEL_CHECK = "connectops.io/check"
LABEL_OWNER_KIND = "connectops.io/owner-kind"
LABEL_OWNER = "connectops.io/owner"
#: why a check was not submitted when the cluster does not serve SparkApplications
NOT_SERVED = (
    f"SparkApplication ({SPARK_GROUP}/{SPARK_VERSION}) is not served: install the kubeflow spark-operator, "
    "or disable checks"
)
#: on a SparkApplication that checks several connectors
LABEL_BATCH = "connectops.io/batch"

LAG_CODES = frozenset(
    {
        "BURROW_ERR",
        "BURROW_WARN",
        "LAG_ABOVE_MAX",
        "LAG_WHILE_PAUSED_ABOVE_MAX",
        "NOT_CATCHING_UP",
        "MIRROR_RECORDS_LOST",
    }
)
#: verdicts that are fine given what the connector is meant to do: LagHealthy=True, this reason
INTENT_VERDICTS = {"PAUSED": "PausedBySpec", "STOPPED": "StoppedBySpec", "CATCHING_UP": "CatchingUp"}
BALANCE_CODES = frozenset(
    {
        "TRAFFIC_SKEW",
        "TRAFFIC_GINI",
        "ASSIGNMENT_UNBALANCED",
        "RANGE_ASSIGNOR_PATTERN",
        "MEMBER_TRAFFIC_SKEW",
        "UNASSIGNED_PARTITIONS",
    }
)

_INTENT_CODES = frozenset({"CONNECTOR_PAUSED", "CONNECTOR_STOPPED", "CATCHING_UP"})

#: operator-wide defaults (Helm values -> environment), overridden by ConnectCluster.spec.sparkCheck
BUILTIN_DEFAULTS = SparkCheckDefaults(
    image="ghcr.io/connectops/spark-check:0.1.0",
    service_account="connectops-spark-check",
    spark_version="4.0.1",
    main_application_file="local:///opt/connectops/check.py",
    ttl_seconds=3600,
    driver=SparkResources(cores=1, memory="1g"),
    executor=SparkResources(cores=1, memory="1g", instances=1),
)


@dataclass(frozen=True)
class CheckPolicy:
    """What a ConnectCluster's ``spec.sparkCheck`` may choose, set by the platform team (chart
    values ``sparkCheck.allowed.*``): glob patterns, matched case-sensitively.

    The operator creates the check's pods with its own rights, so a free choice of image, entry
    file (``mainApplicationFile`` may be a URL: any code) or service account would let whoever may
    write a ConnectCluster run any code under any identity of the namespace. The operator's own
    defaults are always allowed; nothing else is unless listed.
    """

    images: tuple[str, ...] = ()
    service_accounts: tuple[str, ...] = ()
    application_files: tuple[str, ...] = ()


def not_allowed(requested: SparkCheckDefaults | None, defaults: SparkCheckDefaults, policy: CheckPolicy) -> list[str]:
    """One sentence per field of ``requested`` that the policy does not allow (empty: all fine)."""
    if requested is None:
        return []
    problems = []
    for field_name, value, default, allowed, setting in (
        ("image", requested.image, defaults.image, policy.images, "images"),
        (
            "serviceAccount",
            requested.service_account,
            defaults.service_account,
            policy.service_accounts,
            "serviceAccounts",
        ),
        (
            "mainApplicationFile",
            requested.main_application_file,
            defaults.main_application_file,
            policy.application_files,
            "applicationFiles",
        ),
    ):
        if value is None or value == default or any(fnmatchcase(value, pattern) for pattern in allowed):
            continue
        problems.append(
            f"spec.sparkCheck.{field_name} {value!r} is not allowed by the operator's settings "
            f"(Helm value sparkCheck.allowed.{setting}: {', '.join(allowed) or 'nothing beyond the default'})"
        )
    return problems


def application_name(owner: str, suffix: str) -> str:
    """Deterministic per (object, change) so a retried or resumed reconcile never launches a
    second check for the same change; within 63 characters (the driver pod name derives from it)."""
    base = re.sub(r"[^a-z0-9-]", "-", f"{owner}-check-{suffix}".lower()).strip("-")
    if len(base) <= 52:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{base[:43].rstrip('-')}-{digest}"


def verdict_config_map(application: str) -> str:
    return f"{application}-verdict"


def merge_defaults(*layers: SparkCheckDefaults | None) -> SparkCheckDefaults:
    """Later layers win field by field (operator defaults < ConnectCluster.spec.sparkCheck)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is not None:
            merged.update(layer.model_dump(exclude_none=True))
    return SparkCheckDefaults.model_validate(merged)


@dataclass(frozen=True)
class CheckContext:
    """What the connector is meant to be doing while the check samples it: the verdict of a
    connector paused by its spec, or catching up after a rewinding reset, is not UNHEALTHY."""

    desired_state: str = "running"
    after_reset: str | None = None
    #: the previous check's verdict ConfigMap: its worker-metrics figures are the "before"
    baseline_config_map: str | None = None


@dataclass(frozen=True)
class CheckTarget:
    namespace: str
    owner_kind: str
    owner_name: str
    owner_uid: str
    owner_api_version: str
    connector: str
    connect_url: str
    bootstrap: str
    #: the workers' Prometheus endpoints (allowlisted like restUrl) and the settings REST hides
    metrics_urls: tuple[str, ...] = ()
    offset_flush_timeout_ms: int | None = None
    offset_flush_interval_ms: int | None = None
    #: the Kafka client settings of ConnectCluster spec.kafka: plain ones (config), and the
    #: Secret keys of the others (configFrom), whose values the driver pod reads as env vars
    client_config: Mapping[str, str] = field(default_factory=dict)
    client_config_from: Mapping[str, SecretKeyRef] = field(default_factory=dict)
    #: the Secrets of the REST API's and the metrics endpoints' basic auth (ConnectCluster
    #: basicAuth, workerMetrics.basicAuth): the driver reads them as env vars, like configFrom
    connect_auth: BasicAuth | None = None
    metrics_auth: BasicAuth | None = None


#: prefix of the driver's env vars that carry configFrom values (never the job's arguments)
CLIENT_ENV_PREFIX = "CONNECTOPS_KAFKA_"
#: the driver's env vars (user name, password) of the REST API's and the metrics' basic auth;
#: the job is told their names (--connect-auth-env, --metrics-auth-env), never their values
CONNECT_AUTH_ENV = ("CONNECTOPS_CONNECT_USERNAME", "CONNECTOPS_CONNECT_PASSWORD")
METRICS_AUTH_ENV = ("CONNECTOPS_METRICS_USERNAME", "CONNECTOPS_METRICS_PASSWORD")


def client_config_env(settings: Iterable[str]) -> dict[str, str]:
    """The driver env var of each configFrom setting: ``sasl.password`` ->
    ``CONNECTOPS_KAFKA_SASL_PASSWORD``, the same name for the same set of settings on every
    reconcile (so the manifest does not change). Settings that would share a name (``a.b`` and
    ``a_b``) each get a digest of their own name appended."""
    wanted = sorted(set(settings))
    plain = {s: CLIENT_ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", s.upper()) for s in wanted}
    shared = {name for name in plain.values() if list(plain.values()).count(name) > 1}
    return {
        s: f"{name}_{hashlib.sha256(s.encode()).hexdigest()[:8].upper()}" if name in shared else name
        for s, name in plain.items()
    }


def driver_env(target: CheckTarget) -> list[dict[str, Any]]:
    """The driver's env vars that carry credentials, each from its Secret key (``secretKeyRef``):
    configFrom's settings, then the REST API's and the metrics endpoints' basic auth."""
    envs = client_config_env(target.client_config_from)
    refs = [(envs[setting], ref.name, ref.key) for setting, ref in sorted(target.client_config_from.items())]
    for auth, (user_env, password_env) in (
        (target.connect_auth, CONNECT_AUTH_ENV),
        (target.metrics_auth if target.metrics_urls else None, METRICS_AUTH_ENV),
    ):
        if auth is not None:
            refs.append((user_env, auth.secret_name, auth.username_key))
            refs.append((password_env, auth.secret_name, auth.password_key))
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}} for name, secret, key in refs]


def common_arguments(target: CheckTarget) -> list[str]:
    """The job's arguments that describe the Connect cluster and how to reach its Kafka: the same
    for every connector of a batch (checks are batched only when these are equal)."""
    # ``--flag=value``: a value that starts with "-" (a connector may be called "--samples") is
    # then still a value to argparse, never an option of its own
    # a Secret's value never enters the arguments (readable by whoever reads the SparkApplication
    # or its driver pod): only the name of the driver env var that holds it. Nor does a URL's
    # user-info, should one ever be written (the schema refuses it): it would be a password
    args = [f"--bootstrap={target.bootstrap}", f"--connect-url={without_userinfo(target.connect_url)}"]
    args += [f"--metrics-url={without_userinfo(url)}" for url in target.metrics_urls]
    args += [f"--client-config={setting}={value}" for setting, value in sorted(target.client_config.items())]
    args += [f"--client-config-env={s}={env}" for s, env in client_config_env(target.client_config_from).items()]
    if target.connect_auth is not None:
        args.append(f"--connect-auth-env={':'.join(CONNECT_AUTH_ENV)}")
    if target.metrics_auth is not None and target.metrics_urls:
        args.append(f"--metrics-auth-env={':'.join(METRICS_AUTH_ENV)}")
    if target.metrics_urls:
        args += [
            "--offset-flush-timeout-ms",
            str(target.offset_flush_timeout_ms or connect.OFFSET_FLUSH_TIMEOUT_MS),
            "--offset-flush-interval-ms",
            str(target.offset_flush_interval_ms or connect.OFFSET_FLUSH_INTERVAL_MS),
        ]
    return args


def member_arguments(
    target: CheckTarget, check: CheckSpec, verdict: str, context: CheckContext | None = None
) -> list[str]:
    """One connector's arguments: what to sample, its thresholds and intent, where its verdict goes."""
    context = context or CheckContext()
    args = [
        f"--connector={target.connector}",
        "--samples",
        str(check.samples),
        "--interval",
        f"{check.interval_seconds}s",
        f"--output-configmap={target.namespace}/{verdict}",
    ]
    # the thresholds the Connector sets, each under its own flag (connectops_rules.thresholds);
    # an unset one is left to the job's default
    spec = check.model_dump(by_alias=True)
    for threshold in thresholds.CR:
        value = spec[threshold.name]
        if value is not None:
            args += [threshold.flag, threshold.argument(value)]
    if context.after_reset is not None:
        args += ["--after-reset", context.after_reset]
    if context.desired_state != DesiredState.RUNNING:
        args += ["--desired-state", context.desired_state]
    if context.baseline_config_map and target.metrics_urls:
        args += ["--baseline-configmap", f"{target.namespace}/{context.baseline_config_map}"]
    return args


def job_arguments(
    target: CheckTarget, check: CheckSpec, application: str, context: CheckContext | None = None
) -> list[str]:
    return common_arguments(target) + member_arguments(target, check, verdict_config_map(application), context)


def _resources(res: SparkResources | None, *, executor: bool) -> dict[str, Any]:
    res = res or SparkResources()
    out: dict[str, Any] = {"cores": res.cores, "memory": res.memory}
    if executor:
        out["instances"] = res.instances or 1
    return out


def spark_application(
    target: CheckTarget,
    check: CheckSpec,
    settings: SparkCheckDefaults,
    application: str,
    trigger: str,
    context: CheckContext | None = None,
) -> dict[str, Any]:
    """The SparkApplication manifest (required fields per the v1beta2 API: type, sparkVersion,
    mainApplicationFile, driver, executor; plus mode, restartPolicy, TTL, arguments, image)."""
    return _manifest(
        target,
        settings,
        application,
        arguments=job_arguments(target, check, application, context),
        owner_label=target.owner_name,
        annotations={"connectops.io/trigger": trigger[:250], "connectops.io/connector": target.connector},
        owners=[_owner_reference(target, controller=True)],
    )


@dataclass(frozen=True)
class BatchMember:
    """One connector's check within a batched SparkApplication."""

    target: CheckTarget
    check: CheckSpec
    #: the ConfigMap its verdict is written to: one per connector, named after its own change
    verdict: str
    context: CheckContext = field(default_factory=CheckContext)


def batch_group(target: CheckTarget, settings: SparkCheckDefaults) -> str:
    """Checks batch together only when everything but the connector is equal: the namespace, the
    cluster's arguments and the driver's credentials and settings (the application's spec)."""
    shape = {
        "namespace": target.namespace,
        "arguments": common_arguments(target),
        "secrets": driver_env(target),
        "settings": settings.model_dump(mode="json", exclude_none=True),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def batch_application(
    members: Sequence[BatchMember], settings: SparkCheckDefaults, application: str, owner_label: str
) -> dict[str, Any]:
    """One SparkApplication checking every member (``--each``): owned by each member's object, so
    it is collected only once every one of them is deleted, and controlled by none of them."""
    if not members:
        raise ValueError("a batch needs at least one member")
    first = members[0].target
    arguments = common_arguments(first)
    for member in members:
        # ``--each=``: the value starts with "--connector=...", which argparse would take for an option
        member_args = member_arguments(member.target, member.check, member.verdict, member.context)
        arguments.append(f"--each={shlex.join(member_args)}")
    names = ",".join(m.target.connector for m in members)
    return _manifest(
        first,
        settings,
        application,
        arguments=arguments,
        owner_label=owner_label,
        annotations={"connectops.io/trigger": f"{len(members)} change(s)", "connectops.io/connector": names[:4000]},
        owners=[_owner_reference(m.target, controller=False) for m in members],
        extra_labels={LABEL_BATCH: "true"},
    )


def _owner_reference(target: CheckTarget, *, controller: bool) -> dict[str, Any]:
    return {
        "apiVersion": target.owner_api_version,
        "kind": target.owner_kind,
        "name": target.owner_name,
        "uid": target.owner_uid,
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def _manifest(
    target: CheckTarget,
    settings: SparkCheckDefaults,
    application: str,
    *,
    arguments: list[str],
    owner_label: str,
    annotations: dict[str, str],
    owners: list[dict[str, Any]],
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/managed-by": "connectops",
        LABEL_CHECK: "true",
        LABEL_OWNER_KIND: target.owner_kind,
        LABEL_OWNER: owner_label[:63].rstrip("-_."),
        **(extra_labels or {}),
    }
    driver = _resources(settings.driver, executor=False)
    if settings.service_account:
        driver["serviceAccount"] = settings.service_account
    driver["labels"] = dict(labels)
    env = driver_env(target)
    if env:
        # only the driver: it collects (the Kafka admin client, the REST and metrics reads run
        # there); executors compute on the collected snapshot, so they get no credentials
        driver["env"] = env
    return {
        "apiVersion": f"{SPARK_GROUP}/{SPARK_VERSION}",
        "kind": "SparkApplication",
        "metadata": {
            "name": application,
            "namespace": target.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": owners,
        },
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": settings.image,
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": settings.main_application_file,
            "arguments": arguments,
            "sparkVersion": settings.spark_version,
            "restartPolicy": {"type": "Never"},
            "timeToLiveSeconds": settings.ttl_seconds,
            # Executors get their configuration from the driver's pod spec instead of a ConfigMap
            # the driver creates and, at shutdown, deletes by label: the check's ServiceAccount
            # then needs no list or delete on ConfigMaps, so it cannot remove the namespace's
            # offset backups (Spark >= 3.2; KubernetesClusterSchedulerBackend skips both calls)
            "sparkConf": {"spark.kubernetes.executor.disableConfigMap": "true"},
            "driver": driver,
            "executor": _resources(settings.executor, executor=True),
        },
    }


@dataclass(frozen=True)
class CheckConditions:
    lag: tuple[bool | None, str, str]
    balance: tuple[bool | None, str, str]
    #: ProducerHealthy; None when the check did not read the workers' metrics
    producer: tuple[bool | None, str, str] | None = None
    #: tasks whose own series were read but not their producer's (planning.producer_metrics)
    unserved_producer_tasks: tuple[int, ...] = ()


def conditions_for(state: str, verdict: Mapping[str, Any] | None, error: str | None = None) -> CheckConditions:
    """LagHealthy / PartitionsBalanced from a finished application and its verdict document."""
    if state != "COMPLETED" or verdict is None:
        why = error or f"the check ended {state} without a verdict"
        return CheckConditions((None, "CheckFailed", why), (None, "CheckFailed", why))
    reasons = [r for r in verdict.get("reasons", []) if r.get("severity") != "INFO"]
    if verdict.get("verdict") == "NOT_APPLICABLE" or verdict.get("lag") is None:
        infos = "; ".join(r.get("message", "") for r in verdict.get("reasons", []))[:500]
        lag: tuple[bool | None, str, str] = (None, "NotApplicable", infos or "broker-side lag does not apply")
    else:
        bad = [r for r in reasons if r.get("code") in LAG_CODES]
        total = (verdict.get("headline") or {}).get("totalLag")
        intent = INTENT_VERDICTS.get(str(verdict.get("verdict")))
        if bad:
            lag = (False, bad[0]["code"], "; ".join(r["message"] for r in bad)[:500])
        elif intent is not None:
            said = [r.get("message", "") for r in verdict.get("reasons", []) if r.get("code") in _INTENT_CODES]
            lag = (True, intent, ("; ".join(said) or f"total lag {total}")[:500])
        else:
            lag = (True, "LagOK", f"total lag {total}, Burrow status OK")
    if verdict.get("balance") is None:
        balance: tuple[bool | None, str, str] = (None, "NotApplicable", "no partitions to judge")
    else:
        bad = [r for r in reasons if r.get("code") in BALANCE_CODES]
        balance = (
            (False, bad[0]["code"], "; ".join(r["message"] for r in bad)[:500])
            if bad
            else (True, "Balanced", "traffic and assignment within thresholds")
        )
    return CheckConditions(
        lag, balance, producer_condition(verdict.get("producer")), producer_metrics.unserved_tasks(verdict)
    )


def producer_condition(block: Any) -> tuple[bool | None, str, str] | None:
    """ProducerHealthy from the verdict's producer block (None: the metrics were not read)."""
    if not isinstance(block, Mapping):
        return None
    tasks = [t for t in block.get("tasks") or [] if isinstance(t, Mapping)]
    effects = [str((t.get("effect") or {}).get("message", "")) for t in tasks if isinstance(t.get("effect"), Mapping)]
    diagnosed = [t["diagnosis"] for t in tasks if isinstance(t.get("diagnosis"), Mapping)]
    if diagnosed:
        return (False, "ProducerPressure", str(diagnosed[0].get("message", ""))[:1500])
    unserved = list(producer_metrics.unserved_tasks({"producer": block}))
    if unserved:
        # the reconciler words it with what it does about it (planning.producer_metrics.decide)
        return (
            None,
            producer_metrics.NOT_SERVED,
            f"the workers' metrics serve task(s) {unserved} but not their producers'",
        )
    if not tasks:
        return (None, "NotMeasured", "the workers' metrics served no figures for this connector's tasks")
    said = f"{len(tasks)} task(s): producers keep up, offset commits keep up"
    return (True, "NoProducerPressure", ("; ".join([said, *effects]))[:1500])


def producer_summary(verdict: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What ``status.lastCheck.producer`` shows: the first diagnosis, its recommendation as a
    ready patch of the Connector, and the effect of the last change."""
    block = (verdict or {}).get("producer")
    if not isinstance(block, Mapping):
        return None
    summary: dict[str, Any] = {}
    for task in block.get("tasks") or []:
        if not isinstance(task, Mapping):
            continue
        diagnosis = task.get("diagnosis")
        if isinstance(diagnosis, Mapping) and "diagnosis" not in summary:
            summary["diagnosis"] = str(diagnosis.get("message", ""))[:1500]
            summary["task"] = task.get("task")
            rec = diagnosis.get("recommendation")
            if isinstance(rec, Mapping):
                summary["recommendedPatch"] = rec.get("patch")
                summary["recommendedProperties"] = rec.get("properties")
        effect = task.get("effect")
        if isinstance(effect, Mapping) and "effect" not in summary:
            summary["effect"] = str(effect.get("message", ""))[:1500]
    return summary


def summarize_reasons(verdict: Mapping[str, Any] | None, limit: int = 10) -> list[str]:
    if not verdict:
        return []
    return [
        f"{r.get('severity')} {r.get('code')}: {r.get('message')}"[:300] for r in verdict.get("reasons", [])[:limit]
    ]
