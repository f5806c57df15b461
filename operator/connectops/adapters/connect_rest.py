"""Kafka Connect REST client (httpx).

It owns the wire format (paths, JSON shapes, status codes by Kafka version, see
``shared/reference/kafka-connect-facts.md``) and turns every failure into a typed
:class:`ConnectError`; callers never see httpx exceptions. Connector names are always
percent-encoded as one path segment, because Connect accepts names with ``/``, spaces, ``?``…
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from connectops.redact import NO_SECRETS, Redactor

JSONDict = dict[str, Any]


class ConnectError(Exception):
    """Base of every Connect REST failure; ``str()`` is redacted and safe to show anywhere."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, operation: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.operation = operation


class ConnectUnavailable(ConnectError):
    """The worker did not answer usefully: connection refused, timeout, or a 5xx."""

    retryable = True


class ConnectRebalancing(ConnectError):
    """409 while the worker group rebalances or a config change is in flight, or a 500 saying a
    rebalance is expected (what a worker answers between losing and regaining its assignment):
    retry soon."""

    retryable = True


class ConnectNotFound(ConnectError):
    """404: the connector (or plugin) does not exist."""


class ConnectConflict(ConnectError):
    """409 that is not a rebalance, e.g. creating a connector that already exists."""


class ConnectRejected(ConnectError):
    """4xx: Connect refused the request as given (bad config, wrong state for the operation)."""


class ConnectAuthFailed(ConnectError):
    """401/403: credentials wrong or missing. Retrying will not help until the Secret changes."""


@dataclass(frozen=True)
class ServerInfo:
    version: str
    commit: str | None
    kafka_cluster_id: str | None


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str | None
    trace: str | None


@dataclass(frozen=True)
class ConnectorState:
    name: str
    type: str | None
    state: str
    worker_id: str | None
    trace: str | None
    tasks: tuple[TaskState, ...]


@dataclass(frozen=True)
class ValidationResult:
    error_count: int
    #: config key -> Connect's error messages (only keys that have errors)
    errors: dict[str, list[str]] = field(default_factory=dict)


def _segment(name: str) -> str:
    return quote(name, safe="")


_REBALANCE_HINTS = ("rebalance", "stale configuration", "concurrent config", "leader")


