"""The cluster view: who uses which source, and the marks seen, kept from restarter's
own streams of workloads."""
