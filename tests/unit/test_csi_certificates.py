"""Certificate deadlines for a SecretProviderClass that syncs into a Secret: which keys it
syncs (``spec.secretObjects``), the earliest expiry among them, the record on the workload,
and the deadline a change's stamp carries, read back by the timer's decision as a Secret's
is. Only ``notAfter`` is read: a value never reaches the record, the mark or its message."""

from __future__ import annotations

import base64
import datetime as dt
import json
from types import SimpleNamespace
from typing import Any

from restarter.model import certificates, csi, keys, restart_decisions, windows
from restarter.model.fan_out import Target, plan_fan_out
from restarter.model.references import SECRET_PROVIDER_CLASS
from restarter.model.restart_decisions import Action
from restarter.restarting import csi_checking
from restarter.services.kube.errors import Forbidden
from restarter.services.settings import Settings
from tests.certificates import private_key, self_signed

NOW = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def provider_class(*secret_objects: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "vault-tls"}, "spec": {"secretObjects": list(secret_objects)}}


def synced(secret: str, *pairs: tuple[str, str]) -> dict[str, Any]:
    data = [{"objectName": name, "key": key} for name, key in pairs]
    return {"secretName": secret, "type": "kubernetes.io/tls", "data": data}


def tls(expires: dt.datetime, **extra: str) -> dict[str, Any]:
    data = {"tls.crt": b64(self_signed(expires)), "tls.key": b64(private_key())}
    return {"type": "kubernetes.io/tls", "data": data | extra}


def test_the_keys_a_class_syncs_into_each_secret() -> None:
    body = provider_class(
        synced("shop-tls", ("cert", "tls.crt"), ("key", "tls.key")),
        synced("shop-tls", ("ca", "ca.crt")),  # the same Secret twice: one set of keys
        synced("db", ("password", "password")),
        {"type": "Opaque"},  # no secretName: nothing
    )
    assert csi.synced_keys(body) == {
        "shop-tls": frozenset({"tls.crt", "tls.key", "ca.crt"}),
        "db": frozenset({"password"}),
    }
    assert csi.synced_keys({"spec": {"provider": "vault"}}) == {}  # only mounted


def test_the_earliest_expiry_among_the_synced_keys_of_the_synced_secrets() -> None:
    keys_ = {"shop-tls": frozenset({"tls.crt", "tls.key"}), "api-tls": frozenset({"tls.crt"})}
    secrets = {"shop-tls": tls(NOW + 5 * HOUR), "api-tls": tls(NOW + 2 * HOUR)}
    assert csi.synced_expiry(keys_, secrets) == csi.SyncedExpiry(NOW + 2 * HOUR, "api-tls")


def test_a_certificate_in_a_key_the_class_does_not_sync_is_not_read() -> None:
    secret = tls(NOW + 5 * HOUR, **{"other.crt": b64(self_signed(NOW + HOUR))})
    keys_ = {"shop-tls": frozenset({"tls.crt"})}
    found = csi.synced_expiry(keys_, {"shop-tls": secret})
    assert found == csi.SyncedExpiry(NOW + 5 * HOUR, "shop-tls")


def test_no_expiry_without_a_synced_certificate_or_secret() -> None:
    assert (
        csi.synced_expiry(
            {"db": frozenset({"password"})}, {"db": {"data": {"password": b64(b"x")}}}
        )
        is None
    )
    assert csi.synced_expiry({"shop-tls": frozenset({"tls.crt"})}, {"shop-tls": None}) is None
    assert csi.synced_expiry({}, {}) is None


def test_the_record_holds_the_expiry_and_the_secret_only_and_reads_back() -> None:
    expiry = csi.SyncedExpiry(NOW + HOUR, "shop-tls")
    record = csi.not_after_record(expiry)
    assert record == '{"notAfter":"2025-01-01T13:00:00Z","secret":"shop-tls"}'
    key = csi.not_after_key("vault-tls")
    assert key == f"{keys.CSI_NOT_AFTER}/secretproviderclass.vault-tls"
    assert key.startswith(keys.WRITTEN["workloadAnnotationPrefixes"][-1])
    assert csi.read_not_after({key: record}, "vault-tls") == expiry
    assert csi.not_after_record(None) is None
    for bad in (
        "",
        "[]",
        "{",
        '{"notAfter":"soon","secret":"x"}',
        '{"notAfter":"2025-01-01T13:00:00Z"}',
    ):
        assert csi.read_not_after({key: bad}, "vault-tls") is None


def deadline_of(stamp: dict[str, str]) -> tuple[dt.datetime, dict[str, str]]:
    ((key, value),) = stamp.items()
    return dt.datetime.fromtimestamp(int(key.rsplit("/", 1)[1]), dt.UTC), json.loads(value)


