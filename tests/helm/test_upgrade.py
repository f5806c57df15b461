"""An upgrade from the previous version with a reset in flight: nothing lost, the reset finishes.

The previous version is tests/helm/fixtures/previous-chart.tgz and previous-operator.tgz, the
chart and the operator's code (operator/connectops/) as of an earlier commit (named in both
archives' headers), packaged by scripts/previous-chart-fixture.py: no git history is read here.
On an API server of its own (the suite's has the current CRDs):

1. ``helm install`` of the previous chart (its crds/ and its objects, through Helm's SDK);
2. the previous operator code (the extracted archive first on PYTHONPATH, the venv's
   dependencies), as that release's Deployment starts it (command, arguments, environment,
   ServiceAccount, as read back from the API server), runs an alter OffsetReset and dies
   mid-way, at its own failpoint after the offsets call was sent and before its completion was
   recorded (a rollout's kill of the old pod at the worst moment): the status, the plan, the
   backup ConfigMap, the reset's lock and the leader-election Lease are the old code's;
3. the upgrade as docs/install.md says: ``helm show crds <chart> | kubectl apply --server-side
   -f -`` (the new chart's crds/ through Helm's SDK, server-side applied), then ``helm upgrade``
   of the release to the new chart; every stored object is read and written again at the new
   schema, including ones the new schema's CEL rules would refuse today;
4. a new operator process (this commit's code), as the upgraded Deployment starts it, takes
   the leader-election Lease over and finishes the reset from the old code's records: the steps
   it recorded Done are not run again, the backup it wrote is the one kept (never rewritten,
   no second one), its lock is released;
5. the ``crds.enabled`` templates under Helm: adopted, and kept by the uninstall.

Truth from the system: Connect's GET /offsets while the reset is held and after it, the topic's
records on the broker, the backup ConfigMaps and Leases on the API server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import httpx
import kubernetes
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from connectops.adapters.kube import lock_name
from connectops.failpoints import EXIT_CODE
from connectops.planning.reset_holder import lock_holder
from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.e2e.test_leader_election import LINES, finished, source
from tests.e2e.test_offset_reset_e2e import offsets
from tests.env.records import topic_values
from tests.env.servers import ConnectWorker, KubeAPI
from tests.helm.chart import CHART_DIR, Obj, apply, by_kind, chart_crds, render
from tests.helm.rbac_env import AUDIENCE, Env, Install, OperatorAs, chart_values, service_account_kubeconfig

pytestmark = [pytest.mark.timeout(600), pytest.mark.e2e]

PREVIOUS: Final = Path(__file__).parent / "fixtures" / "previous-chart.tgz"
PREVIOUS_OPERATOR: Final = Path(__file__).parent / "fixtures" / "previous-operator.tgz"
COMMIT: Final = re.compile(r"as of commit ([0-9a-f]{40})")
PLURALS: Final = ("connectclusters", "connectors", "offsetresets")


def previous_version() -> tuple[str, list[Obj]]:
    """The vendored chart's header (the commit it was packaged from) and its CRDs."""
    with tarfile.open(PREVIOUS) as archive:
        header = archive.pax_headers.get("comment", "")
    with helm.Chart.load(PREVIOUS) as chart:
        return header, [yaml.safe_load(crd["data"]) for crd in chart.crds]


def previous_operator(into: Path) -> tuple[str, Path]:
    """The vendored operator code's header, and where it is extracted (its ``connectops/``
    package there): the directory a process puts first on PYTHONPATH to run that code."""
    with tarfile.open(PREVIOUS_OPERATOR) as archive:
        header = archive.pax_headers.get("comment", "")
        archive.extractall(into, filter="data")
    return header, into


def resolved(pythonpath: Path, cwd: Path) -> Path:
    """Where ``connectops`` is found by this venv's interpreter with ``pythonpath`` first, as the
    operator process is started (OperatorAs: ``python -m``, from ``cwd``): PYTHONPATH comes
    before the editable install's finder, which is the last on sys.meta_path."""
    found = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('connectops').origin)"],
        env={**os.environ, "PYTHONPATH": str(pythonpath)},
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return Path(found.stdout.strip())


