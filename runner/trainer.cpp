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
#include "runner/optim/registry.h"
#include "runner/step_profiler.h"

namespace zoo {

namespace fs = std::filesystem;

namespace {

// The batch's tokens short of padding: in each row, those up to the last
// one attention_mask marks (the loss mask of LM data, the padding mask of
// encoders' data), whether the row holds one sequence or packs several.
// Batches without one count every element of their first feature.
int64_t tokens_short_of_padding(const models::Features& batch) {
  const torch::Tensor mask = models::optional_feature(batch, "attention_mask");
  if (!mask.defined() || mask.dim() != 2) return batch.begin()->second.numel();
  const int64_t T = mask.size(1);
  const torch::Tensor at = torch::arange(1, T + 1, mask.options().dtype(torch::kLong));
  return ((mask != 0).to(torch::kLong) * at).amax(1).sum().item<int64_t>();  // per row: 1 + the last marked place
}

std::unique_ptr<data::DataLoader> open_loader(const Params& p, const char* section) {
  const auto& spec = std::string(section) == "train_input" ? p.train_input : p.eval_input;
  if (!spec)
    p.context(section).fail(YAML::Node(), "",
                            "required for --mode " + p.runconfig.mode + " but missing from the params");
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

}  // namespace

Trainer::Trainer(const Params& params, torch::Device device, bool for_training, Distributed* distributed)
    : params_(params),
      device_(device),
      strategy_(parallel::make_parallel_strategy(params.runconfig, distributed, for_training)),
      metrics_(params.runconfig, device.is_cuda() ? "gpu" : "cpu", strategy_->is_main()) {
  if (params_.runconfig.seed) torch::manual_seed(static_cast<uint64_t>(*params_.runconfig.seed));
  if (for_training) {
    if (!params_.has_optimizer)
      params_.context("optimizer").fail(YAML::Node(), "", "required for training but missing from the params");
    train_loader_ = open_loader(params_, "train_input");
  }
  const auto start = std::chrono::steady_clock::now();
  memory_before_model_ = host_memory_gib();
  model_ = build_model(params_, device_);
  const int64_t parameters = models::parameter_count(*model_), trainable = models::trainable_parameter_count(*model_);
  log::info(
      strf("Built the model: %ld parameters%s in %.2f s", static_cast<long>(parameters),
           trainable == parameters ? "" : strf(" (%ld trained, the rest frozen)", static_cast<long>(trainable)).c_str(),
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  if (train_loader_) check_data_fits(*train_loader_, *model_, params_, "train_input");
  if (params_.eval_tasks && !model_->is_causal_lm())
    params_.context("eval_tasks")
        .fail(YAML::Node(), "",
              "downstream tasks need a causal language model; model " + params_.model_name + " is not one");
  if (params_.eval_tasks && params_.runconfig.mode != "train")  // the task files are read where the run evaluates
    tasks_ = std::make_unique<eval_tasks::DownstreamTasks>(*params_.eval_tasks, params_.runconfig.checkpoint_path);
  autocast_dtype_ = amp::autocast_dtype(params_.precision.mixed_precision, params_.precision.fp16_type, device_);
  if (!for_training) return;
  std::vector<std::pair<std::string, torch::Tensor>> trained;  // frozen parameters (DPO's reference) stay out
  for (const auto& p : model_->named_parameters())
    if (p.value().requires_grad()) trained.emplace_back(p.key(), p.value());
  auto groups =
      optim::split_weight_decay_groups(trained, models::norm_parameter_names(*model_), params_.optimizer.weight_decay);
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
  // Which optimizers and features each strategy takes is checked with the params (runner/params/params.cpp).
  optimizer_ = optim::make_optimizer(params_.optimizer, strategy_->wrap(*model_, std::move(groups)));
  scheduler_ = std::make_unique<optim::LRScheduler>(params_.optimizer.learning_rate);
  scaler_ = amp::make_grad_scaler(params_.optimizer, autocast_dtype_);
  strategy_->attach(*optimizer_);
  if (params_.sparsity) {
    try {  // its own generator, seeded alike on every rank, so masks agree without a broadcast
      sparsity_ = std::make_unique<WeightSparsity>(*params_.sparsity, *model_,
                                                   static_cast<uint64_t>(params_.runconfig.seed.value_or(0)) + 1);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(params_.file + ": " + e.what());
    }
  }
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
  strategy_->average_over_ranks(stacked);          // each rank's mean over its share of the batch
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
      tokens += tokens_short_of_padding(batch);
      strategy_->before_forward();
      out = model_->forward(to_device(std::move(batch), device_), false);
    }
    torch::Tensor micro_loss = accum > 1 ? out.loss / double(accum) : out.loss;
    strategy_->before_backward(/*last_micro_batch=*/micro == accum - 1);
    (scaler_ ? scaler_->scale(micro_loss) : micro_loss).backward();
    strategy_->after_backward();
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
  reset_peak_memory(device_);
  const double memory_before = device_.is_cuda() ? peak_gpu_memory_gib(device_).value_or(0.0) : host_memory_gib();
  const std::unique_ptr<StepProfiler> profiler = StepProfiler::from_spec(
      params_.runconfig.profile_steps, params_.runconfig.model_dir, device_.is_cuda(), strategy_->rank());
  metrics_.start("Train");
  for (int64_t i = 1; i <= steps; ++i) {
    if (profiler) profiler->before_step(i);
    int64_t tokens = 0;
    unread_losses.push_back(train_step(accum, tokens));
    strategy_->finish_gradients(parameters, /*first_step=*/i == 1);
    const bool log_step = (global_step_ + 1) % rc.log_steps == 0 || i == steps;
    const bool checkpoint_step =
        rc.checkpoint_steps && *rc.checkpoint_steps > 0 && (i % *rc.checkpoint_steps == 0 || i == steps);
    // On the CPU every loss is read, before the update, so a non-finite one
    // stops the run before its step; a GPU's is read on the steps that need
    // it once the update is queued, so the GPU works through it while the
    // host waits.
    const bool on_cpu = device_.is_cpu();
    if (on_cpu) last_loss = read_losses(unread_losses, global_step_ + 1, /*steps_apart=*/1);
    // Order as modelzoo: unscale, clip, step; a step with non-finite gradients
    // is skipped and does not advance the LR schedule.
    const bool finite = !scaler_ || strategy_->gradients_finite_everywhere(scaler_->unscale(parameters));
    // Per-tensor norms need whole tensors; a fully sharded rank holds flat shards.
    if (log_step && oc.log_summaries && strategy_->holds_whole_tensors()) metrics_.norms(global_step_ + 1, parameters);
    TrainLog log{global_step_ + 1, last_loss, {}, std::nullopt};
    for (const auto& g : optimizer_->param_groups()) log.lrs.push_back(g.lr);  // as used by this step
    if (finite) {
      if (sparsity_) sparsity_->mask_gradients(global_step_ + 1);
      // Clipping by norm hands its coefficient to the step (Adam(W) reads it
      // in its update pass); clipping by value needs the gradients clipped first.
      torch::Tensor clip;
      if (oc.max_gradient_norm) clip = strategy_->clip_coefficient(parameters, *oc.max_gradient_norm);
      if (clip.defined() && oc.max_gradient_value) optim::scale_gradients(parameters, std::exchange(clip, {}));
      if (oc.max_gradient_value) torch::nn::utils::clip_grad_value_(parameters, *oc.max_gradient_value);
      strategy_->before_optimizer_step(parameters);
      if (clip.defined()) optimizer_->step_scaled(clip);
      else optimizer_->step();
      strategy_->after_optimizer_step(parameters);
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
  // Every rank's, as each may hold a different share.
  const std::string who = strategy_->log_prefix();
  if (auto gib = peak_gpu_memory_gib(device_))
    log::info(who + strf("Peak GPU memory allocated: %.2f GiB while training (%.2f GiB before)", *gib, memory_before));
  else
    log::info(who + strf("Peak host memory (RSS): %.2f GiB while training (%.2f GiB before; %.2f GiB before the "
                         "model was built)",
                         peak_host_memory_gib(), memory_before, memory_before_model_));
}

EvalResult Trainer::evaluate(const std::string& checkpoint_label) {
  const RunConfig& rc = params_.runconfig;
  std::unique_ptr<data::DataLoader> loader = open_loader(params_, "eval_input");
  check_data_fits(*loader, *model_, params_, "eval_input");
  // At most one pass: more would count samples twice, weighting the mean
  // toward the ones that come round again (modelzoo stops when the data ends).
  int64_t steps = rc.eval_steps.value_or(loader->batches_per_epoch());
  if (steps > loader->batches_per_epoch()) {
    log::warn(
        strf("%s: runconfig.eval_steps (%ld) is more than the %ld batches of the eval data; evaluating one full "
             "pass instead",
             params_.file.c_str(), static_cast<long>(steps), static_cast<long>(loader->batches_per_epoch())));
    steps = loader->batches_per_epoch();
  }
  torch::NoGradGuard no_grad;
  model_->eval();
  // lora_params' merge_weights: B A folded in while evaluating (fully
  // sharded weights are whole only a layer at a time: evaluated unmerged).
  const std::unique_ptr<models::LoraMergeGuard> merged =
      strategy_->holds_whole_tensors() ? std::make_unique<models::LoraMergeGuard>(*model_) : nullptr;
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
      strategy_->before_forward();
      out = model_->forward(to_device(loader->next(), device_), true);
      strategy_->after_forward_without_backward();
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
  if (loss_sum.defined()) {  // every rank evaluated its share of each batch
    strategy_->average_over_ranks(loss_sum);
    for (auto& [name, s] : sums) strategy_->sum_over_ranks(s.first), strategy_->sum_over_ranks(s.second);
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
      else r.unmeasured.insert("eval/" + name);
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
  if (tasks_) {
    amp::AutocastGuard autocast(device_, autocast_dtype_);
    eval_tasks::TaskRunOptions hooks;
    hooks.before_forward = [this] { strategy_->before_forward(); };
    hooks.after_forward = [this] { strategy_->after_forward_without_backward(); };
    try {
      for (const auto& [name, value] : tasks_->run(*model_, hooks)) r.metrics["eval/" + name] = value;
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("evaluating " + checkpoint_label + ": " + e.what());
    }
  }
  metrics_.eval(r);
  return {r.global_step, r.loss, r.metrics, r.samples};
}

}  // namespace zoo
