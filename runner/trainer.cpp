// Implementation of runner/trainer.h.
#include "runner/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/registry.h"
#include "models/registry.h"
#include "runner/amp/autocast.h"
#include "runner/checkpoint.h"
#include "runner/log.h"

namespace zoo {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<data::DataLoader> open_loader(const Params& p, const char* section) {
  const auto& spec = std::string(section) == "train_input" ? p.train_input : p.eval_input;
  if (!spec) p.context(section).fail(YAML::Node(), "", "required for --mode " + p.runconfig.mode + " but missing from the params");
  return spec->open();
}

models::Features to_device(models::Features batch, const torch::Device& device) {
  if (device.is_cpu()) return batch;
  for (auto& [k, v] : batch) v = v.to(device, /*non_blocking=*/true);
  return batch;
}

std::string device_name(const torch::Device& d) { return d.is_cuda() ? "gpu" : "cpu"; }

// model.mixed_precision / fp16_type as an autocast dtype for `device`.
std::optional<torch::ScalarType> autocast_dtype(const PrecisionConfig& p, const torch::Device& device) {
  if (!p.mixed_precision) return std::nullopt;
  std::string type = p.fp16_type;
  if (type == "cbfloat16") {
    log::warn("model.fp16_type: cbfloat16 is a Cerebras-only format; using bfloat16");
    type = "bfloat16";
  }
  if (type == "float16" && device.is_cpu()) {
    log::warn("model.fp16_type: float16 autocast needs a GPU; using bfloat16 on CPU");
    type = "bfloat16";
  }
  return type == "float16" ? torch::kHalf : torch::kBFloat16;
}

// A GradScaler when the optimizer section asks for loss scaling; bfloat16
// has float32's range and needs none (modelzoo forces the factor to 1.0).
std::unique_ptr<amp::GradScaler> make_grad_scaler(const OptimizerConfig& o, std::optional<torch::ScalarType> dtype) {
  const bool dynamic = o.loss_scaling_factor == "dynamic";
  const double factor = dynamic ? 0.0 : std::stod(o.loss_scaling_factor);
  if (!dynamic && factor == 1.0) return nullptr;
  if (dtype == torch::kBFloat16) {
    log::info("optimizer.loss_scaling_factor: not used with bfloat16 (no loss scaling needed)");
    return nullptr;
  }
  amp::GradScalerOptions s;
  s.dynamic = dynamic;
  s.initial_scale = dynamic ? o.initial_loss_scale.value_or(s.initial_scale) : factor;
  s.steps_per_increase = o.steps_per_increase;
  s.min_scale = o.min_loss_scale.value_or(dynamic ? s.min_scale : factor);
  s.max_scale = o.max_loss_scale.value_or(dynamic ? s.max_scale : factor);
  return std::make_unique<amp::GradScaler>(s);
}

// Samples counted since the start and since the last progress line; prints
// modelzoo's "| Train Device=..., Step=..., Loss=..., Rate=..., GlobalRate=..." lines.
class ProgressLine {
 public:
  ProgressLine(std::string phase, std::string device) : phase_(std::move(phase)), device_(std::move(device)) {}
  void add_samples(int64_t n) { samples_ += n; }
  int64_t samples() const { return samples_; }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // On a terminal: "[#####.....] step 40/100  loss 2.1234  12.3k tok/s  ETA 0:42".
  void show_bar(int64_t done, int64_t total, double loss, int64_t tokens_per_step) {
    if (!log::progress_enabled()) return;
    auto now = Clock::now();
    if (done < total && std::chrono::duration<double>(now - last_bar_).count() < 0.1) return;
    last_bar_ = now;
    const int width = 24, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    const double secs = elapsed(), steps_per_sec = done / std::max(secs, 1e-9);
    const long eta = static_cast<long>((total - done) / std::max(steps_per_sec, 1e-9));
    log::progress(strf("[%s%s] step %ld/%ld  loss %.4f  %.1fk tok/s  ETA %ld:%02ld", std::string(filled, '#').c_str(),
                       std::string(width - filled, '.').c_str(), static_cast<long>(done), static_cast<long>(total),
                       loss, steps_per_sec * tokens_per_step / 1e3, eta / 60, eta % 60));
  }
  struct Rates {
    double local, global;  // samples/sec since the last line, and since the start
  };
  Rates print(int64_t step, double loss) {
    auto now = Clock::now();
    double interval = std::chrono::duration<double>(now - last_).count();
    Rates r{(samples_ - samples_at_last_) / std::max(interval, 1e-9), samples_ / std::max(elapsed(), 1e-9)};
    log::info(strf("| %s Device=%s, Step=%ld, Loss=%.5f, Rate=%.2f samples/sec, GlobalRate=%.2f samples/sec",
                   phase_.c_str(), device_.c_str(), static_cast<long>(step), loss, r.local, r.global));
    last_ = now;
    samples_at_last_ = samples_;
    return r;
  }