def as_deployed(admin: Any, namespace: str, release: str) -> Install:
    """What the kubelet would run for the release's Deployment, read back from the API server:
    its arguments (without the fixed liveness and metrics ports, which concurrent tests would
    share), its literal and downward-API environment, its ServiceAccount."""
    pod: Any = client.AppsV1Api(admin).read_namespaced_deployment(f"{release}-connectops", namespace).spec.template.spec
    [container] = pod.containers
    assert container.command == ["connectops", "run"]
    args: list[str] = []
    skip = False
    for arg in container.args:
        if skip:
            skip = False
        elif arg in ("--liveness", "--metrics-port"):
            skip = True
        else:
            args.append(str(arg))
    downward = {"metadata.namespace": namespace, "metadata.name": f"{release}-pod"}
    env = {e.name: str(e.value) for e in container.env if e.value is not None}
    env |= {e.name: downward[e.value_from.field_ref.field_path] for e in container.env if e.value_from is not None}
    return Install(release, namespace, (), [], pod.service_account_name, args, env)


@pytest.fixture
def upgrade_kube(testenv_root: Path) -> Iterator[KubeAPI]:
    """An API server of its own: it starts from the previous version's CRDs."""
    api = KubeAPI(testenv_root, name=f"kube-upgrade-{uuid.uuid4().hex[:6]}")
    try:
        yield api.start()
    finally:
        api.stop()


def _established(admin: Any, crds: list[Obj]) -> None:
    ext: Any = client.ApiextensionsV1Api(admin)
    for crd in crds:
        name = crd["metadata"]["name"]

        def established(name: str = name) -> bool:
            conditions = ext.read_custom_resource_definition(name).status.conditions or ()
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        wait_for(established, 30, f"{name} Established", interval=0.2)


def _served_crd(admin: Any, name: str) -> Any:
    return client.ApiextensionsV1Api(admin).read_custom_resource_definition(name)


