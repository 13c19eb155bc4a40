"""The checksum covers data only, in a canonical form, and reveals none of it."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from restarter.model.checksums import checksum

CHECKSUM_ALPHABET = set("sha256:0123456789abcdef")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def data(**values: str) -> dict[str, str]:
    """Secret data as the API returns it: base64 values."""
    return {key: b64(value) for key, value in values.items()}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"a": b64("1"), "b": b64("2")}, {"b": b64("2"), "a": b64("1")}),
        (
            {"user": b64("admin"), "password": b64("pw"), "host": b64("db")},
            {"host": b64("db"), "user": b64("admin"), "password": b64("pw")},
        ),
    ],
    ids=["two-keys", "three-keys"],
)
def test_the_same_data_in_a_different_key_order_has_the_same_checksum(
    first: dict[str, str], second: dict[str, str]
) -> None:
    assert list(first) != list(second)
    assert checksum(first) == checksum(second)


@pytest.mark.parametrize(
    "secret_data",
    [None, {}, data(a="1"), data(password="x" * 10_000)],
    ids=["none", "empty", "one-key", "a-large-value"],
)
def test_the_format_is_sha256_and_64_lowercase_hex_digits(
    secret_data: dict[str, str] | None,
) -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", checksum(secret_data))


def test_missing_and_empty_data_have_the_same_checksum() -> None:
    assert checksum(None) == checksum({})


def test_the_checksum_is_deterministic() -> None:
    assert checksum(data(a="1", b="2")) == checksum(data(a="1", b="2"))


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(data(password="two"), id="a-changed-value"),
        pytest.param(data(passwd="one"), id="a-renamed-key"),
        pytest.param(data(password="one", extra="x"), id="an-added-key"),
        pytest.param({}, id="all-keys-removed"),
        pytest.param({"password": b64("one") + "\n"}, id="whitespace-in-the-value"),
    ],
)
def test_a_change_to_the_data_changes_the_checksum(changed: dict[str, str]) -> None:
    assert checksum(changed) != checksum(data(password="one"))


def test_swapping_keys_and_values_changes_the_checksum() -> None:
    assert checksum({"a": "b"}) != checksum({"b": "a"})


@pytest.mark.parametrize(
    "value",
    ["hunter2-Password!", "s3cr3t-TOKEN-value", "postgres://user:PW@db:5432/app", "ÄÖÜ-unicode"],
)
def test_the_checksum_contains_no_data_value_encoded_or_decoded(value: str) -> None:
    encoded = b64(value)
    # Each value holds a character that never occurs in 'sha256:<hex>', so the
    # assertions below cannot pass by a coincidence of a short hex-like string.
    assert set(value) - CHECKSUM_ALPHABET and set(encoded) - CHECKSUM_ALPHABET
    result = checksum({"key": encoded})
    assert value not in result
    assert encoded not in result


def test_a_configmaps_binary_data_counts() -> None:
    text = {"app.conf": "level=info"}
    assert checksum(text, {"blob": b64("one")}) != checksum(text, {"blob": b64("two")})
    assert checksum(text, {"blob": b64("one")}) != checksum(text)


def test_no_binary_data_keeps_the_checksum_secrets_always_had() -> None:
    """Upgrading must not make every labelled Secret look changed."""
    values = data(password="pw")
    assert checksum(values, None) == checksum(values, {}) == checksum(values)
    assert checksum(values) == (
        "sha256:"
        + hashlib.sha256(json.dumps({"data": values}, separators=(",", ":")).encode()).hexdigest()
    )


def test_moving_a_key_between_data_and_binary_data_is_a_change() -> None:
    assert checksum({"k": "dg=="}, None) != checksum(None, {"k": "dg=="})
