"""The founding case, end to end on Apache Kafka: Debezium's PostgreSQL connector through the operator.

A real PostgreSQL (logical decoding, ``pgoutput``), Debezium 3.6.1.Final's connector on a Connect
worker of its own, the operator in-process. Every claim is read from the system that holds the
truth, never from the operator's status alone: the change topic's records (counted per row key,
with Debezium's ``op``), Connect's ``GET /connectors/<n>/config`` and ``/offsets``, the worker's
offsets topic, the worker log's ``ProducerConfig values`` block that the task's producer prints
when it is built, and PostgreSQL's replication slot (``confirmed_flush_lsn``, which Debezium moves
to the LSN of each offset Connect commits).

* producer overrides: ``spec.producerOverrides`` reaches the task's producer, also when raised
  later (the cure of the founding case: offset commits failing until batch.size went up), and the
  task restart that applies it does not snapshot again;
* ``action: reset`` by REST (KIP-875 ``DELETE /offsets``) and by tombstones in the offsets topic:
  Debezium finds no offset and snapshots the table again (every row a second time, as ``op: r``);
* ``action: restore`` from the backup that reset wrote: the offset, LSN included, is exactly the
  one PostgreSQL had confirmed before the reset, Debezium streams on from it without another
  snapshot, and rows inserted afterwards arrive once.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_e2e import backup_doc, offsets, reset
from tests.env.postgres import (
    DEBEZIUM_POSTGRES_CONNECTOR,
    DEBEZIUM_VERSION,
    PostgresServer,
    debezium_plugin_path,
)
from tests.env.records import _read_topic
from tests.env.servers import ConnectFactory, ConnectWorker, MissingTestEnvError, ServerStartError

ROWS = 5
_T = TypeVar("_T")


def _or_fail(start: Callable[[], _T]) -> _T:
    # Missing provisioning fails, never skips: a skipped founding case would look green.
    try:
        return start()
    except MissingTestEnvError as exc:
        message = f"test environment not provisioned: {exc}"
    except ServerStartError as exc:
        message = f"test server failed to start: {exc}"
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def postgres(testenv_root: Path) -> Iterator[PostgresServer]:
    server = PostgresServer(testenv_root)
    try:
        yield _or_fail(server.start)
    finally:
        server.close()


@pytest.fixture(scope="module")
def dbz_worker(connect_factory: ConnectFactory, postgres: PostgresServer) -> Iterator[ConnectWorker]:
    # Depends on postgres so that it stops first: its tasks hold replication connections.
    worker = connect_factory("connect-dbz", plugin_path=[_or_fail(debezium_plugin_path)])
    # the worker's readiness checks only its own FileStream plugins: fail here, by name, when the
    # plugin directory did not load, rather than as a Connector that never gets Ready
    listed = httpx.get(f"{worker.url}/connector-plugins", timeout=10).json()
    versions = [p.get("version") for p in listed if p.get("class") == DEBEZIUM_POSTGRES_CONNECTOR]
    assert versions == [DEBEZIUM_VERSION], f"Debezium's connector on {worker.name}: {versions}; plugins {listed}"
    yield worker
    worker.stop()  # an idle JVM for the rest of the session otherwise


@pytest.fixture
def cluster(k8s: K8s, dbz_worker: ConnectWorker) -> str:
    k8s.create("connectclusters", "dbz", connect_cluster_spec(dbz_worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "dbz", "Ready", "True")
    return "dbz"


class Table:
    """One table of rows ``id -> name`` and the Debezium connector capturing it (its own slot,
    publication and topic prefix, so that tests share nothing but the servers)."""

    def __init__(self, postgres: PostgresServer) -> None:
        self.pg = postgres
        tag = uuid.uuid4().hex[:8]
        self.name = f"items_{tag}"
        self.connector = f"dbz-{tag}"
        self.prefix = f"dbz{tag}"
        self.slot = f"slot_{tag}"
        self.topic = f"{self.prefix}.public.{self.name}"
        postgres.sql(f"CREATE TABLE public.{self.name} (id int PRIMARY KEY, name text NOT NULL)")
        self.insert(range(1, ROWS + 1))

    def insert(self, ids: range) -> None:
        self.pg.sql(
            f"INSERT INTO public.{self.name} SELECT g, 'item-' || g FROM generate_series({ids.start}, {ids.stop - 1}) g"
        )

    def spec(self, cluster: str, **extra: Any) -> dict[str, Any]:
        connection = self.pg.debezium_connection()
        connection.pop("database.password")  # from the Secret create() makes, as a deployment has it
        return {
            "clusterRef": {"name": cluster},
            "class": DEBEZIUM_POSTGRES_CONNECTOR,
            "config": {
                **connection,
                "plugin.name": "pgoutput",
                "topic.prefix": self.prefix,
                "table.include.list": f"public.{self.name}",
                "slot.name": self.slot,
                "publication.name": f"pub_{self.slot}",
                "publication.autocreate.mode": "filtered",
                "snapshot.mode": "initial",
            },
            "configFrom": {"database.password": {"secretKeyRef": {"name": f"{self.connector}-db", "key": "password"}}},
            **extra,
        }

    def create(self, k8s: K8s, cluster: str, **extra: Any) -> None:
        k8s.create_secret(f"{self.connector}-db", {"password": self.pg.password})
        k8s.create("connectors", self.connector, self.spec(cluster, **extra), "Connector")
        k8s.wait_condition("connectors", self.connector, "Ready", "True", timeout=120)

    def events(self, bootstrap: str) -> list[tuple[int, str]]:
        """The change topic's records as (row id, Debezium op), in offset order."""
        out = []
        for message in _read_topic(bootstrap, self.topic, 1.5, one_partition=True):
            key, value = json.loads(message.key()), json.loads(message.value())
            out.append((int(key["id"]), str(value["op"])))
        return out

    def per_key(self, bootstrap: str) -> Counter[int]:
        return Counter(row for row, _ in self.events(bootstrap))

    def confirmed_flush_lsn(self) -> int | None:
        slot = self.pg.replication_slot(self.slot)
        return lsn_value(slot["confirmed_flush_lsn"]) if slot and slot["confirmed_flush_lsn"] else None


