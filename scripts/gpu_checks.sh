#!/usr/bin/env bash
# What one short GPU lease should run, in order of value, each step capped so
# the whole ends by DEADLINE seconds (default 540): build zoo against the
# machine's PyTorch (scripts/build_cuda.sh), the speed bench at 111M against
# PyTorch eager and torch.compile (scripts/bench_gpu.sh), A/B runs of zoo's CUDA
# kernels, fp32 CPU / GPU losses of a tiny GPT, the GPU-only tests (a test
# binary of the files that hold them, built in the background), zoo's
# ZOO_PROFILE trace at 111M beside the reference's torch.compile trace, then,
# as time allows, the 1.3B bench against eager, the DPR conversion against
# transformers (with EXTRAS), zoo's 1.3B trace, the packing bench
# (scripts/bench_packing.sh on the GPU) and 1.3B with activation
# checkpointing. (NCCL with one rank and the conversion fixtures against transformers were checked on the 2026-11-26
# lease: scripts/build_cuda.sh runs the whole suite.) Logs go to LOG (default
# build-cuda/gpu_checks) and, where OUT is set (the device tool), into
# $OUT/gpu_checks.tgz. Usage: scripts/gpu_checks.sh   (after scripts/build_cuda.sh download
# here; the .debs/ folder it fills is git-ignored, so a remote run must carry it)
# Env: DEADLINE, STEPS (bench, default 20), COMPILE=1 (also torch.compile at 111M),
#      CUDA_KERNELS=OFF (build without zoo's CUDA kernels; default AUTO, as in any
#      build; with them, 111M also runs with ZOO_CUDA_KERNELS=0, =cross_entropy,cross_entropy_fused,norm
#      and =cross_entropy,dense,norm for A/B figures: none of them, all but the dense
#      layer's, all but the loss's one-pass forward with its gradient),
#      AB=0 (no A/B runs), BIG=0 (no 1.3B bench), EXTRAS=0 (skip the optional steps at the end).
set -u
cd "$(dirname "$0")/.."
source scripts/zoo_log.sh
T0=$SECONDS; DEADLINE=${DEADLINE:-540}
LOG=${LOG:-build-cuda/gpu_checks}; rm -rf "$LOG"; mkdir -p "$LOG"
[[ -n "${OUT:-}" ]] && trap 'tar czf "$OUT/gpu_checks.tgz" -C "$LOG" . 2>/dev/null' EXIT
say() { echo "== [$((SECONDS - T0))s] $*"; }
cap() { local c=$1 l=$((DEADLINE - (SECONDS - T0))); ((l < c)) && c=$l; ((c < 1)) && c=1; echo "$c"; }
PYTHON=${PYTHON:-$([[ -x /opt/torch/.venv/bin/python ]] && echo /opt/torch/.venv/bin/python || echo python3)}
export PYTHON
ZOO=build-cuda/zoo W=build-cuda/bench_gpu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# The test binary holds only the files with GPU-only tests (ZOO_TEST_SOURCES);
# zoo's CUDA kernels are built where nvcc is found, unless CUDA_KERNELS=OFF.
base_args="${ZOO_CMAKE_ARGS:-} -DZOO_TEST_SOURCES=tests/test_fused.cpp;tests/test_cuda_kernels.cpp;tests/test_weight_copies.cpp;tests/test_embedding_kernel.cpp;tests/test_adam_kernel.cpp;tests/test_optim.cpp;tests/test_cuda_kernels_gpu.cpp;tests/test_engine.cpp;tests/test_bert_convert.cpp"
export ZOO_CMAKE_ARGS="$base_args -DZOO_CUDA_KERNELS=${CUDA_KERNELS:-AUTO}"
say "build zoo (ZOO_CMAKE_ARGS:$ZOO_CMAKE_ARGS)"
ZOO_SKIP_TESTS=1 ZOO_BUILD_TARGET=zoo timeout "$(cap 240)" scripts/build_cuda.sh >"$LOG/build.log" 2>&1 || {
  grep -E -A8 'error|FAILED' "$LOG/build.log" | head -60
  [[ "${CUDA_KERNELS:-AUTO}" == OFF ]] && exit 1
  say "the build with zoo's CUDA kernels failed (above); building without them"
  export ZOO_CMAKE_ARGS="$base_args -DZOO_CUDA_KERNELS=OFF"
  mv "$LOG/build.log" "$LOG/failed_build_with_kernels.log"
  ZOO_SKIP_TESTS=1 ZOO_BUILD_TARGET=zoo timeout "$(cap 200)" scripts/build_cuda.sh >"$LOG/build_retry.log" 2>&1 || {
    grep -E -A8 'error|FAILED' "$LOG/build_retry.log" | head -60
    exit 1
  }
}
grep -h -E "zoo: (NCCL|Gloo|CUDA kernels|no nvcc)" "$LOG"/build*.log
kernels=$(grep -q -h "zoo: CUDA kernels" "$LOG"/build*.log && echo 1 || echo 0)

