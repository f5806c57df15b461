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
import queue
import re
import sys
import threading
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

from connectops.adapters.kube import lock_name
from connectops.failpoints import EXIT_CODE
from connectops.reconcilers.offset_reset import backup_name
from tests.e2e.conftest import OPERATOR_ENV, K8s
from tests.env.servers import KubeAPI, ManagedProcess
from tests.helm.chart import CHART_DIR, Obj, aggregated, apply, one, render

GROUP: Final = "connectops.io"
VERSION: Final = "v1alpha1"
SPARK_GROUP: Final = "sparkoperator.k8s.io"
SPARK_VERSION: Final = "v1beta2"
SPARK_PLURAL: Final = "sparkapplications"
SOURCE: Final = "org.apache.kafka.connect.file.FileStreamSourceConnector"
RBAC_KINDS: Final = frozenset({"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"})
#: the operator crashes right after writing the backup ConfigMap, before recording the step (the
#: restarted operator re-runs the step, so the backup is written over: ConfigMap create -> 409 ->
#: update, the idempotent retry path every step relies on)
FAILPOINT: Final = "backup:effects"
SECRET_NAME: Final = "rbac-proof-creds"
LINES: Final = ("alpha", "beta", "gamma")
#: backdated ``lastCheck.startedAt`` of the reset's check: makes the next poll time it out
LONG_AGO: Final = "2000-01-01T00:00:00Z"
#: the test kube-apiserver's --api-audiences
AUDIENCE: Final = KubeAPI.SA_ISSUER

T = TypeVar("T")


# -- environment ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    """What a scenario needs from the test servers (built from fixtures or from env.json)."""

    kube_url: str
    ca_path: Path
    admin_kubeconfig: Path
    connect_url: str
    cluster_spec: dict[str, Any]  # ConnectCluster spec of the lane's Connect worker
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
            api_groups=tuple(entry["apiGroups"]),
            resources=tuple(entry["resources"]),
            verbs=tuple(entry["verbs"]),
        )
        for entry in yaml.safe_load(body)
    ]


def namespaced_rules() -> list[CatalogRule]:
    """The rules a namespaced install grants in each watched namespace, and the release
    namespace's reset locks (here the release namespace is the watched one): what the proof covers.

    Not the leader-election Role's (mode ``leader``): the ``leases`` rule already grants create
    and get in the same namespace, so leaving them out would prove nothing. The proof's operator
    does run with leader election (renewing needs that Role's ``update``), and test_chart checks
    the Role's reach by SubjectAccessReviews.
    """
    return [r for r in rule_catalog() if r.mode in ("any", "namespaced", "release")]


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
    return {
        "watch": {"namespaces": [namespace]},
        "rbac": {"omitRules": list(omit)},
        # the scenario's crash hands over to a new process: short leases keep the wait short
        "leaderElection": {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1},
    }


#: what the kubelet's downward API would put into the Deployment's fieldRef variables
def _downward(field_path: str, namespace: str, release: str) -> str:
    return {"metadata.namespace": namespace, "metadata.name": f"{release}-pod"}[field_path]


def install_rbac(admin: Any, namespace: str, release: str, omit: Sequence[str] = ()) -> Install:
    """Render the chart in namespaced mode and apply (for real) its ServiceAccounts, Roles,
    ClusterRoles and bindings; the Deployment and Service are not applied (no kubelet here)."""
    objects = render(chart_values(namespace, omit), release=release, namespace=namespace)
    # the operator's identity only: the tenants' view/edit/admin additions bind to nobody here
    identity = [o for o in objects if o["kind"] in RBAC_KINDS and not aggregated(o)]
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
    env |= {
        e["name"]: _downward(e["valueFrom"]["fieldRef"]["fieldPath"], namespace, release)
        for e in container["env"]
        if "fieldRef" in e.get("valueFrom", {})
    }
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
    status = core.create_namespaced_service_account_token(name, namespace, request).status
    if status is None or not status.token:
        raise RuntimeError(f"TokenRequest for {namespace}/{name} returned no token")
    token = status.token
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
    resource, _, subresource = resource.partition("/")
    try:
        attributes = kubernetes.client.V1ResourceAttributes(
            verb=verb, resource=resource, subresource=subresource or None, group=group, namespace=namespace
        )
        review = kubernetes.client.V1SelfSubjectAccessReview(
            spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        )
        answer = kubernetes.client.AuthorizationV1Api(api).create_self_subject_access_review(review)
        return answer.status is not None and bool(answer.status.allowed)
    finally:
        api.close()


