"""The checksum covers data only, in a canonical form, and reveals none of it."""

from __future__ import annotations

import base64
import re

from restarter.checksums import checksum


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_key_order_does_not_matter() -> None:
    assert checksum({"a": b64("1"), "b": b64("2")}) == checksum({"b": b64("2"), "a": b64("1")})


def test_format_is_sha256_hex() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", checksum({"a": b64("1")}))


def test_missing_and_empty_data_are_the_same() -> None:
    assert checksum(None) == checksum({})


def test_a_changed_value_or_key_changes_it() -> None:
    base = checksum({"password": b64("one")})
    assert checksum({"password": b64("two")}) != base
    assert checksum({"passwd": b64("one")}) != base


def test_it_contains_no_value() -> None:
    value = checksum({"password": b64("hunter2")})
    assert "hunter2" not in value and b64("hunter2") not in value
