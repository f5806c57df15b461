"""Issue 16, item 8: the operator image is built and run, not only read.

The Dockerfile's ``operator`` target is built with buildah on a Debian bookworm base made here by
mmdebstrap (scripts/build-image.sh: no registry is reachable here; the base is the
``PYTHON_IMAGE`` build argument, so a registry build is unchanged). The built image then runs as a
process (tests/image/chroot.py) against the session's real kube-apiserver and Connect worker:
its own ``ENTRYPOINT``, ``ENV``, ``WORKDIR`` and ``USER`` from the image's config, its root
filesystem read-only, a tmpfs on /tmp. The test reads from the kernel that the process is uid and
gid 10001 with no capabilities and that its root is mounted read-only, then takes one Connector
through create (Ready, config in Connect, the file's lines in the topic), a config change (PUT
seen in Connect), and delete (gone from Connect, finalizer released), with /healthz and the
per-object metrics served from the image.

Not reproduced here: a kubelet's cgroups, seccomp profile and network namespace (the process
shares the host's loopback with the test servers). The ``spark-check`` target needs Spark's base
image and Maven Central jars, which this machine cannot reach: tests/test_dockerfile.py checks it
statically.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.e2e.conftest import OPERATOR_ENV, ConnectREST, K8s, connect_cluster_spec, crds, wait_for
from tests.e2e.test_leader_election import LINES, SOURCE
from tests.e2e.test_leader_election import source as file_source
from tests.env.records import topic_record_count
from tests.env.servers import ConnectWorker, KubeAPI, free_port
from tests.image.chroot import FILES_MOUNT, ImageProcess, build

__all__ = ["crds"]  # the session fixture: the connectops CRDs applied

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

#: the image's user: the Dockerfile's useradd, and the chart's runAsUser
UID = 10001


@pytest.fixture(scope="module")
def image() -> str:
    return build("localhost/connectops/operator:test")


@pytest.fixture
def running(
    image: str, kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path
) -> Iterator[tuple[ImageProcess, K8s, int, int]]:
    ns = f"img-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    proc = ImageProcess(image, {"kubeconfig": kube.kubeconfig_path.read_bytes()}, tmp_path / "image")
    health, metrics = free_port(), free_port()
    try:
        proc.start(
            [
                *("--namespace", ns, "--standalone"),
                *("--liveness", f"http://0.0.0.0:{health}/healthz", "--metrics-port", str(metrics)),
            ],
            {**OPERATOR_ENV, "KUBECONFIG": f"{FILES_MOUNT}/kubeconfig"},
        )
        yield proc, K8s(kube_client, ns), health, metrics
    finally:
        proc.stop()


def test_image_runs_as_non_root_read_only_and_reconciles_a_connector(
    running: tuple[ImageProcess, K8s, int, int], connect: ConnectWorker, tmp_path: Path
) -> None:
    proc, k8s, health, metrics = running
    rest = ConnectREST(connect)
    # the kernel's view of the running entrypoint, not the Dockerfile's
    status = proc.status()
    assert status["Uid"].split() == [str(UID)] * 4, status["Uid"]
    assert status["Gid"].split() == [str(UID)] * 4, status["Gid"]
    assert int(status["CapEff"], 16) == 0, status
    assert int(status["CapPrm"], 16) == 0, status
    mounts = proc.mounts()
    assert "ro" in mounts["/"][1], mounts["/"]
    assert mounts["/tmp"][0] == "tmpfs", mounts["/tmp"]
    assert "rw" in mounts["/tmp"][1], mounts["/tmp"]
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert b"run" in cmdline, cmdline
    assert any(part.endswith(b"/connectops") for part in cmdline), cmdline
    # and the image says so (the chart's securityContext runs it as the same uid)
    assert proc.config.user == f"{UID}:{UID}", proc.config
    assert proc.config.entrypoint == ["connectops", "run"], proc.config

    def healthy() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{health}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, 60, f"/healthz 200 from the image\n{proc.log()[-3000:]}")

    # one Connector, round trip
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    name, topic = file_source(k8s, connect, tmp_path)
    source = tmp_path / f"{name}.txt"
    try:
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=120)
    except BaseException:
        print(proc.log()[-6000:])
        raise
    config = rest.config(name)
    assert (config["connector.class"], config["file"], config["topic"]) == (SOURCE, str(source), topic)
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == len(LINES), 60, "the lines copied")

    k8s.patch_spec("connectors", name, {"config": {"file": str(source), "topic": topic, "batch.size": "100"}})
    wait_for(lambda: rest.config(name).get("batch.size") == "100", 60, "the change in Connect")
    scraped = httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=5).text
    assert f'connectops_connector_ready{{name="{name}",namespace="{k8s.ns}"}} 1.0' in scraped, scraped[-3000:]

    k8s.delete("connectors", name)
    wait_for(lambda: not rest.exists(name), 60, "deleted from Connect")
    wait_for(lambda: not k8s.exists("connectors", name), 60, "the Connector's finalizer released")

    log = proc.log()
    assert "Traceback" not in log, log[-6000:]
    assert "Read-only file system" not in log, log[-6000:]
    assert proc.proc is not None
    assert proc.proc.poll() is None, "the operator exited\n" + log[-6000:]
