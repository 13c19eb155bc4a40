"""Per-key digests of a source's data: which keys a change touched, and nothing of values."""

from __future__ import annotations

import base64
import hashlib

import pytest

from restarter.model.checksums import (
    KeyDigests,
    changed_keys,
    checksum,
    key_digests,
    new_salt,
    read_key_digests,
)

SALT = new_salt(bytes(range(16)))
DATA = {"a": "MQ==", "b": "Mg==", "c": "Mw=="}


def changed(
    before: dict[str, str],
    after: dict[str, str],
    before_binary: dict[str, str] | None = None,
    after_binary: dict[str, str] | None = None,
) -> frozenset[str] | None:
    return changed_keys(
        key_digests(before, before_binary, SALT), key_digests(after, after_binary, SALT)
    )


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        pytest.param({**DATA, "b": "Yg=="}, {"b"}, id="modified"),
        pytest.param({**DATA, "d": "NA=="}, {"d"}, id="added"),
        pytest.param({"a": "MQ==", "b": "Mg=="}, {"c"}, id="removed"),
        pytest.param({"a": "eA==", "c": "Mw==", "e": "NQ=="}, {"a", "b", "e"}, id="all-at-once"),
        pytest.param(dict(reversed(DATA.items())), set(), id="reordered-is-unchanged"),
    ],
)
def test_the_changed_keys_are_the_modified_added_and_removed_ones(
    after: dict[str, str], expected: set[str]
) -> None:
    assert changed(DATA, after) == expected


def test_binary_data_keys_are_compared_like_data_keys() -> None:
    assert changed({"mode": "x"}, {"mode": "x"}, {"logo.png": "djE="}, {"logo.png": "djI="}) == {
        "logo.png"
    }
    assert changed({"mode": "x"}, {"mode": "x"}, {}, {"icon.png": "djE="}) == {"icon.png"}


def test_a_key_moved_between_data_and_binary_data_counts_as_changed() -> None:
    assert changed({"k": "djE="}, {}, None, {"k": "djE="}) == {"k"}


def test_other_salts_cannot_tell_which_keys_changed() -> None:
    before = key_digests(DATA, None, SALT)
    after = key_digests({**DATA, "b": "Yg=="}, None, new_salt(b"\xff" * 16))
    assert changed_keys(before, after) is None


def test_other_checksums_with_every_digest_equal_cannot_tell_either() -> None:
    before = key_digests(DATA, None, SALT)
    tampered = KeyDigests("sha256:other", before.salt, before.digests)
    assert changed_keys(tampered, before) is None


def test_the_digests_record_the_checksum_of_the_same_data() -> None:
    assert key_digests(DATA, None, SALT).checksum == checksum(DATA)
    assert key_digests(DATA, {"x": "eQ=="}, SALT).checksum == checksum(DATA, {"x": "eQ=="})


def test_the_annotation_reads_back_and_holds_no_value() -> None:
    digests = key_digests({"pin": base64.b64encode(b"1234").decode()}, None, SALT)
    text = digests.to_annotation()
    assert read_key_digests(text) == digests
    assert "MTIzNA" not in text and "1234" not in text
    # A plain SHA-256 of the value (what a 10 000-guess search would try) is not there.
    for value in (b"1234", b"MTIzNA=="):
        plain = hashlib.sha256(value).digest()
        assert base64.urlsafe_b64encode(plain[:16]).rstrip(b"=").decode() not in text
        assert plain.hex()[:32] not in text


def test_equal_values_in_two_keys_or_under_two_salts_give_different_digests() -> None:
    same = key_digests({"a": "MQ==", "b": "MQ=="}, None, SALT).digests
    assert same["a"] != same["b"]
    other = key_digests({"a": "MQ=="}, None, new_salt(b"\x01" * 16)).digests
    assert other["a"] != same["a"]


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "sha256:abc",
        "{}",
        "[]",
        '{"scheme":"sha256","checksum":"c","salt":"s","digests":{}}',
        '{"scheme":"hmac-sha256-128","checksum":"c","salt":"","digests":{}}',
        '{"scheme":"hmac-sha256-128","checksum":"c","salt":"s","digests":{"a":1}}',
        '{"scheme":"hmac-sha256-128","checksum":"c","salt":"s","digests":[]}',
    ],
)
def test_an_annotation_that_is_not_ours_reads_as_none(value: str | None) -> None:
    assert read_key_digests(value) is None


def test_a_salt_is_22_url_safe_characters_of_16_bytes() -> None:
    assert len(SALT) == 22 and "=" not in SALT
    digests = key_digests(DATA, None, SALT).digests
    assert all(len(digest) == 22 for digest in digests.values())
