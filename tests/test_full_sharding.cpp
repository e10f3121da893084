// Full sharding (runconfig.sharding: full) on c10d's Gloo over 127.0.0.1:
// 2 and 4 ranks train as one process with the same global batch (with
// activation checkpointing, gradient accumulation and clipping; AdamW and
// SGD; LoRA on a sharded frozen base), sharded checkpoints resume at any world size and in any sharding
// mode and are read by eval and consolidated into one torch.load-able file,
// and a rank killed mid-step or mid-write ends the others naming it while
// the last complete checkpoint stays the one that loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "distributed_fixtures.h"

using namespace zoo;
using namespace zoo::testing::distributed;
using zoo::testing::run_command;

namespace fs = std::filesystem;

namespace {

// The tiny job with 3 layers, each recomputed in the backward pass, and 2
// micro-batches per step (global batch 8: 4 ranks take 2 samples, 1 per micro-batch).
struct ShardedJob : Job {
  std::string one, full, full_sgd, one_sgd, full_sgd_unclipped, one_sgd_unclipped;
  ShardedJob() {
    std::string y = zoo::testing::read_file(single);
    y.replace(y.find("num_hidden_layers: 2"), 20, "num_hidden_layers: 3");
    y.replace(y.find("  dropout_rate: 0.0\n"), 19, "  dropout_rate: 0.0\n  activation_checkpointing: true\n");
    y.replace(y.find("optimizer:\n"), 11, "optimizer:\n  grad_accum_steps: 2\n");
    y.replace(y.find("checkpoint_steps: 6"), 19, "checkpoint_steps: 4");
    one = zoo::testing::write_file(dir / "one.yaml", y);
    full = zoo::testing::write_file(dir / "full.yaml", y + "  enable_distributed: true\n  sharding: full\n");
    std::string sgd = y;
    sgd.replace(sgd.find("optimizer_type: AdamW"), 21, "optimizer_type: SGD\n  momentum: 0.9");
    sgd.replace(sgd.find("  betas: [0.9, 0.95]\n"), 21, "");
    one_sgd = zoo::testing::write_file(dir / "one_sgd.yaml", sgd);
    full_sgd = zoo::testing::write_file(dir / "full_sgd.yaml", sgd + "  enable_distributed: true\n  sharding: full\n");
    // Clipped, SGD's step does not see the gradients' scale (nor AdamW's, ever): unclipped it does.
    sgd.replace(sgd.find("  max_gradient_norm: 1.0\n"), 24, "");
    one_sgd_unclipped = zoo::testing::write_file(dir / "one_sgd_unclipped.yaml", sgd);
    full_sgd_unclipped = zoo::testing::write_file(dir / "full_sgd_unclipped.yaml",
                                                  sgd + "  enable_distributed: true\n  sharding: full\n");
  }
  void copy(const std::string& from, const std::string& to) const {
    fs::copy(dir / from, dir / to, fs::copy_options::recursive);
  }
};

}  // namespace

