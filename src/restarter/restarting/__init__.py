"""Restarting: the source flow (stamp dependents), the timer flow (restart when due),
pacing, rollouts and what the streams feed them."""
