"""What restarter writes stays within what the chart's admission policy allows.

The policy (charts/restarter/templates/admission-policy.yaml) allows exactly the keys of
``keys.WRITTEN``, read from the chart's files/written-keys.json. These tests fail when that
file strays from the registry, when a patch the code builds writes anything else, when the
source writes a restarter key into a patch the registry does not declare, and when kopf's
own writes (its finalizer, progress, diff base and markers) leave the declared names.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kopf
import pytest

import restarter
from restarter.main import kopf_settings
from restarter.model import (
    checksums,
    keys,
    kinds,
    restart_decisions,
    source_changes,
    stamps,
    timer_admission,
)
from restarter.model.finalizers import release_patch
from restarter.model.windows import WindowRequest
from restarter.services import settings as settings_module

REPO = Path(__file__).resolve().parents[2]
WRITTEN_FILE = REPO / "charts" / "restarter" / "files" / "written-keys.json"
SOURCE_DIR = Path(restarter.__file__).parent
NOW = dt.datetime(2026, 12, 6, 3, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
OTHER_FINALIZER = "example.com/keep"


def allowed() -> dict[str, list[str]]:
    """What the chart's policy allows, as the chart reads it."""
    return dict(json.loads(WRITTEN_FILE.read_text()))


def test_the_charts_keys_are_generated_from_the_registry() -> None:
    generated = {name: list(values) for name, values in keys.WRITTEN.items()}
    assert allowed() == generated, (
        "charts/restarter/files/written-keys.json is stale: run "
        "`.venv/bin/python -m restarter.model.keys > charts/restarter/files/written-keys.json`"
    )


def test_no_kopf_state_may_be_written_on_a_source() -> None:
    """kopf's diff base on a Secret would copy its data into an annotation."""
    assert not [key for key in allowed()["sourceAnnotations"] if key.startswith(keys.KOPF_PREFIX)]


# --- The patches the code builds -------------------------------------------------------


def source_allowed(key: str) -> bool:
    return key in allowed()["sourceAnnotations"]


def workload_annotation_allowed(key: str) -> bool:
    written = allowed()
    prefixes = tuple(written["workloadAnnotationPrefixes"])
    return key in written["workloadAnnotations"] or key.startswith(prefixes)


def check_source_patch(patch: Mapping[str, Any]) -> None:
    assert set(patch) == {"metadata"}, patch
    assert set(patch["metadata"]) == {"annotations"}, patch
    for key in patch["metadata"]["annotations"]:
        assert source_allowed(key), key


def check_workload_patch(patch: Mapping[str, Any], body: Mapping[str, Any]) -> None:
    """A merge or strategic merge patch of a workload: only restarter's marks."""
    written = allowed()
    assert set(patch) <= {"metadata", "spec"}, patch
    metadata = patch.get("metadata") or {}
    assert set(metadata) <= {
        "resourceVersion",
        "annotations",
        "labels",
        "finalizers",
        "$deleteFromPrimitiveList/finalizers",
    }, metadata
    for key in metadata.get("annotations") or {}:
        assert workload_annotation_allowed(key), key
    for key in metadata.get("labels") or {}:
        assert key in written["workloadLabels"], key
    for name in metadata.get("$deleteFromPrimitiveList/finalizers") or []:
        assert name in written["workloadFinalizers"], name
    if "finalizers" in metadata:
        # Strategic merge adds to the list; a Rollout's JSON merge patch sends it whole.
        sent = [
            name for name in metadata["finalizers"] if name not in written["workloadFinalizers"]
        ]
        kept = [
            name
            for name in body["metadata"].get("finalizers") or []
            if name not in written["workloadFinalizers"]
        ]
        assert sent in ([], kept), (sent, kept)
    spec = patch.get("spec")
    if spec is None:
        return
    if kinds.of_body(body).restart is kinds.Restart.RESTART_AT:
        assert set(spec) <= set(written["rolloutSpecFields"]), spec
        return
    assert set(spec) == {"template"} and set(spec["template"]) == {"metadata"}, spec
    assert set(spec["template"]["metadata"]) == {"annotations"}, spec
    assert set(spec["template"]["metadata"]["annotations"]) <= set(
        written["podTemplateAnnotations"]
    ), spec


