"""The operator's in-memory indexes of its objects, kept from kopf's watch events.

Why not kopf's own indexes (what this replaced): with any kopf index, kopf holds every object's
worker (its queue, the event's body, its wrappers and loggers) until the whole first listing is
indexed (kopf ``processing.py``, ``operator_indexed.wait_for(True)``), so a restart with 10,000
Connectors had 10,000 workers alive at once, and the arenas that peak filled stayed; and
``settings.queueing.worker_limit`` cannot bound them, because the workers holding the slots wait
for the end of a listing the blocked watcher never reads. Without kopf indexes the worker limit
holds (restart_bench at 3,000: RSS 139 vs 192 MiB).

What the gate gave, and how it is kept: no Connector may act before it can see every other
object claiming the same connector. The startup LIST (:meth:`Indexes.seed_claims`, done in a
startup handler, so before kopf watches anything) fills the claims; kopf's events then keep
each object's entries current, in the object's own worker before its change handlers run (kopf
processes the watching cause first), as kopf's indexes were. A seeded claim that no event has
confirmed yet may belong to an object deleted between the LIST and kopf's own listing (no event
will ever remove it): :meth:`Indexes.unconfirmed` names those, and the caller reads them afresh
before one of them can stop a Connector.

Pure data, no I/O: the handlers feed it and read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

from connectops.planning.ownership import Claim
from connectops.planning.secrets import SecretUse

K = TypeVar("K")
V = TypeVar("V")
Body = Mapping[str, Any]


class MultiIndex(Mapping[K, Sequence[V]], Generic[K, V]):
    """key -> the values objects contributed under it (a kopf index's shape): each object's
    contributions replace its previous ones on every event and go with its deletion."""

    def __init__(self) -> None:
        self._by_key: dict[K, dict[str, V]] = {}
        self._keys: dict[str, tuple[K, ...]] = {}

    def put(self, uid: str, contributions: Mapping[K, V] | None) -> None:
        self.remove(uid)
        if not contributions:
            return
        for key, value in contributions.items():
            self._by_key.setdefault(key, {})[uid] = value
        self._keys[uid] = tuple(contributions)

    def remove(self, uid: str) -> None:
        for key in self._keys.pop(uid, ()):
            values = self._by_key.get(key)
            if values is not None:
                values.pop(uid, None)
                if not values:
                    del self._by_key[key]

    def __getitem__(self, key: K) -> Sequence[V]:
        return list(self._by_key[key].values())

    def __iter__(self) -> Iterator[K]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def uids(self, key: K) -> list[str]:
        return list(self._by_key.get(key, {}))


ClaimFn = Callable[[Body], Mapping[str, Claim] | None]
SecretFn = Callable[[Body], Mapping[tuple[str, str], SecretUse] | None]
ClusterFn = Callable[[Body], Mapping[tuple[str, str], str] | None]
#: what an object asks of the operator outside its spec (None: nothing)
AsksFn = Callable[[Body], Hashable | None]


class Indexes:
    """Every Connector's claim, latest body and cluster, and which Secrets each object reads.

    The functions computing an object's entries are the handlers' (they read kopf bodies); this
    class only keeps what they return."""

    def __init__(
        self,
        claim: ClaimFn,
        cluster: ClusterFn,
        connector_secrets: SecretFn,
        cluster_secrets: SecretFn,
        body_parts: Sequence[str],
        asks: AsksFn | None = None,
        renames: ClaimFn | None = None,
    ) -> None:
        self._claim, self._cluster = claim, cluster
        self._asks_of = asks
        self._renames_of = renames
        self._connector_secrets, self._cluster_secrets = connector_secrets, cluster_secrets
        self._parts = tuple(body_parts)
        self.claims: MultiIndex[str, Claim] = MultiIndex()
        #: the connector an object renames (spec.offsets.from) -> that object's claim: who a
        #: deleted Connector's connector is handed over to, without listing the namespace
        self.renames: MultiIndex[str, Claim] = MultiIndex()
        self.by_cluster: MultiIndex[tuple[str, str], str] = MultiIndex()
        self.connector_secrets: MultiIndex[tuple[str, str], SecretUse] = MultiIndex()
        self.cluster_secrets: MultiIndex[tuple[str, str], SecretUse] = MultiIndex()
        #: each Connector's latest body (its resync's input) as compact JSON, not the event's
        #: dicts: one block per Connector instead of ~6 KB of small objects (json.decoder's 61
        #: MiB of the traced heap at 10,000, apply_bench --tracemalloc), and a copy that nothing
        #: done to the event's dicts later reaches. The RSS did not move with it alone (the
        #: arenas a start-up fills stay; benchmarks/README, restart_bench). A resync decodes it
        #: once a period (tens of microseconds).
        self._bodies: dict[str, bytes] = {}
        #: uids whose claim came from the startup LIST and no event since
        self._seeded: set[str] = set()
        #: what each object asked at its latest event, for those that ask anything (annotation
        #: verbs are not in the spec, so kopf's change handlers never see them change)
        self._asks: dict[str, Hashable] = {}

    def seed_claims(self, bodies: Iterable[Body]) -> int:
        """The claims of the startup LIST's Connectors (their bodies are not kept); how many."""
        count = 0
        for body in bodies:
            uid = _uid(body)
            if uid and uid not in self._bodies:  # an event already said more
                self.claims.put(uid, self._claim(body))
                self._put_renames(uid, body)
                self._seeded.add(uid)
                count += 1
        return count

    def connector_event(self, body: Body, *, deleted: bool) -> bool:
        """Keeps the object's entries; True when what it asks outside its spec changed since its
        previous event (never at its first: its create or resume reconciles it anyway)."""
        uid = _uid(body)
        if not uid:
            return False
        self._seeded.discard(uid)
        if deleted:
            self.forget_connector(uid)
            return False
        asked = self._note_asks(uid, body)
        self.claims.put(uid, self._claim(body))
        self._put_renames(uid, body)
        self.by_cluster.put(uid, self._cluster(body))
        self.connector_secrets.put(uid, self._connector_secrets(body))
        kept = {key: body[key] for key in self._parts if key in body}
        self._bodies[uid] = json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()
        return asked

    def _put_renames(self, uid: str, body: Body) -> None:
        if self._renames_of is not None:
            self.renames.put(uid, self._renames_of(body))

    def _note_asks(self, uid: str, body: Body) -> bool:
        if self._asks_of is None:
            return False
        seen_before = uid in self._bodies
        now, before = self._asks_of(body), self._asks.get(uid)
        if now is None:
            self._asks.pop(uid, None)
        else:
            self._asks[uid] = now
        return seen_before and now != before

    def forget_connector(self, uid: str) -> None:
        self._seeded.discard(uid)
        for index in (self.claims, self.renames, self.by_cluster, self.connector_secrets):
            index.remove(uid)
        self._bodies.pop(uid, None)
        self._asks.pop(uid, None)

    def cluster_event(self, body: Body, *, deleted: bool) -> None:
        uid = _uid(body)
        if uid:
            self.cluster_secrets.put(uid, None if deleted else self._cluster_secrets(body))

    def unconfirmed(self, claims: Iterable[Claim]) -> list[Claim]:
        """Those of ``claims`` known only from the startup LIST: their object may be gone."""
        return [claim for claim in claims if claim.uid in self._seeded]

    def latest(self, uid: str) -> dict[str, Any] | None:
        """The object's latest body, a new copy on every call (None: not seen by an event, or gone)."""
        raw = self._bodies.get(uid)
        return None if raw is None else cast(dict[str, Any], json.loads(raw))

    @property
    def remembered(self) -> int:
        """Connectors anything is kept for (a body, a seeded claim, an ask)."""
        return len(self._bodies.keys() | self._seeded | self._asks.keys())

    def known(self, uid: str) -> bool:
        """Whether an event has shown the object and no deletion since."""
        return uid in self._bodies


def _uid(body: Body) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")
