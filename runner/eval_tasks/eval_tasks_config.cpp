// Implementation of runner/eval_tasks/eval_tasks_config.h.
#include "runner/eval_tasks/eval_tasks_config.h"

#include <filesystem>

#include "runner/eval_tasks/task_file.h"

namespace zoo {

const config::Schema<EvalTasksConfig>& EvalTasksConfig::schema() {
  using E = EvalTasksConfig;
  static const config::Schema<E> s =
      config::Schema<E>("eval_tasks",
                        "Downstream tasks (multiple choice, loglikelihood, rolling perplexity, "
                        "generate_until) scored with every evaluation of a causal LM; docs/evaluation.md.")
          .field("tasks", &E::tasks, "JSON Lines task files; each file is one task, named by its file name's stem.")
          .field("tokenizer", &E::tokenizer,
                 "The model's tokenizer: a Hugging Face tokenizer directory or file. Empty: the one beside the "
                 "evaluated checkpoint (zoo convert copies it there), or beside runconfig.checkpoint_path.")
          .field("batch_size", &E::batch_size, "Requests scored per forward.", config::positive<int64_t>())
          .field("max_gen_toks", &E::max_gen_toks,
                 "generate_until: the most tokens generated where a record sets none.", config::positive<int64_t>())
          .field("limit", &E::limit, "Records read from each task file (0: all), for quicker evaluations in training.",
                 config::non_negative<int64_t>())
          .validate([](const E& e, const auto& fail) {
            namespace fs = std::filesystem;
            if (e.tasks.items.empty()) fail("tasks", "expected at least one task file");
            for (const auto& path : e.tasks.items) {
              std::error_code ec;
              if (!fs::is_regular_file(path, ec)) fail("tasks", path + ": no such task file");
            }
            if (const std::string same = eval_tasks::same_named_tasks(e.tasks.items); !same.empty())
              fail("tasks", same);
            std::error_code ec;
            if (!e.tokenizer.empty() && !fs::exists(e.tokenizer, ec))
              fail("tokenizer", e.tokenizer + ": no such file or directory");
          });
  return s;
}

}  // namespace zoo
