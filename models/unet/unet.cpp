// Implementation of models/unet/unet.h.
#include "models/unet/unet.h"

#include <algorithm>
#include <cctype>

#include "models/common/ffn.h"
#include "models/unet/segmentation.h"

namespace zoo::config {
template <>
struct Value<models::BlockFlags> {
  static models::BlockFlags parse(const YAML::Node& n, const Context& c, const std::string& k) {
    models::BlockFlags f;
    if (n.IsSequence()) {
      for (const auto& item : n) f.values.push_back(Value<bool>::parse(item, c, k));
      if (f.values.empty()) c.fail(n, k, "expected a bool or a non-empty list of bools");
    } else {
      f.values.push_back(Value<bool>::parse(n, c, k));
    }
    return f;
  }
  static YAML::Node emit(const models::BlockFlags& f) {
    if (f.values.size() == 1) return YAML::Node(bool(f.values[0]));
    YAML::Node n(YAML::NodeType::Sequence);
    for (bool v : f.values) n.push_back(v);
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  }
  static std::string type_name() { return "bool or list of bools"; }
};
}  // namespace zoo::config

namespace zoo::models {

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// modelzoo lowercases nonlinearity and norm_layer names ("ReLU").
config::Check<std::string> one_of_any_case(std::vector<std::string> choices) {
  auto check = config::one_of(std::move(choices));
  return [check](const std::string& v) { return check(lower(v)); };
}

}  // namespace

const config::Schema<UNetNormKwargs>& UNetNormKwargs::schema() {
  using O = UNetNormKwargs;
  static const config::Schema<O> s =
      config::Schema<O>("model.norm_kwargs (unet)", "Arguments of the norm layers, as modelzoo's norm_kwargs.")
          .field("num_groups", &O::num_groups, "Groups of a `group` norm: a number, or all (one per channel).",
                 config::if_set(config::Check<std::string>([](const std::string& v) {
                   if (v == "all") return std::string();
                   try {
                     size_t used = 0;
                     if (std::stoll(v, &used) > 0 && used == v.size()) return std::string();
                   } catch (const std::exception&) {
                   }
                   return std::string("expected a positive number of groups or all");
                 })))
          .field("eps", &O::eps, "Added to the variance.", config::positive<double>())
          .field("momentum", &O::momentum, "Batch norm's running-statistics momentum.",
                 config::in_range(0.0, 1.0, false));
  return s;
}

