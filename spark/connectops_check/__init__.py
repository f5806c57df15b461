"""connectops-check: a Spark job that judges one Kafka Connect connector's lag and balance.

It is independent of the operator (``connectops``): neither imports the other. The operator
runs it as a SparkApplication and reads the verdict back from a ConfigMap (``cli``).

Layers, each usable alone:
- ``snapshot``: the collected inputs as JSON-able dataclasses (save, load, replay).
- ``collect``: ``collect_snapshot(...)`` samples Connect REST and the Kafka admin API.
- ``frames``: a snapshot as Arrow tables, the input of both metric engines.
- ``metrics`` (Spark) and ``reference`` (pandas): lag, Burrow-style status, balance.
- ``verdict``: thresholds -> HEALTHY | DEGRADED | UNHEALTHY | NOT_APPLICABLE document.
- ``job`` and ``cli``: the SparkSession and the ``connectops-check`` command.
- ``synthetic``: generated snapshots for tests, benchmarks and demos.
"""
