// Runs a downstream task file with a causal LM and its tokenizer, as
// lm-eval's Hugging Face model does: requests tokenized without special
// tokens (context and continuation split as its _encode_pair), scored in
// batches sorted by length, documents in rolling windows of the model's
// context, generation greedy until a stop string or eos. No LibTorch in this
// header. Defines: TaskRunOptions, run_task, run_tasks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runner/eval_tasks/task_file.h"
#include "runner/eval_tasks/task_metrics.h"

namespace zoo::models {
class Model;
}
namespace zoo::text {
class Tokenizer;
}

namespace zoo::eval_tasks {

struct TaskRunOptions {
  int64_t batch_size = 8;      // rows per forward when scoring
  int64_t max_gen_toks = 256;  // generate_until's default (lm-eval's), where a record gives none
  // Around each forward (full sharding gathers the layers' weights there).
  std::function<void()> before_forward, after_forward;
};

// The scores of each of `task`'s docs. The model must be a causal LM, in
// eval mode; gradients are off inside.
std::vector<DocScores> score_task(models::Model& model, const text::Tokenizer& tokenizer, const TaskFile& task,
                                  const TaskRunOptions& options);

// Every task's metrics, named "<task>/<metric>" (e.g. "hellaswag/acc_norm").
std::map<std::string, double> run_tasks(models::Model& model, const text::Tokenizer& tokenizer,
                                        const std::vector<TaskFile>& tasks, const TaskRunOptions& options);

}  // namespace zoo::eval_tasks
