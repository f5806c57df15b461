"""The operator's own indexes (connectops.indexes), fed as the handlers feed them."""

from __future__ import annotations

import json
from typing import Any

from connectops.indexes import Indexes, MultiIndex
from connectops.planning import verbs
from connectops.planning.ownership import Claim
from connectops.planning.secrets import SecretUse


def body(
    ns: str, name: str, uid: str, connector: str, cluster: str = "main", secret: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": connector, "clusterRef": {"name": cluster}}
    if secret:
        spec["secret"] = secret
    return {
        "apiVersion": "connectops.io/v1alpha1",
        "kind": "Connector",
        "metadata": {"namespace": ns, "name": name, "uid": uid, "creationTimestamp": "2026-11-28T00:00:00Z"},
        "spec": spec,
        "status": {"x": 1},
    }


def claim(b: Any) -> dict[str, Claim]:
    m, s = b["metadata"], b["spec"]
    return {s["name"]: Claim(m["namespace"], m["name"], m["uid"], m["creationTimestamp"], s["clusterRef"]["name"])}


def cluster(b: Any) -> dict[tuple[str, str], str]:
    return {(b["metadata"]["namespace"], b["spec"]["clusterRef"]["name"]): b["metadata"]["uid"]}


def secrets(b: Any) -> dict[tuple[str, str], SecretUse] | None:
    s = b["spec"].get("secret")
    return (
        {(b["metadata"]["namespace"], s): SecretUse("Connector", b["metadata"]["name"], frozenset({"k"}))}
        if s
        else None
    )


def indexes() -> Indexes:
    return Indexes(claim, cluster, secrets, secrets, ("metadata", "spec", "status"))


def test_multi_index_replaces_an_objects_entries_and_drops_empty_keys() -> None:
    index: MultiIndex[str, int] = MultiIndex()
    index.put("u1", {"a": 1, "b": 2})
    index.put("u2", {"a": 3})
    assert sorted(index["a"]) == [1, 3]
    assert index.get("b") == [2]
    index.put("u1", {"c": 4})  # its new contributions replace the old ones
    assert index.get("a") == [3]
    assert "b" not in index
    assert index.get("c") == [4]
    index.remove("u2")
    index.put("u1", None)
    assert len(index) == 0
    assert index.get("a", []) == []


def test_events_keep_every_index_current_and_a_deletion_empties_them() -> None:
    ix = indexes()
    a = body("ns1", "a", "u1", "conn", secret="s")
    ix.connector_event(a, deleted=False)
    assert [c.uid for c in ix.claims.get("conn", [])] == ["u1"]
    assert ix.by_cluster.get(("ns1", "main")) == ["u1"]
    assert [u.name for u in ix.connector_secrets.get(("ns1", "s"), [])] == ["a"]
    assert ix.latest("u1") == {k: a[k] for k in ("metadata", "spec", "status")}
    renamed = body("ns1", "a", "u1", "other", cluster="second")
    ix.connector_event(renamed, deleted=False)
    assert ix.claims.get("conn", []) == []
    assert [c.uid for c in ix.claims["other"]] == ["u1"]
    assert ix.by_cluster.get(("ns1", "main"), []) == []
    assert ix.by_cluster[("ns1", "second")] == ["u1"]
    assert ix.connector_secrets.get(("ns1", "s"), []) == []
    ix.connector_event(renamed, deleted=True)
    assert len(ix.claims) == 0
    assert len(ix.by_cluster) == 0
    assert ix.latest("u1") is None


def test_seeded_claims_count_until_an_event_confirms_them() -> None:
    ix = indexes()
    known = body("ns1", "a", "u1", "conn")
    ix.connector_event(known, deleted=False)
    # the startup LIST: one already known by an event (not downgraded), one only listed
    listed = body("ns2", "b", "u2", "conn")
    assert ix.seed_claims([known, listed]) == 1
    rivals = list(ix.claims["conn"])
    assert sorted(c.uid for c in rivals) == ["u1", "u2"]
    assert [c.uid for c in ix.unconfirmed(rivals)] == ["u2"]
    assert ix.latest("u2") is None  # a seeded object's body is not kept: the sweep waits for kopf's
    ix.connector_event(listed, deleted=False)
    assert ix.unconfirmed(ix.claims["conn"]) == []


def test_a_stale_seeded_claim_is_forgotten_by_uid() -> None:
    ix = indexes()
    ix.seed_claims([body("ns2", "gone", "u9", "conn")])
    stale = list(ix.claims["conn"])
    assert [c.uid for c in ix.unconfirmed(stale)] == ["u9"]
    ix.forget_connector("u9")  # what the handlers do when a read says it is gone
    assert ix.claims.get("conn", []) == []
    assert ix.unconfirmed(stale) == []


def test_the_kept_body_is_the_events_as_it_was_and_each_read_is_a_copy_of_its_own() -> None:
    """The resync's input is the body of the Connector's last event: what happens to the event's
    dicts afterwards (kopf patches them in place as it handles the object) and what one resync
    does to the body it was given change neither it nor what the next resync reads."""
    ix = indexes()
    a = body("ns1", "a", "u1", "conn", secret="s")
    ix.connector_event(a, deleted=False)
    as_it_was = json.loads(json.dumps({k: a[k] for k in ("metadata", "spec", "status")}))
    a["spec"]["connectorName"] = "changed-after-the-event"
    a["metadata"]["annotations"] = {"later": "x"}
    first = ix.latest("u1")
    assert first == as_it_was
    assert first is not None
    first["spec"]["connectorName"] = "changed-by-a-reader"
    assert ix.latest("u1") == as_it_was
    assert ix.known("u1")
    ix.connector_event(a, deleted=True)
    assert not ix.known("u1")


def test_a_change_of_what_an_object_asks_outside_its_spec_is_said_once_and_never_at_first_sight() -> None:
    def asks(b: Any) -> Any:
        return verbs.asked(b["metadata"].get("annotations") or {})

    ix = Indexes(claim, cluster, secrets, secrets, ("metadata", "spec", "status"), asks)
    a = body("ns1", "a", "u1", "conn")
    a["metadata"]["annotations"] = {verbs.RECONCILE: "paused"}
    assert not ix.connector_event(a, deleted=False)  # first sight: its create or resume acts
    assert not ix.connector_event(a, deleted=False)  # a status write: nothing asked anew
    a["metadata"]["annotations"] = {verbs.RECONCILE: "paused", verbs.RESTART: "t1"}
    assert ix.connector_event(a, deleted=False)
    assert not ix.connector_event(a, deleted=False)
    a["metadata"]["annotations"] = {verbs.RESTART: "t1"}  # the pause lifted
    assert ix.connector_event(a, deleted=False)
    a["metadata"]["annotations"] = {"unrelated": "x", verbs.RESTART: "t1"}
    assert not ix.connector_event(a, deleted=False)
    a["metadata"]["annotations"] = {}
    assert ix.connector_event(a, deleted=False)  # nothing asked now: a reconcile says so
    a["metadata"]["annotations"] = {verbs.RESTART_TASKS: "failed:t2"}
    assert ix.connector_event(a, deleted=False)
    assert not ix.connector_event(a, deleted=True)
    assert not ix._asks  # forgotten with the object
    assert not ix.connector_event(a, deleted=False)  # a new sight after deletion is a first one


def test_renames_are_indexed_from_the_startup_list_and_events_and_go_with_deletion() -> None:
    """Who renames a connector (spec.offsets.from), by the runtime's own rule: what a deleted
    Connector's delete hands its connector over to, without listing the namespace."""
    from connectops.runtime import connector_renames

    ix = Indexes(claim, cluster, secrets, secrets, ("metadata", "spec", "status"), None, connector_renames)
    renamer = body("a", "orders-v2", "u2", "orders-v2")
    renamer["spec"]["offsets"] = {"from": {"connector": "orders"}}
    plain = body("a", "other", "u3", "other")
    assert ix.seed_claims([renamer, plain]) == 2
    assert [c.uid for c in ix.renames.get("orders", [])] == ["u2"]
    assert list(ix.renames) == ["orders"]
    renamer["spec"]["offsets"]["from"] = {"connector": "legacy"}
    ix.connector_event(renamer, deleted=False)
    assert "orders" not in ix.renames
    assert [c.name for c in ix.renames["legacy"]] == ["orders-v2"]
    ix.connector_event(renamer, deleted=True)
    assert len(ix.renames) == 0
