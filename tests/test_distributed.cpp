// Data-parallel training on c10d's Gloo over 127.0.0.1: two ranks train as
// one process with the same global batch, checkpoints carry across world
// sizes, and a rank that dies ends the others with its name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>

#include "distributed_fixtures.h"

using namespace zoo;
using zoo::testing::run_command;
using zoo::testing::TempDir;
using namespace zoo::testing::distributed;

TEST(Distributed, TwoGlooRanksTrainAsOneProcessAndCheckpointsResumeAtAnyWorldSize) {
  SKIP_WITHOUT_GLOO();
  Job job;
  const std::string d = job.dir.path();
  auto r = job.zoo("CPU --params " + job.single + " --mode train --max_steps 10 -o " + d + "/one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto straight = losses(r.output);

  // Two ranks, each with 4 of the global batch's 8 samples, to step 6.
  r = job.ranks(2, free_port(0), "--mode train --max_steps 6 -o " + d + "/two");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Data-parallel rank 0 of 2"), std::string::npos) << r.output;
  expect_same_losses(losses(r.output), straight, 1, 6, "2 ranks");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_6.mdl", d + "/two/checkpoint_6.mdl"), 1e-5);
  // Only the main rank writes: one checkpoint, one log line per step.
  EXPECT_EQ(ckpt::list_checkpoints(d + "/two").size(), 1u);
  size_t lines = 0;
  for (size_t at = r.output.find("Step=3, "); at != std::string::npos; at = r.output.find("Step=3, ", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << r.output;

  // The 2-rank checkpoint goes on with 2 ranks, and in one process.
  std::filesystem::copy(d + "/two", d + "/two_then_one", std::filesystem::copy_options::recursive);
  r = job.ranks(2, free_port(1), "--mode train --max_steps 10 -o " + d + "/two");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 7, 10, "2 ranks resumed");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_10.mdl", d + "/two/checkpoint_10.mdl"), 1e-5);
  r = job.zoo("CPU --params " + job.single + " --mode train --max_steps 10 -o " + d + "/two_then_one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 7, 10, "1 rank resumed");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_10.mdl", d + "/two_then_one/checkpoint_10.mdl"), 1e-5);

  // Sharded optimizer state (ZeRO-1): the same run, the full state in the checkpoint.
  r = job.ranks(2, free_port(5), "--mode train --max_steps 6 -o " + d + "/sharded", job.sharded);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Optimizer state sharded over 2 ranks: this rank keeps"), std::string::npos) << r.output;
  expect_same_losses(losses(r.output), straight, 1, 6, "2 ranks, sharded");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_6.mdl", d + "/sharded/checkpoint_6.mdl"), 1e-5);
  const double state = optimizer_state_distance(d + "/two_then_one/checkpoint_6.mdl", d + "/sharded/checkpoint_6.mdl");
  EXPECT_GE(state, 0) << "the sharded checkpoint lacks optimizer state entries";
  EXPECT_LT(state, 1e-5);
  std::filesystem::copy(d + "/sharded", d + "/sharded_then_one", std::filesystem::copy_options::recursive);
  r = job.ranks(2, free_port(6), "--mode train --max_steps 10 -o " + d + "/sharded", job.sharded);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 7, 10, "2 ranks, sharded, resumed");
  r = job.zoo("CPU --params " + job.single + " --mode train --max_steps 10 -o " + d + "/sharded_then_one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), straight, 7, 10, "1 rank from the sharded checkpoint");

  // Evaluation: each rank takes its share of every batch; the mean is the same.
  const std::string ckpt = " --checkpoint_path " + d + "/one/checkpoint_10.mdl";
  const double alone = eval_loss(job.zoo("CPU --params " + job.single + " --mode eval -o " + d + "/e1" + ckpt).output);
  r = job.ranks(2, free_port(2), "--mode eval -o " + d + "/e2" + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(eval_loss(r.output), alone, 2e-5) << r.output;
}

// With small buckets the all-reduces start while the backward pass still
// runs (on the step's last micro-batch only, when gradients are accumulated
// over two), and the run still equals one process with the same batch.
TEST(Distributed, GradientAveragingOverlapsTheBackwardPass) {
  SKIP_WITHOUT_GLOO();
  Job job;
  const std::string d = job.dir.path();
  std::string y = zoo::testing::read_file(job.single);
  y.replace(y.find("optimizer:\n"), 11, "optimizer:\n  grad_accum_steps: 2\n");
  const std::string single = zoo::testing::write_file(d + "/accum.yaml", y);
  const std::string dp = zoo::testing::write_file(d + "/accum_dp.yaml", y + "  enable_distributed: true\n");
  auto r = job.zoo("CPU --params " + single + " --mode train --max_steps 4 -o " + d + "/one");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto one = losses(r.output);
  r = run_command("ZOO_BUCKET_MB=0.02 " + zoo::testing::zoo_binary() + " launch --nproc_per_node 2 --master_port " +
                  std::to_string(free_port(7)) + " -- CPU --params " + dp + " --mode train --max_steps 4 -o " + d +
                  "/two");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_losses(losses(r.output), one, 1, 4, "2 ranks, overlapped, 2 micro-batches");
  EXPECT_LT(weight_distance(d + "/one/checkpoint_4.mdl", d + "/two/checkpoint_4.mdl"), 1e-5);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.output, m, std::regex("Gradient averaging: ([0-9]+) of ([0-9]+) buckets started during")))
      << r.output;
  EXPECT_GT(std::stoi(m[2]), 2) << "the test needs several buckets";
  EXPECT_GE(std::stoi(m[1]), 1) << r.output;
}

