"""Large sources: what restarter records stays small, precision degrades in steps (per key,
per bucket, the checksum only) with a Warning where it is lost, and a refused patch of a
source is a Warning Event and a metric, never only a log line, and never a loop.

``reconcile_source`` runs against an API that records (or refuses) patches; Events are
recorded where kopf would queue them.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from restarter.cluster.reference_map import ReferenceMap, references_of
from restarter.model import keys, source_changes
from restarter.model.checksums import (
    BUCKETS,
    BucketDigests,
    KeyDigests,
    bucket_of,
    checksum,
    new_salt,
    read_key_digests,
)
from restarter.restarting import fanning_out, source_context, stamping
from restarter.services import events
from restarter.services.kube import errors
from restarter.services.kube.errors import ApiError
from restarter.services.settings import Settings
from tests.unit.test_stamping_changed_keys import RecordingApi

NOW = dt.datetime(2025, 1, 1, 10, 0, tzinfo=dt.UTC)
SALT = new_salt(b"\x07" * 16)
#: 1 000 keys: their digests per key take about 35 KB, so they are kept per bucket.
BIG = {f"key-{i:04}": "MQ==" for i in range(1000)}

Refuse = Callable[[dict[str, Any]], ApiError | None]


def refusal(status: int, message: str) -> ApiError:
    body = json.dumps({"kind": "Status", "message": message, "code": status})
    return errors.from_answer(status, "Unprocessable Entity", body)


class SourceApi(RecordingApi):
    """Records every source patch (or refuses those ``refuse`` says), and stamps."""

    def __init__(self, refuse: Refuse | None = None) -> None:
        super().__init__()
        self.refuse = refuse
        self.refused: list[dict[str, Any]] = []

    def patch_source(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        error = self.refuse(patch) if self.refuse else None
        if error is not None:
            self.refused.append(patch)
            raise error
        super().patch_source(kind, namespace, name, patch)

    def create_event(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        pass  # the stamped workloads' Events: not what these tests look at


@pytest.fixture(autouse=True)
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str, str]]:
    found: list[tuple[str, str, str, str]] = []

    def event(obj: Any, *, type: str, reason: str, message: str) -> None:
        found.append((obj["metadata"]["name"], type, reason, message))

    monkeypatch.setattr(
        events.Events,
        "post",
        lambda self, obj, *, reason, message, on_failure=events.LOG: event(
            obj, type=reason.type, reason=reason.name, message=message
        ),
    )
    return found


def warnings(posted: list[tuple[str, str, str, str]]) -> dict[str, str]:
    return {reason: message for name, kind, reason, message in posted if kind == "Warning"}


def readers(*reads: tuple[str, str | None]) -> ReferenceMap:
    """Deployments of Secret big: (name, the one key it reads, or None: envFrom)."""
    reference_map = ReferenceMap()
    for name, key in reads:
        if key is None:
            container: dict[str, Any] = {"envFrom": [{"secretRef": {"name": "big"}}]}
        else:
            ref = {"secretKeyRef": {"name": "big", "key": key}}
            container = {"env": [{"name": "V", "valueFrom": ref}]}
        pod_spec = {"containers": [{"name": "app", **container}]}
        body = {"metadata": {"name": name}, "spec": {"template": {"spec": pod_spec}}}
        reference_map.apply("ADDED", "deployments", "ns", name, references_of(body))
    return reference_map


def source(data: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata = {
        "name": "big",
        "namespace": "ns",
        "resourceVersion": "812",
        "labels": {keys.RESTART_AT_LABEL: "03.00"},
        "annotations": annotations or {},
    }
    return {"metadata": metadata, "data": data}


def recorded_for(data: dict[str, str]) -> dict[str, str]:
    """What restarter records on a source of ``data`` (the digests in the form that fits)."""
    whole = checksum(data)
    digests = source_changes.key_change(source(data), whole, SALT).record
    assert digests is not None
    return {keys.CHECKSUM: whole, keys.KEY_DIGESTS: digests.to_annotation()}


def reconcile(
    body: dict[str, Any],
    api: SourceApi,
    reference_map: ReferenceMap | None = None,
    seen: dict[tuple[str, str, str], str] | None = None,
) -> bool:
    context = source_context.SourceContext(
        kind="secret",
        settings=Settings(),
        api=api,  # type: ignore[arg-type]
        reference_map=reference_map or readers(),
        in_sync=threading.Event(),
        checksums={} if seen is None else seen,
        logger=logging.getLogger(__name__),
        events=events.Events(api),  # type: ignore[arg-type]
    )
    return stamping.reconcile_source(context, body, NOW)


def patch_errors(status: str) -> float:
    labels = {"kind": "Secret", "status": status}
    return REGISTRY.get_sample_value("restarter_source_patch_errors_total", labels) or 0.0


def other_bucket_key(changed: str) -> str:
    return next(k for k in BIG if bucket_of(SALT, k, BUCKETS) != bucket_of(SALT, changed, BUCKETS))


# --- what is recorded -----------------------------------------------------------------------


def test_first_sight_of_many_keys_records_digests_per_bucket_in_a_few_kib() -> None:
    api = SourceApi()
    assert reconcile(source(BIG), api)
    recorded = api.recorded()
    digests = read_key_digests(recorded[keys.KEY_DIGESTS])
    assert isinstance(digests, BucketDigests) and digests.checksum == checksum(BIG)
    written = {key: value for key, value in recorded.items() if value is not None}
    assert source_changes.annotation_bytes(written) < 3 * 1024
    assert source_changes.key_digests_current(source(BIG, written), checksum(BIG))


def test_a_few_keys_keep_their_digests_per_key() -> None:
    api = SourceApi()
    assert reconcile(source({"a": "MQ==", "b": "Mg=="}), api)
    assert isinstance(read_key_digests(api.recorded()[keys.KEY_DIGESTS]), KeyDigests)


# --- what a change names and stamps ---------------------------------------------------------


def test_a_change_by_bucket_stamps_the_readers_of_its_bucket_only_and_says_possibly(
    posted: list[tuple[str, str, str, str]],
) -> None:
    changed = "key-0007"
    unrelated = other_bucket_key(changed)
    api = SourceApi()
    reference_map = readers(("reads-changed", changed), ("reads-other", unrelated), ("whole", None))
    new = {**BIG, changed: "eA=="}
    assert reconcile(source(new, recorded_for(BIG)), api, reference_map)
    assert set(api.stamped) == {"reads-changed", "whole"}
    mark = json.loads(api.stamped["reads-changed"]["metadata"]["annotations"][
        keys.window_key("secret", "big")
    ])  # fmt: skip
    assert mark["keys"] == [changed]
    [detected] = [m for _, _, reason, m in posted if reason == "ChangeDetected"]
    assert detected.startswith(
        f"data changed (1 of {BUCKETS} digest buckets changed, and which of their keys "
        "changed cannot be told: possibly key"
    )
    assert changed in detected and unrelated not in detected
    assert "1 read none of the changed keys" in detected
    assert "eA==" not in detected and "MQ==" not in detected


def test_a_change_recorded_per_key_still_names_exact_keys_when_the_data_grew() -> None:
    """Digests recorded per key compare per key; the new record is per bucket."""
    api = SourceApi()
    small = {"a": "MQ==", "b": "Mg=="}
    grown = {**small, "b": "Yg==", **BIG}
    reference_map = readers(("reads-a", "a"), ("reads-b", "b"))
    assert reconcile(source(grown, recorded_for(small)), api, reference_map)
    assert set(api.stamped) == {"reads-b"}
    assert isinstance(read_key_digests(api.recorded()[keys.KEY_DIGESTS]), BucketDigests)


def test_an_event_names_at_most_twenty_keys() -> None:
    described = fanning_out.describe_keys(frozenset(BIG))
    assert described.startswith("keys key-0000, key-0001,")
    assert described.endswith("key-0019 and 980 more")


# --- no room: the checksum only, with a Warning ---------------------------------------------


def full(room: int) -> dict[str, str]:
    """Annotations of the source's own that leave ``room`` bytes of the apiserver's limit."""
    return {
        "example.com/notes": "x"
        * (source_changes.ANNOTATIONS_LIMIT - len("example.com/notes") - room)
    }


def test_no_room_for_digests_records_the_checksum_only_with_a_warning_and_stamps_all_next(
    posted: list[tuple[str, str, str, str]],
) -> None:
    api = SourceApi()
    seen: dict[tuple[str, str, str], str] = {}
    own = full(2500)  # less than digests per bucket need, with the margin
    assert reconcile(source(BIG, own), api, seen=seen)
    recorded = api.recorded()
    assert recorded == {keys.CHECKSUM: checksum(BIG), keys.CHANGE: None, keys.KEY_DIGESTS: None}
    message = warnings(posted)["KeyDigestsNotRecorded"]
    assert "recorded the checksum only" in message and "whichever keys it reads" in message
    assert f"of the {source_changes.ANNOTATIONS_LIMIT} the API allows" in message

    # The next change: which keys is unknown, so every reader is stamped.
    posted.clear()
    api = SourceApi()
    reference_map = readers(
        ("reads-changed", "key-0007"), ("reads-other", other_bucket_key("key-0007"))
    )
    new = {**BIG, "key-0007": "eA=="}
    assert reconcile(source(new, {**own, keys.CHECKSUM: checksum(BIG)}), api, reference_map, seen)
    assert set(api.stamped) == {"reads-changed", "reads-other"}
    assert "changed keys unknown" in next(m for _, _, r, m in posted if r == "ChangeDetected")


def test_the_room_counts_the_sources_own_annotations_not_restarters() -> None:
    own = {"a.example/x": "y" * 1000}
    stale = {keys.KEY_DIGESTS: "z" * 200_000, keys.CHANGE: "1 sha256:0", keys.CHECKSUM: "c"}
    room = source_changes.digests_room({"annotations": {**own, **stale}}, checksum(BIG))
    assert room == source_changes.digests_room({"annotations": own}, checksum(BIG))
    assert room > 250_000


# --- refusals: a Warning and a metric, no loop ----------------------------------------------


def refuse_digests(patch: dict[str, Any]) -> ApiError | None:
    if patch["metadata"]["annotations"].get(keys.KEY_DIGESTS):
        return refusal(422, 'Secret "big" is invalid: metadata.annotations: Too long')
    return None


def test_refused_digests_are_dropped_and_the_checksum_recorded_alone(
    posted: list[tuple[str, str, str, str]],
) -> None:
    before = patch_errors("422")
    api = SourceApi(refuse_digests)
    assert reconcile(source(BIG), api)
    assert api.recorded() == {
        keys.CHECKSUM: checksum(BIG),
        keys.CHANGE: None,
        keys.KEY_DIGESTS: None,
    }
    message = warnings(posted)["KeyDigestsNotRecorded"]
    assert "the API refused restarter's key digests (HTTP 422" in message
    assert "metadata.annotations: Too long" in message
    assert patch_errors("422") == before + 1


@pytest.mark.parametrize(
    ("recorded", "says"),
    [
        pytest.param(False, "one made while it is not running is missed", id="first-sight"),
        pytest.param(True, "sees it again when it next starts", id="change"),
    ],
)
def test_a_refused_checksum_is_a_warning_and_a_metric_and_is_not_sent_again(
    recorded: bool, says: str, posted: list[tuple[str, str, str, str]]
) -> None:
    before = patch_errors("422")
    api = SourceApi(lambda patch: refusal(422, "metadata.annotations: Too long"))
    seen: dict[tuple[str, str, str], str] = {}
    new = {**BIG, "key-0007": "eA=="}
    body = source(new, recorded_for(BIG)) if recorded else source(BIG)
    # True: the caller does not try again (the same patch would be refused again).
    assert reconcile(body, api, readers(("reads-changed", "key-0007")), seen)
    assert api.source_patches == []
    found = warnings(posted)
    assert says in found["ChecksumNotRecorded"]
    assert "HTTP 422" in found["ChecksumNotRecorded"]
    if recorded:
        # The change annotation was refused too (its own Warning); the stamp landed anyway.
        assert "ChangeNotRecorded" in found
        assert set(api.stamped) == {"reads-changed"}
    refused = len(api.refused)
    assert patch_errors("422") == before + refused
    # Remembered for this run: the same data is already seen, nothing is sent again.
    context_seen = seen[("secret", "ns", "big")]
    assert context_seen == checksum(new if recorded else BIG)


def test_no_answer_is_no_refusal_the_check_fails_to_be_tried_again_and_records_then(
    posted: list[tuple[str, str, str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """Digests refused (403), then no answer for the checksum alone: counted (status 0) and
    logged without the checksum, but no Warning that it was not recorded and nothing
    remembered: the check raises, and its next try records the checksum."""
    whole = checksum(BIG).removeprefix("sha256:")
    before = patch_errors("0"), patch_errors("403")
    answers = iter(
        [
            refusal(403, f"denied: checksum {whole} not allowed"),
            errors.no_answer(TimeoutError("read timed out")),
            refusal(403, "denied"),
            None,
        ]
    )
    api = SourceApi(lambda patch: next(answers))
    seen: dict[tuple[str, str, str], str] = {}
    with pytest.raises(errors.NoAnswer):
        reconcile(source(BIG), api, seen=seen)
    assert "ChecksumNotRecorded" not in warnings(posted)
    assert seen == {}
    assert (patch_errors("0"), patch_errors("403")) == (before[0] + 1, before[1] + 1)
    assert reconcile(source(BIG), api, seen=seen)
    assert seen and keys.CHECKSUM in api.recorded(), "the next try records the checksum alone"
    assert "ChecksumNotRecorded" not in warnings(posted)
    assert not any(whole in m for _, _, _, m in posted)
    assert not any(whole in record.getMessage() for record in caplog.records)
