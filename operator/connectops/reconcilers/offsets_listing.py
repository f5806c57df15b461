"""What a stopped connector's offsets are, asked of Connect's REST API alone.

Connect answers ``GET /offsets`` for a source from a list of partitions that can trail its
offsets topic for a moment after a write (see :func:`listed_when_settled`); a caller that acts on
the answer (a rename carrying the offsets over, a backup taken without Kafka access) asks until
the answers settle.
"""

from __future__ import annotations

from typing import Any

from connectops.adapters.connect_rest import ConnectApi
from connectops.planning.offset_reset import diff_offsets

#: how many GET /offsets are asked at most for two answers in a row that agree
SETTLE_READS = 5


async def listed_when_settled(client: ConnectApi, connector: str) -> list[dict[str, Any]]:
    """``GET /offsets`` of a stopped connector, asked until two answers in a row agree.

    Connect lists a source's partitions from what the answering worker's reader of its offsets
    topic has consumed, without reading to the end first (``Worker.sourceConnectorOffsets``), so
    an answer right after the stop can leave out a partition the stop has just committed for the
    first time; but each answer reads that topic to the end before it returns (for the values),
    so the next answer from the same worker lists it. Behind a Service over several workers two
    answers may come from two workers, each of which may trail: agreeing twice in a row is what
    can be asked of REST alone; with Kafka access the offsets topic itself is the reference
    (:meth:`reconcilers.reset_changes.OffsetChanges.settled_offsets`)."""
    answer = await client.get_offsets(connector)
    for _ in range(SETTLE_READS - 1):
        again = await client.get_offsets(connector)
        if not diff_offsets(answer, again):
            return again
        answer = again
    return answer
