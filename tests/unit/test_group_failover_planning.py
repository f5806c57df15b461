"""The failover planner against MM2's semantics: connect-mirror-client 4.3.1's
MirrorClient.remoteConsumerOffsets (the last checkpoint per partition wins), OffsetSyncStore's
translation (the checkpoint names its sync), and the refusals. The end-to-end proof on real MM2 is
tests/e2e/test_group_failover.py; these cover the cases real MM2 is slow to produce (a stale or an
ahead checkpoint, a thinned sync store, backups from elsewhere)."""

from __future__ import annotations

import json
import struct

import pytest

from connectops.planning import group_failover as gf
from connectops.planning.group_failover import Checkpoint, FailoverRefused, OffsetSync

FLOW = gf.CheckpointFlow(
    source_alias="a",
    target_alias="b",
    separator=".",
    internal_separator_enabled=True,
    offset_syncs_location="source",
    syncs_groups=False,
)
NOW = 1_000_000_000


def cp(partition: int, upstream: int, downstream: int, *, age_s: float = 1, group: str = "g") -> Checkpoint:
    return Checkpoint(group, "a.orders", partition, upstream, downstream, NOW - int(age_s * 1000))


def plan(
    committed: dict[int, int], cps: list[Checkpoint], syncs: dict[int, list[OffsetSync]] | None = None, **kw: object
) -> gf.FailoverPlan:
    return gf.plan_failover(
        flow=FLOW,
        group="g",
        committed={("orders", p): o for p, o in committed.items()},
        checkpoints=cps,
        syncs={("orders", p): s for p, s in (syncs or {}).items()},
        now_ms=NOW,
        max_age_seconds=60,
        **kw,  # type: ignore[arg-type]
    )


def test_names_follow_the_default_replication_policy() -> None:
    assert FLOW.remote_topic("orders") == "a.orders"
    assert FLOW.checkpoints_topic == "a.checkpoints.internal"
    assert FLOW.offset_syncs_topic == "mm2-offset-syncs.b.internal"
    on_target = gf.CheckpointFlow("a", "b", "_", False, "target", False)
    assert on_target.offset_syncs_topic == "mm2-offset-syncs.a.internal"
    assert on_target.remote_topic("x") == "a_x"


def test_last_checkpoint_wins_as_mirror_client_reads_them() -> None:
    latest = gf.latest_checkpoints([cp(0, 5, 3), cp(0, 2, 1), cp(1, 4, 4), cp(0, 9, 9, group="other")], "g")
    assert {k: (v.upstream, v.downstream) for k, v in latest.items()} == {
        ("a.orders", 0): (2, 1),
        ("a.orders", 1): (4, 4),
    }


def test_reread_from_the_sync_the_checkpoint_came_from() -> None:
    syncs = {0: [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 9, 9)], 1: [OffsetSync("orders", 1, 4, 4)]}
    result = plan({0: 6, 1: 4}, [cp(0, 6, 1), cp(1, 4, 4)], syncs)
    assert result.target_offsets == {("a.orders", 0): 1, ("a.orders", 1): 4}
    # partition 0 translated from the sync (0, 0): upstream 1..5 read again; partition 1 exact
    assert [m.reread for m in result.moves] == [5, 0]
    assert result.reread_total == 5


def test_a_thinned_store_uses_an_older_sync_and_the_estimate_follows_it() -> None:
    # MM2 translated 50 with the sync (10, 110) although (40, 140) exists in the topic
    syncs = {0: [OffsetSync("orders", 0, 10, 110), OffsetSync("orders", 0, 40, 140)]}
    assert [m.reread for m in plan({0: 50}, [cp(0, 50, 111)], syncs).moves] == [39]


def test_progress_after_the_checkpoint_is_read_again_and_unknown_syncs_say_so() -> None:
    syncs = {0: [OffsetSync("orders", 0, 0, 0)]}
    assert [m.reread for m in plan({0: 8}, [cp(0, 6, 1)], syncs).moves] == [7]
    result = plan({0: 8}, [cp(0, 6, 1)], {})
    assert [m.reread for m in result.moves] == [None]
    assert result.reread_total is None


def test_an_idle_groups_old_checkpoint_is_exact() -> None:
    assert plan({0: 6}, [cp(0, 6, 6, age_s=86400)]).target_offsets == {("a.orders", 0): 6}


