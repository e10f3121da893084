// Implementation of models/llava/hf_adapter.h. HF's CLIP differs from
// modelzoo's ViTModel in three tensors: class_embedding is [CLS]'s
// embedding, the position table holds [CLS] first (modelzoo: last), and
// pre_layrnorm is the post-embedding norm. HF picks the image features from
// hidden_states[vision_feature_layer], where entry 0 is the embeddings and
// entry j the output of layer j - 1: zoo's image_feature_select_layer_idx k
// is entry k + 1. Checkpoints are read in HF's Hub layout
// (language_model.model.*, language_model.lm_head) and in the layout of
// transformers 4.52+ (model.language_model.*, lm_head); they are written in
// the Hub layout, which both load.
#include "models/llava/hf_adapter.h"

#include "models/common/multimodal_towers.h"
#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"
#include "models/llava/llava.h"
#include "models/multimodal_simple/multimodal_simple.h"

namespace zoo::models {
namespace {

const char* const kVision = "vision_tower.vision_model.";
const char* const kProjector = "multi_modal_projector.";
const char* const kText = "language_model.";  // + LlamaForCausalLM's keys

// Where a zoo family keeps the tower, the projector and the decoder, and
// the names of their model keys, for messages.
struct ZooLayout {
  std::string tower, projector, text;  // key prefixes
  std::string tower_key, projector_key;
};
const ZooLayout kLlava{"image_model.", "projector_image_model.", "text_model.", "image_model", "projector.image_model"};
const ZooLayout kMultimodalSimple{"image_model.image_model_list.0.0.", "image_model.projection.", "text_model.",
                                  "image_model_list.image_models[0].image_encoder",
                                  "image_model_list.global_image_projection"};

// What HF's LLaVA holds, read off either family's spec.
struct LlavaShape {
  const VitOptions& image;
  int64_t layer;  // 0-based: the features are this layer's output
  bool patch;     // [CLS] dropped
  const ProjectorOptions* projector;
  const ModelSpec& text;
};

LlavaShape llava_shape(const ModelSpec& spec) {
  const LlavaParts p = llava_parts(spec);
  ExportCheck("llava").expect(!p.options.projector || !p.options.projector->text_model, "projector.text_model", "set",
                              "has no projector on the text embeddings");
  return {p.image, layer_from_end(p.options.image_feature_select_layer_idx, p.image.num_hidden_layers),
          p.options.image_feature_select_mode == "patch",
          p.options.projector && p.options.projector->image_model ? &*p.options.projector->image_model : nullptr,
          p.text};
}

LlavaShape multimodal_simple_shape(const ModelSpec& spec) {
  const MultimodalSimpleParts p = multimodal_simple_parts(spec);
  const ExportCheck check("llava");
  check.expect(p.towers.size() == 1, "image_model_list.image_models", std::to_string(p.towers.size()) + " towers",
               "has one vision tower");
  const ImageTowerSpec& tower = p.towers.front();
  check.expect(!tower.projection, "image_model_list.image_models[0].projection_layer", "set",
               "projects the tower's features once (global_image_projection)");
  check.expect(tower.layer.has_value(), "image_model_list.image_models[0].image_encoder.image_layer_idx", "null",
               "takes a layer's output, never the final norm's");
  return {tower.encoder, *tower.layer, p.list.image_feature_select_mode == "patch",
          p.list.global_image_projection ? &*p.list.global_image_projection : nullptr, p.text};
}

// HF's defaults for what a config.json leaves out (CLIPVisionConfig as
// LlavaConfig builds it, LlamaConfig, LlavaConfig).
nlohmann::json with_defaults(nlohmann::json given, const nlohmann::json& defaults) {
  for (const auto& [key, value] : defaults.items())
    if (!given.contains(key) || given.at(key).is_null()) given[key] = value;
  return given;
}
const nlohmann::json kClipVisionDefaults = {{"model_type", "clip_vision_model"},
                                            {"hidden_size", 1024},
                                            {"intermediate_size", 4096},
                                            {"num_hidden_layers", 24},
                                            {"num_attention_heads", 16},
                                            {"num_channels", 3},
                                            {"image_size", 336},
                                            {"patch_size", 14},
                                            {"hidden_act", "quick_gelu"},
                                            {"layer_norm_eps", 1e-5},
                                            {"attention_dropout", 0.0},
                                            {"initializer_range", 0.02}};
const nlohmann::json kLlamaDefaults = {
    {"model_type", "llama"},           {"vocab_size", 32000},     {"hidden_size", 4096},
    {"intermediate_size", 11008},      {"num_hidden_layers", 32}, {"num_attention_heads", 32},
    {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6},    {"initializer_range", 0.02}};

const HfAdapter& text_converter(const std::string& model_type) {
  if (model_type != "llama" && model_type != "mistral")
    throw std::runtime_error("config.json: text_config.model_type = \"" + model_type +
                             "\": zoo converts LLaVA with a llama or mistral language model");
  return find_hf_converter(model_type);
}

// The image feature's layer: config.json's vision_feature_layer (an entry of
// hidden_states) as zoo's 0-based layer (hf_llava_config writes it back).
int64_t feature_layer_from_hf(const nlohmann::json& c, int64_t layers) {
  const nlohmann::json& v = c.at("vision_feature_layer");
  if (!v.is_number_integer())
    refuse_config(c, "vision_feature_layer", "joins several layers' features, which zoo's llava does not");
  const int64_t entry = v.get<int64_t>() < 0 ? v.get<int64_t>() + layers + 1 : v.get<int64_t>();
  if (entry < 1 || entry > layers)
    refuse_config(c, "vision_feature_layer", "is not the output of one of the vision tower's layers");
  return entry - 1;
}

// config.json read into the parts both zoo families are made of.
struct HfLlavaConfig {
  YAML::Node image, text, projector;
  int64_t layer = 0;  // 0-based
  bool patch = true;
};

HfLlavaConfig read_llava_config(const nlohmann::json& given) {
  const nlohmann::json c = with_defaults(given, {{"vision_feature_layer", -2},
                                                 {"vision_feature_select_strategy", "default"},
                                                 {"projector_hidden_act", "gelu"},
                                                 {"multimodal_projector_bias", true}});
  const nlohmann::json v = with_defaults(c.value("vision_config", nlohmann::json::object()), kClipVisionDefaults);
  const nlohmann::json t = with_defaults(c.value("text_config", nlohmann::json::object()), kLlamaDefaults);
  if (v.at("model_type") != "clip_vision_model")
    refuse_config(v, "model_type", "is not CLIP's vision tower, the one zoo's llava converts", "vision_config");
  const std::string strategy = c.at("vision_feature_select_strategy").get<std::string>();
  if (strategy != "default" && strategy != "full")
    refuse_config(c, "vision_feature_select_strategy", "is neither default nor full");

  HfLlavaConfig out;
  YAML::Node image(YAML::NodeType::Map);
  image["name"] = "ViTModel";
  const int64_t width = v.at("hidden_size").get<int64_t>(), layers = v.at("num_hidden_layers").get<int64_t>();
  image["hidden_size"] = width;
  image["num_hidden_layers"] = layers;
  image["num_heads"] = v.at("num_attention_heads").get<int64_t>();
  image["filter_size"] = v.at("intermediate_size").get<int64_t>();
  image["image_size"] = std::vector<int64_t>(2, v.at("image_size").get<int64_t>());
  image["patch_size"] = std::vector<int64_t>(2, v.at("patch_size").get<int64_t>());
  image["num_channels"] = v.at("num_channels").get<int64_t>();
  image["nonlinearity"] = zoo_activation(v, "hidden_act", "quick_gelu");
  image["layer_norm_epsilon"] = v.at("layer_norm_eps").get<double>();
  image["attention_dropout_rate"] = v.at("attention_dropout").get<double>();
  image["dropout_rate"] = 0.0;
  image["initializer_range"] = v.at("initializer_range").get<double>();
  image["position_embedding_type"] = "learned";
  image["use_conv_patchified_embedding"] = true;
  image["use_embed_proj_bias"] = false;
  image["use_post_embed_layer_norm"] = true;
  image["prepend_cls_token"] = true;
  image["norm_first"] = true;
  image["use_final_layer_norm"] = true;
  out.image = image;

  const std::string text_type = t.at("model_type").get<std::string>();
  YAML::Node text = text_converter(text_type).config_from_hf(t);
  if (text_type == "llama") text["name"] = "LlamaModel";  // modelzoo's LLaVA files' name
  out.text = text;

  YAML::Node projector(YAML::NodeType::Map);
  projector["name"] = "FeedForwardNetwork";
  projector["input_unit"] = width;
  const int64_t text_width = t.at("hidden_size").get<int64_t>();
  projector["layers_units"] = std::vector<int64_t>{text_width, text_width};
  projector["layers_activation"].push_back(zoo_activation(c, "projector_hidden_act", "gelu"));
  projector["layers_activation"].push_back(YAML::Node(YAML::NodeType::Null));
  projector["use_bias"] = c.at("multimodal_projector_bias").get<bool>();
  out.projector = projector;
  out.layer = feature_layer_from_hf(c, layers);
  out.patch = strategy == "default";
  return out;
}

YAML::Node llava_model(const nlohmann::json& given) {
  const HfLlavaConfig c = read_llava_config(given);
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = "llava";
  m["image_model"] = c.image;
  m["text_model"] = c.text;
  m["projector"]["image_model"] = c.projector;
  m["image_feature_select_layer_idx"] = c.layer;
  m["image_feature_select_mode"] = c.patch ? "patch" : "cls_patch";
  // HF puts the features at the prompt's <image> tokens; modelzoo's data
  // and model at a fixed position, after the BOS token in its LLaVA files.
  m["image_start_idx"] = 1;
  m["loss_scaling"] = "num_tokens";
  m["loss_weight"] = 1.0;
  return m;
}

// multimodal_simple's layout: one tower, the projector as the global image
// projection; the data says where the features go.
YAML::Node multimodal_simple_model(const nlohmann::json& given) {
  const HfLlavaConfig c = read_llava_config(given);
  YAML::Node m(YAML::NodeType::Map), encoder = YAML::Clone(c.image), tower(YAML::NodeType::Map);
  m["name"] = "multimodal_simple";
  encoder["image_layer_idx"] = c.layer;
  tower["image_encoder"] = encoder;
  m["image_model_list"]["image_feature_select_mode"] = c.patch ? "patch" : "cls_patch";
  m["image_model_list"]["image_models"].push_back(tower);
  m["image_model_list"]["global_image_projection"] = c.projector;
  m["text_model"] = c.text;
  m["loss_scaling"] = "num_tokens";
  m["loss_weight"] = 1.0;
  return m;
}

nlohmann::json hf_llava_config(const LlavaShape& p, const ZooLayout& zoo) {
  const VitOptions& v = p.image;
  const ExportCheck check("llava");
  const ProjectorOptions* projector = p.projector;
  const auto& activations = projector ? projector->layers_activation : std::nullopt;
  check.expect(
      projector && projector->layers_units.size() == 2 && activations && (*activations)[0] && !(*activations)[1],
      zoo.projector_key, "not two layers with an activation between them",
      "projects with linear_1, an activation and linear_2");
  const std::string t = zoo.tower_key + ".";
  check
      .expect(v.use_post_embed_layer_norm && v.use_conv_patchified_embedding && !v.use_embed_proj_bias,
              t + "use_post_embed_layer_norm", "false",
              "is CLIP's tower: a norm on the embeddings, a conv patch embedding without bias")
      .expect(v.prepend_cls_token && v.position_embedding_type == std::optional<std::string>("learned"),
              t + "position_embedding_type", v.position_embedding_type.value_or("null"),
              "has a [CLS] token and learned positions")
      .expect(v.norm_first && v.use_final_layer_norm && !v.use_encoder_pooler_layer, t + "norm_first", "false",
              "normalizes before attention and the FFN, and after the last layer, with no pooler")
      .expect(v.use_projection_bias_in_attention && v.use_ffn_bias_in_attention && v.use_ffn_bias, t + "use_ffn_bias",
              "false", "has every bias in its layers")
      .expect(!v.layerscale_value, t + "layerscale_value", std::to_string(v.layerscale_value.value_or(0)),
              "has no layer scale")
      .expect(v.image_size[0] == v.image_size[1] && v.patch_size[0] == v.patch_size[1], t + "image_size", "not square",
              "takes square images in square patches");
  const int64_t layers = v.num_hidden_layers, k = p.layer;
  nlohmann::json text = find_hf_converter("llama").config_to_hf(p.text);
  nlohmann::json vision{{"model_type", "clip_vision_model"},
                        {"hidden_size", v.hidden_size},
                        {"intermediate_size", v.filter_size},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", v.num_heads},
                        {"num_channels", v.num_channels},
                        {"image_size", v.image_size[0]},
                        {"patch_size", v.patch_size[0]},
                        {"hidden_act", v.nonlinearity},
                        {"layer_norm_eps", v.layer_norm_epsilon},
                        {"attention_dropout", v.attention_dropout_rate},
                        {"initializer_range", v.initializer_range}};
  const int64_t patches = tower_features(v, p.patch);
  return {{"model_type", "llava"},
          {"architectures", {"LlavaForConditionalGeneration"}},
          {"vision_config", vision},
          {"text_config", text},
          {"projector_hidden_act", *(*activations)[0]},
          {"multimodal_projector_bias", projector->use_bias},
          {"vision_feature_layer", k - layers},  // hidden_states[k + 1], counted from the end
          {"vision_feature_select_strategy", p.patch ? "default" : "full"},
          {"image_seq_length", patches},
          {"tie_word_embeddings", text.value("tie_word_embeddings", false)}};
}

// The vision tower and projector: HF's CLIP keys <-> zoo's, under `zoo`'s prefixes.
HfKeyMap vision_keys(const VitOptions& o, const ZooLayout& zoo) {
  HfKeyMap m;
  const std::string e = zoo.tower + "embedding_layer.", enc = zoo.tower + "encoder.transformer_encoder.";
  const std::string h = kVision;
  m.tensors.push_back({h + "embeddings.class_embedding", e + "cls_embedding"});
  m.tensors.push_back({h + "embeddings.position_embedding.weight", e + "position_embeddings.weight"});
  m.tensors.push_back({h + "embeddings.patch_embedding.weight", e + "linear_proj.weight"});
  m.norm(h + "pre_layrnorm", e + "post_embed_ln");  // HF's spelling
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string hl = h + "encoder.layers." + std::to_string(i) + ".",
                      zl = enc + "layers." + std::to_string(i) + ".";
    for (const char* p : {"q", "k", "v"})
      m.linear(hl + "self_attn." + p + "_proj", zl + "self_attn.proj_" + p + "_dense_layer");
    m.linear(hl + "self_attn.out_proj", zl + "self_attn.proj_output_dense_layer");
    m.norm(hl + "layer_norm1", zl + "norm1");
    m.linear(hl + "mlp.fc1", zl + "ffn.ffn.0.linear_layer");
    m.linear(hl + "mlp.fc2", zl + "ffn.ffn.1.linear_layer");
    m.norm(hl + "layer_norm2", zl + "norm2");
  }
  m.norm(h + "post_layernorm", enc + "norm");
  m.linear(std::string(kProjector) + "linear_1", zoo.projector + "ffn.0.linear_layer");
  m.linear(std::string(kProjector) + "linear_2", zoo.projector + "ffn.1.linear_layer");
  m.hf_buffers = {"embeddings.position_ids"};
  return m;
}

// transformers 4.52+'s layout in the Hub's: model.language_model.* ->
// language_model.model.*, model.vision_tower / model.multi_modal_projector
// -> without "model.", lm_head -> language_model.lm_head.
StateDict hub_layout(const StateDict& hf) {
  StateDict out;
  for (const auto& [key, tensor] : hf) {
    std::string k = key;
    if (k.rfind("model.language_model.", 0) == 0) k = "language_model.model." + k.substr(21);
    else if (k.rfind("model.vision_tower.", 0) == 0 || k.rfind("model.multi_modal_projector.", 0) == 0) k = k.substr(6);
    else if (k.rfind("lm_head.", 0) == 0) k = "language_model." + k;
    out[k] = tensor;
  }
  return out;
}

// The converter for one zoo layout: `shape` reads a spec of its family,
// `model` writes its model section, `input` its data section.
HfAdapter llava_like_adapter(const ZooLayout& zoo, LlavaShape (*shape)(const ModelSpec&),
                             YAML::Node (*model)(const nlohmann::json&), const std::string& data) {
  HfAdapter a;
  a.model_types = {"llava"};
  a.config_from_hf = model;
  a.config_to_hf = [zoo, shape](const ModelSpec& spec) { return hf_llava_config(shape(spec), zoo); };
  a.from_hf = [zoo, shape](const StateDict& given, const ModelSpec& spec) {
    const LlavaShape p = shape(spec);
    StateDict vision, text;
    for (const auto& [key, tensor] : hub_layout(given)) {
      if (key.rfind(kText, 0) == 0) text[key.substr(std::string(kText).size())] = tensor;
      else vision[key] = tensor;
    }
    const std::string positions = std::string(kVision) + "embeddings.position_embedding.weight";
    if (auto it = vision.find(positions); it != vision.end()) it->second = cls_row_last(it->second);
    StateDict out = map_to_zoo(vision_keys(p.image, zoo), vision);
    for (auto& [key, tensor] : find_hf_converter("llama").from_hf(text, p.text)) out[zoo.text + key] = tensor;
    return out;
  };
  a.to_hf = [zoo, shape](const StateDict& weights, const ModelSpec& spec) {
    const LlavaShape p = shape(spec);
    StateDict vision, text;
    for (const auto& [key, tensor] : weights) {
      if (key.rfind(zoo.text, 0) == 0) text[key.substr(zoo.text.size())] = tensor;
      else vision[key] = tensor;
    }
    StateDict out = map_to_hf(vision_keys(p.image, zoo), vision);
    torch::Tensor& positions = out.at(std::string(kVision) + "embeddings.position_embedding.weight");
    positions = cls_row_first(positions);
    for (auto& [key, tensor] : find_hf_converter("llama").to_hf(text, p.text)) out[kText + key] = tensor;
    return out;
  };
  // Fine-tuning reads modelzoo's samples, the images prepared as LLaVA-1.5's CLIP processor does.
  a.input_from_hf = [data](const nlohmann::json& c, const YAML::Node&, const std::string&) {
    const std::string size =
        std::to_string(with_defaults(c.value("vision_config", nlohmann::json::object()), kClipVisionDefaults)
                           .at("image_size")
                           .get<int64_t>());
    return YAML::Load("{data_processor: " + data + ", img_data_dir: ./images, image_data_size: [3, " + size + ", " +
                      size +
                      "], transforms: [{name: expand_to_square, background_color: [122, 116, 104]}, {name: "
                      "resize, size: " +
                      size + ", interpolation: bicubic}, {name: center_crop, size: " + size +
                      "}, {name: to_tensor}, {name: normalize, mean: [0.48145466, 0.4578275, 0.40821073], std: "
                      "[0.26862954, 0.26130258, 0.27577711]}]}");
  };
  return a;
}

}  // namespace

HfAdapter llava_hf_adapter() {
  return llava_like_adapter(kLlava, llava_shape, llava_model, "LlavaHDF5MapDataProcessor");
}

HfAdapter mmsimple_llava_hf_adapter() {
  HfAdapter a = llava_like_adapter(kMultimodalSimple, multimodal_simple_shape, multimodal_simple_model,
                                   "MultimodalSimpleHDF5MapDataProcessor");
  // model_type llava picks the llava family's converter; this one by name (--model mmsimple-llava).
  a.claims = [](const nlohmann::json&) { return false; };
  return a;
}

}  // namespace zoo::models
