// Implementation of models/common/embedding.h.
#include "models/common/embedding.h"

#include <cmath>

#include "models/kernels/embedding_kernel.h"

namespace zoo::models {

const std::vector<std::string> kPositionEmbeddingTypes = {"learned", "fixed", "rotary", "alibi"};

std::vector<double> alibi_slopes(int64_t heads) {
  auto power_of_two = [](int64_t n) {
    std::vector<double> s;
    const double start = std::pow(2.0, -8.0 / double(n));
    for (int64_t k = 1; k <= n; ++k) s.push_back(std::pow(start, double(k)));
    return s;
  };
  int64_t below = 1;
  while (below * 2 <= heads) below *= 2;
  std::vector<double> s = power_of_two(below);
  if (below == heads) return s;
  const std::vector<double> twice = power_of_two(2 * below);
  for (int64_t k = 0; static_cast<int64_t>(s.size()) < heads; k += 2) s.push_back(twice[k]);
  return s;
}

AlibiSlopesImpl::AlibiSlopesImpl(int64_t heads, bool trainable, const torch::TensorOptions& p) : trainable_(trainable) {
  slopes = register_parameter("slopes", torch::zeros({heads, 1}, p), trainable);
}

void AlibiSlopesImpl::reset_parameters(const InitializerSpec& init) {
  if (trainable_) return apply_initializer(init, slopes);
  if (slopes.device().is_meta()) return;
  torch::NoGradGuard no_grad;
  std::vector<double> s = alibi_slopes(slopes.size(0));
  slopes.copy_(torch::tensor(s, torch::kDouble).view({-1, 1}));
}

torch::Tensor sinusoidal_table(int64_t positions, int64_t dim) {
  // tensor2tensor's timing signal, as modelzoo's FixedPositionEmbeddingLayer:
  // n = dim / 2 timescales from 1 to 1e4, sin and cos of each side by side,
  // a zero column last when dim is odd.
  const int64_t n = dim / 2;
  const double increment = n > 1 ? std::log(1.0e4) / double(n - 1) : 0.0;
  torch::Tensor inverse =
      torch::exp(torch::arange(n, torch::kDouble) * -increment);  // (n), in double: exact for any dtype
  torch::Tensor time = torch::arange(positions, torch::kDouble).unsqueeze(1) * inverse;  // (P, n)
  torch::Tensor table = torch::stack({torch::sin(time), torch::cos(time)}, 2).reshape({positions, 2 * n});
  return dim % 2 ? torch::cat({table, torch::zeros({positions, 1}, table.options())}, 1) : table;
}

EmbeddingLayerImpl::EmbeddingLayerImpl(const EmbeddingOptions& o, const torch::TensorOptions& p) : options_(o) {
  if (o.vocab_size > 0)
    word_embeddings =
        register_module("word_embeddings", EmbeddingTable(o.vocab_size, o.hidden_size, p, o.pad_token_id));
  if (o.position_embedding_type == "learned") {
    const int64_t rows = o.max_position_embeddings + (o.mask_padding_positions ? o.pad_token_id + 1 : 0);
    position_embeddings = register_module("position_embeddings", EmbeddingTable(rows, o.hidden_size, p));
  } else if (o.position_embedding_type == "fixed") {
    torch::Tensor table = p.device().is_meta() ? torch::empty({o.max_position_embeddings, o.hidden_size}, p)
                                               : sinusoidal_table(o.max_position_embeddings, o.hidden_size).to(p);
    fixed_positions = register_buffer("fixed_positions", table);
  } else if (o.position_embedding_type == "alibi") {
    position_embed_helper =
        register_module("position_embed_helper", AlibiSlopes(o.num_heads, o.alibi_trainable_slopes, p));
  }
  if (o.num_segments > 0)
    segment_embeddings = register_module("segment_embeddings", EmbeddingTable(o.num_segments, o.hidden_size, p));
}

void EmbeddingLayerImpl::share_word_embeddings(const EmbeddingTable& words) {
  TORCH_CHECK(options_.vocab_size == 0, "share_word_embeddings: this layer has a word table of its own");
  word_embeddings = words;  // not registered: the owner keeps, saves and trains it
}

void EmbeddingLayerImpl::reset_parameters() {
  if (options_.vocab_size > 0) word_embeddings->reset_parameters(options_.initializer);
  if (position_embeddings)
    position_embeddings->reset_parameters(options_.position_initializer.value_or(options_.initializer));
  if (segment_embeddings)
    segment_embeddings->reset_parameters(options_.segment_initializer.value_or(options_.initializer));
  if (position_embed_helper) position_embed_helper->reset_parameters(options_.initializer);
}

torch::Tensor EmbeddingLayerImpl::forward(const torch::Tensor& input_ids, int64_t first_position,
                                          const torch::Tensor& segment_ids, const torch::Tensor& word_scale,
                                          const torch::Tensor& position_ids) {
  const int64_t T = input_ids.size(1), end = first_position + T;
  TORCH_CHECK(end <= options_.max_position_embeddings, "sequence length ", end, " exceeds max_position_embeddings ",
              options_.max_position_embeddings);
  torch::Tensor h;
  if (position_embeddings && options_.pad_token_id < 0 && !word_scale.defined() && !position_ids.defined() &&
      cpu_embedding_available(input_ids, word_embeddings->weight, position_embeddings->weight)) {
    h = cpu_embedding_sum(input_ids, word_embeddings->weight, position_embeddings->weight, first_position);
  } else {
    h = word_embeddings(input_ids);  // (B, T, C)
    if (word_scale.defined()) h = h * word_scale.unsqueeze(-1).to(h.scalar_type());
    if (position_ids.defined() && (position_embeddings || fixed_positions.defined())) {
      TORCH_CHECK(position_ids.sizes() == input_ids.sizes(), "position_ids must have input_ids' shape (B, T)");
      const torch::Tensor at = position_ids.to(torch::kLong);
      h = h + (position_embeddings ? position_embeddings(at) : fixed_positions.index({at}).to(h.scalar_type()));
    } else if (position_embeddings && options_.mask_padding_positions) {
      // Hugging Face's RoBERTa positions: each token's count of non-pad
      // tokens up to itself, pads at 0, all past pad_token_id. modelzoo
      // numbers by place, which is the same while pads only end a row.
      const torch::Tensor real = (input_ids != options_.pad_token_id).to(torch::kLong);
      const torch::Tensor counted = (real.cumsum(-1) + first_position) * real;
      h = h + position_embeddings(counted + options_.pad_token_id);
    } else if (position_embeddings) {
      torch::Tensor positions = torch::arange(first_position, end, input_ids.options().dtype(torch::kLong));
      h = h + position_embeddings(positions);  // broadcast (T, C)
    } else if (fixed_positions.defined()) {
      h = h + fixed_positions.narrow(0, first_position, T).to(h.scalar_type());
    }
  }
  if (segment_embeddings)  // without ids every token is segment 0, as Hugging Face's BERT takes it
    h = h + (segment_ids.defined() ? segment_embeddings(segment_ids.to(torch::kLong))
                                   : segment_embeddings->weight[0].to(h.scalar_type()));
  if (options_.dropout > 0) h = torch::dropout(h, options_.dropout, is_training());
  return h;
}

}  // namespace zoo::models
