"""A local Kubernetes control plane for restarter's tests and demo (development only)."""
