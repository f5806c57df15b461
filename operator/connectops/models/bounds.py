"""Size bounds shared by the objects connectops writes.

etcd refuses an object over its request limit (1.5 MiB by default) and the API server one over
3 MiB; a status that grows with what it describes (partitions, connectors, tasks) would, past
some size, be refused at every write: kopf retries the write as a temporary error forever, and
the object never shows a phase or a condition. So every status is bounded by construction:
counts, and samples of a fixed length, with the whole record, where one is needed, in
ConfigMaps of the object's own (each ConfigMap holds at most :data:`CONFIG_MAP_MAX_BYTES`).
"""

from __future__ import annotations

from typing import Final

#: the most any connectops status may take, serialized as JSON (the Connector's and the
#: OffsetReset's): a quarter of etcd's default request limit, leaving room for the spec,
#: metadata and managed fields of the same object
STATUS_MAX_BYTES: Final = 256 * 1024
#: what the API server stores in one ConfigMap (data and binaryData together)
CONFIG_MAP_MAX_BYTES: Final = 1 << 20
#: how many entries a status shows of a list that grows with partitions (the rest are counted)
STATUS_SAMPLE: Final = 50
