// Implementation of runner/eval_tasks/task_metrics.h.
#include "runner/eval_tasks/task_metrics.h"

#include <cmath>
#include <stdexcept>

namespace zoo::eval_tasks {

namespace {

// numpy's argmax: the first of equal maxima.
size_t argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

std::map<std::string, double> task_metrics(const TaskFile& task, const std::vector<DocScores>& docs) {
  if (docs.size() != task.docs.size())
    throw std::logic_error("task_metrics: " + std::to_string(docs.size()) + " results for " +
                           std::to_string(task.docs.size()) + " docs");
  const double n = static_cast<double>(docs.size());
  std::map<std::string, double> m;
  switch (task.kind) {
    case TaskKind::multiple_choice: {
      double acc = 0, acc_norm = 0;
      bool one_context = true;  // acc_norm: only where the choices are continuations of one context
      for (size_t d = 0; d < docs.size(); ++d) {
        const TaskDoc& doc = task.docs[d];
        std::vector<double> lls, normed;
        for (size_t c = 0; c < docs[d].scores.size(); ++c) {
          lls.push_back(docs[d].scores[c].loglikelihood);
          // lm-eval divides by len(choice): characters, the delimiter not counted.
          normed.push_back(lls.back() / static_cast<double>(python_len(doc.choices[c])));
        }
        acc += argmax(lls) == static_cast<size_t>(doc.gold);
        acc_norm += argmax(normed) == static_cast<size_t>(doc.gold);
        one_context = one_context && doc.contexts.size() == 1;
      }
      m["acc"] = acc / n;
      if (one_context) m["acc_norm"] = acc_norm / n;
      break;
    }
    case TaskKind::loglikelihood: {
      double ll = 0, greedy = 0;
      for (const auto& d : docs) ll += d.scores.at(0).loglikelihood, greedy += d.scores.at(0).greedy;
      m["loglikelihood"] = ll / n;
      m["perplexity"] = std::exp(-ll / n);  // lm-eval's perplexity: exp of the mean negative loglikelihood
      m["acc"] = greedy / n;
      break;
    }
    case TaskKind::rolling: {
      double ll = 0, words = 0, bytes = 0;
      for (size_t d = 0; d < docs.size(); ++d) {
        ll += docs[d].scores.at(0).loglikelihood;
        words += static_cast<double>(task.docs[d].words);
        bytes += static_cast<double>(task.docs[d].bytes);
      }
      m["word_perplexity"] = std::exp(-ll / words);
      m["byte_perplexity"] = std::exp(-ll / bytes);
      m["bits_per_byte"] = -ll / bytes / std::log(2.0);
      break;
    }
    case TaskKind::generate_until: {
      double match = 0;
      for (size_t d = 0; d < docs.size(); ++d)
        match += python_strip(docs[d].generated) == python_strip(task.docs[d].target);
      m["exact_match"] = match / n;
      break;
    }
  }
  return m;
}

}  // namespace zoo::eval_tasks