const config::Schema<UNetOptions>& UNetOptions::schema() {
  using O = UNetOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("model (unet)", "UNet: image segmentation, as modelzoo's vision/pytorch/unet (R1.x-2.0).");
    sc.field("num_classes", &O::num_classes, "Classes (default: train_input's num_classes).",
             config::positive<int64_t>())
        .field("image_shape", &O::image_shape,
               "Input image shape (H, W, C) or (D, H, W) (default: the input section's).")
        .field("input_channels", &O::input_channels, "Image channels (default: image_shape's last entry).",
               config::if_set(config::positive<int64_t>()))
        .field("encoder_filters", &O::encoder_filters, "Channels of each encoder block, the last the bottleneck's.")
        .field("decoder_filters", &O::decoder_filters,
               "Channels of each decoder block (one fewer than encoder_filters).")
        .field("convs_per_block", &O::convs_per_block, "Convs of each block: 3x3_conv, 3x3_dw_conv or 1x1_conv.")
        .field("initial_conv_filters", &O::initial_conv_filters, "A 3x3 conv + ReLU to this many channels first.",
               config::if_set(config::positive<int64_t>()))
        .field("nonlinearity", &O::nonlinearity, "Activation after each conv (any case: ReLU).",
               one_of_any_case(kActivationNames))
        .field("norm_layer", &O::norm_layer,
               "Norm after each conv: batchnorm2d, batchnorm3d, group, group_instance, "
               "instance2d, instance3d, or null.",
               config::if_set(one_of_any_case(kNormLayerNames)))
        .field("norm_kwargs", &O::norm_kwargs, "Norm arguments: num_groups, eps, momentum.")
        .field("enable_bias", &O::enable_bias, "Biases in the convs (default: only without a norm layer).")
        .field("skip_connect", &O::skip_connect, "Concatenate encoder outputs to the decoder's inputs.")
        .field("downscale_method", &O::downscale_method, "max_pool, or strided_conv.",
               config::one_of({"max_pool", "strided_conv"}))
        .field("residual_blocks", &O::residual_blocks,
               "Add each block's first conv output to its last (max_pool only).")
        .field("use_conv3d", &O::use_conv3d, "3D convolutions (volumes (B, C, D, H, W)).")
        .field("downscale_first_conv", &O::downscale_first_conv,
               "strided_conv: the first conv of a block strides, "
               "not the last.")
        .field("downscale_encoder_blocks", &O::downscale_encoder_blocks,
               "strided_conv: whether each encoder block downscales (default: all).")
        .field("downscale_bottleneck", &O::downscale_bottleneck, "strided_conv: the bottleneck downscales too.")
        .field("dropout_rate", &O::dropout_rate, "Dropout after each encoder and decoder block.",
               config::in_range(0.0, 1.0, true))
        .field("loss", &O::loss,
               "bce (two classes), multilabel_bce, ssce, or ssce_dice (default: bce with two "
               "classes, else ssce).",
               config::if_set(config::one_of({"bce", "multilabel_bce", "ssce", "ssce_dice"})))
        .field("ignore_background_class", &O::ignore_background_class, "ssce_dice: leave class 0 out of the dice term.")
        .field("initializer", &O::initializer, "Initializer of the conv weights.")
        .field("bias_initializer", &O::bias_initializer, "Initializer of the conv and norm biases.")
        .field("norm_weight_initializer", &O::norm_weight_initializer, "Initializer of the norm weights.")
        .field("compute_eval_metrics", &O::compute_eval_metrics, "Eval also reports eval_metrics.")
        .field("eval_metrics", &O::eval_metrics, "Of mIOU, DSC (dice coefficient) and Acc (pixel accuracy).")
        .field("eval_ignore_classes", &O::eval_ignore_classes, "Classes mIOU and DSC leave out.")
        .validate([](const O& o, const auto& fail) {
          if (o.num_classes <= 0) fail("num_classes", "required: the number of classes (in the model or train_input)");
          if (o.encoder_filters.size() < 2)
            fail("encoder_filters", "expected at least two entries (the last is the bottleneck's)");
          if (o.encoder_filters.size() != o.decoder_filters.size() + 1)
            fail("decoder_filters",
                 "expected one entry fewer than encoder_filters (" + std::to_string(o.encoder_filters.size()) + ")");
          for (int64_t c : o.encoder_filters)
            if (c <= 0) fail("encoder_filters", "expected channels > 0");
          for (int64_t c : o.decoder_filters)
            if (c <= 0) fail("decoder_filters", "expected channels > 0");
          if (o.convs_per_block.empty()) fail("convs_per_block", "expected at least one conv");
          for (const auto& c : o.convs_per_block)
            if (c != "3x3_conv" && c != "3x3_dw_conv" && c != "1x1_conv")
              fail("convs_per_block", "unknown conv '" + c + "' (expected 3x3_conv, 3x3_dw_conv or 1x1_conv)");
          if (o.loss_type() == "bce" && o.num_classes != 2)
            fail("loss", "bce takes exactly two classes, got num_classes " + std::to_string(o.num_classes));
          if (o.residual_blocks && o.downscale_method != "max_pool")
            fail("residual_blocks", "needs downscale_method max_pool");
          if (o.skip_connect && o.downscale_method == "strided_conv" && o.convs_per_block.size() == 1)
            fail("skip_connect",
                 "cannot be true with strided_conv and one conv per block (set skip_connect: false, "
                 "or downscale_method: max_pool)");
          if (o.norm_layer && lower(*o.norm_layer) == "group" && !o.norm_kwargs.num_groups)
            fail("norm_kwargs", "norm_layer group needs norm_kwargs.num_groups");
          if (is_glu(lower(o.nonlinearity))) fail("nonlinearity", "a gated activation does not apply to convs");
          const size_t blocks = o.encoder_filters.size() - 1;
          if (o.downscale_encoder_blocks && o.downscale_encoder_blocks->values.size() != 1 &&
              o.downscale_encoder_blocks->values.size() != blocks)
            fail("downscale_encoder_blocks",
                 "expected one bool, or one per encoder block (" + std::to_string(blocks) + ")");
          for (const auto& m : o.eval_metrics)
            if (m != "mIOU" && m != "DSC" && m != "Acc")
              fail("eval_metrics", "unknown metric '" + m + "' (expected mIOU, DSC or Acc)");
          const size_t dims = o.use_conv3d ? 3 : 2;
          if (!o.image_shape.empty() && o.image_shape.size() != dims && o.image_shape.size() != dims + 1)
            fail("image_shape", "expected " + std::to_string(dims) + " sizes and the channels");
        });
    return sc;
  }();
  return s;
}

namespace {

ConvNormActOptions conv_options(const UNetOptions& o, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                int64_t groups) {
  ConvNormActOptions c;
  c.in_channels = in, c.out_channels = out, c.kernel_size = kernel, c.stride = stride, c.groups = groups;
  c.bias = o.bias();
  c.conv3d = o.use_conv3d;
  c.activation = lower(o.nonlinearity);
  if (o.norm_layer) {
    NormLayerOptions n;
    n.kind = lower(*o.norm_layer);
    n.eps = o.norm_kwargs.eps;
    n.momentum = o.norm_kwargs.momentum;
    if (o.norm_kwargs.num_groups)
      n.num_groups = *o.norm_kwargs.num_groups == "all" ? out : std::stoll(*o.norm_kwargs.num_groups);
    c.norm = n;
  }
  return c;
}

}  // namespace

