// What `zoo serve` answers, between the parsed request and the engine:
// tokenizing and checking prompts against the model, stop strings, echo,
// logprobs in OpenAI's two shapes (completions' and chat's), streamed
// chunks, usage. No LibTorch and no HTTP here.
// Defines: StreamWriter, CompletionService.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/text/tokenizer.h"
#include "runner/serve/api.h"
#include "runner/serve/engine.h"

namespace zoo::serve {

// Takes one server-sent event's data (a JSON text, or "[DONE]"); false when the client has gone.
using StreamWriter = std::function<bool(const std::string&)>;

class CompletionService {
 public:
  CompletionService(Engine& engine, const text::Tokenizer& tokenizer, std::string model_name, ServeLimits limits);

  // POST /v1/completions and /v1/chat/completions in two halves, so that a
  // stream's bad request is an HTTP error before any chunk: prepare checks the
  // prompts against the model (throws ApiError), respond runs them and
  // returns the whole response, or (sampling.stream) writes every chunk and
  // then [DONE] through `write`.
  struct Run;
  std::shared_ptr<Run> prepare(const CompletionRequest& request);
  std::shared_ptr<Run> prepare(const ChatRequest& request);
  bool streams(const Run& run) const;
  nlohmann::json respond(Run& run, const StreamWriter& write = nullptr);

  nlohmann::json tokenize(const TokenizeRequest& request) const;
  nlohmann::json detokenize(const std::vector<int32_t>& tokens) const;
  nlohmann::json tokenizer_info() const;  // lm-eval's remote tokenizer reads eos_token, bos_token, chat_template
  nlohmann::json models() const;

  const ServeLimits& limits() const { return limits_; }

 private:
  std::string render_chat(const std::vector<text::ChatMessage>& messages, bool add_generation_prompt) const;
  std::string token_text(int32_t id) const;

  Engine& engine_;
  const text::Tokenizer& tokenizer_;
  std::string model_name_;
  ServeLimits limits_;
  int64_t created_;
};

}  // namespace zoo::serve
