// Implementation of runner/trainer.h, continued: which checkpoint the
// trainer restores and what each of its components takes from it, and what
// it saves. How the model and optimizer state are laid out over the ranks
// (whole, or sharded) is the parallel strategy's (runner/parallel/strategy.h).
#include <chrono>
#include <filesystem>

#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/sharded_checkpoint.h"  // shards_dir, for the size read
#include "runner/log.h"
#include "runner/model_guards.h"
#include "runner/trainer.h"

namespace zoo {

namespace fs = std::filesystem;

namespace {

// Logs "<what> checkpoint <path> (<MB> in <s>, <MB/s>)" for a file (and a
// sharded one's shards) written or read since `start`.
void log_checkpoint_io(const char* what, const std::string& path, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double bytes = double(fs::file_size(path));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt::shards_dir(path), ec)) bytes += double(e.file_size(ec));
  const double mb = bytes / 1e6;
  log::info(strf("%s checkpoint %s (%.1f MB in %.2f s, %.0f MB/s)", what, path.c_str(), mb, seconds, mb / seconds));
}

// Reads a checkpoint file and says how long it took.
c10::impl::GenericDict timed_load(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  c10::impl::GenericDict dict = ckpt::load_checkpoint_file(path);
  log_checkpoint_io("Read", path, start);
  return dict;
}

}  // namespace

std::optional<std::string> Trainer::restore(bool training) {
  std::optional<std::string> path = restore_checkpoint(training);
  strategy_->share_restored_state(*model_);
  return path;
}

std::optional<std::string> Trainer::restore_checkpoint(bool training) {
  const RunConfig& rc = params_.runconfig;
  // A checkpoint_path in the params file names where the run starts (a converted base, say): once the run has
  // checkpoints of its own, each mode uses the newest of those. --checkpoint_path on the command line always wins.
  const bool own_checkpoints =
      rc.checkpoint_path && !rc.checkpoint_path_on_command_line && rc.autoload_last_checkpoint &&
      !ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name)).empty();
  if (own_checkpoints)
    log::info("runconfig.checkpoint_path " + *rc.checkpoint_path + " is where the run started; " + rc.checkpoint_dir() +
              " holds the run's own checkpoints, so " + (training ? "training resumes from" : "this evaluates") +
              " the newest of them (--checkpoint_path picks another)");
  if (rc.checkpoint_path && !own_checkpoints) {
    if (!training && !rc.checkpoint_path_on_command_line)
      log::info(rc.checkpoint_dir() + " has no checkpoint of this run yet: evaluating runconfig.checkpoint_path " +
                *rc.checkpoint_path);
    load_checkpoint(*rc.checkpoint_path, training);
    return rc.checkpoint_path;
  }
  if (rc.autoload_last_checkpoint) {
    // Newest first; a corrupt or truncated file is skipped for the one before it.
    auto all = ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name));
    std::string unreadable;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      std::optional<c10::impl::GenericDict> dict;
      try {
        dict = timed_load(it->path);
      } catch (const std::runtime_error& e) {
        log::warn(std::string(e.what()) + "; trying the previous checkpoint");
        unreadable += (unreadable.empty() ? "" : ", ") + it->path;
        continue;
      }
      apply_checkpoint(*dict, it->path, training, /*every_state=*/own_checkpoints);
      return it->path;
    }
    // Starting over would quietly abandon the run these files belong to.
    if (!unreadable.empty())
      throw std::runtime_error("no readable checkpoint in " + rc.checkpoint_dir() + " (unreadable: " + unreadable +
                               "); move them away to start afresh, or set checkpoint_path");
  }
  log::info("No checkpoint to load; starting from the initialized model (global_step 0).");
  return std::nullopt;
}

void Trainer::load_checkpoint(const std::string& path, bool training) {
  apply_checkpoint(timed_load(path), path, training);
}

