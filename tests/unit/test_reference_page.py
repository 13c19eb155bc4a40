"""docs/reference.md is what ``python -m restarter_reference`` prints from the code: a key,
flag, chart value, Event reason or metric added or changed without refreshing the page
fails here."""

from __future__ import annotations

import difflib
from pathlib import Path

import restarter_reference as reference
from restarter.model import keys, reasons

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_the_reference_page_is_what_the_generator_prints() -> None:
    generated = reference.page()
    written = PAGE.read_text() if PAGE.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            written.splitlines(keepends=True),
            generated.splitlines(keepends=True),
            "docs/reference.md",
            "generated",
            n=1,
        )
    )
    assert written == generated, (
        f"docs/reference.md is stale; refresh it with:\n    {reference.COMMAND}\n{diff}"
    )


def test_the_page_lists_every_key_flag_value_reason_and_metric() -> None:
    generated = reference.page()
    for value in (keys.CHECKSUM, keys.RESTART_AT_LABEL, keys.FINALIZER, keys.KUBECTL_RESTARTED_AT):
        assert f"`{value}`" in generated
    for flag in ("--reloader-window WINDOW", "--namespace-selector SELECTOR", "--no-rollouts"):
        assert f"`{flag}`" in generated
    for variable in ("RESTARTER_RELOADER_WINDOW", "RESTARTER_NAMESPACES", "RESTARTER_ROLLOUTS"):
        assert f"`{variable}" in generated
    for value in ("reloaderAnnotations.window", "pacing.maxInFlight", "uninstallHook.timeout"):
        assert f"`{value}`" in generated
    for name in reasons.REASONS:
        assert f"| `{name}` |" in generated
    for metric in ("restarter_restarts_total", "restarter_change_to_restart_seconds"):
        assert f"| `{metric}` |" in generated


def test_a_key_without_its_comment_cannot_hide() -> None:
    described = reference.comments(keys)
    documented = {
        name
        for name, value in vars(keys).items()
        if isinstance(value, str) and not name.startswith("_")
    }
    # Every string constant but the bare prefix is described by a ``#:`` comment.
    assert documented - set(described) == {"PREFIX"}
