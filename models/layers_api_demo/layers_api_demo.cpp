// Implementation of models/layers_api_demo/layers_api_demo.h.
#include "models/layers_api_demo/layers_api_demo.h"

#include <cmath>
#include <utility>

#include "models/common/ffn.h"
#include "models/common/lm_loss.h"

namespace zoo::models {

const config::Schema<LayersApiDemoOptions>& LayersApiDemoOptions::schema() {
  using O = LayersApiDemoOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (layers_api_demo)",
                        "modelzoo's layers-API tutorial: a small causal transformer on the alphabet task.")
          .field("vocab_size", &O::vocab_size, "Token ids (26 letters in the tutorial).", config::positive<int64_t>())
          .field("embedding_size", &O::embedding_size, "Model width (the tutorial's d_model).",
                 config::positive<int64_t>())
          .field("num_heads", &O::num_heads, "Attention heads.", config::positive<int64_t>())
          .field("hidden_size", &O::hidden_size, "FFN hidden units (the tutorial's d_hid).",
                 config::positive<int64_t>())
          .field("num_hidden_layers", &O::num_hidden_layers, "Encoder layers.", config::positive<int64_t>())
          .field("dropout", &O::dropout, "Dropout on attention probabilities and after each sub-layer.",
                 config::in_range(0.0, 1.0, false))
          .field("nonlinearity", &O::nonlinearity, "FFN activation.", config::one_of(kActivationNames))
          .field("seq_len", &O::seq_len, "Positions of the sinusoidal table: the longest input.",
                 config::positive<int64_t>())
          .validate([](const O& o, const auto& fail) {
            const std::pair<const char*, int64_t> sizes[] = {
                {"vocab_size", o.vocab_size},   {"embedding_size", o.embedding_size},       {"num_heads", o.num_heads},
                {"hidden_size", o.hidden_size}, {"num_hidden_layers", o.num_hidden_layers}, {"seq_len", o.seq_len}};
            for (const auto& [key, value] : sizes)
              if (value <= 0) fail(key, "required (modelzoo's model.py reads it without a default)");
            if (o.embedding_size > 0 && o.num_heads > 0 && o.embedding_size % o.num_heads != 0)
              fail("num_heads", "num_heads (" + std::to_string(o.num_heads) + ") must divide embedding_size (" +
                                    std::to_string(o.embedding_size) + ")");
          });
  return s;
}

namespace {

EmbeddingOptions embedding_options(const LayersApiDemoOptions& o) {
  EmbeddingOptions e;
  e.vocab_size = o.vocab_size;
  e.hidden_size = o.embedding_size;
  e.max_position_embeddings = o.seq_len;
  e.position_embedding_type = "fixed";
  e.initializer = InitializerSpec{"uniform"};  // modelzoo's EmbeddingLayer default: U(-0.05, 0.05)
  e.initializer.a = -0.05, e.initializer.b = 0.05;
  return e;
}

// modelzoo's TransformerEncoderLayer defaults: post-norm, no biases, xavier_uniform weights.
EncoderLayerOptions layer_options(const LayersApiDemoOptions& o) {
  InitializerSpec xavier;
  xavier.name = "xavier_uniform";
  EncoderLayerOptions e;
  e.attention.hidden_size = o.embedding_size;
  e.attention.num_heads = o.num_heads;
  e.attention.use_projection_bias = e.attention.use_output_bias = false;
  e.attention.dropout = o.dropout;
  e.causal = true;  // the tutorial's square subsequent mask
  e.attention.initializer = e.attention.output_initializer = xavier;
  e.ffn.input_size = o.embedding_size;
  e.ffn.filter_size = o.hidden_size;
  e.ffn.nonlinearity = o.nonlinearity;
  e.ffn.use_bias = false;
  e.ffn.dropout = o.dropout;
  e.ffn.initializer = e.ffn.output_initializer = xavier;
  e.dropout = o.dropout;
  e.norm_first = false;
  return e;
}

}  // namespace

LayersApiDemoModel::LayersApiDemoModel(const LayersApiDemoOptions& o, const torch::TensorOptions& p) : options_(o) {
  encoder = register_module("encoder", EmbeddingLayer(embedding_options(o), p));
  transformer_encoder =
      register_module("transformer_encoder", TransformerEncoder(o.num_hidden_layers, layer_options(o), p));
  decoder = register_module("decoder", Dense(o.embedding_size, o.vocab_size, /*bias=*/true, p));
}

void LayersApiDemoModel::reset_parameters() {
  encoder->reset_parameters();
  transformer_encoder->reset_parameters();
  InitializerSpec decoder_init{"uniform"};  // the tutorial's init_weights: U(-0.1, 0.1), bias 0
  decoder_init.a = -0.1, decoder_init.b = 0.1;
  decoder->reset_parameters(decoder_init);
}

torch::Tensor LayersApiDemoModel::logits(const torch::Tensor& input_ids) {
  // The tutorial scales word and position embeddings together.
  const torch::Tensor h = encoder(input_ids) * std::sqrt(double(options_.embedding_size));
  return decoder(transformer_encoder->forward(h, {}));
}

ModelOutput LayersApiDemoModel::forward(const Features& batch, bool) {
  LossScaling scaling;
  scaling.mode = "batch_size";
  scaling.loss_weight = 1.0 / double(options_.vocab_size);
  const torch::Tensor out = logits(batch.at("input_ids").to(torch::kLong));
  return lm_loss(out, batch.at("labels"), batch.at("attention_mask"), scaling, /*with_metrics=*/false,
                 options_.vocab_size);
}

double LayersApiDemoModel::forward_flops_per_token() const {
  const double C = options_.embedding_size, F = options_.hidden_size, L = options_.num_hidden_layers;
  // Projections and FFN (2 per weight), scores and weighted values (2 T C each), the decoder.
  return 2 * L * (4 * C * C + 2 * C * F) + 4 * L * options_.seq_len * C + 2 * C * options_.vocab_size;
}

ModelFamily layers_api_demo_family() {
  ModelFamily f = make_model_family<LayersApiDemoOptions, LayersApiDemoModel>(
      "layers_api_demo", {}, "modelzoo's layers-API tutorial: a small causal transformer on the alphabet task.",
      {"input_ids", "attention_mask", "labels"});
  f.required_keys = {"embedding_size", "seq_len"};     // a legacy file with them is the tutorial's
  f.default_data_processor = "AlphabetDataProcessor";  // the tutorial's run.py picks its loader itself
  return f;
}

}  // namespace zoo::models