# -- the operator as a process, logged in as the ServiceAccount ------------------------------------


def operator_argv(chart_args: Sequence[str]) -> list[str]:
    """The chart's command (``connectops run`` with the Deployment's arguments), as a module."""
    return [sys.executable, "-m", "connectops.cli", "run", *chart_args]


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
        # claims where the chart puts them (its lock namespace), under the chart's RBAC
        env.pop("CONNECTOPS_CLAIM_NAMESPACE", None)
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
    """Seconds each wait may take: a step that does not happen within its bound did not happen.

    Measured with every rule granted (2 CPUs, four scenarios at a time, each lane on its own
    Connect worker): the whole scenario takes ~30 s, Ready 5-15 s, the crash 3-5 s after the
    reset is created, Succeeded ~8 s after the restart, verdict and timeout 3-6 s each (3 s
    resyncs).
    ``ready`` must stay below the ~54 s kopf spends retrying a forbidden namespace list (its
    ``error_backoffs``) before it falls back: that minute of standstill is what omitting
    ``namespaces/list`` breaks.
    """

    ready: float = 40.0
    in_connect: float = 10.0
    offsets: float = 20.0
    verdict: float = 20.0
    crash: float = 30.0
    reset: float = 40.0
    check_timeout: float = 20.0
    #: a Connector's check waits for its batch window (the chart's 5 s) before it is created
    check_launched: float = 15.0
    on_create: float = 40.0
    #: a rotated Secret key in Connect (by the watch at once; else by a 3 s resync)
    rotation: float = 15.0
    #: after the last wait, let retries and resyncs run a little, so a late 403 reaches the log
    settle: float = 2.0


