"""The check's arguments and how its verdict becomes conditions.

The operator and the job never import each other, so the flags the operator writes are parsed
here by the job's own argument parser: a flag one side renames fails this test.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from connectops.adapters.kube import KubeClient
from connectops.models.checks import CheckSpec
from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.planning.checks import (
    BUILTIN_DEFAULTS,
    CheckContext,
    CheckTarget,
    batch_group,
    client_config_env,
    conditions_for,
    job_arguments,
    producer_summary,
    spark_application,
)
from connectops.reconcilers.checks import CheckRunner
from connectops.settings import Settings
from connectops_check.cli import basic_auth, client_settings, main, mask, parser

TARGET = CheckTarget(
    namespace="ns",
    owner_kind="Connector",
    owner_name="sink",
    owner_uid="u",
    owner_api_version="connectops.io/v1alpha1",
    connector="sink",
    connect_url="http://connect:8083",
    bootstrap="kafka:9092",
)


def test_thresholds_and_intent_reach_the_job() -> None:
    check = CheckSpec(
        maxLag=100,
        allowedLag=5,
        minimumComplete=0.5,
        maxLagWhilePaused=1000,
        maxTimeLagWhilePausedSeconds=1800,
    )
    args = job_arguments(TARGET, check, "sink-check-g2", CheckContext(desired_state="paused", after_reset="toEarliest"))
    parsed = parser().parse_args(args)
    assert (parsed.max_lag, parsed.allowed_lag, parsed.minimum_complete) == (100, 5, 0.5)
    assert (parsed.max_lag_while_paused, parsed.max_time_lag_while_paused) == (1000, 1800.0)
    assert (parsed.desired_state, parsed.after_reset) == ("paused", "toEarliest")
    assert parsed.output_configmap == ("ns", "sink-check-g2-verdict")


def test_defaults_leave_the_job_defaults() -> None:
    parsed = parser().parse_args(job_arguments(TARGET, CheckSpec(), "a"))
    assert (parsed.desired_state, parsed.after_reset, parsed.max_lag_while_paused) == ("running", None, None)
    assert (parsed.allowed_lag, parsed.minimum_complete) == (0, 0.0)


def _verdict(level: str, *reasons: tuple[str, str, str]) -> dict[str, object]:
    return {
        "verdict": level,
        "reasons": [{"severity": s, "code": c, "message": m} for s, c, m in reasons],
        "headline": {"totalLag": 140},
        "lag": {"total": 140},
        "balance": {"traffic": {}},
    }


def test_paused_by_spec_is_lag_healthy_with_the_lag_it_has() -> None:
    verdict = _verdict(
        "PAUSED",
        ("INFO", "BURROW_ERR", "Burrow-style evaluation is ERR (paused on purpose)"),
        ("INFO", "CONNECTOR_PAUSED", "connector is paused on purpose: lag 140 records, 140s behind so far"),
    )
    lag = conditions_for("COMPLETED", verdict).lag
    assert lag == (True, "PausedBySpec", "connector is paused on purpose: lag 140 records, 140s behind so far")


def test_catching_up_and_past_the_paused_threshold() -> None:
    catching = _verdict("CATCHING_UP", ("INFO", "CATCHING_UP", "catching up after toEarliest: lag 640, ETA 160s"))
    assert conditions_for("COMPLETED", catching).lag[:2] == (True, "CatchingUp")
    over = _verdict(
        "UNHEALTHY",
        ("UNHEALTHY", "LAG_WHILE_PAUSED_ABOVE_MAX", "paused with lag 140 records, above maxLagWhilePaused 100"),
    )
    assert conditions_for("COMPLETED", over).lag[:2] == (False, "LAG_WHILE_PAUSED_ABOVE_MAX")
    behind = _verdict("DEGRADED", ("DEGRADED", "NOT_CATCHING_UP", "after toEarliest: the consumer is not gaining"))
    assert conditions_for("COMPLETED", behind).lag[:2] == (False, "NOT_CATCHING_UP")


def test_worker_metrics_and_baseline_reach_the_job() -> None:
    target = CheckTarget(**{**TARGET.__dict__, "metrics_urls": ("http://w0:9404/metrics", "http://w1:9404/metrics")})
    args = job_arguments(target, CheckSpec(), "src-check-g3", CheckContext(baseline_config_map="src-check-g2-verdict"))
    parsed = parser().parse_args(args)
    assert parsed.metrics_url == ["http://w0:9404/metrics", "http://w1:9404/metrics"]
    assert (parsed.offset_flush_timeout_ms, parsed.offset_flush_interval_ms) == (5000, 60000)
    assert parsed.baseline_configmap == ("ns", "src-check-g2-verdict")
    # without metrics there is nothing to compare: no baseline argument
    assert "--baseline-configmap" not in job_arguments(TARGET, CheckSpec(), "a", CheckContext(baseline_config_map="b"))


def test_producer_pressure_becomes_a_condition_and_a_ready_patch() -> None:
    patch = {"spec": {"producerOverrides": {"batchSize": 327680}}}
    verdict = {
        **_verdict("UNHEALTHY", ("UNHEALTHY", "PRODUCER_PRESSURE", "task 0: commits fail")),
        "lag": None,
        "producer": {
            "tasks": [
                {
                    "task": 0,
                    "diagnosis": {
                        "message": "task 0: commits fail. Fix: raise producer.override.batch.size to 327,680",
                        "recommendation": {"patch": patch, "properties": {"producer.override.batch.size": "327680"}},
                    },
                    "effect": None,
                }
            ]
        },
    }
    assert conditions_for("COMPLETED", verdict).producer == (
        False,
        "ProducerPressure",
        "task 0: commits fail. Fix: raise producer.override.batch.size to 327,680",
    )
    summary = producer_summary(verdict)
    assert summary is not None
    assert summary["recommendedPatch"] == patch
    cured = {
        **verdict,
        "producer": {"tasks": [{"task": 0, "diagnosis": None, "effect": {"message": "task 0: improved"}}]},
    }
    assert conditions_for("COMPLETED", cured).producer == (
        True,
        "NoProducerPressure",
        "1 task(s): producers keep up, offset commits keep up; task 0: improved",
    )
    assert conditions_for("COMPLETED", _verdict("HEALTHY")).producer is None  # metrics not read


def test_the_state_a_reset_leaves_its_connector_in() -> None:
    from connectops.models.connector import ConnectorSpec
    from connectops.models.offset_reset import OffsetResetSpec
    from connectops.reconcilers.offset_reset import _state_after

    paused = ConnectorSpec.model_validate({"clusterRef": {"name": "c"}, "class": "x", "state": "paused"})
    reset = OffsetResetSpec.model_validate({"connectorRef": {"name": "s"}, "action": "toEarliest"})
    assert _state_after(reset, paused) == "paused"
    assert _state_after(reset, None) == "running"
    stopped = OffsetResetSpec.model_validate({"connectorRef": {"name": "s"}, "resume": "stopped"})
    assert _state_after(stopped, paused) == "stopped"
    args = job_arguments(TARGET, CheckSpec(), "r", CheckContext(desired_state=_state_after(reset, paused)))
    assert parser().parse_args(args).desired_state == "paused"


# -- the ConnectCluster's Kafka client settings reach the job's admin client ------------------------

#: what the kubelet does with the driver's env: secretKeyRef -> the Secret's value
SECRETS = {("kafka-creds", "password"): "pa55-word-from-the-secret", ("kafka-creds", "user"): "svc-check"}


def _driver_environment(manifest: dict[str, Any]) -> dict[str, str]:
    return {
        env["name"]: SECRETS[(env["valueFrom"]["secretKeyRef"]["name"], env["valueFrom"]["secretKeyRef"]["key"])]
        for env in manifest["spec"]["driver"].get("env", [])
    }


class _Recorder:
    """The one KubeClient call a check launch makes: the SparkApplication it creates."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def create_object(self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any]) -> None:
        self.created.append(body)


