// The towers modelzoo's multimodal models (llava, multimodal_simple) name in
// their model sections, parsed once: a tower section carries its model's
// `name` beside that model's keys; the image tower is a ViTModel, the text
// tower a decoder of zoo's gpt2 family (LlamaModel, llama, mistral, ...).
// Defines: keys_except, NamedSection, named_section, named_mapping, parse_vit_tower, layer_from_end,
// tower_features, DecoderTower, logits_with_key_padding, parse_decoder_tower.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "models/gpt2/gpt2.h"
#include "models/registry.h"
#include "models/vit/vit.h"

namespace zoo::models {

// `section`'s keys but `keys` (their nodes, which keep their lines): a
// family's own keys beside the towers it parses apart.
YAML::Node keys_except(const YAML::Node& section, const std::vector<std::string>& keys);

// A tower's mapping split into its `name` and the rest of its keys.
struct NamedSection {
  std::string name;
  YAML::Node rest;
};
// section[key] of `parent`, at `ctx`; a ConfigError (saying `expected`) when
// it is missing, not a mapping, or has no name.
NamedSection named_section(const YAML::Node& parent, const std::string& key, const config::Context& ctx,
                           const std::string& expected);
// The same for a mapping `section` found elsewhere (a list entry), at `ctx`.
NamedSection named_mapping(const YAML::Node& section, const config::Context& ctx, const std::string& expected);

// ViTModel's keys (`tower.rest`, its name checked: ViTModel or vit), at `ctx`;
// `model` names the family in the error, e.g. "llava".
VitOptions parse_vit_tower(const NamedSection& tower, const YAML::Node& name_at, const config::Context& ctx,
                           const std::string& model);

// A layer index as modelzoo's towers take it (negative: from the end, -1
// the last of `layers`) made 0-based; the caller has checked its range.
inline int64_t layer_from_end(int64_t index, int64_t layers) { return ((index % layers) + layers) % layers; }

// The features a ViT tower gives per image: its sequence, less [CLS] when
// `drop_cls` (modelzoo's image_feature_select_mode patch).
inline int64_t tower_features(const VitOptions& tower, bool drop_cls) {
  return tower.sequence_length() - (drop_cls ? 1 : 0);
}

// The text tower: its family's spec and name as written.
struct DecoderTower {
  std::string name;
  std::shared_ptr<const ModelSpec> spec;
  const Gpt2Options& options() const { return dynamic_cast<const Gpt2Spec&>(*spec).options(); }
  // The section as the resolved params write it back, name included.
  YAML::Node to_yaml() const;
  std::shared_ptr<Gpt2Model> build_uninitialized(const torch::TensorOptions& p) const;
};
// The decoder's (B, T, >= V) logits on input embeddings with image features
// in them, honouring the batch's key_padding_mask when it has one (1: a
// position no query attends to, e.g. a text-only sample's image positions).
torch::Tensor logits_with_key_padding(Gpt2Model& text, const torch::Tensor& embeddings, const Features& batch);

// parent[key] parsed by the family its name picks, which must be gpt2's
// (a mixture-of-experts decoder is refused too).
DecoderTower parse_decoder_tower(const YAML::Node& parent, const std::string& key, const config::Context& ctx,
                                 const std::string& model);

}  // namespace zoo::models
