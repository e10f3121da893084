// Text generation from a trained causal LM: greedy, temperature, top-k and
// top-p sampling over a KV cache, with a byte-level tokenizer.
// Defines: sample_next, generate_tokens, run_generate.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

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

// Loads the model and prints the prompt and its continuation to stdout.
void run_generate(const GenerateCommand& command);

}  // namespace zoo
