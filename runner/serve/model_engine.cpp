// runner/serve/engine.h's engine over a causal LM: one worker thread, jobs
// split into fixed batches that take turns one forward step each.
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "runner/generate.h"
#include "runner/serve/api.h"
#include "runner/serve/engine.h"

namespace zoo::serve {
namespace {

// The most logits one forward of a scoring batch may hold (1 GiB of float32): longer batches are split.
constexpr int64_t kMaxBatchLogits = int64_t(1) << 28;

struct JobState {
  std::shared_ptr<EngineJob> job;
  std::promise<void> done;
  int batches_left = 0;
  bool failed = false;
};

// Rows of one job that run together: one KV cache, one token each per step.
struct Batch {
  std::shared_ptr<JobState> state;
  std::vector<size_t> rows;  // indices into job->rows
  bool started = false;
  models::GenerationCache cache;
  torch::Tensor next;  // (B, V): logits of each row's next token
  std::vector<bool> finished;
  std::vector<int64_t> last_token;
  int64_t generated = 0;
  at::Generator generator;
};

std::vector<TokenLogprob> top_of(const torch::Tensor& logprobs_topk_values, const torch::Tensor& topk_ids) {
  std::vector<TokenLogprob> top(logprobs_topk_values.size(0));
  const auto values = logprobs_topk_values.accessor<float, 1>();
  const auto ids = topk_ids.accessor<int64_t, 1>();
  for (size_t i = 0; i < top.size(); ++i) top[i] = {static_cast<int32_t>(ids[i]), values[i]};
  return top;
}

class ModelEngine : public Engine {
 public:
  ModelEngine(std::shared_ptr<LoadedLanguageModel> loaded, size_t max_pending)
      : loaded_(std::move(loaded)), model_(*loaded_->model), max_pending_(max_pending) {
    model_.eval();
    device_ = model_.parameters().front().device();
    vocab_ = model_.vocab_size().value_or(loaded_->tokenizer->vocab_size());
    worker_ = std::thread([this] { work(); });
  }

  ~ModelEngine() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  std::future<void> submit(std::shared_ptr<EngineJob> job) override {
    auto state = std::make_shared<JobState>();
    state->job = std::move(job);
    std::future<void> future = state->done.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.size() >= max_pending_)
        throw ApiError(503, "the server has " + std::to_string(queue_.size()) + " requests waiting; try again later", "",
                       "server_busy");
      queue_.push_back(std::move(state));
    }
    wake_.notify_one();
    return future;
  }

  int64_t context() const override { return model_.max_positions(); }
  int64_t vocab_size() const override { return vocab_; }

