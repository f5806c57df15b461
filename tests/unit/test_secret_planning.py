"""The pure decisions of Secret rotation (planning/secrets.py)."""

from __future__ import annotations

from connectops.planning.secrets import (
    ABSENT,
    RotationBook,
    SecretUse,
    affected,
    changed_keys,
    cluster_secret_keys,
    connector_secret_keys,
    key_digests,
    rotated_refs,
    rotation_message,
)

SALT = b"k" * 32


def test_connector_keys_from_the_raw_spec() -> None:
    spec = {
        "configFrom": {
            "a": {"secretKeyRef": {"name": "db", "key": "user"}},
            "b": {"secretKeyRef": {"name": "db", "key": "password"}},
            "c": {"secretKeyRef": {"name": "api", "key": "token"}},
            "broken": {"secretKeyRef": {"name": "", "key": "x"}},
            "junk": "not a mapping",
        }
    }
    assert connector_secret_keys(spec) == {"db": {"user", "password"}, "api": {"token"}}
    assert connector_secret_keys({}) == {}


def test_cluster_keys_with_the_model_defaults() -> None:
    spec = {
        "basicAuth": {"secretName": "rest"},
        "tls": {"caSecretRef": {"name": "ca", "key": "ca.crt"}},
        "kafka": {"configFrom": {"sasl.password": {"name": "rest", "key": "sasl"}}},
    }
    assert cluster_secret_keys(spec) == {"rest": {"username", "password", "sasl"}, "ca": {"ca.crt"}}


def test_digests_are_keyed_and_never_the_value() -> None:
    data = {"password": "aHVudGVyMg=="}
    digests = key_digests(data, ["password", "missing"], SALT)
    assert digests["missing"] == ABSENT
    assert "aHVudGVyMg==" not in digests["password"]
    assert "hunter2" not in digests["password"]
    assert key_digests(data, ["password"], b"o" * 32)["password"] != digests["password"]


def test_changed_keys() -> None:
    before = {"a": "1", "b": "2"}
    assert changed_keys(before, {"a": "1", "b": "3"}, listed=False, deleted=False) == {"b"}
    assert changed_keys(before, before, listed=False, deleted=False) == set()
    # a re-list after a gap still shows what moved during it
    assert changed_keys(before, {"a": "9", "b": "2"}, listed=True, deleted=False) == {"a"}
    assert changed_keys(None, before, listed=True, deleted=False) == set()
    assert changed_keys(None, before, listed=False, deleted=False) == {"a", "b"}
    assert changed_keys(before, {"a": ABSENT, "b": ABSENT}, listed=False, deleted=True) == {"a", "b"}


def test_only_readers_of_a_changed_key_are_affected() -> None:
    uses = [SecretUse("Connector", "x", frozenset({"a"})), SecretUse("Connector", "y", frozenset({"b"}))]
    assert [u.name for u in affected(uses, frozenset({"b"}))] == ["y"]


def test_rotation_book_forgets_after_its_ttl() -> None:
    book = RotationBook(ttl=10.0)
    book.note("ns", "db", frozenset({"password"}), now=100.0)
    book.note("ns", "db", frozenset({"user"}), now=105.0)
    assert book.recent("ns", "db", now=110.0) == {"password", "user"}
    assert book.recent("other", "db", now=110.0) == set()
    assert book.recent("ns", "db", now=116.0) == set()


def test_rotation_message_names_secret_and_keys_only() -> None:
    refs = {"db.password": ("db", "password"), "db.user": ("db", "user")}
    rotated = rotated_refs(refs, lambda secret: frozenset({"password"}) if secret == "db" else frozenset())
    assert rotated == {"db.password": ("db", "password")}
    message = rotation_message(rotated, ["db.password", "topic"])
    assert message is not None
    assert message.startswith("Secret db key password changed: config key(s) db.password updated")
    # a write of other keys only is not a rotation
    assert rotation_message(rotated, ["topic"]) is None
