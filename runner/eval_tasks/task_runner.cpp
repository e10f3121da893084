// Implementation of runner/eval_tasks/task_runner.h.
#include "runner/eval_tasks/task_runner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>
#include <stdexcept>

#include "data/text/tokenizer.h"
#include "models/model.h"
#include "runner/log.h"

namespace zoo::eval_tasks {

namespace {

// The most logits one scoring forward may hold (1 GiB of float32): bigger batches are split.
constexpr int64_t kMaxBatchLogits = int64_t(1) << 28;

using Tokens = std::vector<int64_t>;

// A request in tokens: the model reads `input`, and targets[j] is predicted
// at position input.size() - targets.size() + j. Its score adds to
// scores[slot] of doc `doc`.
struct TokenRequest {
  Tokens input, targets;
  size_t doc = 0, slot = 0;
};

class TaskScorer {
 public:
  TaskScorer(models::Model& model, const text::Tokenizer& tokenizer, const TaskFile& task,
             const TaskRunOptions& options)
      : model_(model), tokenizer_(tokenizer), task_(task), options_(options), context_(model.max_positions()) {
    if (!model.is_causal_lm()) throw std::runtime_error(task.path + ": downstream tasks need a causal language model");
    const auto& special = tokenizer.special_tokens();
    // lm-eval's prefix_token_id: what an empty context and a document's first window are conditioned on.
    if (special.bos) prefix_ = *special.bos;
    else if (special.eos) prefix_ = *special.eos;
    vocab_ = model.vocab_size().value_or(tokenizer.vocab_size());
  }

  std::vector<DocScores> run() {
    std::vector<DocScores> out(task_.docs.size());
    if (task_.kind == TaskKind::generate_until) {
      for (size_t d = 0; d < task_.docs.size(); ++d) {
        out[d].generated = generate(task_.docs[d]);
        progress(d + 1, task_.docs.size(), "generated for");
      }
      return out;
    }
    std::vector<TokenRequest> requests;
    for (size_t d = 0; d < task_.docs.size(); ++d) add_requests(d, requests, out[d]);
    score(requests, out);
    return out;
  }

 private:
  std::string where(const TaskDoc& doc) const { return task_.path + ":" + std::to_string(doc.line) + ": "; }

  Tokens encode(const std::string& text, const TaskDoc& doc) const {
    const std::vector<int32_t> ids = tokenizer_.encode(text);
    for (int32_t id : ids)
      if (id >= vocab_)
        throw std::runtime_error(where(doc) + "token id " + std::to_string(id) +
                                 " is outside the model's vocabulary (" + std::to_string(vocab_) +
                                 "); is this the model's tokenizer?");
    return Tokens(ids.begin(), ids.end());
  }

  int64_t prefix(const TaskDoc& doc) const {
    if (!prefix_)
      throw std::runtime_error(where(doc) +
                               "an empty context needs the tokenizer's bos or eos token to condition "
                               "on, and this tokenizer has neither; give the record a context");
    return *prefix_;
  }

  // lm-eval's _encode_pair: the context's trailing whitespace moves to the
  // continuation, and the continuation's tokens are those of the whole text
  // past the context's own.
  TokenRequest pair(std::string context, std::string continuation, const TaskDoc& doc) const {
    Tokens ctx, cont;
    if (context.empty()) {
      ctx = {prefix(doc)};
      cont = encode(continuation, doc);
    } else {
      const std::string kept = python_rstrip(context);
      continuation = context.substr(kept.size()) + continuation;
      context = kept;
      const Tokens whole = encode(context + continuation, doc);
      ctx = encode(context, doc);
      cont.assign(whole.begin() + std::min(ctx.size(), whole.size()), whole.end());
    }
    Tokens all = ctx;
    all.insert(all.end(), cont.begin(), cont.end());
    // The last context + 1 tokens, less the last: what the model reads.
    if (static_cast<int64_t>(all.size()) > context_ + 1) all.erase(all.begin(), all.end() - (context_ + 1));
    all.pop_back();
    if (cont.size() > all.size())
      throw std::runtime_error(where(doc) + "a continuation of " + std::to_string(cont.size()) +
                               " tokens does not fit the model's " + std::to_string(context_) + " positions");
    return {all, cont};
  }

