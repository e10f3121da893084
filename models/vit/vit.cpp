// Implementation of models/vit/vit.h.
#include "models/vit/vit.h"

#include "models/common/freeze.h"
#include "models/hf/block_keys.h"
#include "models/vit/hf_adapter.h"

namespace zoo::models {

const config::Schema<VitOptions>& VitOptions::schema() {
  using O = VitOptions;
  static const config::Schema<O> s = [] {
    using config::positive;
    auto rate = config::in_range(0.0, 1.0, /*hi_open=*/true);
    auto act = config::one_of(kActivationNames);
    config::Schema<O> sc("model (vision_transformer)",
                         "Vision Transformer image classification, as modelzoo's vision_transformer.");
    sc.field("num_classes", &O::num_classes, "Classes.", positive<int64_t>())
        .field("image_size", &O::image_size, "Input image [H, W].")
        .field("num_channels", &O::num_channels, "Image channels.", positive<int64_t>())
        .field("patch_size", &O::patch_size, "Patch [H, W]; must divide image_size.")
        .field("hidden_size", &O::hidden_size, "Model width.", positive<int64_t>())
        .field("num_hidden_layers", &O::num_hidden_layers, "Encoder layers.", positive<int64_t>())
        .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", positive<int64_t>())
        .field("filter_size", &O::filter_size, "FFN hidden units.", positive<int64_t>())
        .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
        .field("attention_module", &O::attention_module,
               "aiayn_attention, or multiquery_attention with extra_attention_params.num_kv_groups.",
               config::one_of({"aiayn_attention", "multiquery_attention"}))
        .field("extra_attention_params", &O::extra_attention_params, "Settings of the attention module.")
        .field("attention_type", &O::attention_type, "scaled_dot_product or dot_product.",
               config::one_of({"scaled_dot_product", "dot_product"}))
        .field("attention_softmax_fp32", &O::attention_softmax_fp32, "Attention softmax in float32.")
        .field("dropout_rate", &O::dropout_rate, "Dropout on residual branches.", rate)
        .field("embedding_dropout_rate", &O::embedding_dropout_rate, "Dropout on the embeddings.", rate)
        .field("attention_dropout_rate", &O::attention_dropout_rate, "Dropout on attention probabilities.", rate)
        .field("nonlinearity", &O::nonlinearity, "FFN activation.", act)
        .field("pooler_nonlinearity", &O::pooler_nonlinearity, "Pooler activation (null: nonlinearity).",
               config::if_set(act))
        .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention, "Bias on q/k/v.")
        .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention, "Bias on the attention output.")
        .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN and the pooler.")
        .field("norm_first", &O::norm_first, "Pre-norm layers (ViT's).")
        .field("use_final_layer_norm", &O::use_final_layer_norm, "A LayerNorm after the last layer.")
        .field("use_encoder_pooler_layer", &O::use_encoder_pooler_layer,
               "Dense + pooler_nonlinearity on [CLS] before the classifier.")
        .field("position_embedding_type", &O::position_embedding_type,
               "learned, fixed (2D sin-cos, not trained), or null for none.",
               config::if_set(config::one_of({"learned", "fixed"})))
        .field("prepend_cls_token", &O::prepend_cls_token, "A learned [CLS] embedding in front of the patches.")
        .field("use_conv_patchified_embedding", &O::use_conv_patchified_embedding,
               "Project patches with a strided conv (else patchify + linear).")
        .field("use_embed_proj_bias", &O::use_embed_proj_bias, "Bias on the patch projection.")
        .field("use_post_embed_layer_norm", &O::use_post_embed_layer_norm, "A LayerNorm on the embeddings.")
        .field("use_bias_in_output", &O::use_bias_in_output, "Bias on the classifier.")
        .field("use_dinov2_classifier", &O::use_dinov2_classifier,
               "Classify [CLS] concatenated with the patches' mean (DINOv2's head).")
        .field("initializer_range", &O::initializer_range, "Std of the default truncated normal.", positive<double>())
        .field("default_initializer", &O::default_initializer,
               "Initializer of the layers and the classifier (null: truncated_normal std=initializer_range, +-2 std).")
        .field("attention_initializer", &O::attention_initializer, "Attention (null: default_initializer).")
        .field("ffn_initializer", &O::ffn_initializer, "FFN (null: default_initializer).")
        .field("pooler_initializer", &O::pooler_initializer, "Pooler (null: default_initializer).")
        .field("projection_initializer", &O::projection_initializer, "Patch projection (null: default_initializer).")
        .field("position_embedding_initializer", &O::position_embedding_initializer,
               "Position embeddings (null: default_initializer).")
        .field("cls_token_initializer", &O::cls_token_initializer, "[CLS] embedding (null: default_initializer).")
        .field("freeze", &O::freeze, "Regexes: parameters of the modules whose names match do not train.")
        .field("compute_eval_metrics", &O::compute_eval_metrics, "Eval also reports accuracy_cls.")
        .field("activation_checkpointing", &O::activation_checkpointing,
               "zoo's own: recompute each encoder layer in the backward pass.")
        .field("layerscale_value", &O::layerscale_value,
               "LayerScale (DINOv2): per-channel factors layer_scale1 / layer_scale2 on each layer's attention and "
               "FFN outputs, starting at this value (null: none).",
               config::if_set(config::positive<double>()))
        .field("stochastic_depth_drop_prob", &O::stochastic_depth_drop_prob,
               "Stochastic depth: in training each layer's attention and FFN branches are dropped with this "
               "probability (the last layer's, with the linear schedule), the kept ones scaled by 1 / (1 - p).",
               config::in_range(0.0, 1.0, /*hi_open=*/true))
        .field("stochastic_depth_drop_prob_schedule", &O::stochastic_depth_drop_prob_schedule,
               "linear: layer i of L drops with stochastic_depth_drop_prob * i / (L - 1); constant: every layer alike.",
               config::one_of({"linear", "constant"}))
        .field("stochastic_depth_mode", &O::stochastic_depth_mode,
               "batch: a branch is dropped for the whole batch at once; row: per sample.",
               config::one_of({"batch", "row"}))
        .field("use_masked_patches", &O::use_masked_patches, "DINOv2's mask token: not supported by zoo (false only).")
        .field("image_layer_idx", &O::image_layer_idx, "Multimodal feature layer: not supported by zoo (null only).")
        .ignored({"mixed_precision"}, "the model's precision keys decide it")
        .validate([](const O& o, const auto& fail) {
          if (o.image_size.size() != 2 || o.image_size[0] <= 0 || o.image_size[1] <= 0)
            fail("image_size", "expected [H, W]");
          if (o.patch_size.size() != 2 || o.patch_size[0] <= 0 || o.patch_size[1] <= 0)
            fail("patch_size", "expected [H, W]");
          if (o.image_size[0] % o.patch_size[0] != 0 || o.image_size[1] % o.patch_size[1] != 0)
            fail("patch_size", "must divide image_size");
          if (o.hidden_size % o.num_heads != 0) fail("num_heads", "must divide hidden_size");
          if (o.position_embedding_type == std::optional<std::string>("fixed") && o.hidden_size % 4 != 0)
            fail("position_embedding_type", "fixed 2D positions need hidden_size divisible by 4");
          if (o.attention_module == "multiquery_attention" && o.num_heads % o.extra_attention_params.num_kv_groups != 0)
            fail("extra_attention_params", "num_kv_groups must divide num_heads");
          if (is_glu(o.nonlinearity)) fail("nonlinearity", "ViT's FFN takes a plain activation");
          if (o.use_dinov2_classifier && !o.prepend_cls_token) fail("use_dinov2_classifier", "needs prepend_cls_token");
          if (o.use_masked_patches) fail("use_masked_patches", "not supported by zoo yet (DINOv2's mask token)");
          if (o.image_layer_idx) fail("image_layer_idx", "not supported by zoo (multimodal feature extraction)");
          if (o.freeze)
            if (const std::string bad = check_freeze_patterns(*o.freeze); !bad.empty()) fail("freeze", bad);
        });
    return sc;
  }();
  return s;
}

