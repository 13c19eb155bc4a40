"""The size of restarter's units: no function over 60 lines and no module over 400 in
src/ (the product). Prints each that is over, and exits 1 when any is; ``hack/test.sh``
runs it, so a long unit fails CI.

    .venv/bin/python hack/unit_sizes.py [--list]    # --list: the ten longest of each

A function's lines run from its ``def`` (or first decorator) to its last line, docstring
and comments included: what a reader has to hold at once.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "src"
MAX_FUNCTION, MAX_MODULE = 60, 400


def functions(path: Path) -> list[tuple[int, str]]:
    """(lines, qualified name) of every function and method in a module."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                last = child.end_lineno or child.lineno
                found.append((last - first + 1, f"{prefix}{child.name}"))
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(path.read_text(), str(path)), "")
    return found


def main(argv: list[str]) -> int:
    modules, units = [], []
    for path in sorted(SOURCES.rglob("*.py")):
        where = path.relative_to(ROOT)
        modules.append((len(path.read_text().splitlines()), str(where)))
        units += [(lines, f"{where}:{name}") for lines, name in functions(path)]
    if "--list" in argv:
        for title, rows in (("functions", units), ("modules", modules)):
            print(f"longest {title}:")
            for lines, name in sorted(rows, reverse=True)[:10]:
                print(f"  {lines:5} {name}")
    over = [
        f"function {name}: {lines} lines (at most {MAX_FUNCTION})"
        for lines, name in units
        if lines > MAX_FUNCTION
    ]
    over += [
        f"module {name}: {lines} lines (at most {MAX_MODULE})"
        for lines, name in modules
        if lines > MAX_MODULE
    ]
    for line in over:
        print(f"unit sizes: {line}", file=sys.stderr)
    if not over:
        print(
            f"unit sizes: every function in src/ is at most {MAX_FUNCTION} lines and every "
            f"module at most {MAX_MODULE}"
        )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
