// The params file's `eval_tasks` section (Trainer format: the EvalTasks
// callback): downstream task files run with every evaluation. Defines:
// EvalTasksConfig.
#pragma once

#include <cstdint>
#include <string>

#include "configs/schema/schema.h"

namespace zoo {

struct EvalTasksConfig {
  config::PathList tasks;  // JSON Lines task files (docs/evaluation.md)
  std::string tokenizer;   // a Hugging Face tokenizer directory or file; "": the one beside the checkpoint
  int64_t batch_size = 8;
  int64_t max_gen_toks = 256;
  int64_t limit = 0;  // records read per task file; 0: all
  static const config::Schema<EvalTasksConfig>& schema();
};

}  // namespace zoo
