// The everyday commands around runs: `zoo checkpoint info` on every kind of
// checkpoint zoo writes or reads (compared with what torch.load finds in the
// same file), on a 13B-shaped one without reading its tensors; `list`,
// `copy`, `move` and `delete` keeping a checkpoint and its shards together;
// `zoo config diff` and `stats` on params as a run resolves them.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "distributed_fixtures.h"
#include "runner/convert/safetensors.h"
#include "test_util.h"

extern char** environ;

using namespace zoo;
using nlohmann::json;
using zoo::testing::run_command;
using zoo::testing::TempDir;
namespace fs = std::filesystem;

namespace {

struct TinyRun {
  TempDir dir;
  std::string params;
  explicit TinyRun(const std::string& model_extra = "", const std::string& runconfig_extra = "") {
    zoo::testing::write_small_corpus(dir / "data");
    std::string y =
        zoo::testing::tiny_params_yaml(dir / "data", dir / "run", "  checkpoint_steps: 2\n" + runconfig_extra);
    y.replace(y.find("  dropout_rate: 0.0\n"), 19, "  dropout_rate: 0.0\n" + model_extra);
    params = zoo::testing::write_file(dir / "p.yaml", y);
  }
  zoo::testing::CommandResult zoo(const std::string& args) const {
    return run_command(zoo::testing::zoo_binary() + " " + args);
  }
  json info(const std::string& path, const std::string& flags = "") const {
    const auto r = zoo("checkpoint info --json " + flags + " " + path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(r.output.substr(r.output.find('{')));
  }
  json reference(const std::string& path) const {
    const std::string script =
        zoo::testing::write_file(dir / "reference.py", zoo::testing::oracle("checkpoint_info_reference.py"));
    const auto r = run_command("/usr/bin/python3 " + script + " " + path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(r.output);
  }
};

void expect_as_torch_loads(const json& info, const json& reference) {
  EXPECT_EQ(info["weights"]["count"], reference["tensors"]) << info.dump(2);
  EXPECT_EQ(info["weights"]["elements"], reference["elements"]) << info.dump(2);
  if (reference.contains("step")) EXPECT_EQ(info["step"], reference["step"]);
  if (reference.contains("state")) {
    EXPECT_EQ(info["optimizer"]["state"], reference["state"]) << info.dump(2);
    EXPECT_EQ(info["optimizer"]["parameters_with_state"], reference["parameters_with_state"]);
  }
}

// Flips one byte of the file at `fraction` of its length.
void corrupt(const std::string& path, double fraction) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(fs::file_size(path) * fraction);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

TEST(CheckpointInfo, ZooCheckpointsAsTorchLoadsThemAndTheirChecksums) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TinyRun job;
  ASSERT_EQ(job.zoo("CPU --params " + job.params + " --mode train --max_steps 2").exit_code, 0);
  const std::string ckpt = job.dir / "run/checkpoint_2.mdl";
  const json info = job.info(ckpt);
  EXPECT_EQ(info["kind"], "zoo");
  EXPECT_EQ(info["model"]["name"], "gpt2");
  EXPECT_EQ(info["model"]["sizes"]["hidden_size"], 32);
  EXPECT_EQ(info["model"]["sizes"]["num_hidden_layers"], 2);
  EXPECT_EQ(info["optimizer"]["type"], "AdamW");
  EXPECT_EQ(info["weights"]["dtypes"], json({{"float32", info["weights"]["count"]}}));
  EXPECT_EQ(info["checksum"], "not checked (--verify reads every tensor to check it)");
  expect_as_torch_loads(info, job.reference(ckpt));
  EXPECT_EQ(job.info(ckpt, "--verify")["checksum"], "verified");

  auto text = job.zoo("checkpoint info " + ckpt);
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find(ckpt + ": zoo checkpoint, "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(", step 2, written by zoo "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("  optimizer: AdamW, lr "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("; state for 36 parameters (beta1_power, beta2_power, exp_avg, exp_avg_sq), "),
            std::string::npos)
      << text.output;

  // A byte changed inside the tensors: info still reads it, --verify says it fails (exit 1).
  fs::copy_file(ckpt, job.dir / "bad.mdl");
  corrupt(job.dir / "bad.mdl", 0.5);
  EXPECT_EQ(job.zoo("checkpoint info " + job.dir / "bad.mdl").exit_code, 0);
  text = job.zoo("checkpoint info --verify " + job.dir / "bad.mdl");
  EXPECT_EQ(text.exit_code, 1) << text.output;
  EXPECT_NE(text.output.find("checksum: FAILED: "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("checksum mismatch"), std::string::npos) << text.output;

  // Not a checkpoint at all: named.
  zoo::testing::write_file(job.dir / "notes.mdl", "hello");
  text = job.zoo("checkpoint info " + job.dir / "notes.mdl");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.output.find(job.dir / "notes.mdl"), std::string::npos) << text.output;
}

TEST(CheckpointInfo, LoraTorchSaveAndHuggingFaceCheckpoints) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TinyRun job("  lora_params: {r: 4, alpha: 8}\n");
  ASSERT_EQ(job.zoo("CPU --params " + job.params + " --mode train --max_steps 2").exit_code, 0);
  const std::string ckpt = job.dir / "run/checkpoint_2.mdl";
  const json lora = job.info(ckpt);
  const json reference = job.reference(ckpt);
  expect_as_torch_loads(lora, reference);
  ASSERT_GT(reference["lora_layers"].get<int>(), 0);
  EXPECT_EQ(lora["lora"]["adapter_layers"], reference["lora_layers"]);
  EXPECT_EQ(lora["lora"]["r"], 4);

  // A plain state dict as Python's torch.save writes it.
  const auto saved = run_command(
      "/usr/bin/python3 -c \"import torch; "
      "torch.save(torch.load('" +
      ckpt + "')['model'], '" + job.dir / "sd.pt" + "')\"");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const json plain = job.info(job.dir / "sd.pt");
  EXPECT_EQ(plain["kind"], "torch.save");
  EXPECT_EQ(plain["checksum"], "none stored (not written by zoo)");
  expect_as_torch_loads(plain, job.reference(job.dir / "sd.pt"));

  // Hugging Face: the export, its directory, and a sharded index (one shard missing: exit 1).
  TinyRun base;
  ASSERT_EQ(base.zoo("CPU --params " + base.params + " --mode train --max_steps 2").exit_code, 0);
  auto r = base.zoo("convert " + base.dir / "run/checkpoint_2.mdl" +
                    " --model gpt2 --src-fmt zoo --tgt-fmt hf --output-dir " + base.dir / "hf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto tensors = convert::read_safetensors(base.dir / "hf/model.safetensors");
  int64_t elements = 0;
  for (const auto& [k, t] : tensors) elements += t.numel();
  for (const std::string path : {base.dir / "hf", base.dir / "hf/model.safetensors"}) {
    const json hf = base.info(path);
    EXPECT_EQ(hf["kind"], "safetensors");
    EXPECT_EQ(hf["weights"]["count"], tensors.size());
    EXPECT_EQ(hf["weights"]["elements"], elements);
    EXPECT_EQ(hf["model"]["name"], "gpt2");
    EXPECT_EQ(hf["model"]["architectures"], json::array({"GPT2LMHeadModel"}));
  }
  json weight_map = json::object();
  for (const auto& [k, t] : tensors) weight_map[k] = "model.safetensors";
  zoo::testing::write_file(base.dir / "hf/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  const json index = base.info(base.dir / "hf");
  EXPECT_EQ(index["kind"], "safetensors index");
  EXPECT_EQ(index["sharding"]["complete"], true);
  EXPECT_EQ(index["weights"]["count"], tensors.size());
  weight_map[tensors.begin()->first] = "model-00002-of-00002.safetensors";
  zoo::testing::write_file(base.dir / "hf/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  r = base.zoo("checkpoint info " + base.dir / "hf");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("1 of 2 shards present (INCOMPLETE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model-00002-of-00002.safetensors: missing"), std::string::npos) << r.output;
}

TEST(CheckpointInfo, ShardedCheckpointsListTheirShards) {
  SKIP_WITHOUT_GLOO();
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TinyRun job("", "  enable_distributed: true\n  sharding: full\n  dist_timeout: 60\n");
  const auto r =
      job.zoo("launch --nproc_per_node 2 --master_port " + std::to_string(zoo::testing::distributed::free_port(3)) +
              " -- CPU --params " + job.params + " --mode train --max_steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = job.dir / "run/checkpoint_2.mdl";
  json info = job.info(ckpt, "--verify");
  EXPECT_EQ(info["kind"], "zoo sharded");
  EXPECT_EQ(info["sharding"]["world_size"], 2);
  EXPECT_EQ(info["sharding"]["complete"], true);
  EXPECT_EQ(info["checksum"], "verified (index and every shard)");
  // What the shards hold is what the consolidated file holds.
  ASSERT_EQ(job.zoo("checkpoint consolidate " + ckpt + " " + job.dir / "one.mdl").exit_code, 0);
  expect_as_torch_loads(info, job.reference(job.dir / "one.mdl"));

  // list, copy (with the shards), diff of the copy, move, delete; a missing shard is reported.
  auto out = job.zoo("checkpoint list " + job.dir / "run");
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("complete  " + ckpt + "  (newest: train resumes from it)"), std::string::npos)
      << out.output;
  fs::create_directories(job.dir / "kept");
  out = job.zoo("checkpoint copy " + ckpt + " " + job.dir / "kept");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_TRUE(fs::exists(job.dir / "kept/checkpoint_2.mdl.shards/shard_1_of_2.mdl"));
  EXPECT_EQ(job.zoo("checkpoint diff " + ckpt + " " + job.dir / "kept/checkpoint_2.mdl").exit_code, 0);
  out = job.zoo("checkpoint copy " + ckpt + " " + job.dir / "kept");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("already exists; zoo does not overwrite"), std::string::npos) << out.output;
  out = job.zoo("checkpoint move " + job.dir / "kept/checkpoint_2.mdl" + " " + job.dir / "kept/moved.mdl");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_TRUE(fs::exists(job.dir / "kept/moved.mdl.shards/shard_0_of_2.mdl"));
  EXPECT_FALSE(fs::exists(job.dir / "kept/checkpoint_2.mdl.shards"));
  EXPECT_EQ(job.info(job.dir / "kept/moved.mdl", "--verify")["checksum"], "verified (index and every shard)");
  fs::remove(job.dir / "kept/moved.mdl.shards/shard_1_of_2.mdl");
  out = job.zoo("checkpoint info " + job.dir / "kept/moved.mdl");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("shard_1_of_2.mdl: missing"), std::string::npos) << out.output;
  out = job.zoo("checkpoint delete " + job.dir / "kept/moved.mdl");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_FALSE(fs::exists(job.dir / "kept/moved.mdl"));
  EXPECT_FALSE(fs::exists(job.dir / "kept/moved.mdl.shards"));
}

TEST(CheckpointFiles, ListCopyMoveDeleteAndLeftovers) {
  TinyRun job;
  ASSERT_EQ(job.zoo("CPU --params " + job.params + " --mode train --max_steps 4").exit_code, 0);
  const std::string d = job.dir / "run";
  auto r = job.zoo("checkpoint list --json " + d);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json list = json::parse(r.output);
  ASSERT_EQ(list["checkpoints"].size(), 2u);
  EXPECT_EQ(list["checkpoints"][0]["step"], 2);
  EXPECT_EQ(list["checkpoints"][1]["step"], 4);
  EXPECT_EQ(list["checkpoints"][1]["status"], "complete");

  // An interrupted sharded save (shards, no index) and a truncated checkpoint are reported.
  fs::create_directories(d + "/checkpoint_6.mdl.shards");
  zoo::testing::write_file(d + "/checkpoint_6.mdl.shards/shard_0_of_2.mdl", "x");
  fs::copy_file(d + "/checkpoint_4.mdl", d + "/checkpoint_8.mdl");
  fs::resize_file(d + "/checkpoint_8.mdl", 100);
  r = job.zoo("checkpoint list " + d);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unreadable: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval_all reads all 3, and reports the 1 not complete as failed"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("leftover: " + d + "/checkpoint_6.mdl.shards: shards of a save that never wrote its index"),
            std::string::npos)
      << r.output;
  r = job.zoo("checkpoint delete " + d + "/checkpoint_6.mdl.shards");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(d + "/checkpoint_6.mdl.shards"));
  r = job.zoo("checkpoint delete " + d + "/checkpoint_8.mdl");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is not a checkpoint zoo reads"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(d + "/checkpoint_8.mdl")) << "nothing is deleted that is not a checkpoint";
  fs::remove(d + "/checkpoint_8.mdl");

  // copy to a new name, move into another directory, delete; the step-4 checkpoint is the same throughout.
  r = job.zoo("checkpoint copy " + d + "/checkpoint_4.mdl " + job.dir / "best.mdl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(job.zoo("checkpoint diff --exact " + d + "/checkpoint_4.mdl " + job.dir / "best.mdl").exit_code, 0);
  fs::create_directories(job.dir / "archive");
  r = job.zoo("checkpoint move " + d + "/checkpoint_2.mdl " + job.dir / "archive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(job.dir / "archive/checkpoint_2.mdl"));
  EXPECT_FALSE(fs::exists(d + "/checkpoint_2.mdl"));
  r = job.zoo("checkpoint delete " + job.dir / "best.mdl");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(job.dir / "best.mdl"));
  r = job.zoo("checkpoint move " + job.dir / "nope.mdl " + job.dir / "archive");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(job.dir / "nope.mdl"), std::string::npos) << r.output;
}

// A Cerebras-GPT 13B-shaped checkpoint (51 GB of float32) written as a sparse file: info reads its pickle and
// zip directory only. Its resident memory stays far below the tensors' size, so it did not read them.
TEST(CheckpointInfo, ThirteenBShapedCheckpointWithoutReadingItsTensors) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TempDir dir;
  const std::string script =
      zoo::testing::write_file(dir / "sparse.py", zoo::testing::oracle("checkpoint_info_sparse.py"));
  const std::string ckpt = dir / "gpt13b.mdl";
  const auto made = run_command("/usr/bin/python3 " + script + " " + ckpt);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const json expected = json::parse(made.output);
  const std::string binary = zoo::testing::zoo_binary(), out = dir / "info.json";
  const std::vector<std::string> args = {"/bin/sh", "-c", binary + " checkpoint info --json " + ckpt + " > " + out};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ), 0);
  int status = 0;
  struct rusage usage {};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << zoo::testing::read_file(out);
  const json info = json::parse(zoo::testing::read_file(out));
  EXPECT_EQ(info["weights"]["count"], expected["tensors"]);
  EXPECT_EQ(info["weights"]["elements"], expected["elements"]);
  EXPECT_EQ(info["weights"]["bytes"], expected["elements"].get<int64_t>() * 4);
  EXPECT_EQ(info["model"]["sizes"]["hidden_size"], 5120);
  const double peak_mib = usage.ru_maxrss / 1024.0;
  std::cout << "[ info 13B ] " << seconds << " s, peak resident " << peak_mib << " MiB for "
            << info["weights"]["bytes"].get<double>() / (1 << 30) << " GiB of tensors\n";
  EXPECT_LT(peak_mib, 1024) << "info read the tensors";
}

