"""The reference map: an event or a listing in, the map's change out."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from restarter.cluster.reference_map import ReferenceMap, references_of
from restarter.model import keys
from restarter.model.references import CONFIGMAP, SECRET, Reference
from tests.unit.test_references_keys import affected

DB = Reference(SECRET, "db")
API = Reference(SECRET, "api")
FLAGS = Reference(CONFIGMAP, "flags")


def body(secrets: list[str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    env = [{"name": s, "valueFrom": {"secretKeyRef": {"name": s, "key": "k"}}} for s in secrets]
    return {
        "metadata": {"name": "web", "namespace": "ns", "annotations": annotations or {}},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": env}]}}},
    }


def test_references_of_a_body_reads_its_pod_template_and_its_declarations() -> None:
    declared = {keys.DEPENDS_ON_CONFIGMAPS: "flags"}
    assert references_of(body(["db"], declared)) == {Reference(SECRET, "db", frozenset("k")), FLAGS}


def test_references_of_an_opted_out_workload_are_none() -> None:
    assert references_of(body(["db"], {keys.IGNORE: "true"})) == frozenset()


def test_an_added_workload_becomes_a_dependent_of_each_source_it_uses() -> None:
    refs = ReferenceMap()
    change = refs.apply("ADDED", "deployments", "ns", "web", frozenset({DB, FLAGS}))
    assert change.gained == {("deployments", "ns", "web"): {DB, FLAGS}}
    assert refs.dependents("ns", SECRET, "db") == [("deployments", "web")]
    assert refs.dependents("ns", CONFIGMAP, "flags") == [("deployments", "web")]
    assert refs.dependents("other", SECRET, "db") == []


def test_a_workload_that_stops_using_a_secret_is_no_longer_its_dependent() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "deployments", "ns", "web", frozenset({DB, API}))
    change = refs.apply("MODIFIED", "deployments", "ns", "web", frozenset({API}))
    assert change.lost == {("deployments", "ns", "web"): {DB}}
    assert not change.gained
    assert refs.dependents("ns", SECRET, "db") == []
    assert refs.dependents("ns", SECRET, "api") == [("deployments", "web")]


def test_a_modification_that_keeps_the_references_changes_nothing() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "deployments", "ns", "web", frozenset({DB}))
    assert not refs.apply("MODIFIED", "deployments", "ns", "web", frozenset({DB}))


def test_a_deleted_workload_is_forgotten_whatever_its_last_body_said() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "statefulsets", "ns", "store", frozenset({DB}))
    change = refs.apply("DELETED", "statefulsets", "ns", "store", frozenset({DB}))
    assert change.lost == {("statefulsets", "ns", "store"): {DB}}
    assert refs.dependents("ns", SECRET, "db") == []
    assert len(refs) == 0


def test_kinds_with_the_same_name_are_separate_dependents() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "deployments", "ns", "web", frozenset({DB}))
    refs.apply("ADDED", "daemonsets", "ns", "web", frozenset({DB}))
    refs.apply("DELETED", "deployments", "ns", "web", frozenset())
    assert refs.dependents("ns", SECRET, "db") == [("daemonsets", "web")]


def test_a_relisting_drops_workloads_deleted_unseen_and_keeps_other_kinds_and_scopes() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "deployments", "ns", "gone", frozenset({DB}))
    refs.apply("ADDED", "deployments", "ns", "kept", frozenset({DB}))
    refs.apply("ADDED", "deployments", "elsewhere", "web", frozenset({DB}))
    refs.apply("ADDED", "statefulsets", "ns", "store", frozenset({DB}))
    change = refs.replace("deployments", "ns", {("ns", "kept"): frozenset({DB, API})})
    assert change.lost == {("deployments", "ns", "gone"): {DB}}
    assert change.gained == {("deployments", "ns", "kept"): {API}}
    assert refs.dependents("ns", SECRET, "db") == [
        ("deployments", "kept"),
        ("statefulsets", "store"),
    ]
    assert refs.dependents("elsewhere", SECRET, "db") == [("deployments", "web")]


def test_a_cluster_wide_relisting_replaces_every_namespace_of_its_kind() -> None:
    refs = ReferenceMap()
    refs.apply("ADDED", "deployments", "a", "web", frozenset({DB}))
    refs.apply("ADDED", "deployments", "b", "web", frozenset({DB}))
    refs.replace("deployments", None, {("b", "web"): frozenset({DB})})
    assert refs.dependents("a", SECRET, "db") == []
    assert refs.dependents("b", SECRET, "db") == [("deployments", "web")]


def test_the_same_relisting_twice_changes_nothing_the_second_time() -> None:
    refs = ReferenceMap()
    listed = {("ns", "web"): frozenset({DB})}
    assert refs.replace("deployments", "ns", listed)
    assert not refs.replace("deployments", "ns", listed)


names = st.sampled_from(["a", "b", "c", "d"])
key_names = st.none() | st.frozensets(st.sampled_from(["x", "y", "z"]))
# One reference per source, as workload_references gives.
ref_sets = st.dictionaries(st.tuples(st.sampled_from([SECRET, CONFIGMAP]), names), key_names).map(
    lambda reads: frozenset(Reference(kind, name, keys) for (kind, name), keys in reads.items())
)
events = st.lists(
    st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), names, ref_sets), max_size=30
)


@given(events, key_names)
def test_after_any_events_the_map_equals_one_built_from_the_last_state_of_each(
    sequence: list[tuple[str, str, frozenset[Reference]]], changed: frozenset[str] | None
) -> None:
    refs = ReferenceMap()
    last: dict[str, frozenset[Reference]] = {}
    for kind, name, found in sequence:
        refs.apply(kind, "deployments", "ns", name, found)
        last[name] = frozenset() if kind == "DELETED" else found
    for kind in (SECRET, CONFIGMAP):
        for source in "abcd":
            reads = {
                n: ref.keys
                for n, r in last.items()
                for ref in r
                if (ref.kind, ref.name) == (kind, source)
            }
            assert refs.dependents("ns", kind, source) == sorted(("deployments", n) for n in reads)
            # The affected: readers of every key, or of a changed one (all, when unknown).
            assert affected(refs, "ns", kind, source, changed) == sorted(
                (
                    "deployments",
                    n,
                    None if changed is None else changed if k is None else k & changed,
                )
                for n, k in reads.items()
                if changed is None or (changed if k is None else k & changed)
            )
    # A listing of the same final state is a no-op: a resync invents nothing.
    assert not refs.replace("deployments", "ns", {("ns", n): r for n, r in last.items() if r})