UNetBlockImpl::UNetBlockImpl(int64_t in, int64_t out, bool downscale, const UNetOptions& o,
                             const torch::TensorOptions& p)
    : residual_(o.residual_blocks), strided_skip_(o.downscale_method == "strided_conv" && o.skip_connect) {
  layers = register_module("layers", torch::nn::ModuleList());
  const size_t n = o.convs_per_block.size();
  const size_t strided_at = o.downscale_first_conv ? 0 : n - 1;
  int64_t channels = in;
  for (size_t i = 0; i < n; ++i) {
    const std::string& kind = o.convs_per_block[i];
    const int64_t stride = downscale && o.downscale_method == "strided_conv" && i == strided_at ? 2 : 1;
    const bool depthwise = kind == "3x3_dw_conv";
    const int64_t conv_out = depthwise ? channels : out;
    layers->push_back(ConvNormAct(
        conv_options(o, channels, conv_out, kind == "1x1_conv" ? 1 : 3, stride, depthwise ? channels : 1), p));
    channels = conv_out;
  }
  out_channels = channels;
}

std::pair<torch::Tensor, torch::Tensor> UNetBlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = x, first, skip;
  const size_t n = layers->size();
  for (size_t i = 0; i < n; ++i) {
    y = layers[i]->as<ConvNormActImpl>()->forward(y);
    if (residual_ && i == 0) first = y;
    else if (residual_ && i == n - 1) y = y + first;
    if (strided_skip_ && n >= 2 && i == n - 2) skip = y;
  }
  return {y, strided_skip_ ? skip : y};
}

UNetModel::UNetModel(const UNetOptions& o, const torch::TensorOptions& p) : options_(o) {
  const auto& enc = o.encoder_filters;
  int64_t channels = o.image_channels();
  if (o.initial_conv_filters) {
    ConvNormActOptions c = conv_options(o, channels, *o.initial_conv_filters, 3, 1, 1);
    c.norm.reset(), c.activation = "relu";  // modelzoo's initial conv: no norm, always ReLU
    initial_conv = register_module("initial_conv", ConvNormAct(c, p));
    channels = *o.initial_conv_filters;
  }
  const bool strided = o.downscale_method == "strided_conv";
  auto enc_module = register_module("encoder", std::make_shared<torch::nn::Module>());
  encoder_blocks = enc_module->register_module("unet_blocks", torch::nn::ModuleList());
  encoder = enc_module.get();
  std::vector<int64_t> skip_channels;
  for (size_t i = 0; i + 1 < enc.size(); ++i) {
    const bool downscale = o.downscale_encoder_blocks ? o.downscale_encoder_blocks->at(i) : strided;
    UNetBlock block(channels, enc[i], downscale, o, p);
    channels = block->out_channels;
    skip_channels.push_back(channels);
    encoder_blocks->push_back(block);
  }
  bottleneck = register_module("bottleneck", UNetBlock(channels, enc.back(), o.downscale_bottleneck, o, p));
  channels = bottleneck->out_channels;
  auto dec_module = register_module("decoder", std::make_shared<torch::nn::Module>());
  transpose_layers = dec_module->register_module("transpose_layers", torch::nn::ModuleList());
  decoder_blocks = dec_module->register_module("unet_blocks", torch::nn::ModuleList());
  for (size_t i = 0; i < o.decoder_filters.size(); ++i) {
    const int64_t up = o.decoder_filters[i];
    transpose_layers->push_back(ConvTransposeLayer(channels, up, 2, o.bias(), o.use_conv3d, p));
    const int64_t in = up + (o.skip_connect ? skip_channels[skip_channels.size() - 1 - i] : 0);
    UNetBlock block(in, up, false, o, p);
    channels = block->out_channels;
    decoder_blocks->push_back(block);
  }
  ConvNormActOptions last = conv_options(o, channels, o.output_channels(), 1, 1, 1);
  last.bias = true, last.norm.reset(), last.activation = "linear";
  final_conv = register_module("final_conv", ConvNormAct(last, p));
}

void UNetModel::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<ConvLayerImpl>()) {
      apply_initializer(options_.initializer, conv->weight);
      apply_initializer(options_.bias_initializer, conv->bias);
    } else if (auto* up = m->as<ConvTransposeLayerImpl>()) {
      apply_initializer(options_.initializer, up->weight);
      apply_initializer(options_.bias_initializer, up->bias);
    } else if (auto* norm = m->as<NormLayerImpl>()) {
      // modelzoo initializes BatchNorm2d and GroupNorm; other norms keep torch's ones and zeros.
      const std::string& kind = norm->options().kind;
      if (kind == "batchnorm2d" || kind == "group" || kind == "group_instance")
        norm->reset_parameters(options_.norm_weight_initializer, options_.bias_initializer);
      else norm->reset_parameters(InitializerSpec{"ones"}, InitializerSpec{"zeros"});
    }
  }
}

