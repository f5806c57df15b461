"""The RBAC proof's machinery (tests/helm/test_rbac_proof.py): install the chart's RBAC for one
namespace, log in as the chart's ServiceAccount, run the operator process with that identity, and
drive one end-to-end scenario while recording what happened.

A scenario never fails by itself: it records :class:`Observation` facts (bounded waits, each
"did X happen within its bound") and the test compares them with what it expects for the rule or
verb that was left out. It can also run outside pytest against ``python -m tests.env.servers up``
(see :func:`Env.from_env_json`), which is how the per-verb sweep was first explored.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import httpx
import kubernetes
import yaml
from kubernetes.client.exceptions import ApiException

from connectops.failpoints import EXIT_CODE
from tests.e2e.conftest import OPERATOR_ENV, K8s
from tests.env.servers import ManagedProcess
from tests.helm.chart import CHART_DIR, Obj, apply, one, render

GROUP: Final = "connectops.io"
VERSION: Final = "v1alpha1"
SPARK_GROUP: Final = "sparkoperator.k8s.io"
SPARK_VERSION: Final = "v1beta2"
SPARK_PLURAL: Final = "sparkapplications"
SOURCE: Final = "org.apache.kafka.connect.file.FileStreamSourceConnector"
RBAC_KINDS: Final = frozenset({"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"})
CLUSTER_KINDS: Final = frozenset({"ClusterRole", "ClusterRoleBinding"})
#: the operator crashes right after writing the backup ConfigMap, before recording the step (the
#: restarted operator re-runs the step, so the backup is written over: ConfigMap create -> 409 ->
#: update, the idempotent retry path every step relies on)
FAILPOINT: Final = "backup:effects"
SECRET_NAME: Final = "rbac-proof-creds"
LINES: Final = ("alpha", "beta", "gamma")
#: backdated ``lastCheck.startedAt`` of the reset's check: makes the next poll time it out
LONG_AGO: Final = "2000-01-01T00:00:00Z"
#: the test kube-apiserver's --api-audiences (KubeAPI.SA_ISSUER)
AUDIENCE: Final = "https://kubernetes.default.svc"

T = TypeVar("T")


# -- environment ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    """What a scenario needs from the test servers (built from fixtures or from env.json)."""

    kube_url: str
    ca_path: Path
    admin_kubeconfig: Path
    connect_url: str
    bootstrap: str
    cluster_spec: dict[str, Any]  # ConnectCluster spec of the shared Connect worker
    work_dir: Path

    @classmethod
    def from_env_json(cls, path: Path, work_dir: Path) -> Env:
        """For exploration outside pytest: ``python -m tests.env.servers up --dir DIR``."""
        info = json.loads(path.read_text())
        connect = info["connect"]
        return cls(
            kube_url=info["kube"]["url"],
            ca_path=Path(info["kube"]["ca"]),
            admin_kubeconfig=Path(info["kube"]["kubeconfig"]),
            connect_url=connect["url"],
            bootstrap=info["kafka"]["bootstrap"],
            cluster_spec={
                "restUrl": connect["url"],
                "kafka": {"bootstrapServers": info["kafka"]["bootstrap"]},
                "topics": {
                    "offsets": connect["topics"]["offset"],
                    "configs": connect["topics"]["config"],
                    "status": connect["topics"]["status"],
                },
            },
            work_dir=work_dir,
        )

    def admin_client(self) -> Any:
        """A new admin ``ApiClient`` (one per scenario thread)."""
        return kubernetes.config.new_client_from_config(config_file=str(self.admin_kubeconfig))  # type: ignore[no-untyped-call]


# -- the rule catalog --------------------------------------------------------------------------------

RBAC_TPL: Final = CHART_DIR / "templates" / "_rbac.tpl"


@dataclass(frozen=True)
class CatalogRule:
    id: str
    scope: str
    mode: str
    peering: bool
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


def rule_catalog() -> list[CatalogRule]:
    """The entries of ``connectops.ruleCatalog`` in _rbac.tpl (plain YAML inside the define)."""
    text = RBAC_TPL.read_text()
    body = text.split('{{- define "connectops.ruleCatalog" -}}', 1)[1].split("{{- end -}}", 1)[0]
    return [
        CatalogRule(
            id=entry["id"],
            scope=entry["scope"],
            mode=entry["mode"],
            peering=bool(entry.get("peering", False)),
            api_groups=tuple(entry["apiGroups"]),
            resources=tuple(entry["resources"]),
            verbs=tuple(entry["verbs"]),
        )
        for entry in yaml.safe_load(body)
    ]


def namespaced_rules() -> list[CatalogRule]:
    """The rules a namespaced, standalone (no peering) install grants: what the proof covers."""
    return [r for r in rule_catalog() if r.mode in ("any", "namespaced") and not r.peering]


# -- the chart's RBAC, installed for one namespace --------------------------------------------------


@dataclass(frozen=True)
class Install:
    """The chart rendered for one watched namespace; only its identity objects are applied."""

    release: str
    namespace: str
    omit: tuple[str, ...]
    applied: list[Obj]
    service_account: str
    #: ``connectops run`` arguments from the Deployment, minus the liveness and metrics ports
    args: list[str]
    #: the Deployment's literal environment (CONNECTOPS_*: checks on, check defaults)
    env: dict[str, str]

    def rules(self) -> list[Obj]:
        return [rule for obj in self.applied if obj["kind"] in ("Role", "ClusterRole") for rule in obj["rules"]]


def chart_values(namespace: str, omit: Sequence[str] = ()) -> dict[str, Any]:
    return {"watch": {"namespaces": [namespace]}, "rbac": {"omitRules": list(omit)}}


def install_rbac(admin: Any, namespace: str, release: str, omit: Sequence[str] = ()) -> Install:
    """Render the chart in namespaced mode and apply (for real) its ServiceAccounts, Roles,
    ClusterRoles and bindings; the Deployment and Service are not applied (no kubelet here)."""
    objects = render(chart_values(namespace, omit), release=release, namespace=namespace)
    identity = [o for o in objects if o["kind"] in RBAC_KINDS]
    apply(admin, identity)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args: list[str] = []
    skip = False
    for arg in container["args"]:
        if skip:
            skip = False
        elif arg in ("--liveness", "--metrics-port"):
            skip = True  # fixed ports: concurrent operators on one machine would collide
        else:
            args.append(str(arg))
    env = {e["name"]: str(e["value"]) for e in container["env"] if "value" in e}
    return Install(release, namespace, tuple(omit), identity, pod["serviceAccountName"], args, env)


def uninstall_cluster_scoped(admin: Any, install: Install) -> None:
    """ClusterRoles and their bindings outlive the namespace: remove them."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    for obj in install.applied:
        name = obj["metadata"]["name"]
        with contextlib.suppress(ApiException):
            if obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(name)
            elif obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(name)


