// What `zoo generate` is asked to do (kept free of LibTorch for the CLI).
// Defines: SamplingOptions, GenerateCommand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"

namespace zoo {

struct SamplingOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // 1: no nucleus cut
  uint64_t seed = 0;
  std::vector<int64_t> stop_tokens;  // generation ends after one of these (not printed)
};

struct GenerateCommand {
  std::string checkpoint_path;             // a checkpoint, or a model_dir whose newest checkpoint is used
  std::optional<std::string> params_file;  // default: the params stored in the checkpoint
  std::string device = "CPU";
  std::string prompt;
  SamplingOptions sampling;
  // As `zoo data create-hdf5` takes it; an empty type: the tokenizer beside
  // the checkpoint, else ByteTokenizer.
  text::TokenizerSpec tokenizer{"", "", "", ""};
  // The prompt as a user message, rendered with the tokenizer's chat
  // template (with the generation prompt, after `system` when given); the
  // reply ends at the tokenizer's eos_token.
  bool chat = false;
  std::string system;
};

}  // namespace zoo
