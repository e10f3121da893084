// Implementation of models/fc_mnist/fc_mnist.h.
#include "models/fc_mnist/fc_mnist.h"

#include <cmath>

namespace zoo::models {

const config::Schema<FcMnistOptions>& FcMnistOptions::schema() {
  using O = FcMnistOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (fc_mnist)", "FC-MNIST: an MLP classifier of MNIST digits, as modelzoo's fc_mnist.")
          .field("hidden_sizes", &O::hidden_sizes, "Width of each hidden layer (takes precedence over depth).")
          .field("depth", &O::depth, "Hidden layers, each hidden_size wide (without hidden_sizes).",
                 config::if_set(config::non_negative<int64_t>()))
          .field("hidden_size", &O::hidden_size, "Width of the hidden layers (without hidden_sizes).",
                 config::if_set(config::positive<int64_t>()))
          .field("activation_fn", &O::activation_fn, "relu after each hidden layer, or null for none.",
                 config::if_set(config::one_of({"relu"})))
          .field("dropout", &O::dropout, "Dropout after each hidden layer.", config::in_range(0.0, 1.0, false))
          .field("use_bias", &O::use_bias, "Bias in every layer.")
          .field("disable_softmax", &O::disable_softmax, "The NLL loss reads the logits without log-softmax.")
          .field("compute_eval_metrics", &O::compute_eval_metrics, "Eval also reports accuracy.")
          .field("to_float16", &O::to_float16,
                 "Accepted for modelzoo configs; zoo keeps float32 weights and leaves precision to mixed_precision.")
          .validate([](const O& o, const auto& fail) {
            if (!o.hidden_sizes && (!o.depth || !o.hidden_size))
              fail("hidden_size", "required: hidden_size and depth, or hidden_sizes");
            if (o.hidden_sizes)
              for (int64_t w : *o.hidden_sizes)
                if (w <= 0) fail("hidden_sizes", "expected widths > 0");
          });
  return s;
}

FcMnistModel::FcMnistModel(const FcMnistOptions& o, const torch::TensorOptions& p) : options_(o) {
  fc_layers = register_module("fc_layers", torch::nn::ModuleList());
  int64_t in = 28 * 28;
  for (int64_t width : o.layers()) {
    fc_layers->push_back(Dense(in, width, o.use_bias, p));
    in = width;
  }
  last_layer = register_module("last_layer", Dense(in, 10, o.use_bias, p));
}

void FcMnistModel::reset_parameters() {
  // torch.nn.Linear's own initialization, which modelzoo keeps: U(-1/sqrt(in), 1/sqrt(in)) for weights and biases.
  torch::NoGradGuard no_grad;
  auto init = [](DenseImpl& d) {
    if (d.weight.device().is_meta()) return;
    const double bound = 1.0 / std::sqrt(double(d.weight.size(1)));
    d.weight.uniform_(-bound, bound);
    if (d.bias.defined()) d.bias.uniform_(-bound, bound);
  };
  for (auto& layer : *fc_layers) init(*layer->as<DenseImpl>());
  init(*last_layer);
}

torch::Tensor FcMnistModel::logits(const torch::Tensor& input) {
  torch::Tensor x = input.flatten(1);
  for (auto& layer : *fc_layers) {
    x = layer->as<DenseImpl>()->forward(x);
    if (options_.activation_fn) x = torch::relu(x);
    if (options_.dropout > 0) x = torch::dropout(x, options_.dropout, is_training());
  }
  return last_layer(x);
}

ModelOutput FcMnistModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor out = logits(batch.at("input")).to(torch::kFloat);
  const torch::Tensor labels = batch.at("labels").reshape({-1}).to(torch::kLong);
  ModelOutput result;
  result.loss = torch::nll_loss(options_.disable_softmax ? out : torch::log_softmax(out, 1), labels);
  if (with_metrics && options_.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct = (out.argmax(-1) == labels).to(torch::kFloat);
    result.metrics["accuracy"] = {correct.sum(), torch::tensor(double(correct.numel())), MetricTerm::Reduce::mean};
  }
  return result;
}

// Per image ("token"): 2 FLOPs per weight.
double FcMnistModel::forward_flops_per_token() const {
  double flops = 0;
  int64_t in = 28 * 28;
  for (int64_t width : options_.layers()) flops += 2.0 * double(in) * double(width), in = width;
  return flops + 2.0 * double(in) * 10;
}

ModelFamily fc_mnist_family() {
  ModelFamily f = make_model_family<FcMnistOptions, FcMnistModel>(
      "fc_mnist", {}, "FC-MNIST: an MLP classifier of MNIST digits, as modelzoo's fc_mnist model.",
      {"input", "labels"});
  f.default_data_processor = "MNISTDataProcessor";  // modelzoo's fc_mnist/run.py picks its loader itself
  return f;
}

}  // namespace zoo::models
