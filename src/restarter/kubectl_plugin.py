"""``kubectl restarter``: restarter's commands for people, as a kubectl plugin.

kubectl runs the ``kubectl-restarter`` it finds on PATH for ``kubectl restarter ...`` and
hands it every word after ``restarter`` (kubectl reads none of them), so ``--context``,
``--kubeconfig``, ``-n`` and ``-A`` reach the command itself. Only the commands run here:
the operator never starts from a plugin, whatever the words.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib import metadata

from restarter.commands import plan, release_finalizers, release_plan, resume

PROG = "kubectl restarter"

#: Each command: what runs it (with the words after its name) and its line in the usage.
COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    plan.COMMAND: (plan.main, plan.DESCRIPTION),
    release_plan.COMMAND: (release_finalizers.main, release_plan.DESCRIPTION),
    resume.COMMAND: (resume.main, resume.DESCRIPTION),
}


def version() -> str:
    try:
        return metadata.version("restarter")
    except metadata.PackageNotFoundError:
        return "unknown"


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [
        f"usage: {PROG} COMMAND [flags]",
        "",
        "restarter's commands, with the kubeconfig kubectl uses ($KUBECONFIG, then",
        "~/.kube/config; --kubeconfig and --context choose another).",
        "",
        "commands:",
        *(f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()),
        "",
        f"'{PROG} COMMAND --help' lists a command's flags; '{PROG} version' prints the version.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 for help and version, 2 for an unknown command; else the command's own code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    first = arguments[0] if arguments else "--help"
    if first in ("-h", "--help", "help"):
        print(usage())
        return 0
    if first in ("version", "--version"):
        print(f"kubectl-restarter {version()}")
        return 0
    if first not in COMMANDS:
        print(f"{PROG}: unknown command {first!r}\n\n{usage()}", file=sys.stderr)
        return 2
    run, _ = COMMANDS[first]
    return run(arguments[1:])
