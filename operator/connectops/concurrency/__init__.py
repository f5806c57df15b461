"""Bounded concurrency, queues and backoff: the asyncio mechanisms the adapters and reconcilers
share, one small module each (kopf keeps each such mechanism in a module named after it).

Nothing here knows Connect, Kafka, Kubernetes or kopf, and nothing here imports the rest of
connectops (the import contracts in pyproject.toml hold both), so any layer may use them.
"""
