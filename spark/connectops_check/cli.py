"""``connectops-check``: collect (or replay) a snapshot, compute on Spark, print the verdict.

Exit status says whether the JOB ran, not what it found: 0 with any verdict (the operator
reads the verdict from the ConfigMap or the output file), 1 when the job itself failed
(collection impossible, Spark error, output not written), 2 for bad arguments. A verdict
that could not be delivered is a failed job, since nobody would ever read it.

``--each`` checks several connectors in one run (the operator batches the checks of one Connect
cluster into one SparkApplication, so 500 changes do not start 500 drivers): each value holds one
connector's arguments, parsed over the common ones exactly as if given with them. The connectors
are checked concurrently in one SparkSession: sampling is waiting, so a batch takes about as long
as its slowest member, not the sum. One member's failure (its connector unreachable, say) is
written as that member's verdict document, ``{"verdict": null, "error": ...}``, and does not fail
the others; the run exits 1 only when some verdict could not be delivered.

Why ~500 lines in one module: it is the job's whole command line (the options, their checks
against the shared thresholds, ``--each``'s parsing over the common ones, and the exit status),
and the options are read in one place so that the operator's SparkApplication arguments
(``connectops.planning.checks``) have one counterpart to be held to.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from connectops_check.document import FailedCheck, Settings
from connectops_check.serialize import document
from connectops_check.snapshot import ConnectorKind, Scrape, Snapshot
from connectops_check.urls import redact_userinfo
from connectops_rules import connect, thresholds

CONFIGMAP_KEY = "verdict.json"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float:
    """``10s``, ``500ms``, ``2m``, ``1h`` or a bare number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 10s, 500ms, 2m)")
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def client_settings(
    plain: Sequence[tuple[str, str]], from_env: Sequence[tuple[str, str]], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The admin client's settings: ``--client-config`` as given, ``--client-config-env`` read from
    the environment (a Secret's value the driver pod got through ``secretKeyRef``); and the values
    read there, to be masked in every text the job writes. ValueError names the setting and the
    variable, never a value."""
    settings = dict(plain)
    secrets: list[str] = []
    for setting, variable in from_env:
        if setting in settings:
            raise ValueError(f"--client-config-env {setting}={variable}: {setting} is also set by --client-config")
        if variable not in environ:
            raise ValueError(
                f"--client-config-env {setting}={variable}: environment variable {variable} is not set "
                f"(the driver pod's env should carry it from the ConnectCluster's configFrom Secret)"
            )
        settings[setting] = environ[variable]
        secrets.append(environ[variable])
    return settings, secrets


def mask(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret value replaced (a Kafka error may quote a setting's value), and
    the user-info of every URL in it (an HTTP error may quote the URL it called). Values under 4
    characters are left, as the operator's Redactor does: they occur in ordinary text by accident
    ("1", "true") and masking them would garble it without protecting anything."""
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return redact_userinfo(text)


def _env_pair(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise argparse.ArgumentTypeError(f"expected USER_ENV_VAR:PASSWORD_ENV_VAR, got {text!r}")
    return user, password


def basic_auth(flag: str, variables: tuple[str, str] | None, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The (user, password) of a basic auth whose values are in these environment variables (the
    driver pod's env, from the ConnectCluster's Secret). ValueError names the variables, never a
    value."""
    if variables is None:
        return None
    missing = [v for v in variables if v not in environ]
    if missing:
        raise ValueError(
            f"{flag} {':'.join(variables)}: environment variable(s) {', '.join(missing)} not set "
            "(the driver pod's env should carry them from the ConnectCluster's basicAuth Secret)"
        )
    return environ[variables[0]], environ[variables[1]]


def _configmap_ref(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="connectops-check",
        description="Lag (Burrow-style) and partition balance verdict for one Kafka Connect connector.",
    )
    src = p.add_argument_group("input (collect live, or replay --snapshot)")
    src.add_argument("--bootstrap", help="Kafka bootstrap servers the sink reads from")
    src.add_argument("--connect-url", help="Kafka Connect REST URL")
    src.add_argument("--connector", help="connector name")
    src.add_argument("--samples", type=int, default=12, help="number of samples (default 12)")
    src.add_argument("--interval", type=duration_s, default=10.0, help="time between samples (default 10s)")
    src.add_argument(
        "--client-config",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka setting for the admin client (repeatable)",
    )
    src.add_argument(
        "--client-config-env",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=ENV_VAR",
        help=(
            "librdkafka setting for the admin client whose value is in this environment variable "
            "(repeatable): a credential never appears in the arguments"
        ),
    )
    src.add_argument("--source-bootstrap", help="MirrorMaker 2 source cluster (default: from the connector config)")
    src.add_argument(
        "--source-client-config",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka setting for the MirrorMaker 2 source cluster's admin client (repeatable)",
    )
    src.add_argument(
        "--kind",
        choices=[k.value for k in ConnectorKind],
        default=None,
        help=(
            "measure the connector as this kind (default: from its class name, or MirrorMaker 2 when "
            "its stored offsets all have MM2's shape): for MM2 forks whose offsets are not stored yet"
        ),
    )
    src.add_argument(
        "--traffic-window",
        type=duration_s,
        default=None,
        help="traffic window length ending at the last sample (default: the sampling span)",
    )
    src.add_argument(
        "--metrics-url",
        action="append",
        default=[],
        metavar="URL",
        help="a worker's Prometheus endpoint (repeatable): source tasks' producer pressure is diagnosed",
    )
    src.add_argument(
        "--connect-auth-env",
        type=_env_pair,
        metavar="USER_ENV:PASSWORD_ENV",
        help="basic auth for --connect-url, from these environment variables (never in the arguments)",
    )
    src.add_argument(
        "--metrics-auth-env",
        type=_env_pair,
        metavar="USER_ENV:PASSWORD_ENV",
        help="basic auth for every --metrics-url, from these environment variables (never in the arguments)",
    )
    src.add_argument(
        "--offset-flush-timeout-ms",
        type=int,
        default=connect.OFFSET_FLUSH_TIMEOUT_MS,
        help="the workers' offset.flush.timeout.ms",
    )
    src.add_argument(
        "--offset-flush-interval-ms",
        type=int,
        default=connect.OFFSET_FLUSH_INTERVAL_MS,
        help="the workers' offset.flush.interval.ms",
    )
    src.add_argument("--baseline-verdict", type=Path, help="a previous verdict file: its figures are the 'before'")
    src.add_argument(
        "--baseline-configmap",
        type=_configmap_ref,
        metavar="NAMESPACE/NAME",
        help="a previous check's verdict ConfigMap: its figures are the 'before' (missing: no comparison)",
    )
    src.add_argument("--snapshot", type=Path, help="replay this snapshot file instead of collecting")
    src.add_argument("--save-snapshot", type=Path, help="also write the collected snapshot to this file")
    th = p.add_argument_group("thresholds")
    for threshold in (*thresholds.CR, *thresholds.JOB_ONLY):
        # a duration's value is parsed with its unit ("30m"); the others are plain numbers
        parse: Callable[[str], float] = duration_s if threshold.unit else threshold.kind
        default = "" if threshold.default is None else f" (default {threshold.default})"
        th.add_argument(
            threshold.flag, dest=threshold.dest, type=parse, default=threshold.default, help=threshold.help + default
        )
    intent = p.add_argument_group("what the connector is meant to be doing")
    intent.add_argument(
        "--desired-state",
        choices=["running", "paused", "stopped"],
        default=Settings().desired_state,
        help="the state its spec asks for: paused/stopped verdicts are PAUSED/STOPPED, not UNHEALTHY",
    )
    intent.add_argument("--reset-in-progress", action="store_true", help="an offset reset holds it stopped")
    intent.add_argument("--after-reset", metavar="ACTION", help="the check follows this offset reset action")
    out = p.add_argument_group("spark and output")
    out.add_argument(
        "--master",
        default="local[*]",
        help="Spark master (default local[*]; 'none' keeps what spark-submit set)",
    )
    out.add_argument(
        "--driver-memory",
        help="driver JVM heap for local runs, e.g. 2g (Spark's default 1g holds about 1M partition-samples)",
    )
    out.add_argument("--output", type=Path, help="write the verdict JSON to this file")
    out.add_argument(
        "--each",
        action="append",
        default=[],
        metavar="ARGUMENTS",
        help=(
            "check one more connector in this run (repeatable): its own arguments, shell-quoted, "
            'over the common ones (e.g. "--connector a --output-configmap ns/a-verdict")'
        ),
    )
    out.add_argument(
        "--parallelism",
        type=int,
        default=16,
        help="connectors of an --each run checked at once (default 16)",
    )
    out.add_argument(
        "--output-configmap",
        type=_configmap_ref,
        metavar="NAMESPACE/NAME",
        help=f"write the verdict JSON to this ConfigMap, key {CONFIGMAP_KEY}",
    )
    # the values read by --client-config-env and the passwords of the *-auth-env, for masking,
    # and the basic auths (main fills them)
    p.set_defaults(secrets=[], connect_auth=None, metrics_auth=None)
    return p


def _snapshot(args: argparse.Namespace) -> Snapshot:
    if args.snapshot is not None:
        return Snapshot.load(args.snapshot)
    from connectops_check.collect import collect_snapshot, now_ms

    window_start = None
    if args.traffic_window is not None:
        window_start = now_ms() + int(1000 * (args.samples - 1) * args.interval - 1000 * args.traffic_window)
    snapshot = collect_snapshot(
        args.bootstrap,
        args.connect_url,
        args.connector,
        args.samples,
        args.interval,
        dict(args.client_config),
        source_bootstrap=args.source_bootstrap,
        source_client_config=dict(args.source_client_config),
        window_start_ms=window_start,
        metrics_urls=args.metrics_url,
        kind=None if args.kind is None else ConnectorKind(args.kind),
        connect_auth=args.connect_auth,
        metrics_auth=args.metrics_auth,
    )
    # the notes quote Kafka's errors, which reach the verdict, the ConfigMap and the owner's status
    snapshot.notes[:] = [mask(note, args.secrets) for note in snapshot.notes]
    if args.save_snapshot is not None:
        snapshot.save(args.save_snapshot)
    return snapshot


def _baseline(args: argparse.Namespace) -> list[Scrape]:
    """The previous check's scrapes; a missing or unreadable baseline only means no comparison."""
    from connectops_check.producer_check import baseline_scrapes

    previous: Any = None
    try:
        if args.baseline_verdict is not None:
            previous = json.loads(args.baseline_verdict.read_text(encoding="utf-8"))
        elif args.baseline_configmap is not None:
            previous = read_configmap(*args.baseline_configmap)
        return baseline_scrapes(previous if isinstance(previous, dict) else None)
    except Exception as error:  # the comparison is optional: never fail the check over it
        print(f"connectops-check: no baseline ({type(error).__name__}: {str(error)[:300]})", file=sys.stderr)
        return []


def read_configmap(namespace: str, name: str) -> dict[str, Any] | None:
    """The verdict JSON in a ConfigMap, None when there is none."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    _load_kube_config()
    try:
        cm = client.CoreV1Api().read_namespaced_config_map(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    text = (cm.data or {}).get(CONFIGMAP_KEY)
    value = json.loads(text) if text else None
    return value if isinstance(value, dict) else None


def _load_kube_config() -> None:
    from kubernetes import config

    # the kubernetes client leaves its config loaders unannotated
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]


def write_configmap(namespace: str, name: str, verdict_json: str) -> None:
    """Creates or updates the ConfigMap the operator reads (in-cluster config, else KUBECONFIG)."""
    try:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
    except ImportError as error:
        raise RuntimeError("--output-configmap needs the kubernetes Python client") from error
    _load_kube_config()
    api = client.CoreV1Api()
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={"app.kubernetes.io/managed-by": "connectops-check"}),
        data={CONFIGMAP_KEY: verdict_json},
    )
    try:
        api.patch_namespaced_config_map(name, namespace, body)
    except ApiException as error:
        if error.status != 404:
            raise
        api.create_namespaced_config_map(namespace, body)


SparkProvider = Callable[[], Any]


def _spark_provider(args: argparse.Namespace) -> SparkProvider:
    """One SparkSession for the whole run, started by the first member that needs it (a batch of
    source connectors never starts a JVM); getOrCreate is not meant to race with itself."""
    lock = threading.Lock()
    made: list[Any] = []

    def provide() -> Any:
        from connectops_check.job import spark_session

        with lock:
            if not made:
                made.append(spark_session(None if args.master == "none" else args.master, args.driver_memory))
            return made[0]

    return provide


def run(args: argparse.Namespace, spark_provider: SparkProvider | None = None) -> dict[str, Any]:
    from connectops_check.job import needs_spark, run_check

    settings = Settings(
        max_lag=args.max_lag,
        max_skew=args.max_skew,
        max_gini=args.max_gini,
        assignment_threshold=args.assignment_threshold,
        min_traffic=args.min_traffic,
        window=args.window,
        top_n=args.top_n,
        allowed_lag=args.allowed_lag,
        minimum_complete=args.minimum_complete,
        desired_state=args.desired_state,
        reset_in_progress=args.reset_in_progress,
        after_reset=args.after_reset,
        max_lag_while_paused=args.max_lag_while_paused,
        max_time_lag_while_paused_s=args.max_time_lag_while_paused,
        offset_flush_timeout_ms=args.offset_flush_timeout_ms,
        offset_flush_interval_ms=args.offset_flush_interval_ms,
    )
    snapshot = _snapshot(args)
    baseline = _baseline(args)
    spark = None
    if needs_spark(snapshot):
        spark = (spark_provider or _spark_provider(args))()
    return run_check(snapshot, settings, spark, baseline)


def _checked(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` validated, with the client settings read (p.error exits 2 on anything wrong)."""
    if args.snapshot is None and not (args.bootstrap and args.connect_url and args.connector):
        p.error("either --snapshot, or all of --bootstrap, --connect-url and --connector")
    if args.samples < 1:
        p.error("--samples must be at least 1")
    for threshold in (*thresholds.CR, *thresholds.JOB_ONLY):
        problem = threshold.problem(getattr(args, threshold.dest))
        if problem is not None:
            p.error(problem)
    try:
        args.client_config, args.secrets = client_settings(args.client_config, args.client_config_env, os.environ)
        args.connect_auth = basic_auth("--connect-auth-env", args.connect_auth_env, os.environ)
        args.metrics_auth = basic_auth("--metrics-auth-env", args.metrics_auth_env, os.environ)
    except ValueError as error:
        p.error(str(error))
    args.secrets = [*args.secrets, *(auth[1] for auth in (args.connect_auth, args.metrics_auth) if auth)]
    return args


def _deliver(args: argparse.Namespace, text: str) -> None:
    if args.output is not None:
        args.output.write_text(text + "\n", encoding="utf-8")
    if args.output_configmap is not None:
        namespace, name = args.output_configmap
        write_configmap(namespace, name, text)


def _members(p: argparse.ArgumentParser, common: argparse.Namespace) -> list[argparse.Namespace]:
    members = []
    for text in common.each:
        try:
            words = shlex.split(text)
        except ValueError as error:
            p.error(f"--each {text!r}: {error}")
        # parsed over a copy of the common arguments: a member's own value wins, its repeatable
        # settings add to the common ones (argparse copies a list before appending to it)
        member = p.parse_args(words, namespace=copy.copy(common))
        if member.each != common.each:
            p.error(f"--each {text!r}: a member cannot hold --each")
        if member.output is None and member.output_configmap is None:
            p.error(f"--each {text!r}: every member needs --output or --output-configmap")
        members.append(_checked(p, member))
    return members


def _run_member(args: argparse.Namespace, spark_provider: SparkProvider) -> tuple[dict[str, Any], bool]:
    """The member's verdict (its error document when the check failed) and whether it was
    delivered."""
    try:
        verdict = run(args, spark_provider)
    except Exception as error:  # this member failed: its verdict says why, the others go on
        why = f"{type(error).__name__}: {mask(str(error), args.secrets)}"[:2000]
        print(f"connectops-check: {args.connector or args.snapshot}: {why}", file=sys.stderr)
        verdict = document(FailedCheck(connector=args.connector, error=why))
    try:
        _deliver(args, json.dumps(verdict, indent=2, sort_keys=False))
    except Exception as error:
        print(
            f"connectops-check: {args.connector or args.snapshot}: verdict not delivered: "
            f"{type(error).__name__}: {mask(str(error), args.secrets)}",
            file=sys.stderr,
        )
        return verdict, False
    return verdict, True


def _main_batch(p: argparse.ArgumentParser, common: argparse.Namespace) -> int:
    if common.parallelism < 1:
        p.error("--parallelism must be at least 1")
    members = _members(p, common)
    provider = _spark_provider(common)
    with ThreadPoolExecutor(max_workers=min(common.parallelism, len(members))) as pool:
        outcomes = list(pool.map(lambda member: _run_member(member, provider), members))
    print(json.dumps([verdict for verdict, _ in outcomes], indent=2, sort_keys=False))
    return 0 if all(delivered for _, delivered in outcomes) else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.each:
        return _main_batch(p, args)
    args = _checked(p, args)
    try:
        verdict = run(args)
        text = json.dumps(verdict, indent=2, sort_keys=False)
        _deliver(args, text)
    except Exception as error:  # the job failed: say why, exit non-zero
        print(f"connectops-check: {type(error).__name__}: {mask(str(error), args.secrets)}", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
