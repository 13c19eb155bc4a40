"""The reference page, ``docs/reference.md``, generated from the code that it describes.

Every annotation and label (``restarter.model.keys`` and Reloader's names in
``restarter.model.optin``, each described by its ``#:`` comment), every flag and
environment variable (the options table, ``restarter.services.options``), every chart
value (``charts/restarter/values.yaml``, described by its ``# --`` comments, typed by
``values.schema.json``), every Event reason (``restarter.model.reasons``) and every
Prometheus metric (the collectors restarter registers). A unit test fails when the page
differs from what this prints::

    .venv/bin/python -m restarter_reference > docs/reference.md

A dev tool (the ``restarter-dev`` distribution in ``dev/``), not part of the product: it
reads the chart from the repository, and it imports every layer of restarter.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import pkgutil
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import prometheus_client
import yaml
from prometheus_client.metrics import MetricWrapperBase

import restarter
from restarter.model import keys, optin, reasons
from restarter.services import options

ROOT = Path(__file__).resolve().parents[3]  # dev/src/restarter_reference/__init__.py
CHART = ROOT / "charts" / "restarter"
COMMAND = ".venv/bin/python -m restarter_reference > docs/reference.md"


def comments(module: ModuleType) -> dict[str, str]:
    """The ``#:`` comment above each module-level assignment, by the name assigned."""
    lines = inspect.getsource(module).splitlines()
    found: dict[str, str] = {}
    for node in ast.parse("\n".join(lines)).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        above: list[str] = []
        line = node.lineno - 2
        while line >= 0 and lines[line].lstrip().startswith("#:"):
            above.insert(0, lines[line].lstrip()[2:].strip())
            line -= 1
        for target in targets:
            if isinstance(target, ast.Name) and above:
                found[target.id] = " ".join(above)
    return found


def _cell(text: str) -> str:
    """Markdown table cell: RST literals as Markdown ones, pipes escaped."""
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows),
        "",
    ]


def _written(value: str) -> str:
    """Whether, and as what, restarter writes the key (``keys.WRITTEN``)."""
    for what, written in keys.WRITTEN.items():
        if value in written or f"{value}/" in written:
            return re.sub(r"(?<!^)([A-Z])", r" \1", what).lower()
    return ""


def key_rows() -> list[tuple[str, str, str]]:
    prefixes = {prefix.rstrip("/") for prefix in keys.WRITTEN["workloadAnnotationPrefixes"]}
    rows = []
    for name, text in comments(keys).items():
        value = getattr(keys, name)
        if not isinstance(value, str):
            continue
        shown = (
            f"{value}/<kind>.<name>" if value in prefixes and value != keys.KOPF_PREFIX else value
        )
        if value == keys.KOPF_PREFIX:
            shown = f"{value}/*"
        elif value == keys.DEADLINE:
            shown = f"{value}/<epoch seconds>"
        rows.append((f"`{shown}`", _written(value) or "no: you set it", text))
    return rows


def reloader_rows() -> list[tuple[str, str]]:
    rows = []
    for name, text in comments(optin).items():
        value = getattr(optin, name)
        if not name.startswith("RELOADER_"):
            continue
        names = value.values() if isinstance(value, Mapping) else [value]
        rows.append((", ".join(f"`{each}`" for each in names), text))
    return rows


def flag_rows() -> list[tuple[str, str, str, str]]:
    return [
        (
            f"`{', '.join(sorted(option.flags, key=len))}"
            + (f" {option.metavar}`" if option.metavar else "`"),
            re.sub(r"[A-Z][A-Z_]+(=\w+)?", r"`\g<0>`", option.variables),
            option.default_shown,
            option.what,
        )
        for option in options.OPTIONS
        if option.flag
    ]


def _described_keys(text: str) -> dict[tuple[str, ...], str]:
    """The ``# --`` comment of each key of values.yaml, by its path."""
    described: dict[tuple[str, ...], str] = {}
    path: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if body.startswith("--"):
                comment = [body[2:].strip()]
            elif comment:
                comment.append(body)
            continue
        found = re.match(r"^( *)([A-Za-z0-9_]+):", line)
        if not found:
            comment = []
            continue
        indent = len(found[1])
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, found[2]))
        if comment:
            described[tuple(name for _, name in path)] = " ".join(comment)
        comment = []
    return described


