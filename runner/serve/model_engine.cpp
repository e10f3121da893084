// runner/serve/engine.h's engine over a causal LM: one worker thread, jobs
// split into fixed batches that take turns one forward step each. Scoring
// rows (max_tokens <= 1) of every job queued together share batches.
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runner/generate.h"
#include "runner/serve/api.h"
#include "runner/serve/engine.h"

namespace zoo::serve {
namespace {

// The most logits one forward of a scoring batch may hold (1 GiB of float32): longer batches are split.
constexpr int64_t kMaxBatchLogits = int64_t(1) << 28;
// The most rows of one scoring batch, whatever their length.
constexpr size_t kMaxScoringRows = 64;

struct JobState {
  std::shared_ptr<EngineJob> job;
  std::promise<void> done;
  int batches_left = 0;
  bool failed = false;
  // A scoring job's draws (max_tokens 1 with temperature), row by row in
  // order, whatever other jobs share its batches.
  at::Generator generator;
};

// Rows that run together: a generating job's rows with one KV cache, one
// token each per step; or scoring rows of one or more jobs, one forward.
struct Batch {
  std::vector<std::shared_ptr<JobState>> states;  // each row's job
  std::vector<size_t> rows;                       // each row's index into its job's rows
  bool scoring = false;
  bool started = false;
  models::GenerationCache cache;
  torch::Tensor next;  // (B, V): logits of each row's next token
  std::vector<bool> finished;
  std::vector<int64_t> last_token;
  int64_t generated = 0;
  at::Generator generator;  // a generating batch's draws
  // Its jobs, each once.
  std::vector<std::shared_ptr<JobState>> jobs() const {
    std::vector<std::shared_ptr<JobState>> out;
    std::set<const JobState*> seen;
    for (const auto& s : states)
      if (seen.insert(s.get()).second) out.push_back(s);
    return out;
  }
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
        throw ApiError(503, "the server has " + std::to_string(queue_.size()) + " requests waiting; try again later",
                       "", "server_busy");
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
        split(queue_);
        queue_.clear();
      }
      for (auto it = active_.begin(); it != active_.end();) {
        bool over = true;
        try {
          over = std::all_of(it->states.begin(), it->states.end(), [](const auto& s) { return s->failed; }) ||
                 (it->scoring ? score(*it) : step(*it));
        } catch (...) {  // every job of the batch gets what the model threw
          for (const auto& state : it->jobs()) {
            if (!state->failed) state->done.set_exception(std::current_exception());
            state->failed = true;
            state->job->cancelled = true;
          }
        }
        if (!over) {
          ++it;
          continue;
        }
        for (const auto& state : it->jobs())
          if (--state->batches_left == 0 && !state->failed) state->done.set_value();
        it = active_.erase(it);
      }
    }
    for (auto& batch : active_)
      for (const auto& state : batch.jobs())
        if (!state->failed && --state->batches_left == 0)
          state->done.set_exception(
              std::make_exception_ptr(ApiError(503, "the server is stopping", "", "server_stopping")));
  }

  // The scoring rows (jobs of at most one new token, lm-eval's
  // loglikelihood) of every newly queued job, in arrival order, in
  // right-padded batches of bounded logits; each generating job's rows by
  // prompt length, a batch per length.
  void split(const std::deque<std::shared_ptr<JobState>>& queued) {
    std::vector<Batch> batches;
    Batch scoring;
    int64_t longest = 0;
    auto close_scoring = [&] {
      if (!scoring.rows.empty()) batches.push_back(std::move(scoring));
      scoring = Batch();
      longest = 0;
    };
    for (const auto& state : queued) {
      const EngineJob& job = *state->job;
      if (job.max_tokens <= 1) {
        state->generator = at::detail::createCPUGenerator(job.seed);
        for (size_t r = 0; r < job.rows.size(); ++r) {
          const int64_t length = std::max<int64_t>(longest, static_cast<int64_t>(job.rows[r].size()));
          if (scoring.rows.size() >= kMaxScoringRows ||
              int64_t(scoring.rows.size() + 1) * length * vocab_ > kMaxBatchLogits)
            close_scoring();
          scoring.scoring = true;
          scoring.states.push_back(state);
          scoring.rows.push_back(r);
          longest = std::max<int64_t>(longest, static_cast<int64_t>(job.rows[r].size()));
        }
        continue;
      }
      std::map<size_t, std::vector<size_t>> by_length;
      for (size_t r = 0; r < job.rows.size(); ++r) by_length[job.rows[r].size()].push_back(r);
      for (auto& [length, rows] : by_length) {
        Batch batch;
        batch.states.assign(rows.size(), state);
        batch.rows = std::move(rows);
        batch.generator = at::detail::createCPUGenerator(job.seed);
        batches.push_back(std::move(batch));
      }
    }
    close_scoring();
    for (auto& batch : batches) {
      batch.finished.assign(batch.rows.size(), false);
      batch.last_token.assign(batch.rows.size(), 0);
      for (const auto& state : batch.jobs()) ++state->batches_left;
      active_.push_back(std::move(batch));
    }
    for (const auto& state : queued)
      if (state->batches_left == 0) state->done.set_value();  // no rows
  }

  // The first forward of `batch`'s prompts, right-padded: (B, V) logits of each row's next token.
  torch::Tensor first_forward(Batch& batch) {
    const int64_t rows = static_cast<int64_t>(batch.rows.size());
    int64_t longest = 0;
    for (int64_t i = 0; i < rows; ++i) longest = std::max<int64_t>(longest, prompt_of(batch, i).size());
    torch::Tensor ids = torch::zeros({rows, longest}, torch::kLong);
    for (int64_t i = 0; i < rows; ++i) {
      const auto& prompt = prompt_of(batch, i);
      ids[i].narrow(0, 0, prompt.size()).copy_(torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end())));
    }
    const torch::Tensor logits = model_.next_logits(ids.to(device_), batch.cache).to(torch::kFloat);  // (B, T, V)
    report_prompts(batch, ids, logits);
    std::vector<torch::Tensor> next;
    for (int64_t i = 0; i < rows; ++i) next.push_back(logits[i][prompt_of(batch, i).size() - 1]);
    return torch::stack(next);
  }

  static const std::vector<int32_t>& prompt_of(const Batch& batch, int64_t i) {
    return batch.states[i]->job->rows[batch.rows[i]];
  }

  // Row i's next token drawn as its job asks and handed to its job; false when its job has ended.
  RowAction next_token(Batch& batch, int64_t i, const torch::Tensor& logprobs, at::Generator& generator) {
    EngineJob& job = *batch.states[i]->job;
    const SamplingOptions options{1, job.temperature, job.top_k, job.top_p, job.seed, {}};
    const int64_t token = sample_next(batch.next[i], options, generator);
    batch.last_token[i] = token;
    if (std::find(job.stop_tokens.begin(), job.stop_tokens.end(), token) != job.stop_tokens.end())
      return RowAction::finish_row;
    Step s{static_cast<int32_t>(token), logprobs[i][token].item<float>(), {}};
    const int64_t k = std::min<int64_t>(job.top_logprobs, vocab_);
    if (k > 0) {
      const auto [values, ids] = logprobs[i].topk(k);
      s.top = top_of(values, ids);
    }
    const RowAction action = job.on_token(batch.rows[i], s);
    if (action == RowAction::cancel_job) job.cancelled = true;
    return action;
  }

  // A scoring batch: one forward, each row's prompt reported and, where its job asks for one, a token drawn.
  bool score(Batch& batch) {
    if (std::all_of(batch.states.begin(), batch.states.end(), [](const auto& s) { return s->job->cancelled.load(); }))
      return true;
    torch::NoGradGuard no_grad;
    batch.next = first_forward(batch);
    const torch::Tensor logprobs = torch::log_softmax(batch.next, -1).cpu();
    for (int64_t i = 0; i < static_cast<int64_t>(batch.rows.size()); ++i) {
      JobState& state = *batch.states[i];
      if (state.failed || state.job->cancelled || state.job->max_tokens == 0) continue;
      next_token(batch, i, logprobs, state.generator);
    }
    return true;
  }

  // One forward of a generating batch; true when it is over.
  bool step(Batch& batch) {
    EngineJob& job = *batch.states.front()->job;
    if (job.cancelled) return true;
    torch::NoGradGuard no_grad;
    const int64_t rows = static_cast<int64_t>(batch.rows.size());
    if (!batch.started) {
      batch.started = true;
      batch.next = first_forward(batch);
    }
    const torch::Tensor logprobs = torch::log_softmax(batch.next, -1).cpu();
    for (int64_t i = 0; i < rows; ++i) {
      if (batch.finished[i]) continue;
      const RowAction action = next_token(batch, i, logprobs, batch.generator);
      if (action == RowAction::cancel_job) return true;
      if (action == RowAction::finish_row) batch.finished[i] = true;
    }
    ++batch.generated;
    if (batch.generated >= job.max_tokens ||
        std::all_of(batch.finished.begin(), batch.finished.end(), [](bool f) { return f; }))
      return true;
    // Finished rows ride along on their last token until the whole batch is done.
    const torch::Tensor fed = torch::tensor(batch.last_token, torch::kLong).view({rows, 1}).to(device_);
    batch.next = model_.next_logits(fed, batch.cache).select(1, 0).to(torch::kFloat);
    return false;
  }

  // Each row's prompt positions to its job, where the job asks for them (with its own number of alternatives).
  void report_prompts(const Batch& batch, const torch::Tensor& ids, const torch::Tensor& logits) {
    const bool any =
        std::any_of(batch.states.begin(), batch.states.end(), [](const auto& s) { return s->job->prompt_logprobs; });
    if (!any) return;
    const torch::Tensor logprobs = torch::log_softmax(logits, -1).cpu();  // (B, T, V)
    // log p(token t | before) sits at position t - 1.
    const torch::Tensor chosen =
        logprobs.narrow(1, 0, ids.size(1) - 1).gather(2, ids.narrow(1, 1, ids.size(1) - 1).unsqueeze(2)).squeeze(2);
    const auto chosen_at = chosen.accessor<float, 2>();
    for (size_t i = 0; i < batch.rows.size(); ++i) {
      const EngineJob& job = *batch.states[i]->job;
      if (!job.prompt_logprobs || job.cancelled) continue;
      const auto& prompt = job.rows[batch.rows[i]];
      const int64_t k = std::min<int64_t>(job.top_logprobs, vocab_);
      torch::Tensor top_values, top_ids;
      if (k > 0 && prompt.size() > 1)
        std::tie(top_values, top_ids) = logprobs[i].narrow(0, 0, prompt.size() - 1).topk(k, -1);
      std::vector<Step> steps(prompt.size());
      steps[0].token = prompt[0];
      for (size_t t = 1; t < prompt.size(); ++t) {
        steps[t] = {prompt[t], chosen_at[i][t - 1], {}};
        if (k > 0) steps[t].top = top_of(top_values[t - 1], top_ids[t - 1]);
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