 private:
  std::string phase_, device_;
  Clock::time_point start_ = Clock::now(), last_ = start_, last_bar_ = start_;
  int64_t samples_ = 0, samples_at_last_ = 0;
};

}  // namespace

Trainer::Trainer(const Params& params, torch::Device device, bool for_training) : params_(params), device_(device) {
  if (params_.runconfig.seed) torch::manual_seed(static_cast<uint64_t>(*params_.runconfig.seed));
  if (for_training) {
    if (!params_.has_optimizer)
      params_.context("optimizer").fail(YAML::Node(), "", "required for training but missing from the params");
    train_loader_ = open_loader(params_, "train_input");
  }
  model_ = params_.model->build(torch::TensorOptions().device(device_));
  if (train_loader_ && model_->vocab_size()) train_loader_->check_token_ids(*model_->vocab_size());
  if (for_training) {
    auto groups = optim::split_weight_decay_groups(
        model_->named_parameters().pairs(), models::norm_parameter_names(*model_), params_.optimizer.weight_decay);
    optimizer_ = optim::make_optimizer(params_.optimizer, std::move(groups));
    schedule_ = optim::make_lr_schedule(params_.optimizer.learning_rate);
  }
  autocast_dtype_ = autocast_dtype(params_.precision, device_);
  if (for_training) scaler_ = make_grad_scaler(params_.optimizer, autocast_dtype_);
}

std::optional<std::string> Trainer::restore(bool training) {
  const RunConfig& rc = params_.runconfig;
  if (rc.checkpoint_path) {
    load_checkpoint(*rc.checkpoint_path, training);
    return rc.checkpoint_path;
  }
  if (rc.autoload_last_checkpoint) {
    // Newest first; a corrupt or truncated file is skipped for the one before it.
    auto all = ckpt::list_checkpoints(rc.model_dir);
    std::string unreadable;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      std::optional<c10::impl::GenericDict> dict;
      try {
        dict = ckpt::load_checkpoint_file(it->path);
      } catch (const std::runtime_error& e) {
        log::warn(std::string(e.what()) + "; trying the previous checkpoint");
        unreadable += (unreadable.empty() ? "" : ", ") + it->path;
        continue;
      }
      apply_checkpoint(*dict, it->path, training);
      return it->path;
    }
    // Starting over would quietly abandon the run these files belong to.
    if (!unreadable.empty())
      throw std::runtime_error("no readable checkpoint in " + rc.model_dir + " (unreadable: " + unreadable +
                               "); move them away to start afresh, or set checkpoint_path");
  }
  log::info("No checkpoint to load; starting from the initialized model (global_step 0).");
  return std::nullopt;
}

void Trainer::load_checkpoint(const std::string& path, bool training) {
  apply_checkpoint(ckpt::load_checkpoint_file(path), path, training);
}

