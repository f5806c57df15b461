"""spec.offsets.from: renaming a running connector carries its offsets over, proven by what the
new one produces or writes (nothing lost, nothing twice), by Connect's GET /offsets and by the
broker (the offsets topic for a source, the consumer groups for a sink).

The rename as a user does it in Git: the new Connector object is applied naming the old
connector, and the old object is removed; its deletion hands the connector over instead of
deleting it, the new connector is created STOPPED, an OffsetReset writes the old offsets for it,
and only then the old connector is deleted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.failpoints import EXIT_CODE
from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_crash import crash_env
from tests.e2e.test_offset_reset_e2e import LINES, offsets
from tests.e2e.test_offset_truth_sink import SINK, Log, Output, group_commits
from tests.e2e.test_offsets_on_create import (
    Bystander,
    on_create,
    one_partition_topic,
    position_in_offsets_topic,
    produced,
    setup_cluster,
    source,
)
from tests.env.records import assert_end_offsets_true
from tests.env.servers import ConnectWorker

__all__ = ["crash_env"]  # the fixture of tests/e2e/test_offset_reset_crash.py: its own namespace and operator


def _rename(k8s: K8s, rest: ConnectREST, old: str, new: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Apply the new object, see it wait for the old one, remove the old one, wait for the rename."""
    k8s.create("connectors", new, {**spec, "offsets": {"from": {"connector": old}}}, "Connector")
    waiting = k8s.wait_condition("connectors", new, "OffsetsOnCreate", "False", "RenameWaiting", 60)
    assert f"Connector {old} still manages connector {old}" in waiting["message"]
    assert not rest.exists(new)
    assert rest.state(old) == "RUNNING"

    k8s.delete("connectors", old)
    wait_for(lambda: not k8s.exists("connectors", old), 90, f"Connector {old} deleted")
    handed = [e for e in k8s.events(old) if e.reason == "HandedOver"]
    assert handed, [e.reason for e in k8s.events(old)]

    k8s.wait_condition("connectors", new, "OffsetsOnCreate", "True", "Applied", 180)
    k8s.wait_condition("connectors", new, "Ready", "True", timeout=60)
    wait_for(lambda: not rest.exists(old), 30, f"connector {old} deleted from Connect")
    marker = on_create(k8s, new)
    assert marker["state"] == "Applied"
    assert marker["renamedFrom"] == old
    reset = k8s.get("offsetresets", marker["offsetReset"])
    assert reset["status"]["phase"] == "Succeeded"
    return reset


def _source_files(connect: ConnectWorker, tmp_path: Path, prefix: str) -> tuple[str, str, Path, dict[str, Any]]:
    """Old and new connector names, a one-partition topic, the input file and the source spec."""
    run = uuid.uuid4().hex[:6]
    path = tmp_path / f"{run}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    topic = one_partition_topic(connect)
    return f"{prefix}-{run}-v1", f"{prefix}-{run}-v2", path, source(path, topic)