TEST(Distributed, ARankThatDiesEndsTheOthersNamingIt) {
  SKIP_WITHOUT_GLOO();
  Job job;
  const std::string d = job.dir.path();
  // Started by hand as torchrun would: rank 1 is killed mid-run.
  const std::string script = zoo::testing::write_file(d + "/kill.sh", R"SH(
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 OMP_NUM_THREADS=1
RANK=0 $1 CPU --params $3 --mode train --max_steps 1000000 -o $4 > $4.rank0 2>&1 & p0=$!
RANK=1 $1 CPU --params $3 --mode train --max_steps 1000000 -o $4 > $4.rank1 2>&1 & p1=$!
for i in $(seq 600); do grep -q "Step=5," $4.rank0 && break; sleep 0.1; done
kill -9 $p1
start=$(date +%s%N); wait $p0; rc=$?; end=$(date +%s%N)
echo "rc=$rc ms=$(( (end - start) / 1000000 ))"
tail -1 $4.rank0
)SH");
  auto r = run_command("bash " + script + " " + zoo::testing::zoo_binary() + " " + std::to_string(free_port(3)) + " " +
                       job.dp + " " + d + "/m");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("rc=([0-9]+) ms=([0-9]+)"))) << r.output;
  EXPECT_EQ(m[1], "1") << r.output;
  EXPECT_LT(std::stoi(m[2]), 60000) << r.output;  // well within dist_timeout
  EXPECT_NE(r.output.find("zoo: error: rank 0 of 2: "), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("failed: rank 1 stopped answering (ended, killed or paused; if it ended, its own log says why)"),
      std::string::npos)
      << r.output;

  // Under zoo launch, the launcher names the rank and stops the rest.
  const std::string launched = zoo::testing::write_file(d + "/launch.sh", R"SH(
$1 launch --nproc_per_node 2 --master_port $2 -- CPU --params $3 --mode train --max_steps 1000000 -o $4 > $4.log 2>&1 &
launcher=$!
for i in $(seq 600); do grep -q "Step=5," $4.log && break; sleep 0.1; done
for status in /proc/[0-9]*/status; do  # the launcher's children, without procps
  child=${status#/proc/}; child=${child%/status}
  grep -qx "PPid:[[:space:]]*$launcher" $status 2>/dev/null || continue
  tr '\0' '\n' < /proc/$child/environ | grep -qx RANK=1 && kill -9 $child
done
wait $launcher; echo "launcher rc=$?"
cat $4.log
)SH");
  r = run_command("bash " + launched + " " + zoo::testing::zoo_binary() + " " + std::to_string(free_port(4)) + " " +
                  job.dp + " " + d + "/l");
  EXPECT_NE(r.output.find("zoo launch: rank 1 was killed by signal 9 (Killed); stopping the other ranks"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("launcher rc=137"), std::string::npos) << r.output;
}

// Rank 0 holds the store where the ranks meet: when it is gone before the others arrive (it failed at start-up), they
// stop after runconfig.dist_timeout saying so, not with the socket library's words alone.
TEST(Distributed, RanksWithoutRankZeroStopSayingItDidNotAnswer) {
  SKIP_WITHOUT_GLOO();
  Job job;
  std::string y = zoo::testing::read_file(job.dp);
  y.replace(y.find("dist_timeout: 60"), 16, "dist_timeout: 2");
  const std::string params = zoo::testing::write_file(job.dir / "short_timeout.yaml", y);
  const int port = free_port(8);
  auto r = run_command("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                       zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train --max_steps 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find("zoo: error: rank 1 of 2: could not meet the other ranks at 127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 0, which holds the store where the ranks meet, did not answer (if it ended, its own "
                          "log says why) (runconfig.dist_timeout 2 s"),
            std::string::npos)
      << r.output;
}

TEST(Distributed, TheGlobalBatchMustSplitEvenlyAndTheEnvironmentMustAgree) {
  TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  {
    zoo::testing::EnvGuard env{{"RANK", "0"}, {"WORLD_SIZE", "3"}};
    const std::string e = zoo::testing::open_error(
        "{data_processor: ByteTextDataProcessor, batch_size: 8, data_dir: " + (dir / "data/train") + "}");
    EXPECT_NE(e.find("train_input.batch_size: batch_size 8 (the global batch) does not divide by the 3 data-parallel "
                     "ranks (WORLD_SIZE)"),
              std::string::npos)
        << e;
  }
  const std::string params = zoo::testing::write_file(
      dir / "p.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "m", "  max_steps: 2\n"));
  auto r =
      run_command("RANK=1 WORLD_SIZE=2 " + zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(params + ": the environment says this is rank 1 of 2 (WORLD_SIZE), but "
                                   "runconfig.enable_distributed is false"),
            std::string::npos)
      << r.output;
}
