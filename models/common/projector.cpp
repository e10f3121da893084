// Implementation of models/common/projector.h.
#include "models/common/projector.h"

#include <algorithm>
#include <cmath>

#include "models/common/ffn.h"
#include "models/common/layers.h"

namespace zoo::models {

const config::Schema<ProjectorOptions>& ProjectorOptions::schema() {
  using O = ProjectorOptions;
  static const config::Schema<O> s =
      config::Schema<O>("FeedForwardNetwork (a multimodal projector)",
                        "modelzoo's FeedForwardNetwork between an image tower and the decoder.")
          .field("name", &O::name, "FeedForwardNetwork (MLP: its old name).",
                 config::one_of({"FeedForwardNetwork", "MLP"}))
          .field("input_unit", &O::input_unit, "Required: the width of its input (the tower's hidden_size).")
          .field("layers_units", &O::layers_units,
                 "Required: the width of each layer's output; the last is the decoder's hidden_size.")
          .field("layers_activation", &O::layers_activation, "Each layer's activation, null for none.")
          .field("layers_dropout_rates", &O::layers_dropout_rates, "Each layer's dropout after its activation.")
          .field("use_bias", &O::use_bias, "Biases on every layer.")
          .field("kernel_initializer", &O::kernel_initializer,
                 "The layers' weights (null: xavier_uniform). LLaVA ignores it: it initializes its projectors as "
                 "torch.nn.Linear (uniform within +-1/sqrt(fan_in)).")
          .field("bias_initializer", &O::bias_initializer, "The biases (null: zeros). LLaVA's start at zero.")
          .field("output_layer_initializer", &O::output_layer_initializer,
                 "The last layer's weights, when set (null: kernel_initializer; LLaVA: torch.nn.Linear's).")
          .field("device", &O::device, "Ignored: zoo places the model by the run's device.")
          .field("static_dual_expert", &O::static_dual_expert,
                 "modelzoo's dual-expert layers: not in zoo (false only).")
          .validate([](const O& o, const auto& fail) {
            if (o.input_unit <= 0) fail("input_unit", "required: the width of the projector's input");
            if (o.layers_units.empty()) fail("layers_units", "required: at least one layer's width");
            for (int64_t u : o.layers_units)
              if (u <= 0) fail("layers_units", "expected widths > 0");
            if (o.layers_activation && o.layers_activation->size() != o.layers_units.size())
              fail("layers_activation", "expected one entry per layer (" + std::to_string(o.layers_units.size()) + ")");
            if (o.layers_activation)
              for (const auto& a : *o.layers_activation)
                if (a && (std::find(kActivationNames.begin(), kActivationNames.end(), *a) == kActivationNames.end() ||
                          is_glu(*a)))
                  fail("layers_activation", "'" + *a + "' is not an activation zoo knows for a dense layer");
            if (o.layers_dropout_rates && o.layers_dropout_rates->size() != o.layers_units.size())
              fail("layers_dropout_rates",
                   "expected one entry per layer (" + std::to_string(o.layers_units.size()) + ")");
            if (o.static_dual_expert) fail("static_dual_expert", "not supported by zoo");
          });
  return s;
}

ProjectorImpl::ProjectorImpl(const ProjectorOptions& o, const torch::TensorOptions& p, ProjectorInit init)
    : options_(o), init_(init) {
  ffn = register_module("ffn", torch::nn::ModuleList());
  int64_t in = o.input_unit;
  for (int64_t out : o.layers_units) {
    ffn->push_back(FFNLayer(in, out, o.use_bias, p));
    in = out;
  }
}

void ProjectorImpl::reset_parameters() {
  InitializerSpec xavier;
  xavier.name = "xavier_uniform";
  const InitializerSpec kernel = options_.kernel_initializer.value_or(xavier);
  const InitializerSpec bias = options_.bias_initializer.value_or(InitializerSpec{"zeros"});
  for (size_t i = 0; i < ffn->size(); ++i) {
    Dense& linear = ffn[i]->as<FFNLayerImpl>()->linear_layer;
    const bool last = i + 1 == ffn->size();
    InitializerSpec weight = last ? options_.output_layer_initializer.value_or(kernel) : kernel;
    if (init_ == ProjectorInit::kTorchLinear) {
      // torch.nn.Linear's kaiming_uniform(a = sqrt(5)): uniform within +-1/sqrt(fan_in), zero biases.
      const double bound = 1.0 / std::sqrt(double(linear->weight.size(1)));
      weight = InitializerSpec{"uniform"};
      weight.a = -bound;
      weight.b = bound;
      if (last && options_.output_layer_initializer) weight = *options_.output_layer_initializer;
      linear->reset_parameters(weight);
      continue;
    }
    apply_initializer(weight, linear->weight);
    if (linear->bias.defined() && !linear->bias.is_meta()) apply_initializer(bias, linear->bias);
  }
}

torch::Tensor ProjectorImpl::forward(torch::Tensor x) {
  for (size_t i = 0; i < ffn->size(); ++i) {
    x = ffn[i]->as<FFNLayerImpl>()->linear_layer(x);
    if (options_.layers_activation && (*options_.layers_activation)[i])
      x = activation(*(*options_.layers_activation)[i], x);
    const double rate = options_.layers_dropout_rates ? (*options_.layers_dropout_rates)[i].value_or(0.0) : 0.0;
    if (rate > 0) x = torch::dropout(x, rate, is_training());
  }
  return x;
}

double ProjectorImpl::flops_per_vector() const {
  double weights = 0;
  int64_t in = options_.input_unit;
  for (int64_t out : options_.layers_units) weights += double(in) * double(out), in = out;
  return 2 * weights;
}

}  // namespace zoo::models
