"""Restarting: the source flow (stamp dependents), the timer flow (restart when due),
admission, pacing, and what the streams feed them."""
