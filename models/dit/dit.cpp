// Implementation of models/dit/dit.h.
#include "models/dit/dit.h"

#include <cmath>

#include "models/common/recompute.h"
#include "models/hf/block_keys.h"

namespace zoo::models {

const config::Schema<DitVaeOptions>& DitVaeOptions::schema() {
  using O = DitVaeOptions;
  static const config::Schema<O> s = [] {
    using config::positive;
    config::Schema<O> sc("model.vae (dit)",
                         "The VAE the latents come from. zoo trains on latents: it reads latent_size, latent_channels "
                         "and scaling_factor; the rest is kept for modelzoo's sample generator.");
    sc.field("act_fn", &O::act_fn, "VAE activation.")
        .field("in_channels", &O::in_channels, "Image channels into the VAE.", positive<int64_t>())
        .field("out_channels", &O::out_channels, "Image channels out of the VAE.", positive<int64_t>())
        .field("block_out_channels", &O::block_out_channels, "Channels of each VAE block.")
        .field("down_block_types", &O::down_block_types, "Encoder block types.")
        .field("up_block_types", &O::up_block_types, "Decoder block types.")
        .field("latent_channels", &O::latent_channels, "Channels of a latent.", positive<int64_t>())
        .field("latent_size", &O::latent_size, "[H, W] of a latent.")
        .field("layers_per_block", &O::layers_per_block, "Layers in each VAE block.", positive<int64_t>())
        .field("norm_num_groups", &O::norm_num_groups, "Group-norm groups of the VAE.", positive<int64_t>())
        .field("sample_size", &O::sample_size, "Image size the VAE tiles at (null: none).")
        .field("scaling_factor", &O::scaling_factor,
               "Latents are multiplied by it before the diffusion model sees them (unit variance).", positive<double>())
        .validate([](const O& o, const auto& fail) {
          if (o.latent_size.size() != 2 || o.latent_size[0] <= 0 || o.latent_size[1] <= 0)
            fail("latent_size", "expected [H, W]");
        });
    return sc;
  }();
  return s;
}

const config::Schema<DitOptions>& DitOptions::schema() {
  using O = DitOptions;
  static const config::Schema<O> s = [] {
    using config::positive;
    auto rate = config::in_range(0.0, 1.0, /*hi_open=*/true);
    auto act = config::one_of(kActivationNames);
    config::Schema<O> sc("model (dit)", "Class-conditional diffusion transformer on VAE latents, as modelzoo's dit.");
    sc.field("num_diffusion_steps", &O::num_diffusion_steps,
             "Timesteps of the forward (noising) process (legacy files: train_input's).", positive<int64_t>())
        .field("schedule_name", &O::schedule_name, "Beta schedule: linear (Ho et al., scaled to the step count).",
               config::one_of({"linear"}))
        .field("beta_start", &O::beta_start, "First beta of the schedule (at 1000 steps).", positive<double>())
        .field("beta_end", &O::beta_end, "Last beta of the schedule (at 1000 steps).", positive<double>())
        .field("var_loss", &O::var_loss,
               "modelzoo: the sampler's variance type only; the loss is the noise MSE either way, as here.")
        .field("num_classes", &O::num_classes, "Image classes (legacy files: train_input's).", positive<int64_t>())
        .field("label_dropout_rate", &O::label_dropout_rate,
               "Share of labels the data replace by the unconditional label (classifier-free guidance); "
               "> 0 adds its embedding row.",
               rate)
        .field("frequency_embedding_size", &O::frequency_embedding_size, "Width of the sinusoidal timestep features.",
               positive<int64_t>())
        .field("embedding_nonlinearity", &O::embedding_nonlinearity, "Activation inside the timestep MLP.", act)
        .field("latent_size", &O::latent_size, "[H, W] of a latent (null: vae.latent_size).")
        .field("latent_channels", &O::latent_channels, "Channels of a latent (null: vae.latent_channels).",
               config::if_set(positive<int64_t>()))
        .field("patch_size", &O::patch_size, "Patch [H, W]; must divide the latent size.")
        .field("use_conv_patchified_embedding", &O::use_conv_patchified_embedding,
               "Project patches with a strided conv (else patchify + linear).")
        .field("use_conv_transpose_unpatchify", &O::use_conv_transpose_unpatchify,
               "Noise head as one transposed conv (else linear + unpatchify).")
        .field("position_embedding_type", &O::position_embedding_type,
               "fixed (2D sin-cos, not trained), learned, or null for none.",
               config::if_set(config::one_of({"fixed", "learned"})))
        .field("embedding_dropout_rate", &O::embedding_dropout_rate, "Dropout on the patch embeddings.", rate)
        .field("hidden_size", &O::hidden_size, "Model width.", positive<int64_t>())
        .field("num_hidden_layers", &O::num_hidden_layers, "DiT blocks.", positive<int64_t>())
        .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", positive<int64_t>())
        .field("filter_size", &O::filter_size, "FFN hidden units.", positive<int64_t>())
        .field("nonlinearity", &O::nonlinearity, "FFN activation (modelzoo 2.3+; null: encoder_nonlinearity).",
               config::if_set(act))
        .field("encoder_nonlinearity", &O::encoder_nonlinearity, "FFN activation (modelzoo 2.1-2.2's key; null: gelu).",
               config::if_set(act))
        .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
        .field("attention_type", &O::attention_type, "scaled_dot_product or dot_product.",
               config::one_of({"scaled_dot_product", "dot_product"}))
        .field("attention_softmax_fp32", &O::attention_softmax_fp32, "Attention softmax in float32.")
        .field("dropout_rate", &O::dropout_rate, "Dropout on the attention and FFN outputs.", rate)
        .field("attention_dropout_rate", &O::attention_dropout_rate, "Dropout on attention probabilities.", rate)
        .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention, "Bias on q/k/v.")
        .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention, "Bias on the attention output.")
        .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN.")
        .field("norm_first", &O::norm_first, "Pre-norm blocks (DiT's); false: the norms follow each residual.")
        .field("block_type", &O::block_type, "adaln_zero (the only one modelzoo has).", config::one_of({"adaln_zero"}))
        .field("activation_checkpointing", &O::activation_checkpointing,
               "zoo's own: recompute each block in the backward pass.")
        .field("initializer_range", &O::initializer_range, "Std of the default initializers.", positive<double>())
        .field("projection_initializer", &O::projection_initializer, "Patch projection (null: xavier_uniform).")
        .field("position_embedding_initializer", &O::position_embedding_initializer,
               "Learned positions (null: truncated_normal std=initializer_range).")
        .field("attention_initializer", &O::attention_initializer, "Attention (null: xavier_uniform).")
        .field("ffn_initializer", &O::ffn_initializer, "FFN (null: xavier_uniform).")
        .field("timestep_embedding_initializer", &O::timestep_embedding_initializer,
               "Timestep MLP (null: normal std=initializer_range).")
        .field("label_embedding_initializer", &O::label_embedding_initializer,
               "Label table (null: normal std=initializer_range).")
        .field("head_initializer", &O::head_initializer, "Noise head (null: zeros).")
        .field("init_conv_like_linear", &O::init_conv_like_linear,
               "Initialize a conv projection as the linear of its flattened patch (null: "
               "use_conv_patchified_embedding).")
        .field("vae", &O::vae, "The VAE of the latents (its latent shape and scaling factor).")
        .renamed("timestep_embeddding_initializer", "timestep_embedding_initializer")  // modelzoo 2.1's spelling
        .ignored({"reverse_process"},
                 "it configures modelzoo's image sampler (sample_generator_dit.py), which zoo does not have")
        .validate([](const O& o, const auto& fail) {
          if (!o.latent_size && !o.vae) fail("latent_size", "required: [H, W] of a latent (or a vae section with it)");
          if (!o.latent_channels && !o.vae)
            fail("latent_channels", "required: the channels of a latent (or a vae section with them)");
          const auto hw = o.latent_hw();
          if (hw.size() != 2 || hw[0] <= 0 || hw[1] <= 0) fail("latent_size", "expected [H, W]");
          if (o.patch_size.size() != 2 || o.patch_size[0] <= 0 || o.patch_size[1] <= 0)
            fail("patch_size", "expected [H, W]");
          if (hw[0] % o.patch_size[0] != 0 || hw[1] % o.patch_size[1] != 0)
            fail("patch_size",
                 "must divide the latent size [" + std::to_string(hw[0]) + ", " + std::to_string(hw[1]) + "]");
          if (o.hidden_size % o.num_heads != 0) fail("num_heads", "must divide hidden_size");
          if (o.position_embedding_type == std::optional<std::string>("fixed") && o.hidden_size % 4 != 0)
            fail("position_embedding_type", "fixed 2D positions need hidden_size divisible by 4");
          if (o.nonlinearity && o.encoder_nonlinearity && *o.nonlinearity != *o.encoder_nonlinearity)
            fail("nonlinearity", "differs from encoder_nonlinearity; give one of them");
          if (is_glu(o.ffn_nonlinearity())) fail("nonlinearity", "DiT's FFN takes a plain activation");
          if (o.beta_end <= o.beta_start) fail("beta_end", "must exceed beta_start");
          if (o.beta_end * 1000.0 / double(o.num_diffusion_steps) > 1.0)
            fail("num_diffusion_steps", "too few steps: the linear schedule's last beta would exceed 1");
        });
    return sc;
  }();
  return s;
}

