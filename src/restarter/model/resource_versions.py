"""Ordering resourceVersions, where Kubernetes defines them as comparable."""

from __future__ import annotations


def compare_versions(left: str, right: str) -> int | None:
    """-1, 0 or 1 as ``left`` is older than, the same as or newer than ``right``; None when
    either is not comparable.

    Kubernetes 1.35 defines resourceVersions of one resource type as comparable (KEP-5504):
    decimal digits without a leading zero, the longer one newer, else the greater string.
    """
    if not (_comparable(left) and _comparable(right)):
        return None
    ordered = (len(left), left), (len(right), right)
    return (ordered[0] > ordered[1]) - (ordered[0] < ordered[1])


def _comparable(version: str) -> bool:
    return version.isascii() and version.isdigit() and not version.startswith("0")