void Trainer::apply_checkpoint(const c10::impl::GenericDict& dict, const std::string& path, bool training) {
  const RunConfig& rc = params_.runconfig;
  std::set<std::string> states(kCheckpointStates.begin(), kCheckpointStates.end());
  if (training && rc.load_checkpoint_states) states = rc.load_checkpoint_states->items;
  auto want = [&](const char* key) { return states.count(key) && dict.contains(key); };
  log::info("Loading checkpoint " + path);
  if (want("model")) {
    bool strict = training ? !rc.disable_strict_checkpoint_loading : true;
    for (const auto& w : ckpt::load_model_state_dict(*model_, dict.at("model").toGenericDict(), strict, path))
      log::warn(path + ": " + w);
  } else {
    log::warn(path + ": model weights not loaded (" +
              std::string(states.count("model") ? "absent from the checkpoint" : "not in load_checkpoint_states") +
              ")");
  }
  global_step_ = want("global_step") ? dict.at("global_step").toInt() : 0;
  if (!training) return;
  if (want("optimizer")) {
    try {
      optimizer_->load_state_dict(dict.at("optimizer").toGenericDict());
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": cannot restore the optimizer state (" + e.what() +
                               "); to start the optimizer afresh, set load_checkpoint_states to the states to keep, "
                               "e.g. model,global_step");
    }
  }
  scheduler_step_ = want("lr_scheduler") ? dict.at("lr_scheduler").toGenericDict().at("last_epoch").toInt() : 0;
  if (want("grad_scaler") && scaler_ && dict.at("grad_scaler").toGenericDict().size() > 0)
    scaler_->load_state_dict(dict.at("grad_scaler").toGenericDict());
  if (want("dataloader")) {
    const c10::impl::GenericDict saved = dict.at("dataloader").toGenericDict();
    data::DataLoader::Position position;
    position.samples_streamed = saved.at("samples_streamed").toInt();
    // Checkpoints from before zoo kept the order's inputs are taken as matching.
    if (!saved.contains("shuffle"))
      position.shuffle_seed = train_loader_->position().shuffle_seed;
    else if (saved.at("shuffle").toBool())
      position.shuffle_seed = saved.at("seed").toInt();
    if (saved.contains("num_tasks")) position.num_tasks = saved.at("num_tasks").toInt();
    try {
      train_loader_->resume(position);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(path + ": cannot resume the training data: " + e.what());
    }
  }
  if (want("global_step") && dict.contains("rng_state")) {
    torch::Tensor state = dict.at("rng_state").toGenericDict().at("torch_cpu").toTensor();
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(state);
  }
  resumed_from_ = path;
  for (const auto& s : kCheckpointStates)
    if (states.count(s) && !dict.contains(s) && s != "grad_scaler")
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

void Trainer::check_loss(double loss) const {
  if (params_.runconfig.check_loss_values && !std::isfinite(loss))
    throw std::runtime_error("loss is " + std::to_string(loss) + " at step " + std::to_string(global_step_ + 1) +
                             " (check_loss_values); lower the learning rate or check the data");
}

void Trainer::train(int64_t steps) {
  const RunConfig& rc = params_.runconfig;
  const OptimizerConfig& oc = params_.optimizer;
  const int64_t accum = oc.grad_accum_steps * train_loader_->micro_batches();
  const int64_t samples_per_step = train_loader_->batch_size() * accum;
  std::vector<torch::Tensor> parameters = optimizer_->parameters();
  model_->train();
  ProgressLine progress("Train", device_name(device_));
  for (int64_t i = 1; i <= steps; ++i) {
    optimizer_->set_lr(schedule_->at(scheduler_step_));  // step k uses lr(k - 1)
    double loss = 0;
    int64_t tokens = 0;
    for (int64_t micro = 0; micro < accum; ++micro) {
      models::ModelOutput out;
      {
        amp::AutocastGuard autocast(device_, autocast_dtype_);
        models::Features batch = train_loader_->next();
        tokens += batch.begin()->second.numel();
        out = model_->forward(to_device(std::move(batch), device_), false);
      }
      torch::Tensor micro_loss = accum > 1 ? out.loss / double(accum) : out.loss;
      (scaler_ ? scaler_->scale(micro_loss) : micro_loss).backward();
      loss += out.loss.item<double>() / double(accum);
    }
    check_loss(loss);
    // Order as modelzoo: unscale, clip, step; a step with non-finite gradients
    // is skipped and does not advance the LR schedule.
    const bool finite = !scaler_ || scaler_->unscale(parameters);
    const bool log_step = (global_step_ + 1) % rc.log_steps == 0 || i == steps;
    if (log_step && oc.log_summaries) write_norm_summaries(parameters);
    std::vector<double> lrs;  // each group's LR for this step, logged as lr/<group>
    for (const auto& g : optimizer_->param_groups()) lrs.push_back(g.lr);
    if (finite) {
      if (oc.max_gradient_norm) torch::nn::utils::clip_grad_norm_(parameters, *oc.max_gradient_norm);
      if (oc.max_gradient_value) torch::nn::utils::clip_grad_value_(parameters, *oc.max_gradient_value);
      optimizer_->step();
      ++scheduler_step_;
    }
    optimizer_->zero_grad();
    if (scaler_) {
      const double before = scaler_->current_scale();
      scaler_->update(finite);
      if (!finite)
        log::warn(strf("Step %ld: non-finite gradients; update skipped, loss scale %g -> %g",
                       static_cast<long>(global_step_ + 1), before, scaler_->current_scale()));
    }
    ++global_step_;
    progress.add_samples(samples_per_step);
    if (log_step) {
      ProgressLine::Rates r = progress.print(global_step_, loss);
      tensorboard::EventWriter& tb = events(train_events_, "train");
      tb.add_scalar("loss", loss, global_step_);
      for (size_t g = 0; g < lrs.size(); ++g) tb.add_scalar("lr/" + std::to_string(g), lrs[g], global_step_);
      tb.add_scalar("local_samples_per_sec", r.local, global_step_);
      tb.add_scalar("avg_samples_per_sec", r.global, global_step_);
      tb.add_scalar("avg_steps_per_sec", r.global / double(samples_per_step), global_step_);
      if (scaler_ && oc.log_summaries) tb.add_scalar("loss_scale", scaler_->current_scale(), global_step_);
      tb.flush();
      log::debug(strf("lr=%.6g", lrs.front()));
    }
    if (rc.checkpoint_steps && *rc.checkpoint_steps > 0 && (i % *rc.checkpoint_steps == 0 || i == steps))
      save_checkpoint();
    progress.show_bar(i, steps, loss, tokens);
  }
  log::end_progress();
  log::info("Training completed successfully!");
  log::info(
      strf("Processed %ld sample(s) in %.2f seconds.", static_cast<long>(progress.samples()), progress.elapsed()));
}

