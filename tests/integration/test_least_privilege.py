"""Least privilege, enforced by the apiserver: with the chart's ServiceAccount token, every
change but restarter's own marks is refused by the chart's ValidatingAdmissionPolicy, and
every change a restart needs goes through.

To show the policy's own refusals, most tests give the ServiceAccount a Role that allows
every verb on the objects touched (as a stolen token bound to more than the chart grants
would have): RBAC then refuses nothing, and only the policy stands in the way.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kopf
import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from restarter.main import kopf_settings
from restarter.model import (
    checksums,
    keys,
    restart_decisions,
    source_changes,
    stamps,
    timer_admission,
    windows,
)
from restarter.model.finalizers import release_patch
from restarter.model.kinds import KINDS
from restarter.services import settings as settings_module
from restarter.services.kube.api import Api
from restarter.services.kube.endpoints import APPS_STEMS
from restarter.services.kube.errors import Conflict
from restarter.services.kube.patching import MERGE_PATCH
from restarter_cluster import binaries
from restarter_cluster.cluster import Cluster
from tests.chart_identity import (
    CHART,
    SYSTEM,
    Identity,
    apply_identity,
    is_hook,
    render,
    token_kubeconfig,
)
from tests.conftest import wait_for
from tests.integration.factories import (
    daemonset,
    deployment,
    encoded,
    env_from_secret,
    secret,
    statefulset,
    window_open_now,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
#: Another controller's finalizer on the test's workloads.
KEEP = "example.com/keep"
#: An env var a stolen token might add to a container.
DEBUG = [{"name": "DEBUG", "value": "1"}]
JSON_PATCH = "application/json-patch+json"

DATA = "restarter may not change the data, type or immutability of a Secret or ConfigMap"
SPEC = (
    "restarter may not change a workload's spec beyond the restart "
    "(kubectl.kubernetes.io/restartedAt on its pod template, a Rollout's spec.restartAt)"
)
FINALIZER = "restarter may add or remove no finalizer of a workload but restarter.io/finalizer"


def client_of(kubeconfig: Path) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    return kubernetes.client.ApiClient(configuration)


def policy_of(identity: Identity, hook: bool = False) -> str:
    return f"{identity.release}-restarter{'-uninstall' if hook else ''}-least-privilege"


def refused_by(policy: str, message: str, call: Callable[[], Any]) -> None:
    """``call`` is refused by the policy with ``message`` (HTTP 403)."""
    with pytest.raises(ApiException) as caught:
        call()
    said = json.loads(caught.value.body)["message"]
    assert caught.value.status == 403, said
    assert f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: " in said
    assert said.endswith(message), said


def widen(rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str, user: str) -> None:
    """Every verb on sources, workloads (their scale too) and Events in ``namespace``."""
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "widened"},
            "rules": [
                {
                    "apiGroups": ["", "apps"],
                    "resources": [
                        "secrets",
                        "configmaps",
                        "events",
                        "deployments",
                        "deployments/scale",
                        "statefulsets",
                        "daemonsets",
                    ],
                    "verbs": ["*"],
                }
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "widened"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "widened"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


def policy_in_force(core: Core, namespace: str, name: str, policy: str) -> bool:
    """The apiserver applies a new policy after a moment: probe it with a real refusal (a
    new value each time: a patch that changes nothing is no change to refuse)."""
    probe = {"metadata": {"annotations": {"example.com/probe": uuid.uuid4().hex}}}
    try:
        core.patch_namespaced_config_map(name, namespace, probe)
    except ApiException as error:
        return error.status == 403 and policy in str(error.body)
    return False


def wait_for_policy(cluster: Cluster, identity: Identity, namespace: str, policy: str) -> None:
    admin = Core(client_of(cluster.kubeconfig))
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    admin.create_namespaced_config_map(namespace, {"metadata": {"name": probe}})
    as_sa = Core(client_of(identity.kubeconfig))
    wait_for(lambda: policy_in_force(as_sa, namespace, probe, policy), 30, message=policy)
    admin.delete_namespaced_config_map(probe, namespace)


@pytest.fixture(scope="module")
def identity(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    """The chart's ServiceAccount, RBAC and policies (cluster mode), as a release of its own."""
    release = f"lp-{uuid.uuid4().hex[:5]}"
    made = apply_identity(cluster, release, tmp_path_factory.mktemp("lp"))
    wait_for_policy(cluster, made, SYSTEM, policy_of(made))
    yield made
    cluster.kubectl(
        "delete",
        "validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,"
        "clusterrolebindings,serviceaccounts",
        "-A",
        "-l",
        f"app.kubernetes.io/instance={release}",
        check=False,
    )