// ---- AdaLayerNorm and the block -------------------------------------------

namespace {

// modelzoo's nn.Sequential(SiLU(), Linear) at `name`: the Linear is its element "1".
Dense conditioned_linear(torch::nn::Module& owner, const std::string& name, int64_t dim,
                         const torch::TensorOptions& p) {
  auto holder = owner.register_module(name, std::make_shared<torch::nn::Module>());
  return holder->register_module("1", Dense(dim, dim, true, p));
}

}  // namespace

AdaLayerNormImpl::AdaLayerNormImpl(int64_t dim, double eps, const torch::TensorOptions& p) : eps_(eps) {
  scale = conditioned_linear(*this, "scale_linear", dim, p);
  shift = conditioned_linear(*this, "shift_linear", dim, p);
}

void AdaLayerNormImpl::reset_parameters() {
  scale->reset_parameters(InitializerSpec{"zeros"});
  shift->reset_parameters(InitializerSpec{"zeros"});
}

torch::Tensor AdaLayerNormImpl::forward(const torch::Tensor& x, const torch::Tensor& silu_c) {
  const torch::Tensor normed = torch::layer_norm(x, {x.size(-1)}, {}, {}, eps_);
  return normed * (1 + scale(silu_c).unsqueeze(1)) + shift(silu_c).unsqueeze(1);
}

