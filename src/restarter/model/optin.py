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
from restarter.model.references import CONFIGMAP, SECRET, SECRET_PROVIDER_CLASS

RELOADER = "reloader.stakater.com"
# Reloader's annotations, read by the rules of Reloader 1.4.21 (its ``common.ShouldReload``),
# checked entry by entry. On a workload, Reloader reads them on the workload when it carries
# one of them for the changed source's kind (the reload list, ``auto``, the typed ``auto``,
# ``search``), else on its pod template; exclude lists only on the workload.

#: On a workload (or its pod template): Go's ParseBool truths (``true``, ``True``, ``1``,
#: ...) select every Secret and ConfigMap its pod template uses (and, with ``--csi``, every
#: SecretProviderClass it mounts, as Reloader with its CSI integration).
RELOADER_AUTO = f"{RELOADER}/auto"
#: On a workload (or its pod template): the same, for Secrets only or ConfigMaps only.
#: ``secretproviderclass.reloader.stakater.com/auto`` selects the SecretProviderClasses it
#: mounts through the Secrets Store CSI Driver (read only with ``--csi``).
RELOADER_TYPED_AUTO = {
    SECRET: f"secret.{RELOADER}/auto",
    CONFIGMAP: f"configmap.{RELOADER}/auto",
    SECRET_PROVIDER_CLASS: f"{SECRET_PROVIDER_CLASS}.{RELOADER}/auto",
}
#: On a workload (or its pod template): a comma list; each entry is the expression
#: ``^entry$`` (``db.prod`` also matches ``db-prod``), and selects the sources of that kind
#: it matches, used by the pod template or not. An entry that is no expression is skipped,
#: with a Warning Event ``InvalidReloadEntry`` on the workload.
RELOADER_RELOAD = {
    SECRET: f"secret.{RELOADER}/reload",
    CONFIGMAP: f"configmap.{RELOADER}/reload",
    SECRET_PROVIDER_CLASS: f"{SECRET_PROVIDER_CLASS}.{RELOADER}/reload",
}
#: On a workload: a comma list of names (exact, not expressions) that nothing selects,
#: not even a reload list.
RELOADER_EXCLUDE = {
    SECRET: f"secrets.exclude.{RELOADER}/reload",
    CONFIGMAP: f"configmaps.exclude.{RELOADER}/reload",
    SECRET_PROVIDER_CLASS: f"{SECRET_PROVIDER_CLASS}es.exclude.{RELOADER}/reload",
}
#: Every kind of source a workload's own opt-in, or Reloader's ``auto``, selects.
ALL_KINDS = frozenset({SECRET, CONFIGMAP, SECRET_PROVIDER_CLASS})
#: On a workload (or its pod template): exactly ``"true"`` selects the sources its pod
#: template uses that carry ``reloader.stakater.com/match: "true"``.
RELOADER_SEARCH = f"{RELOADER}/search"
#: On a source: exactly ``"true"`` answers a workload's ``search``.
RELOADER_MATCH = f"{RELOADER}/match"
#: On a source: exactly ``"true"`` (not ``True``) makes Reloader's annotations select
#: nothing through it; a ``restart-at`` label or a workload's ``restarter.io/restart-at``
#: still does. Not read on a workload, as Reloader does not (use ``restarter.io/ignore``).
RELOADER_IGNORE = f"{RELOADER}/ignore"

#: The annotations that carry a workload's own window.
WINDOW_ANNOTATIONS = (keys.WORKLOAD_RESTART_AT, keys.CRON, keys.TIMEZONE, keys.WINDOW_LENGTH)
#: A reload list entry that only a name equal to it can match (no character of it means
#: anything in an expression); any other entry is an expression, as every entry is for
#: Reloader (``db.prod`` also matches ``db-prod``).
_PLAIN_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _parse_bool(value: str | None) -> bool:
    """Go's strconv.ParseBool truths (no spaces), as Reloader reads ``auto``."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _is_true(value: str | None) -> bool:
    """Reloader's ``== "true"``, for ``search``, ``match`` and ``ignore``."""
    return value == "true"


