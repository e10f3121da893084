// Implementation of models/common/lora.h.
#include "models/common/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace zoo::models {
namespace {

// "zoo::models::MultiheadAttentionImpl" -> "MultiheadAttention".
std::string class_name(const torch::nn::Module& m) {
  std::string n = m.name();
  if (const size_t colon = n.rfind("::"); colon != std::string::npos) n = n.substr(colon + 2);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n;
}

// modelzoo's class names where zoo's differ.
const std::map<std::string, std::string>& modelzoo_class_names() {
  static const std::map<std::string, std::string> m = {{"Dense", "Linear"}, {"FeedForward", "FeedForwardNetwork"}};
  return m;
}

// PEFT's (Hugging Face's Llama-style) names of zoo's dense layers.
const std::map<std::string, std::string>& peft_names() {
  static const std::map<std::string, std::string> m = {
      {"self_attn.proj_q_dense_layer", "q_proj"},      {"self_attn.proj_k_dense_layer", "k_proj"},
      {"self_attn.proj_v_dense_layer", "v_proj"},      {"self_attn.proj_output_dense_layer", "o_proj"},
      {"ffn.ffn.0.linear_layer_for_glu", "gate_proj"}, {"ffn.ffn.0.linear_layer", "up_proj"},
      {"ffn.ffn.1.linear_layer", "down_proj"}};
  return m;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(path.substr(start, dot - start));
  parts.push_back(path.substr(start));
  return parts;
}

// Whether a dense layer sits in one of the model's repeated transformer layers (the default target).
bool in_transformer_layer(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return ends_with(n, "DecoderLayer") || ends_with(n, "EncoderLayer");  // T5's CrossDecoderLayer too
  });
}

}  // namespace

std::vector<std::string> module_names_for_matching(const torch::nn::Module& model, const std::string& path) {
  std::vector<std::string> names = split_path(path);
  const auto modules = model.named_modules("", /*include_self=*/false);
  std::string prefix;
  auto add_class = [&](const torch::nn::Module& m) {
    const std::string c = class_name(m);
    names.push_back(c);
    if (auto it = modelzoo_class_names().find(c); it != modelzoo_class_names().end()) names.push_back(it->second);
  };
  add_class(model);
  for (const auto& part : split_path(path)) {
    prefix += (prefix.empty() ? "" : ".") + part;
    if (const auto* m = modules.find(prefix)) add_class(**m);
  }
  if (std::string peft = peft_name_of(path); !peft.empty()) names.push_back(peft);
  return names;
}

std::string peft_name_of(const std::string& path) {
  for (const auto& [suffix, peft] : peft_names())
    if (ends_with(path, suffix)) return peft;
  return "";
}

LoraDense::LoraDense(DenseImpl& layer, const LoraGroup& group) : base(layer) {
  const auto options = base.weight.options().dtype(torch::kFloat);
  const int64_t in = base.weight.size(1), out = base.weight.size(0);
  lora_A = base.register_parameter("lora_A", torch::empty({group.r, in}, options));
  lora_B = base.register_parameter("lora_B", torch::zeros({out, group.r}, options));
  if (!lora_A.is_meta()) {
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(lora_A, std::sqrt(5.0));
  }
  lora_scaling = group.alpha / static_cast<double>(group.r);
  lora_dropout = group.dropout;
  lora_merge_weights = group.merge_weights;
}

// The scaling multiplies the r-wide product, not the output: one pass over
// (rows, r) instead of one over (rows, out) each way.
torch::Tensor LoraDense::scaled_input(const torch::Tensor& x, bool training) {
  const torch::Tensor in = lora_dropout > 0 ? torch::dropout(x, lora_dropout, training) : x;
  return torch::linear(in, lora_A) * lora_scaling;
}

torch::Tensor LoraDense::output(const torch::Tensor& x, bool training) {
  return torch::linear(scaled_input(x, training), lora_B);
}

// y + output(x), the sum written by the second GEMM itself (addmm).
torch::Tensor LoraDense::add_to(const torch::Tensor& y, const torch::Tensor& x, bool training) {
  const torch::Tensor h = scaled_input(x, training);
  const int64_t out = y.size(-1), r = h.size(-1), rows = y.numel() / out;
  return torch::addmm(y.reshape({rows, out}), h.reshape({rows, r}).to(y.scalar_type()), lora_B.t().to(y.scalar_type()))
      .view(y.sizes());
}

