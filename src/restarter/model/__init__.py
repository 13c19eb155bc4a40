"""The pure model: keys, references, checksums, windows, progress and decisions.

Functions of objects (plain dicts), settings and ``now``. Nothing here imports kopf, a
Kubernetes client or another restarter package (the import-linter contracts in
pyproject.toml).
"""
