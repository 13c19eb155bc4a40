"""What the import-linter contracts (pyproject.toml, run by hack/test.sh) cannot say:
the pure model may import only the standard library, itself and a few value libraries,
and every module of the package belongs to one of its layers."""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import restarter

PACKAGE = Path(restarter.__file__).parent
#: What the pure model may import besides the standard library and itself.
#: msgspec decodes bodies into plain values: no I/O, no client; cryptography reads a
#: certificate's expiry.
MODEL_LIBRARIES = {"pytz", "croniter", "msgspec", "cryptography"}
#: Modules beside the layers: the package and ``python -m restarter``.
BESIDE_THE_LAYERS = {"restarter", "restarter.__main__"}
#: The only modules that may import each library; the contracts forbid it to every other.
IMPORTERS = {
    "kubernetes": {
        "restarter.services.kube.connecting",
        "restarter.services.kube.endpoints",
        "restarter.services.kube.requesting",
        "restarter.services.kube.watching",
        "restarter.services.leadership",
    },
    "kopf": {"restarter.main", "restarter.operator", "restarter.services.logs"},
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str) -> set[str]:
    """Every module ``module`` imports by name (``from a import b``: ``a``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import"
            assert node.module is not None
            found.add(node.module)
    return found


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def within(module: str, names: Iterable[str]) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in names)


def layers() -> list[str]:
    """The modules and packages named by restarter's layers contract."""
    contract = next(
        contract
        for contract in contracts()
        if contract["type"] == "layers" and contract["name"].startswith("restarter:")
    )
    return [name.strip().strip("()") for layer in contract["layers"] for name in layer.split("|")]


def test_every_module_belongs_to_a_layer_of_the_contract() -> None:
    named = layers()
    outside = {
        module
        for module in MODULES
        if module not in BESIDE_THE_LAYERS
        and not any(module == layer or module.startswith(f"{layer}.") for layer in named)
    }
    assert not outside, f"in no layer of the contract: {sorted(outside)}"


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("restarter.model")])
def test_the_model_imports_only_the_standard_library_its_own_modules_and_time_zones(
    module: str,
) -> None:
    foreign = {
        imported
        for imported in imports(module)
        if not (
            imported.split(".")[0] in sys.stdlib_module_names
            or imported.split(".")[0] in MODEL_LIBRARIES
            or imported == "restarter.model"
            or imported.startswith("restarter.model.")
        )
    }
    assert not foreign, f"{module} imports {sorted(foreign)}"


@pytest.mark.parametrize("library", sorted(IMPORTERS))
def test_every_module_but_its_few_importers_is_forbidden_the_library(library: str) -> None:
    forbidding = [
        contract
        for contract in contracts()
        if contract["type"] == "forbidden" and library in contract["forbidden_modules"]
    ]
    sources = {name for contract in forbidding for name in contract["source_modules"]}
    allowed = IMPORTERS[library]
    # A package that names an allowed module (``restarter.services``) cannot be a source
    # itself; its ``__init__`` must then import nothing.
    uncovered = {
        module
        for module in MODULES
        if not within(module, allowed)
        and not within(module, sources)
        and not (MODULES[module].name == "__init__.py" and not imports(module))
    }
    assert not uncovered, f"no contract forbids {library} to {sorted(uncovered)}"
    assert not {module for module in allowed if within(module, sources)}, (
        f"a contract forbids {library} to one of its importers {sorted(allowed)}"
    )


def test_no_module_imports_a_private_module_of_a_library() -> None:
    private = {
        module: sorted(
            imported
            for imported in imports(module)
            if imported.split(".")[0] not in ("restarter", "__future__")
            and any(part.startswith("_") for part in imported.split(".")[1:])
        )
        for module in MODULES
    }
    assert not {module: found for module, found in private.items() if found}
