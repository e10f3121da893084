#!/usr/bin/env bash
# README command 1, the main job: set up, build, then train and evaluate a small
# byte-level GPT on zoo's built-in corpus on CPU (about a minute and a half on 2
# cores). Leaves checkpoints, logs and eval results in model_dir/quickstart.
# Running it again resumes from the newest checkpoint and trains further.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh zoo  # the tests are built by scripts/test.sh
zoo=build/zoo
params=configs/quickstart.yaml
model_dir=model_dir/quickstart

$zoo corpus --output_dir data/generated/quickstart
if ! ls "$model_dir"/checkpoint_*.mdl >/dev/null 2>&1; then
  echo "== Evaluating the untrained model (the baseline to beat)"
  $zoo CPU --params "$params" --mode eval
fi
echo "== Training with periodic evaluation"
$zoo CPU --params "$params" --mode train_and_eval

results="$model_dir/eval/results.csv"
awk -F, 'NR == 2 { first = $3 } NR > 1 { last = $3; step = $2 }
         END { printf "\nEval loss: untrained %.3f -> %.3f at global_step %d (results: %s)\n", first, last, step, FILENAME }' \
  "$results"

echo "== A sample from the trained model"
$zoo generate --checkpoint_path "$model_dir" --prompt "ada walks to" --max_new_tokens 300 --temperature 0.8 --seed 1
