"""Which URLs the operator may call on a user's behalf, and which addresses it may connect to.

A ``restUrl`` is a request the operator makes with its own network position (often inside the
cluster, where a user's pods may not reach): the platform team may limit it to the Connect
workers it runs (``CONNECTOPS_ALLOWED_REST_URLS``, chart value ``settings.allowedRestUrls``).

An entry is ``scheme://HOST[:PORT]``, matched against the URL after both are parsed, host as a
host (never as text, so ``127.0.0.1.attacker.example`` is no address of ``127.0.0.0/24``):

- HOST: an exact DNS name (``connect.kafka.svc.cluster.local``, case-insensitive), an IP address
  (``10.1.2.3``, ``[::1]``), a CIDR range (``10.0.0.0/8``, ``[fd00::/8]``), or a wildcard as a
  whole leading label: ``*.example.com`` is any name under ``example.com`` (``a.example.com``,
  ``a.b.example.com``), never ``example.com`` itself nor ``aexample.com``. A name entry admits
  names only, an address or range admits URLs that name an address only.
- PORT: a number, ``*`` for any, or left out for the scheme's own (80, 443).

An entry outside this grammar (``http://127.0.0.*:8083``, a shell glob of the old grammar) admits
nothing: the operator says so at start and in each refusal, and an allowlist of only such entries
still refuses everything (it never falls back to "any").

Whatever the allowlist (empty: any other address, the default), some places are never called
unless an entry names them exactly (the very name or address; a range inside the refused one):
link-local and cloud metadata addresses, the unspecified address, the metadata names, and the
Kubernetes API server (its host and port from the operator's own kubeconfig or in-cluster
config, and ``kubernetes.default.svc``): a URL there would make the operator fetch credentials of
the node or talk to the API server with whatever a user wrote. Loopback addresses are refused
only at the API server's port, since Connect workers may share a host with the operator.

A name is also checked where it leads: the adapter resolves it when it connects, asks
:meth:`UrlPolicy.check_address` about each address, and connects to the address it checked
(``adapters/addresses.py``). Pure: no I/O here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from connectops.redact import redact_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: (host, port, address) -> why that address may not be connected to, or None
AddressGuard = Callable[[str, int, str], str | None]

DEFAULT_PORTS = {"http": 80, "https": 443}
#: where the allowlist is set, as refusals name it
SETTING = "CONNECTOPS_ALLOWED_REST_URLS, chart value settings.allowedRestUrls"

#: how a refusal of the places below ends
NEVER_UNLESS_NAMED = f"never called unless the allowlist names it exactly ({SETTING})"
#: addresses that reach the cloud's or the host's services, never a Connect worker
REFUSED_NETWORKS: tuple[tuple[IPNetwork, str], ...] = (
    (ipaddress.ip_network("169.254.0.0/16"), "a link-local address (169.254.0.0/16, where clouds serve metadata)"),
    (ipaddress.ip_network("fe80::/10"), "a link-local address (fe80::/10)"),
    (ipaddress.ip_network("100.100.100.200/32"), "a cloud metadata address (100.100.100.200)"),
    (ipaddress.ip_network("fd00:ec2::254/128"), "a cloud metadata address (fd00:ec2::254)"),
    (ipaddress.ip_network("0.0.0.0/32"), "the unspecified address (this host)"),
    (ipaddress.ip_network("::/128"), "the unspecified address (this host)"),
)
#: names of cloud metadata services
METADATA_NAMES = frozenset({"metadata.google.internal"})
#: the API server's Service as pods name it (``kubernetes.default.svc.<cluster domain>`` too)
KUBERNETES_NAMES = frozenset({"kubernetes", "kubernetes.default", "kubernetes.default.svc"})
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


class UrlRefused(ValueError):
    """Why a URL or an allowlist entry cannot be used; never holds a URL's credentials."""


@dataclass(frozen=True)
class Target:
    """Where a URL leads: its scheme, host (lower case, no brackets, no trailing dot) and port."""

    scheme: str
    host: str
    port: int
    #: the host, when the URL names an address
    address: IPAddress | None = None


def _address(text: str) -> IPAddress | None:
    try:
        found = ipaddress.ip_address(text)
    except ValueError:
        return None
    # an IPv4 address written as IPv6 (::ffff:169.254.169.254) is that IPv4 address
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _name(text: str) -> str:
    return text.lower().rstrip(".")