def workload(kind: str, annotations: dict[str, str], pending: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1" if kind == "Rollout" else "apps/v1",
        "kind": kind,
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "resourceVersion": "42",
            "annotations": {"example.com/owner": "team", **annotations},
            "labels": {"app": "web", **({keys.PENDING_LABEL: "true"} if pending else {})},
            "finalizers": [OTHER_FINALIZER, keys.FINALIZER],
        },
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}},
    }
    return body


REQUEST = WindowRequest("03.00", "UTC", HOUR)


def marks(change: str = "7") -> dict[str, str]:
    stamped = stamps.stamp_patch("secret", "db", NOW - HOUR, REQUEST, change, frozenset({"a"}))
    return dict(stamped["metadata"]["annotations"])


def workload_patches(kind: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(what, patch, body) for every workload patch restarter's code builds."""
    restarted = kinds.of_body({"kind": kind})
    stamped = workload(kind, marks(), pending=False)
    yield "stamp", stamps.stamp_patch("secret", "db", NOW, REQUEST, "7", None), stamped
    long_name = "x" * 253
    yield (
        "stamp of a long name",
        stamps.stamp_patch("configmap", long_name, NOW, REQUEST, "7", frozenset({"k"})),
        stamped,
    )
    yield "admit", timer_admission.admit_patch(stamped["metadata"], restarted), stamped
    admitted = workload(kind, marks())
    yield "hand back", timer_admission.hand_back_patch(admitted["metadata"], restarted), admitted
    annotations = admitted["metadata"]["annotations"]
    yield (
        "clear",
        restart_decisions.clear_patch(annotations, admitted["metadata"], restarted),
        admitted,
    )
    defaults = settings_module.Settings(timezone="UTC", window_length=HOUR)
    decision = restart_decisions.decide_restart(admitted, defaults, NOW + dt.timedelta(minutes=5))
    assert decision.action is restart_decisions.Action.RESTART, decision
    yield "restart", decision.patch, admitted
    recorded = {**marks(), keys.RESTARTED_FOR: json.dumps({"secret.db": "7"})}
    satisfied = workload(kind, recorded)
    decision = restart_decisions.decide_restart(satisfied, defaults, NOW)
    assert decision.action is restart_decisions.Action.SATISFIED, decision
    yield "satisfied", decision.patch, satisfied
    opted_out = workload(kind, {**marks(), keys.IGNORE: "true"})
    decision = restart_decisions.decide_restart(opted_out, defaults, NOW)
    assert decision.action is restart_decisions.Action.OPTED_OUT, decision
    yield "opted out", decision.patch, opted_out
    unmarked = workload(kind, {})
    repair = timer_admission.label_repair(unmarked["metadata"])
    assert repair is not None
    yield "label repair", repair, unmarked
    # The namespace scope gives a pending workload its finalizer back (scoping.py).
    yield "held again", {"metadata": {"finalizers": [keys.FINALIZER]}}, stamped


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "Rollout"])
def test_every_workload_patch_writes_only_declared_keys(kind: str) -> None:
    seen = []
    for what, patch, body in workload_patches(kind):
        seen.append(what)
        check_workload_patch(patch, body)
    assert len(seen) == 10


def test_every_source_patch_writes_only_declared_keys() -> None:
    source = {
        "metadata": {"name": "db", "annotations": {"example.com/owner": "team"}},
        "data": {"password": "aHVudGVyMg=="},
    }
    _, current = source_changes.classify(source)
    change = source_changes.key_change(source, current, checksums.new_salt(bytes(16)))
    check_source_patch(source_changes.begin_change_patch("7", current))
    check_source_patch(source_changes.checksum_patch(current, change.record))
    check_source_patch(source_changes.checksum_patch(current, None, drop_digests=True))


