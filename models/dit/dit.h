// DiT, modelzoo's class-conditional diffusion transformer (vision/dit,
// Peebles & Xie 2022) as modelzoo trains it: on VAE latents, it noises the
// latent at the batch's timesteps (DDPM's q_sample, a linear beta schedule),
// cuts it into patches (models/vit's embedding layer, fixed 2D sin-cos
// positions), runs adaLN-Zero blocks conditioned on timestep + class
// embeddings, and predicts the noise; the loss is the MSE to the true noise.
// Checkpoint keys are modelzoo's (model.patch_embedding_layer.linear_proj.weight,
// model.transformer_decoder.layers.{i}.norm1.scale_linear.1.weight, ...).
// Defines: DitVaeOptions, DitOptions, AdaLayerNorm, DitBlock, DitModel, dit_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/attention.h"
#include "models/common/ffn.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/vit/vit.h"

namespace zoo::models {

// modelzoo's `vae` section. Training reads only the latent shape and the
// scaling factor (the data are latents already); the rest describes the
// autoencoder modelzoo's sample generator decodes with, and is kept as given.
struct DitVaeOptions {
  std::string act_fn = "silu";
  int64_t in_channels = 3, out_channels = 3;
  std::vector<int64_t> block_out_channels = {64};
  std::vector<std::string> down_block_types = {"DownEncoderBlock2D"}, up_block_types = {"UpDecoderBlock2D"};
  int64_t latent_channels = 4;
  std::vector<int64_t> latent_size = {32, 32};
  int64_t layers_per_block = 1;
  int64_t norm_num_groups = 32;
  std::optional<int64_t> sample_size;
  double scaling_factor = 0.18215;
  static const config::Schema<DitVaeOptions>& schema();
};

struct DitOptions {
  // Diffusion
  int64_t num_diffusion_steps = 1000;  // legacy files: from train_input
  std::string schedule_name = "linear";
  double beta_start = 0.0001, beta_end = 0.02;
  bool var_loss = false;  // modelzoo: only picks the sampler's variance; the loss is the noise MSE either way
  // Conditioning
  int64_t num_classes = 1000;       // legacy files: from train_input
  double label_dropout_rate = 0.1;  // > 0: one more label row, the unconditional one
  int64_t frequency_embedding_size = 256;
  std::string embedding_nonlinearity = "silu";
  // Latent patches
  std::optional<std::vector<int64_t>> latent_size;  // null: vae.latent_size
  std::optional<int64_t> latent_channels;           // null: vae.latent_channels
  std::vector<int64_t> patch_size = {16, 16};
  bool use_conv_patchified_embedding = false;
  bool use_conv_transpose_unpatchify = true;
  std::optional<std::string> position_embedding_type = std::string("learned");  // fixed, learned or null
  double embedding_dropout_rate = 0.1;
  // Blocks
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_heads = 12;
  int64_t filter_size = 3072;
  std::optional<std::string> nonlinearity;          // the FFN's (modelzoo 2.3+); null: encoder_nonlinearity
  std::optional<std::string> encoder_nonlinearity;  // the FFN's in modelzoo 2.1-2.2 files; null: gelu
  double layer_norm_epsilon = 1e-5;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double dropout_rate = 0.0, attention_dropout_rate = 0.0;
  bool use_projection_bias_in_attention = true, use_ffn_bias_in_attention = true, use_ffn_bias = true;
  bool norm_first = true;
  std::string block_type = "adaln_zero";
  bool activation_checkpointing = false;  // zoo's own
  // Initialization (modelzoo's defaults)
  double initializer_range = 0.02;
  std::optional<InitializerSpec> projection_initializer, position_embedding_initializer, attention_initializer,
      ffn_initializer, timestep_embedding_initializer, label_embedding_initializer, head_initializer;
  std::optional<bool> init_conv_like_linear;  // null: use_conv_patchified_embedding
  std::optional<DitVaeOptions> vae;
  static const config::Schema<DitOptions>& schema();

  std::vector<int64_t> latent_hw() const {
    return latent_size ? *latent_size : vae.value_or(DitVaeOptions{}).latent_size;
  }
  int64_t channels() const {
    return latent_channels ? *latent_channels : vae.value_or(DitVaeOptions{}).latent_channels;
  }
  std::string ffn_nonlinearity() const { return nonlinearity.value_or(encoder_nonlinearity.value_or("gelu")); }
  int64_t num_patches() const {
    const auto hw = latent_hw();
    return (hw[0] / patch_size[0]) * (hw[1] / patch_size[1]);
  }
};

// modelzoo's AdaLayerNorm: LayerNorm without its own affine, then
// (1 + scale(c)) * x + shift(c), where scale and shift are Linear(SiLU(c))
// (scale_linear.1, shift_linear.1), zero at initialization.
class AdaLayerNormImpl : public torch::nn::Module {
 public:
  AdaLayerNormImpl(int64_t dim, double eps, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& silu_c);  // x (B, T, D), SiLU(c) (B, D)
  void reset_parameters();
  Dense scale{nullptr}, shift{nullptr};

 private:
  double eps_;
};
TORCH_MODULE(AdaLayerNorm);

// One adaLN-Zero block (modelzoo's DiTDecoderLayer): pre-norm
//   x += gate_msa(c) * attn(norm1(x, c));  x += gate_mlp(c) * ffn(norm3(x, c))
// with the gates Linear(SiLU(c)) zero at initialization, so each block starts as the identity.
class DitBlockImpl : public torch::nn::Module {
 public:
  DitBlockImpl(const DitOptions& options, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& silu_c);
  void reset_parameters();
  MultiheadAttention self_attn{nullptr};
  AdaLayerNorm norm1{nullptr}, norm3{nullptr};
  FeedForward ffn{nullptr};
  Dense gate_msa{nullptr}, gate_mlp{nullptr};

 private:
  double dropout_;
  bool norm_first_;
};
TORCH_MODULE(DitBlock);

class DitModel : public Model {
 public:
  DitModel(const DitOptions& options, const torch::TensorOptions& param_options);
  // batch: input (B, C, H, W) latents, label (B) class ids (num_classes: the
  // unconditional label), diffusion_noise (B, C, H, W), timestep (B).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // The predicted noise (B, C, H, W) of already-noised latents.
  torch::Tensor predict_noise(const torch::Tensor& noised, const torch::Tensor& label, const torch::Tensor& timestep);
  // sqrt(alpha_bar_t) * latent + sqrt(1 - alpha_bar_t) * noise.
  torch::Tensor add_noise(const torch::Tensor& latent, const torch::Tensor& noise, const torch::Tensor& timestep) const;
  double forward_flops_per_token() const override;  // per latent image
  void reset_parameters() override;

  VitEmbeddingLayer patch_embedding_layer{nullptr};
  torch::Tensor timestep_table;                        // timestep_embedding_layer.timestep_embedding (frozen)
  Dense timestep_fc1{nullptr}, timestep_fc2{nullptr};  // timestep_embedding_layer.ffn.ffn.{0,1}.linear_layer
  EmbeddingTable label_embedding_layer{nullptr};
  torch::nn::ModuleList blocks;  // transformer_decoder.layers
  AdaLayerNorm final_norm{nullptr};
  torch::Tensor head_weight, head_bias;  // noise_head.conv_transpose (D, C, ph, pw) or noise_head.linear
  torch::Tensor sqrt_alphas_cum_prod, sqrt_one_minus_alphas_cum_prod;  // gaussian_diffusion.* (frozen)

 private:
  DitOptions options_;
};

ModelFamily dit_family();

}  // namespace zoo::models
