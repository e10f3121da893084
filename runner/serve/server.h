// `zoo serve`: an OpenAI-compatible HTTP server over a trained causal LM,
// on cpp-httplib (Debian's libcpp-httplib-dev). Routes: POST /v1/completions,
// POST /v1/chat/completions, GET /v1/models, GET /health, GET /tokenizer_info,
// POST /tokenize, POST /detokenize (vLLM's, which lm-eval's remote tokenizer calls).
// Defines: ServeCommand, run_serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "data/text/tokenizer.h"
#include "runner/serve/api.h"

namespace zoo::serve {

struct ServeCommand {
  std::string checkpoint_path;             // a checkpoint, or a model_dir whose newest checkpoint is served
  std::optional<std::string> params_file;  // default: the params stored in the checkpoint
  std::string device = "CPU";
  text::TokenizerSpec tokenizer{"", "", "", ""};  // empty type: the tokenizer beside the checkpoint
  std::string host = "127.0.0.1";
  int port = 8000;            // 0: any free port (the line "listening on http://HOST:PORT" says which)
  std::string model_name;     // /v1/models' id; default: the checkpoint path as given
  int threads = 64;           // connections served at once
  size_t max_pending = 1024;  // requests waiting for the model before a 503
  ServeLimits limits;
};

// Serves until SIGINT or SIGTERM; throws when the address cannot be bound.
void run_serve(const ServeCommand& command);

}  // namespace zoo::serve