DitBlockImpl::DitBlockImpl(const DitOptions& o, const torch::TensorOptions& p)
    : dropout_(o.dropout_rate), norm_first_(o.norm_first) {
  const InitializerSpec xavier{"xavier_uniform"};
  self_attn = register_module(
      "self_attn", MultiheadAttention(bidirectional_attention_options(o, o.attention_initializer.value_or(xavier)), p));
  norm1 = register_module("norm1", AdaLayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  norm3 = register_module("norm3", AdaLayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  FeedForwardOptions f = ffn_options_from_keys(o, o.ffn_nonlinearity());
  f.dropout = 0.0;  // modelzoo's DiT: no dropout after the activation, only on the FFN's output
  f.initializer = f.output_initializer = o.ffn_initializer.value_or(xavier);
  ffn = register_module("ffn", FeedForward(f, p));
  gate_msa = conditioned_linear(*this, "gate_msa", o.hidden_size, p);
  gate_mlp = conditioned_linear(*this, "gate_mlp", o.hidden_size, p);
}

void DitBlockImpl::reset_parameters() {
  self_attn->reset_parameters();
  ffn->reset_parameters();
  norm1->reset_parameters();
  norm3->reset_parameters();
  gate_msa->reset_parameters(InitializerSpec{"zeros"});
  gate_mlp->reset_parameters(InitializerSpec{"zeros"});
}

torch::Tensor DitBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& silu_c) {
  auto drop = [&](const torch::Tensor& t) { return dropout_ > 0 ? torch::dropout(t, dropout_, is_training()) : t; };
  auto gated = [&](Dense& gate, const torch::Tensor& t) { return gate(silu_c).unsqueeze(1) * drop(t); };
  if (norm_first_) {
    const torch::Tensor h = x + gated(gate_msa, self_attn->forward(norm1(x, silu_c), nullptr, {}, {}));
    return h + gated(gate_mlp, ffn(norm3(h, silu_c)));
  }
  const torch::Tensor h = norm1(x + gated(gate_msa, self_attn->forward(x, nullptr, {}, {})), silu_c);
  return norm3(h + gated(gate_mlp, ffn(h)), silu_c);
}

// ---- the model -------------------------------------------------------------

namespace {

VitOptions patch_embedding_options(const DitOptions& o) {
  VitOptions v;
  v.image_size = o.latent_hw();
  v.num_channels = o.channels();
  v.patch_size = o.patch_size;
  v.hidden_size = o.hidden_size;
  v.initializer_range = o.initializer_range;
  v.embedding_dropout_rate = o.embedding_dropout_rate;
  v.use_conv_patchified_embedding = o.use_conv_patchified_embedding;
  v.init_conv_like_linear = o.init_conv_like_linear.value_or(o.use_conv_patchified_embedding);
  v.prepend_cls_token = false;
  v.position_embedding_type = o.position_embedding_type;
  v.projection_initializer = o.projection_initializer.value_or(InitializerSpec{"xavier_uniform"});
  v.position_embedding_initializer = o.position_embedding_initializer;
  return v;
}

// Glide's sinusoidal timestep features: row t is [cos(t f_i), sin(t f_i)], f_i = 10000^(-i/half).
torch::Tensor timestep_features(int64_t steps, int64_t dim) {
  const int64_t half = dim / 2;
  const torch::Tensor freqs = torch::exp(-std::log(10000.0) * torch::arange(half, torch::kDouble) / double(half));
  const torch::Tensor args = torch::arange(steps, torch::kDouble).unsqueeze(1) * freqs.unsqueeze(0);
  torch::Tensor table = torch::cat({torch::cos(args), torch::sin(args)}, -1);
  if (dim % 2) table = torch::cat({table, torch::zeros({steps, 1}, torch::kDouble)}, -1);
  return table;
}

// A frozen tensor of the state dict (modelzoo keeps them as parameters
// without gradients), computed in float64 on the CPU and stored in the
// parameters' type, unless the model is on meta.
torch::Tensor frozen(torch::nn::Module& owner, const std::string& name, const torch::Tensor& value,
                     const torch::TensorOptions& p) {
  const torch::Tensor t = p.device().is_meta() ? torch::empty(value.sizes(), p) : value.to(p.dtype()).to(p.device());
  return owner.register_parameter(name, t, /*requires_grad=*/false);
}

}  // namespace

DitModel::DitModel(const DitOptions& o, const torch::TensorOptions& p) : options_(o) {
  const int64_t D = o.hidden_size, C = o.channels(), ph = o.patch_size[0], pw = o.patch_size[1];
  patch_embedding_layer = register_module("patch_embedding_layer", VitEmbeddingLayer(patch_embedding_options(o), p));

  auto timestep = register_module("timestep_embedding_layer", std::make_shared<torch::nn::Module>());
  timestep_table =
      frozen(*timestep, "timestep_embedding", timestep_features(o.num_diffusion_steps, o.frequency_embedding_size), p);
  auto mlp = timestep->register_module("ffn", std::make_shared<torch::nn::Module>())
                 ->register_module("ffn", torch::nn::ModuleList());
  const FFNLayer first(o.frequency_embedding_size, D, true, p), second(D, D, true, p);
  mlp->push_back(first);
  mlp->push_back(second);
  timestep_fc1 = first->linear_layer;
  timestep_fc2 = second->linear_layer;

  label_embedding_layer = register_module("label_embedding_layer",
                                          EmbeddingTable(o.num_classes + (o.label_dropout_rate > 0 ? 1 : 0), D, p));
  blocks = register_module("transformer_decoder", std::make_shared<torch::nn::Module>())
               ->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) blocks->push_back(DitBlock(o, p));
  final_norm = register_module("final_norm", AdaLayerNorm(D, o.layer_norm_epsilon, p));

  auto head = register_module("noise_head", std::make_shared<torch::nn::Module>());
  auto out = head->register_module(o.use_conv_transpose_unpatchify ? "conv_transpose" : "linear",
                                   std::make_shared<torch::nn::Module>());
  head_weight = out->register_parameter(
      "weight", o.use_conv_transpose_unpatchify ? torch::empty({D, C, ph, pw}, p) : torch::empty({ph * pw * C, D}, p));
  head_bias = out->register_parameter("bias", torch::zeros({o.use_conv_transpose_unpatchify ? C : ph * pw * C}, p));

  // DDPM's linear betas, scaled so that any step count spans the same noise range as 1000 steps.
  const double scale = 1000.0 / double(o.num_diffusion_steps);
  const torch::Tensor betas =
      torch::linspace(scale * o.beta_start, scale * o.beta_end, o.num_diffusion_steps, torch::kDouble);
  const torch::Tensor alpha_bar = torch::cumprod(1.0 - betas, 0);
  auto diffusion = register_module("gaussian_diffusion", std::make_shared<torch::nn::Module>());
  sqrt_alphas_cum_prod = frozen(*diffusion, "sqrt_alphas_cum_prod", alpha_bar.sqrt(), p);
  sqrt_one_minus_alphas_cum_prod = frozen(*diffusion, "sqrt_one_minus_alphas_cum_prod", (1.0 - alpha_bar).sqrt(), p);
}

