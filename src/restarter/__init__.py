"""restarter: restart workloads inside scheduled windows when the Secrets they use change."""

__version__ = "0.1.0"
