#!/usr/bin/env bash
# GPU training speed: zoo against plain PyTorch on the same GPT, measured side
# by side in this one run (issue 11's GPU goals). For each CONFIG[:BATCH]
# (a GPT-2/3-style params file: learned positions, GELU, tied embeddings, as
# Cerebras-GPT's), trains STEPS steps on synthetic tokens at the config's
# sequence length with bf16 autocast and the config's optimizer settings, then
# runs scripts/bench_reference_gpt.py at the same shape (SDPA, fused AdamW,
# clipping at 1.0, vocabulary padded to a multiple of 64), eager and with
# torch.compile. Prints tokens/s, MFU ((6 N + 12 L d T) FLOPs per token
# against 989 TFLOP/s, the dense bf16 peak of an H100 SXM and of an H200
# alike), peak memory and the ratios.
#
# Needs a CUDA machine with the PyTorch 2.x install scripts/build_cuda.sh uses
# (run `scripts/build_cuda.sh download` on Debian first for the .debs).
# Usage: scripts/bench_gpu.sh [CONFIG[:BATCH[:eager]] ...]   (:eager skips the torch.compile run)
#   default: configs/cerebras_gpt/cerebras_gpt_111m.yaml:16 configs/cerebras_gpt/cerebras_gpt_1p3b.yaml:8
# Env: STEPS (default 40), PEAK_TFLOPS (default 989), PYTHON, ZOO_BENCH_DIR (default build-cuda/bench_gpu),
#      ZOO_BENCH_SKIP_BUILD=1 (use build-cuda/zoo as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/zoo_log.sh
PYTHON=${PYTHON:-$( [[ -x /opt/torch/.venv/bin/python ]] && echo /opt/torch/.venv/bin/python || echo python3)}
export PYTHON
steps="${STEPS:-40}"
peak="${PEAK_TFLOPS:-989}"
work="${ZOO_BENCH_DIR:-build-cuda/bench_gpu}"
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(configs/cerebras_gpt/cerebras_gpt_111m.yaml:16 configs/cerebras_gpt/cerebras_gpt_1p3b.yaml:8)

[[ "${ZOO_BENCH_SKIP_BUILD:-0}" == 1 ]] || ZOO_SKIP_TESTS=1 ZOO_BUILD_TARGET=zoo scripts/build_cuda.sh >/dev/null
mkdir -p "$work"
"$PYTHON" -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "| PyTorch", torch.__version__)'

# Writes bench params for CONFIG at BATCH and prints "L C H F T V" of its model.
bench_params() {  # CONFIG BATCH OUT
  "$PYTHON" - "$1" "$2" "$3" "$steps" "$work/model" <<'PY'
import sys, yaml
src, batch, out, steps, model_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
p = yaml.safe_load(open(src))
m = p["model"]
msl = (p.get("train_input") or {}).get("max_sequence_length", m["max_position_embeddings"])
m["mixed_precision"], m["fp16_type"] = True, "bfloat16"
bench = {
    "train_input": {"data_processor": "SyntheticDataProcessor", "vocab_size": m["vocab_size"],
                    "max_sequence_length": msl, "batch_size": batch, "num_examples": 1 << 20},
    "model": m,
    "optimizer": p["optimizer"],
    "runconfig": {"num_steps": steps, "log_steps": 5, "checkpoint_steps": 0, "model_dir": model_dir, "seed": 1},
}
yaml.safe_dump(bench, open(out, "w"), sort_keys=False)
print(m["num_hidden_layers"], m["hidden_size"], m["num_heads"], m["filter_size"], msl, m["vocab_size"])
PY
}

reference() {  # L C H F T V B [--compile]
  "$PYTHON" scripts/bench_reference_gpt.py --layers "$1" --hidden "$2" --heads "$3" --ffn "$4" --seq "$5" \
    --vocab "$6" --batch "$7" --steps "$steps" --warmup 10 --device cuda --bf16 --pad_vocab 64 "${@:8}"
}
field() { "$PYTHON" -c "import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

printf "\n%-34s %10s %7s %9s   %s\n" "case" "tok/s" "MFU" "peak GiB" "ratio"
for c in "${cases[@]}"; do
  IFS=: read -r config batch mode <<<"$c"
  batch=${batch:-8}
  name="$(basename "$config" .yaml) B=$batch"
  # Each case's params and zoo log stay in $work for a closer look (ZOO_PROFILE, say).
  case_params="$work/params_$(basename "$config" .yaml)_b$batch.yaml"
  zoo_log="$work/zoo_$(basename "$config" .yaml)_b$batch.log"
  read -r L C H F T V < <(bench_params "$config" "$batch" "$case_params")
  rm -rf "$work/model"
  build-cuda/zoo GPU --params "$case_params" --mode train >"$zoo_log" 2>&1 || { tail -20 "$zoo_log"; exit 1; }
  log=$(cat "$zoo_log")
  n_params=$(sed -n 's/.*Built the model: \([0-9]*\) parameters.*/\1/p' <<<"$log")
  zoo_peak=$(sed -n 's/.*Peak GPU memory allocated: \([0-9.]*\) GiB.*/\1/p' <<<"$log")
  # Median samples/s over the log windows after the first (warm-up, compilation of kernels).
  rate=$(median_rate <<<"$log" || true)
  zoo_tps=$(awk -v T="$T" -v r="${rate:-0}" 'BEGIN { printf "%.0f", T * r }')
  eager=$(reference "$L" "$C" "$H" "$F" "$T" "$V" "$batch")
  mfu() { awk -v tps="$1" -v n="$n_params" -v L="$L" -v C="$C" -v T="$T" -v peak="$peak" \
              'BEGIN { printf "%.1f%%", 100 * tps * (6 * n + 12 * L * C * T) / (peak * 1e12) }'; }
  eager_tps=$(field "$eager" tokens_per_s)
  printf "%-34s %10.0f %7s %9.1f\n" "zoo  $name" "$zoo_tps" "$(mfu "$zoo_tps")" "${zoo_peak:-0}"
  printf "%-34s %10.0f %7s %9.1f   zoo/eager %.2f\n" "  PyTorch eager" "$eager_tps" "$(mfu "$eager_tps")" \
    "$(field "$eager" peak_mem_gib)" "$(awk -v a="$zoo_tps" -v b="$eager_tps" 'BEGIN { print a / b }')"
  # Compiled last, so a run cut short still has printed the eager ratio.
  [[ "$mode" == eager ]] && continue
  compiled=$(reference "$L" "$C" "$H" "$F" "$T" "$V" "$batch" --compile)
  compiled_tps=$(field "$compiled" tokens_per_s)
  printf "%-34s %10.0f %7s %9.1f   zoo/compile %.2f\n" "  PyTorch + torch.compile" "$compiled_tps" \
    "$(mfu "$compiled_tps")" "$(field "$compiled" peak_mem_gib)" \
    "$(awk -v a="$zoo_tps" -v b="$compiled_tps" 'BEGIN { print a / b }')"
done
echo
echo "Goals: zoo/eager >= 1.0 at both shapes; zoo >= 1.1x the torch.compile figure at 111M B=16."