@pytest.fixture
def sa(identity: Identity) -> tuple[Core, Apps]:
    client = client_of(identity.kubeconfig)
    return Core(client), Apps(client)


@pytest.fixture
def widened(
    api_client: kubernetes.client.ApiClient, identity: Identity, namespace: str
) -> Iterator[str]:
    widen(kubernetes.client.RbacAuthorizationV1Api(api_client), namespace, identity.username)
    yield namespace


@pytest.fixture
def objects(core: Core, apps: Apps, namespace: str) -> Iterator[None]:
    """A labelled Secret and ConfigMap, a Deployment using the Secret that holds another
    controller's finalizer, and an Event."""
    core.create_namespaced_secret(
        namespace,
        secret("db", {"password": "a"}, window_open_now(), {keys.CHECKSUM: "sha256:0"}),
    )
    labels = {keys.RESTART_AT_LABEL: window_open_now()}
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "conf", "labels": labels}, "data": {"a": "1"}}
    )
    body = deployment("web", env=[env_from_secret("db")], replicas=1)
    body["metadata"]["finalizers"] = [KEEP]
    apps.create_namespaced_deployment(namespace, body)
    # The deployment controller's first write (the revision annotation) comes before the
    # test reads what must not change.
    wait_for(
        lambda: apps.read_namespaced_deployment("web", namespace).metadata.annotations,
        30,
        message="the deployment controller's revision annotation",
    )
    core.create_namespaced_event(
        namespace,
        {
            "metadata": {"name": "seen"},
            "involvedObject": {"kind": "Secret", "name": "db", "namespace": namespace},
            "reason": "Test",
            "message": "an Event",
            "type": "Normal",
        },
    )
    yield
    apps.patch_namespaced_deployment("web", namespace, {"metadata": {"finalizers": None}})


def state(core: Core, apps: Apps, namespace: str) -> dict[str, Any]:
    """What the forbidden changes aim at, as the admin reads it."""
    source = core.read_namespaced_secret("db", namespace)
    conf = core.read_namespaced_config_map("conf", namespace)
    web = apps.read_namespaced_deployment("web", namespace)
    events = core.list_namespaced_event(namespace).items
    return {
        "secret": (source.data, source.type, source.metadata.labels, source.metadata.annotations),
        "secret finalizers": source.metadata.finalizers,
        "configmap": (conf.data, conf.metadata.labels),
        "deployment": (web.spec.to_dict(), web.metadata.labels, web.metadata.annotations),
        "deployment finalizers": web.metadata.finalizers,
        # Controllers post Events of their own meanwhile: only the test's counts.
        "event": [event.metadata.name for event in events if event.metadata.name == "seen"],
        "secrets": sorted(s.metadata.name for s in core.list_namespaced_secret(namespace).items),
    }


def _put_secret(core: Core, namespace: str) -> None:
    body = core.read_namespaced_secret("db", namespace)
    body.data = encoded({"password": "stolen"})
    core.replace_namespaced_secret("db", namespace, body)


def _with_image(body: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "evil:1"}]}}}}


