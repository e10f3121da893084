// LLaVA (Liu et al. 2023) as modelzoo's `llava` model trains it: a ViT image
// tower (modelzoo's ViTModel, e.g. CLIP ViT-L/14 at 336 px) whose hidden
// states at one layer, [CLS] dropped, pass through a projector MLP and take
// the place of the image's placeholder tokens in a decoder's input embeddings
// (modelzoo's LlamaModel: zoo's gpt2 family); the loss is the decoder's
// masked next-token cross-entropy. Checkpoint keys are modelzoo's
// (model.image_model.embedding_layer.linear_proj.weight,
// model.text_model.transformer_decoder.layers.{i}..., model.projector_image_model.ffn.{i}.linear_layer.weight).
// Defines: LlavaProjectors, LlavaOptions, LlavaModel, LlavaParts, llava_parts, llava_family.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/common/initializers.h"
#include "models/common/projector.h"
#include "models/gpt2/gpt2.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/vit/vit.h"

namespace zoo::models {

// The `projector` mapping: one per modality.
struct LlavaProjectors {
  std::optional<ProjectorOptions> image_model;  // image features -> the decoder's width
  std::optional<ProjectorOptions> text_model;   // text embeddings -> the decoder's width
  static const config::Schema<LlavaProjectors>& schema();
};

// The llava section's own keys (image_model and text_model are parsed by their families).
struct LlavaOptions {
  std::optional<std::vector<std::string>> freeze;   // regexes of module/parameter names that do not train
  int64_t image_feature_select_layer_idx = -1;      // the image layer whose output is used (negative: from the end)
  int64_t image_start_idx = 1;                      // where the image's positions start in the sequence
  std::string image_feature_select_mode = "patch";  // patch: without [CLS]; cls_patch: with it
  std::string loss_scaling = "num_tokens";
  double loss_weight = 1.0;
  std::optional<LlavaProjectors> projector;
  static const config::Schema<LlavaOptions>& schema();
};

// Batches: image_data (B, C, H, W) float, text_input_ids, loss_mask, labels
// and key_padding_mask (B, T) int (key_padding_mask 1: a position no query
// attends to, e.g. the image's when the sample has none).
class LlavaModel : public Model {
 public:
  LlavaModel(const LlavaOptions& options, const VitOptions& image, std::shared_ptr<Gpt2Model> text,
             const torch::TensorOptions& param_options);
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // The decoder's input: text embeddings with the projected image features
  // at image_start_idx .. + the number of features.
  torch::Tensor input_embeddings(const torch::Tensor& images, const torch::Tensor& text_input_ids);
  // (B, T, >= V) logits, padded as Gpt2Model's.
  torch::Tensor padded_logits(const Features& batch);
  // Per text token: the decoder's, plus the image tower (up to the used
  // layer) and the projector per image spread over the sequence.
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return text_model->vocab_size(); }
  int64_t max_positions() const override { return text_model->max_positions(); }
  // The image features' count per sample.
  int64_t num_image_features() const;

  VitEncoder image_model{nullptr};
  std::shared_ptr<Gpt2Model> text_model;
  Projector projector_image_model{nullptr}, projector_text_model{nullptr};

 private:
  LlavaOptions options_;
  VitOptions image_options_;
  int64_t feature_layer_ = 0;  // 0-based, non-negative
};

// A parsed llava section's parts (for its Hugging Face converter); throws
// std::invalid_argument for another family's spec.
struct LlavaParts {
  const LlavaOptions& options;
  const VitOptions& image;
  const ModelSpec& text;  // a gpt2-family spec
};
LlavaParts llava_parts(const ModelSpec& spec);

ModelFamily llava_family();

}  // namespace zoo::models
