// Implementation of runner/run.h: mode dispatch and run bookkeeping
// (model_dir layout, params_<mode>.yaml, run log).
#include "runner/run.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "configs/schema/yaml_util.h"
#include "data/corpus.h"
#include "models/common/layer_hooks.h"
#include "models/common/lora.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/cli.h"
#include "runner/generate.h"
#include "runner/log.h"
#include "runner/model_dir_lock.h"
#include "runner/model_guards.h"
#include "runner/optim/registry.h"
#include "runner/parallel/distributed.h"
#include "runner/parallel/strategy.h"
#include "runner/params/trainer_format.h"
#include "runner/trainer.h"

namespace zoo {

namespace fs = std::filesystem;

namespace {

std::string timestamp() {
  char buf[32];
  std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d_%H%M%S", std::localtime(&now));
  return buf;
}

torch::Device pick_device(const std::string& target) {
  if (target == "GPU") {
    if (!torch::cuda::is_available())
      throw std::runtime_error("GPU requested but no CUDA device is available to this LibTorch build");
    return torch::Device(torch::kCUDA, 0);
  }
  return torch::Device(torch::kCPU);
}

int validate_only(const Params& params) {
  std::cout << "Params OK: " << params.file << "\n";
  tools::describe_model_stats(params, data::TaskShard::from_environment().num_tasks, std::cout);
  return 0;
}

// Writes params_<mode>.yaml and opens the run log under model_dir.
void prepare_run_dir(const Params& params) {
  const RunConfig& rc = params.runconfig;
  fs::create_directories(rc.model_dir);
  // Runs that write checkpoints own the model_dir; evaluations may read it alongside.
  if (rc.mode == "train" || rc.mode == "train_and_eval") lock_model_dir(rc.model_dir, rc.mode);
  fs::path summary = rc.summary_dir ? fs::path(*rc.summary_dir) : fs::path(rc.model_dir) / rc.mode;
  fs::create_directories(summary);
  config::write_yaml_file((summary / ("params_" + rc.mode + ".yaml")).string(), params.resolved());
  fs::path logs = fs::path(rc.model_dir) / "zoo_logs";
  fs::create_directories(logs);
  fs::path log_file = logs / ("run_" + rc.mode + "_" + timestamp() + ".log");
  log::add_file_sink(log_file.string());
  log::info("zoo " + std::string(ZOO_VERSION) + ", LibTorch " + TORCH_VERSION + ", params " + params.file + ", mode " +
            rc.mode + ", model_dir " + rc.model_dir);
}

// LibTorch can start with fewer intra-op threads than there are cores
// (Debian's 1.13 takes one on a 2-core VM); unless OMP_NUM_THREADS says
// otherwise, a run uses every core, as users expect.
void use_every_core() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (!std::getenv("OMP_NUM_THREADS") && cores > at::get_num_threads()) at::set_num_threads(cores);
  log::info(strf("CPU threads: %d (OMP_NUM_THREADS sets them)", at::get_num_threads()));
}

std::string label_of(const std::optional<std::string>& path) { return path ? *path : "initialized model"; }

void train_mode(const Params& params, torch::Device device, Distributed* distributed) {
  Trainer t(params, device, /*for_training=*/true, distributed);
  t.restore(/*training=*/true);
  int64_t steps = t.planned_steps(params.runconfig.num_steps);
  if (params.runconfig.save_initial_checkpoint) t.save_checkpoint();
  log::info(
      strf("Training %ld step(s) from global_step %ld.", static_cast<long>(steps), static_cast<long>(t.global_step())));
  t.train(steps);
}

void eval_mode(const Params& params, torch::Device device, Distributed* distributed) {
  Trainer t(params, device, /*for_training=*/false, distributed);
  auto path = t.restore(/*training=*/false);
  t.evaluate(label_of(path));
}

// In process (modelzoo re-launches itself per segment; the result is the same:
// each segment continues from the state the previous one left).
void train_and_eval_mode(const Params& params, torch::Device device, Distributed* distributed) {
  const RunConfig& rc = params.runconfig;  // check_inputs_for_mode checked the step keys
  Trainer t(params, device, /*for_training=*/true, distributed);
  t.restore(/*training=*/true);
  if (params.runconfig.save_initial_checkpoint) t.save_checkpoint();
  if (rc.num_epochs) {  // one epoch, then an eval, num_epochs times (capped by max_steps)
    for (int64_t e = 0; e < *rc.num_epochs; ++e) {
      int64_t steps = t.steps_per_epoch();
      if (rc.max_steps) steps = std::min(steps, *rc.max_steps - t.global_step());
      if (steps <= 0) break;
      t.train(steps);
      t.evaluate("epoch " + std::to_string(e + 1) + " (global_step " + std::to_string(t.global_step()) + ")");
    }
    return;
  }

  int64_t remaining = t.planned_steps(rc.num_steps);
  while (remaining > 0) {
    int64_t segment = std::min(remaining, *rc.eval_frequency);
    t.train(segment);
    remaining -= segment;
    auto all = ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name));
    t.evaluate(!all.empty() && all.back().step == t.global_step() ? all.back().path
                                                                  : "global_step " + std::to_string(t.global_step()));
  }
}