torch::Tensor UNetModel::logits(const torch::Tensor& input) {
  torch::Tensor x = input;
  if (initial_conv) x = initial_conv(x);
  const bool pool = options_.downscale_method == "max_pool";
  const double dropout = options_.dropout_rate;
  std::vector<torch::Tensor> skips;
  for (auto& m : *encoder_blocks) {
    auto [y, skip] = m->as<UNetBlockImpl>()->forward(x);
    if (options_.skip_connect) skips.push_back(skip);
    if (pool) y = options_.use_conv3d ? torch::max_pool3d(y, 2, 2) : torch::max_pool2d(y, 2, 2);
    x = dropout > 0 ? torch::dropout(y, dropout, is_training()) : y;
  }
  x = bottleneck->forward(x).first;
  for (size_t i = 0; i < decoder_blocks->size(); ++i) {
    x = transpose_layers[i]->as<ConvTransposeLayerImpl>()->forward(x);
    if (options_.skip_connect) x = torch::cat({x, skips[skips.size() - 1 - i]}, 1);
    x = decoder_blocks[i]->as<UNetBlockImpl>()->forward(x).first;
    if (options_.skip_connect && dropout > 0) x = torch::dropout(x, dropout, is_training());
  }
  return final_conv(x);
}

ModelOutput UNetModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& input = batch.at("input");
  const int64_t spatial = options_.use_conv3d ? 3 : 2;
  if (input.dim() != spatial + 2)
    throw std::invalid_argument("unet: expected input images (B, C, " + std::string(spatial == 3 ? "D, " : "") +
                                "H, W), got " + std::to_string(input.dim()) + " dimensions");
  const torch::Tensor out = logits(input);
  const torch::Tensor& labels = batch.at("labels");
  const std::string loss = options_.loss_type();
  ModelOutput result;
  result.loss = segmentation_loss(loss, out, labels, options_.num_classes, !options_.ignore_background_class);
  if (with_metrics && options_.compute_eval_metrics)
    result.metrics = segmentation_metrics(out, labels, loss, options_.num_classes, options_.eval_metrics,
                                          options_.eval_ignore_classes);
  return result;
}

// Per image: 2 FLOPs per multiply-add of every conv, at its output's resolution.
double UNetModel::forward_flops_per_token() const {
  const auto& shape = options_.image_shape;
  const size_t dims = options_.use_conv3d ? 3 : 2;
  if (shape.size() < dims) return 0.0;
  double pixels = 1.0;
  for (size_t d = 0; d < dims; ++d) pixels *= double(shape[d]);
  const double factor = double(1 << dims);  // pixels per pixel of a 2x downscale
  double flops = 0.0;
  auto conv = [&](const ConvNormActImpl& c) {
    if (c.conv->stride > 1) pixels /= factor;
    flops += 2.0 * double(c.conv->weight.numel()) * pixels;
  };
  auto block = [&](const torch::nn::ModuleHolder<UNetBlockImpl>& b) {
    for (const auto& layer : *b->layers) conv(*layer->as<ConvNormActImpl>());
  };
  if (initial_conv) conv(*initial_conv);
  for (const auto& b : *encoder_blocks) {
    for (const auto& layer : *b->as<UNetBlockImpl>()->layers) conv(*layer->as<ConvNormActImpl>());
    if (options_.downscale_method == "max_pool") pixels /= factor;
  }
  block(bottleneck);
  for (size_t i = 0; i < decoder_blocks->size(); ++i) {
    flops += 2.0 * double(transpose_layers->ptr(i)->as<ConvTransposeLayerImpl>()->weight.numel()) * pixels;
    pixels *= factor;
    for (const auto& layer : *decoder_blocks->ptr(i)->as<UNetBlockImpl>()->layers) conv(*layer->as<ConvNormActImpl>());
  }
  conv(*final_conv);
  return flops;
}

ModelFamily unet_family() {
  ModelFamily f = make_model_family<UNetOptions, UNetModel>(
      "unet", {}, "UNet: image segmentation (2D or 3D), as modelzoo's vision/pytorch/unet.", {"input", "labels"});
  f.required_keys = {"encoder_filters", "decoder_filters"};
  f.model_keys_from_input = {{"num_classes", "num_classes"}, {"image_shape", "image_shape"}};
  f.input_keys_from_model = {
      {"loss", {"loss"}}};  // the data shapes its labels for the loss, as modelzoo's set_defaults passes it
  return f;
}

}  // namespace zoo::models