def _entries(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def reload_expression(entry: str) -> re.Pattern[str]:
    """A reload list entry as Reloader compiles it: ``^entry$``, searched in the name (so
    ``a|b`` is ``^a`` or ``b$``). re.error for an entry that is not an expression."""
    return re.compile(f"^{entry}$")


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
    """(kind, entry) of a reload list that are expressions, matched as ``^entry$``."""

    excluded: frozenset[tuple[str, str]] = frozenset()
    """(kind, name) that Reloader's exclude lists take out, whatever selects them."""

    search: frozenset[str] = frozenset()
    """Source kinds for which Reloader's ``search`` selects the used sources that carry
    ``match: "true"``."""

    reloader: bool = False
    """True when Reloader's annotations select the sources (its ``ignore`` then counts)."""

    invalid: tuple[tuple[str, str, str], ...] = ()
    """(kind, entry, error) of reload list entries that are not expressions: skipped."""

    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(
        default=(), compare=False, repr=False
    )

    def window_annotations(self) -> dict[str, str]:
        return dict(self.window)

    def matches_pattern(self, kind: str, name: str) -> bool:
        return any(k == kind and regex.search(name) for k, regex in self._compiled)

    def selects(self, kind: str, name: str, source_annotations: Mapping[str, str]) -> bool:
        """True when a change of this source, which the workload uses (or names), asks for
        a restart in the workload's window. Reloader's order: the source's ``ignore``, the
        exclude lists, the reload lists, ``search`` with ``match``, ``auto``."""
        if self.reloader and _is_true(source_annotations.get(RELOADER_IGNORE)):
            return False
        if (kind, name) in self.excluded:
            return False
        if (kind, name) in self.named or self.matches_pattern(kind, name):
            return True
        if kind in self.search and _is_true(source_annotations.get(RELOADER_MATCH)):
            return True
        return kind in self.kinds

    def may_select(self, kind: str, name: str) -> bool:
        """``selects`` for some source metadata: whether a change of it must be looked at."""
        if (kind, name) in self.excluded:
            return False
        return (
            (kind, name) in self.named
            or self.matches_pattern(kind, name)
            or kind in self.kinds
            or kind in self.search
        )


def _reloader_annotations(
    kind: str, annotations: Mapping[str, str], pod_annotations: Mapping[str, str]
) -> Mapping[str, str]:
    """Where Reloader reads its annotations for a change of a source of ``kind``: on the
    workload when it carries one of them for that kind, else on the pod template."""
    own = (RELOADER_RELOAD[kind], RELOADER_AUTO, RELOADER_TYPED_AUTO[kind], RELOADER_SEARCH)
    return annotations if any(name in annotations for name in own) else pod_annotations


def _reloader_opt_in(
    window: tuple[tuple[str, str], ...],
    annotations: Mapping[str, str],
    pod_annotations: Mapping[str, str],
    own: bool,
) -> OptIn | None:
    """Reloader's annotations, kind by kind, with the workload's own opt-in (``own``)."""
    kinds: set[str] = set(ALL_KINDS) if own else set()
    search: set[str] = set()
    named: set[tuple[str, str]] = set()
    patterns: list[tuple[str, str]] = []
    compiled: list[tuple[str, re.Pattern[str]]] = []
    invalid: list[tuple[str, str, str]] = []
    for kind in sorted(ALL_KINDS):
        found = _reloader_annotations(kind, annotations, pod_annotations)
        if _parse_bool(found.get(RELOADER_AUTO)) or _parse_bool(
            found.get(RELOADER_TYPED_AUTO[kind])
        ):
            kinds.add(kind)
        if _is_true(found.get(RELOADER_SEARCH)):
            search.add(kind)
        for entry in _entries(found.get(RELOADER_RELOAD[kind])):
            if _PLAIN_NAME.fullmatch(entry):
                named.add((kind, entry))
                continue
            try:
                compiled.append((kind, reload_expression(entry)))
            except re.error as error:
                invalid.append((kind, entry, str(error)))
                continue
            patterns.append((kind, entry))
    # Exclude lists are read on the workload only, and name sources exactly.
    excluded = {
        (kind, entry)
        for kind, name in RELOADER_EXCLUDE.items()
        for entry in _entries(annotations.get(name))
    }
    # An excluded name is no dependency either, even when a reload list names it.
    named -= excluded
    if not (kinds or named or patterns or search or invalid):
        return None
    return OptIn(
        window,
        frozenset(kinds),
        frozenset(named),
        tuple(patterns),
        frozenset(excluded),
        frozenset(search),
        # The workload's own opt-in selects every source, whatever Reloader's ignore on a
        # source says; without it, Reloader's rules hold.
        reloader=not own,
        invalid=tuple(invalid),
        _compiled=tuple(compiled),
    )


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
        pod_annotations = (pod_metadata or {}).get("annotations") or {}
        return _reloader_opt_in(window, annotations, pod_annotations, own)
    if own:
        return OptIn(window, ALL_KINDS)
    return None


def invalid_entries_message(optin: OptIn) -> str:
    """What a workload hears about reload list entries that are no regular expression:
    each entry, its annotation and why, and that the entry is skipped."""
    entries = "; ".join(
        f"{RELOADER_RELOAD[kind]} entry {entry!r} is not a regular expression ({error})"
        for kind, entry, error in optin.invalid
    )
    return f"{entries}: skipped, the other entries still count"