#: the steps a baseline reset posts Events for (besides the Connector's "Created")
STEP_EVENTS: Final = frozenset({"StepLock", "StepInspect", "StepBackup", "StepStop", "StepReset", "StepUnlock"})


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
    connector_last_check: dict[str, Any] = field(default_factory=dict)
    verdict_published: bool = False  # the operator read the verdict ConfigMap into lastCheck
    reset_created: bool = False
    reset_started: bool = False  # the first operator process wrote the reset's status
    crashed_at_backup: bool = False  # the failpoint fired: the backup was written once
    reset_phase: str | None = None  # the OffsetReset's last phase
    reset_status: dict[str, Any] = field(default_factory=dict)
    backup_exists: bool = False
    backup_kept: bool = False  # the restarted operator kept the backup taken before the crash
    leases_left: int = 0
    #: the reset took over a lock whose holder (a reset deleted without its finalizer) is gone
    stale_lock_taken_over: bool = False
    reset_check_launched: bool = False
    reset_check_timed_out: bool = False  # the reset's check timed out and its app was deleted
    on_create_state: str | None = None  # the second Connector's status.offsetsOnCreate.state
    on_create_ready: dict[str, Any] | None = None  # ... and its last Ready condition
    rotation_in_connect: bool = False  # the rotated Secret key's new value reached Connect
    event_reasons: set[str] = field(default_factory=set)
    #: what the API refused, from the operator's log: kopf's "cannot <verb> resource <r>" as
    #: "<verb> <r>", the operator's own client errors as the object kind ("Lease", "ConfigMap")
    denied: set[str] = field(default_factory=set)
    kopf_warnings: list[str] = field(default_factory=list)  # "Not enough permissions ..."
    exit_codes: list[int | None] = field(default_factory=list)  # per operator run; None: stopped by us
    seconds: float = 0.0
    log_path: str = ""

    @property
    def reset_failed_step(self) -> str | None:
        failed = [s["name"] for s in self.reset_status.get("steps") or [] if s.get("state") == "Failed"]
        return failed[0] if failed else None

    @property
    def reset_current_step(self) -> str | None:
        step = self.reset_status.get("currentStep")
        return str(step) if step else None

    @property
    def on_create_applied(self) -> bool:
        ready = self.on_create_ready or {}
        return self.on_create_state == "Applied" and ready.get("status") == "True"

    @property
    def ready_message(self) -> str:
        return str((self.ready_condition or {}).get("message", ""))

    def failures(self) -> list[str]:
        """What did not work, of everything the scenario exercises (empty: all of it worked)."""
        checks = {
            "Connector finalizer": self.finalizer,
            "Connector Ready": self.ready,
            "check launched": self.check_launched,
            "verdict published": self.verdict_published,
            "crash at backup": self.crashed_at_backup,
            "reset Succeeded": self.reset_phase == "Succeeded",
            "backup kept on retry (never overwritten)": self.backup_kept,
            "stale lock taken over": self.stale_lock_taken_over,
            "lock released": self.backup_exists and self.leases_left == 0,
            "reset check timed out": self.reset_check_timed_out,
            "spec.offsets applied (onCreate clear)": self.on_create_applied,
            "Secret rotation applied and reported (SecretRotated)": (
                self.rotation_in_connect and "SecretRotated" in self.event_reasons
            ),
            "Events posted": {"Created", *STEP_EVENTS} <= self.event_reasons,
            "nothing denied": not self.denied,
        }
        return [name for name, ok in checks.items() if not ok]

    @property
    def complete(self) -> bool:
        return not self.failures()

    def summary(self) -> str:
        ready = self.ready_condition or {}
        return (
            f"omit={list(self.omit)} ns={self.namespace} {self.seconds:.0f}s: failed={self.failures()}; "
            f"Ready={ready.get('status')}/{ready.get('reason')} {self.ready_message[:100]!r}; "
            f"in_connect={self.in_connect} reset={self.reset_phase} step={self.reset_current_step} "
            f"failed_step={self.reset_failed_step} leases_left={self.leases_left}; denied={sorted(self.denied)}; "
            f"exits={self.exit_codes}; "
            f"kopf={[w[-90:] for w in self.kopf_warnings[:2]]}; log={self.log_path}"
        )


