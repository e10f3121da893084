// Where a run's numbers go: modelzoo's console lines, the progress bar,
// TensorBoard event files (model_dir/train, model_dir/eval, or summary_dir)
// and eval/results.csv. The trainer calls it once per log step and once per
// evaluation; it knows nothing of models. Defines: TrainLog, EvalLog, MetricsSink.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/params/runconfig.h"
#include "runner/tensorboard/event_writer.h"

namespace zoo {

// One logged training step.
struct TrainLog {
  int64_t step = 0;
  double loss = 0;
  std::vector<double> lrs;           // per parameter group
  std::optional<double> loss_scale;  // when a loss scaler runs and summaries are on
};

// One evaluation.
struct EvalLog {
  std::string checkpoint;  // what was evaluated, for results.csv
  int64_t global_step = 0;
  double loss = 0;
  std::map<std::string, double> metrics;  // "eval/<name>"
  // Metrics no evaluated sample counted towards (MNLI's mismatched half of
  // an eval set that has none): an empty cell in results.csv, no event.
  std::set<std::string> unmeasured;
  int64_t samples = 0;
  double seconds = 0;
};

class MetricsSink {
 public:
  // `writes_files`: false on data-parallel ranks other than the main one,
  // which keep their numbers to themselves.
  MetricsSink(const RunConfig& runconfig, std::string device_name, bool writes_files = true);
  ~MetricsSink();

  // Training: start() before the first step, samples() every step, step()
  // on log steps, bar() every step (a terminal only), done() at the end.
  void start(std::string phase);
  void samples(int64_t n) { samples_ += n; }
  void step(const TrainLog& log, int64_t samples_per_step);
  void eval_batch(int64_t batch, double loss);  // eval's per-log-step console line
  void bar(int64_t done, int64_t total, double loss, int64_t tokens_per_step);
  void done();
  // log_summaries: weight and (unscaled) gradient norms, model-wise and per parameter.
  void norms(int64_t step, const std::vector<torch::Tensor>& parameters);
  // The evaluation's metrics: console, TensorBoard and a results.csv row.
  void eval(const EvalLog& log);
  int64_t samples_seen() const { return samples_; }
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  // Runs `write` on the event file of `mode` (train or eval) and flushes
  // it. A file that cannot be created or written (a full disk) is reported
  // once and left alone from then on: the run goes on without it.
  void write_events(const std::string& mode, const std::function<void(tensorboard::EventWriter&)>& write);
  struct Rates {
    double local, global;  // samples/sec since the last line, and since start()
  };
  Rates line(int64_t step, double loss);

  RunConfig rc_;
  std::string device_, phase_;
  bool writes_files_;
  std::map<std::string, std::unique_ptr<tensorboard::EventWriter>> writers_;  // opened on first use
  std::set<std::string> failed_writers_;
  Clock::time_point start_ = Clock::now(), last_ = start_, last_bar_ = start_;
  int64_t samples_ = 0, samples_at_last_ = 0;
};

}  // namespace zoo
