#!/usr/bin/env bash
# Installs the Debian packages zoo needs (only those missing), then configures
# and builds zoo into build/ (or $ZOO_BUILD_DIR). Idempotent: a second run
# installs nothing and rebuilds only what changed.
# Usage: scripts/setup.sh [TARGET...]   (default: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkgconf
  libtorch-dev libopenblas0-pthread  # without OpenBLAS, Debian's libtorch uses reference BLAS (~46x slower)
  libyaml-cpp-dev libcxxopts-dev libspdlog-dev libhdf5-dev nlohmann-json3-dev libgtest-dev
  libprotobuf-dev protobuf-compiler libisal-dev  # TensorBoard event files
  libpcre2-dev  # tokenizers: Unicode-aware pre-tokenization regex
  libutf8proc-dev  # tokenizers: Unicode normalization (NFC, NFKC, ...) and character classes
  libsentencepiece-dev  # tokenizers: SentencePiece models (tokenizer.model)
  zlib1g-dev  # gzipped MNIST files
  libjpeg62-turbo-dev libpng-dev  # JPEG and PNG images (vision data)
  libcpp-httplib-dev  # zoo serve's HTTP server
  libgloo-dev  # headers of c10d's Gloo process group: data-parallel training on CPU
  python3-torch python3-h5py python3-numpy python3-crc32c python3-sentencepiece python3-jinja2  # test oracles (/usr/bin/python3)
)
# node + npm: test oracle for the GPT-2 tokenizer (npm's gpt-3-encoder); any install will do.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "zoo setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir="${ZOO_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" "${targets[@]}"
