#!/usr/bin/env bash
# Loader throughput on a 111M-shaped HDF5 dataset (Cerebras-GPT 111M: msl 2048,
# GPT-2 vocabulary 50257), written as modelzoo writes it (gzip, chunks
# (1, 3, 2048)). Token ids are uniform random, which compress worse than text
# (so this errs on the slow side). Prints tokens/s for each reader, measured
# side by side in this one run, with ratios to the >= 5M tokens/s goal and to
# Python h5py reading sample by sample (what modelzoo's HDF5 dataset does).
# Usage: scripts/bench_data.sh [SECONDS_PER_CASE]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
build_dir="${ZOO_BUILD_DIR:-build}"
scripts/setup.sh zoo_bench_data >/dev/null
data="$build_dir/bench_data/111m"
if [ ! -f "$data/examples_3.h5" ]; then
  mkdir -p "$data"
  /usr/bin/python3 - "$data" <<'PY'
import sys, h5py, numpy as np
rng = np.random.default_rng(0)
msl, n = 2048, 1024
for f in range(4):
    tok = rng.integers(0, 50257, size=(n, msl + 1), dtype=np.int32)
    x = np.stack([tok[:, :-1], np.ones((n, msl), np.int32), tok[:, 1:]], axis=1)
    with h5py.File(f"{sys.argv[1]}/examples_{f}.h5", "w") as h:
        h.attrs["n_examples"] = n
        h.create_dataset("data", data=x, dtype="i4", chunks=(1, 3, msl), compression="gzip")
PY
fi
bench() { OMP_NUM_THREADS=1 "$build_dir/zoo_bench_data" "$1" "$seconds" | awk '{print $1}'; }
section() { echo "{data_processor: $1, data_dir: $data, batch_size: 8, max_sequence_length: 2048$2}"; }
python_rate=$(taskset -c 0 /usr/bin/python3 - "$data" "$seconds" <<'PY'
import sys, glob, time, h5py, numpy as np
files = [h5py.File(p, "r") for p in sorted(glob.glob(sys.argv[1] + "/*.h5"))]
tokens, t0, end = 0, time.perf_counter(), time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    for h in files:
        d = h["data"]
        for i in range(len(d)):
            s = d[i]  # one sample, as modelzoo's HDF5 datasets read
            tokens += s.shape[-1]
            if i % 64 == 0 and time.perf_counter() > end: break
        if time.perf_counter() > end: break
print(int(tokens / (time.perf_counter() - t0)))
PY
)
printf "%-58s %14s %9s %9s\n" "reader (111M-shaped: msl 2048, batch 8)" "tokens/s" "vs 5M" "vs h5py"
row() {
  local rate
  rate=$(eval "$2")
  awk -v n="$1" -v r="$rate" -v p="$python_rate" 'BEGIN { printf "%-58s %14.0f %8.2fx %8.2fx\n", n, r, r / 5e6, r / p }'
}
row "python h5py, sample by sample (1 core)" "echo $python_rate"
row "GptHDF5DataProcessor (1 core)" "taskset -c 0 $build_dir/zoo_bench_data '$(section GptHDF5DataProcessor "")' $seconds | awk '{print \$1}'"
row "GptHDF5DataProcessor, shuffle (1 core)" "taskset -c 0 $build_dir/zoo_bench_data '$(section GptHDF5DataProcessor ", shuffle: true")' $seconds | awk '{print \$1}'"
row "GptHDF5MapDataProcessor, shuffle (1 core)" "taskset -c 0 $build_dir/zoo_bench_data '$(section GptHDF5MapDataProcessor ", shuffle: true")' $seconds | awk '{print \$1}'"
row "GptHDF5DataProcessor, num_workers 2 (all cores)" "$build_dir/zoo_bench_data '$(section GptHDF5DataProcessor ", num_workers: 2")' $seconds | awk '{print \$1}'"
row "SyntheticDataProcessor (1 core)" "taskset -c 0 $build_dir/zoo_bench_data '{data_processor: SyntheticDataProcessor, vocab_size: 50257, max_sequence_length: 2048, batch_size: 8}' $seconds | awk '{print \$1}'"
