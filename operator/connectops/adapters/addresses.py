"""Connections to the address that was checked, and where the Kubernetes API server is.

A URL's host is checked twice: as written, before any request (``planning/urls.py``), and where
it leads, here, at every new connection: the name is resolved, each address it gives is put to a
guard (:data:`AddressGuard`, the policy's), and the TCP connection is made to an address the
guard passed, never to a name resolved a second time. So a name that resolves to a metadata or
API-server address is refused, and one whose DNS answer changes between the check and the
connect (rebinding) cannot lead elsewhere.

The pinning is an httpcore network backend under httpx's own transport: only where the socket
connects changes. The request keeps its URL and ``Host`` header, and TLS still runs against the
URL's host name (httpcore takes the SNI name and the certificate's expected name from the
request's origin, not from the address connected to), so certificate verification is what it
would have been without the guard. The alternative, rewriting the URL to the address with a
``Host`` header and an ``sni_hostname`` extension, would resolve at every request rather than at
every connection, and would show addresses instead of names in every error.

A client given this transport uses no proxy from the environment (httpx reads ``HTTPS_PROXY``
only for the transports it builds itself): a proxy would resolve the name and connect wherever
its own DNS says, out of the guard's sight.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx
from httpcore import AsyncNetworkStream

#: (host, port, address) -> why that address may not be connected to for that host, or None
AddressGuard = Callable[[str, int, str], str | None]
#: (host, port) -> the host's addresses, in the resolver's order
Resolver = Callable[[str, int], Awaitable[list[str]]]


class AddressRefused(Exception):
    """The guard refused every connection to the host: its text is the guard's, safe to show.
    Not an httpcore error, so httpx passes it through untouched instead of calling it a
    connection failure (which would be retried as an outage)."""


async def resolve(host: str, port: int) -> list[str]:
    """The host's addresses (an address is its own), each once, in the resolver's order."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, resolving first and connecting only to checked addresses."""

    def __init__(
        self,
        guard: AddressGuard,
        *,
        resolver: Resolver = resolve,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._guard = guard
        self._resolve = resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self._resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no address for {host} within {timeout}s") from None
        if not addresses:
            raise httpcore.ConnectError(f"no address for {host}")
        # every address is checked before any is tried: the resolver's order is not the guard's
        for address in addresses:
            refused = self._guard(host, port, address)
            if refused is not None:
                raise AddressRefused(refused)
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        raise httpcore.ConnectError("the guarded backend connects to TCP addresses only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose connections go through
    :class:`GuardedBackend`; everything else (TLS context, limits, response streams, exception
    mapping) is httpx's."""

    def __init__(
        self,
        guard: AddressGuard,
        *,
        verify: ssl.SSLContext | str | bool = True,
        limits: httpx.Limits | None = None,
        resolver: Resolver = resolve,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        context = httpx.create_ssl_context(verify=verify)
        super().__init__(verify=context, limits=limits)
        # AsyncHTTPTransport takes no network backend, and keeps its pool here: replaced by
        # the same pool over the guarded backend (tests/adapters/test_addresses.py holds the
        # guard to every connection, so an httpx that moved it fails there, not silently)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(guard, resolver=resolver),
        )


def api_server_endpoints(kube_host: str | None = None) -> list[tuple[str, int]]:
    """Where this operator reaches the Kubernetes API server: the loaded kube config's host and
    port (what the kubeconfig or the in-cluster config says), the in-cluster Service's address,
    and the addresses a host name there resolves to now. Read once at start; a name that cannot
    be resolved is kept as a name."""
    found: list[tuple[str, int]] = []
    if kube_host is None:
        from kubernetes import client

        kube_host = client.Configuration.get_default_copy().host
    if kube_host:
        parts = urlsplit(kube_host if "://" in kube_host else f"https://{kube_host}")
        try:
            port = parts.port or (80 if parts.scheme == "http" else 443)
        except ValueError:
            port = None
        if parts.hostname and port is not None:
            found.append((parts.hostname, port))
            found += [(address, port) for address in _addresses_now(parts.hostname, port)]
    host, port_text = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if host and port_text and port_text.isdigit():
        found.append((host, int(port_text)))
    return list(dict.fromkeys(found))


def _addresses_now(host: str, port: int) -> list[str]:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return []
    try:
        return list(dict.fromkeys(str(i[4][0]) for i in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))
    except OSError:
        return []
