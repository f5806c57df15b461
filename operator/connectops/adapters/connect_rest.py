"""Kafka Connect REST client (httpx).

It owns the wire format (paths, JSON shapes, status codes by Kafka version, see
``shared/reference/kafka-connect-facts.md``) and turns every failure into a typed
:class:`ConnectError`; callers never see httpx exceptions. Connector names are always
percent-encoded as one path segment, because Connect accepts names with ``/``, spaces, ``?``…

Why ~750 lines in one module: one method per REST endpoint, each a few lines, over one request
path (deadline, size bound, concurrency lanes and large answers in turn, error typing); the
answers' shapes are checked in connect_answers.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from connectops import fence
from connectops.adapters import connect_answers as answers
from connectops.adapters.addresses import AddressGuard, AddressRefused, GuardedTransport
from connectops.concurrency.lanes import Lanes
from connectops.failures import ConnectopsError
from connectops.redact import NO_SECRETS, Redactor

JSONDict = dict[str, Any]


_T = TypeVar("_T")


class ConnectError(ConnectopsError):
    """Base of every Connect REST failure; ``str()`` is redacted and safe to show anywhere."""

    def __init__(self, message: str, *, status: int | None = None, operation: str = "") -> None:
        super().__init__(message, operation=operation)
        self.status = status

    def changed_nothing(self) -> bool:
        # a 4xx is Connect checking the request and doing nothing; a 5xx or no answer may come
        # after some offsets were written (a source's offsets are several records, no transaction)
        return self.refused or (self.status or 0) in range(400, 500)


class ConnectUnavailable(ConnectError):
    """The worker did not answer usefully: connection refused, timeout, or a 5xx."""

    retryable = True


class ConnectRebalancing(ConnectError):
    """409 while the worker group rebalances or a config change is in flight, or a 500 saying a
    rebalance is expected (what a worker answers between losing and regaining its assignment):
    retry soon."""

    retryable = True
    refused = True


class ConnectNotFound(ConnectError):
    """404: the connector (or plugin) does not exist, or not yet: a worker answers 404 for the
    status of a connector it created a moment ago, so it is worth asking again."""

    retryable = True


class ConnectConflict(ConnectError):
    """409 that is not a rebalance, e.g. creating a connector that already exists: another actor's
    change in flight, which settles without anyone's help."""

    retryable = True


class ConnectRejected(ConnectError):
    """4xx: Connect refused the request as given (bad config, wrong state for the operation)."""

    refused = True


class ConnectOffsetsInvalid(ConnectRejected):
    """Connect (or the connector) refused the offsets of a PATCH/DELETE as invalid. A sink's are
    checked by the framework (HTTP 400); a source connector's ``alterOffsets`` throws, which
    Connect answers with HTTP 500 and the connector's words (FileStreamSource: "Offset objects
    should either be null or contain the key 'position'"). Either way it is checked before any
    offset is written, and the same offsets are refused again: not worth a retry."""


class ConnectResponseTooLarge(ConnectError):
    """The answer exceeded the size cap: not something Kafka Connect sends; retrying will not help."""


class NotKafkaConnect(ConnectError):
    """The URL answered, but not as Kafka Connect documents that endpoint (another service, a
    proxy's page, a worker of a version too old to use). Never read as a success."""


class ConnectAuthFailed(ConnectError):
    """401/403: credentials wrong or missing. Retrying will not help until the Secret changes."""


class ConnectAddressRefused(ConnectError):
    """The URL's host resolves to an address the operator never connects to (a metadata or
    API-server address): nothing was sent. Not retried soon: only the URL, the DNS or the
    allowlist changing can cure it."""

    reason = "URLNotAllowed"
    refused = True


@dataclass(frozen=True)
class ServerInfo:
    version: str
    commit: str | None
    kafka_cluster_id: str | None


#: KIP-1017 (Kafka 3.9): GET /health answers 200 "healthy", 503 "starting", 500 "unhealthy"
HEALTH_STATES = frozenset({"healthy", "starting", "unhealthy"})


@dataclass(frozen=True)
class WorkerHealth:
    """A worker's own word on its health (KIP-1017); ``unknown`` when it predates ``/health``."""

    status: str
    message: str


