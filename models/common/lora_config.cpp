// Implementation of models/common/lora_config.h.
#include "models/common/lora_config.h"

namespace zoo::models {

const config::Schema<LoraGroup>& LoraGroup::schema() {
  using L = LoraGroup;
  static const config::Schema<L> s =
      config::Schema<L>("lora_params", "LoRA adapters on the model's dense layers (docs/finetuning.md).")
          .field("r", &L::r,
                 "Rank of the adapters A (r x in) and B (out x r); at most the smaller side of each adapted layer.",
                 config::Check<int64_t>([](const int64_t& r) {
                   return r >= 1 && r <= 65536 ? std::string() : std::string("expected a rank from 1 to 65536");
                 }))
          .field("alpha", &L::alpha, "The adapter's output is scaled by alpha / r.",
                 config::in_range(0.0, 1e6, /*hi_open=*/false))
          .field("dropout", &L::dropout, "Dropout on the adapter's input while training.",
                 config::in_range(0.0, 1.0, /*hi_open=*/true))
          .field("fan_in_fan_out", &L::fan_in_fan_out,
                 "modelzoo's flag for weights stored (in, out); zoo's are all (out, in), so it changes nothing.")
          .field("merge_weights", &L::merge_weights,
                 "Fold B A into the weights for evaluation (the unmerged weights come back for training).")
          .field("target_modules", &L::target_modules,
                 "Names that must all be among a dense layer's module names (its path, zoo's class names such as "
                 "TransformerDecoderLayer, MultiheadAttention, FeedForwardNetwork, Linear, or PEFT's q_proj, k_proj, "
                 "v_proj, o_proj, gate_proj, up_proj, down_proj); unset: every dense layer of the decoder/encoder "
                 "layers.");
  return s;
}

std::vector<LoraGroup> parse_lora_params(const YAML::Node& node, const config::Context& ctx) {
  if (node.IsMap()) return {LoraGroup::schema().parse(node, ctx.child("lora_params"))};
  if (!node.IsSequence() || node.size() == 0)
    ctx.fail(node, "lora_params",
             "expected a mapping of LoRA settings (r, alpha, dropout, target_modules, ...) or a "
             "non-empty list of them, got " +
                 config::describe_node(node));
  std::vector<LoraGroup> groups;
  for (size_t i = 0; i < node.size(); ++i)
    groups.push_back(LoraGroup::schema().parse(node[i], ctx.child("lora_params." + std::to_string(i))));
  return groups;
}

YAML::Node lora_params_to_yaml(const std::vector<LoraGroup>& groups) {
  if (groups.size() == 1) return LoraGroup::schema().to_yaml(groups[0]);
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& g : groups) list.push_back(LoraGroup::schema().to_yaml(g));
  return list;
}

}  // namespace zoo::models
