// The OpenAI-style requests `zoo serve` answers, parsed and checked before
// any model work: a body is bounded (size, nesting), every known field has
// its type checked, and an error names the field (OpenAI's `param`).
// Unknown fields are ignored, as OpenAI-compatible servers do (clients send
// their own extensions). No LibTorch, no HTTP here.
// Defines: ApiError, ServeLimits, Prompt, Sampling, CompletionRequest,
// ChatRequest, TokenizeRequest, parse_body, parse_completion_request,
// parse_chat_request, parse_tokenize_request, parse_detokenize_request, error_json, dump_json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/text/chat_template.h"

namespace zoo::serve {

// A request the server refuses: HTTP `status`, the field at fault in `param`.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)) {}
  int status;
  std::string param;
  std::string type;
};

struct ServeLimits {
  size_t max_body_bytes = 8 << 20;  // 8 MiB: a batch of long token-id prompts
  int max_json_depth = 32;
  int64_t max_tokens = 4096;  // per choice
  int64_t max_n = 16;
  int64_t max_prompts = 256;  // prompts in one completions request
  int64_t max_logprobs = 20;  // alternatives per position
  int64_t max_stop = 8;       // stop strings
  int64_t max_stop_bytes = 256;
};

// One prompt: a text, or token ids as given (lm-eval sends ids).
struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
  bool tokenized = false;
};

// How each choice is sampled and reported, shared by completions and chat.
struct Sampling {
  std::optional<int64_t> max_tokens;  // completions: 16 when absent; chat: the rest of the context
  double temperature = 1.0;           // 0: greedy
  double top_p = 1.0;
  int64_t top_k = 0;  // vLLM's extension; 0: no limit
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool ignore_eos = false;          // vLLM's extension
  std::optional<int64_t> logprobs;  // alternatives reported per position; absent: no logprobs
};

struct CompletionRequest {
  std::vector<Prompt> prompts;
  Sampling sampling;
  bool echo = false;  // the prompt in front of each choice's text (and its logprobs)
};

struct ChatRequest {
  std::vector<text::ChatMessage> messages;
  Sampling sampling;
  bool add_generation_prompt = true;
};

// POST /tokenize: a text (vLLM's `prompt`) or chat messages rendered first.
struct TokenizeRequest {
  std::string prompt;
  std::optional<std::vector<text::ChatMessage>> messages;
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
};

// The body as JSON: a 413 past max_body_bytes, a 400 for bad JSON or nesting deeper than max_json_depth, or
// anything but an object at the top.
nlohmann::json parse_body(const std::string& body, const ServeLimits& limits);

CompletionRequest parse_completion_request(const nlohmann::json& body, const ServeLimits& limits);
ChatRequest parse_chat_request(const nlohmann::json& body, const ServeLimits& limits);
TokenizeRequest parse_tokenize_request(const nlohmann::json& body);
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body);

// OpenAI's error body: {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_json(const ApiError& error);

// Text for the wire: a token that ends inside a UTF-8 character does not make the reply fail.
std::string dump_json(const nlohmann::json& value);

}  // namespace zoo::serve