# Background: the test binary (a precompiled header, two files, a link) builds
# niced on a few of the 16 cores while the bench runs.
(nice -n 19 timeout "$(cap 300)" cmake --build build-cuda --target zoo_tests -j 3 >"$LOG/build_tests.log" 2>&1
 echo $? >"$LOG/build_tests.rc") &

# scripts/bench_gpu.sh on one CONFIG:BATCH[:eager] case, its table appended to
# $LOG/bench.txt and its zoo log and params file copied to $LOG.  Usage: bench CASE SECONDS
bench() {
  STEPS=${STEPS:-20} ZOO_BENCH_DIR=$W ZOO_BENCH_SKIP_BUILD=1 timeout "$(cap "$2")" scripts/bench_gpu.sh "$1" 2>&1 |
    grep -v -E "Warn|detach|out = " | tee -a "$LOG/bench.txt"
  cp $W/zoo_*.log $W/params_*.yaml "$LOG/" 2>/dev/null
}
compile=$([[ "${COMPILE:-0}" == 1 ]] && echo "" || echo ":eager")
say "bench: 111M B=16 (zoo, PyTorch eager$([[ -z $compile ]] && echo " and torch.compile"))"
bench "configs/cerebras_gpt/cerebras_gpt_111m.yaml:16$compile" 200

