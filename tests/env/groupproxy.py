"""A Kafka-protocol proxy that answers DescribeGroups with the members of an Apache Kafka group.

The test broker (Tansu 0.6) lists no members for a group, active or not, so nothing that reads
ownership from a group's member assignments can be tried against it. This proxy sits between the
clients and the broker, forwards every request, and answers DescribeGroups (api key 15) itself
for the groups it is given: their state, protocol and members, each member's metadata and
assignment being the bytes kafka-clients' own ``ConsumerProtocol`` makes (``GroupBytes``, built by
``tests/env/plugins/build.sh`` against the Connect worker's kafka-clients jar). Clients ask
KIP-848's ConsumerGroupDescribe (api key 69) first when the broker lists it, as Tansu does; for
those groups it is answered as Apache Kafka answers it for a classic-protocol group (not found),
after which clients ask DescribeGroups. Every other group,
and every other request, is the broker's own answer::

    proxy = GroupsProxy(("127.0.0.1", tansu.port), port=proxy_port).start()
    proxy.groups["connect-orders"] = Group("Stable", "range", [Member(...), ...])

Like :class:`~tests.env.latencyproxy.LatencyProxy` (whose lifecycle it reuses), the broker must
advertise the proxy's port, or clients leave the proxy after bootstrap. Answers go back in request
order, as Kafka's do on one connection: a DescribeGroups answered here waits for the broker's
answers to the requests before it. (Produce with ``acks=0`` has no answer and would break that
order; the clients this proxy serves do not produce.)

The wire format is written here for the flexible versions only (DescribeGroups v5-v6, v6 adding
an error message; ConsumerGroupDescribe v0-v1), from the Kafka protocol guide; a request of any
other version fails the connection, so a test cannot pass on an answer this module cannot write.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import subprocess
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from tests.env.latencyproxy import LatencyProxy
from tests.env.plugins import plugin_jar
from tests.env.servers import cache_dir

DESCRIBE_GROUPS: Final = 15
#: KIP-848's describe (Kafka 3.7+); clients try it first when the broker lists it, as Tansu does
CONSUMER_GROUP_DESCRIBE: Final = 69
#: the versions this module writes: the flexible ones (librdkafka 2.16 asks DescribeGroups v5
#: and ConsumerGroupDescribe v0 of Tansu 0.6)
VERSIONS: Final = {DESCRIBE_GROUPS: range(5, 7), CONSUMER_GROUP_DESCRIBE: range(0, 2)}
#: Kafka's error code GROUP_ID_NOT_FOUND
GROUP_ID_NOT_FOUND: Final = 69


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass
class Group:
    state: str
    protocol: str
    members: list[Member] = field(default_factory=list)
    protocol_type: str = "consumer"


class ConsumerProtocolBytes:
    """kafka-clients' ``ConsumerProtocol`` in a JVM of its own: the subscription and assignment
    bytes a Java consumer writes (see ``GroupBytes.java``)."""

    def __init__(self) -> None:
        jars = [plugin_jar("groupbytes"), *sorted((cache_dir() / "connect").glob("kafka-clients-*.jar"))]
        self._classpath = ":".join(str(j) for j in jars)

    def many(self, requests: Sequence[str]) -> list[bytes]:
        """One JVM for a batch of request lines (the line protocol of ``GroupBytes``)."""
        out = subprocess.run(
            ["java", "-cp", self._classpath, "io.connectops.testplugins.GroupBytes"],
            input="\n".join(requests) + "\n",
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        lines = out.stdout.split()
        assert len(lines) == len(requests), out.stderr
        return [base64.b64decode(line) for line in lines]

    @staticmethod
    def assignment(partitions: Iterable[tuple[str, int]], *, version: int = 3, user_data: str | None = None) -> str:
        tps = ",".join(f"{t}:{p}" for t, p in partitions) or "-"
        return f"assignment {version} {user_data or '-'} {tps}"

    @staticmethod
    def subscription(topics: Iterable[str], *, version: int = 3, user_data: str | None = None) -> str:
        return f"subscription {version} {user_data or '-'} {','.join(topics)} -"


# -- the wire format -------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self, compact: bool = True) -> str | None:
        size = self.uvarint() - 1 if compact else self.take(">h")
        if size < 0:
            return None
        text = self.data[self.at : self.at + size].decode()
        self.at += size
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _Writer:
    """The flexible encoding: compact strings, bytes and arrays, tagged fields (none here)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def put(self, fmt: str, value: int) -> None:
        self.out += struct.pack(fmt, value)

    def string(self, text: str | None) -> None:
        raw = None if text is None else text.encode()
        self.out += _uvarint(0 if raw is None else len(raw) + 1)
        self.out += raw or b""

    def bytes_(self, raw: bytes) -> None:
        self.out += _uvarint(len(raw) + 1)
        self.out += raw

    def count(self, n: int) -> None:
        self.out += _uvarint(n + 1)

    def tags(self) -> None:
        self.out += _uvarint(0)

    def frame(self) -> bytes:
        return struct.pack(">i", len(self.out)) + bytes(self.out)


@dataclass(frozen=True)
class DescribeRequest:
    api_key: int
    version: int
    correlation_id: int
    groups: list[str]


