// lm-eval's formulas over a task's scores: what each request type reports and
// how it aggregates (acc and acc_norm as its multiple-choice tasks, weighted
// perplexities as its rolling loglikelihood tasks). No LibTorch here.
// Defines: RequestScore, DocScores, task_metrics.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runner/eval_tasks/task_file.h"

namespace zoo::eval_tasks {

// log p(continuation | context) summed over its tokens, and whether every
// one of its tokens was the most likely at its position.
struct RequestScore {
  double loglikelihood = 0;
  bool greedy = false;
};

// One doc's results: a score per choice (multiple_choice), one score
// (loglikelihood, and rolling: summed over its windows), or the generated
// text cut at the first stop string (generate_until).
struct DocScores {
  std::vector<RequestScore> scores;
  std::string generated;
};

// The task's metrics by name, from the scores of each of its docs (in order).
std::map<std::string, double> task_metrics(const TaskFile& task, const std::vector<DocScores>& docs);

}  // namespace zoo::eval_tasks
