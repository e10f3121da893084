// Hugging Face's ViT (ViTForImageClassification, model_type vit) <-> zoo's
// vision_transformer. Besides the renames, two tensors change shape: HF's
// cls_token (1, 1, C) is zoo's cls_embedding (C), and HF's position table
// (1, 1 + N, C) holds [CLS] first where modelzoo's holds it last.
#include "models/vit/hf_adapter.h"

#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

const VitOptions& vit_options_of(const ModelSpec& model) {
  return spec_options<TypedModelSpec<VitOptions, VitModel>>(
      model, "the vit Hugging Face converter takes a vision_transformer model section");
}

const char* const kCls = "vit.embeddings.cls_token";
const char* const kPositions = "vit.embeddings.position_embeddings";
const char* const kPatches = "vit.embeddings.patch_embeddings.projection.weight";

HfKeyMap vit_keys(const VitOptions& o) {
  HfKeyMap m;
  m.hf_prefix = "vit.";
  const std::string e = "vit_model.embedding_layer.", enc = "vit_model.encoder.transformer_encoder.";
  m.tensors.push_back({kCls, e + "cls_embedding"});
  m.tensors.push_back({kPositions, e + "position_embeddings.weight"});
  m.tensors.push_back({kPatches, e + "linear_proj.weight"});
  m.tensors.push_back({"vit.embeddings.patch_embeddings.projection.bias", e + "linear_proj.bias"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "vit.encoder.layer." + std::to_string(i) + ".", z = enc + "layers." + std::to_string(i) + ".";
    map_encoder_layer_linears(m, h, z, "attention.attention.");
    m.norm(h + "layernorm_before", z + "norm1");  // pre-norm: before attention, and before the FFN
    m.norm(h + "layernorm_after", z + "norm2");
  }
  m.norm("vit.layernorm", enc + "norm");
  m.linear("classifier", "classifier.classifier.ffn.0.linear_layer");
  m.hf_buffers = {"vit.pooler."};  // ViTModel's pooler, which the classifier does not use
  return m;
}

int64_t square_or_pair(const nlohmann::json& c, const std::string& key, int index, int64_t fallback) {
  if (!c.contains(key)) return fallback;
  const auto& v = c.at(key);
  return v.is_array() ? v.at(index).get<int64_t>() : v.get<int64_t>();
}

YAML::Node vit_model(const nlohmann::json& c) {
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = "vision_transformer";
  int64_t classes = 2;
  if (c.contains("id2label") && c.at("id2label").is_object()) classes = int64_t(c.at("id2label").size());
  if (c.contains("num_labels")) classes = c.at("num_labels").get<int64_t>();
  m["num_classes"] = classes;
  m["image_size"] =
      std::vector<int64_t>{square_or_pair(c, "image_size", 0, 224), square_or_pair(c, "image_size", 1, 224)};
  m["patch_size"] =
      std::vector<int64_t>{square_or_pair(c, "patch_size", 0, 16), square_or_pair(c, "patch_size", 1, 16)};
  m["num_channels"] = c.value("num_channels", 3);
  m["hidden_size"] = c.at("hidden_size").get<int64_t>();
  m["num_hidden_layers"] = c.at("num_hidden_layers").get<int64_t>();
  m["num_heads"] = c.at("num_attention_heads").get<int64_t>();
  m["filter_size"] = c.at("intermediate_size").get<int64_t>();
  m["nonlinearity"] = zoo_activation(c, "hidden_act", "gelu");
  m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-12);
  m["dropout_rate"] = c.value("hidden_dropout_prob", 0.0);
  m["attention_dropout_rate"] = c.value("attention_probs_dropout_prob", 0.0);
  m["initializer_range"] = c.value("initializer_range", 0.02);
  m["use_projection_bias_in_attention"] = c.value("qkv_bias", true);
  m["use_conv_patchified_embedding"] = true;
  m["prepend_cls_token"] = true;
  m["norm_first"] = true;
  m["use_final_layer_norm"] = true;
  m["position_embedding_type"] = "learned";
  return m;
}

