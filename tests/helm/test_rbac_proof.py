"""RBAC proven, not claimed: the operator works end to end with exactly the chart's permissions,
and each of them is needed for something that can be seen.

Every scenario (tests/helm/rbac_env.py, :class:`Scenario`) gets a fresh namespace and renders the
chart for it in namespaced mode (``watch.namespaces: [ns]``), applies its ServiceAccounts, Roles,
ClusterRoles and bindings for real, mints a token for the operator's ServiceAccount (TokenRequest)
and runs the operator as a process with only that token, on the test kube-apiserver (RBAC
authorization). With checks enabled (the SparkApplication CRD is installed; the test plays the
Spark operator), the operator must: reconcile a Connector whose config comes from a Secret to
Ready, launch its check and read the verdict ConfigMap back, run an OffsetReset (Lease lock,
backup ConfigMap, Events, status) to Succeeded across a crash right after the backup (the retried
step writes the ConfigMap over), and time out and delete the reset's check.

Then the same scenario runs once per rule of ``_rbac.tpl`` rendered with ``rbac.omitRules:
[rule]``: :data:`EXPECTED` says, per rule (and per verb), what must break, and the test checks
exactly that. Rules and verbs in :data:`UNNEEDED` are granted but never used: the scenario
without all of them together still completes (they are candidates for removal from the chart).
That the outcome changes with each omitted rule also shows that the operator really runs with
the chart's identity and nothing more.

Per verb, one scenario for every verb of every multi-verb rule: ``CONNECTOPS_RBAC_PROOF_VERBS=1``
(31 more scenarios: the file then takes ~10 minutes instead of ~4).

Scenarios run in lanes (each with its own Connect worker, so one scenario's connector changes do
not rebalance another's); each one has its own namespace, release and operator process, which is
always stopped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import kubernetes
import pytest

from tests.e2e.conftest import connect_cluster_spec, crds
from tests.env.servers import ConnectFactory, ConnectWorker, KubeAPI
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.helm.chart import aggregated, render
from tests.helm.rbac_env import (
    AUDIENCE,
    Env,
    Observation,
    can_i,
    chart_values,
    install_rbac,
    namespaced_rules,
    rule_catalog,
    run_lanes,
    service_account_kubeconfig,
    uninstall_cluster_scoped,
)

__all__ = ["crds"]  # the session fixture from tests/e2e/conftest.py: the connectops CRDs applied

pytestmark = pytest.mark.timeout(1800)

#: parallel scenarios (each lane: one Connect worker, one operator process at a time)
LANES: Final = 4
PER_VERB: Final = os.environ.get("CONNECTOPS_RBAC_PROOF_VERBS", "") not in ("", "0", "false")

RULES: Final = namespaced_rules()
RULE_IDS: Final = [r.id for r in RULES]
#: the verbs of multi-verb rules (a one-verb rule's verb is the rule itself)
VERB_IDS: Final = [f"{r.id}/{v}" for r in RULES if len(r.verbs) > 1 for v in r.verbs]


@dataclass(frozen=True)
class Breaks:
    """What leaving out a rule or a verb breaks: a description and the check of it."""

    what: str
    holds: Callable[[Observation], bool]


def _nothing_processed(o: Observation) -> bool:
    return not o.finalizer and not o.connector_status and not o.in_connect


def _reset_never_seen(o: Observation) -> bool:
    return o.reset_created and not o.reset_status


def _kubernetes_error(o: Observation, kind: str) -> bool:
    reason = (o.ready_condition or {}).get("reason")
    return reason == "KubernetesError" and kind in o.ready_message and kind in o.denied


def _completes_but_kopf_denied(*denials: str) -> Callable[[Observation], bool]:
    def holds(o: Observation) -> bool:
        allowed_failures = ["nothing denied"]
        return o.failures() == allowed_failures and set(denials) <= o.denied

    return holds


NOTHING_PROCESSED = Breaks(
    "kopf cannot list the connectops resources: nothing is ever processed (no finalizer, no status, "
    "nothing in Connect)",
    lambda o: "list connectors" in o.denied and _nothing_processed(o),
)
NO_STATUS = Breaks(
    "no status is ever written: the Connector never shows a condition, the OffsetReset never a phase "
    "(the connector itself is created in Connect)",
    lambda o: "patch connectors/status" in o.denied and not o.connector_status and _reset_never_seen(o),
)
NO_EVENTS = Breaks(
    "no Event is ever posted (kopf logs the 403 and carries on); everything else works",
    lambda o: "create events" in o.denied and not o.event_reasons and o.ready and o.reset_phase == "Succeeded",
)
LEASE_UNREADABLE = Breaks(
    "every Connector reconcile reads the reset lock (Lease): Ready=False (KubernetesError), the "
    "connector never reaches Connect",
    lambda o: _kubernetes_error(o, "Lease") and not o.in_connect,
)
NO_LEASE = Breaks(
    "no Lease can be created: not the leader-election Lease (the operator stands by for ever and "
    "reconciles nothing), nor a reset lock",
    lambda o: not o.finalizer and not o.connector_status and not o.in_connect and not o.reset_started,
)
NO_CHECK_LAUNCH = Breaks(
    "no check is ever launched (no SparkApplication; lastCheck says NOT_SUBMITTED with the 403); the "
    "changes themselves are unaffected (the reset still Succeeds)",
    lambda o: not o.check_launched and o.reset_phase == "Succeeded" and "create sparkapplications" in o.denied,
)
ROTATION_AS_DRIFT = Breaks(
    "kopf's Secret list is refused: a rotated Secret is not noticed, the next resync puts the new value as "
    "drift (DriftCorrected, no SecretRotated); everything else works. The watch is chosen over a get of "
    "each referenced Secret every few seconds (no new verb): get already reads any Secret of the namespace "
    "by name, list and watch add no namespace, and with nothing changing the watch costs no API call, where "
    "polling 1,000 Secrets every 5 s is 200 GETs/s (benchmarks/rotation_bench.py measures the watch)",
    lambda o: (
        "list secrets" in o.denied
        and o.rotation_in_connect
        and "SecretRotated" not in o.event_reasons
        and "DriftCorrected" in o.event_reasons
        and o.ready
        and o.reset_phase == "Succeeded"
    ),
)
NAMESPACE_LIST = Breaks(
    "kopf retries the forbidden namespace list for ~54 s (its error backoffs) before it falls back to "
    "the listed namespaces: at every start, nothing is processed for about a minute",
    lambda o: "list namespaces" in o.denied and _nothing_processed(o),
)

#: rule id or "rule/verb" -> what leaving it out breaks
EXPECTED: Final[dict[str, Breaks]] = {
    "connectops-resources": NOTHING_PROCESSED,
    "connectops-resources/get": Breaks(
        "the referenced ConnectCluster cannot be read: Ready=False (KubernetesError), the connector never "
        "reaches Connect",
        lambda o: _kubernetes_error(o, "ConnectCluster") and not o.in_connect,
    ),
    "connectops-resources/list": NOTHING_PROCESSED,
    "connectops-resources/watch": Breaks(
        "kopf cannot watch its resources: what it listed at start-up is served by timers only, and a new "
        "object gets kopf's finalizer but its handlers wait for a watch event that never comes: the "
        "OffsetReset is never processed (and ~1 min after each start kopf gives up: exit code 1)",
        lambda o: "watch offsetresets" in o.denied and o.ready and _reset_never_seen(o),
    ),
    "connectops-resources/patch": Breaks(
        "kopf cannot put its finalizer on the objects: the OffsetReset is never processed",
        lambda o: "patch connectors" in o.denied and not o.finalizer and _reset_never_seen(o),
    ),
    "offsetresets-create": Breaks(
        "a Connector's spec.offsets (onCreate clear/set) cannot be applied: its OffsetReset cannot be created, "
        "the connector stays STOPPED with Ready=False (KubernetesError); everything else works",
        lambda o: (
            "create offsetresets" in o.denied
            and o.on_create_state == "Applying"
            and (o.on_create_ready or {}).get("reason") == "KubernetesError"
            and o.ready
            and o.reset_phase == "Succeeded"
        ),
    ),
    "connectops-status": NO_STATUS,
    "connectops-status/patch": NO_STATUS,
    "events": NO_EVENTS,
    "events/create": NO_EVENTS,
    "configmaps": Breaks(
        "the check's verdict cannot be read and the reset fails at its inspect step (the backup's dry-run "
        "create, before anything is stopped)",
        lambda o: o.check_launched and not o.verdict_published and o.reset_failed_step == "inspect",
    ),
    "configmaps/get": Breaks(
        "the check's verdict ConfigMap cannot be read: lastCheck ends COMPLETED without a verdict",
        lambda o: (
            o.check_launched
            and not o.verdict_published
            and o.connector_last_check.get("state") == "COMPLETED"
            and "unreadable" in str(o.connector_last_check.get("reasons"))
        ),
    ),
    "configmaps/create": Breaks(
        "the backup ConfigMap cannot be created: the reset fails at its inspect step (the backup's dry-run "
        "create, before anything is stopped), no backup exists",
        lambda o: o.reset_phase == "Failed" and o.reset_failed_step == "inspect" and not o.backup_exists,
    ),
    "secrets": Breaks(
        "the configFrom Secret cannot be read: Ready=False (KubernetesError), the connector never reaches Connect",
        lambda o: _kubernetes_error(o, "Secret") and not o.in_connect,
    ),
    "secrets-watch": ROTATION_AS_DRIFT,
    "secrets-watch/list": ROTATION_AS_DRIFT,
    "secrets-watch/watch": Breaks(
        "kopf lists the Secrets but cannot watch them: a rotation is not noticed, the next resync puts the new "
        "value as drift (DriftCorrected, no SecretRotated)",
        lambda o: (
            "watch secrets" in o.denied
            and o.rotation_in_connect
            and "SecretRotated" not in o.event_reasons
            and "DriftCorrected" in o.event_reasons
        ),
    ),
    "leases": NO_LEASE,
    "leases/get": LEASE_UNREADABLE,
    "leases/create": NO_LEASE,
    "leases/delete": Breaks(
        "a reset cannot release its lock: it stays Running, failed at the unlock step, and its Lease is left "
        "(the on-create phase's reset leaves its own too)",
        lambda o: (
            o.reset_phase == "Running"
            and o.reset_failed_step == "unlock"
            and o.leases_left >= 1
            and "Lease" in o.denied
        ),
    ),
    "leases/update": Breaks(
        "a lock left by a reset that no longer exists cannot be taken over (the Lease in the release "
        "namespace has no owner to be collected with): the reset ends at its lock step, the update refused",
        lambda o: (
            not o.stale_lock_taken_over
            and "Lease" in o.denied
            and (o.reset_failed_step == "lock" or o.reset_current_step == "lock")
            and o.reset_phase != "Succeeded"
        ),
    ),
    "sparkapplications": NO_CHECK_LAUNCH,
    "sparkapplications/create": NO_CHECK_LAUNCH,
    "sparkapplications/get": Breaks(
        "launched checks cannot be followed: no verdict is ever published (they can only time out)",
        lambda o: (
            o.check_launched
            and not o.verdict_published
            and o.reset_phase == "Succeeded"
            and "sparkapplications" in o.denied
        ),
    ),
    "sparkapplications/delete": Breaks(
        "a timed-out check's SparkApplication cannot be deleted: the check never ends TIMEOUT",
        lambda o: o.reset_check_launched and not o.reset_check_timed_out and "sparkapplications" in o.denied,
    ),
    "crds": Breaks(
        "kopf's CRD list and watch are refused (403s in the log; after its retries kopf warns and no "
        "longer notices CRD changes until restarted); the scenario itself completes",
        _completes_but_kopf_denied("list customresourcedefinitions"),
    ),
    "crds/list": Breaks(
        "kopf's CRD list is refused (403s in the log); the scenario itself completes",
        _completes_but_kopf_denied("list customresourcedefinitions"),
    ),
    "crds/watch": Breaks(
        "kopf's CRD watch is refused (403s in the log); the scenario itself completes",
        _completes_but_kopf_denied("watch customresourcedefinitions"),
    ),
    "namespaces": NAMESPACE_LIST,
    "namespaces/list": NAMESPACE_LIST,
    "namespaces/watch": Breaks(
        "kopf's namespace watch is refused (403s in the log; after its retries kopf warns and no longer "
        "notices a watched namespace being deleted or re-created); the scenario itself completes",
        _completes_but_kopf_denied("watch namespaces"),
    ),
}

#: granted by the chart but never used: the scenario completes without all of them at once
#: (each was also left out alone, CONNECTOPS_RBAC_PROOF_VERBS=1). To be removed from _rbac.tpl.
UNNEEDED: Final[dict[str, str]] = {}
# Removed from _rbac.tpl after this proof showed them unused (each alone and all together gave a
# complete run with no 403): connectops-status/get and /update (status is only merge-patched),
# events/patch and the events.k8s.io rule (kopf only creates core/v1 Events), configmaps/list and
# /patch (read by name; created or replaced), configmaps/update (backups are create-only since
# they may never be overwritten: a re-run backup step keeps the first copy), sparkapplications/list
# and /watch (read by name on each resync), crds/get and namespaces/get (kopf lists and watches,
# never reads one by name). leases/update came back: a lock left by a deleted reset is taken over.


ALL_KEYS: Final = [*RULE_IDS, *(f"{r.id}/{v}" for r in RULES for v in r.verbs)]
_SINGLE_VERB: Final = {f"{r.id}/{r.verbs[0]}": r.id for r in RULES if len(r.verbs) == 1}


def _covers(key: str) -> str | None:
    """Where ``key`` (a rule id or rule/verb) is classified, if anywhere: a verb by itself or by
    its rule when the rule is UNNEEDED or has no other verb."""
    rule = key.split("/", 1)[0]
    if key in EXPECTED or (key in _SINGLE_VERB and rule in EXPECTED):
        return "EXPECTED"
    if key in UNNEEDED or rule in UNNEEDED:
        return "UNNEEDED"
    return None


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark_crd(kube_client: Any) -> None:
    apply_sparkapplication_crd(kube_client)


@pytest.fixture(scope="module")
def lanes(
    kube: KubeAPI, connect: ConnectWorker, connect_factory: ConnectFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Env]]:
    work = tmp_path_factory.mktemp("rbac-proof")
    workers = [connect, *(connect_factory(f"rbac-lane-{i}") for i in range(1, LANES))]
    yield [Env(kube.url, kube.ca_path, kube.kubeconfig_path, w.url, connect_cluster_spec(w), work) for w in workers]
    for worker in workers[1:]:
        worker.stop()  # idle JVMs for the rest of the session otherwise (the factory stops them again, a no-op)


BASELINE: Final = ()
LEAST_PRIVILEGE: Final = tuple(UNNEEDED)


def _requested(session: pytest.Session) -> list[tuple[str, ...]]:
    """The omission sets of this module's selected tests (so ``-k`` runs only what it selects)."""
    wanted: list[tuple[str, ...]] = []
    for item in session.items:
        if getattr(item, "module", None) is not sys.modules[__name__]:
            continue
        name = getattr(item, "originalname", item.name)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if name == "test_baseline":
            wanted.append(BASELINE)
        elif name == "test_least_privilege":
            wanted.append(LEAST_PRIVILEGE)
        elif name == "test_without_verb" and not PER_VERB:
            continue
        elif "omit" in params:
            wanted.append((str(params["omit"]),))
    return list(dict.fromkeys(wanted))


