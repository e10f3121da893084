// What the data-parallel tests share: a tiny job run as one process and as
// ranks on 127.0.0.1, and the losses, weights and optimizer state of their
// logs and checkpoints compared. Defines (in zoo::testing::distributed):
// free_port, Job, losses, eval_loss, weight_distance,
// optimizer_state_distance, expect_same_losses, SKIP_WITHOUT_GLOO.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>

#include "runner/checkpoint/checkpoint.h"
#include "test_util.h"

namespace zoo::testing::distributed {

// A port per test process, so parallel ctest runs do not meet each other.
inline int free_port(int offset) { return 20000 + (getpid() * 7 + offset * 131) % 30000; }

// The tiny run as one process (single.yaml) and as data-parallel ranks
// (dp.yaml), logging every step.
struct Job {
  TempDir dir;
  std::string single, dp, sharded;
  Job() {
    zoo::testing::write_small_corpus(dir / "data");
    std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / "unused",
                                                   "  checkpoint_steps: 6\n  eval_steps: 3\n  dist_timeout: 60\n");
    y.replace(y.find("log_steps: 1000"), 15, "log_steps: 1");
    single = zoo::testing::write_file(dir / "single.yaml", y);
    dp = zoo::testing::write_file(dir / "dp.yaml", y + "  enable_distributed: true\n");
    sharded = zoo::testing::write_file(dir / "sharded.yaml",
                                       y + "  enable_distributed: true\n  shard_optimizer_state: true\n");
  }
  zoo::testing::CommandResult zoo(const std::string& args) const {
    return run_command(zoo::testing::zoo_binary() + " " + args);
  }
  zoo::testing::CommandResult ranks(int n, int port, const std::string& args, const std::string& params = "") const {
    return zoo("launch --nproc_per_node " + std::to_string(n) + " --master_port " + std::to_string(port) +
               " -- CPU --params " + (params.empty() ? dp : params) + " " + args);
  }
};

inline std::map<int, double> losses(const std::string& output) {
  std::map<int, double> out;
  static const std::regex line("Train Device=cpu, Step=([0-9]+), Loss=([0-9.]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = std::stod((*it)[2]);
  return out;
}

inline double eval_loss(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("Avg Eval Loss: ([0-9.]+)")) ? std::stod(m[1]) : -1;
}

// Largest |a - b| over the model weights of two checkpoints.
inline double weight_distance(const std::string& a, const std::string& b) {
  auto wa = ckpt::load_checkpoint_file(a).at("model").toGenericDict();
  auto wb = ckpt::load_checkpoint_file(b).at("model").toGenericDict();
  double most = 0;
  for (const auto& kv : wa)
    most = std::max(most, (kv.value().toTensor() - wb.at(kv.key()).toTensor()).abs().max().item<double>());
  return most;
}

// Largest |a - b| over the optimizer state tensors; -1 when the entries differ.
inline double optimizer_state_distance(const std::string& a, const std::string& b) {
  auto sa = ckpt::load_checkpoint_file(a).at("optimizer").toGenericDict().at("state").toGenericDict();
  auto sb = ckpt::load_checkpoint_file(b).at("optimizer").toGenericDict().at("state").toGenericDict();
  if (sa.size() != sb.size()) return -1;
  double most = 0;
  for (const auto& kv : sa) {
    if (!sb.contains(kv.key())) return -1;
    auto ea = kv.value().toGenericDict(), eb = sb.at(kv.key()).toGenericDict();
    if (ea.size() != eb.size()) return -1;
    for (const auto& e : ea)
      most = std::max(most, (e.value().toTensor() - eb.at(e.key()).toTensor()).abs().max().item<double>());
  }
  return most;
}

inline void expect_same_losses(const std::map<int, double>& got, const std::map<int, double>& want, int from, int to,
                               const std::string& what) {
  for (int s = from; s <= to; ++s) {
    ASSERT_TRUE(got.count(s)) << what << ": no loss logged for step " << s;
    EXPECT_NEAR(got.at(s), want.at(s), 2e-5) << what << ", step " << s;  // 5 decimals printed
  }
}

// PyTorch's wheels ship no Gloo headers (scripts/build_cuda.sh builds without them).
#if ZOO_HAVE_GLOO
#define SKIP_WITHOUT_GLOO()
#else
#define SKIP_WITHOUT_GLOO() ZOO_SKIP_UNLESS_CI() << "zoo was built without Gloo's headers (Debian: libgloo-dev)"
#endif

}  // namespace zoo::testing::distributed
