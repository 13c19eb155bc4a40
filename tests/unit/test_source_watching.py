"""What the metadata watch of Secrets hands on to be read: labelled sources and wanted
unlabelled ones, each once per resourceVersion, each to its own queue; a labelled source is
not handed on again when a workload opts in for it (its next version is)."""

from __future__ import annotations

import threading
from typing import Any

from restarter.cluster.reference_map import ReferenceMap, uses_of
from restarter.cluster.source_watching import SourceStream, SourceWatcher, Versions
from restarter.model import keys


def workload(annotations: dict[str, str], secret: str = "s") -> dict[str, Any]:
    container = {"name": "app", "envFrom": [{"secretRef": {"name": secret}}]}
    return {
        "metadata": {"namespace": "ns", "name": "web", "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def secret(name: str, version: str, labelled: bool = False) -> dict[str, Any]:
    labels = {keys.RESTART_AT_LABEL: "03.00"} if labelled else {}
    return {"namespace": "ns", "name": name, "resourceVersion": version, "labels": labels}


class Recorder:
    def __init__(self) -> None:
        self.checked: list[tuple[str, str, str]] = []

    def __call__(self, kind: str, namespace: str, name: str) -> None:
        self.checked.append((kind, namespace, name))


def setup() -> tuple[ReferenceMap, SourceWatcher, SourceStream, Recorder, Recorder]:
    reference_map, checks, labelled = ReferenceMap(), Recorder(), Recorder()
    watcher = SourceWatcher(None, reference_map, ("ns",), checks, labelled)  # type: ignore[arg-type]
    stream = next(s for s in watcher.streams if s.kind == "secret")
    return reference_map, watcher, stream, checks, labelled


def opt_in_web(reference_map: ReferenceMap, secret_name: str = "s") -> None:
    refs, optin = uses_of(workload({keys.WORKLOAD_RESTART_AT: "03.00"}, secret_name))
    reference_map.apply("ADDED", "deployments", "ns", "web", refs, optin)


def test_unwanted_sources_are_neither_read_nor_kept() -> None:
    _, watcher, stream, checks, _ = setup()
    stream.take_event("MODIFIED", {"metadata": secret("s", "1")})
    assert checks.checked == [] and len(watcher.versions) == 0


def test_a_wanted_unlabelled_source_is_read_once_per_version() -> None:
    reference_map, _, stream, checks, _ = setup()
    opt_in_web(reference_map)
    assert checks.checked == [("secret", "ns", "s")]  # checked when it became wanted
    stream.take_event("MODIFIED", {"metadata": secret("s", "7")})
    stream.take_event("MODIFIED", {"metadata": secret("s", "7")})
    stream.take_event("MODIFIED", {"metadata": secret("s", "8")})
    assert checks.checked == [("secret", "ns", "s")] * 3


def test_a_labelled_source_is_read_once_per_version_in_its_own_queue() -> None:
    reference_map, watcher, stream, checks, labelled = setup()
    stream.take({"metadata": secret("s", "1", labelled=True)}, {})
    opt_in_web(reference_map)  # no read of its own: the label's queue has it
    stream.take_event("MODIFIED", {"metadata": secret("s", "1", labelled=True)})
    stream.take_event("MODIFIED", {"metadata": secret("s", "2", labelled=True)})
    assert checks.checked == []
    assert labelled.checked == [("secret", "ns", "s")] * 2
    assert len(watcher.versions) == 0 and watcher.versions.labelled_count() == 1


def test_a_listing_again_reads_no_labelled_source_whose_version_it_saw() -> None:
    _, _, stream, _, labelled = setup()
    stream.take({"metadata": secret("s", "1", labelled=True)}, {})
    stream.take({"metadata": secret("s", "1", labelled=True)}, {})
    assert labelled.checked == [("secret", "ns", "s")]


def test_a_source_that_loses_its_label_is_followed_from_then_on() -> None:
    reference_map, watcher, stream, checks, _ = setup()
    stream.take({"metadata": secret("s", "1", labelled=True)}, {})
    opt_in_web(reference_map)
    stream.take_event("MODIFIED", {"metadata": secret("s", "2")})
    assert checks.checked == [("secret", "ns", "s")]
    assert not watcher.versions.is_labelled(("secret", "ns", "s"))


def test_a_deleted_source_is_forgotten() -> None:
    versions = Versions()
    versions.labelled(("secret", "ns", "a"), "2")
    versions.update(("secret", "ns", "b"), "3")
    stream = SourceStream(
        None,  # type: ignore[arg-type]
        ReferenceMap(),
        "secret",
        "ns",
        versions,
        Recorder(),
        threading.Event(),
        lambda: None,
    )
    stream.take_event("DELETED", {"metadata": secret("a", "4")})
    stream.take_event("DELETED", {"metadata": secret("b", "4")})
    assert not versions.is_labelled(("secret", "ns", "a")) and len(versions) == 0
    assert versions.labelled_count() == 0
