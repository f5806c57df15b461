"""The recorded listing of benchmarks/listing_memory_bench.py is held to a real worker's: the
expanded listing Apache Kafka's Connect answers has the same keys at every level as the
benchmark's entries, and connect_answers.parse_expanded reads the real answer exactly as the
whole parse does, keeping only what it is asked to."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from connectops.adapters import connect_answers as answers
from tests.e2e.conftest import ConnectREST, wait_for
from tests.env.servers import ConnectWorker

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from listing_memory_bench import entry

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def _paths(node: Any, at: str = "") -> set[str]:
    """Every key path of a JSON value (a list by its first element, as ``[]``)."""
    if isinstance(node, dict):
        return {at} | {p for k, v in node.items() for p in _paths(v, f"{at}.{k}")}
    if isinstance(node, list):
        return {at} | (_paths(node[0], f"{at}[]") if node else set())
    return {at}


def test_the_benchmarks_listing_has_a_real_workers_shape_and_parses_alike(
    connect: ConnectWorker, tmp_path: Path
) -> None:
    names = [f"shape-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    for name in names:
        config = {"connector.class": SOURCE, "tasks.max": "1", "file": str(src), "topic": f"{name}-t"}
        httpx.put(f"{connect.url}/connectors/{name}/config", json=config, timeout=30).raise_for_status()
    rest = ConnectREST(connect)
    for name in names:
        wait_for(lambda n=name: rest.state(n) == "RUNNING" and rest.status(n)["tasks"], 60, f"{name} running")
    try:
        response = httpx.get(f"{connect.url}/connectors?expand=status&expand=info", timeout=30)
        response.raise_for_status()
        real = response.json()[names[0]]
        _, recorded = entry(0)
        # the same keys at every level; a config is a flat map of strings, its keys the plugin's
        for listed in (real, recorded):
            assert all(isinstance(v, str) for v in listed["info"]["config"].values()), listed
            listed["info"]["config"] = {}
        assert _paths(real) == _paths(recorded), _paths(real) ^ _paths(recorded)
        whole = answers.EXPANDED.validate_json(response.content)
        assert answers.parse_expanded(response.content, lambda _: True) == whole
        assert answers.parse_expanded(response.content, lambda n: n == names[1]) == {names[1]: whole[names[1]]}
    finally:
        for name in names:
            httpx.delete(f"{connect.url}/connectors/{name}", timeout=30)
