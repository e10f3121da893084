#!/usr/bin/env bash
# Builds zoo against the LibTorch inside a PyTorch 2.x install (CUDA), on a
# machine without a package registry. Usage:
#   on a Debian 12 machine:  scripts/build_cuda.sh download   # fetches .debs/ (ignored by git)
#   on the CUDA machine:     scripts/build_cuda.sh [ctest args...]   # unpacks .debs/, builds build-cuda/, runs ctest
# PYTHON names the interpreter whose torch is used (default: /opt/torch/.venv/bin/python, else python3).
# ZOO_CMAKE_ARGS adds CMake options (e.g. -DZOO_WITH_NCCL=OFF).
# ZOO_SKIP_TESTS=1 builds without running the tests; ZOO_BUILD_TARGET=zoo builds the
# command alone, without the test binary (scripts/bench_gpu.sh sets both).
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcxxopts-dev
      libhdf5-dev libhdf5-103-1 libhdf5-hl-100 libsz2 libaec0 libcurl3-gnutls
      libprotobuf-dev libprotobuf32 libprotoc32 protobuf-compiler libisal-dev libisal2
      nlohmann-json3-dev libgtest-dev libpcre2-dev libpcre2-8-0 zlib1g-dev
      libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16 libsentencepiece-dev libsentencepiece0
      libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libbrotli-dev)
if [[ "${1:-}" == download ]]; then
  mkdir -p .debs && (cd .debs && apt-get download "${debs[@]}")
  exit 0
fi

if compgen -G ".debs/*.deb" >/dev/null; then
  for f in .debs/*.deb; do
    # Keep the system's own libcurl when it has one: Debian's would pull in more.
    [[ "$f" == *libcurl3-gnutls* ]] && ldconfig -p | grep -q 'libcurl-gnutls.so.4' && continue
    # Likewise zlib: Debian's headers would point libz.so at a library version the system lacks.
    [[ "$f" == *zlib1g-dev* ]] && [[ -f /usr/include/zlib.h ]] && continue
    dpkg -x "$f" /
  done
  # Debian's zlib1g-dev links libz.so to its own version; use the system's libz.so.1.
  libz=/usr/lib/x86_64-linux-gnu/libz.so
  [[ -e "$libz" ]] || ln -sf libz.so.1 "$libz"
  ldconfig
fi

PYTHON=${PYTHON:-$( [[ -x /opt/torch/.venv/bin/python ]] && echo /opt/torch/.venv/bin/python || echo python3)}
prefix=$("$PYTHON" -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B build-cuda -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release ${ZOO_CMAKE_ARGS:-}
cmake --build build-cuda ${ZOO_BUILD_TARGET:+--target "$ZOO_BUILD_TARGET"}
[[ "${ZOO_SKIP_TESTS:-0}" == 1 ]] && exit 0
# Each test process uses 2 threads so parallel tests do not oversubscribe the CPU.
OMP_NUM_THREADS=2 ctest --test-dir build-cuda --output-on-failure -j "$(( $(nproc) / 2 ))" "$@"
