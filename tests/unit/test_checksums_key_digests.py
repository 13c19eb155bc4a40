"""Key digests of a source's data, per key and per bucket: which keys a change touched (never
one missed), nothing of values, and a size that does not grow with the keys."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from restarter.model.checksums import (
    BUCKETS,
    EXACT_BUDGET,
    BucketChange,
    BucketDigests,
    KeyDigests,
    PossiblyChanged,
    bucket_digests,
    bucket_of,
    changed_keys,
    changes,
    checksum,
    fitting_digests,
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


# --- digests per bucket: a size that does not grow with the keys ----------------------------


def many(count: int, width: int, value: str = "dg==") -> dict[str, str]:
    """``count`` keys of ``width`` characters (legal ConfigMap key names)."""
    return {f"{i:0{width}d}"[-width:]: value for i in range(count)}


def test_5000_keys_of_40_characters_take_332_kib_per_key_and_under_3_kib_per_bucket() -> None:
    data = many(5000, 40)
    exact = key_digests(data, None, SALT).to_annotation()
    assert 320 * 1024 < len(exact) < 340 * 1024  # what a user's ConfigMap was refused for
    buckets = bucket_digests(data, None, SALT).to_annotation()
    assert len(buckets) < 3 * 1024
    # The same whatever the keys: as many bytes for 4 000 keys of 253 characters, or for one.
    assert len(bucket_digests(many(4000, 253), None, SALT).to_annotation()) == len(buckets)
    assert len(bucket_digests({"a": "MQ=="}, None, SALT).to_annotation()) == len(buckets)


def test_the_form_is_per_key_while_it_fits_the_budget_then_per_bucket_then_none() -> None:
    whole = checksum(DATA)
    assert isinstance(fitting_digests(DATA, None, SALT, whole, 10_000), KeyDigests)
    big = many(200, 40)
    assert len(key_digests(big, None, SALT).to_annotation()) > EXACT_BUDGET
    assert isinstance(fitting_digests(big, None, SALT, checksum(big), 10_000), BucketDigests)
    bucket_size = len(bucket_digests(big, None, SALT).to_annotation())
    assert isinstance(fitting_digests(big, None, SALT, checksum(big), bucket_size), BucketDigests)
    assert fitting_digests(big, None, SALT, checksum(big), bucket_size - 1) is None
    # A small source in little room keeps its digests per key.
    small = key_digests(DATA, None, SALT).to_annotation()
    assert isinstance(fitting_digests(DATA, None, SALT, whole, len(small)), KeyDigests)
    assert fitting_digests(DATA, None, SALT, whole, len(small) - 1) is None


def test_per_bucket_digests_read_back_and_hold_no_value_nor_key_name() -> None:
    data = {"pin": base64.b64encode(b"1234").decode(), "api-token": "c2VjcmV0"}
    digests = bucket_digests(data, None, SALT)
    text = digests.to_annotation()
    assert read_key_digests(text) == digests
    assert digests.count == BUCKETS
    for word in ("pin", "api-token", "MTIzNA", "1234", "c2VjcmV0", "secret"):
        assert word not in text


def big_change(before: dict[str, str], after: dict[str, str]) -> BucketChange:
    found = changes(bucket_digests(before, None, SALT), after, None, checksum(after))
    assert isinstance(found, BucketChange)
    return found


BIG = many(1000, 12)


@pytest.mark.parametrize(
    ("after", "touched"),
    [
        pytest.param({**BIG, "000000000007": "eA=="}, "000000000007", id="modified"),
        pytest.param({**BIG, "new-key": "eA=="}, "new-key", id="added"),
        pytest.param({k: v for k, v in BIG.items() if k != "000000000042"}, "000000000042",
                     id="removed"),
    ],
)  # fmt: skip
def test_a_key_modified_added_or_removed_changes_its_bucket_and_only_its_bucket(
    after: dict[str, str], touched: str
) -> None:
    found = big_change(BIG, after)
    assert found.buckets == {bucket_of(SALT, touched, BUCKETS)}
    assert found.touches(touched)
    # Readers of it are affected; a reader of a key in another bucket is not.
    assert found.read_by(frozenset({touched})) == {touched}
    other = next(k for k in BIG if bucket_of(SALT, k, BUCKETS) not in found.buckets)
    assert found.read_by(frozenset({other})) == frozenset()
    # The keys named are those in the changed bucket now, each only possibly changed.
    assert found.present == {k for k in after if found.touches(k)}
    assert isinstance(found.read_by(frozenset({touched})), PossiblyChanged)


def test_a_whole_reader_of_a_bucket_that_only_lost_a_key_sees_unknown_keys() -> None:
    salt_bucket = bucket_of(SALT, "lonely", BUCKETS)
    before = {k: v for k, v in BIG.items() if bucket_of(SALT, k, BUCKETS) != salt_bucket}
    found = big_change({**before, "lonely": "eA=="}, before)
    assert found.present == frozenset()
    assert found.read_by(None) is None  # affected, which keys unknown
    assert found.read_by(frozenset({"lonely"})) == {"lonely"}


def test_unchanged_data_changes_no_bucket_and_reordering_is_no_change() -> None:
    recorded = bucket_digests(BIG, None, SALT)
    assert changes(recorded, dict(reversed(BIG.items())), None, checksum(BIG)) == frozenset()


def test_per_bucket_digests_of_other_data_than_their_checksum_tell_nothing() -> None:
    tampered = BucketDigests("sha256:other", SALT, bucket_digests(BIG, None, SALT).buckets)
    assert changes(tampered, BIG, None, checksum(BIG)) is None


def test_recorded_per_key_digests_give_exact_keys_even_when_the_data_grew_past_the_budget() -> None:
    """A source recorded per key (also by an earlier restarter) compares per key: a change
    that also adds thousands of keys names the keys exactly."""
    recorded = key_digests(DATA, None, SALT)
    grown = {**DATA, "b": "Yg==", **many(3000, 40)}
    found = changes(recorded, grown, None, checksum(grown))
    assert found == {"b", *many(3000, 40)}


@given(
    before=st.dictionaries(
        st.text("abcdefgh.-_", min_size=1, max_size=6), st.sampled_from(["MQ==", "Mg=="])
    ),
    edits=st.dictionaries(
        st.text("abcdefgh.-_", min_size=1, max_size=6),
        st.sampled_from(["MQ==", "Mg==", None]),
        max_size=4,
    ),
    salt_byte=st.integers(0, 255),
    count=st.sampled_from([1, 2, 7, 256]),
)
@settings(max_examples=300, deadline=None)
def test_per_bucket_changes_miss_no_changed_key(
    before: dict[str, str], edits: dict[str, str | None], salt_byte: int, count: int
) -> None:
    """Property: every key modified, added or removed counts as changed (false positives
    only: a key of a changed bucket may not have changed)."""
    salt = new_salt(bytes([salt_byte]) * 16)
    after = {k: v for k, v in {**before, **edits}.items() if v is not None}
    truly = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    found = changes(bucket_digests(before, None, salt, count=count), after, None, checksum(after))
    if not truly:
        assert found == frozenset()
        return
    assert isinstance(found, BucketChange)
    assert all(found.touches(key) for key in truly)
    assert found.read_by(frozenset(truly)) == truly
    whole = found.read_by(None)
    assert whole is None or truly & after.keys() <= whole


@pytest.mark.parametrize(
    "value",
    [
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"s","buckets":"AAAA"}',
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"s","buckets":""}',
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"s","buckets":"!!"}',
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"s","buckets":7}',
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"","buckets":"AAAAAAAAAAA"}',
        '{"scheme":"hmac-sha256-64-buckets","checksum":"c","salt":"s"}',
    ],
)
def test_a_bucket_annotation_that_is_not_well_formed_reads_as_none(value: str) -> None:
    assert read_key_digests(value) is None


def test_a_key_lands_in_other_buckets_under_other_salts() -> None:
    """The salt places the keys too: which keys share a bucket differs between sources."""
    salts = [new_salt(bytes([i]) * 16) for i in range(8)]
    assert len({bucket_of(salt, "password", BUCKETS) for salt in salts}) > 1