def _schema_at(schema: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    for name in path:
        schema = (schema.get("properties") or {}).get(name) or {}
    return schema


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind:
        return str(kind)
    if "enum" in schema:
        return " or ".join(json.dumps(each) for each in schema["enum"])
    return ""


def _leaves(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(values, dict) and values:
        for name, value in values.items():
            yield from _leaves(value, (*path, name))
    else:
        yield path


def value_rows() -> list[tuple[str, str, str, str]]:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    schema = json.loads((CHART / "values.schema.json").read_text())
    described = _described_keys(text)
    rows = []
    for path, what in described.items():
        value: Any = values
        for name in path:
            value = value[name]
        node = _schema_at(schema, path)
        if node.get("pattern") and node.get("description"):
            what = f"{what} Format: {node['description']}."
        default = json.dumps(value, separators=(", ", ": "))
        rows.append((f"`{'.'.join(path)}`", _type(node), f"`{default}`", what))
    undescribed = [
        ".".join(leaf)
        for leaf in _leaves(values)
        if not any(leaf[: len(path)] == path for path in described)
    ]
    if undescribed:
        raise ValueError(f"chart values without a '# --' comment in values.yaml: {undescribed}")
    return rows


def reason_rows() -> list[tuple[str, str, str, str]]:
    return [
        (f"`{reason.name}`", reason.types, reason.on, reason.meaning)
        for reason in reasons.REASONS.values()
    ]


def _import_every_module() -> None:
    """Every module of restarter (its entry points aside), so that every collector it
    registers is there, whatever this process imported before."""
    for found in pkgutil.walk_packages(restarter.__path__, "restarter."):
        if not found.name.endswith("__main__"):
            importlib.import_module(found.name)


def metric_rows() -> list[tuple[str, str, str, str]]:
    _import_every_module()
    registry = prometheus_client.REGISTRY
    rows = []
    for collector in list(registry._collector_to_names):
        if not isinstance(collector, MetricWrapperBase):
            continue
        name = collector._name
        if not name.startswith("restarter_"):
            continue
        if collector._type == "counter":
            name += "_total"
        labels = ", ".join(f"`{label}`" for label in collector._labelnames)
        rows.append((f"`{name}`", str(collector._type), labels, collector._documentation))
    return sorted(rows)


def page() -> str:
    lines = [
        "# Reference",
        "",
        "<!-- Generated by `python -m restarter_reference` from the code: do not edit.",
        f"     Refresh with: {COMMAND} -->",
        "",
        "Every annotation, label, flag, environment variable, chart value, Event reason and",
        "metric of restarter, as the code defines them. How to use them:",
        "[the user guide](README.md#user-guide).",
        "",
        "## Annotations and labels",
        "",
        "On Secrets, ConfigMaps and workloads (Deployments, StatefulSets, DaemonSets, Argo",
        "Rollouts). *Written by restarter* names what the chart's admission policy lets",
        "restarter change (`charts/restarter/files/written-keys.json`); the others are yours.",
        "`<kind>` is `secret` or `configmap`; a `<name>` too long for an annotation name is",
        "shortened to its first characters and 12 hex digits of its SHA-256.",
        "",
        *_table(("key", "written by restarter", "meaning"), key_rows()),
        "### Reloader's annotations",
        "",
        "Read only with `--reloader-annotations` (the chart's `reloaderAnnotations.enabled`),",
        "by Reloader 1.4.21's rules: [moving from Reloader](guide/moving-from-reloader.md).",
        "",
        *_table(("annotation", "meaning"), reloader_rows()),
        "## Flags and environment variables",
        "",
        "`restarter [options]` runs the operator. Each flag falls back to its variable, then",
        "to its default; a bad value stops the operator at start-up with exit code 2.",
        "`restarter plan --help` and `restarter release-finalizers --help` describe the",
        "subcommands' own flags.",
        "",
        *_table(("flag", "variable", "default", "meaning"), flag_rows()),
        "## Chart values",
        "",
        "`charts/restarter/values.yaml`, checked by `values.schema.json` (unknown keys are",
        "refused).",
        "",
        *_table(("value", "type", "default", "meaning"), value_rows()),
        "## Event reasons",
        "",
        "`kubectl describe` shows them on workloads and ConfigMaps; for a Secret use `kubectl",
        "get events --field-selector involvedObject.kind=Secret,involvedObject.name=NAME`.",
        "",
        *_table(("reason", "type", "on", "meaning"), reason_rows()),
        "## Prometheus metrics",
        "",
        "Served at `/metrics` on `--metrics-port` (the chart's `metrics.port`).",
        "",
        *_table(("metric", "type", "labels", "meaning"), metric_rows()),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m restarter_reference",
        description=f"Print docs/reference.md, generated from the code. {COMMAND}",
    ).parse_args(argv)
    sys.stdout.write(page())
    return 0