@pytest.fixture(scope="module")
def observations(
    request: pytest.FixtureRequest, crds: None, spark_crd: None, lanes: list[Env]
) -> dict[tuple[str, ...], Observation]:
    """Every selected scenario, run once, in parallel lanes; a summary goes to the report."""
    wanted = _requested(request.session)
    started = time.monotonic()
    results = dict(zip(wanted, run_lanes(lanes, wanted), strict=True))
    elapsed = time.monotonic() - started
    report = Path(lanes[0].work_dir) / "summary.txt"
    report.write_text(
        "\n".join(o.summary() for o in results.values()) + f"\n{len(results)} scenarios, {elapsed:.0f}s\n"
    )
    sys.stderr.write(f"\nRBAC proof: {len(results)} scenarios in {LANES} lanes took {elapsed:.0f}s ({report})\n")
    return results


# -- the rule catalog and the identity (no scenario) --------------------------------------------------


def test_catalog_is_what_the_chart_grants() -> None:
    """The scenarios cover exactly the rules the chart renders for a namespaced install."""
    objects = render(chart_values("team-a"), namespace="ops")
    rendered = sorted(
        (tuple(rule["apiGroups"]), tuple(rule["resources"]), tuple(rule["verbs"]))
        for obj in objects
        if obj["kind"] in ("Role", "ClusterRole")
        and not aggregated(obj)  # tenants' view/edit/admin additions (test_tenant_roles.py)
        and not obj["metadata"]["name"].endswith(("-spark-check", "-leader-election"))
        for rule in obj["rules"]
    )
    assert rendered == sorted((r.api_groups, r.resources, r.verbs) for r in RULES)
    # the leader-election Role (see namespaced_rules: run with, not left out rule by rule)
    [leader] = [o for o in objects if o["metadata"]["name"].endswith("-leader-election") and o["kind"] == "Role"]
    assert sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in leader["rules"]) == sorted(
        (r.api_groups, r.resources, r.verbs) for r in rule_catalog() if r.mode == "leader"
    )


