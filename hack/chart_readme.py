"""charts/restarter/README.md, the chart's page on Artifact Hub, written from the chart:
Chart.yaml's name, version and description, and every value of values.yaml with the
``# --`` comment above it (the comment convention of helm-docs). With ``--changes``, the
``artifacthub.io/changes`` annotation of Chart.yaml, from CHANGELOG.md's entry for the
chart's version.

    .venv/bin/python hack/chart_readme.py > charts/restarter/README.md
    .venv/bin/python hack/chart_readme.py --changes

Unit tests fail when the README or the annotation is not what this prints, and when a value
has no comment.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "restarter"
COMMAND = ".venv/bin/python hack/chart_readme.py > charts/restarter/README.md"

_KEY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z0-9_]+):(?:\s|$)")
_DESCRIBED = re.compile(r"^(?P<indent> *)# -- (?P<text>.*)$")
_CONTINUED = re.compile(r"^(?P<indent> *)#(?: (?P<text>.*))?$")


@dataclass(frozen=True)
class Value:
    """One documented value: its dotted path, its default and its ``# --`` comment."""

    path: tuple[str, ...]
    default: Any
    description: str

    @property
    def name(self) -> str:
        return ".".join(self.path)


def described(text: str) -> dict[tuple[str, ...], str]:
    """The ``# --`` comment of each key of a values file, by the key's path. A comment runs
    from its ``# --`` line through the comment lines that follow, up to its key."""
    found: dict[tuple[str, ...], str] = {}
    parents: list[tuple[int, str]] = []  # (indent, name) of the keys enclosing this line
    comment: list[str] | None = None
    for line in text.splitlines():
        if start := _DESCRIBED.match(line):
            comment = [start["text"]]
            continue
        if comment is not None and (more := _CONTINUED.match(line)):
            comment.append(more["text"] or "")
            continue
        key = _KEY.match(line)
        if key is None:
            if line.strip():
                comment = None
            continue
        indent = len(key["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (*(name for _, name in parents), key["name"])
        if comment is not None:
            found[path] = " ".join(part.strip() for part in comment if part.strip())
            comment = None
        parents.append((indent, key["name"]))
    return found


def leaves(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every path of values.yaml that holds a value that is not a non-empty mapping."""
    if isinstance(values, dict) and values:
        for name, value in values.items():
            yield from leaves(value, (*path, str(name)))
    else:
        yield path


def documented_values() -> list[Value]:
    """The values' rows, in the file's order; raises ValueError naming any value that no
    comment covers (neither its own nor an enclosing key's)."""
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    comments = described(text)
    uncovered = [
        ".".join(leaf)
        for leaf in leaves(values)
        if not any(leaf[: len(path)] == path for path in comments)
    ]
    if uncovered:
        raise ValueError(f"values without a '# --' comment in values.yaml: {uncovered}")
    rows = []
    for path, description in comments.items():
        default: Any = values
        for part in path:
            default = default[part]
        rows.append(Value(path, default, description))
    return rows


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list"}.get(
        type(value), "object"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme() -> str:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    lines = [
        f"<!-- Generated from values.yaml by hack/chart_readme.py; refresh: {COMMAND} -->",
        "",
        f"# {chart['name']}",
        "",
        chart["description"],
        "",
        "restarter restarts Deployments, StatefulSets, DaemonSets and Argo Rollouts when the",
        "Secrets and ConfigMaps they read change: not at once, but inside the restart window",
        "chosen by the source's owner (`kubectl label secret db restart-at=03.00`), once for",
        "all the changes that arrived before it, only the workloads that read a key that",
        "changed, and at a pace the cluster can take.",
        "",
        "## Install",
        "",
        "```sh",
        f"helm install restarter oci://REGISTRY/charts/restarter --version {chart['version']} \\",
        "  -n restarter-system --create-namespace --set timezone=Europe/Warsaw",
        "```",
        "",
        f"The chart's `appVersion` ({chart['appVersion']}) is the image's tag; a chart published",
        "by `hack/release.sh` pins the image by digest. `values.schema.json` refuses unknown",
        "keys and malformed values at install. The project's documentation (install, windows,",
        "monitoring, moving from Reloader, security) is built from its `docs/` folder.",
        "",
        "## Values",
        "",
        "| key | type | default | description |",
        "|---|---|---|---|",
    ]
    for value in documented_values():
        default = json.dumps(value.default, separators=(", ", ": "))
        lines.append(
            f"| `{value.name}` | {_type(value.default)} | `{_cell(default)}` "
            f"| {_cell(value.description)} |"
        )
    return "\n".join(lines) + "\n"


def changes(version: str, changelog: str) -> list[dict[str, str]]:
    """The items of a version's changelog entry as Artifact Hub's changes: the kind from the
    heading above each (Added, Changed, ...), the description in plain text."""
    entry = re.search(
        rf"^## \[{re.escape(version)}\][^\n]*\n(?P<body>.*?)(?=^## \[|\Z)",
        changelog,
        re.MULTILINE | re.DOTALL,
    )
    if entry is None:
        raise ValueError(f"CHANGELOG.md has no entry for {version}")
    found: list[dict[str, str]] = []
    kind = "changed"
    for block in re.split(r"\n(?=### |- )", entry["body"]):
        if block.startswith("### "):
            kind = block[4:].split("\n", 1)[0].strip().lower()
        elif block.startswith("- "):
            text = " ".join(line.strip() for line in block[2:].splitlines() if line.strip())
            found.append({"kind": kind, "description": text.replace("**", "")})
    return found


def changes_annotation() -> str:
    """Chart.yaml's artifacthub.io/changes: YAML text, as the annotation holds it."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    listed = changes(str(chart["version"]), (ROOT / "CHANGELOG.md").read_text())
    return yaml.safe_dump(listed, sort_keys=False, width=1000)


def main(argv: list[str]) -> int:
    sys.stdout.write(changes_annotation() if argv == ["--changes"] else readme())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
