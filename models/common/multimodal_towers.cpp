// Implementation of models/common/multimodal_towers.h.
#include "models/common/multimodal_towers.h"

#include <algorithm>
#include <optional>

namespace zoo::models {

YAML::Node keys_except(const YAML::Node& section, const std::vector<std::string>& keys) {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : section)
    if (std::find(keys.begin(), keys.end(), kv.first.as<std::string>()) == keys.end()) out[kv.first] = kv.second;
  return out;
}

NamedSection named_mapping(const YAML::Node& section, const config::Context& ctx, const std::string& expected) {
  NamedSection out{"", YAML::Node(YAML::NodeType::Map)};
  std::optional<std::string> name;
  for (const auto& kv : section) {
    if (kv.first.as<std::string>() == "name") name = config::Value<std::string>::parse(kv.second, ctx, "name");
    else out.rest[kv.first] = kv.second;
  }
  if (!name) ctx.fail(section, "name", "required: " + expected);
  out.name = *name;
  return out;
}

NamedSection named_section(const YAML::Node& parent, const std::string& key, const config::Context& ctx,
                           const std::string& expected) {
  const YAML::Node section = parent[key];
  if (!section.IsDefined() || !section.IsMap()) ctx.fail(section.IsDefined() ? section : parent, key, expected);
  return named_mapping(section, ctx.child(key), expected);
}

VitOptions parse_vit_tower(const NamedSection& tower, const YAML::Node& name_at, const config::Context& ctx,
                           const std::string& model) {
  if (tower.name != "ViTModel" && tower.name != "vit")
    ctx.fail(name_at, "name",
             "zoo's " + model + " takes a ViTModel image tower (modelzoo's ViTModel or vit), not '" + tower.name + "'");
  return VitOptions::schema().parse(tower.rest, ctx);
}

YAML::Node DecoderTower::to_yaml() const {
  YAML::Node out(YAML::NodeType::Map);
  out["name"] = name;
  for (const auto& kv : spec->to_yaml()) out[kv.first] = kv.second;
  return out;
}

std::shared_ptr<Gpt2Model> DecoderTower::build_uninitialized(const torch::TensorOptions& p) const {
  return std::dynamic_pointer_cast<Gpt2Model>(spec->build_uninitialized(p));
}

torch::Tensor logits_with_key_padding(Gpt2Model& text, const torch::Tensor& embeddings, const Features& batch) {
  const torch::Tensor padding = optional_feature(batch, "key_padding_mask");
  return text.padded_logits_from_embeddings(embeddings, padding.defined() ? padding == 0 : padding);
}

DecoderTower parse_decoder_tower(const YAML::Node& parent, const std::string& key, const config::Context& ctx,
                                 const std::string& model) {
  const config::Context text_ctx = ctx.child(key);
  const NamedSection text = named_section(parent, key, ctx, "the decoder, named e.g. LlamaModel");
  const ModelFamily* family = nullptr;
  try {
    family = &find_model(text.name);
  } catch (const std::invalid_argument& e) {
    text_ctx.fail(parent[key]["name"], "name", e.what());
  }
  DecoderTower out{text.name, family->parse(text.rest, text_ctx)};
  if (!dynamic_cast<const Gpt2Spec*>(out.spec.get()))
    text_ctx.fail(parent[key]["name"], "name",
                  "zoo's " + model +
                      " takes a decoder of the gpt2 family (LlamaModel, llama, mistral, gpt2, ...), not " + text.name);
  if (out.options().moe.enabled())
    text_ctx.fail(parent[key], "moe", "zoo's " + model + " does not take a mixture-of-experts decoder yet");
  return out;
}

}  // namespace zoo::models
