"""A TCP proxy for the Kafka protocol that adds a fixed delay to every request, as a network does.

Loopback has no latency, so a producer against the test broker gets its acknowledgement back in
well under a millisecond, and ``max.in.flight.requests.per.connection=1`` (what Connect sets for
source tasks) costs nothing. On a real network every request waits for a round trip, the records
accumulated meanwhile wait for the next request, and ``batch.size`` caps how many of them one
request can take. This proxy puts that round trip back::

    with LatencyProxy(("127.0.0.1", broker.port), delay=0.040) as proxy:
        ...  # clients bootstrap to proxy.address

It reads the client's byte stream as Kafka request frames (a 4-byte big-endian length, then that
many bytes: api key, api version, correlation id, ...) and forwards each frame to the broker
``delay`` seconds after it arrived, in arrival order per connection. Frames are delayed, not
serialised: a client that pipelines requests (several in flight) gets them all forwarded one delay
later, as on a wire, not one delay after another. Broker-to-client bytes are copied through at once.

After bootstrap, clients connect to the host:port the broker's metadata advertises, which must
therefore be the proxy's, or clients would go around it: start the broker with its advertised
listener set to ``proxy.port`` (``KafkaBroker(..., advertised_port=...)``; tests/env/pressure.py does).
The proxy can listen before the broker is up: each client connection opens its own upstream
connection, and is closed if that fails.

``slow`` adds more to the requests of one api key from clients whose ``client.id`` ends with a
given suffix (read from the request header): ``slow={(FETCH, "-offsets"): 5.0}`` holds only a
Connect worker's reader of its offsets topic (client id ``<group.id>-offsets``), so that reader
trails the topic while the worker's other readers keep up.

The proxy counts requests per api key (``requests[0]`` is Produce), so a test can check what
the clients' metrics say about requests against what went over the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from collections.abc import Mapping
from types import TracebackType
from typing import Final, Self

from tests.env.servers import free_port

#: Kafka request api keys this module names (the Kafka protocol guide lists them all).
PRODUCE: Final = 0
FETCH: Final = 1


class LatencyProxy:
    """Forwards Kafka request frames to ``upstream`` after ``delay`` seconds each (see module doc)."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        delay: float,
        port: int | None = None,
        slow: Mapping[tuple[int, str], float] | None = None,
    ) -> None:
        if delay < 0 or any(d < 0 for d in (slow or {}).values()):
            raise ValueError("delays must be >= 0")
        self.upstream = upstream
        #: Seconds added to every request; may be changed while running (applies to new frames).
        self.delay = delay
        #: More seconds for (api key, client id suffix): see the module docstring.
        self.slow = dict(slow or {})
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        #: Requests forwarded, per api key.
        self.requests: Counter[int] = Counter()
        self.request_bytes: Counter[int] = Counter()
        self.connections = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=f"latencyproxy-{self.port}", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._start_error is not None:
            raise self._start_error
        if self._server is None:
            raise RuntimeError(f"latency proxy on port {self.port} did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def counts(self) -> dict[int, int]:
        """A copy of the per-api-key request counts."""
        with self._lock:
            return dict(self.requests)

    # -- event loop --------------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        except BaseException as exc:
            self._start_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self.connections += 1
        try:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                return
            pumps = self._pumps(client_reader, client_writer, upstream_reader, upstream_writer)
            try:
                # Whichever side ends (EOF, reset), the connection is over for both.
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
                # abort, not close: close() would wait for a peer that may never read again.
                upstream_writer.transport.abort()
        finally:
            client_writer.transport.abort()
            self._tasks.discard(task)

    def _pumps(
        self,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
    ) -> list[asyncio.Task[None]]:
        """The tasks that move one connection's bytes (a subclass may move them otherwise)."""
        frames: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        return [
            asyncio.create_task(self._read_requests(client_reader, frames)),
            asyncio.create_task(self._forward_requests(frames, upstream_writer)),
            asyncio.create_task(self._copy(upstream_reader, client_writer)),
        ]

    async def _read_requests(
        self, reader: asyncio.StreamReader, frames: asyncio.Queue[tuple[float, bytes] | None]
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                header = await reader.readexactly(4)
                (size,) = struct.unpack(">i", header)
                body = await reader.readexactly(size)
                api_key = struct.unpack(">h", body[:2])[0] if size >= 2 else -1
                with self._lock:
                    self.requests[api_key] += 1
                    self.request_bytes[api_key] += 4 + size
                frames.put_nowait((loop.time() + self.delay + self._slowed(api_key, body), header + body))
        except (asyncio.IncompleteReadError, ConnectionError):
            # Let the frames already read go out before the connection ends.
            frames.put_nowait(None)
            await asyncio.Event().wait()  # ended by cancellation when the forwarder finishes

    def _slowed(self, api_key: int, body: bytes) -> float:
        """The extra delay ``slow`` gives this request. The request header (every version since
        v1) is api key, api version, correlation id, then the client id as a nullable string."""
        if not self.slow or len(body) < 10:
            return 0.0
        (length,) = struct.unpack(">h", body[8:10])
        client_id = body[10 : 10 + length].decode("utf-8", "replace") if length > 0 else ""
        return sum(d for (key, suffix), d in self.slow.items() if key == api_key and client_id.endswith(suffix))

    async def _forward_requests(
        self, frames: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        while (item := await frames.get()) is not None:
            due, frame = item
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(frame)
            await writer.drain()

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
