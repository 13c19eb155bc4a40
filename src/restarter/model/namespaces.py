"""Which namespaces restarter acts in, by their labels: a label selector, parsed and matched.

The grammar is Kubernetes' own (``kubectl get ns -l``): requirements joined by commas,
each ``key``, ``!key``, ``key=value`` (or ``==``), ``key!=value``, ``key in (a,b)`` or
``key notin (a,b)``. As in Kubernetes, ``!=`` and ``notin`` also match a namespace that
lacks the key. Pure: the namespace watcher asks ``matches`` of every namespace it sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: A label name, optionally prefixed by a DNS subdomain and ``/``.
_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
#: One requirement: an optional ``!``, the key, then an operator and its value(s), if any.
_REQUIREMENT = re.compile(
    r"^(?P<negated>!)?\s*(?P<key>[^\s!=(),]+)"
    r"(?:\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)"
    r"|\s+(?P<set_op>in|notin)\s*\((?P<values>[^()]*)\))?$"
)
MAX_PREFIX = 253


class SelectorError(ValueError):
    """A namespace selector that is not a label selector; the message says which part."""


@dataclass(frozen=True)
class Requirement:
    """One part of a selector: ``key`` with ``operator`` (``exists``, ``!``, ``in``,
    ``notin``) over ``values``; ``=`` is ``in`` with one value, ``!=`` ``notin``."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator == "in":
            return self.key in labels and labels[self.key] in self.values
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class NamespaceSelector:
    """Every requirement must match (Kubernetes ANDs them)."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)


def parse_selector(text: str) -> NamespaceSelector:
    """The selector ``text`` means; SelectorError for anything Kubernetes would refuse."""
    parts = _split(text)
    if not parts:
        raise SelectorError("a namespace selector needs at least one requirement")
    return NamespaceSelector(text.strip(), tuple(_requirement(part) for part in parts))


def _split(text: str) -> list[str]:
    """The requirements: split at commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"{text!r}: a ')' closes nothing")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise SelectorError(f"{text!r}: a '(' is never closed")
    parts.append(current)
    stripped = [part.strip() for part in parts]
    if any(not part for part in stripped) and any(stripped):
        raise SelectorError(f"{text!r}: an empty requirement between commas")
    return [part for part in stripped if part]


def _requirement(part: str) -> Requirement:
    found = _REQUIREMENT.match(part)
    if found is None:
        raise SelectorError(
            f"{part!r} is not a requirement: use key, !key, key=value, key!=value, "
            "key in (a,b) or key notin (a,b)"
        )
    key = found["key"]
    _check_key(key, part)
    if found["negated"]:
        if found["op"] or found["set_op"]:
            raise SelectorError(f"{part!r}: '!' goes only before a bare key")
        return Requirement(key, "!")
    if found["op"]:
        value = found["value"]
        _check_value(value, part)
        return Requirement(key, "notin" if found["op"] == "!=" else "in", frozenset({value}))
    if found["set_op"]:
        values = [value.strip() for value in found["values"].split(",")]
        if values == [""]:
            raise SelectorError(f"{part!r}: the set of values is empty")
        for value in values:
            _check_value(value, part)
        return Requirement(key, found["set_op"], frozenset(values))
    return Requirement(key, "exists")


def _check_key(key: str, part: str) -> None:
    prefix = key.rpartition("/")[0]
    if not _KEY.match(key) or len(prefix) > MAX_PREFIX:
        raise SelectorError(
            f"{part!r}: {key!r} is not a label key (optional DNS prefix and '/', then at "
            "most 63 of A-Z a-z 0-9 - _ . beginning and ending with a letter or digit)"
        )


def _check_value(value: str, part: str) -> None:
    if not _VALUE.match(value):
        raise SelectorError(
            f"{part!r}: {value!r} is not a label value (at most 63 of A-Z a-z 0-9 - _ . "
            "beginning and ending with a letter or digit)"
        )
