"""Under a namespace selector the workload streams watch every namespace: the observer
hears only of the namespaces in scope, and forgets a namespace that leaves it."""

from __future__ import annotations

from typing import Any

from restarter.cluster.workload_watching import ScopedInspector


class Recorder:
    """The observer's side: what it was told."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.forgotten: list[tuple[str, str, str]] = []
        self.listings: list[tuple[str, str | None, set[tuple[str, str]]]] = []

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        metadata = body["metadata"]
        self.seen.append((plural, metadata["namespace"], metadata["name"]))

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        self.forgotten.append((plural, namespace, name))

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        self.listings.append((plural, namespace, present))


def _body(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}}


def test_only_workloads_of_namespaces_in_scope_reach_the_observer() -> None:
    scope = {"shop"}
    inner = Recorder()
    scoped = ScopedInspector(inner, scope.__contains__)
    scoped.observe("deployments", _body("shop", "web"))
    scoped.observe("deployments", _body("other", "web"))
    scoped.deleted("deployments", "other", "web")
    assert inner.seen == [("deployments", "shop", "web")]
    assert inner.forgotten == []


def test_a_listing_is_cut_to_the_scope() -> None:
    scope = {"shop"}
    inner = Recorder()
    scoped = ScopedInspector(inner, scope.__contains__)
    scoped.listed("deployments", None, {("shop", "web"), ("other", "db")})
    assert inner.listings == [("deployments", None, {("shop", "web")})]


def test_a_namespace_that_leaves_is_forgotten_and_heard_of_no_more() -> None:
    scope = {"shop"}
    inner = Recorder()
    scoped = ScopedInspector(inner, scope.__contains__)
    scoped.observe("deployments", _body("shop", "web"))
    scoped.observe("statefulsets", _body("shop", "db"))
    scope.discard("shop")
    scoped.leave("shop")
    assert sorted(inner.forgotten) == [
        ("deployments", "shop", "web"),
        ("statefulsets", "shop", "db"),
    ]
    scoped.observe("deployments", _body("shop", "web"))
    assert inner.seen == [("deployments", "shop", "web"), ("statefulsets", "shop", "db")]


def test_a_workload_whose_namespace_left_between_events_is_forgotten_on_its_next_event() -> None:
    scope = {"shop"}
    inner = Recorder()
    scoped = ScopedInspector(inner, scope.__contains__)
    scoped.observe("deployments", _body("shop", "web"))
    scope.discard("shop")
    scoped.observe("deployments", _body("shop", "web"))
    assert inner.forgotten == [("deployments", "shop", "web")]
    scoped.leave("shop")
    assert inner.forgotten == [("deployments", "shop", "web")]