#: Each forbidden change: what it does as the ServiceAccount, and the policy's message.
FORBIDDEN: dict[str, tuple[Callable[[Core, Apps, str], Any], str]] = {
    "a Secret's data": (
        lambda core, apps, ns: core.patch_namespaced_secret(
            "db", ns, {"data": encoded({"password": "stolen"})}
        ),
        DATA,
    ),
    "a Secret's data, by update": (lambda core, apps, ns: _put_secret(core, ns), DATA),
    "a Secret's type": (
        lambda core, apps, ns: core.patch_namespaced_secret("db", ns, {"immutable": True}),
        DATA,
    ),
    "a ConfigMap's data": (
        lambda core, apps, ns: core.patch_namespaced_config_map("conf", ns, {"data": {"a": "2"}}),
        DATA,
    ),
    "a Secret's label": (
        lambda core, apps, ns: core.patch_namespaced_secret(
            "db", ns, {"metadata": {"labels": {"team": "mallory"}}}
        ),
        "restarter may change no label of a Secret or ConfigMap, not team",
    ),
    "a foreign annotation on a Secret": (
        lambda core, apps, ns: core.patch_namespaced_secret(
            "db", ns, {"metadata": {"annotations": {"example.com/owner": "mallory"}}}
        ),
        "restarter may change only its own annotations, not example.com/owner",
    ),
    "a user's restarter annotation on a Secret": (
        lambda core, apps, ns: core.patch_namespaced_secret(
            "db", ns, {"metadata": {"annotations": {keys.TIMEZONE: "Asia/Tokyo"}}}
        ),
        f"restarter may change only its own annotations, not {keys.TIMEZONE}",
    ),
    "a finalizer on a Secret": (
        lambda core, apps, ns: core.patch_namespaced_secret(
            "db", ns, {"metadata": {"finalizers": [keys.FINALIZER]}}
        ),
        "restarter may change no finalizer of a Secret or ConfigMap",
    ),
    "a foreign annotation on a Deployment": (
        lambda core, apps, ns: apps.patch_namespaced_deployment(
            "web", ns, {"metadata": {"annotations": {keys.IGNORE: "true"}}}
        ),
        f"restarter may change only its own annotations, not {keys.IGNORE}",
    ),
    "a Deployment's image": (
        lambda core, apps, ns: apps.patch_namespaced_deployment("web", ns, _with_image({})),
        SPEC,
    ),
    "a Deployment's replicas": (
        lambda core, apps, ns: apps.patch_namespaced_deployment(
            "web", ns, {"spec": {"replicas": 5}}
        ),
        SPEC,
    ),
    "a container's env": (
        lambda core, apps, ns: apps.patch_namespaced_deployment(
            "web",
            ns,
            {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": DEBUG}]}}}},
        ),
        SPEC,
    ),
    "another pod-template annotation": (
        lambda core, apps, ns: apps.patch_namespaced_deployment(
            "web",
            ns,
            {"spec": {"template": {"metadata": {"annotations": {"example.com/x": "1"}}}}},
        ),
        SPEC,
    ),
    "a Deployment's scale": (
        lambda core, apps, ns: apps.patch_namespaced_deployment_scale(
            "web", ns, {"spec": {"replicas": 5}}
        ),
        "restarter may only patch Secrets, ConfigMaps and workloads and create Events, "
        "not UPDATE deployments/scale",
    ),
    "deleting a Deployment": (
        lambda core, apps, ns: apps.delete_namespaced_deployment("web", ns),
        "restarter may only patch Secrets, ConfigMaps and workloads and create Events, "
        "not DELETE deployments",
    ),
    "creating a Secret": (
        lambda core, apps, ns: core.create_namespaced_secret(
            ns, {"metadata": {"name": "planted"}, "data": encoded({"k": "v"})}
        ),
        "restarter may only patch Secrets, ConfigMaps and workloads and create Events, "
        "not CREATE secrets",
    ),
    "removing another controller's finalizer": (
        lambda core, apps, ns: apps.patch_namespaced_deployment(
            "web", ns, {"metadata": {"$deleteFromPrimitiveList/finalizers": [KEEP]}}
        ),
        FINALIZER,
    ),
    "deleting an Event": (
        lambda core, apps, ns: core.delete_namespaced_event("seen", ns),
        "restarter may only patch Secrets, ConfigMaps and workloads and create Events, "
        "not DELETE events",
    ),
}


@pytest.mark.parametrize("change", list(FORBIDDEN))
def test_each_forbidden_change_is_refused_with_the_policys_message(
    change: str,
    identity: Identity,
    sa: tuple[Core, Apps],
    core: Core,
    apps: Apps,
    widened: str,
    objects: None,
) -> None:
    call, message = FORBIDDEN[change]
    before = state(core, apps, widened)
    refused_by(policy_of(identity), message, lambda: call(*sa, widened))
    assert state(core, apps, widened) == before


@pytest.mark.parametrize(
    "change",
    [
        "a Secret's data, by update",
        "deleting a Deployment",
        "creating a Secret",
        "a Deployment's scale",
    ],
)
def test_with_the_charts_rbac_alone_the_verbs_are_refused_before_the_policy(
    change: str, sa: tuple[Core, Apps], core: Core, apps: Apps, namespace: str, objects: None
) -> None:
    """The chart grants no update, create or delete on sources or workloads, nor scale:
    RBAC refuses those first (the policy is the second wall)."""
    call, _ = FORBIDDEN[change]
    before = state(core, apps, namespace)
    with pytest.raises(ApiException) as caught:
        call(*sa, namespace)
    assert caught.value.status == 403
    assert "cannot " in json.loads(caught.value.body)["message"]
    assert state(core, apps, namespace) == before


def _kopf_writes(body: dict[str, Any]) -> dict[str, Any]:
    """The annotations kopf writes with restarter's settings: its progress of a handler,
    its touch, its diff base and its marker, built by kopf's own storage classes."""
    persistence = kopf_settings(settings_module.build(["--namespace", "x"])).persistence
    raw = kopf.Body(body)
    patch = kopf.Patch()
    persistence.progress_storage.touch(body=raw, patch=patch, value="x")
    record = {"started": "2026-01-01T00:00:00", "retries": 1}
    persistence.progress_storage.store(
        key=kopf.HandlerId("pending_restart_deployments"), record=record, body=raw, patch=patch
    )
    essence = persistence.diffbase_storage.build(body=raw)
    persistence.diffbase_storage.store(body=raw, patch=patch, essence=essence)
    return dict(patch)


#: Defaults of a window the marks name no zone or length of (the operator's settings).
DEFAULTS = SimpleNamespace(timezone="UTC", window_length=dt.timedelta(hours=1))
FACTORIES = {"deployments": deployment, "statefulsets": statefulset, "daemonsets": daemonset}


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_every_change_a_restart_needs_passes_the_policy(
    kind: str, identity: Identity, core: Core, apps: Apps, widened: str
) -> None:
    """The patches restarter's code builds, sent as it sends them, from a source's first
    sight to the restart and the recorded change; the other paths of a pending workload
    (hand back, clear, label repair, finalizer release); kopf's own annotations; an Event.
    Even with every verb allowed by RBAC, each passes the policy, and the outcome is what
    a user checks: the data as the user wrote it, the restart, the other finalizer kept."""
    namespace = widened
    api = Api(client_of(identity.kubeconfig))
    stem = APPS_STEMS[kind]
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    body = FACTORIES[kind]("web", env=[env_from_secret("db")])
    body["metadata"]["finalizers"] = [KEEP]
    getattr(apps, f"create_namespaced_{stem}")(namespace, body)
    read = getattr(apps, f"read_namespaced_{stem}")
    admin_patch = getattr(apps, f"patch_namespaced_{stem}")
    try:
        flow = RestartFlow(api, kind, namespace, lambda: plain(read("web", namespace)))
        first = flow.record()
        core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "b"})})
        flow.begin()
        # Stamped, admitted, handed back (its window closed meanwhile), admitted again.
        flow.stamp()
        flow.fresh(timer_admission.admit_patch)
        flow.fresh(timer_admission.hand_back_patch)
        flow.fresh(timer_admission.admit_patch)
        # kopf's own annotations, as kopf sends them (a JSON merge patch).
        flow.send(_kopf_writes(flow.read()), MERGE_PATCH)
        # The restart: restartedAt, restart-ts and restarted-for set, marks, label and our
        # finalizer removed, in one request; then the checksum of the new data recorded.
        flow.fresh(lambda _: restart(flow.read()))
        assert flow.record() != first
        # Marks cleared without a restart (as for a workload opted out meanwhile), stamped
        # in an open window: marks, label and finalizer in one request.
        flow.stamp(admitted=True)
        flow.fresh(
            lambda metadata: restart_decisions.clear_patch(metadata["annotations"], metadata)
        )
        # Marks removed by hand: the label repaired; the finalizer added back (as a namespace
        # coming back into scope does) and released by a JSON patch (as the operator's
        # shutdown and the uninstall hook do).
        flow.stamp()
        flow.fresh(timer_admission.admit_patch)
        marks = flow.read()["metadata"]["annotations"]
        by_hand = {k: None for k in marks if k.startswith(keys.MARK_PREFIXES)}
        admin_patch("web", namespace, {"metadata": {"annotations": by_hand}})
        flow.fresh(timer_admission.label_repair)
        flow.send({"metadata": {"finalizers": [keys.FINALIZER]}})
        release = release_patch(flow.read()["metadata"]["finalizers"], keys.FINALIZER)
        assert release is not None
        flow.send(release, JSON_PATCH)
        api.create_event(
            {**flow.read(), "apiVersion": "apps/v1", "kind": body_kind(kind)},
            type="Normal",
            reason="Restarted",
            message="restarted by the test",
        )
    finally:
        admin_patch("web", namespace, {"metadata": {"finalizers": None}})
    source = core.read_namespaced_secret("db", namespace)
    assert source.data == encoded({"password": "b"})
    assert source.metadata.annotations[keys.CHECKSUM] == flow.current
    done = read("web", namespace)
    assert keys.KUBECTL_RESTARTED_AT in done.spec.template.metadata.annotations
    assert done.spec.template.spec.containers[0].image == "registry.invalid/app:1"
    assert keys.RESTART_TS in done.metadata.annotations
    assert not any(k.startswith(keys.MARK_PREFIXES) for k in done.metadata.annotations)
    assert keys.PENDING_LABEL not in (done.metadata.labels or {})
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=web")
    assert any(event.reason == "Restarted" for event in events.items)