def service_account_kubeconfig(admin: Any, env: Env, namespace: str, name: str, path: Path, audience: str) -> Path:
    """A kubeconfig holding a TokenRequest token of ServiceAccount ``namespace/name``."""
    core = kubernetes.client.CoreV1Api(admin)
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(audiences=[audience], expiration_seconds=3600)
    )
    token = core.create_namespaced_service_account_token(name, namespace, request).status.token
    ca_data = base64.b64encode(env.ca_path.read_bytes()).decode()
    user = f"system:serviceaccount:{namespace}:{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": env.kube_url, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "test", "user": user, "namespace": namespace}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def can_i(kubeconfig: Path, verb: str, resource: str, *, group: str = "", namespace: str | None = None) -> bool:
    """SelfSubjectAccessReview as the kubeconfig's identity (``kubectl auth can-i``)."""
    api: Any = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        review = kubernetes.client.V1SelfSubjectAccessReview(
            spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=kubernetes.client.V1ResourceAttributes(
                    verb=verb, resource=resource, group=group, namespace=namespace
                )
            )
        )
        answer = kubernetes.client.AuthorizationV1Api(api).create_self_subject_access_review(review)
        return bool(answer.status.allowed)
    finally:
        api.close()


# -- the operator as a process, logged in as the ServiceAccount ------------------------------------


#: Run the chart's command line, ``connectops run``? Not yet: with ``--standalone`` it still passes
#: ``peering_name="default"`` to ``kopf.run``, which makes peering mandatory, and kopf 1.45 then
#: pauses every watch-stream for good ("blockers: peering CRD is missing"; no handler ever runs,
#: with any credentials). Until that is fixed the same handlers run under ``kopf run`` with the
#: same namespaces and ``--standalone``; RBAC-wise the two are the same process (the CLI adds only
#: the liveness endpoint, metrics and log level, none of which touches the API).
USE_CONNECTOPS_CLI: Final = False