EvalResult Trainer::evaluate(const std::string& checkpoint_label) {
  const RunConfig& rc = params_.runconfig;
  std::unique_ptr<data::DataLoader> loader = open_loader(params_, "eval_input");
  if (model_->vocab_size()) loader->check_token_ids(*model_->vocab_size());
  const int64_t steps = rc.eval_steps.value_or(loader->batches_per_epoch());
  torch::NoGradGuard no_grad;
  model_->eval();
  double loss_sum = 0;
  std::map<std::string, std::pair<double, double>> sums;
  std::map<std::string, models::MetricTerm::Reduce> reduce;
  ProgressLine progress("Eval", device_name(device_));
  for (int64_t i = 1; i <= steps; ++i) {
    models::ModelOutput out;
    {
      amp::AutocastGuard autocast(device_, autocast_dtype_);
      out = model_->forward(to_device(loader->next(), device_), true);
    }
    double loss = out.loss.item<double>();
    check_loss(loss);
    loss_sum += loss;
    for (const auto& [name, term] : out.metrics) {
      sums[name].first += term.sum.item<double>();
      sums[name].second += term.count.item<double>();
      reduce[name] = term.reduce;
    }
    progress.add_samples(loader->batch_size());
    if (i % rc.log_steps == 0 || i == steps) progress.print(i, loss);
  }
  EvalResult r;
  r.global_step = global_step_;
  r.loss = loss_sum / double(steps);
  r.samples = progress.samples();
  for (const auto& [name, s] : sums) {
    double mean = s.second > 0 ? s.first / s.second : 0.0;
    r.metrics["eval/" + name] = reduce[name] == models::MetricTerm::Reduce::exp_mean ? std::exp(mean) : mean;
  }
  for (const auto& [name, v] : r.metrics) log::info(strf("Metric: %s = %.6g", name.c_str(), v));
  log::info(strf("Avg Eval Loss: %.6g", r.loss));
  tensorboard::EventWriter& tb = events(eval_events_, "eval");
  for (const auto& [name, v] : r.metrics) tb.add_scalar(name, v, r.global_step);
  tb.add_scalar("loss", r.loss, r.global_step);
  tb.add_scalar("avg_samples_per_sec", r.samples / std::max(progress.elapsed(), 1e-9), r.global_step);
  tb.flush();

  // One row per evaluation, so checkpoints can be compared without TensorBoard.
  fs::path dir = fs::path(rc.model_dir) / "eval";
  fs::create_directories(dir);
  fs::path csv = dir / "results.csv";
  bool fresh = !fs::exists(csv);
  std::ofstream out(csv, std::ios::app);
  if (fresh) {
    out << "checkpoint,global_step,loss";
    for (const auto& [name, v] : r.metrics) out << "," << name;
    out << "\n";
  }
  out << checkpoint_label << "," << r.global_step << "," << strf("%.6g", r.loss);
  for (const auto& [name, v] : r.metrics) out << "," << strf("%.6g", v);
  out << "\n";
  log::info("Evaluation completed successfully!");
  return r;
}