TEST(FullSharding, RanksTrainAsOneProcessAndShardedCheckpointsResumeAtAnyWorldSize) {
  SKIP_WITHOUT_GLOO();
  ShardedJob job;
  const std::string d = job.dir.path();
  auto r = job.zoo("CPU --params " + job.one + " --mode train --max_steps 8 -o " + d + "/one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto straight = losses(r.output);

  // 4 ranks to step 4: a sharded checkpoint, the same weights and optimizer state.
  r = job.ranks(4, free_port(10), "--mode train --max_steps 4 -o " + d + "/four", job.full);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Fully sharded over 4 ranks: 4 units (3 layers and the rest)"), std::string::npos)
      << r.output;
  expect_same_losses(losses(r.output), straight, 1, 4, "4 ranks, full sharding");
  const std::string four = d + "/four/checkpoint_4.mdl";
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(fs::exists(d + "/four/checkpoint_4.mdl.shards/shard_" + std::to_string(rank) + "_of_4.mdl"));
  EXPECT_LT(fs::file_size(four), fs::file_size(d + "/one/checkpoint_4.mdl") / 4) << "the index holds no weights";
  EXPECT_LT(weight_distance(d + "/one/checkpoint_4.mdl", four), 1e-5);
  const double state = optimizer_state_distance(d + "/one/checkpoint_4.mdl", four);
  EXPECT_GE(state, 0) << "the sharded checkpoint's optimizer state has other entries than the unsharded one's";
  EXPECT_LT(state, 1e-5);

  // It goes on at 2 ranks, and in one process, on the same trajectory.
  job.copy("four", "four_then_one");
  r = job.ranks(2, free_port(11), "--mode train --max_steps 8 -o " + d + "/four", job.full);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 5, 8, "4 ranks then 2");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_8.mdl", d + "/four/checkpoint_8.mdl"), 1e-5);
  r = job.zoo("CPU --params " + job.one + " --mode train --max_steps 8 -o " + d + "/four_then_one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 5, 8, "4 ranks then one process");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_8.mdl", d + "/four_then_one/checkpoint_8.mdl"), 1e-5);

  // An unsharded checkpoint goes on at 4 ranks, fully sharded.
  job.copy("one", "one_then_four");
  fs::remove(d + "/one_then_four/checkpoint_8.mdl");
  r = job.ranks(4, free_port(12), "--mode train --max_steps 8 -o " + d + "/one_then_four", job.full);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 5, 8, "one process then 4 ranks");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_8.mdl", d + "/one_then_four/checkpoint_8.mdl"), 1e-5);

  // Readers of checkpoints read it: eval, and one torch.load-able file from the shards.
  const double want = eval_loss(job.zoo("CPU --params " + job.one + " --mode eval -o " + d + "/e1 --checkpoint_path " +
                                        d + "/one/checkpoint_4.mdl")
                                    .output);
  r = job.zoo("CPU --params " + job.one + " --mode eval -o " + d + "/e2 --checkpoint_path " + four);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(eval_loss(r.output), want, 2e-5) << r.output;
  const std::string prompt = " --prompt 'the cat' --max_new_tokens 12 --temperature 0";
  const auto unsharded = job.zoo("generate --checkpoint_path " + d + "/one/checkpoint_4.mdl" + prompt);
  r = job.zoo("generate --checkpoint_path " + four + prompt);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, unsharded.output);
  r = job.zoo("checkpoint consolidate " + four + " " + d + "/whole.mdl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(weight_distance(d + "/one/checkpoint_4.mdl", d + "/whole.mdl"), 1e-5);
  const std::string py = zoo::testing::write_file(d + "/compare.py", zoo::testing::oracle("full_sharding_compare.py"));
  r = run_command("/usr/bin/python3 " + py + " " + d + "/whole.mdl " + d + "/one/checkpoint_4.mdl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("max diff ([0-9.e-]+)"))) << r.output;
  EXPECT_LT(std::stod(m[1]), 1e-5) << r.output;
  EXPECT_NE(r.output.find("steps 4 4"), std::string::npos) << r.output;
}

TEST(FullSharding, TwoRanksWithSgdTrainAsOneProcessClippedOrNot) {
  SKIP_WITHOUT_GLOO();
  ShardedJob job;
  const std::string d = job.dir.path();
  int port = 13;
  for (const auto& [one, full] :
       {std::pair{job.one_sgd, job.full_sgd}, {job.one_sgd_unclipped, job.full_sgd_unclipped}}) {
    const std::string name = fs::path(one).stem().string();
    auto r = job.zoo("CPU --params " + one + " --mode train --max_steps 4 -o " + d + "/" + name);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto straight = losses(r.output);
    r = job.ranks(2, free_port(port++), "--mode train --max_steps 4 -o " + d + "/" + name + "_two", full);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_losses(losses(r.output), straight, 1, 4, name + ", 2 ranks, full sharding");
    const std::string a = d + "/" + name + "/checkpoint_4.mdl", b = d + "/" + name + "_two/checkpoint_4.mdl";
    EXPECT_LT(weight_distance(a, b), 1e-5) << name;
    const double state = optimizer_state_distance(a, b);
    EXPECT_GE(state, 0) << name;
    EXPECT_LT(state, 1e-5) << name;
  }
}

// LoRA: the frozen base is sharded too (never updated), the adapters train
// as in one process.
TEST(FullSharding, LoraAdaptersOnAShardedFrozenBaseTrainAsOneProcess) {
  SKIP_WITHOUT_GLOO();
  ShardedJob job;
  const std::string d = job.dir.path();
  const std::string adapters = "  activation_checkpointing: true\n  lora_params: {r: 4, alpha: 8}\n";
  auto with_lora = [&](const std::string& file, const std::string& name) {
    std::string y = zoo::testing::read_file(file);
    y.replace(y.find("  activation_checkpointing: true\n"), 33, adapters);
    return zoo::testing::write_file(d + "/" + name, y);
  };
  auto r =
      job.zoo("CPU --params " + with_lora(job.one, "lora_one.yaml") + " --mode train --max_steps 4 -o " + d + "/one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto straight = losses(r.output);
  r = job.ranks(2, free_port(23), "--mode train --max_steps 4 -o " + d + "/two", with_lora(job.full, "lora_full.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Full sharding: 3 of 3 layers' gradients reduce-scattered during the backward pass"),
            std::string::npos)
      << r.output;
  expect_same_losses(losses(r.output), straight, 1, 4, "2 ranks, LoRA, full sharding");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_4.mdl", d + "/two/checkpoint_4.mdl"), 1e-5);
}

// A rank killed in the middle of a step, or of writing its shard of a
// checkpoint: the other ends within the timeout naming it, the cut
// checkpoint has no index and nothing lists or loads it, and the run
// resumes from the last complete one.
TEST(FullSharding, ARankKilledMidStepOrMidCheckpointLeavesTheLastCompleteCheckpoint) {
  SKIP_WITHOUT_GLOO();
  ShardedJob job;
  const std::string d = job.dir.path();
  // Wide enough that writing a shard takes a while: the kill lands inside it.
  std::string y = zoo::testing::read_file(job.full);
  y.replace(y.find("hidden_size: 32"), 15, "hidden_size: 256");
  y.replace(y.find("filter_size: 64"), 15, "filter_size: 1024");
  y.replace(y.find("checkpoint_steps: 4"), 19, "checkpoint_steps: 2");
  const std::string params = zoo::testing::write_file(d + "/wide.yaml", y);
  const std::string script = zoo::testing::write_file(d + "/kill.sh", R"SH(
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 OMP_NUM_THREADS=1
RANK=0 $1 CPU --params $3 --mode train --max_steps 1000000 -o $4 > $4.rank0 2>&1 & p0=$!
RANK=1 $1 CPU --params $3 --mode train --max_steps 1000000 -o $4 > $4.rank1 2>&1 & p1=$!
if [ "$5" = step ]; then
  for i in $(seq 1200); do grep -q "Step=5," $4.rank0 && break; sleep 0.05; done
else  # the checkpoint of step 2 completes; the one of step 4 is cut while rank 1 writes its shard
  for i in $(seq 1200); do [ -e $4/checkpoint_2.mdl ] && break; sleep 0.05; done
  tmp=$4/checkpoint_4.mdl.shards/shard_1_of_2.mdl
  while [ ! -e $tmp.tmp ] && [ ! -e $tmp ] && kill -0 $p1 2>/dev/null; do :; done
  [ -e $tmp.tmp ] && echo "cut while writing"
fi
kill -9 $p1
start=$(date +%s%N); wait $p0; rc=$?; end=$(date +%s%N)
echo "rc=$rc ms=$(( (end - start) / 1000000 ))"
tail -1 $4.rank0
)SH");
  for (const std::string when : {"step", "write"}) {
    const std::string dir = d + "/" + when;
    auto r = run_command("bash " + script + " " + zoo::testing::zoo_binary() + " " +
                         std::to_string(free_port(when == "step" ? 20 : 21)) + " " + params + " " + dir + " " + when);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("rc=([0-9]+) ms=([0-9]+)"))) << r.output;
    EXPECT_EQ(m[1], "1") << r.output;
    EXPECT_LT(std::stoi(m[2]), 60000) << r.output;  // well within dist_timeout
    EXPECT_NE(r.output.find("zoo: error: rank 0 of 2: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank 1 stopped answering"), std::string::npos) << r.output;
    if (when == "step") continue;
    EXPECT_NE(r.output.find("cut while writing"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoint_4.mdl.shards/shard_0_of_2.mdl")) << "rank 0 had written its shard";
    EXPECT_FALSE(fs::exists(dir + "/checkpoint_4.mdl")) << "an index was written for a checkpoint missing a shard";
    const auto listed = ckpt::list_checkpoints(dir);
    ASSERT_FALSE(listed.empty());
    EXPECT_EQ(listed.back().path, dir + "/checkpoint_2.mdl");
    // The run goes on from step 2, in one process.
    std::string one = zoo::testing::read_file(params);
    const std::string sharded = "  enable_distributed: true\n  sharding: full\n";
    one.replace(one.find(sharded), sharded.size(), "");
    const std::string single = zoo::testing::write_file(d + "/wide_one.yaml", one);
    r = job.zoo("CPU --params " + single + " --mode train --max_steps 3 -o " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Loading checkpoint " + dir + "/checkpoint_2.mdl"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Step=3,"), std::string::npos) << r.output;
  }
}

TEST(FullSharding, OptimizersThatNeedWholeTensorsAreRefusedAndShardingNeedsRanks) {
  SKIP_WITHOUT_GLOO();
  ShardedJob job;
  const std::string d = job.dir.path();
  std::string y = zoo::testing::read_file(job.full);
  y.replace(y.find("optimizer_type: AdamW"), 21, "optimizer_type: Lamb");
  const std::string lamb = zoo::testing::write_file(d + "/lamb.yaml", y);
  auto line_of = [](const std::string& text, const std::string& what) {  // 1-based
    return std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<long>(text.find(what)), '\n'));
  };
  // Said when the params are read, at the optimizer's line, naming sharding's: by --validate_only too.
  const std::string at = "lamb.yaml:" + line_of(y, "optimizer_type: Lamb") + ":";
  const std::string refusal =
      "optimizer.optimizer_type: Lamb updates each weight from statistics of its whole tensor, "
      "which runconfig.sharding: full splits over the ranks (" +
      lamb + ":" + line_of(y, "sharding: full") + ":";
  auto r = job.ranks(2, free_port(22), "--mode train --max_steps 1 -o " + d + "/lamb", lamb);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(at), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(refusal), std::string::npos) << r.output;
  r = job.zoo("CPU --params " + lamb + " --mode train --validate_only");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(at), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(refusal), std::string::npos) << r.output;
  // Sparsity's masks need whole weights as well.
  y = zoo::testing::read_file(job.full) + "sparsity:\n  sparsity: 0.5\n";
  const std::string sparse = zoo::testing::write_file(d + "/sparse.yaml", y);
  r = job.zoo("CPU --params " + sparse + " --mode train --validate_only");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("sparse.yaml:" + line_of(y, "  sparsity: 0.5") + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sparsity: needs each rank to hold whole weights"), std::string::npos) << r.output;
  y = zoo::testing::read_file(job.one) + "  sharding: full\n";
  const std::string alone = zoo::testing::write_file(d + "/alone.yaml", y);
  r = job.zoo("CPU --params " + alone + " --mode train --max_steps 1 -o " + d + "/alone");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("runconfig.sharding"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("set enable_distributed: true as well"), std::string::npos) << r.output;
}
