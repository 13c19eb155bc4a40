"""Benchmark harness: restarter versus a naive kopf operator on the local control plane.

Not part of the test suite. Run ``bench/run --help``.
"""
