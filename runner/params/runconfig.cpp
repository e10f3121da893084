// Schema of runner/params/runconfig.h.
#include "runner/params/runconfig.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "runner/params/checkpoint_naming.h"
#include "runner/step_profiler.h"

namespace zoo {

const std::vector<std::string> kCheckpointStates = {"model",       "optimizer",    "dataloader",
                                                    "grad_scaler", "lr_scheduler", "global_step"};

namespace {
// A check that runs `parse` on the value: the std::invalid_argument it throws is the problem.
config::Check<std::string> parses_with(std::function<void(const std::string&)> parse) {
  return [parse](const std::string& v) -> std::string {
    try {
      parse(v);
      return "";
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  };
}
}  // namespace

Parallelism RunConfig::parallelism() const {
  if (!enable_distributed) return Parallelism::none;
  if (sharding == "full") return Parallelism::full;
  if (sharding == "optimizer" || shard_optimizer_state) return Parallelism::optimizer;
  return Parallelism::replicate;
}

const char* parallelism_name(Parallelism p) {
  switch (p) {
    case Parallelism::none: return "none";
    case Parallelism::replicate: return "replicate";
    case Parallelism::optimizer: return "optimizer";
    case Parallelism::full: return "full";
  }
  return "?";
}

const config::Schema<RunConfig>& RunConfig::schema() {
  using R = RunConfig;
  using config::if_set;
  using config::positive;
  static const config::Schema<R> s =
      config::Schema<R>("runconfig", "How the run is driven.")
          .field("target_device", &R::target_device, "CPU or GPU (set by the first CLI argument).",
                 config::one_of({"CPU", "GPU", "CSX"}))
          .field("mode", &R::mode, "train, eval, train_and_eval or eval_all (set by --mode).",
                 config::one_of({"train", "eval", "train_and_eval", "eval_all"}))
          .field("model_dir", &R::model_dir, "Directory for checkpoints, logs and params.")
          .field("checkpoint_path", &R::checkpoint_path,
                 "Checkpoint to load (default: the newest in model_dir when autoload_last_checkpoint).")
          .field("load_checkpoint_states", &R::load_checkpoint_states,
                 "Comma-separated subset of model,optimizer,dataloader,grad_scaler,lr_scheduler,global_step "
                 "to restore (default: all).")
          .field("disable_strict_checkpoint_loading", &R::disable_strict_checkpoint_loading,
                 "Allow missing/unexpected model keys when loading (they are reported).")
          .field("autoload_last_checkpoint", &R::autoload_last_checkpoint,
                 "Resume from the newest checkpoint_<step>.mdl in model_dir.")
          .field("save_initial_checkpoint", &R::save_initial_checkpoint,
                 "Save checkpoint_<step>.mdl before the first training step.")
          .field("checkpoint_steps", &R::checkpoint_steps,
                 "Save every N steps of this run and at its last step (null or 0: never).",
                 if_set(config::non_negative<int64_t>()))
          .field("checkpoint_name", &R::checkpoint_name,
                 "File name of each checkpoint, with its step as {step} (or zero-padded, {step:08d}); modelzoo's "
                 "Trainer key checkpoint.checkpoint_name. Autoload and eval_all look for this name only.",
                 config::Check<std::string>([](const std::string& v) { return ckpt::CheckpointNaming::check(v); }))
          .field("checkpoint_root", &R::checkpoint_root,
                 "Directory checkpoints are written to and looked for in (null: model_dir); modelzoo's Trainer "
                 "key checkpoint.checkpoint_root.",
                 config::if_set(config::Check<std::string>([](const std::string& v) {
                   return v.rfind("s3://", 0) == 0 ? std::string("expected a directory; zoo does not write to S3")
                                                   : std::string();
                 })))
          .field("max_checkpoints", &R::max_checkpoints, "Keep only the newest N checkpoints (null: all).",
                 if_set(positive<int64_t>()))
          .field("max_steps", &R::max_steps, "Upper bound on global_step.", if_set(positive<int64_t>()))
          .field("num_steps", &R::num_steps, "Training steps in this run.", if_set(positive<int64_t>()))
          .field("num_epochs", &R::num_epochs, "Training epochs in this run.", if_set(positive<int64_t>()))
          .field("steps_per_epoch", &R::steps_per_epoch, "Steps per epoch (default: batches in the data).",
                 if_set(positive<int64_t>()))
          .field("eval_steps", &R::eval_steps, "Eval batches (null: one full pass over eval data).",
                 if_set(positive<int64_t>()))
          .field("eval_frequency", &R::eval_frequency, "train_and_eval: evaluate every N training steps.",
                 if_set(positive<int64_t>()))
          .field("log_steps", &R::log_steps, "Log training progress every N global steps.", positive<int64_t>())
          .field("seed", &R::seed, "Seed for initialization, dropout and data order.")
          .field("logging", &R::logging, "Log level: DEBUG, INFO, WARNING, ERROR (null: INFO).")
          .field("summary_dir", &R::summary_dir, "Where params_<mode>.yaml goes (null: model_dir/<mode>).")
          .field("validate_only", &R::validate_only,
                 "Validate params and build the model, print its size, then exit without running.")
          .field("check_loss_values", &R::check_loss_values, "Stop with an error when the loss is NaN or inf.")
          .field("enable_distributed", &R::enable_distributed,
                 "Data-parallel training, one process per device, started by `zoo launch`, torchrun, srun or "
                 "mpirun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); batch_size is the global batch.")
          .field("dist_backend", &R::dist_backend,
                 "Collective backend: gloo (CPU) or nccl (GPU; null: gloo on CPU, nccl on GPU). mpi is not built in.",
                 config::if_set(config::one_of({"gloo", "nccl", "mpi"})))
          .field("init_method", &R::init_method,
                 "How the ranks meet: env:// (MASTER_ADDR/MASTER_PORT, else dist_addr), tcp://HOST:PORT or "
                 "file:///shared/path.")
          .field("dist_addr", &R::dist_addr, "HOST:PORT of rank 0 for env:// when MASTER_ADDR/MASTER_PORT are unset.")
          .field("main_process_id", &R::main_process_id,
                 "The rank that writes checkpoints, TensorBoard files, results.csv and the console log.",
                 config::non_negative<int64_t>())
          .field("sync_batchnorm", &R::sync_batchnorm,
                 "Synchronize batch-norm statistics across ranks (zoo's models have no batch norm: no effect).")
          .field("dist_timeout", &R::dist_timeout,
                 "zoo's own: seconds a collective waits for the other ranks before this rank ends with an error "
                 "(a rank that dies ends the job sooner: its peers see the connection close).",
                 positive<int64_t>())
          .field("shard_optimizer_state", &R::shard_optimizer_state,
                 "zoo's own, with enable_distributed: each rank keeps and updates the optimizer state of its share "
                 "of the parameters only (ZeRO stage 1), then sends the updated values to the others; checkpoints "
                 "still hold the full state and load at any number of ranks.")
          .field("sharding", &R::sharding,
                 "zoo's own, with enable_distributed: what each rank keeps of the training state. none: everything "
                 "(plain data parallelism); optimizer: the optimizer state of its share of the parameters "
                 "(shard_optimizer_state: true, ZeRO stage 1); full: 1/N of every parameter, its gradient and its "
                 "optimizer state (ZeRO stage 3, as PyTorch's FSDP), each layer's weights gathered just before it "
                 "runs and freed after; checkpoints are then written as one shard per rank plus an index, and load "
                 "at any number of ranks and any sharding. docs/distributed.md.",
                 config::one_of({"none", "optimizer", "full"}))
          .field("allreduce_bucket_mb", &R::allreduce_bucket_mb,
                 "zoo's own, with enable_distributed: gradients are averaged in flat buffers of about this many MiB "
                 "(DDP's default, 25), each starting as soon as the backward pass has made all of its gradients. "
                 "Environment: ZOO_BUCKET_MB.",
                 positive<double>())
          .field("cuda_kernels", &R::cuda_kernels,
                 "zoo's own: which of zoo's CUDA kernels a GPU run uses (builds with -DZOO_CUDA_KERNELS): all, none "
                 "(LibTorch's ops), or a comma list of adam, cross_entropy, cross_entropy_fused, dense, dense_heads, "
                 "embedding, norm, weight_copies; for A/B timing or if one misbehaves. Environment: "
                 "ZOO_CUDA_KERNELS (1 = all, 0 = none, or the list).",
                 parses_with([](const std::string& v) { models::parse_cuda_kernels(v); }))
          .field("cpu_kernels", &R::cpu_kernels,
                 "zoo's own: zoo's float32 CPU kernels for the dense layer, norms, causal attention and embeddings "
                 "(false: LibTorch's ops, the reference they are tested against). Environment: ZOO_CPU_KERNELS (0 "
                 "or 1).")
          .field("cpu_gemm", &R::cpu_gemm,
                 "zoo's own: the matrix products of zoo's CPU kernels: auto (oneDNN's sgemm where LibTorch loaded "
                 "it, else the BLAS) or blas (the BLAS throughout, to compare). Environment: ZOO_CPU_GEMM.",
                 config::one_of({"auto", "blas"}))
          .field("profile_steps", &R::profile_steps,
                 "zoo's own: FIRST:LAST[:PATH] traces training steps FIRST..LAST of this run (from 1) with "
                 "PyTorch's profiler into a Chrome trace at PATH (default profile.json in model_dir; rank R > 0 "
                 "adds .rankR); empty: none. Environment: ZOO_PROFILE.",
                 parses_with([](const std::string& v) {
                   if (!v.empty()) parse_profile_steps(v);
                 }))
          .hardware_only({"num_csx",
                          "mount_dirs",
                          "python_paths",
                          "autogen_policy",
                          "compile_dir",
                          "compile_only",
                          "credentials_path",
                          "debug_args_path",
                          "retrace_every_iteration",
                          "job_labels",
                          "job_time_sec",
                          "mgmt_address",
                          "mgmt_namespace",
                          "num_act_servers",
                          "num_wgt_servers",
                          "num_workers_per_csx",
                          "transfer_processes",
                          "precision_opt_level",
                          "compile_crd_memory_gi",
                          "execute_crd_memory_gi",
                          "wrk_memory_gi",
                          "act_memory_gi",
                          "cmd_memory_gi",
                          "wgt_memory_gi",
                          "use_cs_grad_accum",
                          "use_cstorch_optimizer_step",
                          "skip_train_recv_activations",
                          "disable_version_check",
                          "drop_data",
                          "enable_act_frequency",
                          "lazy_initialization",
                          "experimental",
                          "variant",
                          "wsc_log_level",
                          "log_initialization",
                          "dump_activations",
                          "log_input_summaries"},
                         "applies to Cerebras CSX systems only")
          .hardware_only({"save_losses", "show_debug_metrics", "keep_checkpoint_max"},
                         "legacy modelzoo key with no effect")
          .hardware_only({"strict_version"},
                         "modelzoo's checkpoint format version check; zoo checks each checkpoint by its checksum")
          .validate([](const R& r, const auto& fail) {
            if (r.num_steps && r.num_epochs)
              fail("num_epochs", "num_steps and num_epochs are mutually exclusive; set only one");
            if (r.shard_optimizer_state && !r.enable_distributed)
              fail("shard_optimizer_state", "shards over data-parallel ranks: set enable_distributed: true as well");
            if (r.sharding != "none" && !r.enable_distributed)
              fail("sharding", "shards over data-parallel ranks: set enable_distributed: true as well");
            if (r.shard_optimizer_state && r.sharding == "full")
              fail("shard_optimizer_state", "says sharding: optimizer, but sharding is full; set only one");
            if (r.dist_backend == "mpi")
              fail("dist_backend",
                   "mpi is not built into zoo's LibTorch; use gloo (CPU) or nccl (GPU), which "
                   "mpirun-started processes use as well");
            if (r.init_method.rfind("env://", 0) != 0 && r.init_method.rfind("tcp://", 0) != 0 &&
                r.init_method.rfind("file://", 0) != 0)
              fail("init_method", "expected env://, tcp://HOST:PORT or file:///path, got '" + r.init_method + "'");
          });
  return s;
}

const std::vector<std::pair<std::string, std::string>> kEnvironmentSwitches = {
    {"ZOO_CUDA_KERNELS", "cuda_kernels"},
    {"ZOO_CPU_KERNELS", "cpu_kernels"},
    {"ZOO_CPU_GEMM", "cpu_gemm"},
    {"ZOO_PROFILE", "profile_steps"},
    {"ZOO_BUCKET_MB", "allreduce_bucket_mb"}};

YAML::Node runconfig_from_environment() {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& [variable, key] : kEnvironmentSwitches) {
    const char* value = std::getenv(variable.c_str());
    if (!value || !*value) continue;
    YAML::Node probe(YAML::NodeType::Map);
    const std::string text = value;
    if (key == "allreduce_bucket_mb") probe[key] = YAML::Load(text);
    else if (key == "cpu_kernels")
      probe[key] = text == "1" ? std::string("true") : text == "0" ? std::string("false") : text;
    else probe[key] = text;
    try {  // the key's own checks, before the params file is read
      RunConfig::schema().parse(probe, config::Context{"", "runconfig"});
    } catch (const std::exception& e) {
      std::string what = e.what();  // "<params>: runconfig.KEY: PROBLEM, got VALUE": the problem alone
      const std::string prefix = "runconfig." + key + ": ";
      if (const size_t at = what.find(prefix); at != std::string::npos) what = what.substr(at + prefix.size());
      if (const size_t got = what.rfind(", got "); got != std::string::npos) what = what.substr(0, got);
      throw config::ConfigError(variable + "=" + value + " in the environment (runconfig." + key + "): " + what);
    }
    out[key] = probe[key];
  }
  return out;
}

models::KernelPolicy kernel_policy_of(const RunConfig& r) {
  models::KernelPolicy p;
  p.cuda_kernels = models::parse_cuda_kernels(r.cuda_kernels);
  // Kept 16-bit copies of the weights would hold 2 bytes of every parameter
  // on every rank, and a regathered weight keeps its version: none under full sharding.
  if (r.parallelism() == Parallelism::full) p.cuda_kernels.erase("weight_copies");
  p.cpu_kernels = r.cpu_kernels;
  p.cpu_gemm_blas = r.cpu_gemm == "blas";
  return p;
}

}  // namespace zoo

namespace zoo::config {

CheckpointStates Value<CheckpointStates>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  std::vector<std::string> names;
  if (n.IsSequence()) {
    for (const auto& item : n) names.push_back(Value<std::string>::parse(item, c, k));
  } else {
    std::stringstream ss(Value<std::string>::parse(n, c, k));
    for (std::string item; std::getline(ss, item, ',');) names.push_back(item);
  }
  CheckpointStates out;
  for (std::string name : names) {
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (std::find(kCheckpointStates.begin(), kCheckpointStates.end(), name) == kCheckpointStates.end()) {
      std::string allowed;
      for (const auto& s : kCheckpointStates) allowed += (allowed.empty() ? "" : ", ") + s;
      c.fail(n, k,
             "unknown state '" + name + "'" + did_you_mean(name, kCheckpointStates) + " (allowed: " + allowed + ")");
    }
    out.items.insert(name);
  }
  return out;
}

YAML::Node Value<CheckpointStates>::emit(const CheckpointStates& v) {
  std::string text;
  for (const auto& s : kCheckpointStates)  // modelzoo's order
    if (v.items.count(s)) text += (text.empty() ? "" : ",") + s;
  return YAML::Node(text);
}

}  // namespace zoo::config
