// The training and evaluation loops over a model, optimizer, LR schedule and
// data loaders built from frozen Params, plus the state they checkpoint.
// Knows nothing model-specific. Defines: EvalResult, Trainer.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "data/loader.h"
#include "models/model.h"
#include "runner/amp/grad_scaler.h"
#include "runner/eval_tasks/downstream.h"
#include "runner/metrics.h"
#include "runner/optim/optimizer.h"
#include "runner/parallel/strategy.h"
#include "runner/params/params.h"
#include "runner/sparsity.h"

namespace zoo {

class Distributed;

struct EvalResult {
  int64_t global_step = 0;
  double loss = 0;
  std::map<std::string, double> metrics;  // "eval/<name>"
  int64_t samples = 0;
};

class Trainer {
 public:
  // Seeds (runconfig.seed), builds the model on `device` and, for training,
  // the optimizer, schedule and train loader. With `distributed` (one rank
  // of a data-parallel job, kept alive by the caller) the run spreads over
  // the ranks as runconfig.parallelism() says (runner/parallel/strategy.h)
  // and only the main rank writes files.
  Trainer(const Params& params, torch::Device device, bool for_training, Distributed* distributed = nullptr);

  // Loads the checkpoint runconfig selects: checkpoint_path, else the newest
  // readable one in model_dir when autoload_last_checkpoint (a corrupt newest
  // file is skipped with a warning). `training` applies
  // load_checkpoint_states and strictness; eval always loads strictly.
  // Returns the path loaded, if any. Data-parallel ranks then take the main
  // rank's weights, so that all start equal.
  std::optional<std::string> restore(bool training);
  void load_checkpoint(const std::string& path, bool training);

  // Steps this run will train (modelzoo's min(num_epochs*spe, num_steps,
  // max_steps - global_step)); throws std::runtime_error when none is given
  // or max_steps is already reached.
  int64_t planned_steps(std::optional<int64_t> num_steps) const;
  // (steps_per_epoch or batches in the train data) / grad_accum_steps, at least 1.
  int64_t steps_per_epoch() const;
  // Trains `steps` optimizer steps; checkpoints per checkpoint_steps.
  void train(int64_t steps);
  // Runs eval_steps batches (a full pass when unset), then the eval_tasks,
  // and prints the metrics.
  EvalResult evaluate(const std::string& checkpoint_label);

  // Writes checkpoint_<global_step>.mdl (the main rank only; others return "").
  std::string save_checkpoint();
  int64_t global_step() const { return global_step_; }
  const amp::GradScaler* grad_scaler() const { return scaler_.get(); }
  double current_lr() const { return scheduler_->lr(); }
  models::Model& model() { return *model_; }

 private:
  // Forward and backward over grad_accum_steps micro-batches; returns the
  // mean loss as a tensor on the device (not read, so nothing waits).
  torch::Tensor train_step(int64_t accum, int64_t& tokens);
  // Reads `losses` in one transfer, checks each (check_loss_values) and
  // returns the last. Loss i of n belongs to step last_step - (n - 1 - i) *
  // steps_apart (1 for training steps; 0 for eval batches, all at one step).
  double read_losses(std::vector<torch::Tensor>& losses, int64_t last_step, int64_t steps_apart);
  std::optional<std::string> restore_checkpoint(bool training);
  // every_state: a run resuming from its own checkpoint takes all of it,
  // whatever load_checkpoint_states picks from the checkpoint it started from.
  void apply_checkpoint(const c10::impl::GenericDict& dict, const std::string& path, bool training,
                        bool every_state = false);
  void check_loss(double loss, int64_t step) const;
  // Throws, naming the newest checkpoint kept, when the weights hold NaN or inf.
  void refuse_non_finite_weights() const;
  // What a checkpoint holds besides the model and the optimizer.
  c10::impl::GenericDict run_state() const;
  int ranks() const { return strategy_->ranks(); }  // data-parallel processes

  Params params_;
  torch::Device device_;
  std::shared_ptr<models::Model> model_;
  // How the run spreads over processes. Declared after model_, which it
  // holds on to, so that it is destroyed first.
  std::unique_ptr<parallel::ParallelStrategy> strategy_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::unique_ptr<data::DataLoader> train_loader_;
  std::optional<torch::ScalarType> autocast_dtype_;     // mixed precision, when enabled
  std::unique_ptr<amp::GradScaler> scaler_;             // loss scaling, when enabled
  std::unique_ptr<WeightSparsity> sparsity_;            // weight sparsity, when the params have it
  std::unique_ptr<eval_tasks::DownstreamTasks> tasks_;  // eval_tasks, when the params have them
  MetricsSink metrics_;
  int64_t global_step_ = 0;
  double memory_before_model_ = 0;  // host RSS, GiB
  std::string resumed_from_;
  std::string lora_base_;        // with lora_params: the checkpoint without adapters the run started from
  std::string lora_base_model_;  // and the Hugging Face model that base was converted from ("" when unknown)
};

}  // namespace zoo
