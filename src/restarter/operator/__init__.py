"""The operator's wiring: kopf's handlers over the flows, the kinds installed late, and
the memory trimming between bursts (``restarter.main`` starts it)."""
