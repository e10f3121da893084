// Implementation of runner/trainer.h. The path of one optimizer step:
// train() -> train_step() (forward under autocast, scaled backward per
// micro-batch) -> unscale, clip, optimizer step, schedule step -> metrics.
// The host reads the loss only on steps that log or checkpoint (see train()).
#include "runner/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <utility>

#include "data/registry.h"
#include "models/common/lora.h"
#include "models/registry.h"
#include "runner/amp/autocast.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/device_memory.h"
#include "runner/log.h"
#include "runner/model_guards.h"
#include "runner/step_profiler.h"

namespace zoo {

namespace fs = std::filesystem;

namespace {

std::unique_ptr<data::DataLoader> open_loader(const Params& p, const char* section) {
  const auto& spec = std::string(section) == "train_input" ? p.train_input : p.eval_input;
  if (!spec) p.context(section).fail(YAML::Node(), "", "required for --mode " + p.runconfig.mode + " but missing from the params");
  return spec->open();
}

models::Features to_device(models::Features batch, const torch::Device& device) {
  if (device.is_cpu()) return batch;
  // From pinned memory the copy is asynchronous; from pageable memory CUDA
  // first waits for the stream, which would hold the host every step.
  for (auto& [k, v] : batch) v = (device.is_cuda() ? v.pin_memory() : v).to(device, /*non_blocking=*/true);
  return batch;
}

// What the params could not tell (HDF5 files give their own sequence
// length): the data must fit the model, or the first step fails far from
// the file at fault.
void check_data_fits(data::DataLoader& loader, const models::Model& model, const Params& p, const char* section) {
  if (model.vocab_size()) loader.check_token_ids(*model.vocab_size());
  const auto length = loader.sequence_length();
  if (length && model.max_positions() > 0 && *length > model.max_positions())
    throw std::runtime_error(loader.describe() + ": samples of " + std::to_string(*length) +
                             " tokens, more than model.max_position_embeddings " +
                             std::to_string(model.max_positions()) + " in " + p.file + " (" + section +
                             "): the model has no positions beyond it");
}

// Logs "<what> checkpoint <path> (<MB> in <s>, <MB/s>)" for a file written or read since `start`.
void log_checkpoint_io(const char* what, const std::string& path, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mb = double(fs::file_size(path)) / 1e6;
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

Trainer::Trainer(const Params& params, torch::Device device, bool for_training, Distributed* distributed)
    : params_(params),
      device_(device),
      distributed_(distributed),
      metrics_(params.runconfig, device.is_cuda() ? "gpu" : "cpu", !distributed || distributed->is_main()) {
  if (params_.runconfig.seed) torch::manual_seed(static_cast<uint64_t>(*params_.runconfig.seed));
  if (for_training) {
    if (!params_.has_optimizer)
      params_.context("optimizer").fail(YAML::Node(), "", "required for training but missing from the params");
    train_loader_ = open_loader(params_, "train_input");
  }
  const auto start = std::chrono::steady_clock::now();
  model_ = build_model(params_, device_);
  const int64_t parameters = models::parameter_count(*model_), trainable = models::trainable_parameter_count(*model_);
  log::info(strf("Built the model: %ld parameters%s in %.2f s", static_cast<long>(parameters),
                 trainable == parameters ? "" : strf(" (%ld trained, the rest frozen)", static_cast<long>(trainable)).c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  if (train_loader_) check_data_fits(*train_loader_, *model_, params_, "train_input");
  autocast_dtype_ = amp::autocast_dtype(params_.precision.mixed_precision, params_.precision.fp16_type, device_);
  if (!for_training) return;
  std::vector<std::pair<std::string, torch::Tensor>> trained;  // frozen parameters (DPO's reference) stay out
  for (const auto& p : model_->named_parameters())
    if (p.value().requires_grad()) trained.emplace_back(p.key(), p.value());
  auto groups = optim::split_weight_decay_groups(trained,
                                                 models::norm_parameter_names(*model_), params_.optimizer.weight_decay);
  // The model's muP scales, each replaced by optimizer.adjust_learning_rate's for the same group (as modelzoo).
  std::map<std::string, std::vector<std::string>> lr_patterns;
  std::map<std::string, double> lr_scales;
  for (const auto& [name, group] : model_->lr_adjustment_groups()) {
    lr_patterns[name] = group.patterns;
    if (group.scale != 1.0) lr_scales[name] = group.scale;
  }
  for (const auto& [name, scale] : params_.optimizer.adjust_learning_rate) lr_scales[name] = scale;
  try {
    groups = optim::adjust_learning_rates(std::move(groups), lr_scales, lr_patterns);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(params_.file + ": optimizer.adjust_learning_rate." + e.what());
  }
  optimizer_ = optim::make_optimizer(params_.optimizer, std::move(groups));
  scheduler_ = std::make_unique<optim::LRScheduler>(params_.optimizer.learning_rate);
  scaler_ = amp::make_grad_scaler(params_.optimizer, autocast_dtype_);
  if (distributed_ && params_.runconfig.shard_optimizer_state)
    sharding_ = std::make_unique<OptimizerSharding>(*distributed_, optimizer_->parameters());
  if (distributed_) distributed_->overlap_with_backward(optimizer_->parameters());
  if (params_.sparsity) {
    try {  // its own generator, seeded alike on every rank, so masks agree without a broadcast
      sparsity_ = std::make_unique<WeightSparsity>(*params_.sparsity, *model_,
                                                   static_cast<uint64_t>(params_.runconfig.seed.value_or(0)) + 1);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(params_.file + ": " + e.what());
    }
  }
}

std::optional<std::string> Trainer::restore(bool training) {
  std::optional<std::string> path = restore_checkpoint(training);
  if (distributed_) {
    std::vector<torch::Tensor> state;
    for (const auto& p : model_->parameters()) state.push_back(p.detach());
    for (const auto& b : model_->buffers()) state.push_back(b.detach());
    distributed_->broadcast_from_main(state);
  }
  return path;
}

std::optional<std::string> Trainer::restore_checkpoint(bool training) {
  const RunConfig& rc = params_.runconfig;
  // A LoRA run's checkpoint_path names the base it starts from: once the
  // run has checkpoints of its own, starting it again resumes from them.
  const bool lora_resumes = training && !params_.lora.empty() && rc.checkpoint_path && rc.autoload_last_checkpoint &&
                            !ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name)).empty();
  if (lora_resumes)
    log::info("checkpoint_path " + *rc.checkpoint_path + " is the LoRA run's base; resuming from the run's newest "
              "checkpoint in " + rc.checkpoint_dir());
  if (rc.checkpoint_path && !lora_resumes) {
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
      apply_checkpoint(*dict, it->path, training, /*every_state=*/lora_resumes);
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
    for (const auto& w : ckpt::load_model_state_dict(*model_, ckpt::model_weights(dict, path), strict, path))
      log::warn(path + ": " + w);
    if (!params_.lora.empty()) lora_base_ = ckpt::lora_base_of(dict, path);
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
    if (want("optimizer")) optimizer_->load_state_dict(state("optimizer"));
    if (sharding_) sharding_->drop_others_state(*optimizer_);
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

int64_t Trainer::steps_per_epoch() const {
  const int64_t batches = params_.runconfig.steps_per_epoch.value_or(train_loader_->batches_per_epoch());
  return std::max<int64_t>(batches / (params_.optimizer.grad_accum_steps * train_loader_->micro_batches()), 1);
}

int64_t Trainer::planned_steps(std::optional<int64_t> num_steps) const {
  const RunConfig& rc = params_.runconfig;
  std::optional<int64_t> total;
  auto take = [&](int64_t v) { total = total ? std::min(*total, v) : v; };
  if (rc.num_epochs) take(*rc.num_epochs * steps_per_epoch());
  if (num_steps) take(*num_steps);
  if (rc.max_steps) {
    if (*rc.max_steps <= global_step_)
      throw std::runtime_error("runconfig.max_steps (" + std::to_string(*rc.max_steps) +
                               ") is already reached: the loaded checkpoint is at global_step " +
                               std::to_string(global_step_) + "; raise max_steps or use --num_steps");
    take(*rc.max_steps - global_step_);
  }
  if (!total)
    throw std::runtime_error(
        "runconfig: set one of num_steps, num_epochs or max_steps (in the params or on the "
        "command line) to say how long to train");
  return *total;
}

void Trainer::check_loss(double loss, int64_t step) const {
  if (params_.runconfig.check_loss_values && !std::isfinite(loss))
    throw std::runtime_error("loss is " + std::to_string(loss) + " at step " + std::to_string(step) +
                             " (check_loss_values); lower the learning rate or check the data");
}

double Trainer::read_losses(std::vector<torch::Tensor>& losses, int64_t last_step, int64_t steps_apart) {
  torch::Tensor stacked = torch::stack(losses).to(torch::kDouble);
  if (distributed_) {  // each rank's mean over its share of the batch, averaged
    distributed_->sum(stacked);
    stacked.div_(ranks());
  }
  torch::Tensor values = stacked.to(torch::kCPU);  // the one sync
  const int64_t n = static_cast<int64_t>(losses.size());
  losses.clear();
  for (int64_t i = 0; i < n; ++i) check_loss(values[i].item<double>(), last_step - (n - 1 - i) * steps_apart);
  return values[n - 1].item<double>();
}

torch::Tensor Trainer::train_step(int64_t accum, int64_t& tokens) {
  optimizer_->set_lr(scheduler_->lr());  // step k uses lr(k - 1)
  torch::Tensor loss;
  for (int64_t micro = 0; micro < accum; ++micro) {
    models::ModelOutput out;
    {
      amp::AutocastGuard autocast(device_, autocast_dtype_);
      models::Features batch = train_loader_->next();
      tokens += batch.begin()->second.numel();
      out = model_->forward(to_device(std::move(batch), device_), false);
    }
    torch::Tensor micro_loss = accum > 1 ? out.loss / double(accum) : out.loss;
    if (distributed_ && micro == accum - 1) distributed_->arm();  // its backward pass starts the averaging
    (scaler_ ? scaler_->scale(micro_loss) : micro_loss).backward();
    loss = loss.defined() ? loss + micro_loss.detach() : micro_loss.detach();
  }
  return loss;
}

void Trainer::train(int64_t steps) {
  const RunConfig& rc = params_.runconfig;
  const OptimizerConfig& oc = params_.optimizer;
  const int64_t accum = oc.grad_accum_steps * train_loader_->micro_batches();
  const int64_t samples_per_step = train_loader_->batch_size() * accum * ranks();
  std::vector<torch::Tensor> parameters = optimizer_->parameters();
  // Losses stay on the device until a step that needs them (logging,
  // checkpointing, the last step; every step on the CPU, where reading is
  // free), so a GPU step never waits for the host. Each is still checked
  // and a non-finite one is reported with its own step number.
  std::vector<torch::Tensor> unread_losses;
  double last_loss = std::nan("");
  if (sparsity_ && !sparsity_->ready()) sparsity_->initialize();  // after any checkpoint's (broadcast) weights
  if (sparsity_) log::info(sparsity_->summary());
  model_->train();
  const std::unique_ptr<StepProfiler> profiler = StepProfiler::from_spec(
      params_.runconfig.profile_steps, params_.runconfig.model_dir, device_.is_cuda(), distributed_ ? distributed_->rank() : 0);
  metrics_.start("Train");
  for (int64_t i = 1; i <= steps; ++i) {
    if (profiler) profiler->before_step(i);
    int64_t tokens = 0;
    unread_losses.push_back(train_step(accum, tokens));
    if (distributed_) {
      distributed_->average_gradients(parameters);
      if (i == 1 && distributed_->is_main() && distributed_->world_size() > 1) {
        const auto [buckets, early] = distributed_->last_overlap();
        log::info(strf("Gradient averaging: %ld of %ld buckets started during the backward pass", static_cast<long>(early),
                       static_cast<long>(buckets)));
      }
    }
    const bool log_step = (global_step_ + 1) % rc.log_steps == 0 || i == steps;
    const bool checkpoint_step = rc.checkpoint_steps && *rc.checkpoint_steps > 0 &&
                                 (i % *rc.checkpoint_steps == 0 || i == steps);
    // On the CPU every loss is read, before the update, so a non-finite one
    // stops the run before its step; a GPU's is read on the steps that need
    // it once the update is queued, so the GPU works through it while the
    // host waits.
    const bool on_cpu = device_.is_cpu();
    if (on_cpu) last_loss = read_losses(unread_losses, global_step_ + 1, /*steps_apart=*/1);
    // Order as modelzoo: unscale, clip, step; a step with non-finite gradients
    // is skipped and does not advance the LR schedule.
    const bool finite = !scaler_ || scaler_->unscale(parameters);
    if (log_step && oc.log_summaries) metrics_.norms(global_step_ + 1, parameters);
    TrainLog log{global_step_ + 1, last_loss, {}, std::nullopt};
    for (const auto& g : optimizer_->param_groups()) log.lrs.push_back(g.lr);  // as used by this step
    if (finite) {
      if (sparsity_) sparsity_->mask_gradients(global_step_ + 1);
      // Clipping by norm hands its coefficient to the step (Adam(W) reads it
      // in its update pass); clipping by value needs the gradients clipped first.
      torch::Tensor clip;
      if (oc.max_gradient_norm) clip = optim::clip_coefficient(parameters, *oc.max_gradient_norm);
      if (clip.defined() && oc.max_gradient_value) optim::scale_gradients(parameters, std::exchange(clip, {}));
      if (oc.max_gradient_value) torch::nn::utils::clip_grad_value_(parameters, *oc.max_gradient_value);
      if (sharding_) sharding_->keep_own_gradients(parameters);
      if (clip.defined())
        optimizer_->step_scaled(clip);
      else
        optimizer_->step();
      if (sharding_) sharding_->share_updated(parameters);
      if (sparsity_) sparsity_->after_step(global_step_ + 1);
      scheduler_->step();
    }
    optimizer_->zero_grad();
    if (!on_cpu && (log_step || checkpoint_step)) {
      last_loss = read_losses(unread_losses, global_step_ + 1, /*steps_apart=*/1);
      log.loss = last_loss;
    }
    if (scaler_) {
      const double before = scaler_->current_scale();
      scaler_->update(finite);
      if (!finite)
        log::warn(strf("Step %ld: non-finite gradients; update skipped, loss scale %g -> %g",
                       static_cast<long>(global_step_ + 1), before, scaler_->current_scale()));
      if (oc.log_summaries) log.loss_scale = scaler_->current_scale();
    }
    ++global_step_;
    metrics_.samples(samples_per_step);
    if (log_step) metrics_.step(log, samples_per_step);
    if (checkpoint_step) save_checkpoint();
    metrics_.bar(i, steps, last_loss, tokens);
    if (profiler) profiler->after_step(i);
  }
  metrics_.done();
  if (auto gib = peak_gpu_memory_gib(device_)) log::info(strf("Peak GPU memory allocated: %.2f GiB", *gib));
  else log::info(strf("Peak host memory (RSS): %.2f GiB", peak_host_memory_gib()));
}

EvalResult Trainer::evaluate(const std::string& checkpoint_label) {
  const RunConfig& rc = params_.runconfig;
  std::unique_ptr<data::DataLoader> loader = open_loader(params_, "eval_input");
  check_data_fits(*loader, *model_, params_, "eval_input");
  // At most one pass: more would count samples twice, weighting the mean
  // toward the ones that come round again (modelzoo stops when the data ends).
  int64_t steps = rc.eval_steps.value_or(loader->batches_per_epoch());
  if (steps > loader->batches_per_epoch()) {
    log::warn(strf("%s: runconfig.eval_steps (%ld) is more than the %ld batches of the eval data; evaluating one full "
                   "pass instead", params_.file.c_str(), static_cast<long>(steps),
                   static_cast<long>(loader->batches_per_epoch())));
    steps = loader->batches_per_epoch();
  }
  torch::NoGradGuard no_grad;
  model_->eval();
  const models::LoraMergeGuard merged(*model_);  // lora_params' merge_weights: B A folded in while evaluating
  // Sums stay on the device; the host reads the losses only on log steps
  // (every step on the CPU), as in train().
  torch::Tensor loss_sum;
  std::map<std::string, std::pair<torch::Tensor, torch::Tensor>> sums;
  std::map<std::string, models::MetricTerm::Reduce> reduce;
  std::vector<torch::Tensor> unread_losses;
  auto add = [](torch::Tensor& total, const torch::Tensor& x) {
    total = total.defined() ? total + x.to(torch::kDouble) : x.to(torch::kDouble);
  };
  metrics_.start("Eval");
  for (int64_t i = 1; i <= steps; ++i) {
    models::ModelOutput out;
    {
      amp::AutocastGuard autocast(device_, autocast_dtype_);
      out = model_->forward(to_device(loader->next(), device_), true);
    }
    add(loss_sum, out.loss.detach());
    unread_losses.push_back(out.loss.detach());
    for (const auto& [name, term] : out.metrics) {
      add(sums[name].first, term.sum);
      add(sums[name].second, term.count);
      reduce[name] = term.reduce;
    }
    metrics_.samples(loader->batch_size() * ranks());
    const bool log_step = i % rc.log_steps == 0 || i == steps;
    if (log_step || device_.is_cpu()) {
      // Every batch evaluates the model at global_step_.
      double loss = 0;
      try {
        loss = read_losses(unread_losses, global_step_, /*steps_apart=*/0);
      } catch (const std::runtime_error& e) {  // a non-finite loss: which weights gave it
        throw std::runtime_error("evaluating " + checkpoint_label + ": " + e.what());
      }
      if (log_step) metrics_.eval_batch(i, loss);
    }
  }
  if (distributed_ && loss_sum.defined()) {  // every rank evaluated its share of each batch
    distributed_->sum(loss_sum);
    loss_sum.div_(ranks());
    for (auto& [name, s] : sums) distributed_->sum(s.first), distributed_->sum(s.second);
  }
  EvalLog r;
  r.checkpoint = checkpoint_label;
  r.global_step = global_step_;
  r.loss = loss_sum.defined() ? loss_sum.item<double>() / double(steps) : std::nan("");  // no batches: as 0 / 0
  r.samples = metrics_.samples_seen();
  r.seconds = metrics_.seconds();
  for (const auto& [name, s] : sums) {
    if (reduce[name] == models::MetricTerm::Reduce::macro_mean) {
      const torch::Tensor seen = s.second.cpu() > 0;
      if (seen.any().item<bool>())
        r.metrics["eval/" + name] = (s.first.cpu().index({seen}) / s.second.cpu().index({seen})).mean().item<double>();
      else
        r.unmeasured.insert("eval/" + name);
      continue;
    }
    const double count = s.second.item<double>();
    if (count <= 0) {  // 0 of 0 is no accuracy at all, not an accuracy of 0
      r.unmeasured.insert("eval/" + name);
      continue;
    }
    const double mean = s.first.item<double>() / count;
    r.metrics["eval/" + name] = reduce[name] == models::MetricTerm::Reduce::exp_mean ? std::exp(mean) : mean;
  }
  metrics_.eval(r);
  return {r.global_step, r.loss, r.metrics, r.samples};
}

// Each component writes its own state under modelzoo's keys.
std::string Trainer::save_checkpoint() {
  const RunConfig& rc = params_.runconfig;
  // Weights that went non-finite are never saved: the next run would
  // autoload them as the newest checkpoint. Every rank holds the same
  // weights, so all stop here, before the collective below.
  if (const std::vector<std::string> bad = non_finite_parameters(*model_); !bad.empty()) {
    const auto kept = ckpt::list_checkpoints(rc.checkpoint_dir(), ckpt::CheckpointNaming(rc.checkpoint_name));
    throw std::runtime_error(
        strf("step %ld: the model's weights hold NaN or inf (", static_cast<long>(global_step_)) + bad.front() +
        (bad.size() > 1 ? strf(" and %zu more tensors", bad.size() - 1) : std::string()) +
        "), so no checkpoint was written; the newest one stays " +
        (kept.empty() ? std::string("none") : kept.back().path) +
        ". Lower the learning rate, clip gradients (max_gradient_norm) or check the data");
  }
  // Sharded: every rank sends its share of the optimizer state (a collective).
  c10::impl::GenericDict optimizer_state = sharding_ ? sharding_->full_state_dict(*optimizer_) : optimizer_->state_dict();
  if (distributed_ && !distributed_->is_main()) return "";  // the ranks hold the same state
  fs::create_directories(rc.checkpoint_dir());
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", ckpt::model_state_dict(*model_));
  d.insert("optimizer", optimizer_state);
  d.insert("lr_scheduler", scheduler_->state_dict());
  d.insert("grad_scaler", scaler_ ? scaler_->state_dict() : c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  d.insert("dataloader", train_loader_->state_dict());
  d.insert("global_step", global_step_);
  d.insert("rng_state", ckpt::rng_state_dict());
  if (sparsity_ && sparsity_->ready()) d.insert("sparsity", sparsity_->state_dict());
  std::map<std::string, std::string> extra;
  if (!lora_base_.empty()) extra["lora_base"] = lora_base_;  // which base the adapters apply to
  d.insert("__metadata__", ckpt::checkpoint_metadata(params_, extra));
  const ckpt::CheckpointNaming naming(rc.checkpoint_name);
  std::string path = ckpt::new_checkpoint_path(rc.checkpoint_dir(), global_step_, naming);
  const auto start = std::chrono::steady_clock::now();
  ckpt::save_checkpoint_file(path, d);
  log_checkpoint_io("Saved", path, start);
  if (rc.max_checkpoints) ckpt::prune_checkpoints(rc.checkpoint_dir(), *rc.max_checkpoints, resumed_from_, naming);
  return path;
}

}  // namespace zoo