@pytest.mark.parametrize(
    ("committed", "checkpoints", "words"),
    [
        ({0: 6, 1: 4}, [cp(0, 6, 1)], "no checkpoint of group g in a.checkpoints.internal on the target for orders[1]"),
        ({0: 6}, [cp(0, 7, 2)], "ahead of its committed offset on the source for orders[0]"),
        ({0: 8}, [cp(0, 6, 1, age_s=61)], "older than 60 s for orders[0]"),
        ({}, [], "group g has no committed offsets on the source cluster"),
    ],
)
def test_refusals_name_the_partitions(committed: dict[int, int], checkpoints: list[Checkpoint], words: str) -> None:
    with pytest.raises(FailoverRefused) as caught:
        plan(committed, checkpoints)
    assert words in str(caught.value)


def test_topics_limit_the_move() -> None:
    result = gf.plan_failover(
        flow=FLOW,
        group="g",
        committed={("orders", 0): 6, ("other", 0): 3},
        checkpoints=[cp(0, 6, 6)],
        syncs={},
        topics=["orders"],
        now_ms=NOW,
        max_age_seconds=60,
    )
    assert result.target_offsets == {("a.orders", 0): 6}


def test_allowlist() -> None:
    allow = gf.parse_allowlist(json.dumps({"team-a": ["app-*", "billing"]}))
    assert gf.group_allowed(allow, "team-a", "app-1")
    assert gf.group_allowed(allow, "team-a", "billing")
    assert not gf.group_allowed(allow, "team-a", "billing-2")
    assert not gf.group_allowed(allow, "team-b", "app-1")
    assert gf.parse_allowlist("") == {}
    for bad in ("[", '["x"]', '{"ns": "app"}', '{"ns": [""]}'):
        with pytest.raises(ValueError, match="allowlist"):
            gf.parse_allowlist(bad)


def test_mm2_group_sync_detection() -> None:
    on = {"sync.group.offsets.enabled": "true"}
    assert gf.mm2_syncs_group(on, "app")
    assert not gf.mm2_syncs_group({}, "app")
    assert not gf.mm2_syncs_group({**on, "groups": "billing.*"}, "app")
    assert not gf.mm2_syncs_group({**on, "groups.exclude": "app"}, "app")
    # MM2's default exclusions (connect-.*, console-consumer-.*, __.*)
    assert not gf.mm2_syncs_group(on, "connect-sink")


def test_checkpoint_flow_from_connector_config() -> None:
    config = {
        "connector.class": gf.CHECKPOINT_CLASS,
        "source.cluster.alias": "a",
        "target.cluster.alias": "b",
        "offset-syncs.topic.location": "target",
    }
    flow = gf.checkpoint_flow("cp", config, "g")
    assert (flow.source_alias, flow.offset_syncs_location, flow.syncs_groups) == ("a", "target", False)
    with pytest.raises(FailoverRefused, match="not a MirrorCheckpointConnector"):
        gf.checkpoint_flow("cp", {**config, "connector.class": "x.MirrorSourceConnector"}, "g")
    with pytest.raises(FailoverRefused, match="IdentityReplicationPolicy"):
        gf.checkpoint_flow("cp", {**config, "replication.policy.class": "x.IdentityReplicationPolicy"}, "g")


def test_record_formats() -> None:
    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    key = s("g") + s("a.orders") + struct.pack(">i", 1)
    value = struct.pack(">hqq", 0, 6, 1) + s("")
    assert gf.decode_checkpoint(key, value, 5) == Checkpoint("g", "a.orders", 1, 6, 1, 5)
    assert gf.decode_checkpoint(b"\x00", value, 5) is None
    assert gf.decode_checkpoint(key, None, 5) is None
    sync_key = s("orders") + struct.pack(">i", 0)
    assert gf.decode_offset_sync(sync_key, struct.pack(">qq", 9, 19)) == OffsetSync("orders", 0, 9, 19)


def test_backup_round_trip_and_foreign_backups() -> None:
    doc = gf.backup_document(group="g", bootstrap="b:9092", offsets={("a.orders", 0): 2}, failover="f", taken_at="t")
    clusters = ["a:9092", "b:9092"]
    assert gf.read_backup(doc, "g", clusters) == ("b:9092", {("a.orders", 0): 2})
    with pytest.raises(FailoverRefused, match="holds group 'g', not 'h'"):
        gf.read_backup(doc, "h", clusters)
    with pytest.raises(FailoverRefused, match="taken on cluster 'b:9092', not one of this flow's"):
        gf.read_backup(doc, "g", ["a:9092", "elsewhere:9092"])
    bad_offsets = json.dumps(
        {"kind": "GroupFailoverBackup", "group": "g", "cluster": "b:9092", "offsets": [{"topic": "t"}]}
    )
    for bad in ("", "{}", bad_offsets):
        with pytest.raises(FailoverRefused, match="not a readable GroupFailover backup"):
            gf.read_backup(bad, "g", clusters)
    assert gf.backup_name("f", "uid-1") != gf.backup_name("f", "uid-2")