TEST(ConfigTools, ALegacyFileAndItsTrainerTwinResolveAlikeAndStatsCountTheModel) {
  TinyRun job;
  const std::string twin = job.dir / "twin.yaml";
  ASSERT_EQ(job.zoo("config convert-legacy " + job.params + " " + twin).exit_code, 0);
  auto r = job.zoo("config diff " + job.params + " " + twin);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resolve to the same params"), std::string::npos) << r.output;
  std::string changed = zoo::testing::read_file(job.params);
  changed.replace(changed.find("weight_decay: 0.01"), 18, "weight_decay: 0.02");
  changed.replace(changed.find("  batch_size: 8\n  shuffle"), 15, "  batch_size: 4\n");
  const std::string other = zoo::testing::write_file(job.dir / "other.yaml", changed);
  r = job.zoo("config diff " + twin + " " + other);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("  optimizer.weight_decay: 0.01 vs 0.02\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  train_input.batch_size: 8 vs 4\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 differ, 0 only in A"), std::string::npos) << r.output;

  r = job.zoo("config stats --ranks 4 " + job.params);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto validate = job.zoo("CPU --params " + job.params + " --mode train --max_steps 2 --validate_only");
  ASSERT_EQ(validate.exit_code, 0) << validate.output;
  const auto line = [](const std::string& out, const std::string& start) {
    const size_t at = out.find(start);
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_FALSE(line(r.output, "Parameters: ").empty()) << r.output;
  EXPECT_EQ(line(r.output, "Parameters: "), line(validate.output, "Parameters: "));
  EXPECT_EQ(line(r.output, "FLOPs per token: "), line(validate.output, "FLOPs per token: "));
  EXPECT_NE(
      r.output.find("Tokens per step: 256 (train_input.batch_size 8, the global batch, x max_sequence_length 32); "
                    "training FLOPs per step 4.089e+07, 1.022e+07 per rank at 4 ranks"),
      std::string::npos)
      << r.output;
  r = job.zoo("config diff " + job.params);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected A.yaml B.yaml"), std::string::npos) << r.output;
}
