// The eval_tasks of a run, as the trainer uses them with every evaluation:
// the task files read once when the run starts (a bad record fails it then,
// not after hours of training), the tokenizer found beside the checkpoint
// evaluated, the metrics by name. `zoo eval-tasks` runs the same tasks on one
// checkpoint. No LibTorch in this header. Defines: DownstreamTasks,
// EvalTasksCommand, run_eval_tasks_command.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"
#include "runner/eval_tasks/eval_tasks_config.h"
#include "runner/eval_tasks/task_runner.h"

namespace zoo::eval_tasks {

class DownstreamTasks {
 public:
  // `start_checkpoint`: runconfig.checkpoint_path, whose tokenizer serves
  // when the evaluated checkpoint has none beside it.
  DownstreamTasks(const EvalTasksConfig& config, const std::optional<std::string>& start_checkpoint);
  ~DownstreamTasks();
  // The tokenizer directory that goes with the checkpoint just loaded ("": none).
  void checkpoint_loaded(const std::string& checkpoint, const std::string& tokenizer_dir);
  // Every task's metrics, "<task>/<metric>".
  std::map<std::string, double> run(models::Model& model, TaskRunOptions options);

 private:
  const text::Tokenizer& tokenizer(int64_t model_vocab);

  EvalTasksConfig config_;
  std::vector<TaskFile> tasks_;
  std::string start_dir_, checkpoint_, checkpoint_tokenizer_dir_;
  std::string tokenizer_from_;  // what tokenizer_ was made from
  std::unique_ptr<text::Tokenizer> tokenizer_;
};

// zoo eval-tasks: the tasks on one checkpoint (or a model_dir's newest).
struct EvalTasksCommand {
  std::string checkpoint_path;
  std::optional<std::string> params_file;  // default: the params stored in the checkpoint
  std::string device = "CPU";
  text::TokenizerSpec tokenizer{"", "", "", ""};  // empty type: the tokenizer beside the checkpoint
  std::vector<std::string> tasks;
  int64_t batch_size = 8, max_gen_toks = 256, limit = 0;
  std::string output_json;  // also write the metrics there ("": stdout only)
};

// Prints "task  metric  value" lines; throws naming the file at fault.
void run_eval_tasks_command(const EvalTasksCommand& command);

}  // namespace zoo::eval_tasks