@dataclass(frozen=True)
class Plugin:
    """One item of ``GET /connector-plugins?connectorsOnly=false``: one per installed version of a
    class (KIP-891). ``type`` is Connect's: source, sink, converter, header_converter,
    transformation, predicate; ``version`` is None when the plugin does not report one."""

    class_name: str
    type: str
    version: str | None


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str | None
    trace: str | None
    #: the plugin version the task runs (Connect 4.1+, KIP-891; None when not reported)
    version: str | None = None


@dataclass(frozen=True)
class ConnectorState:
    name: str
    type: str | None
    state: str
    worker_id: str | None
    trace: str | None
    tasks: tuple[TaskState, ...]
    #: the plugin version the connector runs (Connect 4.1+, KIP-891; None when not reported)
    version: str | None = None


@dataclass(frozen=True)
class ListedConnector:
    """One connector as the expanded listing shows it: what get_config and get_status answer."""

    config: dict[str, str]
    state: ConnectorState


@dataclass(frozen=True)
class ValidationResult:
    error_count: int
    #: config key -> Connect's error messages (only keys that have errors)
    errors: dict[str, list[str]] = field(default_factory=dict)


def _segment(name: str) -> str:
    return quote(name, safe="")


#: an answer past this size is a large one: of those, one worker group's client reads
#: ``large_answers_at_once`` at a time (see ConnectClient._read)
LARGE_ANSWER_BYTES = 1 << 20
_REBALANCE_HINTS = ("rebalance", "stale configuration", "concurrent config", "leader")
#: the offsets calls whose refusals may be validation (see ConnectOffsetsInvalid)
_OFFSETS_WRITES = frozenset({"alter offsets", "reset offsets"})
_OFFSET_WORDS = re.compile(r"\b(offsets?|partitions?|position)\b", re.IGNORECASE)
#: how Connect's and the connectors' validation words a refusal of the offsets given
_INVALID_WORDS = re.compile(
    r"\b(should|must|expected|invalid|need to be|needs to be|may not|cannot be|can't be|not a valid|"
    r"unrecognized|failed to parse|non-negative)\b",
    re.IGNORECASE,
)
#: words of a failure that is worth a retry, whatever else the message says (a sink whose tasks
#: still hold the group: "... haven't stopped completely yet ... can be safely retried")
_RETRY_WORDS = re.compile(r"(retried|retry|timed out|timeout|haven't stopped|not empty|zombie|rebalanc)", re.IGNORECASE)
#: a refusal about the connector's state, not its offsets ("Connectors must be in the STOPPED
#: state before their offsets can be modified"): refused, but not as invalid offsets
_STATE_WORDS = re.compile(r"\bstopped\b|\bstate\b|\bnot found\b|\bdoes not exist\b", re.IGNORECASE)


def offsets_refused_as_invalid(operation: str, status: int, message: str) -> bool:
    """Whether an error answer to an offsets PATCH/DELETE says the offsets given are invalid
    (a 400, or a 500 carrying a connector's validation): a refusal a retry cannot change."""
    if operation not in _OFFSETS_WRITES or status not in (400, 500):
        return False
    if _RETRY_WORDS.search(message) or _STATE_WORDS.search(message):
        return False
    return bool(_OFFSET_WORDS.search(message) and _INVALID_WORDS.search(message))


