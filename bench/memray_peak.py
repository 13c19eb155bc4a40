"""What was live at an operator's peak, from a ``bench/run --memprofile`` memray file.

``python -m bench.memray_peak <file.memray.bin> [--depth N]`` prints memray's high-water
mark, the live bytes by kind of allocation (the innermost frames that say what holds
them), and the largest call stacks.
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence

import memray

#: Kinds of allocation, by a fragment of any frame of its stack (first match wins).
KINDS = (
    (
        "kopf's list pages (fetch_objs: whole objects, a page at once)",
        ("kopf/_cogs/clients/fetching.py",),
    ),
    ("kopf's watch events (whole objects)", ("kopf/_cogs/clients/watching.py",)),
    ("sources read by a check (read_source)", ("read_source",)),
    ("TLS connections posting kopf's Events", ("kopf/_cogs/clients/events.py",)),
    ("TLS connections, other (aiohttp's, kopf's)", ("asyncio/sslproto.py",)),
    ("TLS connections, other", ("/ssl.py",)),
    ("JSON parsed: list pages (workloads, source metadata)", ("list_page",)),
    ("JSON parsed: other lists", ("list_namespaces", "labelled_names")),
    ("JSON parsed: elsewhere", ("json/decoder.py", "msgspec")),
    ("imports and code", ("importlib", "<frozen")),
)


def kind_of(stack: Sequence[tuple[str, str, int]]) -> str:
    text = " ".join(f"{file} {function}" for function, file, _ in stack)
    for kind, fragments in KINDS:
        if any(fragment in text for fragment in fragments):
            return kind
    return "other"


def _short(file: str) -> str:
    return file.split("site-packages/")[-1].split("/src/")[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memray_peak", description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--depth", type=int, default=6, help="frames shown per stack")
    args = parser.parse_args(argv)
    reader = memray.FileReader(args.file)
    records = list(reader.get_high_watermark_allocation_records(merge_threads=True))
    total = sum(record.size for record in records)
    print(f"peak (memray high-water mark): {reader.metadata.peak_memory / 2**20:.1f} MiB")
    print(
        f"live at the peak: {total / 2**20:.1f} MiB in "
        f"{sum(record.n_allocations for record in records)} allocations\n"
    )
    kinds: collections.Counter[str] = collections.Counter()
    stacks: collections.Counter[str] = collections.Counter()
    for record in records:
        stack = record.stack_trace()
        kinds[kind_of(stack)] += record.size
        frames = [f"{_short(file)}:{line} {function}" for function, file, line in stack]
        stacks[" <- ".join(frames[: args.depth])] += record.size
    print("| live at the peak, by kind | MiB | share |\n|---|---|---|")
    for kind, size in kinds.most_common():
        print(f"| {kind} | {size / 2**20:.1f} | {size / total:.0%} |")
    print("\nlargest stacks (innermost frame first):")
    for stack, size in stacks.most_common(12):
        print(f"{size / 2**20:8.1f} MiB  {stack}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
