// Implementation of models/common/ffn.h.
#include "models/common/ffn.h"

#include <stdexcept>

#include "models/kernels/dense_kernel.h"

namespace zoo::models {

const std::vector<std::string> kActivationNames = {
    "gelu",       "gelu_new", "gelu_fast", "quick_gelu", "squared_gelu",   "relu",      "squared_relu",
    "leaky_relu", "silu",     "swish",     "mish",       "tanh",           "sigmoid",   "linear",
    "swiglu",     "geglu",    "reglu",     "liglu",      "swiglu_clamped", "geglu_tanh"};

bool is_glu(const std::string& n) {
  return n == "swiglu" || n == "geglu" || n == "reglu" || n == "liglu" || n == "swiglu_clamped" || n == "geglu_tanh";
}

torch::Tensor activation(const std::string& name, const torch::Tensor& x) {
  if (name == "gelu") return torch::gelu(x);  // exact erf form, as torch.nn.GELU()
  if (name == "gelu_new" || name == "gelu_fast") return torch::gelu(x, "tanh");
  if (name == "quick_gelu") return x * torch::sigmoid(1.702 * x);
  if (name == "squared_gelu") return torch::gelu(x).square();
  if (name == "relu") return torch::relu(x);
  if (name == "squared_relu") return torch::relu(x).square();  // Primer (So et al., 2021)
  if (name == "leaky_relu") return torch::leaky_relu(x, 0.01);
  if (name == "mish") return x * torch::tanh(torch::softplus(x));
  if (name == "silu" || name == "swish") return torch::silu(x);
  if (name == "tanh") return torch::tanh(x);
  if (name == "sigmoid") return torch::sigmoid(x);
  if (name == "linear") return x;
  if (name == "swiglu") return torch::silu(x);  // the gate's activation
  if (name == "geglu") return torch::gelu(x);
  // zoo's own name: Hugging Face's gated-gelu (T5 v1.1, FLAN-T5) gates with GELU's tanh approximation.
  if (name == "geglu_tanh") return torch::gelu(x, "tanh");
  if (name == "reglu") return torch::relu(x);
  if (name == "liglu") return x;
  throw std::invalid_argument("unknown nonlinearity '" + name + "'");
}

torch::Tensor glu(const std::string& name, const torch::Tensor& up, const torch::Tensor& gate) {
  if (name == "swiglu_clamped") {
    constexpr double kLimit = 7.0;
    return (torch::clamp(up, -kLimit, kLimit) + 1) * activation("quick_gelu", torch::clamp_max(gate, kLimit));
  }
  return activation(name, gate) * up;
}

FFNLayerImpl::FFNLayerImpl(int64_t in, int64_t out, bool bias, const torch::TensorOptions& p, bool glu) {
  linear_layer = register_module("linear_layer", Dense(in, out, bias, p));
  if (glu) linear_layer_for_glu = register_module("linear_layer_for_glu", Dense(in, out, bias, p));
}

FeedForwardImpl::FeedForwardImpl(const FeedForwardOptions& o, const torch::TensorOptions& p) : options_(o) {
  ffn = register_module("ffn", torch::nn::ModuleList());
  ffn->push_back(FFNLayer(o.input_size, o.filter_size, o.use_bias, p, is_glu(o.nonlinearity)));
  ffn->push_back(FFNLayer(o.filter_size, o.input_size, o.use_bias, p));
}

void FeedForwardImpl::reset_parameters() {
  FFNLayerImpl* first = ffn[0]->as<FFNLayerImpl>();
  first->linear_layer->reset_parameters(options_.initializer);
  if (first->linear_layer_for_glu) first->linear_layer_for_glu->reset_parameters(options_.initializer);
  ffn[1]->as<FFNLayerImpl>()->linear_layer->reset_parameters(options_.output_initializer);
}

const torch::Tensor& FeedForwardImpl::output_bias() const {
  return ffn->ptr(1)->as<FFNLayerImpl>()->linear_layer->bias;
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x, bool without_output_bias) {
  FFNLayerImpl* first = ffn[0]->as<FFNLayerImpl>();
  Dense up = first->linear_layer;
  torch::Tensor h;
  if (first->linear_layer_for_glu) {
    h = glu(options_.nonlinearity, up(x), first->linear_layer_for_glu(x));
  } else if (auto fused = dense_activation_of(options_.nonlinearity);
             fused && !up->adapted() &&
             fused_dense_available(x, up->weight, up->bias)) {  // the activation inside the layer's node
    h = fused_dense(x, up->weight, up->bias, *fused);
  } else {
    h = activation(options_.nonlinearity, up(x));
  }
  if (options_.dropout > 0) h = torch::dropout(h, options_.dropout, is_training());
  Dense down = ffn[1]->as<FFNLayerImpl>()->linear_layer;
  return without_output_bias ? down->forward_without_bias(h) : down(h);
}

std::shared_ptr<torch::nn::Module> one_layer_network(const std::shared_ptr<torch::nn::Module>& layer) {
  auto slot = std::make_shared<torch::nn::Module>();
  slot->register_module("linear_layer", layer);
  auto network = std::make_shared<torch::nn::Module>();
  network->register_module("ffn", torch::nn::ModuleList(slot));
  return network;
}

}  // namespace zoo::models