class ConnectClient:
    """One worker group's REST API.

    ``max_concurrency`` bounds in-flight requests so a full resync of thousands of Connector
    objects cannot stampede a worker. 409 answers caused by a rebalance are retried a few times
    here, because they resolve in seconds and surfacing them would only add a kopf round trip.
    """

    def __init__(  # noqa: PLR0913 - keyword-only settings of one client, each with its default
        self,
        base_url: str,
        *,
        auth: tuple[str, str] | None = None,
        verify: bool | str = True,
        timeout: float = 30.0,
        listing_timeout: float | None = None,
        max_concurrency: int = 8,
        redactor: Redactor = NO_SECRETS,
        rebalance_retries: int = 3,
        rebalance_delay: float = 0.5,
        read_retries: int = 2,
        read_retry_delay: float = 0.2,
        max_response_bytes: int = 32 << 20,
        large_answer_bytes: int = LARGE_ANSWER_BYTES,
        large_answers_at_once: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
        address_guard: AddressGuard | None = None,
    ) -> None:
        if transport is None and address_guard is not None:
            # every connection resolves the host, checks each address, connects to one checked
            transport = GuardedTransport(address_guard, verify=verify)
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            auth=httpx.BasicAuth(*auth) if auth else None,
            verify=verify,
            timeout=timeout,
            headers={"Accept": "application/json"},
            transport=transport,
        )
        self._sem = Lanes(max_concurrency)
        self._redact = redactor
        self._rebalance_retries = rebalance_retries
        self._rebalance_delay = rebalance_delay
        self._read_retries = read_retries
        self._read_retry_delay = read_retry_delay
        # httpx's timeout bounds each read, not the whole answer: a worker (or anything at the
        # URL) sending one byte every few seconds would hold a call forever, and an endless body
        # would fill memory. Every call gets a total deadline and a size cap.
        self._deadline = timeout
        # the expanded listing is one call for the whole worker group, and Connect builds it in
        # quadratic time (AbstractHerder.connectorInfo snapshots every connector's config for
        # each one listed): at 10,000 connectors it outlasted 30 s, and then each connector cost
        # two reads of its own (apply_bench: 240 s and 11,382 calls instead of one)
        self._listing_deadline = max(timeout, listing_timeout or timeout)
        self._max_bytes = max_response_bytes
        # The cap bounds one answer; the lanes let ``max_concurrency`` of them arrive at once, so
        # one worker group (or anything at its restUrl) could have the operator hold that many
        # capped answers together (8 x 32 MiB). Past ``large_answer_bytes`` an answer goes on
        # only in its turn: this group then holds at most ``max_concurrency`` small beginnings
        # and ``large_answers_at_once`` whole answers. Per client, not per process, so that an
        # endpoint trickling large answers slows its own ConnectCluster's reads and no other's.
        self._large_bytes = large_answer_bytes
        self._large = asyncio.Semaphore(max(1, large_answers_at_once))
        self.request_count = 0

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> ConnectClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- transport ------------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        operation: str,
        deadline: float | None = None,
    ) -> httpx.Response:
        deadline = deadline or self._deadline
        if method != "GET":
            fence.check()
        attempt = 0
        read_attempt = 0
        while True:
            error: ConnectError
            try:
                async with self._sem.slot():
                    self.request_count += 1
                    response = await self._bounded(method, path, body, params, operation, deadline)
            except RuntimeError:
                # httpx's answer to a request on a closed client: the operator is stopping (its
                # clients close while a resync may still be at work); typed, so it stays retryable
                if not self._client.is_closed:
                    raise
                raise ConnectUnavailable(
                    f"{operation}: not sent, the operator is stopping", operation=operation
                ) from None
            except TimeoutError:
                raise ConnectUnavailable(
                    f"{operation}: Connect did not finish answering within {deadline:g}s",
                    operation=operation,
                ) from None
            except httpx.TimeoutException as exc:
                # Not retried here: a worker that hangs would hold the caller for several timeouts.
                raise ConnectUnavailable(
                    f"{operation}: Connect did not answer in time ({type(exc).__name__})",
                    operation=operation,
                ) from None
            except httpx.HTTPError as exc:
                error = ConnectUnavailable(
                    f"{operation}: cannot reach Connect ({type(exc).__name__}: {self._redact(str(exc))})",
                    operation=operation,
                )
            else:
                if response.status_code < 400:
                    return response
                error = self._error_for(response, operation)
                # not held through a retry's wait: an error page can be as large as any answer
                del response
            if isinstance(error, ConnectRebalancing) and attempt < self._rebalance_retries:
                attempt += 1
                await asyncio.sleep(self._rebalance_delay * 2 ** (attempt - 1))
                continue
            # A GET changes nothing, so a dropped connection or a 5xx is retried at once, briefly:
            # one flaky answer must not cost a whole reconcile (or a reset step) its attempt.
            if method == "GET" and isinstance(error, ConnectUnavailable) and read_attempt < self._read_retries:
                read_attempt += 1
                await asyncio.sleep(self._read_retry_delay * read_attempt)
                continue
            raise error

    async def _bounded(
        self,
        method: str,
        path: str,
        body: Any,
        params: dict[str, str] | None,
        operation: str,
        deadline: float,
    ) -> httpx.Response:
        """One request with a total deadline (connect, headers and the whole body) and a cap on
        the body's size; the answer is read into memory only up to the cap."""
        try:
            return await self._read(method, path, body, params, operation, deadline)
        except AddressRefused as exc:
            text = f"{operation}: not sent, {self._redact(str(exc))}"
            raise ConnectAddressRefused(text, operation=operation) from None

    async def _read(
        self,
        method: str,
        path: str,
        body: Any,
        params: dict[str, str] | None,
        operation: str,
        deadline: float,
    ) -> httpx.Response:
        async with (
            asyncio.timeout(deadline),
            # httpx's own timeout bounds each read: as long as the deadline, or a slow first byte
            # would end the call before it
            self._client.stream(method, path, json=body, params=params, timeout=deadline) as streamed,
        ):
            declared = streamed.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max_bytes:
                raise ConnectResponseTooLarge(self._too_large(operation), operation=operation)
            chunks: list[bytes] = []
            size = 0
            # Released when the answer is whole: its caller parses it before anything else runs
            # (no await between this return and the parse, but for a listing that waits on its
            # claims as bytes), so the next large answer is read after this one's parse.
            large = False
            try:
                if declared.isdigit() and int(declared) > self._large_bytes:
                    await self._large.acquire()
                    large = True
                async for chunk in streamed.aiter_bytes():
                    size += len(chunk)
                    if size > self._max_bytes:
                        raise ConnectResponseTooLarge(self._too_large(operation), operation=operation)
                    chunks.append(chunk)
                    if not large and size > self._large_bytes:
                        await self._large.acquire()
                        large = True
                # the body is already decoded: keep no header that would make httpx decode it again
                headers = [
                    (k, v)
                    for k, v in streamed.headers.multi_items()
                    if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
                ]
                return httpx.Response(
                    streamed.status_code, headers=headers, content=b"".join(chunks), request=streamed.request
                )
            finally:
                if large:
                    self._large.release()

    def _too_large(self, operation: str) -> str:
        return (
            f"{operation}: the answer is larger than {self._max_bytes >> 20} MiB "
            "(CONNECTOPS_CONNECT_MAX_RESPONSE_BYTES); not read"
        )

    def _error_for(self, response: httpx.Response, operation: str) -> ConnectError:
        status = response.status_code
        message = _error_message(response)
        text = f"{operation}: HTTP {status}: {self._redact(message)}"
        if status == 404:
            return ConnectNotFound(text, status=status, operation=operation)
        if status == 409:
            lowered = message.lower()
            if any(h in lowered for h in _REBALANCE_HINTS) or not lowered:
                return ConnectRebalancing(text, status=status, operation=operation)
            return ConnectConflict(text, status=status, operation=operation)
        if status in (401, 403):
            return ConnectAuthFailed(text, status=status, operation=operation)
        if offsets_refused_as_invalid(operation, status, message):
            return ConnectOffsetsInvalid(text, status=status, operation=operation)
        if status >= 500:
            if "rebalance" in message.lower():
                return ConnectRebalancing(text, status=status, operation=operation)
            # Connect 4.x wraps some request errors (e.g. an unknown connector class on validate)
            # in a 500 whose message names the BadRequestException: the request is at fault.
            if "BadRequestException" in message:
                return ConnectRejected(text, status=status, operation=operation)
            return ConnectUnavailable(text, status=status, operation=operation)
        return ConnectRejected(text, status=status, operation=operation)

    async def _answer(self, shape: TypeAdapter[_T], method: str, path: str, *, operation: str, **kw: Any) -> _T:
        """The answer parsed as Connect documents it, or :class:`NotKafkaConnect`."""
        response = await self._request(method, path, operation=operation, **kw)
        return self._parsed(operation, response, lambda body: answers.parse_json(shape, body), shape)

    @staticmethod
    def _parsed(
        operation: str,
        response: httpx.Response,
        parse: Callable[[bytes], _T],
        shape: TypeAdapter[_T] | None = None,
    ) -> _T:
        try:
            if not response.content and shape is not None:
                # an empty body is no answer: its shape is wrong (None), as it always was
                return answers.parse(shape, None)
            return parse(response.content)
        except answers.NotJson:
            raise NotKafkaConnect(
                f"{operation}: HTTP {response.status_code} with a body that is not JSON: not Kafka Connect's "
                "answer (does the ConnectCluster's restUrl point at a Connect worker?)",
                status=response.status_code,
                operation=operation,
            ) from None
        except answers.WrongShape as exc:
            raise NotKafkaConnect(
                f"{operation}: the answer is not Kafka Connect's ({exc}); does the ConnectCluster's "
                "restUrl point at a Connect worker?",
                operation=operation,
            ) from None

    # -- worker ---------------------------------------------------------------------------------

    async def server_info(self) -> ServerInfo:
        root = await self._answer(answers.ROOT, "GET", "/", operation="get worker info")
        return ServerInfo(version=root.version, commit=root.commit, kafka_cluster_id=root.kafka_cluster_id)

    async def health(self) -> WorkerHealth:
        """``GET /health`` (KIP-1017, Kafka 3.9+). Its 503 and 500 are answers, not failures, so
        they are read here instead of going through the error mapping and its retries."""
        operation = "get worker health"
        try:
            async with self._sem.slot():
                self.request_count += 1
                response = await self._bounded("GET", "/health", None, None, operation, self._deadline)
        except TimeoutError:
            raise ConnectUnavailable(
                f"{operation}: no answer within {self._deadline:g}s", operation=operation
            ) from None
        except httpx.HTTPError as exc:
            raise ConnectUnavailable(
                f"{operation}: cannot reach Connect ({type(exc).__name__}: {self._redact(str(exc))})",
                operation=operation,
            ) from None
        if response.status_code == 404:
            return WorkerHealth("unknown", "the worker has no GET /health (Kafka Connect before 3.9, KIP-1017)")
        if response.status_code in (401, 403):
            raise self._error_for(response, operation)
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        status = data.get("status") if isinstance(data, dict) else None
        if status not in HEALTH_STATES:
            raise NotKafkaConnect(
                f"{operation}: HTTP {response.status_code} without a KIP-1017 health status: "
                "not Kafka Connect's answer",
                status=response.status_code,
                operation=operation,
            )
        message = data.get("message") if isinstance(data, dict) else None
        return WorkerHealth(str(status), self._redact(str(message or ""))[:500])

    async def list_plugins(self) -> list[Plugin]:
        """Every installed plugin, each version on its own (a worker before 3.2 ignores
        ``connectorsOnly`` and lists its connectors only, which is all it can pin anyway)."""
        plugins = await self._answer(
            answers.PLUGINS,
            "GET",
            "/connector-plugins",
            params={"connectorsOnly": "false"},
            operation="list plugins",
        )
        return [Plugin(p.class_, (p.type or "").lower(), p.version) for p in plugins]

    async def validate(self, connector_class: str, config: dict[str, str]) -> ValidationResult:
        """Connect's own validation, which also applies the worker's client-override policy."""
        answer = await self._answer(
            answers.VALIDATE,
            "PUT",
            f"/connector-plugins/{_segment(connector_class)}/config/validate",
            body=config,
            operation="validate config",
        )
        errors = {
            item.value.name: [self._redact(e) for e in item.value.errors]
            for item in answer.configs
            if item.value is not None and item.value.errors
        }
        return ValidationResult(error_count=answer.error_count, errors=errors)

    # -- connectors -----------------------------------------------------------------------------

    async def list_connectors(self) -> list[str]:
        return await self._answer(answers.NAMES, "GET", "/connectors", operation="list connectors")

    async def get_connector(self, name: str) -> JSONDict | None:
        """``{name, config, tasks, type}``, or None when the connector does not exist."""
        try:
            info = await self._answer(
                answers.CONNECTOR, "GET", f"/connectors/{_segment(name)}", operation="get connector"
            )
        except ConnectNotFound:
            return None
        return info.model_dump()

    async def get_config(self, name: str) -> dict[str, str] | None:
        """The live config, or None when the connector does not exist."""
        try:
            return await self._answer(
                answers.CONFIG, "GET", f"/connectors/{_segment(name)}/config", operation="get config"
            )
        except ConnectNotFound:
            return None

    async def get_status(self, name: str) -> ConnectorState | None:
        try:
            status = await self._answer(
                answers.STATUS, "GET", f"/connectors/{_segment(name)}/status", operation="get status"
            )
        except ConnectNotFound:
            return None
        return _state_of(status)

    async def list_expanded(
        self, keep: Callable[[str], bool] = lambda _: True, *, settled: Callable[[], Awaitable[object]] | None = None
    ) -> dict[str, ListedConnector]:
        """Every connector's config and status in one call (``?expand=status&expand=info``),
        instead of two calls per connector; of those ``keep`` names only (the others are never
        turned into models: connect_answers.parse_expanded). The answer's size is bounded like
        every other (``max_response_bytes``); a worker that ignores ``expand`` (before 2.3)
        answers a list of names, which is :class:`NotKafkaConnect` here, and the caller reads one
        by one. ``settled``: awaited between reading the answer and parsing it, when ``keep``
        is not final yet (a start reads the claims it consults meanwhile): the answer waits as
        bytes, a fraction of what it takes parsed whole."""
        operation = "list connectors expanded"
        response = await self._request(
            "GET", "/connectors?expand=status&expand=info", operation=operation, deadline=self._listing_deadline
        )
        if settled is not None:
            await settled()
        listed: dict[str, answers.ExpandedAnswer] = self._parsed(
            operation, response, lambda body: answers.parse_expanded(body, keep)
        )
        return {
            name: ListedConnector(config=dict(item.info.config), state=_state_of(item.status))
            for name, item in listed.items()
            # a key must name what its value describes: an answer mixing them up is not trusted
            if item.info.name == name and item.status.name == name
        }

    async def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> None:
        body: JSONDict = {"name": name, "config": config}
        if initial_state:
            body["initial_state"] = initial_state
        await self._request("POST", "/connectors", body=body, operation="create connector")

    async def put_config(self, name: str, config: dict[str, str]) -> None:
        await self._request("PUT", f"/connectors/{_segment(name)}/config", body=config, operation="update config")

    async def pause(self, name: str) -> None:
        await self._request("PUT", f"/connectors/{_segment(name)}/pause", operation="pause")

    async def resume(self, name: str) -> None:
        await self._request("PUT", f"/connectors/{_segment(name)}/resume", operation="resume")

    async def stop(self, name: str) -> None:
        await self._request("PUT", f"/connectors/{_segment(name)}/stop", operation="stop")

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        await self._request(
            "POST",
            f"/connectors/{_segment(name)}/restart",
            params={
                "includeTasks": str(include_tasks).lower(),
                "onlyFailed": str(only_failed).lower(),
            },
            operation="restart",
        )

    async def restart_task(self, name: str, task_id: int) -> None:
        await self._request(
            "POST",
            f"/connectors/{_segment(name)}/tasks/{task_id}/restart",
            operation="restart task",
        )

    async def delete(self, name: str) -> bool:
        """Delete; False when it was already gone (deletion is idempotent for callers)."""
        try:
            await self._request("DELETE", f"/connectors/{_segment(name)}", operation="delete")
        except ConnectNotFound:
            return False
        return True

    # -- offsets (KIP-875) ----------------------------------------------------------------------

    async def get_offsets(self, name: str) -> list[JSONDict]:
        answer = await self._answer(
            answers.OFFSETS, "GET", f"/connectors/{_segment(name)}/offsets", operation="get offsets"
        )
        return [o.model_dump() for o in answer.offsets]

    async def patch_offsets(self, name: str, offsets: list[JSONDict]) -> str:
        answer = await self._answer(
            answers.MESSAGE,
            "PATCH",
            f"/connectors/{_segment(name)}/offsets",
            body={"offsets": offsets},
            operation="alter offsets",
        )
        return answer.message

    async def delete_offsets(self, name: str) -> str:
        answer = await self._answer(
            answers.MESSAGE, "DELETE", f"/connectors/{_segment(name)}/offsets", operation="reset offsets"
        )
        return answer.message