def _poll(check: Callable[[], T | None], timeout: float, interval: float = 0.5) -> T | None:
    """``check()`` until it returns something truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        try:
            value = check()
        except (ApiException, httpx.HTTPError, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


#: kopf's own API calls: APIForbiddenError('... cannot list resource "connectors" in API group ...')
_KOPF_DENIED = re.compile(r'cannot (\w+) resource \\?"([\w./]+)\\?"')
#: the operator's client (adapters/kube.py): "<Kind> <ns>/<name>: Kubernetes API answered 403 ..."
#: or "create <plural> <ns>: API answered 403 ..."
_CLIENT_DENIED = re.compile(
    r": ((?:create )?[A-Za-z]+) [\w.-]+(?:/[\w.-]+)?(?: status)?: (?:Kubernetes )?API answered 403"
)
#: the operator's startup LIST of claims (adapters/kube.py custom_object_pages): "list <plural> in
#: <namespace>: Kubernetes API answered 403 ..."
_LIST_DENIED = re.compile(r"(list [\w.]+) in [\w. -]+: Kubernetes API answered 403")
#: the operator's status writes, every one through adapters/kube.py patch_status (kopf's handler
#: status included): "<plural> <ns>/<name> status: Kubernetes API answered 403 ..."
_STATUS_DENIED = re.compile(r"\b(\w+) [\w.-]+/[\w.-]+ status: Kubernetes API answered 403")
_KOPF_PERMISSIONS = "Not enough permissions"


def denied_in_log(log: str) -> set[str]:
    found = {f"{verb} {resource}" for verb, resource in _KOPF_DENIED.findall(log)}
    found |= set(_CLIENT_DENIED.findall(log))
    found |= set(_LIST_DENIED.findall(log))
    found |= {f"patch {plural}/status" for plural in _STATUS_DENIED.findall(log)}
    return found


class Scenario:
    """One run in a fresh namespace: chart RBAC without ``omit``, operator as its ServiceAccount.

    1. admin creates a Secret, a ConnectCluster and a FileStreamSource Connector whose ``topic``
       comes from the Secret (``configFrom``); the operator (with a failpoint: crash right after
       the backup) must bring it to Ready and launch its check (a SparkApplication);
    2. admin plays the Spark operator: the application COMPLETED, its verdict ConfigMap written;
       the operator must read the verdict into ``status.lastCheck``;
    3. admin creates an OffsetReset (action reset); the operator takes the Lease, writes the backup
       ConfigMap and crashes; restarted, it writes the backup over (create -> 409 -> update) and
       finishes: Succeeded, Lease released, a check launched for the reset;
    4. admin backdates that check's start: the operator must time it out and delete the app;
    5. admin creates a second Connector with ``spec.offsets: {onCreate: clear}``: the operator
       creates it STOPPED, creates the OffsetReset that clears its offsets, and brings it to Ready;
    6. admin rotates the Secret key the first Connector reads: its new value must reach Connect,
       reported as ``SecretRotated`` (the operator's Secret watch saw it; a resync alone would
       report ``DriftCorrected``).
    """

    def __init__(self, env: Env, omit: Sequence[str] = (), bounds: Bounds | None = None) -> None:
        self.env = env
        self.omit = tuple(omit)
        self.bounds = bounds or Bounds()
        suffix = uuid.uuid4().hex[:8]
        self.ns = f"rbac-{suffix}"
        self.release = f"rp-{suffix}"
        self.connector = f"src-{suffix}"
        self.on_create_connector = f"oc-{suffix}"  # the spec.offsets phase's Connector
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
            self._on_create_phase()
            self._rotation_phase()
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
        # Connect answers 409/500 while its group rebalances: ask more than once
        obs.in_connect = bool(
            _poll(lambda: self.http.get(f"/connectors/{self.connector}").status_code == 200, self.bounds.in_connect)
        )
        app = self._last_check_app("connectors", self.connector)
        obs.check_launched = app is not None
        if app is not None:
            where = self._last_check("connectors", self.connector).get("verdictConfigMap") or f"{app}-verdict"
            self._complete_application(app, str(where))

            def verdict() -> bool:
                obs.connector_last_check = self._last_check("connectors", self.connector)
                return obs.connector_last_check.get("verdict") == "HEALTHY"

            obs.verdict_published = bool(_poll(verdict, self.bounds.verdict))

    def _reset_phase(self, operator: OperatorAs) -> None:
        obs = self.obs
        if not obs.in_connect:
            return  # nothing to reset: the connector was never created in Connect
        _poll(lambda: self.http.get(f"/connectors/{self.connector}/offsets").json().get("offsets"), self.bounds.offsets)
        self._leave_stale_lock()
        spec = {"connectorRef": {"name": self.connector}, "action": "reset"}
        self.k8s.create("offsetresets", "r", spec, "OffsetReset")
        obs.reset_created = True

        def crashed_or_over() -> bool:
            return not operator.alive or self._reset_phase_now() in ("Succeeded", "Failed")

        _poll(crashed_or_over, self.bounds.crash)
        obs.reset_started = bool(self._reset_status_now())
        backup_before = self._backup_taken_at()
        restarted = not operator.alive
        if restarted:
            obs.crashed_at_backup = operator.returncode == EXIT_CODE
            operator.stop()
            operator.start()  # no failpoint: resumes the reset from its recorded step
        if obs.reset_started or restarted:  # else the same operator would not start it later either
            _poll(lambda: self._reset_phase_now() in ("Succeeded", "Failed"), self.bounds.reset)
        obs.reset_phase = self._reset_phase_now()
        lock_step = [st for st in self._reset_status_now().get("steps") or [] if st.get("name") == "lock"]
        obs.stale_lock_taken_over = bool(
            lock_step
            and lock_step[0]["state"] == "Done"
            and "took over the lock left by" in str(lock_step[0].get("message"))
        )
        backup_after = self._backup_taken_at()
        obs.backup_exists = backup_after is not None
        obs.backup_kept = obs.crashed_at_backup and backup_before is not None and backup_before == backup_after
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

    def _on_create_phase(self) -> None:
        """A second Connector with spec.offsets onCreate clear: created STOPPED, its offsets
        cleared by an OffsetReset the operator creates, then Ready."""
        obs = self.obs
        if not obs.in_connect:
            return
        src = self.dir / "in2.txt"
        src.write_text("".join(f"{line}\n" for line in LINES))
        self.k8s.create(
            "connectors",
            self.on_create_connector,
            {
                "clusterRef": {"name": "main"},
                "class": SOURCE,
                "config": {"file": str(src), "topic": f"rbac-proof-2-{self.ns}"},
                "offsets": {"onCreate": "clear"},
            },
            "Connector",
        )

        def applied() -> bool:
            status = self.k8s.get("connectors", self.on_create_connector).get("status") or {}
            obs.on_create_state = (status.get("offsetsOnCreate") or {}).get("state")
            conditions = status.get("conditions") or []
            obs.on_create_ready = next((c for c in conditions if c["type"] == "Ready"), obs.on_create_ready)
            return obs.on_create_applied

        _poll(applied, self.bounds.on_create)

    def _rotation_phase(self) -> None:
        obs = self.obs
        if not obs.in_connect:
            return
        topic = f"rbac-proof-rotated-{self.ns}"
        self.k8s.core.patch_namespaced_secret(SECRET_NAME, self.ns, {"stringData": {"topic": topic}})

        def rotated() -> bool:
            return bool(self.http.get(f"/connectors/{self.connector}/config").json().get("topic") == topic)

        obs.rotation_in_connect = bool(_poll(rotated, self.bounds.rotation))

    def _leave_stale_lock(self) -> None:
        """The connector's lock as an OffsetReset deleted without its finalizer leaves it: a Lease
        in the lock namespace (the release namespace, here the watched one) whose holder is gone."""
        cluster_id = self.http.get("/").json()["kafka_cluster_id"]
        lease = kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name=lock_name(f"kafka/{cluster_id}", self.connector)),
            spec=kubernetes.client.V1LeaseSpec(
                holder_identity=f"{GROUP}/offsetreset/{self.ns}/deleted-reset/{uuid.uuid4()}",
                acquire_time=datetime.now(UTC),
            ),
        )
        kubernetes.client.CoordinationV1Api(self.admin).create_namespaced_lease(self.ns, lease)

    # -- helpers -----------------------------------------------------------------------------------

    def _reset_status_now(self) -> dict[str, Any]:
        try:
            status: dict[str, Any] = self.k8s.get("offsetresets", "r").get("status") or {}
        except ApiException:
            return {}
        return status

    def _reset_phase_now(self) -> str | None:
        phase = self._reset_status_now().get("phase")
        return str(phase) if phase else None

    def _backup_taken_at(self) -> str | None:
        """``takenAt`` inside the reset's backup ConfigMap (it changes when the backup is rewritten)."""
        try:
            body = self.k8s.get("offsetresets", "r")
        except ApiException:
            return None
        status = body.get("status") or {}
        name = (status.get("backup") or {}).get("configMap") or backup_name(self.ns, "r", body["metadata"]["uid"])
        try:
            cm = self.k8s.core.read_namespaced_config_map(name, self.ns)
        except ApiException:
            return None
        taken = json.loads((cm.data or {}).get("backup.json") or "{}").get("takenAt")
        return str(taken) if taken else None

    def _last_check(self, plural: str, name: str) -> dict[str, Any]:
        try:
            last: dict[str, Any] = (self.k8s.get(plural, name).get("status") or {}).get("lastCheck") or {}
        except ApiException:
            return {}
        return last

    def _last_check_app(self, plural: str, name: str) -> str | None:
        """The SparkApplication named in ``status.lastCheck``, once it is really created: a
        Connector's check is QUEUED for its batch window first (NOT_SUBMITTED: never created)."""

        def created() -> str | bool | None:
            last = self._last_check(plural, name)
            app = last.get("application")
            if last.get("state") == "NOT_SUBMITTED":
                return False
            return str(app) if app and self._app_exists(str(app)) else None

        found = _poll(lambda: created() is not None, self.bounds.check_launched)
        app = created() if found else None
        return app if isinstance(app, str) else None

    def _app_exists(self, app: str) -> bool:
        try:
            self.custom.get_namespaced_custom_object(SPARK_GROUP, SPARK_VERSION, self.ns, SPARK_PLURAL, app)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _complete_application(self, app: str, where: str) -> None:
        """What the Spark operator and the check job would do: the app COMPLETED, the verdict in
        ConfigMap ``where`` (written with the driver's own ServiceAccount in production)."""
        verdict = {"verdict": "HEALTHY", "headline": {"totalLag": 0}, "lag": {"totalLag": 0}, "balance": None}
        self.k8s.core.create_namespaced_config_map(
            self.ns,
            kubernetes.client.V1ConfigMap(
                metadata={"name": where}, data={"verdict.json": json.dumps({**verdict, "reasons": []})}
            ),
        )
        finished = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "applicationState": {"state": "COMPLETED"},
            "driverInfo": {"podName": f"{app}-driver"},
            "terminationTime": finished,
        }
        self.custom.patch_namespaced_custom_object_status(
            SPARK_GROUP, SPARK_VERSION, self.ns, SPARK_PLURAL, app, {"status": status}
        )

    def _collect(self, operator: OperatorAs) -> None:
        obs = self.obs
        obs.exit_codes = list(operator.exit_codes)
        obs.reset_status = self._reset_status_now()
        leases = kubernetes.client.CoordinationV1Api(self.admin).list_namespaced_lease(self.ns).items
        # reset locks only: the leader-election Lease stays while the operator runs, and so does a
        # Connector's claim (a Lease too) while the Connector exists
        obs.leases_left = len(
            [lease for lease in leases if (lease.metadata.labels or {}).get("connectops.io/lock") == "offset-reset"]
        )
        events = self.k8s.core.list_namespaced_event(self.ns).items
        obs.event_reasons = {e.reason for e in events if e.reason}
        log = operator.log()
        obs.denied = denied_in_log(log)
        obs.kopf_warnings = [line for line in log.splitlines() if _KOPF_PERMISSIONS in line]

    def _cleanup(self, install: Install | None) -> None:
        # The namespace stays (no namespace controller would ever finish deleting it); the
        # connector on the shared Connect worker and the cluster-scoped RBAC must not pile up.
        with contextlib.suppress(httpx.HTTPError):
            self.http.delete(f"/connectors/{self.connector}")
        with contextlib.suppress(httpx.HTTPError):
            self.http.delete(f"/connectors/{self.on_create_connector}")
        self.http.close()
        if install is not None:
            uninstall_cluster_scoped(self.admin, install)
        self.admin.close()


def run_lanes(lanes: Sequence[Env], omissions: Iterable[tuple[str, ...]]) -> list[Observation]:
    """One scenario per omission set (results in the same order), one lane per Env: each lane has
    its own Connect worker, since on a shared one every connector created, stopped or deleted
    rebalances everyone's group and Connect answers 500 "rebalance is expected" meanwhile. Lanes
    run in parallel; within a lane scenarios run one after another."""
    todo = queue.SimpleQueue[tuple[int, tuple[str, ...]]]()
    for item in enumerate(omissions):
        todo.put(item)
    results: dict[int, Observation] = {}
    errors: list[BaseException] = []

    def lane(env: Env) -> None:
        while not errors:
            try:
                index, omit = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[index] = Scenario(env, omit).run()
            except BaseException as exc:  # re-raised in the caller's thread
                errors.append(exc)
                return

    threads = [threading.Thread(target=lane, args=(env,), name=f"rbac-lane-{i}") for i, env in enumerate(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [results[i] for i in sorted(results)]
