"""Certificate deadlines: a restart must not wait past the expiry of the certificate the
workload's pods run with.

When restarter records a source's checksum it also records the earliest X.509
``notAfter`` among the certificates in that data (``restarter.io/not-after``). Only the
``CERTIFICATE`` blocks of PEM values are parsed (``tls.crt``, ``ca.crt``, any value holding
one); a private key or any other value is never read into it, and an expiry is public.
On a change, the dependents still run the old data, so the recorded expiry is theirs: each
is stamped with a deadline (that expiry less a margin), one annotation key per deadline, so
a workload still pending when the source changes again keeps the earliest
(``model.pending`` reads it back).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from restarter.model import keys
from restarter.model.windows import ScheduleError, parse_length

#: One PEM certificate block; other blocks (a private key) are never handed to the parser.
_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----"
)
_MARKER = b"-----BEGIN CERTIFICATE-----"


def _values(kind: str, source: Mapping[str, Any]) -> list[bytes]:
    """The source's values as bytes: a Secret's data and a ConfigMap's binaryData are
    base64; a ConfigMap's data is text."""
    values: list[bytes] = []
    for field, encoded in (("data", kind == "secret"), ("binaryData", True)):
        for value in (source.get(field) or {}).values():
            if not isinstance(value, str):
                continue
            if not encoded:
                values.append(value.encode())
                continue
            try:
                values.append(base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                continue
    return values


def earliest_not_after(kind: str, source: Mapping[str, Any]) -> dt.datetime | None:
    """The earliest ``notAfter`` (UTC) among the PEM certificates in the source's data;
    None when it holds none that parses."""
    earliest: dt.datetime | None = None
    for value in _values(kind, source):
        if _MARKER not in value:
            continue
        for block in _PEM_CERTIFICATE.findall(value):
            try:
                expires = x509.load_pem_x509_certificate(block).not_valid_after_utc
            except ValueError:
                continue
            if earliest is None or expires < earliest:
                earliest = expires
    return earliest


def format_instant(instant: dt.datetime) -> str:
    """RFC 3339 seconds in UTC: ``2026-01-01T00:00:00Z``."""
    return f"{instant.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"


def parse_instant(text: str | None) -> dt.datetime | None:
    """An instant ``format_instant`` wrote; None for anything else."""
    if not text:
        return None
    try:
        instant = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return instant.replace(tzinfo=dt.UTC)


def _recorded_expiry(source: Mapping[str, Any]) -> str | None:
    return ((source.get("metadata") or {}).get("annotations") or {}).get(keys.NOT_AFTER)


def expiry_annotation(kind: str, source: Mapping[str, Any]) -> dict[str, str | None]:
    """What a checksum patch records of the data's earliest certificate expiry: the
    ``restarter.io/not-after`` of the data now, its removal when the data holds no
    certificate any more, nothing for a source that never held one."""
    expires = earliest_not_after(kind, source)
    if expires is not None:
        return {keys.NOT_AFTER: format_instant(expires)}
    return {} if _recorded_expiry(source) is None else {keys.NOT_AFTER: None}


def expiry_current(kind: str, source: Mapping[str, Any]) -> bool:
    """True when the recorded expiry is the one of the data now (none recorded for data
    without a certificate counts as current)."""
    expires = earliest_not_after(kind, source)
    return _recorded_expiry(source) == (None if expires is None else format_instant(expires))


def margin(annotations: Mapping[str, str], default: dt.timedelta) -> dt.timedelta:
    """The source's ``restarter.io/certificate-margin``, else ``default``; ScheduleError
    names a value that cannot be read."""
    text = annotations.get(keys.CERTIFICATE_MARGIN)
    if text is None:
        return default
    try:
        return parse_length(text.strip())
    except ScheduleError:
        raise ScheduleError(
            f"annotation {keys.CERTIFICATE_MARGIN}={text!r} is not like 30m, 2h or 1h30m "
            "(at most 24h)"
        ) from None


@dataclass(frozen=True)
class Deadline:
    """The instant by which a workload restarts at the latest, and why."""

    at: dt.datetime
    not_after: dt.datetime
    """The expiry of the certificate its pods run with."""

    source: str
    """``Secret/tls``: the source that certificate came from."""

    def expired(self, now: dt.datetime) -> bool:
        return self.not_after <= now

    def describe(self, now: dt.datetime) -> str:
        """Why a restart comes before its window, for Events and ``plan``."""
        verb = "expired" if self.expired(now) else "expires"
        return (
            f"before its window: the certificate it runs with ({self.source}) {verb} at "
            f"{format_instant(self.not_after)}"
        )


def stamp_deadline(
    metadata: Mapping[str, Any], source: str, default_margin: dt.timedelta
) -> dict[str, str] | None:
    """The deadline annotation a change's stamp adds to each dependent: the expiry recorded
    on the source (of the data its dependents run) less the margin; None when none is
    recorded. ScheduleError: the source's margin cannot be read."""
    annotations = metadata.get("annotations") or {}
    expires = parse_instant(annotations.get(keys.NOT_AFTER))
    if expires is None:
        return None
    return deadline_stamp(expires, source, margin(annotations, default_margin))


def deadline_stamp(expires: dt.datetime, source: str, before: dt.timedelta) -> dict[str, str]:
    """The deadline annotation for a certificate that expires at ``expires``: ``before``
    it (the margin), naming ``source`` (where that certificate came from)."""
    at = expires - before
    value = json.dumps(
        {"notAfter": format_instant(expires), "source": source},
        sort_keys=True,
        separators=(",", ":"),
    )
    return {f"{keys.DEADLINE}/{int(at.timestamp())}": value}