void eval_all_mode(const Params& params, torch::Device device, Distributed* distributed) {
  const RunConfig& rc = params.runconfig;
  if (rc.checkpoint_path_on_command_line)
    throw std::runtime_error(
        "--checkpoint_path cannot be used with --mode eval_all (it evaluates every checkpoint in "
        "model_dir; use --mode eval for one)");
  auto all = ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name));
  if (all.empty() && rc.checkpoint_path) {
    // runconfig.checkpoint_path is the run's starting point: with no checkpoint of the run yet, it is the one to
    // evaluate.
    log::info("eval_all: " + rc.checkpoint_dir() +
              " has no checkpoint of this run yet: evaluating runconfig.checkpoint_path " + *rc.checkpoint_path);
    all.push_back({*rc.checkpoint_path, 0});
  }
  if (all.empty())
    throw std::runtime_error("eval_all: no checkpoint files named as " + rc.checkpoint_name + " in " +
                             rc.checkpoint_dir());
  Trainer t(params, device, /*for_training=*/false, distributed);
  // A bad file (empty, truncated, another model's) is reported and passed
  // over, so the good checkpoints after it are still evaluated; the run
  // still ends in an error naming each one.
  std::vector<std::string> failed;
  for (const auto& c : all) {
    try {
      t.load_checkpoint(c.path, /*training=*/false);
      t.evaluate(c.path);
    } catch (const std::runtime_error& e) {  // unreadable, or weights whose loss is not finite
      log::error(std::string(e.what()) + "; going on with the next checkpoint");
      failed.push_back(c.path);
    }
  }
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
    throw std::runtime_error("eval_all: " + std::to_string(failed.size()) + " of " + std::to_string(all.size()) +
                             " checkpoints could not be evaluated (see the errors above): " + list);
  }
}

// zoo config convert-legacy: the Trainer form of a legacy file, checked by
// reading it back (both must resolve to the same params).
void convert_legacy(const std::string& in, const std::string& out) {
  if (fs::exists(out)) throw std::runtime_error(out + ": already exists; choose another output file");
  Params legacy = load_params(in, YAML::Node());
  for (const auto& w : legacy.warnings) log::warn(w);
  if (legacy.trainer_format) throw std::runtime_error(in + ": already in the Trainer format");
  std::vector<std::string> warnings;
  config::Context ctx{in, "", &warnings};
  std::vector<std::string> said_above;  // the file's own warnings, logged with `legacy`'s
  YAML::Node trainer = trainer_format::from_legacy(config::load_yaml_file(in, &said_above), ctx);
  for (const auto& w : warnings) log::warn(w);
  YAML::Emitter text;
  text << trainer;
  Params back = params_from_node(config::load_yaml_string(text.c_str(), out), out, YAML::Node());
  YAML::Emitter a, b;
  a << legacy.resolved();
  b << back.resolved();
  if (std::string(a.c_str()) != b.c_str()) {
    std::stringstream sa(a.c_str()), sb(b.c_str());
    std::string la, lb;
    while (std::getline(sa, la) && std::getline(sb, lb) && la == lb) {
    }
    throw std::runtime_error("internal error: " + out + " would not resolve to the params of " + in + " ('" + la +
                             "' became '" + lb + "'; nothing was written)");
  }
  config::write_yaml_file(out, trainer);
  std::cout << "Wrote " << out << " (Trainer format); it resolves to the same params as " << in << "\n";
}

