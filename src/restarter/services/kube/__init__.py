"""The clients of the Kubernetes API, one module a verb (reading, patching, posting,
watching) over one request path (requesting) and one way to connect (connecting); their
failures are the types of ``errors``."""