namespace {

// modelzoo's get_2d_fixed_position_embeddings: patch (r, c) gets
// [sin(c w), cos(c w), sin(r w), cos(r w)] over D/4 frequencies w_i =
// 10000^(-i / (D/4)); with [CLS], a zero row after the patches.
torch::Tensor fixed_2d_positions(int64_t rows, int64_t cols, int64_t D, bool cls_row) {
  const int64_t F = D / 4;
  const torch::Tensor inv_freq = 1.0 / torch::pow(10000.0, torch::arange(F, torch::kDouble) / double(F));
  const torch::Tensor r = torch::arange(rows, torch::kDouble).repeat_interleave(cols).unsqueeze(1) * inv_freq;
  const torch::Tensor c = torch::arange(cols, torch::kDouble).repeat({rows}).unsqueeze(1) * inv_freq;
  torch::Tensor table = torch::cat({torch::sin(c), torch::cos(c), torch::sin(r), torch::cos(r)}, 1);
  if (cls_row) table = torch::cat({table, torch::zeros({1, D}, torch::kDouble)}, 0);
  return table;
}

}  // namespace

VitEmbeddingLayerImpl::VitEmbeddingLayerImpl(const VitOptions& o, const torch::TensorOptions& p) : options_(o) {
  const int64_t ph = o.patch_size[0], pw = o.patch_size[1], C = o.num_channels, D = o.hidden_size;
  auto proj = register_module("linear_proj", std::make_shared<torch::nn::Module>());
  linear_proj = proj.get();
  proj_weight = proj->register_parameter(
      "weight", o.use_conv_patchified_embedding ? torch::empty({D, C, ph, pw}, p) : torch::empty({D, ph * pw * C}, p));
  if (o.use_embed_proj_bias) proj_bias = proj->register_parameter("bias", torch::zeros({D}, p));
  if (o.position_embedding_type == std::optional<std::string>("learned"))
    position_embeddings = register_module("position_embeddings", EmbeddingTable(o.sequence_length(), D, p));
  if (o.position_embedding_type == std::optional<std::string>("fixed")) {
    const torch::Tensor table = fixed_2d_positions(o.image_size[0] / ph, o.image_size[1] / pw, D, o.prepend_cls_token);
    fixed_position_embeddings =
        register_parameter("position_embeddings",
                           p.device().is_meta() ? torch::empty(table.sizes(), p) : table.to(p.dtype()).to(p.device()),
                           /*requires_grad=*/false);
  }
  if (o.prepend_cls_token) cls_embedding = register_parameter("cls_embedding", torch::zeros({D}, p));
  if (o.use_post_embed_layer_norm) post_embed_ln = register_module("post_embed_ln", LayerNorm(D, 1e-5, p));
}

