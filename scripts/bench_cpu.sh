#!/usr/bin/env bash
# CPU training speed and checkpoint I/O: zoo against plain PyTorch, measured
# side by side in this one run (issue 11's CPU goals).
#  1. Training step: zoo vs scripts/bench_reference_gpt.py, the same GPT
#     (learned positions, tied embeddings, GELU, AdamW betas 0.9/0.95 with
#     decay 0.1 on matrices, clipping at 1.0) in Python eager PyTorch on
#     /usr/bin/python3 (Debian torch 1.13), with the same thread count, at
#     L=4 d=256 H=4 T=256 V=256 B=8 and L=2 d=64 H=4 T=64 V=256 B=8.
#     Each side runs three times, alternating; the fastest run of each counts
#     (this VM's timings swing by 10-20% from run to run).
#  2. Checkpoints of a GPT-2-small-shaped model (124M parameters with 2048
#     learned positions) with its AdamW state: zoo's save against `dd
#     conv=fsync` of the same byte count and torch.save + fsync of the same
#     dict; zoo's read against torch.load of the same file (page cache warm
#     for both, best of 3); building the model. These use every core.
#     zoo's read maps the file copy-on-write (as torch.load(mmap=True) does
#     on PyTorch 2.x) and verifies its checksum; the pages the optimizer
#     later writes are copied during the first step after a resume, which
#     this read time does not include (docs/measurement_log.md gives the end-to-end
#     figure).
# Usage: scripts/bench_cpu.sh [THREADS]   (default 1; ZOO_BENCH_DIR: where to write, default build/bench_cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/zoo_log.sh
threads="${1:-1}"
build_dir="${ZOO_BUILD_DIR:-build}"
work="${ZOO_BENCH_DIR:-$build_dir/bench_cpu}"
scripts/setup.sh zoo >/dev/null
zoo="$build_dir/zoo"
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
export OMP_NUM_THREADS="$threads"
# With more than one thread each side gets the OpenMP wait policy it runs
# best with: Python's GEMMs are OpenBLAS's, whose threads LibTorch's spinning
# OpenMP threads crowd out (~3x slower without OMP_WAIT_POLICY=passive);
# zoo's are oneDNN's, on those same OpenMP threads, which passive waiting
# slows (~1.5x). OMP_WAIT_POLICY set by the caller applies to both.
py_wait_policy="${OMP_WAIT_POLICY:-}"
[[ "$threads" -gt 1 && -z "$py_wait_policy" ]] && py_wait_policy=passive

# zoo params for a GPT of the given shape on synthetic tokens.
params() {  # L C H F T V B STEPS LOG_STEPS [CHECKPOINT_STEPS]
  cat <<EOF
train_input: {data_processor: SyntheticDataProcessor, vocab_size: $6, max_sequence_length: $5, batch_size: $7, num_examples: 100000}
eval_input: {data_processor: SyntheticDataProcessor, vocab_size: $6, max_sequence_length: $5, batch_size: $7, num_examples: 100}
model: {vocab_size: $6, hidden_size: $2, num_hidden_layers: $1, num_heads: $3, filter_size: $4,
        max_position_embeddings: ${MAX_POSITIONS:-$5}, position_embedding_type: learned,
        share_embedding_weights: true, dropout_rate: 0.0, nonlinearity: gelu}
optimizer: {optimizer_type: AdamW, learning_rate: 1.0e-4, betas: [0.9, 0.95], weight_decay: 0.1, max_gradient_norm: 1.0}
runconfig: {num_steps: $8, log_steps: $9, checkpoint_steps: ${10:-0}, eval_steps: 1, model_dir: $work/model, seed: 1}
EOF
}

# Median steady-state step time in ms of a zoo run: log windows after the first.
zoo_step_ms() {  # L C H F T V B STEPS LOG_STEPS
  params "$@" > "$work/params.yaml"
  rm -rf "$work/model"
  local rate
  rate=$("$zoo" CPU --params "$work/params.yaml" --mode train 2>&1 | median_rate) || return 1
  awk -v B="$7" -v r="$rate" 'BEGIN { printf "%.3f", 1000 * B / r }'
}

python_step_ms() {  # L C H F T V B STEPS WARMUP
  env ${py_wait_policy:+OMP_WAIT_POLICY=$py_wait_policy} "$py" scripts/bench_reference_gpt.py --layers "$1" --hidden "$2" --heads "$3" --ffn "$4" --seq "$5" --vocab "$6" \
    --batch "$7" --steps "$8" --warmup "$9" --threads "$threads" |
    "$py" -c 'import json, sys; print("%.3f" % (1000 * json.load(sys.stdin)["step_s"]))'
}