def test_every_rule_and_verb_is_classified() -> None:
    unclassified = [k for k in ALL_KEYS if _covers(k) is None]
    assert not unclassified, f"say what leaving these out breaks (EXPECTED) or why they are UNNEEDED: {unclassified}"
    both = [k for k in ALL_KEYS if k in EXPECTED and (k in UNNEEDED or k.split("/", 1)[0] in UNNEEDED)]
    assert not both, f"both EXPECTED and UNNEEDED: {both}"
    stale = sorted((set(EXPECTED) | set(UNNEEDED)) - set(ALL_KEYS))
    assert not stale, f"no longer granted by the chart: drop them here too: {stale}"


def test_operator_token_is_limited_to_the_chart_rules(kube: KubeAPI, kube_client: Any, tmp_path: Path) -> None:
    """The token the operator runs with is the chart's ServiceAccount's, and grants no more."""
    ns = f"rbac-id-{os.urandom(4).hex()}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    install = install_rbac(kube_client, ns, f"rpid-{ns[-8:]}")
    try:
        env = Env(kube.url, kube.ca_path, kube.kubeconfig_path, "", {}, tmp_path)
        kubeconfig = service_account_kubeconfig(
            kube_client, env, ns, install.service_account, tmp_path / "kubeconfig", AUDIENCE
        )
        for rule in RULES:
            for verb in rule.verbs:
                scope = ns if rule.scope == "namespaced" else None
                assert can_i(kubeconfig, verb, rule.resources[0], group=rule.api_groups[0], namespace=scope), (
                    rule.id,
                    verb,
                )
        refused = [
            ("get", "secrets", "", "default"),  # nothing outside the watched namespace
            ("list", "secrets", "", "default"),  # the Secret watch: the watched namespace only
            ("watch", "secrets", "", "default"),
            ("update", "secrets", "", ns),  # Secrets are only read
            ("list", "connectors", "connectops.io", "default"),
            ("update", "connectors", "connectops.io", ns),  # the spec is never written
            ("create", "connectors", "connectops.io", ns),
            ("delete", "configmaps", "", ns),
            ("create", "deployments", "apps", ns),
            ("create", "pods", "", ns),
        ]
        for verb, resource, group, namespace in refused:
            assert not can_i(kubeconfig, verb, resource, group=group, namespace=namespace), (verb, resource, namespace)
    finally:
        uninstall_cluster_scoped(kube_client, install)