async def test_kafka_config_and_config_from_reach_the_admin_client_never_the_manifest() -> None:
    cluster = ConnectClusterSpec.model_validate(
        {
            "restUrl": "http://connect:8083",
            "kafka": {
                "bootstrapServers": "kafka:9093",
                "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                "configFrom": {
                    "sasl.password": {"name": "kafka-creds", "key": "password"},
                    "sasl.username": {"name": "kafka-creds", "key": "user"},
                },
            },
        }
    )
    kube = _Recorder()
    runner = CheckRunner(cast(KubeClient, kube), Settings(), BUILTIN_DEFAULTS)
    owner = {
        "apiVersion": "connectops.io/v1alpha1",
        "kind": "Connector",
        "metadata": {"name": "sink", "uid": "u"},
    }
    last = await runner.launch(
        namespace="ns", owner=owner, suffix="g1", connector="sink", cluster=cluster, check=CheckSpec(), trigger="t"
    )
    assert last is not None
    assert last.state == "PENDING"
    (manifest,) = kube.created

    # the job, in a driver pod whose env the kubelet filled from the Secret, builds this client
    parsed = parser().parse_args(manifest["spec"]["arguments"])
    settings, secrets = client_settings(parsed.client_config, parsed.client_config_env, _driver_environment(manifest))
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.password": "pa55-word-from-the-secret",
        "sasl.username": "svc-check",
    }
    assert sorted(secrets) == ["pa55-word-from-the-secret", "svc-check"]
    # the manifest names the Secret keys; the executors (which never reach Kafka) get nothing
    assert manifest["spec"]["driver"]["env"] == [
        {
            "name": "CONNECTOPS_KAFKA_SASL_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "kafka-creds", "key": "password"}},
        },
        {
            "name": "CONNECTOPS_KAFKA_SASL_USERNAME",
            "valueFrom": {"secretKeyRef": {"name": "kafka-creds", "key": "user"}},
        },
    ]
    assert "env" not in manifest["spec"]["executor"]
    # a later launch writes the same manifest: the env names do not change between reconciles
    again = _Recorder()
    await CheckRunner(cast(KubeClient, again), Settings(), BUILTIN_DEFAULTS).launch(
        namespace="ns", owner=owner, suffix="g1", connector="sink", cluster=cluster, check=CheckSpec(), trigger="t"
    )
    assert again.created == [manifest]


