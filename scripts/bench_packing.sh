#!/usr/bin/env bash
# Packing short fine-tuning samples (modelzoo's VSL) against one sample per
# padded row, measured side by side in this one run (issue 61).
#  Data: prompt/completion pairs whose lengths follow a chat distribution
#  (log-normal, mean ~300 tokens, sigma 0.8, bytes as tokens; text from a
#  fixed bigram chain over 26 words, so the loss falls smoothly), written by
#  `zoo data create-hdf5 Summarization` at max_seq_length 2048 once unpacked
#  and once with --pack true.
#  1. Throughput: a Llama-shaped model of 83M parameters (12 layers, hidden
#     768, SwiGLU 2304, rotary, RMSNorm, 12 heads, 4 key/value heads) trains
#     batches of one 2048-token row; the median step rate of each layout
#     times its rows' mean count of tokens that are not padding gives
#     non-pad tokens/s. The step cost does not depend on which rows a run
#     reads, so the means are over all rows. Goal: packed / unpacked >= 2.4.
#  2. Loss: a small model of the same shape (2 layers, hidden 128) trains one
#     epoch over the same pairs packed (one row per step, ~6 pairs) and
#     unpacked (6 rows per step), then evaluates the loss on held-out pairs.
#     The unpacked run twice, with two shuffle seeds, gives the noise.
# Usage: scripts/bench_packing.sh [THREADS] [PAIRS]   (defaults: all cores, 600;
# ZOO_BENCH_DIR: where to write, default build/bench_packing; STEPS: throughput steps, default 4;
# DEVICE=GPU with ZOO_BUILD_DIR=build-cuda ZOO_BENCH_SKIP_BUILD=1: on a GPU, as scripts/gpu_checks.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/zoo_log.sh
build_dir="${ZOO_BUILD_DIR:-build}"
work="${ZOO_BENCH_DIR:-$build_dir/bench_packing}"
pairs="${2:-600}"
steps="${STEPS:-4}"
[[ -n "${1:-}" ]] && export OMP_NUM_THREADS="$1"
device="${DEVICE:-CPU}"
[[ -n "${ZOO_BENCH_SKIP_BUILD:-}" ]] || scripts/setup.sh zoo >/dev/null
zoo="$build_dir/zoo"
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work/train" "$work/heldout"

"$py" - "$work" "$pairs" <<'PY'
import json, math, random, sys
work, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(61)
words = ["alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "iris", "juniper", "kelp",
         "lumen", "maple", "nectar", "onyx", "pearl", "quartz", "raven", "sable", "tundra", "umber", "violet",
         "willow", "xenon", "yarrow", "zephyr"]
# Text with learnable statistics: each word is followed by one of three others (a fixed random bigram chain).
successors = {w: rng.sample(words, 3) for w in words}
def chain(n):
    w = rng.choice(words)
    out = []
    for _ in range(n):
        out.append(w)
        w = rng.choice(successors[w])
    return " ".join(out)
