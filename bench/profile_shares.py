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


#: Where restarter's CPU goes, by the first of these functions a sample passes through
#: (checked in this order); a sample in none of them is "other" (the event loop itself,
#: the thread pools' hand-offs, the threads' waits for the GIL).
PARTS = (
    ("kopf: parsing its watches' events (json)", ("stream (api.py)",)),
    ("kopf: handling each event", ("process_resource_event (processing.py)",)),
    ("restarter's own streams (list, watch, decode, observe)", ("ListWatch.run",)),
    ("Events posted", ("Events.post (events.py)",)),
    ("PATCH workloads (stamps, labels, restarts)", ("Patcher.patch_workload",)),
    ("PATCH sources (checksums, change records)", ("Patcher.patch_source",)),
    ("reads (GET, LIST)", ("Reader.",)),
    ("stamping: deciding and fanning out", ("reconcile_source", "_Stamping")),
    ("the timer: deciding a restart", ("restart_when_due", "_act (ticking.py)")),
    ("admission: the queue of due workloads", ("Admitter.", "Admissions.")),
)


def parts(path: Path) -> tuple[float, Counter[str]]:
    """Samples per part of ``PARTS`` (each sample counted once, in its first part)."""
    data = json.loads(path.read_text())
    names = [
        f"{frame['name']} ({Path(frame.get('file') or '?').name})"
        for frame in data["shared"]["frames"]
    ]
    total, found = 0.0, Counter[str]()
    for profile in data["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            total += weight
            here = [names[index] for index in stack]
            part = next(
                (label for label, marks in PARTS if any(m in n for m in marks for n in here)),
                "other",
            )
            found[part] += weight
    return total, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_shares", description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", action="append", default=[], help="e.g. restarter, kopf")
    parser.add_argument(
        "--parts", action="store_true", help="only the shares of restarter's parts (PARTS)"
    )
    args = parser.parse_args(argv)
    if args.parts:
        total, found = parts(args.file)
        for label, count in found.most_common():
            print(f"{100 * count / total:6.1f} %  {label}")
        return 0
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
