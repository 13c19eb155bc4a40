"""The Secrets Store CSI Driver's side, pure: which classes a pod template mounts, what a
status object reports, which workload a reporting pod belongs to, and when versions are a
change."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model import csi, optin
from restarter.model.references import SECRET_PROVIDER_CLASS, Reference, references


def csi_volume(name: str, provider_class: str, driver: str = csi.DRIVER) -> dict[str, Any]:
    return {
        "name": name,
        "csi": {
            "driver": driver,
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": provider_class},
        },
    }


def pod_status(
    pod: str, provider_class: str, objects: dict[str, str], mounted: bool = True
) -> dict[str, Any]:
    """A status object as the driver writes it: named after pod, namespace and class, and
    owned by the pod."""
    return {
        "apiVersion": f"{csi.GROUP}/{csi.VERSION}",
        "kind": "SecretProviderClassPodStatus",
        "metadata": {
            "name": f"{pod}-shop-{provider_class}",
            "namespace": "shop",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "u1"}],
        },
        "status": {
            "podName": pod,
            "secretProviderClassName": provider_class,
            "mounted": mounted,
            "targetPath": f"/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/{pod}/mount",
            "objects": [{"id": id_, "version": version} for id_, version in objects.items()],
        },
    }


def test_a_pod_template_mounts_the_classes_of_the_drivers_volumes_only() -> None:
    spec = {
        "volumes": [
            csi_volume("vault", "vault-db"),
            csi_volume("other", "not-ours", driver="other.csi.example.com"),
            {"name": "plain", "secret": {"secretName": "db"}},
        ]
    }
    assert csi.provider_classes(spec) == {"vault-db"}
    assert Reference(SECRET_PROVIDER_CLASS, "vault-db") in references(spec)
    assert Reference("secret", "db") in references(spec)


def test_a_status_object_is_read_for_its_pod_class_and_versions() -> None:
    status = csi.read_pod_status(
        pod_status("api-7d9f8c6b5-x2x4z", "vault-db", {"db/password": "3"})
    )
    assert status is not None
    assert (status.pod, status.provider_class, status.mounted) == (
        "api-7d9f8c6b5-x2x4z",
        "vault-db",
        True,
    )
    assert status.objects == {("db/password", "3")}


def test_a_status_object_without_pod_or_class_is_not_read() -> None:
    body = pod_status("p", "c", {})
    body["status"] = {}
    body["metadata"]["ownerReferences"] = []
    assert csi.read_pod_status(body) is None


@pytest.mark.parametrize(
    ("pod", "owner"),
    [
        ("api-7d9f8c6b5-x2x4z", ("deployments", "api")),
        ("api-worker-5c8d7f9b4-abcde", ("deployments", "api-worker")),
        ("db-0", ("statefulsets", "db")),
        ("agent-k2j4m", ("daemonsets", "agent")),
        ("unrelated-1", None),
    ],
)
def test_a_pod_belongs_to_the_dependent_whose_pods_its_name_fits(
    pod: str, owner: tuple[str, str] | None
) -> None:
    dependents = [
        ("deployments", "api"),
        ("deployments", "api-worker"),
        ("statefulsets", "db"),
        ("daemonsets", "agent"),
    ]
    assert csi.owner_of(pod, dependents) == owner


def test_first_sight_records_and_changes_nothing() -> None:
    change = csi.version_change(None, frozenset({("db", "1")}))
    assert change.baseline and not change.changed


def test_a_new_version_is_a_change_and_the_old_one_with_it_is_not_new_again() -> None:
    first = csi.version_change(None, frozenset({("db", "1")}))
    recorded = csi.read_versions({csi.versions_key("c"): first.record}, "c")
    # One pod rotated: the old and the new version reported together.
    rotating = csi.version_change(recorded, frozenset({("db", "1"), ("db", "2")}))
    assert rotating.changed and rotating.new_ids == {"db"}
    recorded = csi.read_versions({csi.versions_key("c"): rotating.record}, "c")
    # The other pods follow: nothing new, no second change.
    assert not csi.version_change(recorded, frozenset({("db", "2")})).changed


def test_the_same_new_versions_make_the_same_change_id() -> None:
    recorded = csi.read_versions(
        {csi.versions_key("c"): csi.version_change(None, frozenset({("db", "1")})).record}, "c"
    )
    one = csi.version_change(recorded, frozenset({("db", "2")}))
    again = csi.version_change(recorded, frozenset({("db", "2")}))
    assert one.change_id == again.change_id
    assert one.change_id != csi.version_change(recorded, frozenset({("db", "3")})).change_id


def test_the_record_holds_digests_not_versions() -> None:
    record = csi.version_change(None, frozenset({("db/password", "v-rotated-42")})).record
    assert "v-rotated-42" not in record and "db/password" not in record


def test_the_versions_of_one_workloads_mounted_pods_count() -> None:
    dependents = [("deployments", "api"), ("deployments", "web")]
    statuses = [
        csi.read_pod_status(pod_status("api-7d9f8c6b5-x2x4z", "c", {"db": "2"})),
        csi.read_pod_status(pod_status("web-6c9f8c6b5-aaaaa", "c", {"db": "9"})),
        csi.read_pod_status(pod_status("api-7d9f8c6b5-bbbbb", "c", {"db": "7"}, mounted=False)),
    ]
    found = [status for status in statuses if status is not None]
    assert csi.reported_by(found, ("deployments", "api"), dependents) == {("db", "2")}


def test_reloaders_annotations_select_classes() -> None:
    typed = optin.opt_in(
        {"annotations": {"secretproviderclass.reloader.stakater.com/auto": "true"}}, None, True
    )
    assert typed is not None and typed.selects(SECRET_PROVIDER_CLASS, "vault-db", {})
    assert not typed.selects("secret", "db", {})
    listed = optin.opt_in(
        {"annotations": {"secretproviderclass.reloader.stakater.com/reload": "vault-db"}},
        None,
        True,
    )
    assert listed is not None and listed.selects(SECRET_PROVIDER_CLASS, "vault-db", {})
    assert not listed.selects(SECRET_PROVIDER_CLASS, "other", {})
    own = optin.opt_in({"annotations": {"restarter.io/restart-at": "03.00"}}, None, False)
    assert own is not None and own.selects(SECRET_PROVIDER_CLASS, "vault-db", {})


def test_once_every_pod_rotated_the_old_version_leaves_the_record_and_a_rollback_is_new() -> None:
    def recorded(change: csi.VersionChange) -> frozenset[str] | None:
        return csi.read_versions({csi.versions_key("c"): change.record}, "c")

    rotating = csi.version_change(
        recorded(csi.version_change(None, frozenset({("db", "1")}))),
        frozenset({("db", "1"), ("db", "2")}),
    )
    rotated = csi.version_change(recorded(rotating), frozenset({("db", "2")}))
    assert rotated.stale and not rotated.changed
    rolled_back = csi.version_change(recorded(rotated), frozenset({("db", "1")}))
    assert rolled_back.changed and rolled_back.new_ids == {"db"}
    assert not csi.version_change(recorded(rotated), frozenset({("db", "2")})).stale