def pair():
    # Total length ~ log-normal with mean ~300 bytes (sigma 0.8); a prompt and its completion, both from the chain.
    total = rng.lognormvariate(math.log(300) - 0.32, 0.8)
    n = max(2, int(total / 6.5))
    k = max(1, n // 3)
    return {"prompt": "Continue: " + chain(k) + "\n", "completion": chain(n - k)}
for sub, count in (("train", n), ("heldout", max(n // 10, 8))):
    with open(f"{work}/{sub}/pairs.jsonl", "w") as f:
        for _ in range(count):
            f.write(json.dumps(pair()) + "\n")
PY

create() {  # IN OUT [--pack true]
  "$zoo" data create-hdf5 Summarization --input_dir "$1" --output_dir "$2" --tokenizer_type ByteTokenizer \
    --eos_id 0 --max_seq_length 2048 "${@:3}"
}
create "$work/train" "$work/unpacked" 2>/dev/null | tail -n 2
create "$work/train" "$work/packed" --pack true 2>/dev/null | tail -n 1
create "$work/heldout" "$work/heldout_rows" > /dev/null 2>&1

# From data_params.json: rows, and mean columns per row that are not padding.
rows_of() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["post-process"]["n_examples"])' "$1/data_params.json"; }
mean_filled() {
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))["post-process"]; print("%.1f" % (p["n_filled_columns"] / p["n_examples"]))' \
    "$1/data_params.json"
}

model() {  # LAYERS HIDDEN FILTER HEADS KV_GROUPS
  cat <<EOF
model: {name: llama, vocab_size: 256, hidden_size: $2, num_hidden_layers: $1, filter_size: $3, num_heads: $4,
        attention_module: multiquery_attention, extra_attention_params: {num_kv_groups: $5},
        position_embedding_type: rotary, rotary_dim: $(( $2 / $4 )), max_position_embeddings: 2048,
        norm_type: rmsnorm, nonlinearity: swiglu, use_ffn_bias: false, use_projection_bias_in_attention: false,
        use_ffn_bias_in_attention: false, share_embedding_weights: false, dropout_rate: 0.0}
EOF
}

echo "== Throughput on $device: 83M-parameter Llama shape, one 2048-token row per step, $steps steps, ${OMP_NUM_THREADS:-all} thread(s)"
rate() {  # LAYOUT USE_VSL
  cat > "$work/$1.yaml" <<EOF
train_input: {data_processor: GptHDF5MapDataProcessor, data_dir: $work/$1, batch_size: 1, use_vsl: $2, shuffle: false}
$(model 12 768 2304 12 4)
optimizer: {optimizer_type: AdamW, learning_rate: 1.0e-4}
runconfig: {max_steps: $steps, log_steps: 1, checkpoint_steps: 0, model_dir: $work/model_$1, seed: 1}
EOF
  "$zoo" "$device" --params "$work/$1.yaml" --mode train 2>&1 | median_rate
}
packed_rows=$(rate packed true)
unpacked_rows=$(rate unpacked false)
packed_fill=$(mean_filled "$work/packed")
unpacked_fill=$(mean_filled "$work/unpacked")
awk -v pr="$packed_rows" -v ur="$unpacked_rows" -v pf="$packed_fill" -v uf="$unpacked_fill" 'BEGIN {
  printf "%-10s %10s %18s %22s\n", "layout", "rows/s", "non-pad per row", "non-pad tokens/s"
  printf "%-10s %10.3f %18.1f %22.0f\n", "packed", pr, pf, pr * pf
  printf "%-10s %10.3f %18.1f %22.0f\n", "unpacked", ur, uf, ur * uf
  printf "packed / unpacked non-pad tokens/s: %.2f (goal >= 2.4)\n", (pr * pf) / (ur * uf)
}'

echo
echo "== Held-out loss after one epoch over the same $pairs pairs: 2 layers, hidden 128"
heldout_loss() {  # NAME LAYOUT USE_VSL BATCH SEED
  local rows
  rows=$(rows_of "$work/$2")
  cat > "$work/$1.yaml" <<EOF
train_input: {data_processor: GptHDF5MapDataProcessor, data_dir: $work/$2, batch_size: $4, use_vsl: $3,
              shuffle: true, shuffle_seed: $5}
eval_input: {data_processor: GptHDF5MapDataProcessor, data_dir: $work/heldout_rows, batch_size: 4}
$(model 2 128 384 4 2)
optimizer: {optimizer_type: AdamW, learning_rate: 3.0e-3}
runconfig: {max_steps: $(( rows / $4 )), eval_frequency: $(( rows / $4 )), log_steps: 1000, checkpoint_steps: 0,
            model_dir: $work/model_$1, seed: 1}
EOF
  "$zoo" "$device" --params "$work/$1.yaml" --mode train_and_eval 2>&1 | sed -n 's/.*Avg Eval Loss: \([0-9.e+-]*\).*/\1/p' |
    tail -n 1
}
packed_loss=$(heldout_loss loss_packed packed true 1 1)
unpacked_loss=$(heldout_loss loss_unpacked unpacked false 6 1)
unpacked_loss_2=$(heldout_loss loss_unpacked_2 unpacked false 6 2)
awk -v p="$packed_loss" -v u="$unpacked_loss" -v u2="$unpacked_loss_2" 'BEGIN {
  printf "packed %.4f, unpacked %.4f and %.4f (shuffle seeds 1, 2)\n", p, u, u2
  noise = u - u2; if (noise < 0) noise = -noise
  d = p - u; if (d < 0) d = -d
  printf "|packed - unpacked| %.4f against the seeds'\'' spread %.4f\n", d, noise
}'
