"""Annotation keys stay valid Kubernetes annotation names for every legal Secret name."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable

import pytest

from restarter.model import keys

ANNOTATION_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
ALPHABET = ALNUM + ".-"
LENGTHS = range(1, 254)
MakeKey = Callable[[str, str], str]


def names_of_length(length: int) -> list[str]:
    """Names of exactly ``length`` chars from [a-z0-9.-] starting and ending alphanumeric.

    Besides random ones, the set holds adversarial names: runs of '.' and '-' wherever
    shortening cuts the token, so a cut that ends on punctuation is exercised.
    """
    if length == 1:
        return ["a", "0", "z"]
    rng = random.Random(length)
    names = {
        "a" * length,
        "0" * length,
        "a" + "-" * (length - 2) + "z",
        "a" + "." * (length - 2) + "z",
        "a" + ("-." * length)[: length - 2] + "9",
    }
    for _ in range(20):
        middle = "".join(rng.choice(ALPHABET) for _ in range(length - 2))
        names.add(rng.choice(ALNUM) + middle + rng.choice(ALNUM))
    for name in names:
        assert len(name) == length and name[0] in ALNUM and name[-1] in ALNUM
    return sorted(names)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_source_token_is_a_valid_annotation_name_of_at_most_63_chars(length: int) -> None:
    for name in names_of_length(length):
        token = keys.source_token("secret", name)
        assert len(token) <= 63, name
        assert ANNOTATION_NAME.match(token), (name, token)


@pytest.mark.parametrize("kind", ["secret", "configmap"])
@pytest.mark.parametrize("length", [1, 53, 54, 56, 57, 62, 63, 64, 100, 253])
def test_a_source_token_fits_for_every_kind(kind: str, length: int) -> None:
    for name in names_of_length(length):
        token = keys.source_token(kind, name)
        assert len(token) <= 63 and ANNOTATION_NAME.match(token), (name, token)
        assert token.startswith(f"{kind}.")


@pytest.mark.parametrize("length", range(1, 57))
def test_a_name_of_at_most_56_chars_appears_verbatim(length: int) -> None:
    for name in names_of_length(length):
        assert keys.source_token("secret", name) == f"secret.{name}"


@pytest.mark.parametrize("length", range(57, 254))
def test_a_longer_name_ends_in_12_hex_digits_of_its_sha256(length: int) -> None:
    for name in names_of_length(length):
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        token = keys.source_token("secret", name)
        assert token.endswith(f"-{digest}") and token.startswith("secret."), (name, token)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("x" * 60 + "-one", "x" * 60 + "-two"),
        ("a" * 60 + "b", "a" * 60 + "c"),
        ("a" * 60 + "b" * 193, "a" * 60 + "c" * 193),  # both 253 chars
        ("a" * 61, "a" * 62),
    ],
)
def test_two_long_names_sharing_their_first_60_chars_get_different_tokens(
    first: str, second: str
) -> None:
    assert first[:60] == second[:60]
    assert keys.source_token("secret", first) != keys.source_token("secret", second)


@pytest.mark.parametrize("length", [1, 56, 57, 253])
def test_a_source_token_is_deterministic(length: int) -> None:
    for name in names_of_length(length):
        assert keys.source_token("secret", name) == keys.source_token("secret", "".join(name))


def test_a_long_token_is_stable_across_runs_and_processes() -> None:
    # sha256("a" * 60 + "-" + "b" * 192)[:12] == "a21bd586a6ad", computed with hashlib.
    name = "a" * 60 + "-" + "b" * 192
    assert keys.source_token("secret", name) == "secret." + "a" * 43 + "-a21bd586a6ad"


@pytest.mark.parametrize("make_key", [keys.pending_key, keys.window_key])
@pytest.mark.parametrize("length", [1, 56, 57, 253])
def test_pending_and_window_keys_have_a_dns_subdomain_prefix_and_the_token(
    make_key: MakeKey, length: int
) -> None:
    for name in names_of_length(length):
        prefix, slash, name_part = make_key("secret", name).partition("/")
        assert slash == "/"
        assert DNS_SUBDOMAIN.match(prefix) and len(prefix) <= 253, prefix
        assert name_part == keys.source_token("secret", name)


@pytest.mark.parametrize(
    ("make_key", "prefix"),
    [
        (keys.pending_key, "pending-restart.restarter.io"),
        (keys.window_key, "restart-at.restarter.io"),
    ],
)
def test_pending_and_window_keys_use_their_own_prefixes(make_key: MakeKey, prefix: str) -> None:
    assert make_key("secret", "db") == f"{prefix}/secret.db"


@pytest.mark.parametrize(
    "key",
    [keys.CHECKSUM, keys.RESTART_TS, keys.FINALIZER, keys.KUBECTL_RESTARTED_AT],
)
def test_fixed_annotation_keys_are_valid_qualified_names(key: str) -> None:
    prefix, _, name = key.partition("/")
    assert DNS_SUBDOMAIN.match(prefix) and len(prefix) <= 253
    assert ANNOTATION_NAME.match(name) and len(name) <= 63
