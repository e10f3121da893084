// Vision Transformer image classification, modelzoo's `vision_transformer`
// (ViTClassificationModel): the image cut into patches, each projected to
// hidden_size (a strided conv or patchify + linear), a [CLS] embedding in
// front, learned position embeddings, a bidirectional transformer encoder
// (models/common/transformer_encoder) with a final LayerNorm, and a linear
// classifier on the [CLS] state. Checkpoint keys are modelzoo's
// (model.vit_model.embedding_layer.linear_proj.weight, ...,
// model.classifier.classifier.ffn.0.linear_layer.weight).
// Defines: VitOptions, VitEmbeddingLayer, VitEncoder, vit_encoder_flops,
// VitModel, vit_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/decoder_lm_fields.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/common/transformer_encoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct VitOptions {
  int64_t num_classes = 2;
  std::vector<int64_t> image_size = {224, 224};  // (H, W)
  int64_t num_channels = 3;
  std::vector<int64_t> patch_size = {16, 16};
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_heads = 12;
  int64_t filter_size = 3072;
  double layer_norm_epsilon = 1e-5;
  std::string attention_module = "aiayn_attention";
  ExtraAttentionParams extra_attention_params;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double dropout_rate = 0.1;
  double embedding_dropout_rate = 0.0;
  double attention_dropout_rate = 0.1;
  std::string nonlinearity = "gelu";
  std::optional<std::string> pooler_nonlinearity;  // null: nonlinearity
  bool use_projection_bias_in_attention = true;
  bool use_ffn_bias_in_attention = true;
  bool use_ffn_bias = true;
  bool norm_first = true;
  bool use_final_layer_norm = true;
  bool use_encoder_pooler_layer = false;
  std::optional<std::string> position_embedding_type = std::string("learned");  // learned, fixed, or null: none
  bool prepend_cls_token = true;
  bool use_conv_patchified_embedding = false;
  bool init_conv_like_linear = false;  // not a ViT key: DiT's, which builds this layer
  bool use_embed_proj_bias = true;
  bool use_post_embed_layer_norm = false;
  bool use_bias_in_output = true;
  bool use_dinov2_classifier = false;
  double initializer_range = 0.02;
  std::optional<InitializerSpec> default_initializer;  // null: truncated_normal(initializer_range)
  std::optional<InitializerSpec> attention_initializer, ffn_initializer, pooler_initializer, projection_initializer,
      position_embedding_initializer, cls_token_initializer;  // null: default_initializer
  std::optional<std::vector<std::string>> freeze;             // regexes of parameter names that do not train
  bool compute_eval_metrics = true;
  bool activation_checkpointing = false;    // zoo's own
  std::optional<double> layerscale_value;   // DINOv2's LayerScale
  double stochastic_depth_drop_prob = 0.0;  // stochastic depth: see the schema
  std::string stochastic_depth_drop_prob_schedule = "linear";
  std::string stochastic_depth_mode = "batch";
  // modelzoo keys zoo accepts only at their defaults.
  bool use_masked_patches = false;
  std::optional<int64_t> image_layer_idx;
  static const config::Schema<VitOptions>& schema();

  InitializerSpec default_init() const {
    return default_initializer.value_or(truncated_normal_spec(initializer_range));
  }
  int64_t num_patches() const { return (image_size[0] / patch_size[0]) * (image_size[1] / patch_size[1]); }
  int64_t sequence_length() const { return num_patches() + (prepend_cls_token ? 1 : 0); }
};

// modelzoo's ViTEmbeddingLayer: linear_proj (Conv2d (C_out, C, ph, pw) or
// Linear over (ph, pw, C)-ordered patches), cls_embedding (hidden_size), and
// position_embeddings (patches + 1, hidden) whose last row is [CLS]'s:
// learned (an embedding table), or fixed (2D sin-cos, a frozen tensor whose
// [CLS] row is zero).
class VitEmbeddingLayerImpl : public torch::nn::Module {
 public:
  VitEmbeddingLayerImpl(const VitOptions& options, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& images);  // (B, C, H, W) -> (B, T, hidden)
  void reset_parameters();
  torch::Tensor proj_weight, proj_bias, cls_embedding;
  torch::nn::Module* linear_proj = nullptr;
  EmbeddingTable position_embeddings{nullptr};  // learned
  torch::Tensor fixed_position_embeddings;      // fixed
  LayerNorm post_embed_ln{nullptr};

 private:
  VitOptions options_;
};
TORCH_MODULE(VitEmbeddingLayer);

// modelzoo's ViTModel, the classifier's backbone and LLaVA's image tower:
// embedding_layer, then encoder.transformer_encoder (and encoder.pooler.pooler
// with use_encoder_pooler_layer).
class VitEncoderImpl : public torch::nn::Module {
 public:
  VitEncoderImpl(const VitOptions& options, const torch::TensorOptions& param_options);
  // (B, C, H, W) -> (B, T, hidden) after every layer and the final norm.
  torch::Tensor forward(const torch::Tensor& images);
  // modelzoo's extract_features: the output of layer `layer` (0-based), no final norm.
  torch::Tensor features(const torch::Tensor& images, int64_t layer);
  // The pooled [CLS] state: the pooler's Dense + pooler_nonlinearity when there is one.
  torch::Tensor pool(const torch::Tensor& hidden);
  void reset_parameters();
  const VitOptions& options() const { return options_; }

  VitEmbeddingLayer embedding_layer{nullptr};
  TransformerEncoder transformer_encoder{nullptr};  // encoder.transformer_encoder
  Dense pooler{nullptr};                            // encoder.pooler.pooler.ffn.0.linear_layer

 private:
  VitOptions options_;
};
TORCH_MODULE(VitEncoder);

// The encoder's multiply-adds times two per image, without a classifier.
double vit_encoder_flops(const VitOptions& o);

class VitModel : public Model {
 public:
  VitModel(const VitOptions& options, const torch::TensorOptions& param_options);
  // batch: input (B, C, H, W) float, labels (B) class ids. Eval reports accuracy_cls.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& images);  // (B, num_classes)
  double forward_flops_per_token() const override;    // per image
  void reset_parameters() override;

  VitEncoder vit_model{nullptr};
  Dense classifier{nullptr};  // classifier.classifier.ffn.0.linear_layer

 private:
  VitOptions options_;
};

ModelFamily vit_family();

}  // namespace zoo::models
