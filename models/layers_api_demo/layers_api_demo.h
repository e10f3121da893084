// modelzoo's layers-API tutorial model (layers_api_demo, releases 2.1-2.3):
// PyTorch's transformer tutorial rebuilt from modelzoo's layers. Token
// embeddings plus fixed sinusoidal positions, both times sqrt(embedding_size);
// post-norm encoder layers under a causal mask, without biases (the layers'
// defaults); a linear decoder to the vocabulary; GPTLMHeadModelLoss scaled by
// batch size with weight 1 / vocab_size. Its keys are the tutorial's:
// embedding_size is the model width, hidden_size the FFN's.
// Defines: LayersApiDemoOptions, LayersApiDemoModel, layers_api_demo_family.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/common/embedding.h"
#include "models/common/layers.h"
#include "models/common/transformer_encoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct LayersApiDemoOptions {
  int64_t vocab_size = 0;
  int64_t embedding_size = 0;  // d_model
  int64_t num_heads = 0;
  int64_t hidden_size = 0;  // the FFN's hidden units (the tutorial's d_hid)
  int64_t num_hidden_layers = 0;
  double dropout = 0.0;
  std::string nonlinearity = "gelu";
  int64_t seq_len = 0;  // positions of the sinusoidal table
  static const config::Schema<LayersApiDemoOptions>& schema();
};

class LayersApiDemoModel : public Model {
 public:
  LayersApiDemoModel(const LayersApiDemoOptions& options, const torch::TensorOptions& param_options);
  // batch: input_ids, attention_mask (the loss mask), labels (B, T). Loss only, as modelzoo's.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input_ids);  // (B, T) -> (B, T, vocab_size)
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.vocab_size; }

  // The tutorial's TransformerModel's names.
  EmbeddingLayer encoder{nullptr};
  TransformerEncoder transformer_encoder{nullptr};
  Dense decoder{nullptr};

 private:
  LayersApiDemoOptions options_;
};

ModelFamily layers_api_demo_family();

}  // namespace zoo::models
