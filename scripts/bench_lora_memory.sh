#!/usr/bin/env bash
# Peak host memory (RSS) of LoRA against a full fine-tune of the same model
# on the CPU, measured side by side in one run: a Llama-shaped model
# (hidden 1024, 8 layers, SwiGLU, 8 heads in 4 KV groups, 32000 tokens:
# about 160M parameters) trains 3 steps with AdamW
# each way, from the same random-token data (batch 1 x 256 tokens, so that
# the model state, not the activations, dominates). Prints each run's peak RSS,
# parameters trained and step time, and the ratios.
# Usage: scripts/bench_lora_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${ZOO_BUILD_DIR:-build}"
[[ -x "$build_dir/zoo" ]] || scripts/setup.sh zoo >/dev/null
work="$build_dir/bench_lora_memory"
rm -rf "$work" && mkdir -p "$work/data"
/usr/bin/python3 - "$work/data" <<'PY'
import sys, h5py, numpy as np
rng = np.random.default_rng(0)
msl, n = 256, 16
tok = rng.integers(0, 32000, size=(n, msl + 1), dtype=np.int32)
x = np.stack([tok[:, :-1], np.ones((n, msl), np.int32), tok[:, 1:]], axis=1)
with h5py.File(f"{sys.argv[1]}/examples_0.h5", "w") as h:
    h.attrs["n_examples"] = n
    h.create_dataset("data", data=x, dtype="i4", chunks=(1, 3, msl), compression="gzip")
PY
params() {  # $1: model_dir, $2: extra model keys
  cat <<YAML
train_input: {data_processor: GptHDF5MapDataProcessor, data_dir: $work/data, batch_size: 1, shuffle: False}
model:
  vocab_size: 32000
  hidden_size: 1024
  num_hidden_layers: 8
  num_heads: 8
  attention_module: multiquery_attention
  extra_attention_params: {num_kv_groups: 4}
  filter_size: 2816
  nonlinearity: swiglu
  norm_type: rmsnorm
  position_embedding_type: rotary
  rotary_dim: 128
  max_position_embeddings: 256
  share_embedding_weights: False
  use_ffn_bias: False
  use_projection_bias_in_attention: False
  use_ffn_bias_in_attention: False
  use_bias_in_output: False
  dropout_rate: 0.0
$2
optimizer: {optimizer_type: AdamW, learning_rate: 1.0e-4, weight_decay: 0.0}
runconfig: {num_steps: 3, log_steps: 1, checkpoint_steps: 100, model_dir: $1, seed: 1}
YAML
}
run() {  # $1: name, $2: extra model keys
  params "$work/$1" "$2" > "$work/$1.yaml"
  "$build_dir/zoo" CPU --params "$work/$1.yaml" --mode train > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; exit 1; }
  rss=$(grep -o 'Peak host memory (RSS): [0-9.]* GiB' "$work/$1.log" | awk '{print $5}')
  trained=$(grep -o 'Built the model: .*' "$work/$1.log")
  rate=$(grep -o 'GlobalRate=[0-9.]* samples/sec' "$work/$1.log" | tail -1 | sed 's/GlobalRate=//')
  echo "$1: peak RSS $rss GiB; $trained; $rate"
  eval "${1}_rss=$rss"
}
run full ""
run lora "  lora_params: {r: 16, alpha: 32}"
awk -v f="$full_rss" -v l="$lora_rss" 'BEGIN { printf "LoRA / full fine-tune peak RSS: %.2f (%.2f GiB saved)\n", l / f, f - l }'
