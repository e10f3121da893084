// Implementation of models/hf/headless.h.
#include "models/hf/headless.h"

#include <set>

#include "models/common/layers.h"
#include "models/hf/hf_key_map.h"

namespace zoo::models {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool in_head(const std::string& zoo, const HeadlessParts& parts) {
  for (const auto& p : parts.zoo_head)
    if (starts_with(zoo, p)) return true;
  return false;
}

// The prefix every base-model tensor of HF's full model has (hf_prefix, else their common first segment).
std::string base_prefix(const HfKeyMap& m) {
  if (!m.hf_prefix.empty()) return m.hf_prefix;
  std::string prefix;
  auto first_segment = [](const std::string& k) { return k.substr(0, k.find('.') + 1); };
  for (const auto& t : m.tensors) {
    const std::string seg = first_segment(t.hf);
    if (prefix.empty()) prefix = seg;
    else if (prefix != seg) return "";
  }
  return prefix;
}

// The full map's head tensors alone (their HF names are the head's).
HfKeyMap head_map(const HfKeyMap& full, const HeadlessParts& parts) {
  HfKeyMap m;
  m.qkv = full.qkv;
  for (const auto& t : full.tensors)
    if (in_head(t.zoo, parts)) m.tensors.push_back(t);
  return m;
}

// The full map without the head, its HF names without the base prefix (what PEFT's adapters name).
HfKeyMap headless_map(const HfKeyMap& full, const HeadlessParts& parts) {
  HfKeyMap m = full;
  m.tensors.clear();
  m.hf_tied_copies.clear();
  for (const auto& t : full.tensors)
    if (!in_head(t.zoo, parts)) m.tensors.push_back(t);
  const std::string prefix = base_prefix(m);
  auto strip = [&](std::string& hf) {
    if (!prefix.empty() && starts_with(hf, prefix)) hf = hf.substr(prefix.size());
  };
  for (auto& t : m.tensors) strip(t.hf);
  for (auto& f : m.fused) strip(f.hf);
  m.hf_prefix.clear();
  return m;
}

// The base prefix of the full map without its head.
std::string prefix_of(const HfKeyMap& full, const HeadlessParts& parts) {
  HfKeyMap body = full;
  body.tensors.clear();
  for (const auto& t : full.tensors)
    if (!in_head(t.zoo, parts)) body.tensors.push_back(t);
  return base_prefix(body);
}

}  // namespace

std::string base_architecture(const std::string& architecture) {
  std::string a = architecture;
  if (const size_t head = a.rfind("LMHead"); head != std::string::npos) return a.erase(head, 6);
  if (const size_t f = a.find("For"); f != std::string::npos && f > 0) return a.substr(0, f) + "Model";
  return a;
}

HfAdapter headless_adapter(const HfAdapter& full, const HeadlessParts& parts) {
  HfAdapter a = full;
  a.headless = true;
  a.description =
      "Hugging Face's base model (AutoModel, e.g. LlamaModel): no LM head; import initializes zoo's head, export "
      "drops it";
  if (parts.config_from_weights) a.config_from_weights = parts.config_from_weights;
  // The full converter does the work (fused q/k/v, rotary order, computed buffers): on import the head it
  // expects is the one zoo initializes, on export the head and the base prefix are taken off its result.
  const auto keys = full.key_map;
  a.key_map = [keys, parts](const ModelSpec& m) { return headless_map(keys(m), parts); };
  a.from_hf = [keys, parts, from_hf = full.from_hf](const StateDict& hf, const ModelSpec& m) {
    const HfKeyMap map = keys(m);
    const std::string prefix = prefix_of(map, parts);
    StateDict head;
    parts.initialize_head(head, m);
    StateDict with_head = map_to_hf(head_map(map, parts), head);
    for (const auto& [k, t] : hf) with_head[starts_with(k, prefix) ? k : prefix + k] = t;
    StateDict zoo = from_hf(with_head, m);
    for (const auto& [k, t] : head) zoo[k] = t;
    return zoo;
  };
  a.to_hf = [keys, parts, to_hf = full.to_hf](const StateDict& zoo, const ModelSpec& m) {
    const HfKeyMap map = keys(m);
    const std::string prefix = prefix_of(map, parts);
    std::set<std::string> head;
    for (const auto& t : head_map(map, parts).tensors) head.insert(t.hf);
    StateDict base;
    for (const auto& [k, t] : to_hf(zoo, m))
      if (starts_with(k, prefix) && !head.count(k)) base[k.substr(prefix.size())] = t;
    return base;
  };
  a.config_to_hf = [to = full.config_to_hf](const ModelSpec& m) {
    nlohmann::json c = to(m);
    if (c.contains("architectures") && c.at("architectures").is_array())
      for (auto& arch : c.at("architectures")) arch = base_architecture(arch.get<std::string>());
    return c;
  };
  // A config.json that names a base model class is this converter's; the full one's test applies too.
  a.claims = [claims = full.claims](const nlohmann::json& c) {
    if (!c.contains("architectures") || !c.at("architectures").is_array() || c.at("architectures").empty() ||
        !c.at("architectures")[0].is_string())
      return false;
    const std::string arch = c.at("architectures")[0].get<std::string>();
    return arch == base_architecture(arch) && (!claims || claims(c));
  };
  return a;
}

void add_headless_converters(ModelFamily& f, const std::vector<std::string>& names, const HeadlessParts& parts) {
  for (const auto& name : names) f.hf[name + "-headless"] = headless_adapter(f.hf.at(name), parts);
}

HeadlessParts decoder_lm_head_parts(std::function<const DecoderLmOptions&(const ModelSpec&)> options_of) {
  HeadlessParts parts;
  parts.zoo_head = {"lm_head."};
  parts.initialize_head = [options_of](StateDict& zoo, const ModelSpec& m) {
    const DecoderLmOptions& o = options_of(m);
    if (o.share_embedding_weights && !o.use_bias_in_output) return;
    OutputHead head(o.hidden_size, o.vocab_size, !o.share_embedding_weights, o.use_bias_in_output,
                    torch::TensorOptions());
    InitializerSpec init;  // as Gpt2Model::reset_parameters: normal(0, initializer_range)
    init.name = "normal";
    init.std = o.initializer_range;
    head->reset_parameters(init);
    for (const auto& p : head->named_parameters()) zoo["lm_head." + p.key()] = p.value().detach();
  };
  return parts;
}

HeadlessParts built_head_parts(std::vector<std::string> zoo_head) {
  HeadlessParts parts;
  parts.zoo_head = zoo_head;
  parts.initialize_head = [zoo_head](StateDict& zoo, const ModelSpec& m) {
    const auto model = m.build(torch::TensorOptions());
    for (const auto& p : model->named_parameters())
      for (const auto& prefix : zoo_head)
        if (p.key().rfind(prefix, 0) == 0) zoo[p.key()] = p.value().detach();
  };
  return parts;
}

}  // namespace zoo::models
