#!/usr/bin/env bash
# Compiles (syntax only) zoo's C++ sources that use LibTorch against LibTorch
# 2.x headers, so that code behind ZOO_TORCH_AT_LEAST(2, N), which the
# Debian 1.13 build never compiles, is checked before a GPU lease rather than
# on it. The headers are Debian trixie's libtorch-dev (2.6), downloaded with
# apt-get into build/torch2/ and unpacked there, not installed. Sources with
# zoo's CUDA kernels' host code are compiled a second time with
# -DZOO_CUDA_KERNELS (kernel_glue.cpp too where CUDA's headers are found, as
# /usr/local/cuda/include or $CUDA_HOME/include: it includes them).
# Needs build/compile_commands.json (scripts/setup.sh) and deb.debian.org.
# Usage: scripts/check_torch2_headers.sh [SOURCE[:FLAGS] ...]   (default: all of them)
#   e.g. models/kernels/cross_entropy_kernel.cpp:-DZOO_CUDA_KERNELS, or (include paths absolute: it compiles in build/)
#   "models/kernels/cuda/kernel_glue.cpp:-DZOO_CUDA_KERNELS -I/usr/local/cuda/include -I$PWD/build/torch2/generated"
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/build/torch2
[[ -f build/compile_commands.json ]] || { echo "check_torch2_headers: run scripts/setup.sh first (no build/compile_commands.json)" >&2; exit 2; }

if [[ ! -f $dir/headers/usr/include/torch/csrc/api/include/torch/version.h ]]; then
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/headers"
  echo "deb [trusted=yes] http://deb.debian.org/debian trixie main" >"$dir/sources.list"
  apt=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache")
  apt-get "${apt[@]}" update -qq
  (cd "$dir" && apt-get "${apt[@]}" download libtorch-dev/trixie 2>&1 | grep -v "unsandboxed" || true)
  deb=$(ls "$dir"/libtorch-dev_*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || { echo "check_torch2_headers: could not download trixie's libtorch-dev" >&2; exit 2; }
  dpkg -x "$deb" "$dir/headers"
fi
grep -E "define TORCH_VERSION_(MAJOR|MINOR)" "$dir/headers/usr/include/torch/csrc/api/include/torch/version.h" |
  awk '{ v = v (v ? "." : "") $3 } END { print "check_torch2_headers: LibTorch " v " headers" }'

# kernel_glue.cpp with -DZOO_CUDA_KERNELS includes CUDA's headers and c10/cuda's, one of which a CUDA
# build of LibTorch generates and Debian's CPU build lacks: a stand-in with its one define, as there.
cuda_include=${CUDA_HOME:-/usr/local/cuda}/include
mkdir -p "$dir/generated/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' >"$dir/generated/c10/cuda/impl/cuda_cmake_macros.h"

sources=()
for arg in "$@"; do  # absolute paths, as compile_commands.json has them
  path=${arg%%:*}
  [[ $arg == *:* ]] && flag=":${arg#*:}" || flag=""
  sources+=("$(realpath "$path")$flag")
done
if [[ ${#sources[@]} -eq 0 ]]; then
  mapfile -t sources < <(/usr/bin/python3 -c '
import json
seen = set()
for e in json.load(open("build/compile_commands.json")):
    f = e["file"]
    if f.endswith(".cpp") and "/torch/csrc/api/include" in e["command"] and f not in seen:
        seen.add(f); print(f)')
  # The kernels' host code, a second time with the define CMake gives it.
  while IFS= read -r f; do sources+=("$f:-DZOO_CUDA_KERNELS"); done < <(
    grep -l "ifdef ZOO_CUDA_KERNELS" models/kernels/*.cpp | sed "s|^|$root/|")
  if [[ -f $cuda_include/cuda_runtime_api.h ]]; then
    sources+=("$root/models/kernels/cuda/kernel_glue.cpp:-DZOO_CUDA_KERNELS -I$cuda_include -I$dir/generated")
  else
    echo "check_torch2_headers: no CUDA headers at $cuda_include; kernel_glue.cpp only without -DZOO_CUDA_KERNELS"
  fi
fi

check_one() { # SOURCE[:FLAGS]
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, shlex, subprocess, sys
spec, headers = sys.argv[1], sys.argv[2]
source, _, extra = spec.partition(":")
entry = next((e for e in json.load(open("build/compile_commands.json")) if e["file"] == source), None)
if entry is None:
    print("FAILED " + spec + ": not in build/compile_commands.json", flush=True)
    sys.exit(1)
args, skip = [], False
for a in shlex.split(entry["command"]):
    if skip: skip = False; continue
    if a in ("-o", "-include", "-Xclang"): skip = True; continue
    if "cmake_pch" in a: continue
    args.append(a)
args[1:1] = ["-isystem", headers + "/torch/csrc/api/include", "-isystem", headers]  # ahead of /usr/include's 1.13
args += ["-fsyntax-only", "-w"] + shlex.split(extra)
r = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
print(("ok     " if r.returncode == 0 else "FAILED ") + spec, flush=True)
if r.returncode: print(r.stderr[:4000], flush=True)
sys.exit(r.returncode)
PY
}
export -f check_one
printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -I{} bash -c 'check_one "$1" "$2"' _ {} "$dir/headers/usr/include" |
  tee "$dir/check.log" | grep -v "^ok " || true
failed=$(grep -c "^FAILED" "$dir/check.log" || true)
echo "check_torch2_headers: $(grep -c "^ok " "$dir/check.log") compiled, $failed failed (log: $dir/check.log)"
[[ $failed -eq 0 ]]
