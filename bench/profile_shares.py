"""Where a py-spy profile's samples go: ``python -m bench.profile_shares FILE.speedscope.json``.

Reads a speedscope file that ``bench/run --profile`` or ``bench/run many-sources --profile``
wrote (py-spy, all threads, each sample the thread holding the GIL) and prints the share
of samples in which each function appears (inclusive, counted once per sample), and the
share each function spends itself (self), the largest first. ``--match`` keeps only functions whose
file or name contains one of the given texts (inclusive table only).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def shares(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """The number of samples, and per function the samples it is in and the samples it is
    the innermost frame of (weighted as py-spy weights them)."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    names = [f"{frame['name']} ({Path(frame.get('file') or '?').name})" for frame in frames]
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for profile in data["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            total += weight
            for name in {names[index] for index in stack}:
                inclusive[name] += weight
            if stack:
                own[names[stack[-1]]] += weight
    return total, inclusive, own


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_shares", description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", action="append", default=[], help="e.g. restarter, kopf")
    args = parser.parse_args(argv)
    total, inclusive, own = shares(args.file)
    print(f"{total} samples")
    print("\ninclusive (share of samples that pass through it):")
    shown = 0
    for name, count in inclusive.most_common():
        if args.match and not any(text in name for text in args.match):
            continue
        print(f"{100 * count / total:6.1f} %  {name}")
        shown += 1
        if shown >= args.top:
            break
    print("\nself (share of samples spent in it):")
    for name, count in own.most_common(args.top):
        print(f"{100 * count / total:6.1f} %  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
