// modelzoo's `multimodal_simple` (its MMSimpleModel): one or more image
// towers (ViTModel, each with an optional projection) read every image of a
// sample; their features, [CLS] dropped in patch mode, are joined along the
// patches, pass an optional global projection, and are scattered into the
// decoder's input embeddings at the positions the data gives
// (image_data_loc; an unused image slot's point past the sequence and are
// dropped). The decoder (modelzoo's LlamaModel: zoo's gpt2 family) honours
// key_padding_mask; the loss is its masked next-token cross-entropy.
// Checkpoint keys are modelzoo's: model.image_model.image_model_list.{i}.0.*
// (the tower's ViTModel keys), model.image_model.image_model_list.{i}.1.ffn.{j}.linear_layer.*
// (its projection), model.image_model.projection.ffn.{j}.linear_layer.* and model.text_model.*.
// Defines: MultimodalSimpleOptions, ImageModelListOptions, ImageTowerSpec, features_per_image,
// MultimodalImageEncodersImpl, MultimodalSimpleModel, MultimodalSimpleParts, multimodal_simple_parts,
// multimodal_simple_family.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/common/projector.h"
#include "models/gpt2/gpt2.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/vit/vit.h"

namespace zoo::models {

// The model section's own keys (image_model_list and text_model are parsed apart).
struct MultimodalSimpleOptions {
  std::optional<std::vector<std::string>> freeze;  // regexes of module/parameter names that do not train
  std::string loss_scaling = "num_tokens";
  double loss_weight = 0.0;                             // modelzoo's default (used with loss_scaling batch_size)
  std::optional<std::vector<std::string>> output_list;  // modelzoo's extra outputs: no effect on training
  static const config::Schema<MultimodalSimpleOptions>& schema();
};

// image_model_list's keys besides its towers.
struct ImageModelListOptions {
  std::string image_feature_select_mode = "patch";  // patch: without [CLS]; cls_patch: with it
  std::optional<ProjectorOptions> global_image_projection;
  static const config::Schema<ImageModelListOptions>& schema();
};

// One entry of image_models: a ViTModel and an optional projection.
struct ImageTowerSpec {
  VitOptions encoder;
  // image_layer_idx, 0-based: that layer's output, no final norm; unset: the whole encoder.
  std::optional<int64_t> layer;
  std::optional<ProjectorOptions> projection;
  // The tower's features per image and their width.
  int64_t features(bool patch_mode) const;
  int64_t width() const { return projection ? projection->output_unit() : encoder.hidden_size; }
};

// Every tower's features per image together (what image_data_loc places).
int64_t features_per_image(const std::vector<ImageTowerSpec>& towers, bool patch_mode);

// modelzoo's MultimodalSimpleImageEncoders: image_model_list (per tower a
// list of [ViTModel, projection or identity]) and the global projection.
class MultimodalImageEncodersImpl : public torch::nn::Module {
 public:
  MultimodalImageEncodersImpl(const std::vector<ImageTowerSpec>& towers, const ImageModelListOptions& options,
                              const torch::TensorOptions& p);
  // (B, I, C, H, W) images -> (B, I * features per image, width).
  torch::Tensor forward(const torch::Tensor& images);
  void reset_parameters();
  int64_t features_per_image() const;
  double flops_per_image() const;

  torch::nn::ModuleList image_model_list{nullptr};
  Projector projection{nullptr};

 private:
  std::vector<ImageTowerSpec> towers_;
  ImageModelListOptions options_;
  std::vector<VitEncoder> encoders_;
  std::vector<Projector> projections_;  // null where a tower has none
};
TORCH_MODULE(MultimodalImageEncoders);

// Batches: image_data (B, I, C, H, W) float; image_data_loc (B, I, P) int,
// the sequence position of each image feature (the sequence length: none);
// text_input_ids, loss_mask, labels and key_padding_mask (B, T) int.
class MultimodalSimpleModel : public Model {
 public:
  MultimodalSimpleModel(const MultimodalSimpleOptions& options, const std::vector<ImageTowerSpec>& towers,
                        const ImageModelListOptions& list, std::shared_ptr<Gpt2Model> text,
                        const torch::TensorOptions& param_options);
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // The decoder's input: text embeddings with the image features scattered in.
  torch::Tensor input_embeddings(const torch::Tensor& images, const torch::Tensor& locations,
                                 const torch::Tensor& text_input_ids);
  torch::Tensor padded_logits(const Features& batch);  // (B, T, >= V), padded as Gpt2Model's
  // Per text token: the decoder's, plus one image per sequence through every tower and projection.
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return text_model->vocab_size(); }
  int64_t max_positions() const override { return text_model->max_positions(); }

  MultimodalImageEncoders image_model{nullptr};
  std::shared_ptr<Gpt2Model> text_model;

 private:
  MultimodalSimpleOptions options_;
};

// A parsed multimodal_simple section's parts (for its Hugging Face
// converter); throws std::invalid_argument for another family's spec.
struct MultimodalSimpleParts {
  const MultimodalSimpleOptions& options;
  const ImageModelListOptions& list;
  const std::vector<ImageTowerSpec>& towers;
  const ModelSpec& text;  // a gpt2-family spec
};
MultimodalSimpleParts multimodal_simple_parts(const ModelSpec& spec);

ModelFamily multimodal_simple_family();

}  // namespace zoo::models