void DitModel::reset_parameters() {
  const DitOptions& o = options_;
  const InitializerSpec normal{"normal", 0.0, o.initializer_range};
  patch_embedding_layer->reset_parameters();
  timestep_fc1->reset_parameters(o.timestep_embedding_initializer.value_or(normal));
  timestep_fc2->reset_parameters(o.timestep_embedding_initializer.value_or(normal));
  label_embedding_layer->reset_parameters(o.label_embedding_initializer.value_or(normal));
  for (const auto& block : *blocks) block->as<DitBlockImpl>()->reset_parameters();
  final_norm->reset_parameters();
  apply_initializer(o.head_initializer.value_or(InitializerSpec{"zeros"}), head_weight);
  apply_initializer(InitializerSpec{"zeros"}, head_bias);
}

torch::Tensor DitModel::add_noise(const torch::Tensor& latent, const torch::Tensor& noise,
                                  const torch::Tensor& timestep) const {
  const torch::Tensor a = sqrt_alphas_cum_prod.index_select(0, timestep).view({-1, 1, 1, 1});
  const torch::Tensor b = sqrt_one_minus_alphas_cum_prod.index_select(0, timestep).view({-1, 1, 1, 1});
  return a.to(latent.scalar_type()) * latent + b.to(latent.scalar_type()) * noise;
}

