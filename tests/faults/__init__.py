"""The fault suite: faults injected into the operator and the control plane."""

#: The faults are counted in restarts; pacing (its own tests) would only slow them down.
NO_PACING = ("--max-in-flight", "0", "--max-per-minute", "0")