async def test_basic_auth_reaches_the_job_through_env_vars_never_its_arguments() -> None:
    """The REST API's and the metrics endpoints' credentials are Secret references in the driver's
    env; the arguments name the env vars, and a URL's user-info (which the schema refuses, but an
    object stored under an older CRD may hold) is left out of them."""
    cluster = ConnectClusterSpec.model_validate(
        {
            "restUrl": "http://connect:8083",
            "basicAuth": {"secretName": "connect-creds"},
            "kafka": {"bootstrapServers": "kafka:9093"},
            "workerMetrics": {
                "urls": ["http://connect-0.connect:9404/metrics"],
                "basicAuth": {"secretName": "metrics-creds", "usernameKey": "u", "passwordKey": "p"},
            },
        }
    )
    # as read from an object the API server admitted before its CRD refused user-info
    cluster = cluster.model_copy(update={"rest_url": "http://old:hunter22@connect:8083"})
    kube = _Recorder()
    owner = {"apiVersion": "connectops.io/v1alpha1", "kind": "Connector", "metadata": {"name": "src", "uid": "u"}}
    await CheckRunner(cast(KubeClient, kube), Settings(), BUILTIN_DEFAULTS).launch(
        namespace="ns", owner=owner, suffix="g1", connector="src", cluster=cluster, check=CheckSpec(), trigger="t"
    )
    (manifest,) = kube.created
    arguments = manifest["spec"]["arguments"]
    assert "hunter22" not in str(manifest)
    assert "--connect-url=http://connect:8083" in arguments
    assert manifest["spec"]["driver"]["env"] == [
        {
            "name": "CONNECTOPS_CONNECT_USERNAME",
            "valueFrom": {"secretKeyRef": {"name": "connect-creds", "key": "username"}},
        },
        {
            "name": "CONNECTOPS_CONNECT_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "connect-creds", "key": "password"}},
        },
        {"name": "CONNECTOPS_METRICS_USERNAME", "valueFrom": {"secretKeyRef": {"name": "metrics-creds", "key": "u"}}},
        {"name": "CONNECTOPS_METRICS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "metrics-creds", "key": "p"}}},
    ]
    assert "env" not in manifest["spec"]["executor"]
    # the job, in a driver pod whose env the kubelet filled from the Secrets
    environ = {
        "CONNECTOPS_CONNECT_USERNAME": "ops",
        "CONNECTOPS_CONNECT_PASSWORD": "connect-pw-1",
        "CONNECTOPS_METRICS_USERNAME": "scraper",
        "CONNECTOPS_METRICS_PASSWORD": "metrics-pw-2",
    }
    parsed = parser().parse_args(arguments)
    assert basic_auth("--connect-auth-env", parsed.connect_auth_env, environ) == ("ops", "connect-pw-1")
    assert basic_auth("--metrics-auth-env", parsed.metrics_auth_env, environ) == ("scraper", "metrics-pw-2")
    with pytest.raises(ValueError, match="CONNECTOPS_METRICS_PASSWORD") as missing:
        basic_auth("--metrics-auth-env", parsed.metrics_auth_env, {"CONNECTOPS_METRICS_USERNAME": "scraper"})
    assert "scraper" not in str(missing.value)
    # different credentials, different batches: a batch's driver has one env
    plain = cluster.model_copy(update={"basic_auth": None})
    runner = CheckRunner(cast(KubeClient, _Recorder()), Settings(), BUILTIN_DEFAULTS)
    with_auth, without = (runner._target("ns", owner, "src", c) for c in (cluster, plain))
    assert isinstance(with_auth, CheckTarget)
    assert isinstance(without, CheckTarget)
    assert batch_group(with_auth, BUILTIN_DEFAULTS) != batch_group(without, BUILTIN_DEFAULTS)


def test_the_job_masks_what_it_read_from_the_env_and_any_urls_credentials() -> None:
    text = "GET http://user:hunter22@connect:8083/x failed; password connect-pw-1"
    assert mask(text, ["connect-pw-1"]) == "GET http://[redacted]@connect:8083/x failed; password [redacted]"


def test_without_kafka_settings_the_job_gets_no_client_flags() -> None:
    args = job_arguments(TARGET, CheckSpec(), "a")
    parsed = parser().parse_args(args)
    assert (parsed.client_config, parsed.client_config_env) == ([], [])
    assert "env" not in spark_application(TARGET, CheckSpec(), BUILTIN_DEFAULTS, "a", "t")["spec"]["driver"]


def test_settings_whose_env_names_would_clash_get_distinct_names() -> None:
    names = client_config_env(["sasl.password", "sasl_password", "ssl.key.password"])
    assert names["ssl.key.password"] == "CONNECTOPS_KAFKA_SSL_KEY_PASSWORD"
    assert names["sasl.password"] != names["sasl_password"]
    assert names["sasl.password"].startswith("CONNECTOPS_KAFKA_SASL_PASSWORD_")
    assert client_config_env(["sasl_password", "sasl.password"]) == {
        k: names[k] for k in ("sasl.password", "sasl_password")
    }


def test_a_missing_env_var_is_a_clear_argument_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONNECTOPS_KAFKA_SASL_PASSWORD", raising=False)
    argv = ["--bootstrap", "k:9092", "--connect-url", "http://c", "--connector", "s"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--client-config-env", "sasl.password=CONNECTOPS_KAFKA_SASL_PASSWORD"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--client-config-env sasl.password=CONNECTOPS_KAFKA_SASL_PASSWORD" in err
    assert "environment variable CONNECTOPS_KAFKA_SASL_PASSWORD is not set" in err
    # one setting, two sources: refused rather than one silently winning
    monkeypatch.setenv("CONNECTOPS_KAFKA_SASL_PASSWORD", "x")
    with pytest.raises(SystemExit):
        main(
            [
                *argv,
                "--client-config",
                "sasl.password=y",
                "--client-config-env",
                "sasl.password=CONNECTOPS_KAFKA_SASL_PASSWORD",
            ]
        )
    assert "sasl.password is also set by --client-config" in capsys.readouterr().err


def test_mask_hides_the_values_read_from_the_environment() -> None:
    text = 'Invalid value "pa55-word" for configuration property "sasl.password" (pa55-word-2)'
    assert mask(text, ["pa55-word", "pa55-word-2", "on"]) == (
        'Invalid value "[redacted]" for configuration property "sasl.password" ([redacted])'
    )


@pytest.mark.parametrize("name", ["--samples", "-x", "a b 'c' \"d\"", "--each", "x;rm -rf /", "--output-configmap"])
def test_any_connector_name_reaches_the_job_as_a_name(name: str) -> None:
    """A connector name is the user's: alone or inside a batch member's shell-quoted arguments,
    the job parses it back as the connector and nothing else (no option, no second member)."""
    import copy
    import dataclasses
    import shlex

    from connectops.planning.checks import BatchMember, batch_application

    target = dataclasses.replace(TARGET, connector=name)
    alone = parser().parse_args(job_arguments(target, CheckSpec(samples=3), "a"))
    assert (alone.connector, alone.samples, alone.each) == (name, 3, [])
    other = dataclasses.replace(TARGET, connector="other", owner_uid="u2")
    manifest = batch_application(
        [BatchMember(target, CheckSpec(samples=3), "v1"), BatchMember(other, CheckSpec(), "v2")],
        BUILTIN_DEFAULTS,
        "batch",
        "main",
    )
    common = parser().parse_args(manifest["spec"]["arguments"])
    assert len(common.each) == 2
    members = [parser().parse_args(shlex.split(each), namespace=copy.copy(common)) for each in common.each]
    assert [(m.connector, m.samples, m.output_configmap) for m in members] == [
        (name, 3, ("ns", "v1")),
        ("other", 6, ("ns", "v2")),
    ]
