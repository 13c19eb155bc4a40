"""Workloads that opt in: which of the sources they use they ask restarts for, and whose
window applies.

A workload opts in with ``restarter.io/restart-at`` (every source it uses, in its own
window), or, when the operator honours them, with Reloader's annotations (the sources
they select, in the workload's ``restarter.io/restart-at`` window if it has one, else in
the operator's default). The precedence rule for a workload that opted in for a source
that is labelled too: **the workload's window wins** — its owner bears the restart.

Pure: annotations in, an ``OptIn`` (or None) out; the source's side (Reloader's ``ignore``
and ``match``) is read at the change, from the source's metadata.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import keys
from restarter.model.references import CONFIGMAP, SECRET

RELOADER = "reloader.stakater.com"
#: Reloader's workload annotations (its 1.4.14 names) and the source kinds each concerns.
RELOADER_AUTO = f"{RELOADER}/auto"
RELOADER_TYPED_AUTO = {SECRET: f"secret.{RELOADER}/auto", CONFIGMAP: f"configmap.{RELOADER}/auto"}
RELOADER_RELOAD = {SECRET: f"secret.{RELOADER}/reload", CONFIGMAP: f"configmap.{RELOADER}/reload"}
RELOADER_EXCLUDE = {
    SECRET: f"secrets.exclude.{RELOADER}/reload",
    CONFIGMAP: f"configmaps.exclude.{RELOADER}/reload",
}
RELOADER_SEARCH = f"{RELOADER}/search"
#: On a source: ``match: "true"`` answers a workload's ``search``; ``ignore: "true"`` on a
#: source (or a workload) makes Reloader's annotations select nothing through it.
RELOADER_MATCH = f"{RELOADER}/match"
RELOADER_IGNORE = f"{RELOADER}/ignore"

#: The annotations that make a workload opt in through Reloader's names.
_RELOADER_OPT_INS = (
    RELOADER_AUTO,
    RELOADER_SEARCH,
    *RELOADER_TYPED_AUTO.values(),
    *RELOADER_RELOAD.values(),
)
#: The annotations that carry a workload's own window.
WINDOW_ANNOTATIONS = (keys.WORKLOAD_RESTART_AT, keys.CRON, keys.TIMEZONE, keys.WINDOW_LENGTH)
#: A reload list entry that is a plain source name is matched as that name; any other
#: entry is a regular expression matched against the whole name, as Reloader does.
_PLAIN_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def _true(value: str | None) -> bool:
    """Go's strconv.ParseBool truths, as Reloader reads its flags."""
    return (value or "").strip() in ("1", "t", "T", "TRUE", "true", "True")


def _entries(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


@dataclass(frozen=True)
class OptIn:
    """What a workload opted in for, and the annotations its window is read from."""

    window: tuple[tuple[str, str], ...]
    """The workload's window annotations (``WINDOW_ANNOTATIONS``) as (name, value)."""

    kinds: frozenset[str] = frozenset()
    """Source kinds of which every source the workload uses is selected."""

    named: frozenset[tuple[str, str]] = frozenset()
    """(kind, name) selected by a reload list, used by the pod template or not."""

    patterns: tuple[tuple[str, str], ...] = ()
    """(kind, regular expression) entries of a reload list, anchored at both ends."""

    excluded: frozenset[tuple[str, str]] = frozenset()
    """(kind, name) that Reloader's exclude lists take out of ``kinds``."""

    search: bool = False
    """Reloader's ``search``: the sources it uses that carry ``match: "true"``."""

    reloader: bool = False
    """True when Reloader's annotations select the sources (its ``ignore`` then counts)."""

    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(
        default=(), compare=False, repr=False
    )

    def window_annotations(self) -> dict[str, str]:
        return dict(self.window)

    def matches_pattern(self, kind: str, name: str) -> bool:
        return any(k == kind and regex.fullmatch(name) for k, regex in self._compiled)

    def selects(self, kind: str, name: str, source_annotations: Mapping[str, str]) -> bool:
        """True when a change of this source, which the workload uses (or names), asks for
        a restart in the workload's window."""
        if self.reloader and _true(source_annotations.get(RELOADER_IGNORE)):
            return False
        if (kind, name) in self.named or self.matches_pattern(kind, name):
            return True
        if (kind, name) in self.excluded:
            return False
        if kind in self.kinds:
            return True
        return self.search and _true(source_annotations.get(RELOADER_MATCH))

    def may_select(self, kind: str, name: str) -> bool:
        """``selects`` for some source metadata: whether a change of it must be looked at."""
        return (
            (kind, name) in self.named
            or self.matches_pattern(kind, name)
            or ((kind, name) not in self.excluded and (kind in self.kinds or self.search))
        )


def _reloader_annotations(
    metadata: Mapping[str, Any], pod_metadata: Mapping[str, Any]
) -> dict[str, str]:
    """Reloader reads its annotations on the workload, or, when it has none of them, on the
    pod template."""
    annotations = metadata.get("annotations") or {}
    if any(name in annotations for name in _RELOADER_OPT_INS):
        return dict(annotations)
    return dict(pod_metadata.get("annotations") or {})


def opt_in(
    metadata: Mapping[str, Any], pod_metadata: Mapping[str, Any] | None, reloader: bool
) -> OptIn | None:
    """What the workload opted in for (None: nothing). ``reloader``: the operator honours
    Reloader's annotations."""
    annotations = metadata.get("annotations") or {}
    if annotations.get(keys.IGNORE) == "true":
        return None
    window = tuple((name, annotations[name]) for name in WINDOW_ANNOTATIONS if name in annotations)
    own = keys.WORKLOAD_RESTART_AT in annotations
    if reloader:
        found = _reloader_annotations(metadata, pod_metadata or {})
        if _true(annotations.get(RELOADER_IGNORE)):
            return OptIn(window, frozenset({SECRET, CONFIGMAP})) if own else None
        kinds = {SECRET, CONFIGMAP} if _true(found.get(RELOADER_AUTO)) or own else set()
        kinds |= {kind for kind, name in RELOADER_TYPED_AUTO.items() if _true(found.get(name))}
        named: set[tuple[str, str]] = set()
        patterns: list[tuple[str, str]] = []
        for kind, name in RELOADER_RELOAD.items():
            for entry in _entries(found.get(name)):
                if _PLAIN_NAME.fullmatch(entry):
                    named.add((kind, entry))
                else:
                    patterns.append((kind, entry))
        excluded = {
            (kind, entry)
            for kind, name in RELOADER_EXCLUDE.items()
            for entry in _entries(found.get(name))
        }
        search = _true(found.get(RELOADER_SEARCH))
        if kinds or named or patterns or search:
            compiled = []
            for kind, pattern in patterns:
                try:
                    compiled.append((kind, re.compile(pattern)))
                except re.error:
                    continue  # Reloader skips an entry that is not a regular expression
            return OptIn(
                window,
                frozenset(kinds),
                frozenset(named),
                tuple(patterns),
                frozenset(excluded),
                search,
                # The workload's own opt-in selects every source, whatever Reloader's
                # ignore on a source says; without it, Reloader's rules hold.
                reloader=not own,
                _compiled=tuple(compiled),
            )
    if own:
        return OptIn(window, frozenset({SECRET, CONFIGMAP}))
    return None
