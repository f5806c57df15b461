"""LinkedIn's Burrow on loopback, beside a test broker: in-memory storage, no ZooKeeper.

The binary comes from ``tests/env/burrow/build.sh`` (see there why from a source tree) and is
looked up in the test cache. ``Burrow`` writes a ``burrow.toml`` with one cluster and one
``kafka`` consumer module (which reads ``__consumer_offsets``), the ``inmemory`` storage with a
ring of ``intervals`` commits, the ``caching`` evaluator and the HTTP server, and answers
per-partition statuses from Burrow's own ``GET /v3/kafka/<cluster>/consumer/<group>/lag``.

    with Burrow(root, kafka.bootstrap, intervals=5) as burrow:  # once some group has committed
        burrow.partitions("connect-my-sink")  # {("topic", 0): BurrowPartition(...)}
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import httpx

from tests.env.servers import ManagedProcess, MissingTestEnvError, cache_dir, free_port, wait_until

BURROW_VERSION: Final = "1.9.5"
CLUSTER: Final = "test"


def burrow_binary() -> Path:
    path = cache_dir() / f"burrow-{BURROW_VERSION}" / "burrow"
    if not path.is_file():
        raise MissingTestEnvError(
            f"Burrow {BURROW_VERSION} not found at {path}: the Go module proxy refuses "
            "github.com/linkedin/Burrow, so build it from its v1.9.5 tree with tests/env/burrow/build.sh"
        )
    return path


@dataclass(frozen=True)
class BurrowPartition:
    """One partition of Burrow's answer: its status and the ring's first and last commit."""

    status: str
    start_offset: int | None
    end_offset: int | None
    current_lag: int
    complete: float


class Burrow:
    """One Burrow process reading one Kafka cluster's offset commits."""

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        *,
        intervals: int = 10,
        offset_refresh_s: int = 1,
        kafka_version: str = "3.6.0",
        timeout: float = 60.0,
    ) -> None:
        self.workdir = root / "burrow"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        self.intervals = intervals
        self.offset_refresh_s = offset_refresh_s
        self.kafka_version = kafka_version
        self.timeout = timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "burrow.log"
        self._proc: ManagedProcess | None = None
        self.http = httpx.Client(timeout=10)

    def config(self) -> str:
        servers = f'["{self.bootstrap}"]'
        # min-distance 0: every commit takes a ring slot (Burrow's default); expire-cache 1 s so
        # two reads a second apart are two evaluations; kafka-version: sarama's protocol
        # versions for Kafka 3.6 (Kafka 4 refuses those before 2.1, KIP-896).
        return f"""\
[general]
pidfile = "{self.workdir}/burrow.pid"

[logging]
level = "info"

[client-profile.test]
kafka-version = "{self.kafka_version}"
client-id = "burrow"

[cluster.{CLUSTER}]
class-name = "kafka"
client-profile = "test"
servers = {servers}
topic-refresh = 2
offset-refresh = {self.offset_refresh_s}

[consumer.{CLUSTER}]
class-name = "kafka"
cluster = "{CLUSTER}"
client-profile = "test"
servers = {servers}
start-latest = false

[storage.default]
class-name = "inmemory"
intervals = {self.intervals}
min-distance = 0
workers = 2

[evaluator.default]
class-name = "caching"
expire-cache = 1

[httpserver.default]
address = "127.0.0.1:{self.port}"
"""

    def start(self) -> Self:
        binary = burrow_binary()
        wait_until(self._offsets_topic_led, timeout=self.timeout, what="__consumer_offsets led (a group committed)")
        (self.workdir / "burrow.toml").write_text(self.config())
        self._proc = ManagedProcess(
            "burrow",
            [str(binary), "--config-dir", str(self.workdir)],
            cwd=self.workdir,
            log_path=self.log_path,
        )
        self._proc.start()
        try:
            wait_until(self._up, timeout=self.timeout, what="Burrow's HTTP server", proc=self._proc)
        except BaseException:
            self._proc.kill()
            raise
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop(grace=10)
        self.http.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _offsets_topic_led(self) -> bool:
        """Whether ``__consumer_offsets`` exists and every partition has a leader.

        Burrow's consumer module exits ("failed to start consumer", then "Burrow failed") when the
        offsets topic is missing or a partition has no leader yet, as on a fresh broker: start
        Burrow after some group has committed (the first FindCoordinator creates the topic)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topic = admin.list_topics(timeout=5).topics.get("__consumer_offsets")
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in topic.partitions.values())

    def _up(self) -> bool:
        return self.http.get(f"{self.url}/burrow/admin").status_code == 200

    def lag(self, group: str) -> dict[str, Any] | None:
        """Burrow's evaluation of ``group`` (the ``status`` object), or None before it has one."""
        response = self.http.get(f"{self.url}/v3/kafka/{CLUSTER}/consumer/{group}/lag")
        if response.status_code != 200:
            return None
        status: dict[str, Any] = response.json()["status"]
        return status

    def partitions(self, group: str) -> dict[tuple[str, int], BurrowPartition]:
        status = self.lag(group) or {}
        out: dict[tuple[str, int], BurrowPartition] = {}
        for p in status.get("partitions") or []:
            start, end = p.get("start") or {}, p.get("end") or {}
            out[(str(p["topic"]), int(p["partition"]))] = BurrowPartition(
                status=str(p["status"]),
                start_offset=start.get("offset"),
                end_offset=end.get("offset"),
                current_lag=int(p.get("current_lag") or 0),
                complete=float(p.get("complete") or 0),
            )
        return out

    def wait_for_offset(self, group: str, key: tuple[str, int], offset: int, timeout: float = 30.0) -> None:
        """Until Burrow's ring ends at ``offset`` for ``key`` (it has read that commit)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.partitions(group).get(key)
            if seen is not None and seen.end_offset == offset:
                return
            time.sleep(0.25)
        raise TimeoutError(f"Burrow did not see {group} commit {offset} on {key}: {self.partitions(group)}")
