"""The rules the operator (``connectops``) and the Spark check job (``connectops_check``) both
apply, defined once: how MirrorMaker 2's connectors are recognised (``mm2``), which consumer group
a sink connector reads with and Connect's worker defaults the check assumes (``connect``), and the
check's thresholds, their defaults, bounds, flags and names (``thresholds``).

Why a package of its own: the two packages never import each other (the operator and the job
ship and run apart), yet a rule both apply must give one answer. It imports nothing but the
standard library and nothing of either package (import-linter contracts in pyproject.toml), so
both images and the dev install carry it with no cost.
"""
