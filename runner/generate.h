// Text generation from a trained causal LM: greedy, temperature, top-k and
// top-p sampling over a KV cache, with a byte-level tokenizer.
// Defines: sample_next, generate_tokens, LoadedLanguageModel, load_language_model, run_generate.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"
#include "models/model.h"
#include "runner/generate_options.h"

namespace zoo {

// Picks the next token from logits (V) as `options` says.
int64_t sample_next(const torch::Tensor& logits, const SamplingOptions& options, at::Generator& generator);

// Continues `prompt` (non-empty) by up to max_new_tokens tokens, calling
// on_token for each as it is chosen. Past the model's context the cache is
// rebuilt from the most recent half context.
std::vector<int64_t> generate_tokens(models::Model& model, const std::vector<int64_t>& prompt,
                                     const SamplingOptions& options,
                                     const std::function<void(int64_t)>& on_token = nullptr);

// A causal LM loaded for generation with the tokenizer its text is in.
struct LoadedLanguageModel {
  std::shared_ptr<models::Model> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::string tokenizer_type;  // as the user would name it, for errors
};

// The checkpoint (or a model_dir's newest), on `device` ("CPU" or "GPU"), with
// `tokenizer`, or when its type is empty the tokenizer beside the checkpoint
// (zoo convert copies it there), else the byte tokenizer with a warning.
LoadedLanguageModel load_language_model(const std::string& checkpoint_path,
                                        const std::optional<std::string>& params_file, const std::string& device,
                                        const text::TokenizerSpec& tokenizer);

// Loads the model and prints the prompt and its continuation to stdout.
void run_generate(const GenerateCommand& command);

}  // namespace zoo
