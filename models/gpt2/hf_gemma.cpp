// Hugging Face's Gemma and Gemma 2 <-> zoo's gpt2 family (modelzoo's gemma2
// model is its gpt2 model). Gemma is LLaMA's layout with three differences
// the map and config carry:
//   - its RMSNorm scales by (1 + weight): the map stores HF's weight + 1;
//   - the embeddings are multiplied by sqrt(hidden_size): embeddings_scale;
//   - the FFN gates with GELU's tanh approximation (gelu_pytorch_tanh): zoo's geglu_tanh.
// Gemma 2 adds norms after attention and FFN (norm_first_sandwich), logit
// softcapping, a sliding window on every other layer starting with layer 0,
// and query_pre_attn_scalar in place of the head size in the attention scale
// (attention_logits_alpha = sqrt(head_dim / query_pre_attn_scalar), as
// modelzoo's 27B config writes it).
//
// Differences from modelzoo's gemma2 converter (documented in README.md):
// it maps gelu_pytorch_tanh to geglu (exact GELU) and leaves embeddings_scale,
// query_pre_attn_scalar and the window pattern to the user's params (its
// default pattern windows layers 1, 3, ...); zoo carries all four, so the
// converted model computes HF's logits.
#include <cmath>

#include "models/gpt2/hf_adapter.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

// Gemma's RMSNorm weight is stored as (scale - 1).
constexpr double kNormOffset = 1.0;

// HF's gated activation names <-> zoo's gated nonlinearities.
const std::vector<std::pair<std::string, std::string>> kGatedActivations = {{"gelu_pytorch_tanh", "geglu_tanh"},
                                                                            {"gelu_new", "geglu_tanh"},
                                                                            {"gelu", "geglu"},
                                                                            {"silu", "swiglu"},
                                                                            {"relu", "reglu"}};

std::string zoo_gated(const nlohmann::json& c, const std::string& key, const std::string& name) {
  for (const auto& [hf, zoo] : kGatedActivations)
    if (hf == name) return zoo;
  refuse_config(c, key, "is not an activation zoo gates its FFN with");
}

std::string hf_gated(const std::string& model_type, const std::string& nonlinearity) {
  for (const auto& [hf, zoo] : kGatedActivations)
    if (zoo == nonlinearity) return hf;  // geglu_tanh: gelu_pytorch_tanh, the first listed
  ExportCheck(model_type).expect(false, "nonlinearity", nonlinearity, "gates its FFN with gelu, silu or relu");
  return "";
}

// Gemma 2's windowed layers: HF windows layers 0, 2, ... (transformers 5
// writes them as layer_types). The pattern as modelzoo's key.
std::string window_pattern(const nlohmann::json& c, int64_t layers) {
  if (!c.contains("layer_types") || c.at("layer_types").is_null()) return "sliding_window_first";
  const nlohmann::json& types = c.at("layer_types");
  for (const std::string first : {"sliding_attention", "full_attention"}) {
    bool matches = types.is_array() && int64_t(types.size()) == layers;
    for (int64_t i = 0; matches && i < layers; ++i)
      matches = types[i] == ((i % 2 == 0) == (first == "sliding_attention") ? "sliding_attention" : "full_attention");
    if (matches) return first == "sliding_attention" ? "sliding_window_first" : "full_attention_first";
  }
  refuse_config(c, "layer_types", "does not alternate sliding and full attention, which zoo's decoders do");
}

YAML::Node gemma_from_hf(const nlohmann::json& c, bool gemma2) {
  for (const char* key : {"mlp_bias", "use_bidirectional_attention"})
    if (config_sets(c, key)) refuse_config(c, key, "changes the model's math and zoo cannot represent it");
  // Fields config.json may leave out are taken at HF's defaults (Gemma2Config's and GemmaConfig's: head_dim 256).
  YAML::Node m = llama_shape(c, gemma2 ? "gemma2" : "llama", 256);
  const int64_t head_dim = m["rotary_dim"].as<int64_t>();
  // hidden_activation; when null, HF's Gemma (transformers 4.40+) ignores hidden_act (gemma-7b's says exact
  // gelu) and gates with gelu_pytorch_tanh, as Gemma was trained.
  const std::string activation =
      config_sets(c, "hidden_activation") ? c.at("hidden_activation").get<std::string>() : "gelu_pytorch_tanh";
  m["nonlinearity"] = zoo_gated(c, "hidden_activation", activation);
  m["embeddings_scale"] = std::sqrt(double(m["hidden_size"].as<int64_t>()));
  m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
  const bool attention_bias = c.value("attention_bias", false);
  m["use_projection_bias_in_attention"] = attention_bias;
  m["use_ffn_bias_in_attention"] = attention_bias;
  m["attention_dropout_rate"] = c.value("attention_dropout", 0.0);
  if (!gemma2) return m;
  m["norm_first_sandwich"] = true;
  const double query_scalar = config_get<double>(c, {"query_pre_attn_scalar"}, 224);
  if (query_scalar != double(head_dim)) m["attention_logits_alpha"] = std::sqrt(head_dim / query_scalar);
  // Absent: HF's default; null: no capping (and no window).
  const auto absent_or_set = [&](const char* key) { return !c.contains(key) || !c.at(key).is_null(); };
  if (absent_or_set("attn_logit_softcapping"))
    m["attention_logit_softcapping"] = config_get<double>(c, {"attn_logit_softcapping"}, 50.0);
  if (absent_or_set("final_logit_softcapping"))
    m["final_logit_softcapping"] = config_get<double>(c, {"final_logit_softcapping"}, 30.0);
  if (absent_or_set("sliding_window")) {
    m["attention_sliding_window_length"] = config_get<int64_t>(c, {"sliding_window"}, 4096);
    m["sliding_window_every_other_decoder_layer"] = true;
    m["sliding_window_every_other_decoder_layer_pattern"] = window_pattern(c, m["num_hidden_layers"].as<int64_t>());
  }
  return m;
}

