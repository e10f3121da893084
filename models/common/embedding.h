// Token + position embeddings with modelzoo's names
// (embedding_layer.word_embeddings / .position_embeddings).
// Defines: kPositionEmbeddingTypes, EmbeddingOptions, EmbeddingLayer, sinusoidal_table.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/common/initializers.h"
#include "models/common/layers.h"

namespace zoo::models {

// "learned": a trained table; "fixed": sinusoidal, not trained; "rotary":
// nothing here, attention rotates queries and keys.
extern const std::vector<std::string> kPositionEmbeddingTypes;

// (positions, dim) sinusoidal table as in "Attention Is All You Need".
torch::Tensor sinusoidal_table(int64_t positions, int64_t dim);

struct EmbeddingOptions {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t max_position_embeddings = 0;
  std::string position_embedding_type = "learned";
  double dropout = 0.0;
  InitializerSpec initializer;
};

class EmbeddingLayerImpl : public torch::nn::Module {
 public:
  EmbeddingLayerImpl(const EmbeddingOptions& options, const torch::TensorOptions& param_options);
  // (B, T) -> (B, T, C); positions start at `first_position` (> 0 when decoding with a cache).
  torch::Tensor forward(const torch::Tensor& input_ids, int64_t first_position = 0);
  void reset_parameters();

  EmbeddingTable word_embeddings{nullptr};
  EmbeddingTable position_embeddings{nullptr};  // "learned" only
  torch::Tensor fixed_positions;                // "fixed" only: (P, C) buffer

 private:
  EmbeddingOptions options_;
};
TORCH_MODULE(EmbeddingLayer);

}  // namespace zoo::models