def test_a_running_source_is_renamed_without_losing_or_repeating_a_line(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    setup_cluster(k8s, connect)
    rest = ConnectREST(connect)
    bystander = Bystander(k8s, connect, tmp_path)  # another source: the rename must not touch it
    old, new, path, spec = _source_files(connect, tmp_path, "src")
    topic = spec["config"]["topic"]
    k8s.create("connectors", old, spec, "Connector")
    k8s.wait_condition("connectors", old, "Ready", "True")
    size = path.stat().st_size
    wait_for(lambda: offsets(rest, old) and offsets(rest, old)[0]["offset"]["position"] == size, 60, "committed")
    assert produced(connect, topic) == LINES

    reset = _rename(k8s, rest, old, new, spec)
    # what the reset wrote is what the old connector had: read from Connect before the rename
    assert reset["spec"]["offsets"] == [{"partition": {"filename": str(path)}, "offset": {"position": size}}]
    assert on_create(k8s, new)["carried"] == 1
    # the broker holds it under the new name, and Connect says so
    assert position_in_offsets_topic(connect, new, path) == {"position": size}
    assert offsets(rest, new) == [{"partition": {"filename": str(path)}, "offset": {"position": size}}]

    # the new connector goes on where the old one stopped: every line exactly once
    more = [f"after-rename-{i}" for i in range(3)]
    with path.open("a") as out:
        out.write("".join(line + "\n" for line in more))
    wait_for(lambda: len(produced(connect, topic)) >= len(LINES) + len(more), 60, "the appended lines")
    wait_for(lambda: offsets(rest, new)[0]["offset"]["position"] == path.stat().st_size, 60, "committed again")
    assert produced(connect, topic) == LINES + more
    bystander.untouched()  # its offsets-topic records byte for byte, and its output


def test_a_sink_is_renamed_with_its_group_offsets(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    setup_cluster(k8s, connect)
    rest = ConnectREST(connect)
    run = uuid.uuid4().hex[:6]
    old, new, topic = f"sink-{run}-v1", f"sink-{run}-v2", f"rename-{run}"
    admin = AdminClient({"bootstrap.servers": connect.bootstrap})  # kept: its futures die with it
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    log = Log(connect.bootstrap)
    log.produce(topic, {0: 3, 1: 2}, "a")
    assert_end_offsets_true(connect.bootstrap, topic)  # the group offsets below are compared with these
    first, second = Output(tmp_path / f"{old}.out"), Output(tmp_path / f"{new}.out")
    spec = {"clusterRef": {"name": "main"}, "class": SINK, "config": {"file": str(first.path), "topics": topic}}
    k8s.create("connectors", old, spec, "Connector")
    assert first.new(log.after({})) == log.after({})
    ends = log.ends()
    wait_for(
        lambda: {tp: c[0] for tp, c in group_commits(connect.bootstrap, f"connect-{old}").items()} == ends,
        60,
        "the old sink's commits",
    )

    renamed = {**spec, "config": {"file": str(second.path), "topics": topic}}
    reset = _rename(k8s, rest, old, new, renamed)
    assert sorted(
        (e["partition"]["kafka_partition"], e["offset"]["kafka_offset"]) for e in reset["spec"]["offsets"]
    ) == [(0, 3), (1, 2)]
    # the broker: the new group holds the old one's offsets; the old group was not touched
    assert {tp: c[0] for tp, c in group_commits(connect.bootstrap, f"connect-{new}").items()} == ends
    assert {tp: c[0] for tp, c in group_commits(connect.bootstrap, f"connect-{old}").items()} == ends

    # nothing replayed: the new sink writes only what is produced after the rename
    log.produce(topic, {0: 2, 1: 1}, "b")
    assert_end_offsets_true(connect.bootstrap, topic)
    fresh = log.after(ends)
    assert second.new(fresh) == fresh
    assert sum(fresh.values()) == 3
    assert Counter(first.lines()) == log.after({}) - fresh  # the old sink's file holds the first five


@pytest.mark.parametrize("point", ["rename:stopped", "rename:reset-created", "rename:old-deleted"])
def test_a_rename_survives_a_crash_at_each_step(
    crash_env: tuple[K8s, OperatorProcess], connect: ConnectWorker, tmp_path: Path, point: str
) -> None:
    """The operator process dies (``os._exit``: no cleanup, no last status write) right after the
    old connector stopped, after the OffsetReset was created, and after the old connector was
    deleted; a fresh process ends with exactly one connector, at the old one's offsets."""
    k8s, operator = crash_env
    rest = ConnectREST(connect)
    old, new, path, spec = _source_files(connect, tmp_path, "crash")
    topic = spec["config"]["topic"]

    operator.start(failpoint=point)
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.create("connectors", old, spec, "Connector")
    k8s.wait_condition("connectors", old, "Ready", "True", timeout=90)
    size = path.stat().st_size
    wait_for(lambda: offsets(rest, old) and offsets(rest, old)[0]["offset"]["position"] == size, 60, "committed")
    k8s.create("connectors", new, {**spec, "offsets": {"from": {"connector": old}}}, "Connector")
    k8s.wait_condition("connectors", new, "OffsetsOnCreate", "False", "RenameWaiting", 60)
    k8s.delete("connectors", old)
    assert operator.wait_exit(120) == EXIT_CODE, operator.log_tail()
    assert on_create(k8s, new)["state"] == "Applying"  # the marker was stored before any change

    operator.start()
    k8s.wait_condition("connectors", new, "OffsetsOnCreate", "True", "Applied", 180)
    k8s.wait_condition("connectors", new, "Ready", "True", timeout=60)
    assert not k8s.exists("connectors", old)
    names = set(rest.http.get("/connectors").json())
    assert new in names
    assert old not in names
    assert offsets(rest, new) == [{"partition": {"filename": str(path)}, "offset": {"position": size}}]
    resets = k8s.custom.list_namespaced_custom_object("connectops.io", "v1alpha1", k8s.ns, "offsetresets")["items"]
    assert len(resets) == 1  # the step that crashed did not create a second one
    more = ["after-crash"]
    with path.open("a") as out:
        out.write("after-crash\n")
    wait_for(lambda: len(produced(connect, topic)) >= len(LINES) + 1, 60, "the appended line")
    wait_for(lambda: offsets(rest, new)[0]["offset"]["position"] == path.stat().st_size, 60, "committed again")
    assert produced(connect, topic) == LINES + more