nlohmann::json gemma_to_hf(const ModelSpec& model, const std::string& model_type) {
  const Gpt2Options& o = gpt2_options_of(model);
  const bool gemma2 = model_type == "gemma2";
  refuse_unrepresentable(o, model_type,
                         HfHas{.learned_positions = false,
                               .rotary = true,
                               .gated_ffn = true,
                               .rms_norm = true,
                               .rope_scaling = true,
                               .head_dim = true,
                               .embeddings_scale = true,
                               .gemma2 = gemma2});
  const double sqrt_width = std::sqrt(double(o.hidden_size));
  const ExportCheck check(model_type);
  // modelzoo's configs write the scale to 7 decimals (59.8665181 for 3584).
  check
      .expect(std::abs(o.embeddings_scale / sqrt_width - 1.0) < 1e-6, "embeddings_scale",
              std::to_string(o.embeddings_scale),
              "scales the embeddings by sqrt(hidden_size) = " + std::to_string(sqrt_width))
      .expect(o.use_projection_bias_in_attention == o.use_ffn_bias_in_attention, "use_*bias_in_attention", "differing",
              "has one attention_bias for q, k, v and o")
      .expect(!o.use_ffn_bias && !o.use_bias_in_output, "use_ffn_bias / use_bias_in_output", "true",
              "has no FFN or LM head biases")
      .expect(!o.moe.enabled(), "moe", "set", "has no experts");
  nlohmann::json config = llama_config(o, model_type, gemma2 ? "Gemma2ForCausalLM" : "GemmaForCausalLM");
  config["hidden_activation"] = hf_gated(model_type, o.nonlinearity);
  config["attention_bias"] = o.use_projection_bias_in_attention;
  config["attention_dropout"] = o.attention_dropout_rate.value_or(0.0);
  if (!gemma2) {
    check.expect(!o.attention_sliding_window_length, "attention_sliding_window_length",
                 std::to_string(o.attention_sliding_window_length.value_or(0)), "has no sliding window (gemma2 has)");
    config["hidden_act"] = config["hidden_activation"];
    return config;
  }
  check.expect(o.norm_first_sandwich, "norm_first_sandwich", "false", "normalizes the attention and FFN outputs")
      .expect(!o.attention_sliding_window_length || o.sliding_window_every_other_decoder_layer,
              "sliding_window_every_other_decoder_layer", "false", "windows every other layer only");
  // query_pre_attn_scalar: an integer in every published config; kept exact when alpha gives one.
  const double query_scalar = qkv_shape(o).head_dim / (o.attention_logits_alpha * o.attention_logits_alpha);
  const double rounded = std::round(query_scalar);
  config["query_pre_attn_scalar"] = std::abs(query_scalar - rounded) < 1e-6 * rounded ? nlohmann::json(int64_t(rounded))
                                                                                      : nlohmann::json(query_scalar);
  config["attn_logit_softcapping"] =
      o.attention_logit_softcapping ? nlohmann::json(*o.attention_logit_softcapping) : nullptr;
  config["final_logit_softcapping"] = o.final_logit_softcapping ? nlohmann::json(*o.final_logit_softcapping) : nullptr;
  // layer_types (read by transformers 4.53+) spell out which layers window;
  // older releases window layers 0, 2, ... whatever it says.
  const bool windowed = o.attention_sliding_window_length.has_value();
  const int64_t parity = o.sliding_window_every_other_decoder_layer_pattern == "sliding_window_first" ? 0 : 1;
  config["sliding_window"] = windowed ? nlohmann::json(*o.attention_sliding_window_length) : nlohmann::json(nullptr);
  config["layer_types"] = nlohmann::json::array();
  for (int64_t i = 0; i < o.num_hidden_layers; ++i)
    config["layer_types"].push_back(windowed && i % 2 == parity ? "sliding_attention" : "full_attention");
  return config;
}

HfKeyMap gemma_keys(const Gpt2Options& o) {
  HfKeyMap m = llama_layout(o, kNormOffset);
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".", z = zoo_layer(i);
    map_llama_mlp(m, h, z);
    if (!o.norm_first_sandwich) {  // Gemma: its second norm is before the FFN
      m.norm(h + "post_attention_layernorm", z + "norm3", kNormOffset);
      continue;
    }
    m.norm(h + "post_attention_layernorm", z + "norm1_post", kNormOffset);
    m.norm(h + "pre_feedforward_layernorm", z + "norm3", kNormOffset);
    m.norm(h + "post_feedforward_layernorm", z + "norm3_post", kNormOffset);
  }
  return m;
}

}  // namespace

HfAdapter gemma_hf_adapter(const std::string& model_type) {
  HfAdapter a;
  a.model_types = {model_type};
  const bool gemma2 = model_type == "gemma2";
  a.config_from_hf = [gemma2](const nlohmann::json& c) { return gemma_from_hf(c, gemma2); };
  a.config_to_hf = [model_type](const ModelSpec& model) { return gemma_to_hf(model, model_type); };
  return key_mapped(a, gpt2_options_of, gemma_keys);
}

}  // namespace zoo::models
