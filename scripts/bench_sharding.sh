#!/usr/bin/env bash
# Full sharding (runconfig.sharding: full) against plain data parallelism on
# the CPU, measured side by side in one run on c10d's Gloo over 127.0.0.1:
# 1. throughput: the same model and global batch on 2 ranks, each way;
# 2. memory: peak host memory (RSS) of rank 0 while training, fully sharded
#    at 1, 2 and 4 ranks, against the figure computed from the design:
#    16/N bytes per parameter (float32 weights, gradients and AdamW's two
#    moments, each rank keeping 1/N) plus the units gathered at once (see
#    docs/distributed.md), with activation checkpointing. The model: GPT-2
#    shaped, 8 layers of hidden 1024 (about 101M parameters), bytes as
#    tokens, so that the model state, not the activations, dominates.
# Usage: scripts/bench_sharding.sh [steps]   (default 4; ZOO_BENCH_HIDDEN sets the width)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${ZOO_BUILD_DIR:-build}"
[[ -x "$build_dir/zoo" ]] || scripts/setup.sh zoo >/dev/null
steps="${1:-4}"
work="$build_dir/bench_sharding"
rm -rf "$work" && mkdir -p "$work"
"$build_dir/zoo" corpus --output_dir "$work/data" > /dev/null
hidden=${ZOO_BENCH_HIDDEN:-1024} layers=8
params() {  # $1: sharding, $2: activation checkpointing
  cat <<YAML
train_input: {data_processor: ByteTextDataProcessor, data_dir: $work/data/train, max_sequence_length: 64, batch_size: 4, shuffle: False}
model: {vocab_size: 256, hidden_size: $hidden, num_hidden_layers: $layers, num_heads: $((hidden / 64)), filter_size: $((4 * hidden)),
        max_position_embeddings: 64, dropout_rate: 0.0, activation_checkpointing: ${2:-false}}
optimizer: {optimizer_type: AdamW, learning_rate: 1.0e-4, weight_decay: 0.01, max_gradient_norm: 1.0}
runconfig: {num_steps: $steps, log_steps: 1, checkpoint_steps: 0, seed: 1, enable_distributed: true, sharding: $1}
YAML
}
port=$((24000 + $$ % 4000))
run() {  # $1: name, $2: sharding, $3: ranks, $4: activation checkpointing
  params "$2" "${4:-false}" > "$work/$1.yaml"
  port=$((port + 1))
  "$build_dir/zoo" launch --nproc_per_node "$3" --master_port "$port" -- CPU \
    --params "$work/$1.yaml" --mode train -o "$work/$1" > "$work/$1.log" 2>&1 || { tail -20 "$work/$1.log"; exit 1; }
}
rate_of() { grep -o 'GlobalRate=[0-9.]* samples/sec' "$work/$1.log" | tail -1 | sed 's/GlobalRate=//; s/ samples.sec//'; }

echo "Throughput, 2 ranks, $steps steps of 4 x 64 tokens (the rate over the whole run):"
run plain none 2
run full2 full 2
plain=$(rate_of plain) full=$(rate_of full2)
echo "  plain data parallelism: $plain samples/s"
echo "  full sharding:          $full samples/s"
awk -v f="$full" -v p="$plain" 'BEGIN { printf "  full / plain: %.2f\n", f / p }'

run full1 full 1 true
run full2r full 2 true
run full4 full 4 true
P=$(grep -o 'Built the model: [0-9]* parameters' "$work/full1.log" | awk '{print $4}')
U=$((12 * hidden * hidden + 13 * hidden))  # one layer: attention 4h^2 + 4h, FFN 8h^2 + 5h, two norms 4h
R=$((P - layers * U))                      # the root unit: embeddings, final norm
echo "Memory, rank 0's peak RSS while training less its RSS before the model was built ($P parameters; a layer $U, the rest $R):"
echo "  ranks  measured MiB  computed MiB  (states 16/N B/param + units gathered)  measured/computed"
for n in 1 2 4; do
  log="$work/full$n.log"; [[ $n == 2 ]] && log="$work/full2r.log"
  line=$(grep -o 'Peak host memory (RSS): [0-9.]* GiB while training ([0-9.]* GiB before; [0-9.]* GiB before the model' "$log")
  peak=$(awk '{print $5}' <<<"$line")
  base=$(grep -o '[0-9.]* GiB before the model' <<<"$line" | awk '{print $1}')
  # At the peak (the backward pass of a layer): the root's weights and gradients,
  # two layers' weights (the one running and the next, prefetched), and a
  # layer's gradients three times over: as autograd makes them, in the flat
  # buffer being reduce-scattered, and in the one reduction still in flight;
  # with 2 ranks or more, Gloo's collectives add a layer-sized buffer each
  # (all-gather's flat output, all-reduce's scratch).
  awk -v n="$n" -v peak="$peak" -v base="$base" -v P="$P" -v U="$U" -v R="$R" 'BEGIN {
    states = 16 * P / n; units = 4 * (2 * R + (n > 1 ? 7 : 5) * U)
    measured = (peak - base) * 1024; computed = (states + units) / 1048576
    printf "  %5d  %12.0f  %12.0f  (%.0f + %.0f)  %28.2f\n", n, measured, computed, states / 1048576, units / 1048576, measured / computed }'
done