def test_the_change_deadline_is_the_earlier_of_the_recorded_and_the_current_expiry() -> None:
    old = csi.SyncedExpiry(NOW + 2 * HOUR, "shop-tls")
    new = csi.SyncedExpiry(NOW + 90 * 24 * HOUR, "shop-tls")
    # The driver synced the new certificate before restarter looked: the recorded one is
    # what the pods run with.
    at, value = deadline_of(csi.change_deadline(old, new, "vault-tls", HOUR))
    assert at == NOW + HOUR
    assert value == {
        "notAfter": "2025-01-01T14:00:00Z",
        "source": "Secret/shop-tls synced from SecretProviderClass/vault-tls",
    }
    # Not synced yet, or nothing recorded (a workload first seen before): the Secret's now.
    assert deadline_of(csi.change_deadline(new, old, "vault-tls", HOUR))[0] == NOW + HOUR
    assert (
        deadline_of(csi.change_deadline(None, old, "vault-tls", 30 * dt.timedelta(minutes=1)))[0]
        == NOW + 1.5 * HOUR
    )
    assert csi.change_deadline(None, None, "vault-tls", HOUR) == {}


def test_a_change_of_the_class_restarts_by_the_synced_certificates_deadline() -> None:
    settings = Settings()
    request = windows.from_source({"labels": {keys.RESTART_AT_LABEL: "18.00"}}, "UTC", HOUR)
    old = csi.SyncedExpiry(NOW + 90 * dt.timedelta(minutes=1), "shop-tls")
    plan = plan_fan_out(
        kind=SECRET_PROVIDER_CLASS,
        name="vault-tls",
        readers=[Target("deployments", "web", frozenset({"tls-cert"}), None)],
        source_window=request,
        settings=settings,
        change_id="csi-0123456789abcdef",
        now=NOW,
        deadline=csi.change_deadline(old, None, "vault-tls", HOUR),
    )
    ((_, patch),) = plan.patches.items()
    annotations = patch["metadata"]["annotations"]
    body = {"kind": "Deployment", "metadata": {"name": "web", "annotations": annotations}}
    waiting = restart_decisions.decide_restart(body, settings, NOW)
    assert waiting.action is Action.WAIT and waiting.next_due == NOW + 30 * dt.timedelta(minutes=1)
    later = NOW + 31 * dt.timedelta(minutes=1)
    decision = restart_decisions.decide_restart(body, settings, later)
    assert decision.action is Action.RESTART and decision.deadline is not None
    assert decision.deadline.describe(later) == (
        "before its window: the certificate it runs with (Secret/shop-tls synced from "
        "SecretProviderClass/vault-tls) expires at 2025-01-01T13:30:00Z"
    )
    assert certificates.format_instant(decision.deadline.not_after) == "2025-01-01T13:30:00Z"


class Api:
    """Reads the synced Secrets as the API would, or refuses them."""

    def __init__(self, secrets: dict[str, Any] | None) -> None:
        self.secrets = secrets
        self.asked: list[tuple[str, str, str]] = []

    def read_source(self, kind: str, namespace: str, name: str) -> Any:
        self.asked.append((kind, namespace, name))
        if self.secrets is None:
            raise Forbidden("secrets is forbidden", status=403, reason="Forbidden")
        return self.secrets.get(name)


class Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str) -> None:
        self.warnings.append(message)


def check_of(api: Api) -> tuple[Any, Log]:
    log = Log()
    return SimpleNamespace(api=api, logger=log), log


def test_the_check_reads_only_the_secrets_the_class_syncs_into() -> None:
    body = provider_class(synced("shop-tls", ("cert", "tls.crt")))
    body["metadata"]["namespace"] = "shop"
    api = Api({"shop-tls": tls(NOW + HOUR)})
    context, log = check_of(api)
    found = csi_checking._synced_expiry(context, body)
    assert found == csi.SyncedExpiry(NOW + HOUR, "shop-tls")
    assert api.asked == [("secret", "shop", "shop-tls")] and not log.warnings
    only_mounted = {"metadata": {"namespace": "shop", "name": "vault-tls"}, "spec": {}}
    assert csi_checking._synced_expiry(check_of(api)[0], only_mounted) is None
    assert len(api.asked) == 1  # a class that syncs nothing reads no Secret


def test_a_secret_that_cannot_be_read_leaves_the_record_and_is_said_without_a_value() -> None:
    body = provider_class(synced("shop-tls", ("cert", "tls.crt")))
    body["metadata"]["namespace"] = "shop"
    context, log = check_of(Api(None))
    assert csi_checking._synced_expiry(context, body) == csi_checking.UNREAD
    [warning] = log.warnings
    assert "HTTP 403" in warning and "recorded before" in warning
