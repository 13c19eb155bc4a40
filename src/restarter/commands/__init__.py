"""The subcommands ``restarter plan`` and ``restarter release-finalizers``."""
