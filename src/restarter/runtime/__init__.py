"""The process: settings, the API client, metrics and the Lease that every layer uses,
and the entry point and kopf handlers that wire the layers together."""