// Each component restores its own state; the trainer only picks which.
void Trainer::apply_checkpoint(const c10::impl::GenericDict& dict, const std::string& path, bool training,
                               bool every_state) {
  const RunConfig& rc = params_.runconfig;
  std::set<std::string> states(kCheckpointStates.begin(), kCheckpointStates.end());
  if (training && rc.load_checkpoint_states && !every_state) states = rc.load_checkpoint_states->items;
  auto want = [&](const char* key) { return states.count(key) && dict.contains(key); };
  auto state = [&](const char* key) { return dict.at(key).toGenericDict(); };
  log::info("Loading checkpoint " + path);
  // Weights asked for but absent would leave the initialized model to be
  // evaluated or trained on as if it had loaded: an error, not a warning.
  if (states.count("model")) {
    bool strict = training ? !rc.disable_strict_checkpoint_loading : true;
    const ckpt::CopyIntoModel copy = strategy_->copy_into_model();
    for (const auto& w : ckpt::load_model_state_dict(*model_, ckpt::model_weights(dict, path), strict, path, copy))
      log::warn(path + ": " + w);
    if (!params_.lora.empty()) {
      lora_base_ = ckpt::lora_base_of(dict, path);
      lora_base_model_ = ckpt::lora_base_model_of(dict);
    }
    if (tasks_) tasks_->checkpoint_loaded(path, ckpt::tokenizer_dir_of(dict, path));
  } else {
    log::warn(path + ": model weights not loaded (not in load_checkpoint_states)");
  }
  global_step_ = 0;
  if (want("global_step")) {
    global_step_ = dict.at("global_step").toInt();
  } else if (const auto named = ckpt::step_in_name(path, ckpt::CheckpointNaming(rc.checkpoint_name));
             states.count("global_step") && named) {
    // A bare state dict saved as checkpoint_<N>.mdl: resume numbering after
    // it rather than write a second checkpoint_<N> beside it.
    global_step_ = *named;
    log::info(path + ": no global_step in the file; taking " + std::to_string(global_step_) + " from its name");
  }
  if (!training) return;
  // The masks travel with the weights they belong to.
  if (sparsity_ && states.count("model") && dict.contains("sparsity")) {
    try {
      sparsity_->load_state_dict(state("sparsity"));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  try {
    if (want("optimizer")) strategy_->load_optimizer_state(*optimizer_, state("optimizer"));
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": cannot restore the optimizer state (" + e.what() +
                             "); to start the optimizer afresh, set load_checkpoint_states to the states to keep, "
                             "e.g. model,global_step");
  }
  scheduler_ = std::make_unique<optim::LRScheduler>(params_.optimizer.learning_rate);
  if (want("lr_scheduler")) scheduler_->load_state_dict(state("lr_scheduler"));
  if (want("grad_scaler") && scaler_ && state("grad_scaler").size() > 0) scaler_->load_state_dict(state("grad_scaler"));
  try {
    if (want("dataloader")) train_loader_->load_state_dict(state("dataloader"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": cannot resume the training data: " + e.what());
  }
  if (want("global_step") && dict.contains("rng_state")) ckpt::load_rng_state_dict(state("rng_state"));
  resumed_from_ = path;
  for (const auto& s : kCheckpointStates)
    if (states.count(s) && !dict.contains(s) && s != "grad_scaler" && !(s == "global_step" && global_step_ > 0))
      log::info(path + ": no '" + s + "' state in the checkpoint; starting it fresh");
}

void Trainer::refuse_non_finite_weights() const {
  // Weights that went non-finite are never saved: the next run would
  // autoload them as the newest checkpoint. Every rank holds the same
  // weights (or agrees on its shards), so all stop here, before any collective.
  const std::vector<std::string> bad = strategy_->non_finite_weights(*model_);
  if (bad.empty()) return;
  const RunConfig& rc = params_.runconfig;
  const auto kept = ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name));
  throw std::runtime_error(strf("step %ld: the model's weights hold NaN or inf (", static_cast<long>(global_step_)) +
                           bad.front() +
                           (bad.size() > 1 ? strf(" and %zu more tensors", bad.size() - 1) : std::string()) +
                           "), so no checkpoint was written; the newest one stays " +
                           (kept.empty() ? std::string("none") : kept.back().path) +
                           ". Lower the learning rate, clip gradients (max_gradient_norm) or check the data");
}

// Each component writes its own state under modelzoo's keys.
c10::impl::GenericDict Trainer::run_state() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("lr_scheduler", scheduler_->state_dict());
  d.insert("grad_scaler",
           scaler_ ? scaler_->state_dict() : c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  d.insert("dataloader", train_loader_->state_dict());
  d.insert("global_step", global_step_);
  d.insert("rng_state", ckpt::rng_state_dict());
  if (sparsity_ && sparsity_->ready()) d.insert("sparsity", sparsity_->state_dict());
  std::map<std::string, std::string> extra;
  if (!lora_base_.empty()) extra["lora_base"] = lora_base_;  // which base the adapters apply to
  if (!lora_base_model_.empty())
    extra["lora_base_model"] = lora_base_model_;  // and the Hugging Face model it came from
  d.insert("__metadata__", ckpt::checkpoint_metadata(params_, extra));
  return d;
}

std::string Trainer::save_checkpoint() {
  const RunConfig& rc = params_.runconfig;
  refuse_non_finite_weights();
  const ckpt::CheckpointNaming naming(rc.checkpoint_name);
  const auto start = std::chrono::steady_clock::now();
  const std::string path = strategy_->save_checkpoint(
      {*model_, *optimizer_, [this] { return run_state(); }, rc.checkpoint_dir(), global_step_, naming});
  if (path.empty()) return "";  // another rank wrote it
  log_checkpoint_io(strategy_->saved_what().c_str(), path, start);
  if (rc.max_checkpoints) ckpt::prune_checkpoints(rc.checkpoint_dir(), *rc.max_checkpoints, resumed_from_, naming);
  return path;
}

}  // namespace zoo