def parse_describe(frame: bytes) -> DescribeRequest | None:
    """The request in ``frame`` (the bytes after the length) when it describes groups."""
    r = _Reader(frame)
    api_key, version, correlation_id = r.take(">h"), r.take(">h"), r.take(">i")
    if api_key not in VERSIONS:
        return None
    if version not in VERSIONS[api_key]:
        raise ValueError(f"api {api_key} v{version}: this proxy writes {VERSIONS[api_key]} only")
    r.string(compact=False)  # the client id stays a classic nullable string in header v2
    r.skip_tags()
    groups = [r.string() or "" for _ in range(max(r.uvarint() - 1, 0))]
    return DescribeRequest(api_key, version, correlation_id, groups)


def answer(request: DescribeRequest, groups: dict[str, Group]) -> bytes:
    if request.api_key == CONSUMER_GROUP_DESCRIBE:
        return not_a_consumer_group(request)
    return describe_groups_response(request, groups)


def not_a_consumer_group(request: DescribeRequest) -> bytes:
    """Apache Kafka's ConsumerGroupDescribe answer for groups of the classic protocol (what
    Connect's sink consumers use by default): GROUP_ID_NOT_FOUND, "Group X is not a consumer
    group." (``GroupMetadataManager.consumerGroupDescribe``); clients then ask DescribeGroups."""
    w = _Writer()
    w.put(">i", request.correlation_id)
    w.tags()
    w.put(">i", 0)  # throttle time
    w.count(len(request.groups))
    for group_id in request.groups:
        w.put(">h", GROUP_ID_NOT_FOUND)
        w.string(f"Group {group_id} is not a consumer group.")
        w.string(group_id)
        w.string("")  # state
        w.put(">i", 0)  # group epoch
        w.put(">i", 0)  # assignment epoch
        w.string("")  # assignor
        w.count(0)  # members
        w.put(">i", -(2**31))  # authorized operations
        w.tags()
    w.tags()
    return w.frame()


def describe_groups_response(request: DescribeRequest, groups: dict[str, Group]) -> bytes:
    """The answer frame (length included) an Apache Kafka broker gives for ``groups``; a group
    not in ``groups`` is answered Dead with no members, as Kafka answers an unknown group."""
    v = request.version
    w = _Writer()
    w.put(">i", request.correlation_id)
    w.tags()  # response header v1
    w.put(">i", 0)  # throttle time
    w.count(len(request.groups))
    for group_id in request.groups:
        group = groups.get(group_id, Group("Dead", "", [], protocol_type=""))
        w.put(">h", 0)
        if v >= 6:
            w.string(None)
        w.string(group_id)
        w.string(group.state)
        w.string(group.protocol_type)
        w.string(group.protocol)
        w.count(len(group.members))
        for m in group.members:
            w.string(m.member_id)
            w.string(m.group_instance_id)
            w.string(m.client_id)
            w.string(m.host)
            w.bytes_(m.metadata)
            w.bytes_(m.assignment)
            w.tags()
        w.put(">i", -(2**31))  # authorized operations: not asked for
        w.tags()
    w.tags()
    return w.frame()


# -- the proxy -------------------------------------------------------------------------------------


class GroupsProxy(LatencyProxy):
    """Forwards everything to ``upstream`` except DescribeGroups of the groups in :attr:`groups`."""

    def __init__(self, upstream: tuple[str, int], *, port: int | None = None) -> None:
        super().__init__(upstream, delay=0.0, port=port)
        #: group id -> what DescribeGroups answers for it (may be changed while running)
        self.groups: dict[str, Group] = {}
        #: describe requests answered here, per (api key, version)
        self.answered: Counter[tuple[int, int]] = Counter()

    def _pumps(
        self,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
    ) -> list[asyncio.Task[None]]:
        # one future per request, in request order: answered here at once, or by the broker
        slots: asyncio.Queue[asyncio.Future[bytes]] = asyncio.Queue()
        forwarded: deque[asyncio.Future[bytes]] = deque()
        return [
            asyncio.create_task(self._requests(client_reader, upstream_writer, slots, forwarded)),
            asyncio.create_task(self._answers(upstream_reader, forwarded)),
            asyncio.create_task(self._replies(slots, client_writer)),
        ]

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        slots: asyncio.Queue[asyncio.Future[bytes]],
        forwarded: deque[asyncio.Future[bytes]],
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                header = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", header)[0])
                slot: asyncio.Future[bytes] = loop.create_future()
                with self._lock:
                    self.requests[struct.unpack_from(">h", body)[0]] += 1
                request = parse_describe(body)
                if request is not None and all(g in self.groups for g in request.groups):
                    self.answered[(request.api_key, request.version)] += 1
                    slot.set_result(answer(request, self.groups))
                else:
                    forwarded.append(slot)
                    upstream.write(header + body)
                    await upstream.drain()
                slots.put_nowait(slot)
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    @staticmethod
    async def _answers(reader: asyncio.StreamReader, forwarded: deque[asyncio.Future[bytes]]) -> None:
        try:
            while True:
                header = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", header)[0])
                forwarded.popleft().set_result(header + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    @staticmethod
    async def _replies(slots: asyncio.Queue[asyncio.Future[bytes]], writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(await (await slots.get()))
            await writer.drain()