def lsn_value(text: str) -> int:
    """PostgreSQL's ``X/Y`` LSN text as the 64-bit number Debezium writes into its offsets."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def flushed_lsn(offset: dict[str, Any]) -> int:
    """The LSN Debezium confirms to PostgreSQL when Connect commits ``offset``: the last commit's
    (``lsn_commit``) once it saw one, else the last processed change's, else the snapshot's."""
    for key in ("lsn_commit", "lsn_proc", "lsn"):
        if offset.get(key) is not None:
            return int(offset[key])
    raise AssertionError(f"no LSN in {offset}")


def only_offset(rest: ConnectREST, name: str) -> dict[str, Any]:
    """Debezium's one source partition ({server: topic.prefix}) and its offset, from GET /offsets
    (empty before the first commit)."""
    entries = offsets(rest, name)
    assert len(entries) <= 1, entries
    offset: dict[str, Any] = entries[0]["offset"] if entries else {}
    return offset


def offsets_history(worker: ConnectWorker, connector: str) -> list[tuple[int, int, bytes, Any]]:
    """Every record of ``connector`` in the worker's offsets topic, as (Kafka partition, offset,
    key bytes, parsed value or None for a tombstone), in the order each partition holds them."""
    history = []
    for message in _read_topic(worker.bootstrap, worker.offset_topic, 1.0):
        key = json.loads(message.key())
        if isinstance(key, list) and key[0] == connector:
            value = message.value()
            history.append((message.partition(), message.offset(), message.key(), value and json.loads(value)))
    return sorted(history, key=lambda r: (r[0], r[1]))


def producer_configs(worker: ConnectWorker, connector: str) -> list[dict[str, str]]:
    """Every ``ProducerConfig values`` block the worker logged for task 0's producer of
    ``connector``, oldest first: the settings the producer was really built with."""
    text = worker.log_path.read_text(errors="replace")
    blocks = []
    for block in text.split("ProducerConfig values:")[1:]:
        # the block is tab-indented "key = value" lines up to the next log line
        settings = dict(re.findall(r"^\t(\S+) = (.*)$", block.split("\n[", 1)[0], flags=re.MULTILINE))
        if settings.get("client.id") == f"connector-producer-{connector}-0":
            blocks.append(settings)
    return blocks


def snapshot_committed(rest: ConnectREST, table: Table) -> dict[str, Any]:
    """Wait until Connect holds the offset of the snapshot's last record; return it."""
    offset: dict[str, Any] = wait_for(
        lambda: (o := only_offset(rest, table.connector)).get("snapshot_completed") and o,
        90,
        "the snapshot's offset committed",
    )
    return offset


