#!/usr/bin/env bash
# Full sharding on one GPU over NCCL (issue 51's GPU check), for a lease
# after scripts/gpu_checks.sh has built build-cuda/zoo: Cerebras-GPT 1.3B
# (synthetic tokens, batch 4 x 2048, bf16, AdamW, STEPS steps) trained
# plainly and as one fully sharded NCCL rank from the same seed. Prints both
# runs' losses side by side, their tokens/s and their peak GPU memory.
# Not yet run: no GPU was lent to the session that wrote it.
# Usage: scripts/gpu_check_sharding.sh   Env: STEPS (default 10), LOG (default build-cuda/gpu_sharding)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/zoo_log.sh
ZOO=build-cuda/zoo STEPS=${STEPS:-10} LOG=${LOG:-build-cuda/gpu_sharding}
PYTHON=${PYTHON:-$([[ -x /opt/torch/.venv/bin/python ]] && echo /opt/torch/.venv/bin/python || echo python3)}
[[ -x $ZOO ]] || { echo "build zoo first (scripts/gpu_checks.sh or scripts/build_cuda.sh)"; exit 1; }
rm -rf "$LOG" && mkdir -p "$LOG"
for name in plain full; do
  "$PYTHON" - configs/cerebras_gpt/cerebras_gpt_1p3b.yaml "$LOG/$name.yaml" "$STEPS" "$LOG/m_$name" "$name" <<'PY'
import sys, yaml
src, out, steps, model_dir, name = sys.argv[1:]
p = yaml.safe_load(open(src))
p["train_input"] = {"data_processor": "SyntheticDataProcessor", "vocab_size": p["model"]["vocab_size"],
                    "max_sequence_length": 2048, "batch_size": 4, "num_examples": 4096}
p.pop("eval_input", None)
p["runconfig"] = {"num_steps": int(steps), "log_steps": 1, "checkpoint_steps": 0, "seed": 1, "model_dir": model_dir}
if name == "full":
    p["runconfig"].update(enable_distributed=True, dist_backend="nccl", sharding="full")
yaml.safe_dump(p, open(out, "w"), sort_keys=False)
PY
done
"$ZOO" GPU --params "$LOG/plain.yaml" --mode train >"$LOG/plain.log" 2>&1
"$ZOO" launch --nproc_per_node 1 -- GPU --params "$LOG/full.yaml" --mode train >"$LOG/full.log" 2>&1
echo "step  plain loss  full-sharding loss"
paste <(grep -o 'Step=[0-9]*, Loss=[0-9.]*' "$LOG/plain.log") <(grep -o 'Loss=[0-9.]*' "$LOG/full.log")
for name in plain full; do
  rate=$(median_rate <"$LOG/$name.log" || echo 0)
  echo "$name: $(awk -v r="$rate" 'BEGIN { printf "%.0f", r * 2048 }') tokens/s;" \
       "$(grep -o 'Peak GPU memory allocated: .*' "$LOG/$name.log")"
done