def test_the_finalizer_release_removes_only_ours() -> None:
    """restarter release-finalizers (and the operator's shutdown): a JSON patch."""
    ops = release_patch([OTHER_FINALIZER, keys.FINALIZER], keys.FINALIZER)
    assert ops is not None
    assert {op["path"] for op in ops} == {"/metadata/finalizers"}
    assert ops[-1]["value"] == [OTHER_FINALIZER]


# --- Every key the source writes -------------------------------------------------------


def _written_keys() -> Iterator[tuple[str, int, str]]:
    """(file, line, name) of every ``keys.NAME`` (or ``keys.pending_key(...)``-style call)
    the source puts into a dict's keys, a list, or as a subscript it assigns: the shapes a
    patch is built in. kopf's filters (``{KEY: kopf.PRESENT}``) only read."""
    for path in sorted(SOURCE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                found = [
                    k
                    for k, v in zip(node.keys, node.values, strict=True)
                    if k is not None and not _is_kopf_marker(v)
                ]
            elif isinstance(node, ast.List):
                found = list(node.elts)
            elif isinstance(node, ast.Assign):
                found = [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
            else:
                continue
            for item in found:
                name = _keys_name(item)
                if name is not None:
                    yield str(path.relative_to(SOURCE_DIR)), item.lineno, name


def _keys_name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "keys"
    ):
        return target.attr
    return None


def _is_kopf_marker(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "kopf"
        and node.attr in ("PRESENT", "ABSENT")
    )


#: The registry's functions and constants that name written keys, by what they give.
KEY_FUNCTIONS = {
    "pending_key": keys.pending_key("secret", "db"),
    "window_key": keys.window_key("secret", "db"),
}


def test_every_restarter_key_the_source_writes_is_declared() -> None:
    written = allowed()
    declared = {key for values in written.values() for key in values}
    prefixes = tuple(written["workloadAnnotationPrefixes"])
    found = list(_written_keys())
    assert found, "the scan finds the patch builders' keys"
    for path, line, name in found:
        value = KEY_FUNCTIONS.get(name, getattr(keys, name))
        assert isinstance(value, str), (path, line, name)
        assert value in declared or value.startswith(prefixes), (
            f"{path}:{line} writes keys.{name} ({value!r}), which the chart's admission "
            "policy refuses: declare it in keys.WRITTEN"
        )


# --- kopf's own writes -------------------------------------------------------------------


def test_kopfs_writes_stay_under_the_declared_names() -> None:
    persistence = kopf_settings(settings_module.build(["--namespace", "shop"])).persistence
    assert persistence.finalizer in allowed()["workloadFinalizers"]
    body = kopf.Body(workload("Deployment", marks()))
    patch = kopf.Patch()
    persistence.progress_storage.touch(body=body, patch=patch, value="x")
    record = {"started": "2026-12-06T03:00:00", "retries": 1}
    persistence.progress_storage.store(
        key=kopf.HandlerId("pending_restart_deployments"), record=record, body=body, patch=patch
    )
    essence = persistence.diffbase_storage.build(body=body)
    persistence.diffbase_storage.store(body=body, patch=patch, essence=essence)
    written = dict(patch)["metadata"]["annotations"]
    assert len(written) == 3  # touch, marker, progress; no diff base is kept
    for key in written:
        assert workload_annotation_allowed(key), key


def test_kopf_runs_standalone_so_it_writes_no_peering_objects() -> None:
    """kopf's peering would create and patch KopfPeering objects; restarter elects its
    acting replica through its own Lease instead."""
    tree = ast.parse((SOURCE_DIR / "main.py").read_text())
    [run] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "kopf"
    ]
    standalone = {kw.arg: kw.value for kw in run.keywords}["standalone"]
    assert isinstance(standalone, ast.Constant) and standalone.value is True
