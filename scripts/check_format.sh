#!/usr/bin/env bash
# Fails, listing what differs, when a C++ source is not as clang-format
# (.clang-format: Google style, 120 columns) would write it. Installs
# Debian's clang-format when missing. scripts/test.sh runs it; to fix:
#   git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "zoo: installing clang-format"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-format >/dev/null
fi
mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/')
printf '%s\0' "${sources[@]}" | xargs -0 -n 50 -P 2 clang-format --dry-run -Werror
echo "clang-format: ${#sources[@]} sources as formatted"
