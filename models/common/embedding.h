// Token + position embeddings with modelzoo's names
// (embedding_layer.word_embeddings / .position_embeddings).
// Defines: kPositionEmbeddingTypes, EmbeddingOptions, EmbeddingLayer, sinusoidal_table.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/initializers.h"
#include "models/common/layers.h"

namespace zoo::models {

// "learned": a trained table; "fixed": sinusoidal, not trained; "rotary":
// nothing here, attention rotates queries and keys; "alibi": per-head slopes
// here (position_embed_helper.slopes, as modelzoo), which attention adds to
// its scores as a linear bias on distance (Press et al., 2021).
extern const std::vector<std::string> kPositionEmbeddingTypes;

// (positions, dim) sinusoidal table as in "Attention Is All You Need", with
// modelzoo's (tensor2tensor's) frequencies: 1e4^(-k / (dim/2 - 1)) for pair k.
torch::Tensor sinusoidal_table(int64_t positions, int64_t dim);

// ALiBi's head slopes for `heads` heads: the geometric sequence 2^(-8/n)^k,
// k = 1..n, for n a power of two; otherwise those of the largest power of two
// below, then every other slope of twice that many.
std::vector<double> alibi_slopes(int64_t heads);

// Holds the (heads, 1) slopes, trained when alibi_trainable_slopes is set.
class AlibiSlopesImpl : public torch::nn::Module {
 public:
  AlibiSlopesImpl(int64_t heads, bool trainable, const torch::TensorOptions& options);
  void reset_parameters(const InitializerSpec& init);  // trained slopes start from `init`; fixed ones from the paper
  torch::Tensor slopes;

 private:
  bool trainable_;
};
TORCH_MODULE(AlibiSlopes);

struct EmbeddingOptions {
  int64_t vocab_size = 0;  // 0: no word table of its own (see share_word_embeddings)
  int64_t hidden_size = 0;
  int64_t max_position_embeddings = 0;
  std::string position_embedding_type = "learned";
  int64_t num_heads = 1;  // alibi: one slope per head
  bool alibi_trainable_slopes = false;
  double alibi_scaling_factor = 1.0;  // alibi: slopes divided by it (modelzoo's pos_scaling_factor)
  double dropout = 0.0;
  InitializerSpec initializer;
  std::optional<InitializerSpec> position_initializer;  // learned positions (unset: `initializer`)
  int64_t num_segments = 0;                             // BERT's token types: a segment_embeddings table when > 0
  std::optional<InitializerSpec> segment_initializer;   // (unset: `initializer`)
  int64_t pad_token_id = -1;  // >= 0: that word embedding row gets no gradient (torch's padding_idx)
  // learned, RoBERTa's: tokens take positions pad_token_id + 1, + 2, ... and
  // padding position pad_token_id (the table has pad_token_id + 1 more rows).
  bool mask_padding_positions = false;
};

class EmbeddingLayerImpl : public torch::nn::Module {
 public:
  EmbeddingLayerImpl(const EmbeddingOptions& options, const torch::TensorOptions& param_options);
  // (B, T) -> (B, T, C); positions start at `first_position` (> 0 when
  // decoding with a cache); segment_ids (B, T) add their segment embedding
  // (undefined: segment 0's). word_scale (B, T), when given, multiplies the
  // word embeddings before positions and segments are added (ESM-2's token dropout).
  // position_ids (B, T), when given, number each token instead (rows that
  // pack several sequences, each from 0).
  torch::Tensor forward(const torch::Tensor& input_ids, int64_t first_position = 0,
                        const torch::Tensor& segment_ids = {}, const torch::Tensor& word_scale = {},
                        const torch::Tensor& position_ids = {});
  void reset_parameters();
  // Reads `words`, another layer's table (T5's decoder reads the encoder's),
  // which stays that layer's parameter. Only for a layer built with vocab_size 0.
  void share_word_embeddings(const EmbeddingTable& words);

  EmbeddingTable word_embeddings{nullptr};
  EmbeddingTable position_embeddings{nullptr};  // "learned" only
  EmbeddingTable segment_embeddings{nullptr};   // num_segments > 0 only
  torch::Tensor fixed_positions;                // "fixed" only: (P, C) buffer
  AlibiSlopes position_embed_helper{nullptr};   // "alibi" only
  // The (heads) slopes attention adds with, or an undefined tensor.
  torch::Tensor alibi() const {
    if (!position_embed_helper) return {};
    const torch::Tensor s = position_embed_helper->slopes.view({-1});
    return options_.alibi_scaling_factor == 1.0 ? s : s / options_.alibi_scaling_factor;
  }

 private:
  EmbeddingOptions options_;
};
TORCH_MODULE(EmbeddingLayer);

}  // namespace zoo::models