void VitEmbeddingLayerImpl::reset_parameters() {
  const InitializerSpec d = options_.default_init();
  // init_conv_like_linear: the conv's fans are those of the linear layer over a flattened patch.
  const bool as_linear = options_.use_conv_patchified_embedding && options_.init_conv_like_linear;
  apply_initializer(options_.projection_initializer.value_or(d),
                    as_linear && proj_weight.defined() ? proj_weight.view({proj_weight.size(0), -1}) : proj_weight);
  apply_initializer(InitializerSpec{"zeros"}, proj_bias);
  apply_initializer(options_.cls_token_initializer.value_or(d), cls_embedding);
  if (position_embeddings) position_embeddings->reset_parameters(options_.position_embedding_initializer.value_or(d));
  if (post_embed_ln) post_embed_ln->reset_parameters();
}

torch::Tensor VitEmbeddingLayerImpl::forward(const torch::Tensor& images) {
  const VitOptions& o = options_;
  const int64_t B = images.size(0), ph = o.patch_size[0], pw = o.patch_size[1];
  if (images.dim() != 4 || images.size(1) != o.num_channels || images.size(2) != o.image_size[0] ||
      images.size(3) != o.image_size[1])
    throw std::invalid_argument("vision_transformer: expected images (B, " + std::to_string(o.num_channels) + ", " +
                                std::to_string(o.image_size[0]) + ", " + std::to_string(o.image_size[1]) + "), got " +
                                c10::str(images.sizes()));
  torch::Tensor x;
  if (o.use_conv_patchified_embedding) {
    x = torch::conv2d(images, proj_weight, proj_bias, {ph, pw}).flatten(2).transpose(1, 2);  // (B, N, D)
  } else {  // patches flattened in (row, column, channel) order, as modelzoo's patchify_helper
    const int64_t C = o.num_channels, nh = o.image_size[0] / ph, nw = o.image_size[1] / pw;
    const torch::Tensor patches =
        images.reshape({B, C, nh, ph, nw, pw}).permute({0, 2, 4, 3, 5, 1}).reshape({B, nh * nw, ph * pw * C});
    x = dense(patches, proj_weight, proj_bias);
  }
  const int64_t N = x.size(1);
  if (o.prepend_cls_token) x = torch::cat({cls_embedding.to(x.scalar_type()).expand({B, 1, -1}), x}, 1);
  const torch::Tensor table = position_embeddings ? position_embeddings->weight : fixed_position_embeddings;
  if (table.defined()) {
    // Patches take rows 0 .. N-1 and [CLS] the last row, as modelzoo's layer orders them.
    torch::Tensor rows = torch::arange(N, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    if (o.prepend_cls_token) rows = torch::cat({torch::full({1}, N, rows.options()), rows});
    x = x + table.index_select(0, rows).to(x.scalar_type());
  }
  if (o.embedding_dropout_rate > 0) x = torch::dropout(x, o.embedding_dropout_rate, is_training());
  if (post_embed_ln) x = post_embed_ln(x);
  return x;
}

namespace {

EncoderLayerOptions vit_layer_options(const VitOptions& o) {
  const InitializerSpec d = o.default_init();
  EncoderLayerOptions e;
  e.attention = bidirectional_attention_options(o, o.attention_initializer.value_or(d));
  e.ffn = ffn_options_from_keys(o, o.nonlinearity);
  e.ffn.dropout = 0.0;  // modelzoo's ViT: no dropout after the activation, only on the FFN's output
  e.ffn.initializer = e.ffn.output_initializer = o.ffn_initializer.value_or(d);
  e.layer_norm_epsilon = o.layer_norm_epsilon;
  e.dropout = o.dropout_rate;
  e.norm_first = o.norm_first;
  e.final_norm = o.use_final_layer_norm;
  e.recompute = o.activation_checkpointing;
  e.layer_scale = o.layerscale_value;
  e.drop_path = o.stochastic_depth_drop_prob;
  e.drop_path_rows = o.stochastic_depth_mode == "row";
  e.drop_path_linear = o.stochastic_depth_drop_prob_schedule == "linear";
  return e;
}

}  // namespace

VitEncoderImpl::VitEncoderImpl(const VitOptions& o, const torch::TensorOptions& p) : options_(o) {
  embedding_layer = register_module("embedding_layer", VitEmbeddingLayer(o, p));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  transformer_encoder =
      encoder->register_module("transformer_encoder", TransformerEncoder(o.num_hidden_layers, vit_layer_options(o), p));
  if (o.use_encoder_pooler_layer) {
    pooler = Dense(o.hidden_size, o.hidden_size, o.use_ffn_bias, p);
    auto holder = encoder->register_module("pooler", std::make_shared<torch::nn::Module>());
    holder->register_module("pooler", one_layer_network(pooler.ptr()));
  }
}

void VitEncoderImpl::reset_parameters() {
  embedding_layer->reset_parameters();
  transformer_encoder->reset_parameters();
  if (pooler) pooler->reset_parameters(options_.pooler_initializer.value_or(options_.default_init()));
}

torch::Tensor VitEncoderImpl::forward(const torch::Tensor& images) {
  return transformer_encoder->forward(embedding_layer(images), {});
}

torch::Tensor VitEncoderImpl::features(const torch::Tensor& images, int64_t layer) {
  return transformer_encoder->forward(embedding_layer(images), {}, {}, layer + 1);
}

torch::Tensor VitEncoderImpl::pool(const torch::Tensor& hidden) {
  const torch::Tensor cls = hidden.select(1, 0);
  return pooler ? activation(options_.pooler_nonlinearity.value_or(options_.nonlinearity), pooler(cls)) : cls;
}

VitModel::VitModel(const VitOptions& o, const torch::TensorOptions& p) : options_(o) {
  vit_model = register_module("vit_model", VitEncoder(o, p));
  const int64_t features = o.hidden_size * (o.use_dinov2_classifier ? 2 : 1);
  classifier = Dense(features, o.num_classes, o.use_bias_in_output, p);
  register_module("classifier", std::make_shared<torch::nn::Module>())
      ->register_module("classifier", one_layer_network(classifier.ptr()));
  if (o.freeze) freeze_matching(*this, *o.freeze);
}

void VitModel::reset_parameters() {
  vit_model->reset_parameters();
  classifier->reset_parameters(options_.default_init());
}

torch::Tensor VitModel::logits(const torch::Tensor& images) {
  const torch::Tensor h = vit_model(images);
  torch::Tensor pooled = vit_model->pool(h);
  if (options_.use_dinov2_classifier) pooled = torch::cat({h.select(1, 0), h.narrow(1, 1, h.size(1) - 1).mean(1)}, 1);
  return classifier(pooled);
}

ModelOutput VitModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor out = logits(batch.at("input"));
  const torch::Tensor x = out.scalar_type() == torch::kDouble ? out : out.to(torch::kFloat);
  const torch::Tensor labels = batch.at("labels").reshape({-1}).to(torch::kLong);
  ModelOutput result;
  result.loss = torch::cross_entropy_loss(x, labels);
  if (with_metrics && options_.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct = (x.argmax(-1) == labels).to(torch::kDouble);
    result.metrics["accuracy_cls"] = {correct.sum(), torch::tensor(double(correct.numel()), torch::kDouble),
                                      MetricTerm::Reduce::mean};
  }
  return result;
}

