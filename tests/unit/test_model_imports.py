"""What the import-linter contracts (pyproject.toml, run by hack/test.sh) cannot say:
the pure model may import only the standard library, itself and a few value libraries,
and every module of the package belongs to one of its layers."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

import restarter

PACKAGE = Path(restarter.__file__).parent
#: What the pure model may import besides the standard library and itself.
#: msgspec decodes bodies into plain values: no I/O, no client; cryptography reads a
#: certificate's expiry.
MODEL_LIBRARIES = {"pytz", "croniter", "msgspec", "cryptography"}
#: Modules beside the layers: the package and ``python -m restarter``.
BESIDE_THE_LAYERS = {"restarter", "restarter.__main__"}


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


def layers() -> list[str]:
    """The modules and packages named by restarter's layers contract."""
    config = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    contract = next(
        contract
        for contract in config["tool"]["importlinter"]["contracts"]
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
