"""Which Connector object owns a connector that several of them name.

Connect knows a connector only by its name on a worker group, while Kubernetes lets any number
of Connector objects (an alias ConnectCluster in the same namespace, another namespace's own)
name the same one. Left alone, each would write its config over the others' on every resync.
The rule, as for Kubernetes' own controllers adopting objects: the oldest claimant owns it
(creation time, then uid, so two objects created in the same second still have one order); the
others write nothing and take over only when the owner is gone. Pure: the reconciler gathers
the claims (connectops.indexes) and which of them reach the same Kafka cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One Connector object naming a connector: where it is and which ConnectCluster it uses."""

    namespace: str
    name: str
    uid: str
    created: str
    cluster: str

    @property
    def order(self) -> tuple[str, str]:
        # RFC 3339 timestamps of one API server sort as text
        return (self.created, self.uid)


def owner(me: Claim, same_target: Iterable[Claim]) -> Claim:
    """The owner among ``me`` and the claims known to reach the same connector."""
    return min([me, *same_target], key=lambda claim: claim.order)


def conflict_message(connector: str, me: Claim, owner_claim: Claim) -> str:
    """What the non-owner says; another namespace's object is not named (its existence on a
    shared worker is all the non-owner may learn)."""
    where = (
        f"Connector {owner_claim.name} (older)"
        if owner_claim.namespace == me.namespace
        else "an older Connector object in another namespace"
    )
    return (
        f"connector {connector} on this Kafka cluster is managed by {where}; this object writes "
        "nothing to Kafka Connect and never deletes the connector, and takes over when that one is deleted"
    )