// Per image: 2 FLOPs per weight of the patch projection per patch, the
// encoder's matmuls and its bidirectional attention per token (q.k and the
// weighted values: 2 T C multiply-adds).
double vit_encoder_flops(const VitOptions& o) {
  const double C = o.hidden_size, F = o.filter_size, L = o.num_hidden_layers, T = o.sequence_length();
  const double kv =
      o.attention_module == "multiquery_attention" ? C * o.extra_attention_params.num_kv_groups / o.num_heads : C;
  const double patch = 2.0 * double(o.patch_size[0] * o.patch_size[1] * o.num_channels) * C * double(o.num_patches());
  return patch + T * (2 * L * (2 * C * C + 2 * C * kv + 2 * C * F) + 4 * L * T * C);
}

// Per image: the encoder and the classifier.
double VitModel::forward_flops_per_token() const {
  return vit_encoder_flops(options_) + 2.0 * double(options_.hidden_size) * double(options_.num_classes);
}

ModelFamily vit_family() {
  ModelFamily f = make_model_family<VitOptions, VitModel>(
      "vision_transformer", {"vit_classification"},
      "Vision Transformer image classification, as modelzoo's vision_transformer.", {"input", "labels"});
  f.required_keys = {"patch_size"};
  f.hf["vit"] = vit_hf_adapter();
  return f;
}

}  // namespace zoo::models