class ConnectApi(Protocol):
    """What the reconcilers call on a Connect worker group: the interface :class:`ConnectClient`
    implements over REST and ``tests/doubles/connect.py`` implements in memory. Failures are the
    typed :class:`ConnectError` subclasses above, never transport exceptions; a shared contract
    test (``tests/adapters/test_connect_contract.py``) holds both to the same answers."""

    async def aclose(self) -> None: ...
    async def server_info(self) -> ServerInfo: ...
    async def health(self) -> WorkerHealth: ...
    async def list_plugins(self) -> list[Plugin]: ...
    async def validate(self, connector_class: str, config: dict[str, str]) -> ValidationResult: ...
    async def list_connectors(self) -> list[str]: ...
    async def get_connector(self, name: str) -> JSONDict | None: ...
    async def get_config(self, name: str) -> dict[str, str] | None: ...
    async def get_status(self, name: str) -> ConnectorState | None: ...
    async def list_expanded(
        self, keep: Callable[[str], bool] = ..., *, settled: Callable[[], Awaitable[object]] | None = None
    ) -> dict[str, ListedConnector]: ...
    async def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> None: ...
    async def put_config(self, name: str, config: dict[str, str]) -> None: ...
    async def pause(self, name: str) -> None: ...
    async def resume(self, name: str) -> None: ...
    async def stop(self, name: str) -> None: ...
    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None: ...
    async def restart_task(self, name: str, task_id: int) -> None: ...
    async def delete(self, name: str) -> bool: ...
    async def get_offsets(self, name: str) -> list[JSONDict]: ...
    async def patch_offsets(self, name: str, offsets: list[JSONDict]) -> str: ...
    async def delete_offsets(self, name: str) -> str: ...