  // lm-eval's rolling windows (get_rolling_token_windows with context_len 1,
  // made disjoint): every token predicted once, each window reading up to a
  // full context of the tokens before it.
  std::vector<TokenRequest> windows(const TaskDoc& doc) {
    const Tokens tokens = encode(doc.text, doc);
    std::vector<TokenRequest> out;
    if (tokens.empty()) return out;
    const int64_t n = static_cast<int64_t>(tokens.size()), first = std::min(context_, n);
    TokenRequest w;
    if (prefix_) {
      w.input = {*prefix_};
      w.input.insert(w.input.end(), tokens.begin(), tokens.begin() + first - 1);
      w.targets.assign(tokens.begin(), tokens.begin() + first);
    } else {  // nothing to condition the first token on (a byte tokenizer): it goes unscored
      w.input.assign(tokens.begin(), tokens.begin() + first - 1);
      w.targets.assign(tokens.begin() + 1, tokens.begin() + first);
      if (!warned_unscored_first_)
        log::warn(task_.name +
                  ": the tokenizer has no bos or eos token to condition a document's first token on "
                  "(lm-eval's prefix); each document's first token is left unscored");
      warned_unscored_first_ = true;
    }
    out.push_back(std::move(w));
    for (int64_t predicted = first; predicted < n;) {
      const int64_t length = std::min(n - predicted, context_), end = predicted + length;
      TokenRequest r;
      r.input.assign(tokens.begin() + (end - context_ - 1), tokens.begin() + (end - 1));
      r.targets.assign(tokens.begin() + (end - length), tokens.begin() + end);
      out.push_back(std::move(r));
      predicted = end;
    }
    return out;
  }

  void add_requests(size_t d, std::vector<TokenRequest>& requests, DocScores& scores) {
    const TaskDoc& doc = task_.docs[d];
    std::vector<TokenRequest> mine;
    switch (task_.kind) {
      case TaskKind::multiple_choice:
        if (doc.contexts.size() == 1)
          for (const auto& c : doc.continuations) mine.push_back(pair(doc.contexts[0], c, doc));
        else
          for (const auto& ctx : doc.contexts) mine.push_back(pair(ctx, doc.continuations[0], doc));
        for (size_t s = 0; s < mine.size(); ++s) mine[s].slot = s;
        scores.scores.assign(mine.size(), {0, true});
        break;
      case TaskKind::loglikelihood:
        mine.push_back(pair(doc.contexts[0], doc.continuations[0], doc));
        scores.scores.assign(1, {0, true});
        break;
      case TaskKind::rolling:
        mine = windows(doc);  // every window adds to the one score
        scores.scores.assign(1, {0, true});
        break;
      case TaskKind::generate_until: break;
    }
    for (auto& r : mine) {
      r.doc = d;
      if (!r.targets.empty()) requests.push_back(std::move(r));
    }
  }

  torch::Tensor forward(const torch::Tensor& ids, models::GenerationCache& cache) {
    if (options_.before_forward) options_.before_forward();
    torch::Tensor logits = model_.next_logits(ids, cache);
    if (options_.after_forward) options_.after_forward();
    return logits;
  }

  // Longest first (as lm-eval, so a batch's rows are alike in length and an
  // out-of-memory shows at once), in right-padded batches.
  void score(const std::vector<TokenRequest>& requests, std::vector<DocScores>& out) {
    torch::NoGradGuard no_grad;
    const torch::Device device = model_.parameters().front().device();
    std::vector<size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return requests[a].input.size() > requests[b].input.size(); });
    const int64_t vocab = std::max<int64_t>(vocab_, 1);
    for (size_t begin = 0; begin < order.size();) {
      const int64_t longest = static_cast<int64_t>(requests[order[begin]].input.size());
      const int64_t fit = std::max<int64_t>(1, kMaxBatchLogits / (longest * vocab));
      const size_t end = std::min(order.size(), begin + static_cast<size_t>(std::min(options_.batch_size, fit)));
      const int64_t rows = static_cast<int64_t>(end - begin);
      torch::Tensor ids = torch::zeros({rows, longest}, torch::kLong);
      for (int64_t i = 0; i < rows; ++i) {
        const Tokens& input = requests[order[begin + i]].input;
        ids[i].narrow(0, 0, static_cast<int64_t>(input.size())).copy_(torch::tensor(input, torch::kLong));
      }
      models::GenerationCache cache;
      const torch::Tensor logits = forward(ids.to(device), cache);  // (B, T, V)
      for (int64_t i = 0; i < rows; ++i) {
        const TokenRequest& r = requests[order[begin + i]];
        const int64_t n = static_cast<int64_t>(r.targets.size()), start = static_cast<int64_t>(r.input.size()) - n;
        const torch::Tensor logprobs = logits[i].narrow(0, start, n).to(torch::kDouble).log_softmax(-1).cpu();
        const torch::Tensor targets = torch::tensor(r.targets, torch::kLong);
        RequestScore& s = out[r.doc].scores[r.slot];
        s.loglikelihood += logprobs.gather(1, targets.unsqueeze(1)).sum().item<double>();
        s.greedy = s.greedy && logprobs.argmax(-1).eq(targets).all().item<bool>();
      }
      begin = end;
      progress(begin, order.size(), "scored");
    }
  }

