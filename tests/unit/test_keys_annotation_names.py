"""Annotation keys stay valid for every legal Secret name."""

from __future__ import annotations

import random
import re

import pytest

from restarter import keys

ANNOTATION_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def legal_name(length: int, rng: random.Random) -> str:
    middle = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-.") for _ in range(length))
    name = ("a" + middle[1:-1] + "z")[:length] if length > 1 else "a"
    return name.replace("..", "a.").replace(".-", "a-").replace("-.", "-a")


@pytest.mark.parametrize("length", [1, 2, 55, 56, 57, 63, 64, 100, 200, 253])
def test_tokens_are_valid_annotation_names_for_every_length(length: int) -> None:
    rng = random.Random(length)
    for _ in range(50):
        name = legal_name(length, rng)
        token = keys.source_token("secret", name)
        assert len(token) <= 63
        assert ANNOTATION_NAME.match(token), token
        prefix, _, rest = keys.pending_key("secret", name).partition("/")
        assert DNS_SUBDOMAIN.match(prefix) and len(prefix) <= 253 and rest == token


def test_short_names_appear_verbatim() -> None:
    name = "a" * 56
    assert keys.source_token("secret", name) == f"secret.{name}"


def test_long_names_sharing_a_prefix_get_different_tokens() -> None:
    first, second = "x" * 60 + "-one", "x" * 60 + "-two"
    assert keys.source_token("secret", first) != keys.source_token("secret", second)
    assert keys.source_token("secret", first) == keys.source_token("secret", first)