tensorboard::EventWriter& Trainer::events(std::unique_ptr<tensorboard::EventWriter>& writer,
                                          const std::string& mode) {
  if (!writer) {
    const RunConfig& rc = params_.runconfig;
    fs::path dir = rc.summary_dir ? fs::path(*rc.summary_dir) / mode : fs::path(rc.model_dir) / mode;
    writer = std::make_unique<tensorboard::EventWriter>(dir.string());
  }
  return *writer;
}

void Trainer::write_norm_summaries(const std::vector<torch::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  tensorboard::EventWriter& tb = events(train_events_, "train");
  const int64_t step = global_step_ + 1;
  double grad_sq = 0, param_sq = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const torch::Tensor& p = parameters[i];
    param_sq += p.to(torch::kDouble).pow(2).sum().item<double>();
    if (!p.grad().defined()) continue;
    double n = p.grad().to(torch::kDouble).norm().item<double>();
    grad_sq += n * n;
    tb.add_scalar("per_layer_grad_norm/layer_" + std::to_string(i), n, step);
  }
  tb.add_scalar("model_wise_grad_norm", std::sqrt(grad_sq), step);
  tb.add_scalar("params_norm/model_wise_params_norm", std::sqrt(param_sq), step);
}

std::string Trainer::save_checkpoint() {
  const RunConfig& rc = params_.runconfig;
  fs::create_directories(rc.model_dir);
  using Dict = c10::impl::GenericDict;
  Dict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", ckpt::model_state_dict(*model_));
  d.insert("optimizer", optimizer_->state_dict());
  Dict sched(c10::StringType::get(), c10::AnyType::get());
  sched.insert("last_epoch", scheduler_step_);
  sched.insert("_step_count", scheduler_step_ + 1);
  d.insert("lr_scheduler", sched);
  d.insert("grad_scaler", scaler_ ? scaler_->state_dict() : Dict(c10::StringType::get(), c10::AnyType::get()));
  Dict loader(c10::StringType::get(), c10::AnyType::get());
  const data::DataLoader::Position position = train_loader_->position();
  loader.insert("samples_streamed", position.samples_streamed);
  loader.insert("shuffle", position.shuffle_seed.has_value());
  if (position.shuffle_seed) loader.insert("seed", *position.shuffle_seed);
  loader.insert("num_tasks", position.num_tasks);
  d.insert("dataloader", loader);
  d.insert("global_step", global_step_);
  Dict rng(c10::StringType::get(), c10::AnyType::get());
  rng.insert("torch_cpu", at::detail::getDefaultCPUGenerator().get_state());
  d.insert("rng_state", rng);
  d.insert("__metadata__", ckpt::checkpoint_metadata(params_));

  std::string path = ckpt::new_checkpoint_path(rc.model_dir, global_step_);
  ckpt::save_checkpoint_file(path, d);
  log::info("Saved checkpoint " + path);
  prune_checkpoints();
  return path;
}

void Trainer::prune_checkpoints() {
  const auto& max = params_.runconfig.max_checkpoints;
  if (!max) return;
  auto all = ckpt::list_checkpoints(params_.runconfig.model_dir);
  int64_t excess = static_cast<int64_t>(all.size()) - *max;
  for (const auto& c : all) {
    if (excess <= 0) break;
    if (c.path == resumed_from_) continue;  // never delete what this run stands on
    fs::remove(c.path);
    log::info("Removed old checkpoint " + c.path + " (max_checkpoints " + std::to_string(*max) + ")");
    --excess;
  }
}

}  // namespace zoo
