"""A status answer's traces are cut to their first line as the answer is read, not after: what the
operator keeps is the same (the first line, 500 characters), and a status of thousands of failed
tasks with long traces no longer holds every trace whole while it is parsed."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import httpx
import pytest

from connectops.adapters import connect_answers as answers
from connectops.adapters.connect_rest import ConnectClient

LONG = "org.apache.kafka.connect.errors.ConnectException: boom " + "x" * 2000 + "\n\tat a.B(B.java:1)" * 100


def _status(traces: list[object]) -> dict[str, object]:
    return {
        "name": "c",
        "connector": {"state": "RUNNING", "worker_id": "w:8083", "trace": traces[0] if traces else None},
        "tasks": [{"id": i, "state": "FAILED", "worker_id": "w:8083", "trace": t} for i, t in enumerate(traces)],
        "type": "sink",
    }


def _expected(trace: str) -> str | None:
    # what the operator kept before the cut moved into the parse, computed here on its own
    lines = trace.strip().splitlines()
    return lines[0][:500] if lines else None


TRACES = [
    LONG,
    "short one",
    "  \n\t leading blank lines\nsecond",
    "windows\r\nline",
    "y" * 499 + "   z\nnext",
    "a single line ending in spaces   ",
    "",
    "  \n  ",  # blank: no first line (this raised IndexError before)
]


@pytest.mark.parametrize("trace", TRACES)
def test_get_status_keeps_what_it_kept_before(trace: str) -> None:
    body = json.dumps(_status([trace])).encode()

    async def go() -> None:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        async with ConnectClient("http://connect.test", transport=transport) as client:
            state = await client.get_status("c")
        assert state is not None
        assert state.trace == _expected(trace)
        assert [t.trace for t in state.tasks] == [_expected(trace)]

    asyncio.run(go())


def test_the_listing_entries_keep_the_first_line_too() -> None:
    entry = {
        "info": {"name": "c", "config": {"connector.class": "X"}, "tasks": [], "type": "sink"},
        "status": _status([LONG]),
    }
    kept = answers.parse_expanded(json.dumps({"c": entry}).encode(), lambda _: True)
    assert kept["c"].status.tasks[0].trace == _expected(LONG)
    assert len(kept["c"].status.tasks[0].trace or "") == 500


def test_a_trace_that_is_not_a_string_is_still_the_wrong_shape() -> None:
    with pytest.raises(answers.WrongShape):
        answers.parse_json(answers.STATUS, json.dumps(_status([{"not": "a string"}])).encode())


def test_five_thousand_long_traces_are_not_held_whole_while_parsed() -> None:
    body = json.dumps(_status([LONG] * 5000)).encode()
    assert len(body) > 15 << 20
    tracemalloc.start()
    try:
        status = answers.parse_json(answers.STATUS, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(status.tasks) == 5000
    # every trace whole is the body's size again in Python strings; the first lines are 500
    # characters each (2.4 MiB) and the task models beside them: 5.1 MiB here
    assert peak < len(body) / 3, (peak, len(body))
