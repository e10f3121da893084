#!/usr/bin/env bash
# README command 2 (and .ci/run): set up, build, check the sources' format,
# run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check_format.sh
ctest --test-dir "${ZOO_BUILD_DIR:-build}" --output-on-failure -j 2