nlohmann::json vit_config(const VitOptions& o) {
  const ExportCheck check("vit");
  check.expect(o.prepend_cls_token, "prepend_cls_token", "false", "classifies a [CLS] token")
      .expect(o.position_embedding_type.has_value(), "position_embedding_type", "null", "has learned positions")
      .expect(o.norm_first, "norm_first", "false", "normalizes before attention and the FFN")
      .expect(o.use_final_layer_norm, "use_final_layer_norm", "false", "normalizes the last layer's output")
      .expect(!o.use_encoder_pooler_layer, "use_encoder_pooler_layer", "true", "classifies [CLS] without a pooler")
      .expect(!o.use_dinov2_classifier, "use_dinov2_classifier", "true", "classifies [CLS] alone")
      .expect(!o.use_post_embed_layer_norm, "use_post_embed_layer_norm", "true", "has no norm on the embeddings")
      .expect(!o.layerscale_value, "layerscale_value", std::to_string(o.layerscale_value.value_or(0)),
              "has no layer scale")
      .expect(o.attention_module == "aiayn_attention", "attention_module", o.attention_module,
              "has one key/value head per query head")
      .expect(o.attention_type == "scaled_dot_product", "attention_type", o.attention_type,
              "scales scores by 1/sqrt(head size)")
      .expect(o.use_ffn_bias && o.use_ffn_bias_in_attention && o.use_embed_proj_bias && o.use_bias_in_output,
              "use_ffn_bias", "false", "has every bias but (qkv_bias) q/k/v's");
  return {{"model_type", "vit"},
          {"architectures", {"ViTForImageClassification"}},
          {"hidden_size", o.hidden_size},
          {"num_hidden_layers", o.num_hidden_layers},
          {"num_attention_heads", o.num_heads},
          {"intermediate_size", o.filter_size},
          {"hidden_act", o.nonlinearity},
          {"hidden_dropout_prob", o.dropout_rate},
          {"attention_probs_dropout_prob", o.attention_dropout_rate},
          {"initializer_range", o.initializer_range},
          {"layer_norm_eps", o.layer_norm_epsilon},
          {"image_size",
           o.image_size[0] == o.image_size[1] ? nlohmann::json(o.image_size[0]) : nlohmann::json(o.image_size)},
          {"patch_size",
           o.patch_size[0] == o.patch_size[1] ? nlohmann::json(o.patch_size[0]) : nlohmann::json(o.patch_size)},
          {"num_channels", o.num_channels},
          {"qkv_bias", o.use_projection_bias_in_attention},
          {"num_labels", o.num_classes}};
}

}  // namespace

HfAdapter vit_hf_adapter() {
  HfAdapter a;
  a.model_types = {"vit"};
  a.config_from_hf = vit_model;
  a.config_to_hf = [](const ModelSpec& spec) { return vit_config(vit_options_of(spec)); };
  a.from_hf = [](const StateDict& hf, const ModelSpec& spec) {
    StateDict in = hf;
    for (const std::string prefix : {"vit.", ""}) {  // "": a ViT saved without its "vit." prefix
      if (auto it = in.find(prefix + "embeddings.cls_token"); it != in.end()) it->second = it->second.reshape({-1});
      if (auto it = in.find(prefix + "embeddings.position_embeddings"); it != in.end())  // HF's (1, N + 1, C)
        it->second = cls_row_last(it->second.reshape({it->second.size(-2), it->second.size(-1)}));
    }
    return map_to_zoo(vit_keys(vit_options_of(spec)), in);
  };
  a.to_hf = [](const StateDict& zoo, const ModelSpec& spec) {
    const VitOptions& o = vit_options_of(spec);
    StateDict out = map_to_hf(vit_keys(o), zoo);
    out.at(kCls) = out.at(kCls).view({1, 1, -1});
    out.at(kPositions) = cls_row_first(out.at(kPositions)).unsqueeze(0);
    torch::Tensor& patches = out.at(kPatches);
    if (patches.dim() == 2)  // patchify + linear over (row, column, channel) -> the conv HF holds
      patches = patches.view({o.hidden_size, o.patch_size[0], o.patch_size[1], o.num_channels})
                    .permute({0, 3, 1, 2})
                    .contiguous();
    return out;
  };
  // Fine-tuning reads ImageNet-style folders, resized and normalized as HF's ViTImageProcessor does.
  a.input_from_hf = [](const nlohmann::json& c, const YAML::Node&, const std::string&) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = "ImageNet1KProcessor";
    in["split"] = "train";
    YAML::Node resize, to_tensor, normalize;
    resize["name"] = "resize";
    resize["size"] =
        std::vector<int64_t>{square_or_pair(c, "image_size", 0, 224), square_or_pair(c, "image_size", 1, 224)};
    to_tensor["name"] = "to_tensor";
    normalize["name"] = "normalize";
    normalize["mean"] = std::vector<double>{0.5, 0.5, 0.5};
    normalize["std"] = std::vector<double>{0.5, 0.5, 0.5};
    in["transforms"].push_back(resize);
    in["transforms"].push_back(to_tensor);
    in["transforms"].push_back(normalize);
    return in;
  };
  return a;
}

}  // namespace zoo::models
