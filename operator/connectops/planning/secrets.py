"""Secret rotation, the decisions: which Secrets an object reads, whether a Secret's change
concerns anyone, and what the Event says. Pure: no I/O, no values kept.

What is remembered per Secret is a keyed digest per referenced key (a per-process random key,
so a digest of a short password cannot be looked up or guessed offline from a memory dump); what
the indexes hold is names and keys. Neither is ever a value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CONNECTOR = "Connector"
CONNECT_CLUSTER = "ConnectCluster"
#: the digest of a key the Secret does not have (a reader of it fails with ReferenceNotFound)
ABSENT = "-"


@dataclass(frozen=True)
class SecretUse:
    """One object reading some keys of one Secret of its own namespace."""

    kind: str
    name: str
    keys: frozenset[str]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _add(found: dict[str, set[str]], ref: Any, name_field: str = "name", key_field: str = "key") -> None:
    ref = _mapping(ref)
    name, key = ref.get(name_field), ref.get(key_field)
    if isinstance(name, str) and name and isinstance(key, str) and key:
        found.setdefault(name, set()).add(key)


def connector_secret_keys(spec: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Secret name -> the keys a Connector's ``spec.configFrom`` reads. From the raw spec: an
    index is filled before validation, and an invalid spec still names what it would read."""
    found: dict[str, set[str]] = {}
    for source in _mapping(spec.get("configFrom")).values():
        _add(found, _mapping(source).get("secretKeyRef"))
    return {name: frozenset(keys) for name, keys in found.items()}


def cluster_secret_keys(spec: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Secret name -> the keys a ConnectCluster reads: basic auth, the REST CA, Kafka configFrom."""
    found: dict[str, set[str]] = {}
    auth = _mapping(spec.get("basicAuth"))
    secret = auth.get("secretName")
    if isinstance(secret, str) and secret:
        # the model's defaults, when the spec leaves them out
        found.setdefault(secret, set()).update(
            {str(auth.get("usernameKey") or "username"), str(auth.get("passwordKey") or "password")}
        )
    _add(found, _mapping(spec.get("tls")).get("caSecretRef"))
    for ref in _mapping(_mapping(spec.get("kafka")).get("configFrom")).values():
        _add(found, ref)
    return {name: frozenset(keys) for name, keys in found.items()}


def key_digests(data: Mapping[str, Any], keys: Iterable[str], salt: bytes) -> dict[str, str]:
    """A keyed digest of each referenced key's value (``data``: the Secret's base64 ``data``)."""
    digests = {}
    for key in sorted(set(keys)):
        value = data.get(key)
        if not isinstance(value, str):
            digests[key] = ABSENT
        else:
            digests[key] = hashlib.blake2b(value.encode(), key=salt, digest_size=16).hexdigest()
    return digests


def changed_keys(
    previous: Mapping[str, str] | None, current: Mapping[str, str], *, listed: bool, deleted: bool
) -> frozenset[str]:
    """The referenced keys a Secret event changed (empty: nothing to do).

    - deleted: every referenced key (their readers now fail, and should say so at once);
    - a Secret seen for the first time through a listing (start-up, or kopf re-listing after its
      watch expired) changed nothing anyone knows of: the objects' own resume handlers and
      resyncs read it anyway;
    - seen for the first time through a watch event (it became referenced after it was last
      listed): every referenced key may have changed, and Connect's config decides (nothing is
      written where it already holds the value);
    - otherwise: the keys whose digest moved. A change to a key nobody reads is nothing.
    """
    if deleted:
        return frozenset(current) | frozenset(previous or ())
    if previous is None:
        return frozenset() if listed else frozenset(current)
    return frozenset(k for k in current if previous.get(k) != current[k])


def affected(uses: Iterable[SecretUse], keys: frozenset[str]) -> list[SecretUse]:
    """The objects that read one of ``keys``; an object reading only other keys is left alone."""
    return [use for use in uses if use.keys & keys]


class RotationBook:
    """Which referenced Secret keys were seen changing lately (process memory, names only).

    A reconcile that writes a value of such a key reports ``SecretRotated`` whoever triggered it:
    the rotation's own reconcile, or a resync or retry that happened to read the new value first.
    A key nobody saw change is drift (``DriftCorrected``: someone edited Connect), or a rotation
    while the watch is off."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._seen: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}

    def note(self, namespace: str, secret: str, keys: frozenset[str], now: float) -> None:
        self._forget_old(now)
        _, before = self._seen.get((namespace, secret), (now, frozenset()))
        self._seen[(namespace, secret)] = (now, before | keys)

    def recent(self, namespace: str, secret: str, now: float) -> frozenset[str]:
        at, keys = self._seen.get((namespace, secret), (0.0, frozenset()))
        return keys if now - at <= self._ttl else frozenset()

    def _forget_old(self, now: float) -> None:
        for where in [w for w, (at, _) in self._seen.items() if now - at > self._ttl]:
            del self._seen[where]


def rotated_refs(
    config_from: Mapping[str, tuple[str, str]], recent: Callable[[str], frozenset[str]]
) -> dict[str, tuple[str, str]]:
    """Config key -> (Secret, key), for the config keys whose Secret key changed lately
    (``config_from``: config key -> (Secret name, key); ``recent``: Secret -> keys changed)."""
    return {config_key: (name, key) for config_key, (name, key) in config_from.items() if key in recent(name)}


def rotation_message(rotated: Mapping[str, tuple[str, str]], changed_config_keys: Iterable[str]) -> str | None:
    """The ``SecretRotated`` Event's message when a config write carries rotated Secret keys
    (None: none of the keys written comes from one). Names and keys only: the values are what the
    Event must never show."""
    written = sorted(k for k in changed_config_keys if k in rotated)
    if not written:
        return None
    secrets = sorted({f"{rotated[k][0]} key {rotated[k][1]}" for k in written})
    return (
        f"Secret {'; '.join(secrets)} changed: config key(s) {', '.join(written)} updated in Kafka "
        "Connect (Connect restarts the connector on a config change)"
    )


def cluster_rotation_message(rotated: Mapping[str, frozenset[str]]) -> str:
    """``rotated``: Secret -> keys changed lately, of those the ConnectCluster reads."""
    secrets = "; ".join(f"{name} key(s) {', '.join(sorted(keys))}" for name, keys in sorted(rotated.items()))
    return (
        f"Secret {secrets} changed: new calls to Kafka Connect use a client built with the new values; "
        "calls already in flight finish with the old one"
    )
