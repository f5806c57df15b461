"""``FakeKafka``: the Kafka side of an offset reset (:class:`connectops.reconcilers.reset_run.KafkaApi`,
which ``KafkaOffsets`` implements over librdkafka), in memory, with the same values and typed
errors. ``tests/adapters/test_kafka_contract.py`` runs one set of scenarios against this double and
against the real adapter on a real broker.

Modelled (checked by the contract test): topics with partitions and records (offsets from 0,
each with a timestamp), ``partitions_for`` / ``topics_matching`` / ``list_offsets`` (earliest,
latest; by timestamp the first record at or after it, else the end offset), and consumer groups:
committed offsets, ``alter_group_offsets`` (creates the group), ``delete_group`` (False when there
is no group), :class:`GroupActive` while a group has members (a sink whose tasks still run);
``delete_topic`` (False when there is no topic).

Not modelled: Connect's offsets topics (``read_connector_offsets``, ``write_tombstones``,
``restore_records``, ``verify_tombstones``: the source side of the tombstone strategy) and topic
truncation (DeleteRecords, which the test broker does not implement, so no contract could hold the
double to it); those raise ``NotImplementedError``, so a test that reaches them says so. Topic
deletion (MirrorMaker 2's offset-syncs cleanup) is modelled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NoReturn

from connectops.adapters.kafka import GroupActive, OffsetRecord, RawRecord, TopicMissing, WrittenRecord
from connectops.reconcilers.reset_run import KafkaApi

TopicPartition = tuple[str, int]


class FakeKafka:
    def __init__(self) -> None:
        #: topic -> partition -> record timestamps (ms), one per offset from 0
        self.topics: dict[str, list[list[int]]] = {}
        #: group -> committed offsets
        self.groups: dict[str, dict[TopicPartition, int]] = {}
        #: group -> member client ids (a running sink's tasks)
        self.members: dict[str, list[str]] = {}
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        #: (bootstrap, client config) of each KafkaOffsets the code under test built
        self.opened: list[tuple[str, dict[str, str]]] = []

    # -- test controls --------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int) -> None:
        self.topics[topic] = [[] for _ in range(partitions)]

    def produce(self, topic: str, partition: int, count: int = 1, *, timestamp: int = 1_700_000_000_000) -> None:
        log = self.topics[topic][partition]
        log.extend(timestamp + i for i in range(count))

    def factory(self, bootstrap: str, config: Mapping[str, str]) -> KafkaApi:
        """A ``kafka_factory`` for the executor: every cluster reaches this one broker."""
        self.opened.append((bootstrap, dict(config)))
        return self

    # -- topics ---------------------------------------------------------------------------------

    def _partitions(self, topic: str, operation: str) -> list[int]:
        if topic not in self.topics:
            raise TopicMissing(f"{operation}: topic {topic!r} does not exist", operation=operation)
        return list(range(len(self.topics[topic])))

    def partitions_for(self, topics: Iterable[str]) -> list[TopicPartition]:
        self.calls.append(("partitions_for", (tuple(topics),)))
        out: list[TopicPartition] = []
        for topic in dict.fromkeys(topics):
            out.extend((topic, p) for p in self._partitions(topic, "list partitions"))
        return out

    def topics_matching(self, regex: str) -> list[str]:
        self.calls.append(("topics_matching", (regex,)))
        pattern = re.compile(regex)
        return sorted(t for t in self.topics if pattern.fullmatch(t))

    def list_offsets(
        self, topic_partitions: Iterable[TopicPartition], spec: str | int, *, read_committed: bool = False
    ) -> dict[TopicPartition, int]:
        tps = list(dict.fromkeys(topic_partitions))
        self.calls.append(("list_offsets", (tuple(tps), spec)))
        if not tps:
            return {}
        if spec not in ("earliest", "latest") and not (
            isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0
        ):
            raise ValueError(f"spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
        out: dict[TopicPartition, int] = {}
        for topic, partition in tps:
            self._partitions(topic, f"list offsets ({spec})")
            log = self.topics[topic][partition]
            if spec == "earliest":
                out[(topic, partition)] = 0
            elif spec == "latest":
                out[(topic, partition)] = len(log)
            else:
                out[(topic, partition)] = next((i for i, ts in enumerate(log) if ts >= int(spec)), len(log))
        return out

    def topic_exists(self, topic: str) -> bool:
        self.calls.append(("topic_exists", (topic,)))
        return topic in self.topics

    def delete_topic(self, topic: str) -> bool:
        """Delete ``topic``; False when it did not exist (a success), as the admin API answers."""
        self.calls.append(("delete_topic", (topic,)))
        return self.topics.pop(topic, None) is not None

    # -- consumer groups ------------------------------------------------------------------------

    def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        self.calls.append(("group_offsets", (group,)))
        return dict(self.groups.get(group, {}))

    def _active(self, group: str, operation: str) -> None:
        members = self.members.get(group)
        if members:
            raise GroupActive(
                f"{operation}: group {group!r} still has members ({', '.join(sorted(members)[:5])}); "
                "Kafka answered NON_EMPTY_GROUP",
                operation=operation,
                code="NON_EMPTY_GROUP",
            )

    def delete_group(self, group: str) -> bool:
        self.calls.append(("delete_group", (group,)))
        if group not in self.groups:
            return False
        self._active(group, f"delete group {group!r}")
        del self.groups[group]
        return True

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.calls.append(("alter_group_offsets", (group, dict(offsets))))
        if not offsets:
            return
        for (topic, partition), offset in offsets.items():
            if offset < 0:
                raise ValueError(f"offset for {topic}[{partition}] must be >= 0, not {offset}")
        self._active(group, f"alter offsets of group {group!r}")
        self.groups.setdefault(group, {}).update(offsets)

    # -- not modelled ---------------------------------------------------------------------------

    def _not_modelled(self, what: str) -> NoReturn:
        raise NotImplementedError(f"FakeKafka does not model {what}")

    def read_connector_offsets(
        self, topic: str, connector_names: Iterable[str], *, timeout_s: float | None = None
    ) -> list[OffsetRecord]:
        self._not_modelled("Connect's offsets topics")

    def write_tombstones(self, records: Iterable[OffsetRecord]) -> list[WrittenRecord]:
        self._not_modelled("Connect's offsets topics")

    def restore_records(self, records: Iterable[RawRecord]) -> list[WrittenRecord]:
        self._not_modelled("Connect's offsets topics")

    def verify_tombstones(self, topic: str, records: Iterable[OffsetRecord], *, timeout_s: float | None = None) -> None:
        self._not_modelled("Connect's offsets topics")

    def truncate_topic(self, topic: str) -> dict[int, int]:
        self._not_modelled("topic truncation")


#: checked by mypy: the double implements the interface the reset calls
_FAKE_IMPLEMENTS_API: type[KafkaApi] = FakeKafka
