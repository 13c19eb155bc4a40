"""stakater/Reloader, the peer the benchmarks compare with: which version, where its binary is
expected, and how to build it from the source snapshot."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

RELOADER_VERSION = "1.4.21"
#: Where bench/run looks for Reloader's binary by default (--reloader-binary overrides it).
RELOADER_BINARY = (
    Path(os.environ.get("RESTARTER_CACHE", "~/.cache/restarter")).expanduser()
    / "peers"
    / RELOADER_VERSION
    / "reloader"
)
#: The one dependency of Reloader's module that the Go module proxy does not serve at the
#: pseudo-version it requires; this one builds.
OPENSHIFT_API = "github.com/openshift/api@v0.0.0-20260420151639-34e60874783e"
#: How to build the peer, printed when its binary is missing. Its source is Reloader's own
#: repository at the release's tag (its module is not served by the Go module proxy), cloned
#: into $RELOADER_SRC (docs/development.md, Benchmarks).
RELOADER_BUILD = (
    "Reloader is not built at {binary}. Build it from its source at tag "
    f"v{RELOADER_VERSION} (about 3 min), in $RELOADER_SRC or any directory:\n"
    f'    RELOADER_SRC="${{{{RELOADER_SRC:-/tmp/reloader-{RELOADER_VERSION}}}}}"\n'
    f"    git clone --depth 1 --branch v{RELOADER_VERSION} "
    'https://github.com/stakater/Reloader "$RELOADER_SRC"\n'
    '    cd "$RELOADER_SRC"\n'
    f"    go mod edit -replace github.com/openshift/api={OPENSHIFT_API}\n"
    '    go build -mod=mod -o "{binary}" .\n'
    "(keep the binary's name: its user agent, reloader/..., is how the audit counts its "
    "requests), or leave it out: --operators restarter,naive"
)


def sha256(path: Path) -> str:
    """The binary's digest, kept with the results: which build was measured."""
    digest = hashlib.sha256()
    with path.open("rb") as binary:
        for block in iter(lambda: binary.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
