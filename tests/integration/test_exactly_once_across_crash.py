"""One change, at most one restart per workload, wherever the operator is SIGKILLed.

A Secret used by 15 Deployments changes while its window is open. The stamp of the 15th
is refused by a ValidatingAdmissionPolicy (as an admission webhook or quota might), so
the fan-out cannot finish and the Secret's checksum stays unrecorded: the state a crash
leaves in the middle of a fan-out, held still long enough to kill the operator at a point
the test's own watch finds. After the kill the policy is lifted and the operator started
again: it sees the change again and must finish it without restarting anyone twice.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from restarter.model import keys
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
from tests.integration.test_operator_restarts import TICKS, baseline, change_data

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

DEPENDENTS = 15
BLOCKED = "app-14"  # the dependent whose stamp is refused until the operator is killed
#: The pending mark the refused stamp would write on BLOCKED.
MARK = keys.pending_key("secret", "cert")


def name_of(i: int) -> str:
    return f"app-{i:02d}"


class History:
    """The test's own watch of the namespace's Deployments: what each one ever showed."""

    def __init__(self, apps: Apps, namespace: str) -> None:
        self.restarted_at: dict[str, set[str]] = defaultdict(set)
        self.stamped: set[str] = set()
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(apps, namespace), daemon=True)

    def __enter__(self) -> History:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()

    def _run(self, apps: Apps, namespace: str) -> None:
        watch = kubernetes.watch.Watch()
        for event in watch.stream(apps.list_namespaced_deployment, namespace, timeout_seconds=600):
            body = event["object"]
            name = body.metadata.name
            with self.changed:
                restarted = (body.spec.template.metadata.annotations or {}).get(
                    keys.KUBECTL_RESTARTED_AT
                )
                if restarted:
                    self.restarted_at[name].add(restarted)
                annotations = body.metadata.annotations or {}
                if any(key.startswith(keys.PENDING_MARK) for key in annotations):
                    self.stamped.add(name)
                self.changed.notify_all()
            if self._stop.is_set():
                watch.stop()

    def wait(self, predicate: Callable[[History], bool], timeout: float, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self), timeout):
                pytest.fail(f"timed out after {timeout}s waiting for {what}")


#: Kill points, as the test's watch finds them.
KILL_POINTS: dict[str, Callable[[History], bool]] = {
    "after-the-first-stamp": lambda history: bool(history.stamped),
    "after-the-first-restart": lambda history: bool(history.restarted_at),
    "after-all-restarts-before-the-checksum": lambda history: (
        len(history.restarted_at) == DEPENDENTS - 1
    ),
}


@pytest.fixture
def refused_stamp(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> Iterator[Callable[[], None]]:
    """A policy refusing the pending marks on BLOCKED; the fixture's value lifts it."""
    admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
    name = f"refuse-stamp-{namespace}"
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["deployments"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": (
                            f"object.metadata.name != '{BLOCKED}' || "
                            "!has(object.metadata.annotations) || "
                            f"!('{MARK}' in object.metadata.annotations)"
                        ),
                        "message": "stamp refused by the test",
                    }
                ],
            },
        }
    )
    binding = {
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    admission.create_validating_admission_policy_binding(binding)

    def lift() -> None:
        admission.delete_validating_admission_policy_binding(name)

    yield lift
    for delete in (
        admission.delete_validating_admission_policy_binding,
        admission.delete_validating_admission_policy,
    ):
        with contextlib.suppress(kubernetes.client.exceptions.ApiException):
            delete(name)


def policy_in_force(apps: Apps, namespace: str) -> bool:
    """The apiserver applies a new binding after a moment: probe it with a real refusal."""
    patch = {"metadata": {"annotations": {MARK: "probe"}}}
    try:
        apps.patch_namespaced_deployment(BLOCKED, namespace, patch)
    except kubernetes.client.exceptions.ApiException as error:
        return error.status == 422 and "refused by the test" in str(error.body)
    apps.patch_namespaced_deployment(
        BLOCKED, namespace, {"metadata": {"annotations": {MARK: None}}}
    )
    return False


def leftovers(body: Any) -> list[str]:
    """Anything of a pending restart still on a Deployment."""
    annotations = body.metadata.annotations or {}
    found = [key for key in annotations if key.startswith((keys.PENDING_MARK, keys.WINDOW_MARK))]
    if keys.PENDING_LABEL in (body.metadata.labels or {}):
        found.append(keys.PENDING_LABEL)
    if keys.FINALIZER in (body.metadata.finalizers or []):
        found.append(keys.FINALIZER)
    return found


def kill(instance: Operator) -> None:
    assert instance.process is not None
    instance.process.send_signal(signal.SIGKILL)
    instance.process.wait(10)
    instance.process = None


@pytest.mark.parametrize("repeat", [1, 2])
@pytest.mark.parametrize("kill_point", list(KILL_POINTS))
def test_a_change_restarts_each_dependent_once_whatever_the_crash_point(
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    refused_stamp: Callable[[], None],
    kill_point: str,
    repeat: int,
) -> None:
    core.create_namespaced_secret(namespace, secret("cert", {"tls.key": "one"}, window_open_now()))
    names = [name_of(i) for i in range(DEPENDENTS)]
    for name in names:
        body = deployment(name, env=[env_from_secret("cert")], replicas=0)
        apps.create_namespaced_deployment(namespace, body)
    wait_for(lambda: policy_in_force(apps, namespace), 30, message="the admission policy")

    first = operator()
    recorded = baseline(core, namespace, "cert")
    with History(apps, namespace) as history:
        change_data(core, namespace, "cert", "two")
        history.wait(KILL_POINTS[kill_point], 60, kill_point)
        kill(first)
        source = core.read_namespaced_secret("cert", namespace).metadata.annotations or {}
        assert source.get(keys.CHECKSUM) == recorded  # the change is not finished
        seen_restarts = {name: set(values) for name, values in history.restarted_at.items()}
        print(f"\n{kill_point}: killed with {len(seen_restarts)} of {DEPENDENTS} restarted")

        refused_stamp()
        operator()

        def finished() -> bool:
            annotations = core.read_namespaced_secret("cert", namespace).metadata.annotations
            bodies = apps.list_namespaced_deployment(namespace).items
            return (
                annotations.get(keys.CHECKSUM) != recorded
                and keys.CHANGE not in annotations
                and len(history.restarted_at) == DEPENDENTS
                and not any(leftovers(body) for body in bodies)
            )

        wait_for(finished, 90, message="every dependent restarted and nothing left pending")
        time.sleep(TICKS)  # a second restart, if any, would come on the next ticks

        for name in names:
            assert len(history.restarted_at[name]) == 1, (name, history.restarted_at[name])
        # A Deployment restarted before the kill kept that one restart.
        for name, values in seen_restarts.items():
            assert history.restarted_at[name] == values, name

    for name in names:
        body = apps.read_namespaced_deployment(name, namespace)
        assert leftovers(body) == [], name
        # The change each was restarted for is recorded: a later stamp for it is dropped.
        [change] = json.loads(body.metadata.annotations[keys.RESTARTED_FOR]).values()
        assert change.isdigit()

    def replica_set_counts() -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for rs in apps.list_namespaced_replica_set(namespace).items:
            counts[rs.metadata.owner_references[0].name] += 1
        return counts

    wait_for(
        lambda: replica_set_counts() == dict.fromkeys(names, 2),
        60,
        message="exactly one new ReplicaSet for each dependent",
    )