def test_producer_overrides_reach_the_live_producer(
    k8s: K8s, cluster: str, dbz_worker: ConnectWorker, postgres: PostgresServer
) -> None:
    rest = ConnectREST(dbz_worker)
    table = Table(postgres)
    table.create(k8s, cluster, producerOverrides={"batchSize": 65536, "lingerMs": 20})

    config = rest.config(table.connector)
    assert config["producer.override.batch.size"] == "65536"
    assert config["producer.override.linger.ms"] == "20"
    assert config["connector.class"] == DEBEZIUM_POSTGRES_CONNECTOR
    # the snapshot lands: every row once, as a snapshot read
    wait_for(lambda: table.per_key(dbz_worker.bootstrap) == Counter(range(1, ROWS + 1)), 90, "the snapshot's rows")
    assert {op for _, op in table.events(dbz_worker.bootstrap)} == {"r"}
    snapshot = snapshot_committed(rest, table)
    # the slot was made for this snapshot, at its LSN
    wait_for(lambda: table.confirmed_flush_lsn() == snapshot["lsn"], 60, "the slot at the snapshot's LSN")
    slot = postgres.replication_slot(table.slot)
    assert slot is not None
    assert slot["plugin"] == "pgoutput"
    # the task's producer was built with the overrides (its own account of its settings)
    built = wait_for(lambda: producer_configs(dbz_worker, table.connector), 30, "the task producer's config in the log")
    assert built[-1]["batch.size"] == "65536"
    assert built[-1]["linger.ms"] == "20"

    # the founding case's cure: raise batch.size on the object; the operator applies it and the
    # task's producer is rebuilt with it
    k8s.patch_spec("connectors", table.connector, {"producerOverrides": {"batchSize": 327680, "lingerMs": 20}})
    wait_for(lambda: rest.config(table.connector).get("producer.override.batch.size") == "327680", 60, "config updated")
    rebuilt = wait_for(
        lambda: [b for b in producer_configs(dbz_worker, table.connector)[len(built) :] if b["batch.size"] == "327680"],
        60,
        "a producer built with batch.size 327680",
    )
    assert rebuilt[-1]["linger.ms"] == "20"
    k8s.wait_condition("connectors", table.connector, "Ready", "True")
    wait_for(lambda: rest.state(table.connector) == "RUNNING", 30, "the connector running again")
    # the task restart resumed from its offset: a change streams once, nothing is snapshotted again
    table.insert(range(ROWS + 1, ROWS + 2))
    wait_for(
        lambda: table.per_key(dbz_worker.bootstrap) == Counter(range(1, ROWS + 2)), 60, "the new row, streamed once"
    )
    assert table.events(dbz_worker.bootstrap)[-1] == (ROWS + 1, "c")


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_reset_resnapshots_and_restore_puts_the_lsn_back(
    k8s: K8s, cluster: str, dbz_worker: ConnectWorker, postgres: PostgresServer, strategy: str
) -> None:
    rest = ConnectREST(dbz_worker)
    table = Table(postgres)
    table.create(k8s, cluster, producerOverrides={"batchSize": 327680})
    snapshot_committed(rest, table)
    # one change streamed after the snapshot: the offset to keep is a streaming one (lsn_proc,
    # txId), the kind a restore must bring back exactly
    table.insert(range(ROWS + 1, ROWS + 2))
    rows = Counter(range(1, ROWS + 2))
    wait_for(lambda: table.per_key(dbz_worker.bootstrap) == rows, 60, "the streamed row")
    before = wait_for(
        lambda: (o := only_offset(rest, table.connector)).get("lsn_proc") is not None and o, 60, "a streaming offset"
    )
    # PostgreSQL confirmed exactly the LSN of the offset Connect holds
    confirmed = flushed_lsn(before)
    wait_for(lambda: table.confirmed_flush_lsn() == confirmed, 60, "the slot confirmed the streamed LSN")
    # one key, [connector, {server: prefix}], whose latest record is that offset
    old = offsets_history(dbz_worker, table.connector)
    assert {json.loads(key)[1]["server"] for _, _, key, _ in old} == {table.prefix}
    assert old[-1][3] == before

    # reset: Debezium finds no offset and snapshots the table again
    cleared = reset(
        k8s, f"reset-{strategy}", {"connectorRef": {"name": table.connector}, "action": "reset", "strategy": strategy}
    )
    assert cleared["strategy"] == strategy
    doc = backup_doc(k8s, cleared["backup"]["configMap"])
    assert doc["connectors"][table.connector]["offsets"] == [{"partition": {"server": table.prefix}, "offset": before}]
    if strategy == "tombstone":
        # and the raw record, to be written back byte for byte
        saved = doc["connectors"][table.connector]["records"]
        assert [base64.b64decode(r["key"]) for r in saved] == [old[-1][2]]
        # written by the operator, not through Connect: no answer from the connector to record
        assert [(c["call"], c.get("confirmedByConnector")) for c in cleared["changes"]] == [("tombstones", None)]
    else:
        # Debezium keeps Connect's default alterOffsets: Connect says it changed only the offsets
        # it manages, and it is right, the replication slot is the connector's own (checked below)
        assert [c["confirmedByConnector"] for c in cleared["changes"]] == [False]
        external = next(c for c in cleared["conditions"] if c["type"] == "OffsetsExternallyManaged")
        assert external["status"] == "True"
    # in the offsets topic, the old offset is followed by a tombstone for the same key in the same
    # partition (Connect's DELETE /offsets writes one too), and only then by the new snapshot's
    later = offsets_history(dbz_worker, table.connector)[len(old) :]
    assert later, "nothing written after the old offset"
    assert {(partition, key) for partition, _, key, _ in later} == {(old[-1][0], old[-1][2])}
    assert later[0][3] is None, later
    twice = Counter(dict.fromkeys(rows, 2))
    wait_for(lambda: table.per_key(dbz_worker.bootstrap) == twice, 90, "every row snapshotted again")
    events = table.events(dbz_worker.bootstrap)
    assert [op for _, op in events[len(rows) :]] == ["r"] * len(rows), events
    after_reset = snapshot_committed(rest, table)
    assert after_reset != before
    assert after_reset["lsn"] >= before["lsn"]
    # a reset changes Connect's offsets only: the slot still holds the LSN confirmed before it
    assert table.confirmed_flush_lsn() == confirmed

    # restore the reset's backup: the LSN PostgreSQL had confirmed before the reset is back
    restored = reset(
        k8s,
        f"restore-{strategy}",
        {
            "connectorRef": {"name": table.connector},
            "action": "restore",
            "strategy": strategy,
            "restoreFrom": cleared["backup"]["configMap"],
        },
    )
    assert restored["strategy"] == strategy
    assert only_offset(rest, table.connector) == before
    assert flushed_lsn(only_offset(rest, table.connector)) == confirmed
    history = offsets_history(dbz_worker, table.connector)
    assert history[-1][2] == old[-1][2]
    assert history[-1][3] == before
    wait_for(lambda: rest.state(table.connector) == "RUNNING", 30, "the connector running after the restore")

    # Debezium streams on from the restored LSN: new rows arrive once, nothing is snapshotted
    # again (a snapshot would come before any streamed change)
    table.insert(range(ROWS + 2, ROWS + 4))
    expected = twice + Counter(range(ROWS + 2, ROWS + 4))
    wait_for(lambda: table.per_key(dbz_worker.bootstrap) == expected, 60, "the new rows, once each")
    events = table.events(dbz_worker.bootstrap)
    assert events[2 * len(rows) :] == [(ROWS + 2, "c"), (ROWS + 3, "c")], events
    # and PostgreSQL is told of them: the slot moves on with the offsets Connect commits
    wait_for(
        lambda: (
            (o := only_offset(rest, table.connector)).get("lsn", 0) > before["lsn"]
            and table.confirmed_flush_lsn() == flushed_lsn(o)
        ),
        60,
        "the slot confirming the new offset's LSN",
    )
