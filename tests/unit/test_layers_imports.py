"""The layout's rules, read from the source's imports (like an import-linter contract):
the model is pure and stands alone, and the layers import only downwards."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import restarter

PACKAGE = Path(restarter.__file__).parent
#: What the pure model may import besides the standard library and itself.
#: msgspec decodes bodies into plain values: no I/O, no client; cryptography reads a
#: certificate's expiry.
MODEL_LIBRARIES = {"pytz", "croniter", "msgspec", "cryptography"}
#: Modules that talk to the API, serve HTTP or run handlers: none of them is pure.
IMPURE = {"kopf", "kubernetes", "urllib3", "prometheus_client"}
#: Pure modules outside the model: they reach none of IMPURE, not even through others.
PURE_ELSEWHERE = (
    "restarter.cluster.reference_map",
    "restarter.cluster.seen_marks",
    "restarter.restarting.pacing",
    "restarter.restarting.rollouts",
    "restarter.commands.planning",
    "restarter.commands.release_plan",
    "restarter.runtime.settings",
)
#: Each layer imports none of the layers after it; runtime's services (settings, kube,
#: metrics, leadership) are for every layer, its wiring (main, handlers) for none.
LAYERS = ("model", "cluster", "restarting", "commands")
WIRING = ("restarter.runtime.main", "restarter.runtime.handlers")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str) -> set[str]:
    """Every module ``module`` imports (``from a import b`` counts ``a.b`` when it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import"
            assert node.module is not None
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if f"{node.module}.{alias.name}" in MODULES
            )
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def reachable(module: str) -> set[str]:
    """Every module imported by ``module``, directly or through restarter's own modules."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for imported in imports(todo.pop()) - seen:
            seen.add(imported)
            if imported in MODULES:
                todo.append(imported)
    return seen


def test_the_package_holds_its_five_layers_and_only_its_entry_beside_them() -> None:
    packaged = {module for module in MODULES if module.count(".") > 1}
    assert set(MODULES) - packaged == {
        "restarter",
        "restarter.__main__",
        *(f"restarter.{name}" for name in (*LAYERS, "runtime")),
    }


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) == "model"])
def test_the_model_imports_only_the_standard_library_its_own_modules_and_time_zones(
    module: str,
) -> None:
    foreign = {
        imported
        for imported in imports(module)
        if not (
            top(imported) in sys.stdlib_module_names
            or top(imported) in MODEL_LIBRARIES
            or imported == "restarter.model"
            or imported.startswith("restarter.model.")
        )
    }
    assert not foreign, f"{module} imports {sorted(foreign)}"


@pytest.mark.parametrize("module", PURE_ELSEWHERE)
def test_pure_modules_reach_neither_kopf_nor_a_client(module: str) -> None:
    impure = {imported for imported in reachable(module) if top(imported) in IMPURE}
    assert not impure, f"{module} reaches {sorted(impure)}"


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) in LAYERS])
def test_a_layer_imports_no_layer_after_it(module: str) -> None:
    later = LAYERS[LAYERS.index(layer(module)) + 1 :]
    upward = {
        imported
        for imported in imports(module)
        if top(imported) == "restarter" and (layer(imported) in later or imported in WIRING)
    }
    assert not upward, f"{module} imports {sorted(upward)}"