  // Greedy continuation of the doc's context until a stop string, eos or
  // its token budget; the text before the first stop string.
  std::string generate(const TaskDoc& doc) {
    torch::NoGradGuard no_grad;
    const torch::Device device = model_.parameters().front().device();
    int64_t budget = std::min(doc.max_gen_toks > 0 ? doc.max_gen_toks : options_.max_gen_toks, context_ - 1);
    Tokens ids = encode(doc.contexts[0], doc);
    if (ids.empty()) ids = {prefix(doc)};
    // As lm-eval: the context keeps its last (positions - max_gen_toks) tokens.
    const int64_t room = context_ - budget;
    if (static_cast<int64_t>(ids.size()) > room) ids.erase(ids.begin(), ids.end() - room);
    const text::SpecialTokens& special = tokenizer_.special_tokens();
    const std::optional<int32_t> eos = special.eos;
    // lm-eval reads the text as transformers' decode(skip_special_tokens=True) gives it.
    std::set<int32_t> skipped;
    for (const auto& id : {special.bos, special.eos, special.pad, tokenizer_.token_to_id(special.unk_token)})
      if (id) skipped.insert(*id);
    models::GenerationCache cache;
    torch::Tensor next = forward(torch::tensor(ids, torch::kLong).view({1, -1}).to(device), cache)[0][-1];
    std::vector<int32_t> generated;
    std::string text;
    auto stopped = [&] {
      return std::any_of(doc.until.begin(), doc.until.end(),
                         [&](const std::string& u) { return text.find(u) != std::string::npos; });
    };
    for (int64_t step = 0; step < budget; ++step) {
      const int64_t token = next.argmax().item<int64_t>();
      if (eos && token == *eos) break;
      if (!skipped.count(static_cast<int32_t>(token))) generated.push_back(static_cast<int32_t>(token));
      text = text::decode_generated(tokenizer_, generated);
      if (stopped() || step + 1 == budget) break;
      next = forward(torch::tensor(Tokens{token}, torch::kLong).view({1, 1}).to(device), cache)[0][-1];
    }
    for (const auto& u : doc.until) text = text.substr(0, text.find(u));  // lm-eval: s.split(term)[0] for each term
    return text;
  }

  // A line every half minute on long tasks.
  void progress(size_t done, size_t total, const char* verb) {
    const auto now = std::chrono::steady_clock::now();
    if (done == total || now - last_progress_ < std::chrono::seconds(30)) return;
    last_progress_ = now;
    log::info(strf("%s: %s %zu of %zu", task_.name.c_str(), verb, done, total));
  }

  models::Model& model_;
  const text::Tokenizer& tokenizer_;
  const TaskFile& task_;
  const TaskRunOptions& options_;
  int64_t context_;
  int64_t vocab_ = 0;
  std::optional<int64_t> prefix_;
  bool warned_unscored_first_ = false;
  std::chrono::steady_clock::time_point last_progress_ = std::chrono::steady_clock::now();
};

}  // namespace

std::vector<DocScores> score_task(models::Model& model, const text::Tokenizer& tokenizer, const TaskFile& task,
                                  const TaskRunOptions& options) {
  return TaskScorer(model, tokenizer, task, options).run();
}

std::map<std::string, double> run_tasks(models::Model& model, const text::Tokenizer& tokenizer,
                                        const std::vector<TaskFile>& tasks, const TaskRunOptions& options) {
  std::map<std::string, double> all;
  for (const TaskFile& task : tasks) {
    const auto start = std::chrono::steady_clock::now();
    const std::map<std::string, double> metrics = task_metrics(task, score_task(model, tokenizer, task, options));
    std::string line;
    for (const auto& [name, value] : metrics) {
      all[task.name + "/" + name] = value;
      line += strf(" %s=%.6g", name.c_str(), value);
    }
    log::info(strf("Task %s (%s, %zu docs):%s in %.1f s", task.name.c_str(), kind_name(task.kind), task.docs.size(),
                   line.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  }
  return all;
}

}  // namespace zoo::eval_tasks