 private:
  void work() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
        if (stopping_) break;
        while (!queue_.empty()) {
          split(queue_.front());
          queue_.pop_front();
        }
      }
      for (auto it = active_.begin(); it != active_.end();) {
        JobState& state = *it->state;
        bool over = true;
        try {
          over = state.failed || step(*it);
        } catch (...) {
          if (!state.failed) state.done.set_exception(std::current_exception());
          state.failed = true;
          state.job->cancelled = true;
        }
        if (!over) {
          ++it;
          continue;
        }
        if (--state.batches_left == 0 && !state.failed) state.done.set_value();
        it = active_.erase(it);
      }
    }
    for (auto& batch : active_)
      if (!batch.state->failed && --batch.state->batches_left == 0)
        batch.state->done.set_exception(std::make_exception_ptr(ApiError(503, "the server is stopping", "", "server_stopping")));
  }

  // A scoring job (at most one new token) runs its rows right-padded in batches of bounded logits; a generating
  // job runs the rows of each prompt length together.
  void split(const std::shared_ptr<JobState>& state) {
    const EngineJob& job = *state->job;
    std::vector<std::vector<size_t>> groups;
    if (job.max_tokens <= 1) {
      int64_t longest = 0;
      for (size_t r = 0; r < job.rows.size(); ++r) {
        const int64_t length = static_cast<int64_t>(job.rows[r].size());
        if (groups.empty() || int64_t(groups.back().size() + 1) * std::max(longest, length) * vocab_ > kMaxBatchLogits) {
          groups.emplace_back();
          longest = 0;
        }
        groups.back().push_back(r);
        longest = std::max(longest, length);
      }
    } else {
      std::map<size_t, std::vector<size_t>> by_length;
      for (size_t r = 0; r < job.rows.size(); ++r) by_length[job.rows[r].size()].push_back(r);
      for (auto& [length, rows] : by_length) groups.push_back(std::move(rows));
    }
    state->batches_left = static_cast<int>(groups.size());
    if (groups.empty()) state->done.set_value();
    for (auto& rows : groups) {
      Batch batch;
      batch.state = state;
      batch.finished.assign(rows.size(), false);
      batch.last_token.assign(rows.size(), 0);
      batch.rows = std::move(rows);
      batch.generator = at::detail::createCPUGenerator(job.seed);
      active_.push_back(std::move(batch));
    }
  }

  // One forward of `batch`; true when it is over.
  bool step(Batch& batch) {
    EngineJob& job = *batch.state->job;
    if (job.cancelled) return true;
    torch::NoGradGuard no_grad;
    const int64_t rows = static_cast<int64_t>(batch.rows.size());
    const int64_t k = std::min<int64_t>(job.top_logprobs, vocab_);
    if (!batch.started) {
      batch.started = true;
      int64_t longest = 0;
      for (size_t r : batch.rows) longest = std::max<int64_t>(longest, job.rows[r].size());
      torch::Tensor ids = torch::zeros({rows, longest}, torch::kLong);
      for (int64_t i = 0; i < rows; ++i) {
        const auto& prompt = job.rows[batch.rows[i]];
        ids[i].narrow(0, 0, prompt.size()).copy_(torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end())));
      }
      const torch::Tensor logits = model_.next_logits(ids.to(device_), batch.cache).to(torch::kFloat);  // (B, T, V)
      if (job.prompt_logprobs) report_prompts(batch, ids, logits, k);
      std::vector<torch::Tensor> next;
      for (int64_t i = 0; i < rows; ++i) next.push_back(logits[i][job.rows[batch.rows[i]].size() - 1]);
      batch.next = torch::stack(next);
      if (job.max_tokens == 0) return true;
    }
    const torch::Tensor logprobs = torch::log_softmax(batch.next, -1).cpu();
    torch::Tensor top_values, top_ids;
    if (k > 0) std::tie(top_values, top_ids) = logprobs.topk(k, -1);
    const SamplingOptions options{1, job.temperature, job.top_k, job.top_p, job.seed, {}};
    for (int64_t i = 0; i < rows; ++i) {
      if (batch.finished[i]) continue;
      const int64_t token = sample_next(batch.next[i], options, batch.generator);
      batch.last_token[i] = token;
      if (std::find(job.stop_tokens.begin(), job.stop_tokens.end(), token) != job.stop_tokens.end()) {
        batch.finished[i] = true;
        continue;
      }
      Step s{static_cast<int32_t>(token), logprobs[i][token].item<float>(), {}};
      if (k > 0) s.top = top_of(top_values[i], top_ids[i]);
      const RowAction action = job.on_token(batch.rows[i], s);
      if (action == RowAction::cancel_job) {
        job.cancelled = true;
        return true;
      }
      if (action == RowAction::finish_row) batch.finished[i] = true;
    }
    ++batch.generated;
    if (batch.generated >= job.max_tokens || std::all_of(batch.finished.begin(), batch.finished.end(), [](bool f) { return f; }))
      return true;
    // Finished rows ride along on their last token until the whole batch is done.
    const torch::Tensor fed = torch::tensor(batch.last_token, torch::kLong).view({rows, 1}).to(device_);
    batch.next = model_.next_logits(fed, batch.cache).select(1, 0).to(torch::kFloat);
    return false;
  }

  void report_prompts(const Batch& batch, const torch::Tensor& ids, const torch::Tensor& logits, int64_t k) {
    const EngineJob& job = *batch.state->job;
    const torch::Tensor logprobs = torch::log_softmax(logits, -1).cpu();  // (B, T, V)
    // log p(token t | before) sits at position t - 1.
    const torch::Tensor chosen =
        logprobs.narrow(1, 0, ids.size(1) - 1).gather(2, ids.narrow(1, 1, ids.size(1) - 1).unsqueeze(2)).squeeze(2);
    torch::Tensor top_values, top_ids;
    if (k > 0) std::tie(top_values, top_ids) = logprobs.topk(k, -1);
    const auto chosen_at = chosen.accessor<float, 2>();
    for (size_t i = 0; i < batch.rows.size(); ++i) {
      const auto& prompt = job.rows[batch.rows[i]];
      std::vector<Step> steps(prompt.size());
      steps[0].token = prompt[0];
      for (size_t t = 1; t < prompt.size(); ++t) {
        steps[t] = {prompt[t], chosen_at[i][t - 1], {}};
        if (k > 0) steps[t].top = top_of(top_values[i][t - 1], top_ids[i][t - 1]);
      }
      job.on_prompt(batch.rows[i], std::move(steps));
    }
  }

  std::shared_ptr<LoadedLanguageModel> loaded_;
  models::Model& model_;
  size_t max_pending_;
  torch::Device device_{torch::kCPU};
  int64_t vocab_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<JobState>> queue_;
  bool stopping_ = false;
  std::list<Batch> active_;  // the worker's alone
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Engine> make_model_engine(std::shared_ptr<LoadedLanguageModel> model, size_t max_pending) {
  return std::make_unique<ModelEngine>(std::move(model), max_pending);
}

}  // namespace zoo::serve
