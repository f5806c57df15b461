"""The offsets-topic scan's key filter (issue 17: at least as fast as kcat) selects exactly what
classifying every key with ``_key_connector`` selects: the same records, the latest per
(partition, key) in topic order, the same counts. The independent side is the plain loop over
every record, as the scan did before; keys are generated to hit the filter's edges: names that
prefix each other, escapes, backslashes in partition maps, NUL bytes and ``["`` inside keys, null
and garbage keys, whitespace after the name."""

from __future__ import annotations

import json

from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from connectops.adapters.kafka.codec import _key_connector
from connectops.adapters.kafka.offsets_topic import OffsetScan, _LatestOfConnectors

NAMES = ["a", "ab", "a b", 'a "q"', "a\\b", "é", "a\x01", "b"]


def connect_key(name: str, partition: str, *, spaced: bool, escaped: bool) -> bytes:
    text = json.dumps(name, ensure_ascii=escaped)
    comma = " ," if spaced else ","
    return f'[{text}{comma}{{"f":{json.dumps(partition)}}}]'.encode()


keys = st.one_of(
    st.builds(
        connect_key,
        st.sampled_from(NAMES),
        st.sampled_from(["x", "C:\\dir", '\x00["a"', "b"]),
        spaced=st.booleans(),
        escaped=st.booleans(),
    ),
    st.sampled_from([b"garbage", b"", b'["a"', b'\x00["a",{}]', b'["a\\', b'["ab",{}]\x00["a",{}]']),
    st.binary(max_size=12),
    st.none(),
)


def expected(batches: list[list[tuple[int, bytes | None]]], wanted: set[str]) -> tuple[dict[object, int], int]:
    """The plain loop: every key classified, the last record of each (partition, key) kept."""
    latest: dict[object, int] = {}
    matched = 0
    for number, batch in enumerate(batches):
        for offset, (partition, key) in enumerate(batch):
            if key is not None and _key_connector(key) in wanted:
                matched += 1
                latest[(partition, key)] = offset + 1000 * number
    return latest, matched


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 2), keys), max_size=30), min_size=1, max_size=4),
    st.sets(st.sampled_from(NAMES), min_size=1, max_size=3),
)
def test_the_filter_selects_what_classifying_every_key_selects(
    batches: list[list[tuple[int, bytes | None]]], wanted: set[str]
) -> None:
    scan = OffsetScan(topic="t", records=[])
    keep = _LatestOfConnectors(wanted, scan)
    for number, batch in enumerate(batches):
        keep.take(
            [
                Message(topic="t", partition=partition, offset=offset + 1000 * number, key=key, value=b"v")
                for offset, (partition, key) in enumerate(batch)
            ]
        )
    latest, matched = expected(batches, wanted)
    assert {k: m.offset() for k, m in keep.latest.items()} == latest
    assert scan.matched == matched
    nulls = sum(1 for batch in batches for _, key in batch if key is None)
    assert scan.unparseable >= nulls
