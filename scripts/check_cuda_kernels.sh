#!/usr/bin/env bash
# Compiles zoo's CUDA kernels (models/kernels/cuda/*.cu) with nvcc for the
# GPUs zoo's CUDA build targets (sm_80, sm_90), warnings as errors, register
# spills included, and prints each kernel's registers. Needs nvcc only, no
# GPU and no LibTorch: CI runs it where the machine has a CUDA toolkit, so a
# kernel that nvcc refuses is found before a GPU lease, not on it. Exits 77
# (ctest's skip) when no nvcc is found: $NVCC, nvcc on PATH, $CUDA_HOME/bin
# or /usr/local/cuda/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

nvcc="${NVCC:-}"
if [ -z "$nvcc" ]; then
  for candidate in "$(command -v nvcc || true)" "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then nvcc="$candidate"; break; fi
  done
fi
if [ -n "${NVCC:-}" ] && [ ! -x "$NVCC" ]; then
  echo "check_cuda_kernels: NVCC=$NVCC is not an executable" >&2
  exit 2
fi
if [ -z "$nvcc" ]; then
  echo "check_cuda_kernels: no nvcc (set NVCC, CUDA_HOME or PATH); skipped"
  exit 77
fi
echo "check_cuda_kernels: $("$nvcc" --version | tail -n 2 | head -n 1) ($nvcc)"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
status=0
for source in models/kernels/cuda/*.cu; do
  name="$(basename "$source" .cu)"
  if ! "$nvcc" -std=c++17 -O3 -I. -c "$source" -o "$out/$name.o" \
      -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
      -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
      -Xptxas -v,--warn-on-spills,--warning-as-error >"$out/$name.log" 2>&1; then
    echo "FAILED $source"
    cat "$out/$name.log"
    status=1
    continue
  fi
  # ptxas -v: "Compiling entry function '<mangled>' for 'sm_90'", then "Used N registers".
  awk -v file="$source" '
    /Compiling entry function/ { arch = $9; gsub(/\x27/, "", arch) }
    /Used [0-9]+ registers/ { for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
                              n[arch]++; if (regs > most[arch]) most[arch] = regs }
    END { line = file ":"; for (a in n) line = line " " a " " n[a] " kernels, at most " most[a] " registers;"
          print line " no spills" }' "$out/$name.log"
done
exit $status