# -- the scenarios ----------------------------------------------------------------------------------


def test_baseline(observations: dict[tuple[str, ...], Observation]) -> None:
    """Everything works with the chart's full rule list, and nothing is ever refused."""
    obs = observations[BASELINE]
    assert obs.complete, obs.summary()
    assert obs.kopf_warnings == [], obs.summary()


@pytest.mark.parametrize("omit", RULE_IDS)
def test_without_rule(observations: dict[tuple[str, ...], Observation], omit: str) -> None:
    _check(observations[(omit,)], omit)


def test_least_privilege(observations: dict[tuple[str, ...], Observation]) -> None:
    """Without every UNNEEDED rule and verb at once, the whole scenario still completes."""
    obs = observations[LEAST_PRIVILEGE]
    assert obs.complete, obs.summary()


# per verb only on request (9 min): not collected otherwise, rather than skipped
if PER_VERB:

    @pytest.mark.parametrize("omit", VERB_IDS)
    def test_without_verb(observations: dict[tuple[str, ...], Observation], omit: str) -> None:
        _check(observations[(omit,)], omit)


def _check(obs: Observation, key: str) -> None:
    if _covers(key) == "UNNEEDED":
        assert obs.complete, f"{key} is listed as UNNEEDED but the scenario broke without it: {obs.summary()}"
        return
    expected = EXPECTED[key]
    assert not obs.complete, f"nothing broke without {key} (is it UNNEEDED?): {obs.summary()}"
    assert expected.holds(obs), f"without {key}, expected: {expected.what}; observed: {obs.summary()}"