torch::Tensor DitModel::predict_noise(const torch::Tensor& noised, const torch::Tensor& label,
                                      const torch::Tensor& timestep) {
  const DitOptions& o = options_;
  const int64_t B = noised.size(0), D = o.hidden_size, ph = o.patch_size[0], pw = o.patch_size[1];
  const auto hw = o.latent_hw();
  torch::Tensor x = patch_embedding_layer(noised);  // (B, N, D)
  const torch::Tensor t_emb =
      timestep_fc2(activation(o.embedding_nonlinearity, timestep_fc1(timestep_table.index_select(0, timestep))));
  const torch::Tensor silu_c = torch::silu(t_emb + label_embedding_layer(label));  // every adaLN linear takes SiLU(c)
  const bool recompute = o.activation_checkpointing && is_training() && torch::GradMode::is_enabled();
  for (const auto& module : *blocks) {
    DitBlockImpl* block = module->as<DitBlockImpl>();
    if (!recompute) {
      x = block->forward(x, silu_c);
      continue;
    }
    x = recompute_with_inputs_in_backward(
            [block](const std::vector<torch::Tensor>& in) {
              return std::vector<torch::Tensor>{block->forward(in[0], in[1])};
            },
            {x, silu_c})
            .front();
  }
  x = final_norm(x, silu_c);
  const int64_t nh = hw[0] / ph, nw = hw[1] / pw;
  if (o.use_conv_transpose_unpatchify) {
    const torch::Tensor grid = x.transpose(1, 2).reshape({B, D, nh, nw});
    return torch::conv_transpose2d(grid, head_weight.to(grid.scalar_type()), head_bias.to(grid.scalar_type()),
                                   {ph, pw});
  }
  const int64_t C = o.channels();  // each patch's values in (row, column, channel) order, as modelzoo's unpatchify
  return dense(x, head_weight, head_bias)
      .reshape({B, nh, nw, ph, pw, C})
      .permute({0, 5, 1, 3, 2, 4})
      .reshape({B, C, hw[0], hw[1]});
}

