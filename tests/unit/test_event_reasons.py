"""Every Event reason the code posts is declared in restarter.model.reasons, and every
reason declared there is posted somewhere: the source is read with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

from restarter.model import reasons

SRC = Path(__file__).resolve().parents[2] / "src"
REGISTRY = SRC / "restarter" / "model" / "reasons.py"
#: The module-level names of the registry that are reasons (``RESTARTED``, ...).
CONSTANTS = {
    name: value.name for name, value in vars(reasons).items() if isinstance(value, reasons.Reason)
}


def posted(tree: ast.AST) -> set[str]:
    """The reasons a module posts: a ``reason=`` argument or a ``"reason":`` entry of a dict,
    as a string or as one of the registry's constants (``reasons.RESTARTED``, ``RESTARTED``).
    A string that is not a constant of the registry is returned as is, so it fails."""
    found: set[str] = set()

    def take(value: ast.expr | None) -> None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.add(value.value)
        elif isinstance(value, ast.Attribute) and value.attr in CONSTANTS:
            found.add(CONSTANTS[value.attr])
        elif isinstance(value, ast.Attribute) and value.attr == "name":
            take(value.value)
        elif isinstance(value, ast.Name) and value.id in CONSTANTS:
            found.add(CONSTANTS[value.id])
        elif isinstance(value, ast.IfExp):
            take(value.body)
            take(value.orelse)
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "as_warning"
        ):
            take(value.func.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "reason":
                    take(keyword.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "reason":
                    take(value)
    return found


def posted_by_source() -> dict[str, set[Path]]:
    where: dict[str, set[Path]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == REGISTRY:
            continue
        for name in posted(ast.parse(path.read_text(), filename=str(path))):
            where.setdefault(name, set()).add(path.relative_to(SRC))
    return where


def test_the_scanner_finds_each_way_a_reason_is_posted() -> None:
    code = """
poster.warn(obj, reason="Bogus", message=m)
kopf.event(obj, type="Normal", reason=reasons.RESTARTED, message=m)
api.post_event(plural, ns, name, uid, {"type": "Warning", "reason": "Other", "message": m})
post(obj, reason=ROLLOUT_STALLED.name)
post(obj, reason=reason)
post(obj, reason=RESTART_HELD.as_warning() if unread else INVALID_WINDOW)
"""
    assert posted(ast.parse(code)) == {
        "Bogus",
        "Restarted",
        "Other",
        "RolloutStalled",
        "RestartHeld",
        "InvalidWindow",
    }


def test_every_reason_the_code_posts_is_declared() -> None:
    where = posted_by_source()
    undeclared = {name: sorted(map(str, paths)) for name, paths in where.items()}
    for name in reasons.REASONS:
        undeclared.pop(name, None)
    assert not undeclared, (
        f"Event reasons posted but not declared in src/restarter/model/reasons.py: {undeclared}"
    )


def test_every_reason_restarter_declares_is_posted() -> None:
    # Logging is kopf's: kopf posts it, restarter only declares it.
    posted_by_restarter = set(reasons.REASONS) - {reasons.LOGGING.name}
    unposted = posted_by_restarter - set(posted_by_source())
    assert not unposted, f"declared in restarter.model.reasons but posted nowhere: {unposted}"


def test_each_reason_has_a_type_a_place_and_a_meaning() -> None:
    for name, reason in reasons.REASONS.items():
        assert name == reason.name and name.isidentifier() and name[0].isupper()
        assert reason.type in (reasons.NORMAL, reasons.WARNING) or name == reasons.LOGGING.name
        assert reason.on and reason.meaning and "\n" not in reason.meaning


def test_declared_refuses_an_unknown_reason() -> None:
    assert reasons.declared("Restarted") is reasons.RESTARTED
    try:
        reasons.declared("Restartd")
    except ValueError as error:
        assert "Restartd" in str(error)
    else:
        raise AssertionError("an undeclared reason was accepted")