class ConnectClient:
    """One worker group's REST API.

    ``max_concurrency`` bounds in-flight requests so a full resync of thousands of Connector
    objects cannot stampede a worker. 409 answers caused by a rebalance are retried a few times
    here, because they resolve in seconds and surfacing them would only add a kopf round trip.
    """

    def __init__(
        self,
        base_url: str,
        *,
        auth: tuple[str, str] | None = None,
        verify: bool | str = True,
        timeout: float = 30.0,
        max_concurrency: int = 8,
        redactor: Redactor = NO_SECRETS,
        rebalance_retries: int = 3,
        rebalance_delay: float = 0.5,
        read_retries: int = 2,
        read_retry_delay: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            auth=httpx.BasicAuth(*auth) if auth else None,
            verify=verify,
            timeout=timeout,
            headers={"Accept": "application/json"},
            transport=transport,
        )
        self._sem = asyncio.Semaphore(max_concurrency)
        self._redact = redactor
        self._rebalance_retries = rebalance_retries
        self._rebalance_delay = rebalance_delay
        self._read_retries = read_retries
        self._read_retry_delay = read_retry_delay
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
    ) -> httpx.Response:
        attempt = 0
        read_attempt = 0
        while True:
            error: ConnectError
            try:
                async with self._sem:
                    self.request_count += 1
                    response = await self._client.request(method, path, json=body, params=params)
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
        if status >= 500:
            if "rebalance" in message.lower():
                return ConnectRebalancing(text, status=status, operation=operation)
            # Connect 4.x wraps some request errors (e.g. an unknown connector class on validate)
            # in a 500 whose message names the BadRequestException: the request is at fault.
            if "BadRequestException" in message:
                return ConnectRejected(text, status=status, operation=operation)
            return ConnectUnavailable(text, status=status, operation=operation)
        return ConnectRejected(text, status=status, operation=operation)

    async def _json(self, method: str, path: str, *, operation: str, **kw: Any) -> Any:
        response = await self._request(method, path, operation=operation, **kw)
        if not response.content:
            return None
        try:
            return response.json()
        except json.JSONDecodeError:
            raise ConnectUnavailable(
                f"{operation}: Connect answered HTTP {response.status_code} with a non-JSON body",
                status=response.status_code,
                operation=operation,
            ) from None

    # -- worker ---------------------------------------------------------------------------------

    async def server_info(self) -> ServerInfo:
        data = await self._json("GET", "/", operation="get worker info")
        return ServerInfo(
            version=str(data.get("version", "")),
            commit=data.get("commit"),
            kafka_cluster_id=data.get("kafka_cluster_id"),
        )

    async def connector_plugins(self) -> list[str]:
        data = await self._json("GET", "/connector-plugins", operation="list plugins")
        return [str(p["class"]) for p in data]

    async def validate(self, connector_class: str, config: dict[str, str]) -> ValidationResult:
        """Connect's own validation, which also applies the worker's client-override policy."""
        data = await self._json(
            "PUT",
            f"/connector-plugins/{_segment(connector_class)}/config/validate",
            body=config,
            operation="validate config",
        )
        errors: dict[str, list[str]] = {}
        for item in data.get("configs", []):
            value = item.get("value", {})
            errs = [self._redact(str(e)) for e in value.get("errors") or []]
            if errs:
                errors[str(value.get("name"))] = errs
        return ValidationResult(error_count=int(data.get("error_count", 0)), errors=errors)

    # -- connectors -----------------------------------------------------------------------------

    async def list_connectors(self) -> list[str]:
        data = await self._json("GET", "/connectors", operation="list connectors")
        return [str(n) for n in data]

    async def get_connector(self, name: str) -> JSONDict | None:
        """``{name, config, tasks, type}``, or None when the connector does not exist."""
        try:
            data = await self._json("GET", f"/connectors/{_segment(name)}", operation="get connector")
        except ConnectNotFound:
            return None
        return dict(data)

    async def get_config(self, name: str) -> dict[str, str] | None:
        """The live config, or None when the connector does not exist."""
        try:
            data = await self._json("GET", f"/connectors/{_segment(name)}/config", operation="get config")
        except ConnectNotFound:
            return None
        return {str(k): str(v) for k, v in data.items()}

    async def get_status(self, name: str) -> ConnectorState | None:
        try:
            data = await self._json("GET", f"/connectors/{_segment(name)}/status", operation="get status")
        except ConnectNotFound:
            return None
        conn = data.get("connector", {})
        tasks = tuple(
            TaskState(
                id=int(t["id"]),
                state=str(t.get("state", "UNKNOWN")),
                worker_id=t.get("worker_id"),
                trace=_first_line(t.get("trace")),
            )
            for t in data.get("tasks", [])
        )
        return ConnectorState(
            name=str(data.get("name", name)),
            type=data.get("type"),
            state=str(conn.get("state", "UNKNOWN")),
            worker_id=conn.get("worker_id"),
            trace=_first_line(conn.get("trace")),
            tasks=tuple(sorted(tasks, key=lambda t: t.id)),
        )

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
        data = await self._json("GET", f"/connectors/{_segment(name)}/offsets", operation="get offsets")
        return list(data.get("offsets", []))

    async def patch_offsets(self, name: str, offsets: list[JSONDict]) -> str:
        data = await self._json(
            "PATCH",
            f"/connectors/{_segment(name)}/offsets",
            body={"offsets": offsets},
            operation="alter offsets",
        )
        return str((data or {}).get("message", ""))

    async def delete_offsets(self, name: str) -> str:
        data = await self._json("DELETE", f"/connectors/{_segment(name)}/offsets", operation="reset offsets")
        return str((data or {}).get("message", ""))


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = response.text.strip()
        if not text:
            # Jetty refuses some paths (control characters, encoded slashes) before Connect sees them
            return "no error message; the worker's web server refused the request (an unusable character in a name?)"
        title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        if title:
            return f"the worker's web server answered: {' '.join(title.group(1).split())[:200]}"
        return text[:500]
    if isinstance(data, dict) and "message" in data:
        return str(data["message"])
    return response.text[:500]


def _first_line(trace: Any) -> str | None:
    if not trace:
        return None
    return str(trace).strip().splitlines()[0][:500]
