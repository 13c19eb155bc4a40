#!/usr/bin/env bash
# The documentation site (mkdocs.yml, pages in docs/), with the locked MkDocs and Material
# theme of the dev environment (hack/setup.sh):
#   hack/docs.sh            serve it at http://127.0.0.1:8000, rebuilt on every edit
#   hack/docs.sh build      write it to site/, failing on a broken link or a page not in
#                           the navigation (--strict, as the unit test builds it)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ -x .venv/bin/mkdocs ]] || { echo "docs: .venv/bin/mkdocs is missing; hack/setup.sh installs it" >&2; exit 1; }
# Material's notice about MkDocs 2 is about a future version, not this site.
export NO_MKDOCS_2_WARNING=1
if [[ "${1:-serve}" == build ]]; then
  exec .venv/bin/mkdocs build --strict "${@:2}"
fi
exec .venv/bin/mkdocs serve "${@:2}"
