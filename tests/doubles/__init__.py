"""In-memory doubles of the adapters' interfaces, for reconciler tests that need no servers."""
