"""restarter's own writes on a source (the change's id, the checksum) come back on the
sources' metadata watch as new versions: those echoes ask for no check (no second read of
a 149 KiB bundle), while every other version still does, an earlier one delivered late
included. A patched source's answer is decoded for its resourceVersion alone."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from restarter.cluster.source_watching import Versions
from restarter.model import bodies
from restarter.restarting import source_context, stamping
from restarter.services import events
from restarter.services.settings import Settings
from tests.unit.test_stamping_changed_keys import NOW, OLD, readers, recorded_for, secret

KEY = ("secret", "ns", "db")


def test_the_echo_of_a_write_asks_for_no_check_and_any_other_version_does() -> None:
    versions = Versions()
    assert versions.labelled(KEY, "10")  # the user's change: checked
    versions.wrote(KEY, "12")  # restarter recorded its checksum
    assert not versions.labelled(KEY, "12")  # the echo
    assert versions.labelled(KEY, "13")  # the user's next change


def test_a_version_delivered_after_the_write_it_preceded_is_still_checked() -> None:
    versions = Versions()
    assert versions.labelled(KEY, "10")
    versions.wrote(KEY, "12")
    # A change of the user's (11) landed between the read and the write; its event comes
    # after the write's answer: checked, never taken for the echo.
    assert versions.labelled(KEY, "11")
    # The echo then reads again (one read too many, never one too few).
    assert versions.labelled(KEY, "12")


def test_a_write_on_a_source_not_followed_records_nothing() -> None:
    versions = Versions()
    versions.wrote(KEY, "12")
    assert not versions.is_labelled(KEY) and len(versions) == 0
    assert versions.update(KEY, "12")  # wanted later: its first sight is checked


def test_an_unlabelled_wanted_source_skips_its_echo_too() -> None:
    versions = Versions()
    assert versions.update(KEY, "10")
    versions.wrote(KEY, "12")
    assert not versions.update(KEY, "12")


def test_a_patched_source_is_decoded_for_its_resource_version_alone() -> None:
    answer = {
        "kind": "Secret",
        "metadata": {"name": "db", "resourceVersion": "77", "annotations": {"a": "b"}},
        "data": {"password": "aHVudGVyMg=="},
    }
    assert bodies.decode_version(json.dumps(answer).encode()) == {
        "metadata": {"resourceVersion": "77"}
    }
    assert bodies.decode_version(b'{"kind": "Status"}') == {"metadata": {}}


class VersionedApi:
    """Answers each source patch with a new resourceVersion, as the API does."""

    def __init__(self) -> None:
        self.version = 100

    def patch_source(self, kind: str, namespace: str, name: str, patch: Any) -> dict[str, Any]:
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version)}}

    def patch_workload(self, plural: str, namespace: str, name: str, patch: Any) -> Any:
        return {"metadata": {"name": name, "namespace": namespace, "annotations": {}}}


def test_the_source_flow_tells_the_watch_each_version_it_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events.Events, "post", lambda *args, **kwargs: None)
    api, told = VersionedApi(), list[tuple[tuple[str, str, str], str]]()
    context = source_context.SourceContext(
        kind="secret",
        settings=Settings(),
        api=api,  # type: ignore[arg-type]
        reference_map=readers(),
        in_sync=threading.Event(),
        checksums={},
        logger=logging.getLogger(__name__),
        events=events.Events(api),  # type: ignore[arg-type]
        wrote=lambda key, version: told.append((key, version)),
    )
    changed = secret({**OLD, "b": "Yg=="}, recorded_for(OLD))
    assert stamping.reconcile_source(context, changed, NOW)
    # The change's id, then the checksum: two writes, each echo told.
    assert told == [(KEY, "101"), (KEY, "102")]