min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b ? a : b) }'; }

echo "== Training step on CPU, $threads thread(s): steady-state median, best of 3 runs each"
printf "%-32s %10s %14s %12s %8s\n" shape "zoo ms" "PyTorch ms" "zoo/PyTorch" goal
step_case() {  # label goal L C H F T V B  zoo_steps zoo_log  py_steps py_warmup
  local label=$1 goal=$2; shift 2
  local z=1e9 p=1e9 run
  for run in 1 2 3; do
    z=$(min "$z" "$(zoo_step_ms "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9")")
    p=$(min "$p" "$(python_step_ms "$1" "$2" "$3" "$4" "$5" "$6" "$7" "${10}" "${11}")")
  done
  printf "%-32s %10.2f %14.2f %12.2f %8s\n" "$label" "$z" "$p" "$(awk -v a="$z" -v b="$p" 'BEGIN { print a / b }')" "$goal"
}
step_case "L=4 d=256 T=256 B=8 V=256" "<=0.85" 4 256 4 1024 256 256 8 50 10 40 10
step_case "L=2 d=64 T=64 B=8 V=256" "<=0.60" 2 64 4 256 64 256 8 1500 250 1200 200

echo
echo "== Checkpoints: GPT-2-small shape (124M parameters, 2048 positions) + AdamW state, all cores"
unset OMP_NUM_THREADS  # I/O is not a matched-threads comparison: each side uses the machine as it would
MAX_POSITIONS=2048 params 12 768 12 3072 64 50257 1 1 1 1 > "$work/params.yaml"
rm -rf "$work/model"
log=$("$zoo" CPU --params "$work/params.yaml" --mode train 2>&1)
build_s=$(sed -n 's/.*Built the model: .* in \([0-9.]*\) s.*/\1/p' <<<"$log")
save_s=$(sed -n 's/.*Saved checkpoint .* MB in \([0-9.]*\) s.*/\1/p' <<<"$log")
ckpt=$(ls "$work"/model/checkpoint_*.mdl)
bytes=$(stat -c %s "$ckpt")
dd_s=$(dd if=/dev/zero of="$work/dd.bin" bs=8M count=$(( bytes / 8388608 + 1 )) conv=fsync 2>&1 |
       sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p')
dd_bytes=$(stat -c %s "$work/dd.bin")
rm -f "$work/dd.bin"
torch_save_s=$("$py" - "$ckpt" "$work/torch_save.pt" <<'PY'
import os, sys, time, torch
d = torch.load(sys.argv[1])
t = time.perf_counter()
with open(sys.argv[2], "wb") as f:
    torch.save(d, f)
    f.flush()
    os.fsync(f.fileno())
print("%.3f" % (time.perf_counter() - t))
PY
)
rm -f "$work/torch_save.pt"
read_s=9999
load_s=9999
for _ in 1 2 3; do
  cat "$ckpt" > /dev/null
  r=$("$zoo" CPU --params "$work/params.yaml" --mode eval --checkpoint_path "$ckpt" 2>&1 |
      sed -n 's/.*Read checkpoint .* MB in \([0-9.]*\) s.*/\1/p')
  read_s=$(min "$read_s" "$r")
  cat "$ckpt" > /dev/null
  l=$("$py" -c 'import sys, time, torch; t = time.perf_counter(); torch.load(sys.argv[1]); print("%.3f" % (time.perf_counter() - t))' "$ckpt")
  load_s=$(min "$load_s" "$l")
done
awk -v mb="$(( bytes / 1000000 ))" -v ddmb="$(( dd_bytes / 1000000 ))" -v save="$save_s" -v dd="$dd_s" \
    -v tsave="$torch_save_s" -v read="$read_s" -v load="$load_s" -v build="$build_s" 'BEGIN {
  printf "%-22s %8.2f s  %6.0f MB/s\n", "zoo save (" mb " MB)", save, mb / save
  printf "%-22s %8.2f s  %6.0f MB/s\n", "dd conv=fsync", dd, ddmb / dd
  printf "%-22s %8.2f s  %6.0f MB/s\n", "torch.save + fsync", tsave, mb / tsave
  printf "%-22s %8.2f s\n", "zoo read", read
  printf "%-22s %8.2f s\n", "torch.load", load
  printf "%-22s %8.2f s\n", "zoo model build", build
  printf "\nzoo save / dd throughput: %.2f (goal >= 0.8)\n", (mb / save) / (ddmb / dd)
  printf "torch.load time / zoo read time: %.2f (goal >= 1.0)\n", load / read
  printf "model build: %.2f s (goal < 2 s)\n", build
}'
