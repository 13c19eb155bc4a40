#!/usr/bin/env bash
# Prints CHANGELOG.md's entry for a version: the lines under its "## [VERSION]" heading, up
# to the next version's heading. Exits 1, saying so, when the version has no heading or its
# entry is empty. hack/release.sh runs it before publishing anything; its output is the
# release's notes (docs/releasing.md).
#
#   hack/changelog.sh VERSION [CHANGELOG]     e.g. hack/changelog.sh 0.1.0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:?usage: hack/changelog.sh VERSION [CHANGELOG]}"
CHANGELOG="${2:-$ROOT/CHANGELOG.md}"

[[ -f "$CHANGELOG" ]] || { echo "changelog: $CHANGELOG does not exist" >&2; exit 1; }
# Only "- " items count: a heading with no item under it is a version with nothing said.
entry="$(awk -v heading="## [$VERSION]" '
  index($0, "## [") == 1 { inside = (index($0, heading) == 1 && substr($0, length(heading) + 1, 1) ~ /^( |$)/); next }
  /^\[[^]]*\]: / { inside = 0 }  # the link definitions at the end
  inside { print }
' "$CHANGELOG")"
if ! grep -q '^ *- ' <<<"$entry"; then
  echo "changelog: $CHANGELOG has no entry for $VERSION (a \"## [$VERSION] - YYYY-MM-DD\" heading with at least one \"- \" item under it)" >&2
  exit 1
fi
# Without the blank lines around it.
sed -e '/./,$!d' <<<"$entry" | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