void LoraDense::merge() {
  if (unmerged_weight.defined()) return;
  torch::Tensor merged = merge_lora(base.weight, lora_A, lora_B, lora_scaling);
  unmerged_weight = base.weight;
  base.weight = merged;  // the registered parameter keeps the original; forward reads this member
}

void LoraDense::unmerge() {
  if (!unmerged_weight.defined()) return;
  base.weight = unmerged_weight;
  unmerged_weight = torch::Tensor();
}

std::vector<LoraLayer> lora_layers(torch::nn::Module& model) {
  std::vector<LoraLayer> out;
  for (const auto& item : model.named_modules())
    if (auto* d = item.value()->as<DenseImpl>())
      if (auto* lora = dynamic_cast<LoraDense*>(d->adapter.get())) out.push_back({item.key(), lora});
  return out;
}

std::vector<LoraLayer> apply_lora(torch::nn::Module& model, const std::vector<LoraGroup>& groups) {
  std::vector<int64_t> matched(groups.size(), 0);
  std::vector<LoraLayer> adapted;
  for (const auto& item : model.named_modules()) {
    auto* dense = item.value()->as<DenseImpl>();
    if (!dense) continue;
    const std::vector<std::string> names = module_names_for_matching(model, item.key());
    const std::set<std::string> have(names.begin(), names.end());
    for (size_t g = 0; g < groups.size(); ++g) {
      const LoraGroup& group = groups[g];
      const bool targeted = group.target_modules
                                ? std::all_of(group.target_modules->begin(), group.target_modules->end(),
                                              [&](const std::string& t) { return have.count(t) > 0; })
                                : in_transformer_layer(names);
      if (!targeted) continue;
      ++matched[g];
      const int64_t in = dense->weight.size(1), out = dense->weight.size(0);
      if (group.r > std::min(in, out))
        throw std::invalid_argument("lora_params" + (groups.size() > 1 ? "." + std::to_string(g) : std::string()) +
                                    ".r: " + std::to_string(group.r) + " is larger than " + item.key() +
                                    "'s smaller side (" + std::to_string(std::min(in, out)) +
                                    "): a rank past min(in, out) adds parameters, "
                                    "not capacity");
      auto lora = std::make_shared<LoraDense>(*dense, group);
      dense->adapter = lora;
      adapted.push_back({item.key(), lora.get()});
      break;
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (matched[g] > 0) continue;
    std::string list, example, first;
    if (groups[g].target_modules)
      for (const auto& t : *groups[g].target_modules) list += (list.empty() ? "" : ", ") + t;
    for (const auto& item : model.named_modules())
      if (item.value()->as<DenseImpl>() && first.empty()) first = item.key();
    for (const auto& n : module_names_for_matching(model, first)) example += (example.empty() ? "" : ", ") + n;
    throw std::invalid_argument("lora_params" + (groups.size() > 1 ? "." + std::to_string(g) : std::string()) +
                                ".target_modules: [" + list + "] matches no dense layer" +
                                (g > 0 ? " (or only layers an earlier group took)" : "") +
                                "; a layer matches when every name is among its module names (modelzoo's rule; "
                                "for PEFT's any-of lists such as [q_proj, v_proj], give one group per name), e.g. " +
                                first + " answers to [" + example + "]");
  }
  for (const auto& item : model.named_parameters()) {
    const bool adapter = ends_with(item.key(), ".lora_A") || ends_with(item.key(), ".lora_B");
    item.value().set_requires_grad(adapter);
  }
  return adapted;
}

torch::Tensor merge_lora(const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b, double scaling) {
  const auto wide = torch::promote_types(w.scalar_type(), torch::kFloat);
  torch::NoGradGuard no_grad;
  return (w.to(wide) + torch::matmul(b.to(wide), a.to(wide)) * scaling).to(w.scalar_type());
}

LoraMergeGuard::LoraMergeGuard(torch::nn::Module& model) {
  for (const auto& [path, layer] : lora_layers(model)) {
    if (!layer->lora_merge_weights || layer->unmerged_weight.defined()) continue;
    layer->merge();
    merged_.push_back(layer);
  }
}

LoraMergeGuard::~LoraMergeGuard() {
  for (LoraDense* layer : merged_) layer->unmerge();
}

}  // namespace zoo::models
