// The model side of `zoo serve`: a job is a batch of rows (prompts, each
// repeated n times) to score and continue. One worker thread owns the
// model; jobs in flight take turns one forward step each, so concurrent
// requests all progress. A generating job's rows run as fixed batches: rows
// whose prompts have one length share a KV cache and every decoding step.
// Jobs that only score (max_tokens <= 1, lm-eval's loglikelihood) queued
// together run their rows in shared right-padded batches, each job's rows in
// order. No LibTorch in this header.
// Defines: TokenLogprob, Step, RowAction, EngineJob, Engine, make_model_engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zoo {
struct LoadedLanguageModel;
}

namespace zoo::serve {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

// One position of one row: its token, log p(token | before) under the
// model's distribution (before temperature), and the most likely tokens there.
struct Step {
  int32_t token = 0;
  std::optional<float> logprob;   // none for a prompt's first token
  std::vector<TokenLogprob> top;  // most likely first
};

enum class RowAction { next, finish_row, cancel_job };

struct EngineJob {
  std::vector<std::vector<int32_t>> rows;  // non-empty prompts; their length + max_tokens fit the model's context
  int64_t max_tokens = 16;
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t top_logprobs = 0;          // alternatives per position in each Step
  bool prompt_logprobs = false;      // report each prompt's positions first
  std::vector<int32_t> stop_tokens;  // a row ends at one of these (not reported)
  // Called on the engine's thread, in order for each row: on_prompt (with
  // prompt_logprobs), then on_token for each new token. Keep them short: the
  // engine waits on them.
  std::function<void(size_t row, std::vector<Step> prompt)> on_prompt;
  std::function<RowAction(size_t row, const Step& step)> on_token;
  // Set by the caller (a client that went away): the job ends at its next step.
  std::atomic<bool> cancelled{false};
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues the job; the future is ready when every row has finished (or the job was cancelled), and rethrows
  // what the model threw. Throws ApiError 503 when max_pending jobs wait already.
  virtual std::future<void> submit(std::shared_ptr<EngineJob> job) = 0;
  virtual int64_t context() const = 0;     // positions the model sees
  virtual int64_t vocab_size() const = 0;  // token ids it takes
};

// The engine over a loaded causal LM (it keeps the model; the tokenizer stays the caller's).
std::unique_ptr<Engine> make_model_engine(std::shared_ptr<LoadedLanguageModel> model, size_t max_pending);

}  // namespace zoo::serve