# Median tokens/s of a zoo log (LOG TOKENS_PER_SAMPLE); nothing when it has no rate.
zoo_tps() { local r; r=$(median_rate <"$1") && awk -v T="$2" -v r="$r" 'BEGIN { printf "%.0f", T * r }'; }
small=$W/params_cerebras_gpt_111m_b16.yaml big=$W/params_cerebras_gpt_1p3b_b8.yaml
# ZOO_CUDA_KERNELS for all of zoo's kernels but those named (a comma list).
all_kernels=adam,cross_entropy,cross_entropy_fused,dense,dense_heads,embedding,norm,weight_copies
all_but() { local out="" k; for k in ${all_kernels//,/ }; do [[ ",$1," == *",$k,"* ]] || out+="${out:+,}$k"; done; echo "$out"; }
ab_run() { # NAME ZOO_CUDA_KERNELS: 111M B=16 as benched, into $LOG/ab_NAME.log
  ZOO_CUDA_KERNELS=$2 timeout "$(cap 60)" $ZOO GPU --params "$small" --mode train -o "$LOG/m_ab_$1" >"$LOG/ab_$1.log" 2>&1
}
if [[ -f $small && $kernels == 1 && "${AB:-1}" == 1 ]]; then
  say "A/B: 111M B=16 with ZOO_CUDA_KERNELS=0 (LibTorch's ops), without the dense kernel, the q/k/v heads' node, the one-pass loss, the kept weight copies, the Adam kernel"
  ab_run no_kernels 0
  ab_run no_dense_kernel "$(all_but dense,dense_heads,weight_copies)"
  ab_run no_dense_heads "$(all_but dense_heads)"
  ab_run no_fused_loss "$(all_but cross_entropy_fused)"
  ab_run no_weight_copies "$(all_but weight_copies)"
  ab_run no_adam_kernel "$(all_but adam)"
  echo "111M zoo tok/s: all kernels $(zoo_tps "$W/zoo_cerebras_gpt_111m_b16.log" 2048)," \
    "all but dense $(zoo_tps "$LOG/ab_no_dense_kernel.log" 2048)," \
    "all but the heads' node $(zoo_tps "$LOG/ab_no_dense_heads.log" 2048)," \
    "all but the one-pass loss $(zoo_tps "$LOG/ab_no_fused_loss.log" 2048)," \
    "all but the kept weight copies $(zoo_tps "$LOG/ab_no_weight_copies.log" 2048)," \
    "all but the Adam kernel $(zoo_tps "$LOG/ab_no_adam_kernel.log" 2048), none $(zoo_tps "$LOG/ab_no_kernels.log" 2048)"
  # The same seed and data: the runs' losses agree to bfloat16's rounding, or a kernel is wrong.
  last_loss() { grep -o 'Loss=[0-9.na]*' "$1" | tail -n 1; }
  echo "111M last logged loss: all kernels $(last_loss "$W/zoo_cerebras_gpt_111m_b16.log")," \
    "all but dense $(last_loss "$LOG/ab_no_dense_kernel.log"), all but the heads' node" \
    "$(last_loss "$LOG/ab_no_dense_heads.log"), all but the one-pass loss" \
    "$(last_loss "$LOG/ab_no_fused_loss.log"), all but the kept weight copies" \
    "$(last_loss "$LOG/ab_no_weight_copies.log"), all but the Adam kernel $(last_loss "$LOG/ab_no_adam_kernel.log")," \
    "none $(last_loss "$LOG/ab_no_kernels.log")"
fi

variant() { # SRC NAME STEPS PYTHON-EDIT: writes $LOG/NAME.yaml from a bench params file
  "$PYTHON" - "$1" "$LOG/$2.yaml" "$3" "$LOG/m_$2" "$4" <<'PY'
import sys, yaml
src, out, steps, md, edit = sys.argv[1:]
p = yaml.safe_load(open(src)); p["runconfig"].update(num_steps=int(steps), log_steps=2, model_dir=md)
exec(edit); yaml.safe_dump(p, open(out, "w"), sort_keys=False)
PY
}

say "tiny GPT in float32 on CPU and GPU (Loss columns; the GPU's AdamW is ATen's fused kernel)"
cat >"$LOG/tiny.yaml" <<Y
train_input: {data_processor: SyntheticDataProcessor, vocab_size: 512, max_sequence_length: 128, batch_size: 8, num_examples: 4096}
model: {vocab_size: 512, hidden_size: 128, num_hidden_layers: 2, num_heads: 4, filter_size: 512,
        max_position_embeddings: 128, position_embedding_type: learned, share_embedding_weights: true,
        nonlinearity: gelu, dropout_rate: 0.0}
optimizer: {optimizer_type: AdamW, learning_rate: 0.001, max_gradient_norm: 1.0}
runconfig: {num_steps: 20, log_steps: 5, checkpoint_steps: 0, seed: 1}
Y
timeout "$(cap 40)" $ZOO CPU --params "$LOG/tiny.yaml" --mode train -o "$LOG/m_cpu" >"$LOG/tiny_cpu.log" 2>&1
timeout "$(cap 40)" $ZOO GPU --params "$LOG/tiny.yaml" --mode train -o "$LOG/m_gpu" >"$LOG/tiny_gpu.log" 2>&1
paste <(grep -o 'Loss=[0-9.]*' "$LOG/tiny_cpu.log") <(grep -o 'Loss=[0-9.]*' "$LOG/tiny_gpu.log")

say "GPU-only tests"
wait
tests_built=$([[ "$(cat "$LOG/build_tests.rc" 2>/dev/null)" == 0 ]] && echo 1 || echo 0)
if [[ $tests_built == 1 ]]; then
  OMP_NUM_THREADS=4 timeout "$(cap 90)" build-cuda/zoo_tests --gtest_filter='*Cuda*:Profile.*' 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|actual" | tee "$LOG/gpu_tests.txt"
else  # the traces and benches below still run: they need only zoo
  grep -E -A8 'error:|FAILED' "$LOG/build_tests.log" | head -40
fi

# zoo's ZOO_PROFILE trace of steps FIRST..LAST of a bench params file, into
# $LOG/zoo_NAME.json, and its top kernels.  Usage: trace NAME PARAMS FIRST LAST SECONDS
trace() {
  say "zoo's trace of $1, steps $3-$4"
  variant "$2" "prof_$1" "$4" "p['runconfig']['log_steps'] = $4"
  ZOO_PROFILE=$3:$4:$LOG/zoo_$1.json timeout "$(cap "$5")" $ZOO GPU --params "$LOG/prof_$1.yaml" --mode train \
    >"$LOG/prof_zoo_$1.log" 2>&1
  timeout "$(cap 20)" "$PYTHON" scripts/profile_summary.py "$LOG/zoo_$1.json" --top 12 | tee "$LOG/profile_$1.txt"
}
[[ -f $small ]] && trace 111m "$small" 6 8 45
if [[ "${EXTRAS:-1}" == 1 ]]; then
  # Where torch.compile's 111M step goes: the figure zoo's goal is 1.1x of.
  say "extras: the reference's torch.compile trace at 111M B=16, beside zoo's"
  timeout "$(cap 150)" "$PYTHON" scripts/bench_reference_gpt.py --layers 10 --hidden 768 --heads 12 --ffn 3072 --seq 2048 \
    --vocab 50257 --batch 16 --steps 3 --warmup 6 --device cuda --bf16 --pad_vocab 64 --compile \
    --profile "$LOG/ref_111m_compile.json" >/dev/null 2>&1 &&
    timeout "$(cap 20)" "$PYTHON" scripts/profile_summary.py "$LOG/zoo_111m.json" "$LOG/ref_111m_compile.json" --top 30 \
      >"$LOG/profile_111m_vs_compile.txt"
fi
if [[ "${BIG:-1}" == 1 ]]; then
  say "bench: 1.3B B=8 (zoo, eager)"
  bench configs/cerebras_gpt/cerebras_gpt_1p3b.yaml:8:eager 150
fi
if [[ $tests_built == 1 && "${EXTRAS:-1}" == 1 ]]; then
  say "DPR conversion against transformers' DPR encoders (passed on 2026-11-27)"
  ZOO_TRANSFORMERS_PYTHON=$PYTHON OMP_NUM_THREADS=4 timeout "$(cap 60)" build-cuda/zoo_tests \
    --gtest_filter='ConvertBert.Dpr*' 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED) |Failure|Expected|Which is|actual|transformers" |
    tee "$LOG/transformers_dpr.txt"
fi

[[ -f $big ]] && trace 1p3b "$big" 5 6 60

if [[ "${EXTRAS:-1}" == 1 ]]; then
  say "packing: packed / unpacked non-pad tokens/s and held-out loss (scripts/bench_packing.sh)"
  DEVICE=GPU STEPS=20 ZOO_BUILD_DIR=build-cuda ZOO_BENCH_SKIP_BUILD=1 ZOO_BENCH_DIR=build-cuda/bench_packing \
    timeout "$(cap 120)" scripts/bench_packing.sh 2>&1 | tee "$LOG/bench_packing.txt"
fi

if [[ "${EXTRAS:-1}" == 1 && -f $big ]]; then
  say "extras: 1.3B B=8 with activation checkpointing (without: the bench's zoo log)"
  variant "$big" ckpt 6 'p["model"]["activation_checkpointing"] = True'
  timeout "$(cap 60)" $ZOO GPU --params "$LOG/ckpt.yaml" --mode train >"$LOG/mem_ckpt.log" 2>&1
  grep -h -E "Peak|rror" "$LOG/zoo_cerebras_gpt_1p3b_b8.log" "$LOG/mem_ckpt.log"
fi
gzip -f "$LOG"/*.json 2>/dev/null
say done
