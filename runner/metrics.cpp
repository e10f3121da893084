// Implementation of runner/metrics.h.
#include "runner/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runner/log.h"

namespace zoo {

namespace fs = std::filesystem;

MetricsSink::MetricsSink(const RunConfig& rc, std::string device_name, bool writes_files)
    : rc_(rc), device_(std::move(device_name)), writes_files_(writes_files) {}
MetricsSink::~MetricsSink() = default;

void MetricsSink::start(std::string phase) {
  phase_ = std::move(phase);
  start_ = last_ = last_bar_ = Clock::now();
  samples_ = samples_at_last_ = 0;
}

double MetricsSink::seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void MetricsSink::write_events(const std::string& mode, const std::function<void(tensorboard::EventWriter&)>& write) {
  if (!writes_files_ || failed_writers_.count(mode)) return;
  try {
    auto& writer = writers_[mode];
    if (!writer) {
      fs::path dir = rc_.summary_dir ? fs::path(*rc_.summary_dir) / mode : fs::path(rc_.model_dir) / mode;
      writer = std::make_unique<tensorboard::EventWriter>(dir.string());
    }
    write(*writer);
    writer->flush();
  } catch (const std::exception& e) {
    failed_writers_.insert(mode);
    writers_.erase(mode);
    log::warn(std::string(e.what()) + "; the run goes on without TensorBoard " + mode + " summaries");
  }
}

// modelzoo's "| Train Device=..., Step=..., Loss=..., Rate=..., GlobalRate=..." line.
MetricsSink::Rates MetricsSink::line(int64_t step, double loss) {
  auto now = Clock::now();
  double interval = std::chrono::duration<double>(now - last_).count();
  Rates r{(samples_ - samples_at_last_) / std::max(interval, 1e-9), samples_ / std::max(seconds(), 1e-9)};
  log::info(strf("| %s Device=%s, Step=%ld, Loss=%.5f, Rate=%.2f samples/sec, GlobalRate=%.2f samples/sec",
                 phase_.c_str(), device_.c_str(), static_cast<long>(step), loss, r.local, r.global));
  last_ = now;
  samples_at_last_ = samples_;
  return r;
}

void MetricsSink::step(const TrainLog& log, int64_t samples_per_step) {
  Rates r = line(log.step, log.loss);
  write_events("train", [&](tensorboard::EventWriter& tb) {
    tb.add_scalar("loss", log.loss, log.step);
    for (size_t g = 0; g < log.lrs.size(); ++g) tb.add_scalar("lr/" + std::to_string(g), log.lrs[g], log.step);
    tb.add_scalar("local_samples_per_sec", r.local, log.step);
    tb.add_scalar("avg_samples_per_sec", r.global, log.step);
    tb.add_scalar("avg_steps_per_sec", r.global / double(samples_per_step), log.step);
    if (log.loss_scale) tb.add_scalar("loss_scale", *log.loss_scale, log.step);
  });
  if (!log.lrs.empty()) log::debug(strf("lr=%.6g", log.lrs.front()));
}

void MetricsSink::eval_batch(int64_t batch, double loss) { line(batch, loss); }

// On a terminal: "[#####.....] step 40/100  loss 2.1234  12.3k tok/s  ETA 0:42".
void MetricsSink::bar(int64_t done, int64_t total, double loss, int64_t tokens_per_step) {
  if (!log::progress_enabled()) return;
  auto now = Clock::now();
  if (done < total && std::chrono::duration<double>(now - last_bar_).count() < 0.1) return;
  last_bar_ = now;
  const int width = 24, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  const double steps_per_sec = done / std::max(seconds(), 1e-9);
  const long eta = static_cast<long>((total - done) / std::max(steps_per_sec, 1e-9));
  log::progress(strf("[%s%s] step %ld/%ld  loss %.4f  %.1fk tok/s  ETA %ld:%02ld", std::string(filled, '#').c_str(),
                     std::string(width - filled, '.').c_str(), static_cast<long>(done), static_cast<long>(total), loss,
                     steps_per_sec * tokens_per_step / 1e3, eta / 60, eta % 60));
}

void MetricsSink::done() {
  log::end_progress();
  log::info("Training completed successfully!");
  log::info(strf("Processed %ld sample(s) in %.2f seconds.", static_cast<long>(samples_), seconds()));
}

void MetricsSink::norms(int64_t step, const std::vector<torch::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  write_events("train", [&](tensorboard::EventWriter& tb) {
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
  });
}

void MetricsSink::eval(const EvalLog& r) {
  for (const auto& [name, v] : r.metrics) log::info(strf("Metric: %s = %.6g", name.c_str(), v));
  for (const auto& name : r.unmeasured)
    log::info("Metric: " + name + " not measured: no evaluated sample counts towards it");
  log::info(strf("Avg Eval Loss: %.6g", r.loss));
  write_events("eval", [&](tensorboard::EventWriter& tb) {
    for (const auto& [name, v] : r.metrics) tb.add_scalar(name, v, r.global_step);
    tb.add_scalar("loss", r.loss, r.global_step);
    tb.add_scalar("avg_samples_per_sec", r.samples / std::max(r.seconds, 1e-9), r.global_step);
  });

  // One row per evaluation, so checkpoints can be compared without TensorBoard.
  // A row that cannot be written is reported, not fatal: the numbers are
  // in the console lines above and the run log.
  if (!writes_files_) return;
  fs::path dir = fs::path(rc_.model_dir) / "eval";
  fs::path csv = dir / "results.csv";
  std::error_code ec;
  fs::create_directories(dir, ec);
  bool fresh = !fs::exists(csv, ec);
  std::ofstream out(csv, std::ios::app);
  std::map<std::string, std::string> cells;  // every metric's column, in name order; empty when unmeasured
  for (const auto& [name, v] : r.metrics) cells[name] = strf("%.6g", v);
  for (const auto& name : r.unmeasured) cells[name] = "";
  if (fresh) {
    out << "checkpoint,global_step,loss";
    for (const auto& [name, cell] : cells) out << "," << name;
    out << "\n";
  }
  out << r.checkpoint << "," << r.global_step << "," << strf("%.6g", r.loss);
  for (const auto& [name, cell] : cells) out << "," << cell;
  out << "\n";
  out.flush();
  if (!out)
    log::error(csv.string() + ": cannot write this evaluation's row (" + std::strerror(errno) +
               "); its numbers are in the lines above");
  log::info("Evaluation completed successfully!");
}

}  // namespace zoo