def restart(workload: dict[str, Any]) -> dict[str, Any]:
    """The patch restarter's timer sends to restart ``workload`` now."""
    decision = restart_decisions.decide_restart(workload, DEFAULTS, dt.datetime.now(dt.UTC))
    assert decision.action is restart_decisions.Action.RESTART, decision
    return decision.patch


def plain(model: Any) -> dict[str, Any]:
    """A client model as the API's JSON (camelCase), as restarter's code reads bodies."""
    return dict(kubernetes.client.ApiClient().sanitize_for_serialization(model))


def body_kind(plural: str) -> str:
    return {"deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet"}[
        plural
    ]


class RestartFlow:
    """One change of the Secret ``db`` and its dependent ``web``, step by step, with
    restarter's own patch builders and client."""

    def __init__(
        self, api: Api, kind: str, namespace: str, read: Callable[[], dict[str, Any]]
    ) -> None:
        self.api, self.kind, self.namespace, self.read = api, kind, namespace, read
        self.salt = checksums.new_salt(secrets.token_bytes(checksums.SALT_BYTES))
        self.current = ""
        self.change = ""
        self.request: windows.WindowRequest | None = None

    def source(self) -> dict[str, Any]:
        found = self.api.read_source("secret", self.namespace, "db")
        assert found is not None
        return found

    def record(self) -> str:
        """The checksum and key digests of the data now recorded on the Secret."""
        source = self.source()
        _, self.current = source_changes.classify(source)
        digests = source_changes.key_change(source, self.current, self.salt).record
        patch = source_changes.checksum_patch(self.current, digests, drop_digests=True)
        assert self.api.patch_source("secret", self.namespace, "db", patch) is not None
        return self.current

    def begin(self) -> None:
        """The change's id recorded on the Secret before its first stamp."""
        source = self.source()
        _, self.current = source_changes.classify(source)
        self.change, _ = source_changes.change_id(source["metadata"], self.current)
        self.request = windows.from_source(source["metadata"], "UTC", dt.timedelta(hours=1))
        patch = source_changes.begin_change_patch(self.change, self.current)
        assert self.api.patch_source("secret", self.namespace, "db", patch) is not None

    def send(self, patch: Any, content_type: str | None = None) -> dict[str, Any]:
        if content_type is None:
            sent = self.api.patch_workload(self.kind, self.namespace, "web", patch)
            assert sent is not None
            return sent
        method = getattr(Apps(self.api.client), f"patch_namespaced_{APPS_STEMS[self.kind]}")
        method("web", self.namespace, patch, _content_type=content_type)
        return {}

    def fresh(self, build: Callable[[dict[str, Any]], Any]) -> None:
        """A patch built from the workload's metadata as read now, sent; built and sent
        again on a conflict (the controllers write the workload's status meanwhile), as
        the operator does."""
        for _ in range(10):
            try:
                self.send(build(self.read()["metadata"]))
                return
            except Conflict:
                continue
        pytest.fail("ten conflicts in a row")

    def stamp(self, admitted: bool = False) -> None:
        """The pending marks for the change (``admitted``: with the timer's label and
        finalizer, as a stamp sent while its window is open)."""
        assert self.request is not None
        now = dt.datetime.now(dt.UTC)
        keys_read = frozenset({"password"})
        patch = stamps.stamp_patch("secret", "db", now, self.request, self.change, keys_read)
        self.send(timer_admission.admitted_stamp(patch, KINDS[self.kind]) if admitted else patch)