ModelOutput DitModel::forward(const Features& batch, bool) {
  const DitOptions& o = options_;
  const torch::Tensor latent = batch.at("input"), noise = batch.at("diffusion_noise");
  const torch::Tensor timestep = batch.at("timestep").reshape({-1}).to(torch::kLong);
  const torch::Tensor label = batch.at("label").reshape({-1}).to(torch::kLong);
  const auto hw = o.latent_hw();
  const std::vector<int64_t> expected = {latent.size(0), o.channels(), hw[0], hw[1]};
  if (latent.sizes() != torch::IntArrayRef(expected) || noise.sizes() != latent.sizes())
    throw std::invalid_argument("dit: expected input and diffusion_noise latents " +
                                c10::str(torch::IntArrayRef(expected)) + ", got " + c10::str(latent.sizes()) + " and " +
                                c10::str(noise.sizes()));
  const int64_t labels = label_embedding_layer->weight.size(0);
  if (latent.device().is_cpu()) {  // no host sync on an accelerator
    if ((timestep < 0).any().item<bool>() || (timestep >= o.num_diffusion_steps).any().item<bool>())
      throw std::invalid_argument(
          "dit: a timestep outside [0, num_diffusion_steps = " + std::to_string(o.num_diffusion_steps) + ")");
    if ((label < 0).any().item<bool>() || (label >= labels).any().item<bool>())
      throw std::invalid_argument("dit: a label outside [0, " + std::to_string(labels) + ") (num_classes " +
                                  std::to_string(o.num_classes) +
                                  (o.label_dropout_rate > 0 ? ", plus the unconditional label)" : ")"));
  }
  const torch::ScalarType compute = latent.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const torch::Tensor target = noise.to(compute);
  const torch::Tensor predicted = predict_noise(add_noise(latent.to(compute), target, timestep), label, timestep);
  ModelOutput out;
  out.loss = torch::mse_loss(predicted.to(compute), target);
  return out;
}

// Per latent image: the patch projection, the blocks' matmuls and their
// bidirectional attention over the patches (q.k and the weighted values,
// 2 N D multiply-adds per patch), each block's six conditioning linears, and the head.
double DitModel::forward_flops_per_token() const {
  const DitOptions& o = options_;
  const double D = o.hidden_size, F = o.filter_size, L = o.num_hidden_layers, N = o.num_patches();
  const double patch_values = double(o.patch_size[0] * o.patch_size[1] * o.channels());
  const double blocks = N * (2 * L * (4 * D * D + 2 * D * F) + 4 * L * N * D) + L * 2 * 6 * D * D;
  const double conditioning = 2 * (double(o.frequency_embedding_size) * D + D * D) + 2 * 2 * D * D;
  return 2 * 2 * patch_values * D * N + blocks + conditioning;
}

ModelFamily dit_family() {
  ModelFamily f = make_model_family<DitOptions, DitModel>(
      "dit", {"DiT"}, "Class-conditional diffusion transformer on VAE latents, as modelzoo's dit.",
      {"input", "label", "diffusion_noise", "timestep"});
  f.required_keys = {"frequency_embedding_size"};  // a legacy file with it is DiT's
  // modelzoo's set_defaults: the model's step and class counts are train_input's.
  f.model_keys_from_input = {{"num_diffusion_steps", "num_diffusion_steps"}, {"num_classes", "num_classes"}};
  // ... and the data draw noise, timesteps and label dropout as the model says.
  f.input_keys_from_model = {{"num_diffusion_steps", {"num_diffusion_steps"}, true},
                             {"num_classes", {"num_classes"}, true},
                             {"label_dropout_rate", {"label_dropout_rate"}, true},
                             {"latent_size", {"latent_size", "vae.latent_size"}, true},
                             {"latent_channels", {"latent_channels", "vae.latent_channels"}, true},
                             {"vae_scaling_factor", {"vae.scaling_factor"}, true}};
  return f;
}

}  // namespace zoo::models
