"""The source flow with key-level dependencies: a change stamps only the readers of a changed
key, names the keys (never values), and a checksum recorded alone (its digests had no room,
or were refused) gets its digests once the data still matches it, stamping nothing.

``reconcile_source`` runs against a recording API; Events are recorded where kopf would
queue them (the source's) or the API would post them (each stamped workload's).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from typing import Any

import pytest

from restarter.cluster.reference_map import ReferenceMap, references_of
from restarter.model import keys, pending, reasons, source_changes, windows
from restarter.model.checksums import checksum, key_digests, new_salt, read_key_digests
from restarter.restarting import source_context, stamping
from restarter.services import events
from restarter.services.settings import Settings

NOW = dt.datetime(2025, 1, 1, 10, 0, tzinfo=dt.UTC)
SALT = new_salt(b"\x07" * 16)
OLD = {"a": "MQ==", "b": "Mg==", "c": "Mw=="}


class RecordingApi:
    """Every patch sent, in order; a workload patch answers the patched workload."""

    def __init__(self) -> None:
        self.source_patches: list[dict[str, Any]] = []
        self.stamped: dict[str, dict[str, Any]] = {}

    def patch_source(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.source_patches.append(patch)

    def patch_workload(
        self, plural: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self.stamped[name] = patch
        return {"metadata": {"name": name, "namespace": namespace, "annotations": {}}}

    def recorded(self) -> dict[str, Any]:
        """The annotations the last source patch recorded."""
        annotations: dict[str, Any] = self.source_patches[-1]["metadata"]["annotations"]
        return annotations


@pytest.fixture(autouse=True)
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []

    def event(obj: Any, *, type: str, reason: str, message: str) -> None:
        found.append((obj["metadata"]["name"], reason, message))

    def post(
        self: Any,
        obj: Any,
        *,
        reason: reasons.Reason,
        message: str,
        on_failure: events.OnFailure = events.LOG,
    ) -> None:
        event(obj, type=reason.type, reason=reason.name, message=message)

    # The one Event path: the source's Events and the stamping threads' alike.
    monkeypatch.setattr(events.Events, "post", post)
    return found


def readers() -> ReferenceMap:
    """Four Deployments of Secret db: keyRef a, volume items b, envFrom, whole volume."""
    key_ref = {"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "key": "a"}}}
    items = [{"key": "b", "path": "b"}]
    specs = {
        "key-ref-a": ({"env": [key_ref]}, []),
        "items-b": ({}, [{"name": "v", "secret": {"secretName": "db", "items": items}}]),
        "env-from": ({"envFrom": [{"secretRef": {"name": "db"}}]}, []),
        "volume": ({}, [{"name": "v", "secret": {"secretName": "db"}}]),
    }
    reference_map = ReferenceMap()
    for name, (container, volumes) in specs.items():
        pod_spec = {"containers": [{"name": "app", **container}], "volumes": volumes}
        body = {"metadata": {"name": name}, "spec": {"template": {"spec": pod_spec}}}
        reference_map.apply("ADDED", "deployments", "ns", name, references_of(body))
    return reference_map


def secret(data: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    metadata = {
        "name": "db",
        "namespace": "ns",
        "resourceVersion": "812",
        "labels": {keys.RESTART_AT_LABEL: "03.00"},
        "annotations": annotations,
    }
    return {"metadata": metadata, "data": data}


def recorded_for(data: dict[str, str]) -> dict[str, str]:
    """What restarter records on a source of ``data``: the checksum and the digests."""
    whole = checksum(data)
    return {
        keys.CHECKSUM: whole,
        keys.KEY_DIGESTS: key_digests(data, None, SALT, whole).to_annotation(),
    }


def reconcile(
    source: dict[str, Any], api: RecordingApi, reference_map: ReferenceMap | None = None
) -> bool:
    context = source_context.SourceContext(
        kind="secret",
        settings=Settings(),
        api=api,  # type: ignore[arg-type]
        reference_map=reference_map or readers(),
        in_sync=threading.Event(),
        checksums={},
        logger=logging.getLogger(__name__),
        events=events.Events(api),  # type: ignore[arg-type]
    )
    return stamping.reconcile_source(context, source, NOW)


def mark_keys(patch: dict[str, Any]) -> Any:
    mark = patch["metadata"]["annotations"][keys.window_key("secret", "db")]
    return json.loads(mark).get("keys")


@pytest.mark.parametrize(
    ("new", "stamped", "named"),
    [
        pytest.param({**OLD, "b": "Yg=="}, {"items-b": ["b"], "env-from": ["b"], "volume": ["b"]},
                     "key b", id="b-modified"),
        pytest.param({**OLD, "d": "NA=="}, {"env-from": ["d"], "volume": ["d"]}, "key d",
                     id="d-added"),
        pytest.param({"a": "MQ==", "b": "Mg=="}, {"env-from": ["c"], "volume": ["c"]}, "key c",
                     id="c-removed"),
        pytest.param({**OLD, "a": "eA==", "b": "eQ=="},
                     {"key-ref-a": ["a"], "items-b": ["b"], "env-from": ["a", "b"],
                      "volume": ["a", "b"]}, "keys a, b", id="a-and-b-modified"),
    ],
)  # fmt: skip
def test_a_change_stamps_only_the_readers_of_a_changed_key_and_names_it(
    new: dict[str, str],
    stamped: dict[str, list[str]],
    named: str,
    posted: list[tuple[str, str, str]],
) -> None:
    api = RecordingApi()
    assert reconcile(secret(new, recorded_for(OLD)), api)
    assert {name: mark_keys(patch) for name, patch in api.stamped.items()} == stamped
    # The change began, then the checksum and new digests were recorded under the same salt.
    assert keys.CHANGE in api.source_patches[0]["metadata"]["annotations"]
    digests = read_key_digests(api.recorded()[keys.KEY_DIGESTS])
    assert digests == key_digests(new, None, SALT)
    [change] = [message for name, reason, message in posted if reason == "ChangeDetected"]
    assert f"data changed ({named})" in change
    scheduled = {name: message for name, reason, message in posted if reason == "RestartScheduled"}
    assert set(scheduled) == set(stamped)
    assert all("Secret db changed (key" in message for message in scheduled.values())
    # Names only: no value, old or new, in any Event.
    for _, _, message in posted:
        assert not any(value in message for value in [*OLD.values(), *new.values()])


def test_a_change_of_a_key_nobody_reads_stamps_nothing_and_records_it() -> None:
    api = RecordingApi()
    reference_map = readers()
    for name in ("env-from", "volume"):  # left: the readers of a and of b
        reference_map.apply("DELETED", "deployments", "ns", name, frozenset())
    assert reconcile(secret({**OLD, "c": "eg=="}, recorded_for(OLD)), api, reference_map)
    assert api.stamped == {}
    [record] = api.source_patches  # no change begun: nothing to resume
    assert record["metadata"]["annotations"][keys.CHECKSUM] == checksum({**OLD, "c": "eg=="})


def test_a_matching_checksum_recorded_alone_gets_its_digests_and_stamps_nothing(
    posted: list[tuple[str, str, str]],
) -> None:
    api = RecordingApi()
    source = secret(OLD, {keys.CHECKSUM: checksum(OLD)})
    assert source_changes.classify(source)[0] is source_changes.Change.UNCHANGED
    assert reconcile(source, api)
    assert api.stamped == {}
    [record] = api.source_patches
    digests = read_key_digests(record["metadata"]["annotations"][keys.KEY_DIGESTS])
    assert digests is not None and digests.checksum == checksum(OLD)
    assert set(digests.digests) == set(OLD)
    assert not [reason for _, reason, _ in posted if reason != "ChangeDetected"]
    # Recorded: the next event is already seen.
    recorded = secret(OLD, record["metadata"]["annotations"])
    assert source_changes.key_digests_current(recorded, checksum(OLD))


def test_a_change_after_a_checksum_recorded_alone_stamps_every_dependent() -> None:
    api = RecordingApi()
    assert reconcile(secret({**OLD, "b": "Yg=="}, {keys.CHECKSUM: checksum(OLD)}), api)
    assert set(api.stamped) == {"key-ref-a", "items-b", "env-from", "volume"}
    assert all(mark_keys(patch) is None for patch in api.stamped.values())  # unknown


def test_digests_recorded_for_other_data_than_the_checksum_are_not_trusted() -> None:
    """The checksum recorded alone over the digests of older data (the new ones refused)."""
    api = RecordingApi()
    stale = {**recorded_for({"a": "MQ=="}), keys.CHECKSUM: checksum(OLD)}
    assert reconcile(secret({**OLD, "b": "Yg=="}, stale), api)
    assert set(api.stamped) == {"key-ref-a", "items-b", "env-from", "volume"}


def test_a_resumed_fan_out_names_the_same_keys_under_the_same_change_id() -> None:
    first, again = RecordingApi(), RecordingApi()
    new = {**OLD, "b": "Yg=="}
    reconcile(secret(new, recorded_for(OLD)), first)
    begun = first.source_patches[0]["metadata"]["annotations"]
    # Crashed before the record: the source carries the change annotation, old digests.
    reconcile(secret(new, {**recorded_for(OLD), **begun}), again)
    assert again.stamped == first.stamped
    assert len(again.source_patches) == 1  # the id was kept: only the record


def test_a_mark_names_at_most_mark_keys_changed_keys() -> None:
    request = windows.WindowRequest("03.00", "UTC", dt.timedelta(hours=1))
    many = [f"k{i:02}" for i in range(windows.MARK_KEYS + 5)]
    mark = request.to_mark("Secret/db", "812", many)
    assert pending.parse_mark("secret.db", None, mark).named_keys == (
        tuple(many[: windows.MARK_KEYS]),
        5,
    )
    unnamed = pending.parse_mark("secret.db", None, request.to_mark("Secret/db", "812"))
    assert unnamed.named_keys is None