def test_kubectl_auth_can_i_answers_for_the_serviceaccount(
    cluster: Cluster, identity: Identity, namespace: str
) -> None:
    """The policy leaves the review APIs alone: a reviewer asks RBAC as the ServiceAccount."""
    for expected, *asked in (
        ("yes", "patch", "secrets"),
        ("yes", "patch", "deployments.apps"),
        ("yes", "create", "events"),
        ("no", "update", "secrets"),
        ("no", "create", "secrets"),
        ("no", "delete", "deployments.apps"),
        ("no", "patch", "deployments.apps", "--subresource=scale"),
    ):
        as_sa = ("-n", namespace, f"--as={identity.username}")
        out = cluster.kubectl("auth", "can-i", *asked, *as_sa, check=False)
        assert out.stdout.strip() == expected, (asked, out.stdout, out.stderr)


def test_the_policy_is_in_the_chart_on_by_default_and_a_value_turns_it_off(
    cluster: Cluster,
) -> None:
    docs = render(cluster, "dflt", SYSTEM)
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {
        d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    operator, hook = "dflt-restarter-least-privilege", "dflt-restarter-uninstall-least-privilege"
    assert set(policies) == set(bindings) == {operator, hook}
    for name, account in ((operator, "dflt-restarter"), (hook, "dflt-restarter-uninstall")):
        [user] = policies[name]["spec"]["matchConditions"]
        assert user["expression"] == (
            f"request.userInfo.username == 'system:serviceaccount:{SYSTEM}:{account}'"
        )
        assert bindings[name]["spec"]["policyName"] == name
        assert bindings[name]["spec"]["validationActions"] == ["Deny", "Audit"]
        assert "matchResources" not in bindings[name]["spec"]  # every namespace
    # Every key the operator's registry declares is in the policy the chart renders.
    text = json.dumps(policies[operator]["spec"])
    for declared in keys.WRITTEN.values():
        for key in declared:
            assert f"'{key}'" in text, key
    off = render(cluster, "off", SYSTEM, "--set", "admissionPolicy.enabled=false")
    assert not [d for d in off if d["kind"].startswith("ValidatingAdmissionPolicy")]
    typo = ("--set", "admissionPolicy.enable=false")
    unknown = subprocess.run(
        [str(binaries.locate()["helm"]), "template", "x", str(CHART), *typo],
        capture_output=True,
        text=True,
    )
    assert unknown.returncode != 0 and "schema" in unknown.stderr


def test_in_namespaced_mode_the_binding_is_scoped_as_the_roles(
    cluster: Cluster,
    core: Core,
    api_client: kubernetes.client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    outside = f"outside-{uuid.uuid4().hex[:5]}"
    core.create_namespace({"metadata": {"name": outside}})
    release = f"lpn-{uuid.uuid4().hex[:5]}"
    made = apply_identity(cluster, release, tmp_path, "--set", f"namespaces={{{namespace}}}")
    policy = policy_of(made)
    try:
        admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
        binding = admission.read_validating_admission_policy_binding(policy).to_dict()
        [expression] = binding["spec"]["match_resources"]["namespace_selector"]["match_expressions"]
        assert expression == {
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": [namespace, SYSTEM],
        }
        rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
        for where in (namespace, outside):
            core.create_namespaced_secret(where, secret("db", {"password": "a"}, "now"))
            widen(rbac, where, made.username)
        wait_for_policy(cluster, made, namespace, policy)
        as_sa = Core(client_of(made.kubeconfig))
        foreign = {"metadata": {"annotations": {"example.com/owner": "mallory"}}}
        refused_by(
            policy,
            "restarter may change only its own annotations, not example.com/owner",
            lambda: as_sa.patch_namespaced_secret("db", namespace, foreign),
        )
        # Outside the chart's namespaces neither its Roles nor its binding apply: there the
        # test's own Role alone decides.
        as_sa.patch_namespaced_secret("db", outside, foreign)
    finally:
        core.delete_namespace(outside)
        _delete_release_objects(cluster, release)


def _delete_release_objects(cluster: Cluster, release: str) -> None:
    cluster.kubectl(
        "delete",
        "validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,"
        "clusterrolebindings,roles,rolebindings,serviceaccounts,deployments",
        "-A",
        "-l",
        f"app.kubernetes.io/instance={release}",
        "--ignore-not-found",
        check=False,
    )


def test_the_uninstall_hook_may_only_scale_the_operator_to_zero_and_release_our_finalizer(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    api_client: kubernetes.client.ApiClient,
    identity: Identity,
    namespace: str,
    tmp_path: Path,
) -> None:
    # The hook's ServiceAccount and RBAC, as Helm creates them before the hook's Job.
    hook_docs = [
        doc
        for doc in render(cluster, identity.release, SYSTEM)
        if is_hook(doc) and doc["kind"] != "Job"
    ]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(hook_docs))
    account = f"{identity.release}-restarter-uninstall"
    as_hook = client_of(token_kubeconfig(cluster, SYSTEM, account, tmp_path / "hook"))
    hook_core, hook_apps = Core(as_hook), Apps(as_hook)
    widen(
        kubernetes.client.RbacAuthorizationV1Api(api_client),
        namespace,
        f"system:serviceaccount:{SYSTEM}:{account}",
    )
    operator = f"{identity.release}-restarter"
    apps.create_namespaced_deployment(SYSTEM, deployment(operator, replicas=1))
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, "now"))
    body = deployment("web", replicas=0)
    body["metadata"]["finalizers"] = [keys.FINALIZER, KEEP]
    apps.create_namespaced_deployment(namespace, body)
    policy = policy_of(identity, hook=True)
    only = "the uninstall hook may only remove restarter.io/finalizer from a workload"

    def in_force() -> bool:
        annotate = {"metadata": {"annotations": {"example.com/x": uuid.uuid4().hex}}}
        try:
            hook_apps.patch_namespaced_deployment("web", namespace, annotate)
        except ApiException as error:
            return error.status == 403 and policy in str(error.body)
        return False

    try:
        wait_for(in_force, 30, message=policy)
        refused_by(
            policy,
            "the uninstall hook may only scale the operator to 0 and release "
            "restarter.io/finalizer, not UPDATE deployments/scale",
            lambda: hook_apps.patch_namespaced_deployment_scale(
                operator, SYSTEM, {"spec": {"replicas": 2}}
            ),
        )
        drop_keep = release_patch([keys.FINALIZER, KEEP], KEEP)
        refused_by(
            policy,
            only,
            lambda: hook_apps.patch_namespaced_deployment(
                "web", namespace, drop_keep, _content_type=JSON_PATCH
            ),
        )
        refused_by(
            policy,
            "the uninstall hook may only scale the operator to 0 and release "
            "restarter.io/finalizer, not UPDATE secrets",
            lambda: hook_core.patch_namespaced_secret(
                "db", namespace, {"data": encoded({"password": "b"})}
            ),
        )
        refused_by(
            policy,
            "the uninstall hook may only scale the operator to 0 and release "
            "restarter.io/finalizer, not DELETE deployments",
            lambda: hook_apps.delete_namespaced_deployment("web", namespace),
        )
        # What `restarter release-finalizers` sends.
        hook_apps.patch_namespaced_deployment_scale(
            operator, SYSTEM, {"spec": {"replicas": 0}}, _content_type=MERGE_PATCH
        )
        ours = release_patch([keys.FINALIZER, KEEP], keys.FINALIZER)
        hook_apps.patch_namespaced_deployment("web", namespace, ours, _content_type=JSON_PATCH)
        assert apps.read_namespaced_deployment(operator, SYSTEM).spec.replicas == 0
        web = apps.read_namespaced_deployment("web", namespace)
        assert web.metadata.finalizers == [KEEP]
        assert "example.com/x" not in (web.metadata.annotations or {})
    finally:
        apps.patch_namespaced_deployment("web", namespace, {"metadata": {"finalizers": None}})
        apps.delete_namespaced_deployment(operator, SYSTEM)
        cluster.kubectl(
            "delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(hook_docs)
        )