def operator_argv(chart_args: Sequence[str]) -> list[str]:
    if USE_CONNECTOPS_CLI:
        return [sys.executable, "-m", "connectops.cli", "run", *chart_args]
    kept: list[str] = []
    args = iter(chart_args)
    for arg in args:
        if arg == "--namespace":
            kept += [arg, next(args)]
        elif arg == "--standalone":
            kept.append(arg)
        elif arg == "--log-level":
            next(args)  # kopf logs at INFO by default, like the chart's logLevel
        else:
            raise ValueError(f"no kopf equivalent for the chart's argument {arg!r}")
    return [sys.executable, "-m", "kopf", "run", *kept, "-m", "connectops.handlers"]


class OperatorAs:
    """The operator (:func:`operator_argv`: the chart's arguments) with KUBECONFIG = the SA's."""

    def __init__(self, install: Install, kubeconfig: Path, log_path: Path) -> None:
        self.install = install
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.runs = 0
        self.exit_codes: list[int | None] = []
        self._proc: ManagedProcess | None = None

    def start(self, failpoint: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECTOPS_", "KUBERNETES_SERVICE"))}
        env.update(self.install.env)  # the chart's settings (checks enabled, check defaults) ...
        env.update(OPERATOR_ENV)  # ... with the test suite's fast resyncs and retries
        env["KUBECONFIG"] = str(self.kubeconfig)
        if failpoint:
            env["CONNECTOPS_FAILPOINT"] = failpoint
        self.runs += 1
        self._proc = ManagedProcess(
            f"operator[{self.install.namespace}#{self.runs}]",
            operator_argv(self.install.args),
            cwd=self.log_path.parent,
            log_path=self.log_path,
            env=env,
        )
        self._proc.start()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def stop(self) -> None:
        if self._proc is not None:
            was_alive = self._proc.alive
            code = self._proc.returncode
            self._proc.stop(grace=10)
            self.exit_codes.append(code if not was_alive else None)
            self._proc = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


# -- the scenario ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """Seconds each wait may take (a step that does not happen within its bound did not happen).

    Measured with every rule granted (2 CPUs, several scenarios in parallel on one Connect
    worker): Ready ~5-10 s, offsets ~2 s, crash at backup ~3 s, reset done ~8 s after the
    restart, verdict and timeout ~3 s each (the 3 s resync).
    """

    ready: float = 45.0
    offsets: float = 20.0
    verdict: float = 15.0
    crash: float = 40.0
    reset: float = 45.0
    check_timeout: float = 15.0
    #: after the last wait, let retries/resyncs run a little so a late 403 shows in the log
    settle: float = 2.0


@dataclass
class Observation:
    """What one scenario saw; every field is a fact measured within its bound."""

    namespace: str
    omit: tuple[str, ...]
    finalizer: bool = False  # kopf patched the Connector (its finalizer is on it)
    connector_status: bool = False  # the Connector got any status conditions
    ready: bool = False  # Ready=True was reached
    ready_seconds: float | None = None
    ready_condition: dict[str, Any] | None = None  # the last Ready condition seen
    in_connect: bool = False  # the connector exists in Kafka Connect
    check_launched: bool = False  # a SparkApplication was created for the Connector's change
    verdict_published: bool = False  # the operator read the verdict ConfigMap into lastCheck
    crashed_at_backup: bool = False  # the failpoint fired: the backup was written once
    reset_phase: str | None = None  # the OffsetReset's last phase
    reset_status: dict[str, Any] = field(default_factory=dict)
    backup_rewritten: bool = False  # the restarted operator wrote the existing backup ConfigMap over
    backup_exists: bool = False
    leases_left: int = 0
    reset_check_launched: bool = False
    reset_check_timed_out: bool = False  # the reset's check timed out and its app was deleted
    event_reasons: set[str] = field(default_factory=set)
    forbidden: list[str] = field(default_factory=list)  # operator log lines naming a 403
    kopf_warnings: list[str] = field(default_factory=list)  # "Not enough permissions ..."
    exit_codes: list[int | None] = field(default_factory=list)  # None: still running when stopped
    seconds: float = 0.0
    log_path: str = ""

    @property
    def complete(self) -> bool:
        """The whole scenario worked (what the baseline asserts, and UNNEEDED rules must keep)."""
        return not self.failures()

    def failures(self) -> list[str]:
        checks = {
            "Connector finalizer": self.finalizer,
            "Connector Ready": self.ready,
            "check launched": self.check_launched,
            "verdict published": self.verdict_published,
            "crash at backup": self.crashed_at_backup,
            "reset Succeeded": self.reset_phase == "Succeeded",
            "backup rewritten on retry": self.backup_rewritten,
            "lock released": self.backup_exists and self.leases_left == 0,
            "reset check timed out": self.reset_check_timed_out,
            "Events posted": {"Created", "StepLock", "StepBackup"} <= self.event_reasons,
            "no 403": not self.forbidden,
        }
        return [name for name, ok in checks.items() if not ok]

    def summary(self) -> str:
        keys = ("ready", "check_launched", "verdict_published", "crashed_at_backup", "reset_phase")
        facts = ", ".join(f"{k}={getattr(self, k)!r}" for k in keys)
        return (
            f"omit={list(self.omit)} ({self.seconds:.0f}s): {facts}; failed: {self.failures()}; "
            f"Ready={self.ready_condition}; forbidden: {self.forbidden[:3]}; kopf: {self.kopf_warnings[:2]}; "
            f"reset conditions={self.reset_status.get('conditions')}; log {self.log_path}"
        )


def _poll(check: Callable[[], T | None], timeout: float, interval: float = 0.5) -> T | None:
    """``check()`` until it returns something truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        try:
            value = check()
        except (ApiException, httpx.HTTPError):
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


_FORBIDDEN = re.compile(r"403|[Ff]orbidden")
_KOPF_PERMISSIONS = "Not enough permissions"


class Scenario:
    """One run in a fresh namespace: chart RBAC without ``omit``, operator as its ServiceAccount.

    1. admin creates a Secret, a ConnectCluster and a FileStreamSource Connector whose ``topic``
       comes from the Secret (``configFrom``); the operator (failpoint: crash after the backup)
       must bring it to Ready and launch its check (a SparkApplication);
    2. admin plays the Spark operator: the application COMPLETED, its verdict ConfigMap written;
       the operator must read the verdict into ``status.lastCheck``;
    3. admin creates an OffsetReset (action reset); the operator takes the Lease, writes the backup
       ConfigMap and crashes; restarted, it writes the backup over and finishes: Succeeded, Lease
       released, a check launched for the reset;
    4. admin backdates that check's start: the operator must time it out and delete the app.
    """

    def __init__(self, env: Env, omit: Sequence[str] = (), bounds: Bounds | None = None) -> None:
        self.env = env
        self.omit = tuple(omit)
        self.bounds = bounds or Bounds()
        suffix = uuid.uuid4().hex[:8]
        self.ns = f"rbac-{suffix}"
        self.release = f"rp-{suffix}"
        self.connector = f"src-{suffix}"
        self.dir = env.work_dir / self.ns
        self.admin = env.admin_client()
        self.k8s = K8s(self.admin, self.ns)
        self.custom = kubernetes.client.CustomObjectsApi(self.admin)
        self.http = httpx.Client(base_url=env.connect_url, timeout=10)
        self.obs = Observation(self.ns, self.omit)

    def run(self) -> Observation:
        t0 = time.monotonic()
        install: Install | None = None
        operator: OperatorAs | None = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.k8s.core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": self.ns}))
            install = install_rbac(self.admin, self.ns, self.release, self.omit)
            kubeconfig = service_account_kubeconfig(
                self.admin, self.env, self.ns, install.service_account, self.dir / "kubeconfig", audience=AUDIENCE
            )
            operator = OperatorAs(install, kubeconfig, self.dir / "operator.log")
            self.obs.log_path = str(operator.log_path)
            self._create_objects()
            operator.start(failpoint=FAILPOINT)
            self._connector_phase(operator)
            self._reset_phase(operator)
            time.sleep(self.bounds.settle)
        finally:
            if operator is not None:
                operator.stop()
                self._collect(operator)
            self._cleanup(install)
            self.obs.seconds = time.monotonic() - t0
        return self.obs

    # -- steps -------------------------------------------------------------------------------------

    def _create_objects(self) -> None:
        src = self.dir / "in.txt"
        src.write_text("".join(f"{line}\n" for line in LINES))
        self.k8s.create_secret(SECRET_NAME, {"topic": f"rbac-proof-{self.ns}"})
        self.k8s.create("connectclusters", "main", self.env.cluster_spec, "ConnectCluster")
        self.k8s.create(
            "connectors",
            self.connector,
            {
                "clusterRef": {"name": "main"},
                "class": SOURCE,
                "tasksMax": 1,
                "config": {"file": str(src)},
                "configFrom": {"topic": {"secretKeyRef": {"name": SECRET_NAME, "key": "topic"}}},
            },
            "Connector",
        )

    def _connector_phase(self, operator: OperatorAs) -> None:
        obs, t0 = self.obs, time.monotonic()

        def ready() -> bool:
            body = self.k8s.get("connectors", self.connector)
            obs.finalizer = f"{GROUP}/finalizer" in (body["metadata"].get("finalizers") or [])
            conditions = (body.get("status") or {}).get("conditions") or []
            obs.connector_status = obs.connector_status or bool(conditions)
            obs.ready_condition = next((c for c in conditions if c["type"] == "Ready"), obs.ready_condition)
            return bool(obs.ready_condition and obs.ready_condition["status"] == "True") or not operator.alive

        _poll(ready, self.bounds.ready)
        obs.ready = bool(obs.ready_condition and obs.ready_condition["status"] == "True")
        if obs.ready:
            obs.ready_seconds = time.monotonic() - t0
        obs.in_connect = self.http.get(f"/connectors/{self.connector}").status_code == 200
        app = self._last_check_app("connectors", self.connector)
        obs.check_launched = app is not None
        if app is not None:
            self._complete_application(app)
            obs.verdict_published = bool(
                _poll(
                    lambda: self._last_check("connectors", self.connector).get("verdict") == "HEALTHY",
                    self.bounds.verdict,
                )
            )

    def _reset_phase(self, operator: OperatorAs) -> None:
        obs = self.obs
        if not obs.in_connect:
            return  # nothing to reset: the connector was never created in Connect
        _poll(lambda: self.http.get(f"/connectors/{self.connector}/offsets").json().get("offsets"), self.bounds.offsets)
        self.k8s.create(
            "offsetresets", "r", {"connectorRef": {"name": self.connector}, "action": "reset"}, "OffsetReset"
        )

        def crashed_or_over() -> bool:
            return not operator.alive or self._reset_phase_now() in ("Succeeded", "Failed")

        _poll(crashed_or_over, self.bounds.crash)
        backup_before = self._backup_taken_at()
        if not operator.alive:
            obs.crashed_at_backup = operator.returncode == EXIT_CODE
            operator.stop()
            operator.start()  # no failpoint: resume the reset from its recorded step
        _poll(lambda: self._reset_phase_now() in ("Succeeded", "Failed"), self.bounds.reset)
        obs.reset_phase = self._reset_phase_now()
        backup_after = self._backup_taken_at()
        obs.backup_exists = backup_after is not None
        obs.backup_rewritten = (
            obs.crashed_at_backup and None not in (backup_before, backup_after) and (backup_before != backup_after)
        )
        app = self._last_check_app("offsetresets", "r")
        obs.reset_check_launched = app is not None
        if app is not None and obs.reset_phase == "Succeeded":
            # a check that never reports (no Spark operator) times out: pretend it started long ago
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, self.ns, "offsetresets", "r", {"status": {"lastCheck": {"startedAt": LONG_AGO}}}
            )

            def timed_out() -> bool:
                last = self._last_check("offsetresets", "r")
                return last.get("state") == "TIMEOUT" and not self._app_exists(app)

            obs.reset_check_timed_out = bool(_poll(timed_out, self.bounds.check_timeout))

    # -- helpers -----------------------------------------------------------------------------------

    def _reset_phase_now(self) -> str | None:
        with contextlib.suppress(ApiException):
            phase = (self.k8s.get("offsetresets", "r").get("status") or {}).get("phase")
            return str(phase) if phase else None
        return None

    def _backup_taken_at(self) -> str | None:
        """``takenAt`` inside the reset's backup ConfigMap (it changes when the backup is rewritten)."""
        try:
            body = self.k8s.get("offsetresets", "r")
        except ApiException:
            return None
        status = body.get("status") or {}
        name = (status.get("backup") or {}).get("configMap") or f"connectops-backup-r-{body['metadata']['uid'][:8]}"
        try:
            cm = self.k8s.core.read_namespaced_config_map(name, self.ns)
        except ApiException:
            return None
        taken = json.loads((cm.data or {}).get("backup.json") or "{}").get("takenAt")
        return str(taken) if taken else None

    def _exists(self, plural: str, name: str) -> bool:
        try:
            return self.k8s.exists(plural, name)
        except ApiException:
            return False

    def _last_check(self, plural: str, name: str) -> dict[str, Any]:
        last: dict[str, Any] = (self.k8s.get(plural, name).get("status") or {}).get("lastCheck") or {}
        return last

    def _last_check_app(self, plural: str, name: str) -> str | None:
        """The SparkApplication named in ``status.lastCheck``, if it was really created."""
        last = self._last_check(plural, name)
        app = last.get("application")
        if not app or last.get("state") == "NOT_SUBMITTED" or not self._app_exists(str(app)):
            return None
        return str(app)

    def _app_exists(self, app: str) -> bool:
        try:
            self.custom.get_namespaced_custom_object(SPARK_GROUP, SPARK_VERSION, self.ns, SPARK_PLURAL, app)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _complete_application(self, app: str) -> None:
        """What the Spark operator and the check job would do: the app COMPLETED, the verdict in
        ConfigMap ``<app>-verdict`` (written by the driver's own ServiceAccount in production)."""
        verdict = {
            "verdict": "HEALTHY",
            "headline": {"totalLag": 0},
            "lag": {"totalLag": 0},
            "balance": None,
            "reasons": [],
        }
        self.k8s.core.create_namespaced_config_map(
            self.ns,
            kubernetes.client.V1ConfigMap(
                metadata={"name": f"{app}-verdict"}, data={"verdict.json": json.dumps(verdict)}
            ),
        )
        self.custom.patch_namespaced_custom_object_status(
            SPARK_GROUP,
            SPARK_VERSION,
            self.ns,
            SPARK_PLURAL,
            app,
            {
                "status": {
                    "applicationState": {"state": "COMPLETED"},
                    "driverInfo": {"podName": f"{app}-driver"},
                    "terminationTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            },
        )

    def _collect(self, operator: OperatorAs) -> None:
        obs = self.obs
        obs.exit_codes = list(operator.exit_codes)
        with contextlib.suppress(ApiException):
            obs.reset_status = (
                (self.k8s.get("offsetresets", "r").get("status") or {}) if self._exists("offsetresets", "r") else {}
            )
        leases = kubernetes.client.CoordinationV1Api(self.admin).list_namespaced_lease(self.ns).items
        obs.leases_left = len(leases)
        events = self.k8s.core.list_namespaced_event(self.ns).items
        obs.event_reasons = {e.reason for e in events if e.reason}
        log = operator.log()
        obs.forbidden = [line for line in log.splitlines() if _FORBIDDEN.search(line)]
        obs.kopf_warnings = [line for line in log.splitlines() if _KOPF_PERMISSIONS in line]

    def _cleanup(self, install: Install | None) -> None:
        # The namespace stays (no namespace controller deletes it); the shared Connect worker and
        # the cluster-scoped RBAC must not accumulate.
        with contextlib.suppress(httpx.HTTPError):
            self.http.delete(f"/connectors/{self.connector}")
        self.http.close()
        if install is not None:
            uninstall_cluster_scoped(self.admin, install)
        self.admin.close()


def run_all(env: Env, omissions: Iterable[tuple[str, ...]], workers: int) -> dict[tuple[str, ...], Observation]:
    """Run one scenario per omission set, ``workers`` at a time (each has its own namespace,
    release and operator process; they share the Connect worker)."""
    from concurrent.futures import ThreadPoolExecutor

    todo = list(omissions)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rbac-scenario") as pool:
        results = list(pool.map(lambda omit: Scenario(env, omit).run(), todo))
    return dict(zip(todo, results, strict=True))