int run_command(const CliCommand& cmd) {
  switch (cmd.kind) {
    case CliCommand::Kind::help: std::cout << usage(); return 0;
    case CliCommand::Kind::help_config:
      std::cout << (cmd.help_format == "markdown" ? config_reference_markdown() : describe_all_schemas());
      return 0;
    case CliCommand::Kind::corpus:
      if (data::write_corpus(cmd.output_dir, cmd.train_bytes, cmd.eval_bytes))
        std::cout << "Wrote " << cmd.output_dir << "/train/corpus.txt and " << cmd.output_dir << "/eval/corpus.txt\n";
      else std::cout << "Corpus already present in " << cmd.output_dir << "\n";
      return 0;
    case CliCommand::Kind::convert: convert::run_convert(cmd.convert); return 0;
    case CliCommand::Kind::generate: run_generate(cmd.generate); return 0;
    case CliCommand::Kind::serve: serve::run_serve(cmd.serve); return 0;
    case CliCommand::Kind::eval_tasks: eval_tasks::run_eval_tasks_command(cmd.eval_tasks); return 0;
    case CliCommand::Kind::create_hdf5: {
      const auto s = data::create_hdf5(cmd.create_hdf5, std::cerr);
      std::cout << data::describe(s, cmd.create_hdf5);
      return 0;
    }
    case CliCommand::Kind::convert_legacy: convert_legacy(cmd.params_file, cmd.output_file); return 0;
    case CliCommand::Kind::consolidate: {
      if (fs::exists(cmd.output_file))
        throw std::runtime_error(cmd.output_file + ": already exists; choose another output file");
      ckpt::save_checkpoint_file(cmd.output_file, ckpt::load_checkpoint_file(cmd.params_file));
      std::cout << "Wrote " << cmd.output_file << " (one file, torch.load-able) from " << cmd.params_file << "\n";
      return 0;
    }
    case CliCommand::Kind::checkpoint_diff: {
      const ckpt::CheckpointDiff diff = ckpt::diff_checkpoints(cmd.checkpoint_diff);
      ckpt::describe(diff, cmd.checkpoint_diff, std::cout);
      return diff.same() ? 0 : 1;
    }
    case CliCommand::Kind::tool: return tools::run_tool(cmd.tool, std::cout);
    case CliCommand::Kind::launch: return launch(cmd.launch);
    case CliCommand::Kind::run: break;
  }
  Params params = load_params(cmd.params_file, cmd.runconfig_overrides);
  const RunConfig& rc = params.runconfig;
  if (rc.logging) log::set_level(log::parse_level(*rc.logging));
  for (const auto& w : params.warnings) log::warn(w);
  check_inputs_for_mode(params);
  if (rc.validate_only) return validate_only(params);
  models::set_kernel_policy(kernel_policy_of(rc));

  torch::Device device = pick_device(rc.target_device);
  std::unique_ptr<Distributed> distributed;
  if (rc.enable_distributed) {
    device = Distributed::device_of(device);
    distributed = Distributed::join(rc, device);
    // One rank speaks for the job; the others say only what goes wrong.
    if (!distributed->is_main()) log::set_level(log::Level::warning);
  } else if (const auto shard = data::TaskShard::from_environment(); shard.num_tasks > 1) {
    throw std::runtime_error(params.file + ": the environment says this is rank " + std::to_string(shard.rank) +
                             " of " + std::to_string(shard.num_tasks) +
                             " (WORLD_SIZE), but runconfig.enable_distributed is "
                             "false; set it to true for data-parallel training");
  }
  if (!distributed || distributed->is_main()) prepare_run_dir(params);
  use_every_core();
  try {
    if (rc.mode == "train") train_mode(params, device, distributed.get());
    else if (rc.mode == "eval") eval_mode(params, device, distributed.get());
    else if (rc.mode == "train_and_eval") train_and_eval_mode(params, device, distributed.get());
    else eval_all_mode(params, device, distributed.get());
  } catch (const std::exception& e) {
    // With several ranks, say whose error this is (collective failures already do).
    if (!distributed || distributed->world_size() == 1 || std::string(e.what()).rfind("rank ", 0) == 0) throw;
    throw std::runtime_error(strf("rank %d of %d: %s", distributed->rank(), distributed->world_size(), e.what()));
  }
  return 0;
}

}  // namespace

int run(const std::vector<std::string>& args) {
  try {
    return run_command(parse_cli(args));
  } catch (const CliHelp& help) {
    std::cout << help.what();
    return 0;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    // LibTorch errors carry a C++ backtrace after the first line; keep the reason.
    if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
    log::remove_file_sink();
    std::cerr << "zoo: error: " << msg << std::endl;
    return 1;
  }
}

}  // namespace zoo
