"""Shared services, above the pure model and below everything else: the client of the
Kubernetes API (``kube``, one module a verb) and the Lease held through it
(``leadership``), the one Event path (``events``), the metrics, and the settings
dataclass."""