def parse_target(url: str) -> Target:
    """The URL's scheme, host and port; :class:`UrlRefused` for one the operator cannot call as
    given, credentials included (they belong in a Secret)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UrlRefused(f"is not a URL with a host and a numeric port ({exc})") from None
    if "@" in parts.netloc:
        raise UrlRefused("holds credentials (user:password@); name a Secret in basicAuth instead")
    if parts.scheme not in DEFAULT_PORTS:
        raise UrlRefused("is not an http:// or https:// URL")
    if not parts.hostname:
        raise UrlRefused("names no host")
    host = _name(parts.hostname)
    return Target(parts.scheme, host, port if port is not None else DEFAULT_PORTS[parts.scheme], _address(host))


@dataclass(frozen=True)
class Entry:
    """One parsed allowlist entry (see the module's grammar)."""

    text: str
    scheme: str
    #: None: any port
    port: int | None
    name: str | None = None
    #: ``*.example.com`` -> ``.example.com``
    suffix: str | None = None
    network: IPNetwork | None = None

    def admits(self, target: Target) -> bool:
        if target.scheme != self.scheme or (self.port is not None and target.port != self.port):
            return False
        if self.network is not None:
            return target.address is not None and _within(target.address, self.network)
        if target.address is not None:
            return False
        if self.suffix is not None:
            return target.host.endswith(self.suffix) and len(target.host) > len(self.suffix)
        return target.host == self.name

    def names(self, target: Target) -> bool:
        """Whether this entry names ``target``'s host exactly (its very name or address)."""
        if not self.admits(target) or self.suffix is not None:
            return False
        return self.network is None or self.network.num_addresses == 1

    def names_address(self, scheme: str, port: int, address: IPAddress, refused: IPNetwork) -> bool:
        """Whether this entry names ``address`` explicitly: an address or range that holds it and
        lies inside the range it is refused for (``0.0.0.0/0`` lists every address, not this one)."""
        if self.network is None or scheme != self.scheme or (self.port is not None and port != self.port):
            return False
        return _within(address, self.network) and _inside(self.network, refused)


def _within(address: IPAddress, network: IPNetwork) -> bool:
    # ``in`` compares the integers of an IPv4 address and an IPv6 network without a word
    return address.version == network.version and address in network


def _inside(inner: IPNetwork, outer: IPNetwork) -> bool:
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return inner.subnet_of(outer)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return inner.subnet_of(outer)
    return False


def parse_entry(text: str) -> Entry:
    """An allowlist entry; :class:`UrlRefused` says what is wrong with one outside the grammar."""
    scheme, sep, rest = text.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        raise UrlRefused("is not http://HOST[:PORT] or https://HOST[:PORT]")
    rest = rest.rstrip("/")
    if any(c in rest for c in "@?#") or not rest:
        raise UrlRefused("must be scheme://HOST[:PORT] only (no credentials, path or query)")
    host, port_text = _split_host_port(rest)
    port = _entry_port(port_text, scheme)
    network = _network(host)
    if network is not None:
        return Entry(text, scheme, port, network=network)
    if "/" in host:
        raise UrlRefused(f"has host {host!r}: a path, or a range that is not one")
    name = _name(host)
    if name.startswith("*.") and _valid_name(name[2:]):
        return Entry(text, scheme, port, suffix=name[1:])
    if "*" in name or not _valid_name(name):
        hint = " (for addresses, a CIDR range: 127.0.0.0/24)" if re.fullmatch(r"[0-9.*]+", name) else ""
        raise UrlRefused(f"has host {host!r}: * only as a whole leading label of a name (*.example.com){hint}")
    return Entry(text, scheme, port, name=name)


def _split_host_port(rest: str) -> tuple[str, str]:
    if not rest.startswith("["):
        if rest.count(":") > 1:
            raise UrlRefused("holds an IPv6 address without brackets (write http://[::1]:8083)")
        host, _, port_text = rest.partition(":")
        return host, port_text
    close = rest.find("]")
    if close < 0:
        raise UrlRefused("opens an IPv6 address with [ and never closes it")
    host, after = rest[1:close], rest[close + 1 :]
    if after and not after.startswith(":"):
        raise UrlRefused("has something other than :PORT after its IPv6 address")
    network = _network(host)
    if network is None or network.version != 6:
        raise UrlRefused(f"holds {host!r} in brackets, which is not an IPv6 address or range")
    return host, after[1:]


def _entry_port(text: str, scheme: str) -> int | None:
    if text == "*":
        return None
    if not text:
        return DEFAULT_PORTS[scheme]
    if text.isdigit() and 0 < int(text) < 65536:
        return int(text)
    raise UrlRefused(f"has port {text!r}: a number, * for any, or none for the scheme's own")


def _network(text: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _valid_name(name: str) -> bool:
    return bool(name) and len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


@dataclass(frozen=True)
class ApiServer:
    """Where the Kubernetes API server is: a name or an address, and a port."""

    host: str
    port: int


@dataclass(frozen=True)
class UrlPolicy:
    """The allowlist, parsed, and the places never called unless it names them."""

    entries: tuple[Entry, ...] = ()
    #: the entries that do not parse, each with why: they admit nothing
    ignored: tuple[str, ...] = ()
    #: the allowlist was set (True even when every entry was ignored: then nothing is admitted)
    restricted: bool = False
    api_servers: tuple[ApiServer, ...] = ()
    _api_names: frozenset[tuple[str, int]] = field(default=frozenset(), repr=False)
    _api_addresses: frozenset[tuple[IPAddress, int]] = field(default=frozenset(), repr=False)

    @classmethod
    def build(cls, allowlist: Sequence[str], api_servers: Iterable[ApiServer] = ()) -> UrlPolicy:
        entries: list[Entry] = []
        ignored: list[str] = []
        for text in allowlist:
            try:
                entries.append(parse_entry(text))
            except UrlRefused as exc:
                ignored.append(f"{text!r} {exc}")
        servers = tuple(dict.fromkeys(api_servers))
        names: set[tuple[str, int]] = set()
        addresses: set[tuple[IPAddress, int]] = set()
        for server in servers:
            address = _address(server.host.strip("[]"))
            if address is None:
                names.add((_name(server.host), server.port))
            else:
                addresses.add((address, server.port))
        return cls(
            tuple(entries),
            tuple(ignored),
            bool(allowlist),
            servers,
            frozenset(names),
            frozenset(addresses),
        )

    def check_url(self, url: str) -> str | None:
        """Why ``url`` may not be called (a phrase to follow the URL), or None. No resolution:
        a name's addresses are the adapter's to check as it connects (:meth:`check_address`)."""
        try:
            target = parse_target(url)
        except UrlRefused as exc:
            return str(exc)
        refused = self._refused_name(target) if target.address is None else None
        if refused is not None and not any(e.names(target) for e in self.entries):
            return f"names {refused}, {NEVER_UNLESS_NAMED}"
        if self.restricted and not any(e.admits(target) for e in self.entries):
            return f"is not among the URLs the operator may call ({self.describe()})"
        if target.address is not None:
            return self.check_address(target, str(target.address))
        return None

    def check_address(self, target: Target, address: str) -> str | None:
        """Why the operator may not connect to ``address`` for ``target`` (one of its host's
        addresses), or None. An entry naming the host exactly vouches for every address it has."""
        found = _address(address.partition("%")[0])
        if found is None:
            return f"resolves to {address!r}, which is not an IP address"
        if any(e.names(target) for e in self.entries):
            return None
        refusal = self._refused_address(found, target.port)
        if refusal is None:
            return None
        what, refused = refusal
        if any(e.names_address(target.scheme, target.port, found, refused) for e in self.entries):
            return None
        where = "is" if target.address is not None else f"resolves to {found},"
        return f"{where} {what}, {NEVER_UNLESS_NAMED}"

    def guard(self, url: str) -> AddressGuard:
        """The check an adapter makes of each address it would connect to for ``url``."""
        scheme = urlsplit(url).scheme

        def check(host: str, port: int, address: str) -> str | None:
            name = _name(host.strip("[]"))
            target = Target(scheme, name, port, _address(name))
            refused = self.check_address(target, address)
            return None if refused is None else f"{redact_url(url)[:200]}: {host} {refused}"

        return check

    def describe(self) -> str:
        """The allowlist as a refusal names it: its entries, and the ones it ignores."""
        listed = ", ".join(e.text for e in self.entries) or "no usable entry"
        ignored = f"; ignored: {'; '.join(self.ignored)}" if self.ignored else ""
        return f"{SETTING}: {listed}{ignored}"

    def _refused_name(self, target: Target) -> str | None:
        host = target.host
        if host in METADATA_NAMES:
            return f"a cloud metadata service ({host})"
        if host in KUBERNETES_NAMES or host.startswith("kubernetes.default.svc."):
            return f"the Kubernetes API server's Service ({host})"
        if (host, target.port) in self._api_names:
            return f"the Kubernetes API server ({host}:{target.port})"
        return None

    def _refused_address(self, address: IPAddress, port: int) -> tuple[str, IPNetwork] | None:
        for network, what in REFUSED_NETWORKS:
            if _within(address, network):
                return what, network
        single = ipaddress.ip_network(address)
        for server, server_port in self._api_addresses:
            if port != server_port:
                continue
            # on loopback, every loopback address (and "this host") reaches the same listener
            loopback = server.is_loopback and (address.is_loopback or address.is_unspecified)
            if address == server or loopback:
                return f"the Kubernetes API server's address ({_hostport(server, port)})", single
        return None


def _hostport(address: IPAddress, port: int) -> str:
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def url_allowed(url: str, patterns: Sequence[str]) -> bool:
    """Whether an allowlist of ``patterns`` (and the places always refused) admits ``url``,
    without resolving it."""
    return UrlPolicy.build(patterns).check_url(url) is None
