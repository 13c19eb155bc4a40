"""The pure model: keys, references, checksums, windows and decisions.

Functions of objects (plain dicts), settings and ``now``; no kopf, no Kubernetes client.
"""
