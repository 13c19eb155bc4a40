"""stakater/Reloader, the peer the benchmarks compare with: which version, where its binary is
expected, and how to build it from the source snapshot."""

from __future__ import annotations

import hashlib
from pathlib import Path

RELOADER_VERSION = "1.4.21"
RELOADER_BINARY = Path(f"~/.cache/restarter/peers/{RELOADER_VERSION}/reloader").expanduser()
OPENSHIFT_API = "github.com/openshift/api@v0.0.0-20260420151639-34e60874783e"
RELOADER_BUILD = (
    "Reloader is not built at {binary}. Build it (about 3 min, see "
    "/work/shared/peers/README.md):\n"
    f"    tar -xzf /work/shared/peers/reloader-{RELOADER_VERSION}-src.tar.gz -C /tmp\n"
    f"    cd /tmp/reloader-{RELOADER_VERSION}\n"
    f"    go mod edit -replace github.com/openshift/api={OPENSHIFT_API}\n"
    f'    go build -mod=mod -o "$HOME/.cache/restarter/peers/{RELOADER_VERSION}/reloader" .\n'
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
