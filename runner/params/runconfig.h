// The `runconfig` section: how a run is driven (modes, steps, checkpoints,
// logging). Keys and types follow modelzoo R2.1's runconfig schema; keys that
// only mean something on Cerebras hardware are accepted with a warning.
// Defines: kCheckpointStates, CheckpointStates, RunConfig, kEnvironmentSwitches,
// runconfig_from_environment, kernel_policy_of.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "configs/schema/schema.h"
#include "models/kernels/policy.h"

namespace zoo {

// What load_checkpoint_states may name (modelzoo's set).
extern const std::vector<std::string> kCheckpointStates;

// load_checkpoint_states: "model,optimizer" (or a list), checked when read.
struct CheckpointStates {
  std::set<std::string> items;
  bool operator==(const CheckpointStates& o) const { return items == o.items; }
};

// none: one process; replicate: data parallel, every rank holding
// everything (sharding: none); optimizer: each rank keeping its share of the
// optimizer state (ZeRO stage 1); full: 1/N of every parameter, gradient and
// optimizer state (ZeRO stage 3).
enum class Parallelism { none, replicate, optimizer, full };
// "none", "replicate", "optimizer", "full"
const char* parallelism_name(Parallelism p);

struct RunConfig {
  // Where checkpoints are written, found and pruned.
  const std::string& checkpoint_dir() const { return checkpoint_root ? *checkpoint_root : model_dir; }
  std::string target_device = "CPU";
  std::string mode = "train";
  std::string model_dir = "./model_dir";
  std::optional<std::string> checkpoint_path;
  // Not a key: whether checkpoint_path came from --checkpoint_path (which always wins) rather than the params file
  // (the run's starting point, which the run's own checkpoints replace once there are some).
  bool checkpoint_path_on_command_line = false;
  std::optional<CheckpointStates> load_checkpoint_states;  // null: all of them
  bool disable_strict_checkpoint_loading = false;
  bool autoload_last_checkpoint = true;
  bool save_initial_checkpoint = false;
  std::optional<int64_t> checkpoint_steps;
  std::string checkpoint_name = "checkpoint_{step}.mdl";  // see runner/params/checkpoint_naming.h
  std::optional<std::string> checkpoint_root;             // null: model_dir
  std::optional<int64_t> max_checkpoints;
  std::optional<int64_t> max_steps;
  std::optional<int64_t> num_steps;
  std::optional<int64_t> num_epochs;
  std::optional<int64_t> steps_per_epoch;
  std::optional<int64_t> eval_steps;
  std::optional<int64_t> eval_frequency;
  int64_t log_steps = 1;
  std::optional<int64_t> seed;
  std::optional<std::string> logging;
  std::optional<std::string> summary_dir;
  bool validate_only = false;
  bool check_loss_values = true;
  bool enable_distributed = false;
  std::optional<std::string> dist_backend;  // null: gloo on CPU, nccl on GPU
  std::string init_method = "env://";
  std::string dist_addr = "localhost:8888";
  int64_t main_process_id = 0;
  bool sync_batchnorm = false;
  int64_t dist_timeout = 300;          // zoo's own: seconds a collective may wait for the other ranks
  bool shard_optimizer_state = false;  // zoo's own: ZeRO stage 1 (sharding: optimizer)
  std::string sharding = "none";       // zoo's own: none, optimizer or full
  // How the training state spreads over the ranks (runner/parallel/): the
  // one place `enable_distributed`, `sharding` and `shard_optimizer_state`
  // are read together.
  Parallelism parallelism() const;
  double allreduce_bucket_mb = 25;  // zoo's own: gradient buffers of data parallelism
  // zoo's own run-time switches (docs/kernels.md); the environment variables
  // of kEnvironmentSwitches override them.
  std::string cuda_kernels = "all";
  bool cpu_kernels = true;
  std::string cpu_gemm = "auto";
  std::string profile_steps;  // "": no trace

  static const config::Schema<RunConfig>& schema();
};

// Environment variables that set runconfig keys, e.g. {"ZOO_CUDA_KERNELS", "cuda_kernels"}.
extern const std::vector<std::pair<std::string, std::string>> kEnvironmentSwitches;

// A runconfig mapping of the switches the environment sets (empty: none).
// Throws config::ConfigError naming the variable when its value is not one
// the key takes.
YAML::Node runconfig_from_environment();

// The kernels the run may use, from its (resolved) runconfig.
models::KernelPolicy kernel_policy_of(const RunConfig& runconfig);

}  // namespace zoo

namespace zoo::config {
template <>
struct Value<CheckpointStates> {
  static CheckpointStates parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(const CheckpointStates& v);
  static std::string type_name() { return "comma-separated states"; }
};
}  // namespace zoo::config