def test_upgrade_from_the_previous_chart_with_a_reset_in_flight(
    upgrade_kube: KubeAPI, connect: ConnectWorker, tmp_path: Path
) -> None:
    admin: Any = kubernetes.config.new_client_from_config(config_file=str(upgrade_kube.kubeconfig_path))  # type: ignore[no-untyped-call]
    ns = f"up-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    k8s = K8s(admin, ns)
    rest = ConnectREST(connect)
    processes: list[OperatorAs] = []
    name = ""
    try:
        # 1. the previous chart, installed by Helm
        header, old = previous_version()
        # the previous operator code, of the same commit as the chart, and what the first process imports
        code_header, old_code = previous_operator(tmp_path / "previous-operator")
        [commit] = COMMIT.findall(header)
        assert COMMIT.findall(code_header) == [commit], (header, code_header)
        assert resolved(old_code, tmp_path) == old_code / "connectops" / "__init__.py"
        assert "groupfailovers.connectops.io" not in {c["metadata"]["name"] for c in old}
        release = "prev"
        values = chart_values(ns)  # watching this namespace, short Lease timings
        with helm.Config(kubeconfig_path=upgrade_kube.kubeconfig_path, namespace=ns) as cfg:
            assert cfg.install(str(PREVIOUS), release, values, namespace=ns, timeout=120)["status"] == "deployed"
        for crd in old:  # its crds/ are what the API server serves
            assert _served_versions(admin, crd["metadata"]["name"]) == crd["spec"]["versions"]

        # 2. its operator code, held mid-way through an alter
        install = as_deployed(admin, ns, release)
        env = Env(upgrade_kube.url, upgrade_kube.ca_path, upgrade_kube.kubeconfig_path, connect.url, {}, tmp_path)
        kubeconfig = service_account_kubeconfig(
            admin, env, ns, install.service_account, tmp_path / "kubeconfig", audience=AUDIENCE
        )
        previous = dataclasses.replace(install, env={**install.env, "PYTHONPATH": str(old_code)})
        first = OperatorAs(previous, kubeconfig, tmp_path / "first.log")
        processes.append(first)
        first.start(failpoint="reset:effects")
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
        name, topic = source(k8s, connect, tmp_path)
        # what the previous schema accepted and the new one's CEL rules refuse (the operator
        # refused them at reconcile then): stored objects that must stay readable, writable
        # and deletable after the upgrade
        for plural, obj, kind, spec_ in _refused_now(connect):
            k8s.create(plural, obj, spec_, kind)
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=90)
        wait_for(lambda: len(topic_values(connect.bootstrap, topic)) == len(LINES), 60, "copied")
        wait_for(lambda: offsets(rest, name), 60, "offsets committed")
        before = offsets(rest, name)
        [entry] = before
        # FileStreamSource offsets are byte positions: after the first two lines
        asked = {"position": sum(len(line) + 1 for line in LINES[:2])}
        spec = {
            "connectorRef": {"name": name},
            "action": "alter",
            "offsets": [{"partition": entry["partition"], "offset": asked}],
        }
        k8s.create("offsetresets", "r", spec, "OffsetReset")
        wait_for(lambda: not first.alive, 120, "the first process dies at its failpoint", interval=0.2)
        assert first.returncode == EXIT_CODE, first.log()[-3000:]
        held = k8s.get("offsetresets", "r")["status"]
        assert (held["phase"], held["currentStep"]) == ("Running", "reset"), held
        # the previous code wrote no first start of a step (nor would the previous schema keep one)
        assert all("firstStartedAt" not in step for step in held["steps"]), held["steps"]
        # from Connect: stopped, at the offsets asked
        assert rest.state(name) == "STOPPED"
        assert offsets(rest, name) == [{"partition": entry["partition"], "offset": asked}]
        # what the old code wrote, read back before the upgrade: what the new code must take as it is
        core: Any = client.CoreV1Api(admin)
        coord: Any = client.CoordinationV1Api(admin)
        recorded = {s["name"]: s for s in held["steps"] if s["state"] == "Done"}
        assert list(recorded) == ["lock", "inspect", "stop", "backup"], held["steps"]
        assert [c["state"] for c in held["changes"]] == ["Started"], held["changes"]  # sent, no answer recorded
        assert held["plan"]["entries"][name] == spec["offsets"], held["plan"]  # its plan's entries in status only
        assert "entriesConfigMap" not in held["plan"], held["plan"]
        old_backup = core.read_namespaced_config_map(held["backup"]["configMap"], ns)
        assert not old_backup.immutable, old_backup.metadata  # the old code's backups are not immutable
        assert json.loads(old_backup.data["backup.json"])["connectors"][name]["offsets"] == before
        leader = install.args[install.args.index("--lease-name") + 1]
        held_leases = {lease.metadata.name: lease for lease in coord.list_namespaced_lease(ns).items}
        # the reset's lock where the new code looks for it (its name, its holder), and the
        # leader-election Lease; no more: the old code recorded no claim as a Lease (this
        # commit's code records one on its first pass over the Connector)
        assert held["lockNamespace"] == ns, held
        lock = held_leases[lock_name(held["lockScope"], name)]
        assert lock.spec.holder_identity == lock_holder(ns, "r", k8s.get("offsetresets", "r")["metadata"]["uid"])
        assert sorted(held_leases) == sorted([lock.metadata.name, leader]), sorted(held_leases)
        old_leader = held_leases[leader].spec.holder_identity
        assert old_leader.startswith(f"{release}-pod-"), old_leader

        # 3. the upgrade's CRDs: `helm show crds <chart> | kubectl apply --server-side -f -`
        new = chart_crds()
        assert {c["metadata"]["name"] for c in new} > {c["metadata"]["name"] for c in old}
        apply(admin, new)
        _established(admin, new)
        for crd in new:  # the API server serves the new definitions as written
            assert _served_versions(admin, crd["metadata"]["name"]) == crd["spec"]["versions"]
        # ... and `helm upgrade` of the release to the new chart
        with helm.Config(kubeconfig_path=upgrade_kube.kubeconfig_path, namespace=ns) as cfg:
            assert cfg.upgrade(str(CHART_DIR), release, values, namespace=ns, timeout=120)["status"] == "deployed"
        # and the same definitions through the crds.enabled templates (step 5 installs them)
        templates = by_kind(render({"crds": {"enabled": True}}, namespace=ns), "CustomResourceDefinition")
        apply(admin, templates)
        for crd in templates:
            assert _served_crd(admin, crd["metadata"]["name"]).metadata.annotations == {
                "helm.sh/resource-policy": "keep"
            }
        for plural, obj, kind, spec_ in _refused_now(connect):
            with pytest.raises(ApiException) as refused:
                k8s.custom.create_namespaced_custom_object(
                    "connectops.io",
                    "v1alpha1",
                    ns,
                    plural,
                    {
                        "apiVersion": "connectops.io/v1alpha1",
                        "kind": kind,
                        "metadata": {"name": f"{obj}-again"},
                        "spec": spec_,
                    },
                    dry_run="All",
                )
            assert refused.value.status == 422, refused.value
        # every stored object reads at the new schema and takes a write under its rules (CEL,
        # the OffsetReset's unchangeable spec): a no-op label, as a tool's relabel would be
        custom: Any = client.CustomObjectsApi(admin)
        for plural in PLURALS:
            items = custom.list_namespaced_custom_object("connectops.io", "v1alpha1", ns, plural)["items"]
            assert items, plural
            for item in items:
                custom.patch_namespaced_custom_object(
                    "connectops.io",
                    "v1alpha1",
                    ns,
                    plural,
                    item["metadata"]["name"],
                    {"metadata": {"labels": {"upgraded": "yes"}}},
                )
        stored = k8s.get("offsetresets", "r")["spec"]
        assert {key: stored[key] for key in spec} == spec

        # 4. the new operator process takes over and finishes the reset
        upgraded = as_deployed(admin, ns, release)
        assert upgraded.service_account == install.service_account
        # the same leader-election Lease: a rollout's old and new pods never both lead
        assert upgraded.args[upgraded.args.index("--lease-name") + 1] == leader
        second = OperatorAs(upgraded, kubeconfig, tmp_path / "second.log")
        processes.append(second)
        started = time.monotonic()
        second.start()
        status = finished(k8s, "r")
        took = time.monotonic() - started
        assert status["phase"] == "Succeeded", status
        steps = {s["name"]: s for s in status["steps"]}
        assert steps["reset"]["attempts"] == 2, steps["reset"]
        assert all(s["state"] in ("Done", "Skipped") for s in status["steps"]), status["steps"]
        backups: Any = client.CoreV1Api(admin).list_namespaced_config_map(
            ns, label_selector="connectops.io/backup=offsets"
        )
        assert [cm.metadata.name for cm in backups.items] == [status["backup"]["configMap"]]
        # the old code's records honoured: its Done steps not run again, its backup the one kept,
        # never written over (a second take would have failed its create or changed its version)
        for step_name, was in recorded.items():
            assert {key: steps[step_name].get(key) for key in was} == was, (steps[step_name], was)
        assert {key: status["backup"].get(key) for key in held["backup"]} == held["backup"], status["backup"]
        kept = core.read_namespaced_config_map(old_backup.metadata.name, ns)
        assert (kept.metadata.resource_version, kept.data, kept.metadata.annotations) == (
            old_backup.metadata.resource_version,
            old_backup.data,
            old_backup.metadata.annotations,
        )
        # the old code's offsets call kept as it recorded it (sent, outcome unknown), then the new
        # code's, answered and confirmed
        assert status["changes"][0] == held["changes"][0], status["changes"]
        assert [c["state"] for c in status["changes"]] == ["Started", "Done"], status["changes"]

        # from the broker: the source re-read from the position asked, lines three and four once more
        def reread() -> list[str] | None:
            values = topic_values(connect.bootstrap, topic)
            return values if len(values) >= len(LINES) + 2 else None

        values = wait_for(reread, 60, "the last two lines re-read")
        assert len(values) == len(LINES) + 2, values
        assert values[len(LINES) :] == values[2 : len(LINES)], values
        # from Connect: running, and at the end of the file again (what it read since the position asked)
        assert rest.state(name) == "RUNNING"
        wait_for(lambda: offsets(rest, name) == before, 90, "the offsets back at the end of the file")
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=60)
        # the reset's lock is released: left are the leader-election Lease and the Connector's
        # claim on its connector (status.claim.lease), no Lease held by an OffsetReset
        leases: list[Any] = coord.list_namespaced_lease(ns).items
        claim = k8s.get("connectors", name)["status"]["claim"]["lease"]
        assert sorted(f"{ns}/{lease.metadata.name}" for lease in leases) == sorted([claim, f"{ns}/{leader}"])
        assert not [lease for lease in leases if "/offsetreset/" in (lease.spec.holder_identity or "")]
        # the leader-election Lease taken over from the old process
        new_leader = next(lease for lease in leases if lease.metadata.name == leader).spec.holder_identity
        assert new_leader.startswith(f"{release}-pod-"), new_leader
        assert new_leader != old_leader
        # what the previous code did not write, this commit's writes (and the new schema keeps)
        assert steps["reset"].get("firstStartedAt"), steps["reset"]
        for plural in PLURALS:
            for item in custom.list_namespaced_custom_object("connectops.io", "v1alpha1", ns, plural)["items"]:
                assert item["metadata"]["labels"]["upgraded"] == "yes"
        for plural, obj, _, _ in _refused_now(connect):
            k8s.delete(plural, obj)
        for plural, obj, _, _ in _refused_now(connect):

            def gone(plural: str = plural, obj: str = obj) -> bool:
                return not k8s.exists(plural, obj)

            wait_for(gone, 60, f"{plural}/{obj} deleted")
        # and no write of the new process was refused by the new schema
        assert not re.search(r"answered 422|Unprocessable Entity|is invalid", second.log()), second.log()[-3000:]
        print(f"\nupgrade: the new process finished the held reset in {took:.1f} s")

        # 5. crds.enabled under Helm itself: beside its crds/ step the install conflicts with the
        # CRDs that step (or kubectl) left without the release's ownership (hence --skip-crds);
        # given that ownership they are adopted, and the uninstall keeps them and their objects
        second.stop()
        # the release the templates of step 3 were rendered for: their labels, same values
        release, where = "connectops", f"{ns}-tpl"
        tpl_values = {"crds": {"enabled": True}, "watch": {"namespaces": [ns]}}
        with helm.Config(kubeconfig_path=upgrade_kube.kubeconfig_path, namespace=where) as cfg:
            with pytest.raises(helm.HelmError) as conflict:
                cfg.install(str(CHART_DIR), release, tpl_values, namespace=where, create_namespace=True, timeout=120)
            assert "invalid ownership metadata" in str(conflict.value), conflict.value
            ext = client.ApiextensionsV1Api(admin)
            for crd in new:
                ext.patch_custom_resource_definition(
                    crd["metadata"]["name"],
                    {
                        "metadata": {
                            "labels": {"app.kubernetes.io/managed-by": "Helm"},
                            "annotations": {
                                "meta.helm.sh/release-name": release,
                                "meta.helm.sh/release-namespace": where,
                            },
                        }
                    },
                )
            assert (
                cfg.install(str(CHART_DIR), release, tpl_values, namespace=where, create_namespace=True, timeout=120)[
                    "status"
                ]
                == "deployed"
            )
            cfg.uninstall(release)
        for crd in new:
            kept = _served_crd(admin, crd["metadata"]["name"]).metadata
            assert kept.annotations["helm.sh/resource-policy"] == "keep"
        assert k8s.get("offsetresets", "r")["status"]["phase"] == "Succeeded"
    finally:
        for process in processes:
            process.stop()
        for leftover in (name, "reserved"):  # the shared worker must not keep this test's connectors
            if leftover:
                with contextlib.suppress(httpx.HTTPError):
                    httpx.delete(f"{connect.url}/connectors/{leftover}", timeout=30)
        admin.close()


def _served_versions(admin: Any, name: str) -> Any:
    """The CRD's spec.versions as the API server answers them (its JSON, not the client's model)."""
    answer: Any = client.ApiextensionsV1Api(admin).read_custom_resource_definition(name, _preload_content=False)
    return json.loads(answer.data)["spec"]["versions"]


def _refused_now(connect: ConnectWorker) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(plural, name, kind, spec) of objects the previous schema admitted and the new one refuses:
    a Kafka setting in both config and configFrom, a Connector config key that a spec field sets."""
    cluster = connect_cluster_spec(connect)
    both = {
        **cluster,
        "kafka": {
            **cluster["kafka"],
            "config": {"client.id": "upgrade"},
            "configFrom": {"client.id": {"name": "kafka-client", "key": "id"}},
        },
    }
    reserved = {
        "clusterRef": {"name": "main"},
        "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "config": {"name": "another-name", "file": "/dev/null", "topic": "upgrade-refused"},
    }
    return [("connectclusters", "both", "ConnectCluster", both), ("connectors", "reserved", "Connector", reserved)]
