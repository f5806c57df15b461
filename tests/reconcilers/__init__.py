"""Reconciler-level tests: each reconciler path against the in-memory doubles (tests/doubles)."""
