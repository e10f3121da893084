// T5's relative position bias (Shaw et al., 2018, as configured by Raffel et
// al., 2020): each (query, key) distance falls in one of `buckets` buckets,
// exact for short distances and logarithmic up to max_distance, and each
// bucket holds one learned score per head added to the attention logits.
// Named as modelzoo's RelativePositionEmbeddingLayer
// (position_embed_helper.relative_attention_bias.weight, (buckets, heads)).
// Defines: relative_position_bucket, RelativePositionBias.
#pragma once

#include <torch/torch.h>

#include "models/common/initializers.h"
#include "models/common/layers.h"

namespace zoo::models {

// Bucket of each relative position (key - query), int64 like the input.
// Bidirectional: half the buckets for keys after the query. Otherwise (a
// decoder) keys after the query share bucket 0, which the causal mask hides.
torch::Tensor relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional, int64_t buckets,
                                       int64_t max_distance);

class RelativePositionBiasImpl : public torch::nn::Module {
 public:
  RelativePositionBiasImpl(int64_t heads, int64_t buckets, bool bidirectional, const torch::TensorOptions& p,
                           int64_t max_distance = 128);
  // (heads, queries, keys) scores for queries at positions first_query ..
  // first_query + queries - 1 against keys 0 .. keys - 1.
  torch::Tensor forward(int64_t queries, int64_t keys, int64_t first_query = 0);
  void reset_parameters(const InitializerSpec& init) { relative_attention_bias->reset_parameters(init); }

  EmbeddingTable relative_attention_bias{nullptr};

 private:
  int64_t buckets_, max_distance_;
  bool bidirectional_;
};
TORCH_MODULE(RelativePositionBias);

}  // namespace zoo::models