def test_failback_reads_the_syncs_in_reverse() -> None:
    # MM2 syncs at the first record and wherever the upstream skips: 0 -> 0, then upstream 10
    # (a transaction marker at 9) at downstream 9
    syncs = [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 10, 9)]
    assert [gf.failback_sync(syncs, d) for d in (0, 8, 9, 12)] == [syncs[0], syncs[0], syncs[1], syncs[1]]
    # a rewind (the flow was reset and replicates again) drops the syncs before it
    rewound = [*syncs, OffsetSync("orders", 0, 0, 20)]
    assert gf.failback_sync(rewound, 5) is None
    assert gf.failback_sync(rewound, 25) == rewound[-1]
    committed = {("a.orders", 0): 12, ("a.orders", 1): 4, ("local", 0): 3}
    by_tp = {("orders", 0): syncs, ("orders", 1): [OffsetSync("orders", 1, 7, 4)]}
    # what the target's remote topic is read for: from the sync to the group, past the sync only
    ranges = gf.failback_ranges(flow=FLOW, committed=committed, syncs=by_tp)
    assert ranges == {("a.orders", 0): (9, 12)}
    assert gf.failback_ranges(flow=FLOW, committed=committed, syncs=by_tp, topics=["other"]) == {}
    result = gf.plan_failback(
        flow=FLOW,
        group="g",
        committed=committed,
        syncs=by_tp,
        records={("a.orders", 0): 3},
        source_ends={("orders", 0): (0, 20), ("orders", 1): (0, 20)},
    )
    assert result.target_offsets == {("orders", 0): 13, ("orders", 1): 7}
    assert [(m.topic, m.reread) for m in result.moves] == [("a.orders", 0), ("a.orders", 0)]
    assert result.reread_total == 0


def test_failback_counts_records_where_the_remote_topic_skips_offsets() -> None:
    # an exactly-once MM2 worker: a transaction marker after each transaction in a.orders, which
    # MM2 does not sync (only upstream skips are): 2 of the 6 offsets after the sync are markers
    syncs = {("orders", 0): [OffsetSync("orders", 0, 100, 50)]}
    committed = {("a.orders", 0): 56}
    plan = gf.plan_failback(
        flow=FLOW,
        group="g",
        committed=committed,
        syncs=syncs,
        records={("a.orders", 0): 4},
        source_ends={("orders", 0): (0, 200)},
    )
    # 104, not 106 (100 + 56 - 50 would skip the two records the group never read)
    assert plan.target_offsets == {("orders", 0): 104}
    # at most the offsets that held no record are read again (markers: none; compacted: each)
    assert plan.reread_total == 2
    # a range not counted counts none: at the sync, all read again rather than one skipped
    uncounted = gf.plan_failback(
        flow=FLOW, group="g", committed=committed, syncs=syncs, records={}, source_ends={("orders", 0): (0, 200)}
    )
    assert (uncounted.target_offsets, uncounted.reread_total) == ({("orders", 0): 100}, 6)


@pytest.mark.parametrize(
    ("syncs", "ends", "words"),
    [
        ([OffsetSync("orders", 0, 50, 40)], (0, 100), "no offset sync of the flow translates"),
        ([OffsetSync("orders", 0, 0, 0)], (0, 8), "does not hold the record"),
        ([OffsetSync("orders", 0, 0, 0)], (20, 30), "does not hold the record"),
    ],
)
def test_failback_refusals(syncs: list[OffsetSync], ends: tuple[int, int], words: str) -> None:
    with pytest.raises(FailoverRefused) as caught:
        gf.plan_failback(
            flow=FLOW,
            group="g",
            committed={("a.orders", 0): 12},
            syncs={("orders", 0): syncs},
            records={("a.orders", 0): 12},
            source_ends={("orders", 0): ends},
        )
    assert words in str(caught.value)
    assert caught.value.partitions == [("orders", 0)]
