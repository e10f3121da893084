#!/usr/bin/env bash
# Writes docs/config_reference.md from zoo's schema (zoo --help-config=markdown).
# The test Docs.ConfigReferenceIsWhatZooPrints fails until this has been run
# after a key, its type, default or doc changed.
set -euo pipefail
cd "$(dirname "$0")/.."
zoo="${ZOO_BUILD_DIR:-build}/zoo"
[[ -x "$zoo" ]] || scripts/setup.sh zoo >/dev/null
"$zoo" --help-config=markdown > docs/config_reference.md.tmp
mv docs/config_reference.md.tmp docs/config_reference.md
echo "Wrote docs/config_reference.md ($(wc -l < docs/config_reference.md) lines)"
