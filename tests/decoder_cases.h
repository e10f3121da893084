// Tiny decoder-only models of each kind of position and attention (learned
// positions, rotary with grouped keys and a sliding window, ALiBi, GPT-J's
// parallel layers) and the params that build them, for tests that run one
// model down several paths. Defines: zoo::testing::DecoderCase,
// kDecoderCases, decoder_params.
#pragma once

#include <string>

#include "configs/schema/yaml_util.h"
#include "runner/params/params.h"

namespace zoo::testing {

struct DecoderCase {
  std::string name, model;  // model: the `model` section's lines (vocab 61, 12 positions, no dropout)
  bool biases;              // the layers have output biases
};

inline const DecoderCase kDecoderCases[] = {
    {"gpt2: learned positions, LayerNorm, GELU, biases",
     "  vocab_size: 61\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_heads: 4\n  filter_size: 64\n"
     "  max_position_embeddings: 12\n  dropout_rate: 0.0\n  nonlinearity: gelu\n",
     true},
    {"llama: rotary, RMSNorm, SwiGLU, grouped keys, a sliding window, no biases",
     "  vocab_size: 61\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_heads: 4\n  filter_size: 48\n"
     "  max_position_embeddings: 12\n  dropout_rate: 0.0\n  position_embedding_type: rotary\n  rotary_dim: 8\n"
     "  norm_type: rmsnorm\n  nonlinearity: swiglu\n  use_ffn_bias: false\n  use_projection_bias_in_attention: false\n"
     "  use_ffn_bias_in_attention: false\n  share_embedding_weights: false\n  attention_module: multiquery_attention\n"
     "  extra_attention_params: {num_kv_groups: 2}\n  attention_sliding_window_length: 5\n",
     false},
    {"bloom: ALiBi, an embedding norm",
     "  vocab_size: 61\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_heads: 4\n  filter_size: 64\n"
     "  max_position_embeddings: 12\n  dropout_rate: 0.0\n  position_embedding_type: alibi\n"
     "  embedding_layer_norm: true\n",
     true},
    {"gptj: parallel attention and FFN, partial rotary",
     "  name: gptj\n  vocab_size: 61\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_heads: 4\n  filter_size: 64\n"
     "  max_position_embeddings: 12\n  position_embedding_type: rotary\n  rotary_dim: 4\n  use_untied_layer_norm: "
     "true\n"
     "  residual_dropout_rate: 0.0\n  attention_dropout_rate: 0.0\n  embedding_dropout_rate: 0.0\n",
     false},
};

// Params with `model_lines` as the model section, synthetic data of
// `length` tokens and an SGD optimizer.
inline Params decoder_params(const std::string& model_lines, int64_t vocab = 61, int64_t length = 12,
                             int64_t batch = 3) {
  const std::string yaml =
      "train_input: {data_processor: SyntheticDataProcessor, vocab_size: " + std::to_string(vocab) +
      ", max_sequence_length: " + std::to_string(length) + ", batch_size: " + std::to_string(batch) +
      ", num_examples: 6}\n"
      "model:\n" +
      model_lines +
      "optimizer: {optimizer_type: SGD, learning_rate: 0.1}\n"
      "runconfig: {max_steps: 1}\n";
  return params_from_node(config::load_yaml_string(yaml, "decoder.yaml"), "decoder.yaml", YAML::Node());
}

}  // namespace zoo::testing
