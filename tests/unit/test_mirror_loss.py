"""The silent-loss rules of connectops.reconcilers.mirror_loss on hand-made looks (the real
clusters prove them in tests/e2e/test_mm2_loss.py); the edge cases a real flow cannot be
steered into quickly: a look between two deletions, repeated looks, acknowledgement, a
re-created topic MM2 had not finished copying, and the source settings given to librdkafka."""

from __future__ import annotations

from connectops.models.connector import ConnectorStatus
from connectops.object_metrics import ObjectMetrics
from connectops.reconcilers.mirror_loss import Observation, assess, condition, source_client_config, stored_offsets

T = "orders"


def look(
    stored: dict[int, int], starts: dict[int, int], ends: dict[int, int], topic_id: str | None = "id-1"
) -> Observation:
    return Observation(
        stored={(T, p): o for p, o in stored.items()},
        topic_ids={} if topic_id is None else {T: topic_id},
        log_start={} if topic_id is None else {(T, p): o for p, o in starts.items()},
        log_end={} if topic_id is None else {(T, p): o for p, o in ends.items()},
    )


def test_healthy_flow_reports_nothing_and_remembers_the_topic() -> None:
    status = assess(None, look({0: 9, 1: 5}, {0: 0, 1: 0}, {0: 10, 1: 6}), "t1", None)
    assert status.losses == []
    assert status.records_lost == 0
    assert [(t.topic, t.topic_id, t.stored, t.log_end) for t in status.topics] == [
        (T, "id-1", {"0": 9, "1": 5}, {"0": 10, "1": 6})
    ]
    ok, reason, message = condition(status)
    assert (ok, reason) == (True, "NothingLost")
    assert message.endswith("(2 partitions)")


def test_truncation_counts_per_partition_once_and_grows_with_the_log_start() -> None:
    first = assess(None, look({0: 9, 1: 5}, {0: 13, 1: 0}, {0: 15, 1: 10}), "t1", None)
    assert [(x.partition, x.first_lost, x.lost) for x in first.losses] == [(0, 10, 3)]
    # the next look: partition 1 truncated too, partition 0 further; counted once each
    second = assess(first, look({0: 9, 1: 5}, {0: 14, 1: 7}, {0: 15, 1: 10}), "t2", None)
    assert {(x.partition, x.lost, x.detected_at) for x in second.losses} == {(0, 4, "t1"), (1, 1, "t2")}
    assert second.records_lost == 5
    # MM2 resumed at the log-start: the offsets lost the evidence, the report stays
    third = assess(second, look({0: 14, 1: 9}, {0: 14, 1: 7}, {0: 15, 1: 10}), "t3", None)
    assert third.records_lost == 5
    ok, reason, message = condition(third)
    assert (ok, reason) == (False, "SourceTruncated")
    assert f"{T}-0: 4" in message
    assert f"{T}-1: 1" in message


def test_acknowledgement_clears_once_per_token() -> None:
    lost = assess(None, look({0: 9}, {0: 12}, {0: 15}), "t1", None)
    cleared = assess(lost, look({0: 14}, {0: 12}, {0: 15}), "t2", "ack-1")
    assert cleared.losses == []
    assert cleared.acknowledged == "ack-1"
    # the same token again does not clear a new loss
    again = assess(cleared, look({0: 14}, {0: 20}, {0: 25}), "t3", "ack-1")
    assert [(x.first_lost, x.lost) for x in again.losses] == [(15, 5)]


def test_recreated_topic_skips_below_mm2s_resume_point_only_when_the_new_topic_reaches_it() -> None:
    before = assess(None, look({0: 9, 1: 5}, {0: 0, 1: 0}, {0: 12, 1: 6}), "t1", None)
    # deleted: nothing to say, the topic's ID is kept
    gone = assess(before, look({0: 9, 1: 5}, {}, {}, topic_id=None), "t2", None)
    assert gone.losses == []
    assert gone.topics == before.topics
    after = assess(gone, look({0: 9, 1: 5}, {0: 0, 1: 0}, {0: 14, 1: 3}, topic_id="id-2"), "t3", None)
    assert {(x.partition, x.reason, x.lost) for x in after.losses} == {
        (0, "SourceTopicRecreated", 10),
        (1, "SourceTopicRecreated", 0),
    }
    # the old topic's records MM2 had not copied at the look before are named, not counted
    assert "2 records of the old topic were not replicated" in next(x for x in after.losses if x.partition == 0).message
    assert after.topics[0].topic_id == "id-2"
    ok, reason, _ = condition(after)
    assert (ok, reason) == (False, "SourceTopicRecreated")
    # MM2 now runs on the new topic: the same ID, nothing more
    later = assess(after, look({0: 13, 1: 2}, {0: 0, 1: 0}, {0: 14, 1: 3}, topic_id="id-2"), "t4", None)
    assert later.records_lost == 10
    assert len(later.losses) == 2


