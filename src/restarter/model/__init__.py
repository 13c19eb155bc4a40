"""The pure model: keys, references, checksums, windows and decisions.

Functions of objects (plain dicts), settings and ``now``. Nothing here imports kopf, a
Kubernetes client or another restarter package (tests/unit/test_layers_imports.py).
"""
