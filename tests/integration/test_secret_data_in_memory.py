"""A Secret's data outlives no check of its change: one source check, run in this process
against the local apiserver as the chart's ServiceAccount, then every live object scanned
for the new value.

The value is held here only XOR-masked; the scan unmasks it into objects of its own,
which it skips by identity. ``gc.get_objects()`` lists only the containers the collector
tracks (a dict of strings alone is untracked), so the scan walks from them through every
referent, and looks at each str, bytes and bytearray it reaches. Memory freed but not yet
overwritten, and buffers inside C libraries (OpenSSL's), are out of its reach.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import logging
import secrets
import threading
from pathlib import Path
from typing import Any

import kubernetes

from restarter.cluster.reference_map import ReferenceMap, references_of
from restarter.model import keys
from restarter.restarting.checking import SourceChecks
from restarter.restarting.source_context import SourceContext, SourceTurns
from restarter.services import events
from restarter.services import settings as settings_module
from restarter.services.kube.api import Api
from restarter.services.kube.connecting import client_for
from restarter_cluster.cluster import Cluster
from tests.chart_identity import ChartIdentities
from tests.conftest import wait_for
from tests.integration.conftest import CHART_VALUES
from tests.integration.factories import deployment, env_from_secret, secret, window_hours_away

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


class Needle:
    """The unique value, held XOR-masked; ``forms`` unmasks it as the operator could hold
    it: the value, and the base64 that Secret ``data`` carries (as str and as bytes)."""

    def __init__(self) -> None:
        self._mask = secrets.token_bytes(32)
        value = secrets.token_hex(16).encode()
        self._masked = bytes(a ^ b for a, b in zip(value, self._mask, strict=False))

    def forms(self) -> list[Any]:
        value = bytes(a ^ b for a, b in zip(self._masked, self._mask, strict=False))
        encoded = base64.b64encode(value)
        return [value, value.decode(), encoded, encoded.decode()]


def find(needle: Needle) -> list[str]:
    """Every live str, bytes or bytearray that holds a form of the value, described by the
    type of the container it was reached from."""
    gc.collect()
    forms = needle.forms()
    text = [form for form in forms if isinstance(form, str)]
    raw = [form for form in forms if isinstance(form, bytes)]
    own = {id(form) for form in forms} | {id(forms), id(text), id(raw)}
    found: list[str] = []
    seen: set[int] = set(own)
    frontier: list[Any] = gc.get_objects()
    own.add(id(frontier))
    seen.add(id(frontier))
    while frontier:
        reached: list[Any] = []
        for holder in frontier:
            for item in gc.get_referents(holder):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                if isinstance(item, str):
                    if any(form in item for form in text):
                        found.append(f"str of {len(item)} chars in a {type(holder).__name__}")
                elif isinstance(item, bytes | bytearray):
                    if any(form in item for form in raw):
                        found.append(
                            f"{type(item).__name__} of {len(item)} in a {type(holder).__name__}"
                        )
                else:
                    reached.append(item)
        frontier = reached
    return found


def test_after_a_check_the_new_value_of_a_secret_is_in_no_live_object(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    chart_identities: ChartIdentities,
) -> None:
    """One change of a labelled Secret checked as restarter checks one: read, checksum and
    key digests compared, its dependent stamped (with its Event), the checksum recorded."""
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    body = deployment("web", env=[env_from_secret("db")], replicas=0)
    apps.create_namespaced_deployment(namespace, body)
    identity = chart_identities.get(*CHART_VALUES)
    api = Api(restarter_client(identity.kubeconfig))
    settings = settings_module.build(["--namespace", namespace])
    reference_map = ReferenceMap()
    reference_map.replace("deployments", namespace, {(namespace, "web"): references_of(body)})
    in_sync = threading.Event()
    in_sync.set()
    recorded: dict[tuple[str, str, str], str] = {}
    turns = SourceTurns()

    def context_for(kind: str, namespace: str, name: str) -> SourceContext:
        log = logging.getLogger("restarter.sources")
        return SourceContext(
            kind=kind,
            settings=settings,
            api=api,
            reference_map=reference_map,
            in_sync=in_sync,
            checksums=recorded,
            logger=log,
            events=events.Events(api),
            turns=turns,
        )

    def check() -> None:
        asyncio.run(SourceChecks(context_for, labelled=True).check("secret", namespace, "db"))

    check()  # first sight: the checksum of the old value recorded
    needle = Needle()
    _write(cluster, namespace, needle)
    check()
    # The check did its work: the dependent stamped, the new checksum recorded.
    marks = apps.read_namespaced_deployment("web", namespace).metadata.annotations or {}
    assert keys.pending_key("secret", "db") in marks
    wait_for(
        lambda: (
            (core.read_namespaced_secret("db", namespace).metadata.annotations or {}).get(
                keys.CHECKSUM
            )
            == recorded.get(("secret", namespace, "db"))
        ),
        10,
        message="the new checksum recorded",
    )

    found = find(needle)
    assert found == [], f"the Secret's new value is still held in: {found}"

    # The scan finds the value where the operator would hold it: a body it read.
    held = api.read_source("secret", namespace, "db")
    assert held is not None
    assert find(needle), "the scan misses a Secret body held in memory"
    del held


def restarter_client(kubeconfig: Path) -> kubernetes.client.ApiClient:
    """restarter's own client (its pool, sockets and retries) with a kubeconfig's user."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    return client_for(configuration)


def _write(cluster: Cluster, namespace: str, needle: Needle) -> None:
    """The new value written by kubectl, another process: this one sends nothing of it."""
    patch = json.dumps({"data": {"password": needle.forms()[3]}})
    cluster.kubectl("patch", "secret", "db", "-n", namespace, "--type=merge", "-p", patch)