def test_offsets_under_another_alias_are_ignored() -> None:
    entries = [
        {"partition": {"cluster": "a", "topic": T, "partition": 0}, "offset": {"offset": 4}},
        {"partition": {"cluster": "x", "topic": T, "partition": 1}, "offset": {"offset": 7}},
        {"partition": {"cluster": "a", "topic": T, "partition": 2}, "offset": None},
    ]
    assert stored_offsets(entries, "a") == {(T, 0): 4}


def test_source_settings_for_librdkafka() -> None:
    config = {
        "source.cluster.bootstrap.servers": "a:9092",
        "source.cluster.security.protocol": "SASL_SSL",
        "source.cluster.sasl.mechanism": "SCRAM-SHA-512",
        "source.cluster.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mm2" password="s3cret-value";',
        "target.cluster.sasl.jaas.config": "not this one",
    }
    bootstrap, settings = source_client_config(config)
    assert bootstrap == "a:9092"
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "mm2",
        "sasl.password": "s3cret-value",
    }


def test_the_gauge_reads_the_published_status() -> None:
    objects = ObjectMetrics()
    lost = assess(None, look({0: 9}, {0: 12}, {0: 15}), "t1", None)
    status = ConnectorStatus(mirror_loss=lost).patch()
    objects.observe_connector("ns", "mm2", {}, status, uid="u1")
    objects.observe_connector("ns", "plain", {}, {}, uid="u2")
    text = b"".join(objects.render({"connectops_connector_mirror_records_lost"})).decode()
    assert 'connectops_connector_mirror_records_lost{name="mm2",namespace="ns"} 2' in text
    assert 'name="plain"' not in text


def test_recreated_topic_under_a_stopped_mm2_counts_from_its_offsets_now() -> None:
    """At the 60 s resync the look before the deletion can be a minute of traffic old: MM2 then
    copied more and committed last as it stopped. With no task running MM2 has not read the
    new topic, so it resumes at its offsets now (141 and 71), not the look before's (101, 51)."""
    before = assess(None, look({0: 100, 1: 50}, {0: 0, 1: 0}, {0: 120, 1: 60}), "t1", None)
    recreated = look({0: 140, 1: 70}, {0: 0, 1: 0}, {0: 300, 1: 20}, topic_id="id-2")
    stopped = assess(before, recreated, "t2", None, idle=True)
    assert {(x.partition, x.first_lost, x.lost) for x in stopped.losses} == {(0, 141, 141), (1, 71, 0)}
    assert stopped.records_lost == 141
    # a task running: its offsets now may be the new topic's already; the look before's count
    running = assess(before, recreated, "t2", None)
    assert {(x.partition, x.first_lost, x.lost) for x in running.losses} == {(0, 101, 101), (1, 51, 0)}


def test_a_recreation_seen_before_its_records_is_counted_again_until_mm2_resumes() -> None:
    """The look after the re-creation came before the new topic got its records: nothing lost
    yet. MM2 stopped and not moved: a later look counts what it will skip; once it has moved
    (or with a task running, which reads from the earliest when out of range), nothing more."""
    before = assess(None, look({0: 9}, {0: 0}, {0: 10}), "t1", None)
    empty = assess(before, look({0: 9}, {0: 0}, {0: 0}, topic_id="id-2"), "t2", None, idle=True)
    assert [(x.first_lost, x.lost) for x in empty.losses] == [(10, 0)]
    filled = look({0: 9}, {0: 0}, {0: 25}, topic_id="id-2")
    assert assess(empty, filled, "t3", None).records_lost == 0  # a task running: it started at the earliest
    later = assess(empty, filled, "t3", None, idle=True)
    assert [(x.first_lost, x.lost, x.detected_at) for x in later.losses] == [(10, 10, "t2")]
    # MM2 resumed and moved on: no more counting
    moved = assess(later, look({0: 24}, {0: 0}, {0: 40}, topic_id="id-2"), "t4", None, idle=True)
    assert moved.records_lost == 10
