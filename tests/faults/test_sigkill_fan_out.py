"""The operator SIGKILLed at random points of a fan-out to 50 dependents, 20 times.

Each round makes one change of Secret ``db`` (label ``restart-at=now``), waits for a
random number (0-99, seeded) of the round's 100 progress events the test's own watch
can see (50 stamps, 50 restarts), SIGKILLs the operator there, starts a new one and
waits until the change is settled: checksum recorded, no marks left. Every Deployment
must then show exactly one new restartedAt for the round. ``now`` gives every round its
own window occurrence (the next tick), so 20 changes fit in a few minutes, and a
re-stamp of an already restarted Deployment shows as a second restart at once instead
of at tomorrow's window; a mark left behind (a restart scheduled for a later window)
counts as a double too.

Reproduce a run with ``RESTARTER_FAULT_SEED=<seed> pytest tests/faults/test_sigkill_fan_out.py -s``.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.faults import NO_PACING
from tests.faults.ledger import Ledger, report, restarts_without_replica_set, seed_from_env
from tests.integration.factories import deployment, env_from_secret, secret
from tests.integration.test_operator_restarts import baseline, change_data

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

DEPENDENTS = 50
ROUNDS = 20
#: Progress events of one round the test can see: a stamp and a restart per dependent.
EVENTS_PER_ROUND = 2 * DEPENDENTS
#: Seconds after a round settled in which a second restart, if any, would show.
SETTLE = 3.0


def name_of(index: int) -> str:
    return f"app-{index:02d}"


def create_dependents(apps: Apps, namespace: str, secret_name: str, prefix: str = "app") -> None:
    """``DEPENDENTS`` Deployments ``<prefix>-NN`` (no pods) reading ``secret_name``."""

    def create(index: int) -> None:
        body = deployment(f"{prefix}-{index:02d}", env=[env_from_secret(secret_name)], replicas=0)
        # Every restart leaves a ReplicaSet: keep them all, they are counted.
        body["spec"]["revisionHistoryLimit"] = ROUNDS + 5
        apps.create_namespaced_deployment(namespace, body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(DEPENDENTS)))


def replica_sets_per_owner(apps: Apps, namespace: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for replica_set in apps.list_namespaced_replica_set(namespace).items:
        counts[replica_set.metadata.owner_references[0].name] += 1
    return counts


def pending_workloads(apps: Apps, namespace: str) -> list[str]:
    return [
        body.metadata.name
        for body in apps.list_namespaced_deployment(namespace).items
        if any(key.startswith(keys.PENDING_MARK) for key in body.metadata.annotations or {})
        or keys.PENDING_LABEL in (body.metadata.labels or {})
    ]


def checksum_of(core: Core, namespace: str, name: str) -> str | None:
    annotations = core.read_namespaced_secret(name, namespace).metadata.annotations or {}
    return annotations.get(keys.CHECKSUM)


def test_sigkill_at_random_points_of_fan_outs_restarts_every_dependent_once_per_change(
    cluster: Cluster,
    api_client: kubernetes.client.ApiClient,
    core: Core,
    apps: Apps,
    namespace: str,
    tmp_path: Path,
) -> None:
    seed = seed_from_env()
    rng = random.Random(seed)
    core.create_namespaced_secret(namespace, secret("db", {"password": "v0"}, "now"))
    create_dependents(apps, namespace, "db")
    wait_for(
        lambda: sum(replica_sets_per_owner(apps, namespace).values()) == DEPENDENTS,
        60,
        message="a ReplicaSet per Deployment",
    )
    args = ["--namespace", namespace, "--timer-interval", "1", *NO_PACING]
    starts = 0

    def start_operator() -> Operator:
        nonlocal starts
        starts += 1
        log = tmp_path / f"operator-{starts:02d}.log"
        return Operator(cluster, log, args).start()

    rounds: list[dict[str, Any]] = []
    with Ledger(api_client, namespace) as ledger:
        running = start_operator()
        baseline(core, namespace, "db")
        try:
            for number in range(1, ROUNDS + 1):
                kill_after = rng.randrange(EVENTS_PER_ROUND)
                before = {
                    name_of(i): len(ledger.restarts_of(name_of(i))) for i in range(DEPENDENTS)
                }
                stamps_before, restarts_before = ledger.stamps, ledger.restarts
                previous_checksum = checksum_of(core, namespace, "db")
                victim = running

                def kill(victim: Operator = victim) -> None:
                    assert victim.process is not None
                    victim.process.send_signal(signal.SIGKILL)

                killed = ledger.arm(kill_after, kill)
                change_data(core, namespace, "db", f"v{number}")
                assert killed.wait(60), f"round {number}: {kill_after} events never seen"
                assert victim.process is not None
                victim.process.wait(10)
                at_kill = (ledger.stamps - stamps_before, ledger.restarts - restarts_before)
                recorded_at_kill = checksum_of(core, namespace, "db") != previous_checksum
                running = start_operator()

                def settled(previous: str | None = previous_checksum) -> bool:
                    recorded = checksum_of(core, namespace, "db")
                    return recorded != previous and not pending_workloads(apps, namespace)

                wait_for(settled, 90, message=f"round {number} settled")
                time.sleep(SETTLE)
                new = {
                    name: len(ledger.restarts_of(name)) - count for name, count in before.items()
                }
                rounds.append(
                    {
                        "round": number,
                        "kill_after_events": kill_after,
                        "stamps_at_kill": at_kill[0],
                        "restarts_at_kill": at_kill[1],
                        "checksum_recorded_at_kill": recorded_at_kill,
                        "doubled": sorted(name for name, count in new.items() if count > 1),
                        "lost": sorted(name for name, count in new.items() if count == 0),
                        "left_pending": pending_workloads(apps, namespace),
                    }
                )
                print(f"round {rounds[-1]}", file=sys.stderr)
        finally:
            running.stop()

    restarts = {name_of(i): ledger.restarts_of(name_of(i)) for i in range(DEPENDENTS)}
    doubles = sum(len(r["doubled"]) for r in rounds)
    losses = sum(len(r["lost"]) for r in rounds)
    report(
        "operator SIGKILL during fan-out",
        {
            "seed": seed,
            "kills": ROUNDS,
            "changes": ROUNDS,
            "dependents": DEPENDENTS,
            "restarts_expected": ROUNDS * DEPENDENTS,
            "restarts_seen": sum(len(values) for values in restarts.values()),
            "doubles": doubles,
            "losses": losses,
            "rounds_with_doubles": [r["round"] for r in rounds if r["doubled"]],
            "operator_starts": starts,
        },
    )
    assert not [r for r in rounds if r["doubled"] or r["lost"] or r["left_pending"]], rounds
    assert all(len(values) == ROUNDS for values in restarts.values()), restarts
    # The last restart rolled out (kube-controller-manager makes ReplicaSets on its own
    # time, from the latest template).
    wait_for(
        lambda: not restarts_without_replica_set(apps, namespace, restarts),
        180,
        message="a ReplicaSet for the last restart of each Deployment",
        describe=lambda: restarts_without_replica_set(apps, namespace, restarts),
    )