#: checked by mypy: the REST client implements the whole interface
_REST_IMPLEMENTS_API: type[ConnectApi] = ConnectClient


def _state_of(status: answers.StatusAnswer) -> ConnectorState:
    tasks = tuple(
        # the traces are their first lines already (connect_answers.first_line, as parsed)
        TaskState(id=t.id, state=t.state, worker_id=t.worker_id, trace=t.trace, version=t.version)
        for t in status.tasks
    )
    return ConnectorState(
        name=status.name,
        type=status.type,
        state=status.connector.state,
        worker_id=status.connector.worker_id,
        trace=status.connector.trace,
        tasks=tuple(sorted(tasks, key=lambda t: t.id)),
        version=status.connector.version,
    )


def _error_message(response: httpx.Response) -> str:
    """Connect's own error sentence, or a description of the answer; never the other side's body.

    Connect answers errors as ``{"error_code": N, "message": "..."}`` and its web server (Jetty)
    refuses some paths with an HTML page titled ``Error 400 ...``. Anything else came from
    something that is not Connect (a proxy, another service at the ``restUrl``) and may hold
    anything, a password included: it goes into conditions and Events, so it is not shown.
    """
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = response.text.strip()
        if not text:
            # Jetty refuses some paths (control characters, encoded slashes) before Connect sees them
            return "no error message; the worker's web server refused the request (an unusable character in a name?)"
        title = _JETTY_TITLE.search(text[:4096])
        if title:
            return f"the worker's web server answered: {title.group(1)}"
        return _NOT_SHOWN
    if isinstance(data, dict) and isinstance(data.get("error_code"), int) and isinstance(data.get("message"), str):
        return _printable(data["message"])[:1000]
    return _NOT_SHOWN


_JETTY_TITLE = re.compile(r"<title>\s*(Error [1-5][0-9]{2}(?: [A-Za-z ]{1,80})?)\s*</title>", re.IGNORECASE)
_NOT_SHOWN = "the answer is not Kafka Connect's error format (its body is not shown)"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)
